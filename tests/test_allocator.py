"""glibc's heap as appendix 90 describes it, with plain malloc and free in a new process.

Each case runs in a process of its own: a process's thresholds change as it runs, and no mallopt call
brings glibc's adjustment back once a setting has switched it off. The script loads
extending_pytorch/benchmarking.py by its path, so the new process does not import torch.
"""

from __future__ import annotations

import json
import mmap
import pathlib
import platform
import subprocess
import sys

import pytest

from extending_pytorch.benchmarking import GLIBC_TOP_PAD

pytestmark = [
    pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"),
    pytest.mark.same_on_every_torch,  # glibc's behaviour, whatever torch
]

BENCHMARKING = pathlib.Path(__file__).resolve().parents[1] / "extensions" / "extending_pytorch" / "benchmarking.py"

SCRIPT = """
import ctypes, importlib.util, json, sys

spec = importlib.util.spec_from_file_location("benchmarking", sys.argv[1])
benchmarking = importlib.util.module_from_spec(spec)
spec.loader.exec_module(benchmarking)
settings = {
    "default": lambda: True,
    "keep_freed_memory": benchmarking.keep_freed_memory,
    "keep_freed_memory(1 << 31)": lambda: benchmarking.keep_freed_memory(1 << 31),
    "keep_freed_memory(1 << 32)": lambda: benchmarking.keep_freed_memory(1 << 32),
    "return_freed_memory": benchmarking.return_freed_memory,
}
applied = settings[sys.argv[2]]()

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


MiB = 1 << 20
libc.free(libc.malloc(8 * MiB))  # by default: mapped, unmapped, and both thresholds raised
start = libc.sbrk(0)
first, second = libc.malloc(8 * MiB), libc.malloc(8 * MiB)
grown = libc.sbrk(0)
libc.free(first)
libc.free(second)
freed = libc.sbrk(0)
top = None
if hasattr(libc, "mallinfo2"):  # glibc 2.33 and later
    libc.mallinfo2.restype = MallInfo2
    top = libc.mallinfo2().keepcost  # the free space at the end of the heap
print(json.dumps({"applied": applied, "grown": (grown - start) / MiB, "freed": (freed - start) / MiB, "top": top}))
"""


def heap_steps(setting):
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(BENCHMARKING), setting],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    steps = json.loads(run.stdout)
    assert steps["applied"] is True
    return steps


def test_by_default_two_blocks_freed_at_the_end_of_the_heap_are_trimmed_but_the_pad():
    steps = heap_steps("default")
    # After the first 8 MiB block was unmapped, the next ones come from the heap...
    assert steps["grown"] == pytest.approx(16, abs=0.5), steps
    # ...which free() shrinks again: the trim threshold is twice the mmap threshold, less than 16 MiB and the pad.
    assert steps["freed"] == pytest.approx(0, abs=0.5), steps
    if steps["top"] is not None:
        # A trimmed heap keeps M_TOP_PAD free at its end, and less than a page more: the pages that do not fault again.
        assert GLIBC_TOP_PAD <= steps["top"] < GLIBC_TOP_PAD + mmap.PAGESIZE + 64, steps


def test_keep_freed_memory_takes_the_blocks_from_the_heap_and_keeps_them():
    steps = heap_steps("keep_freed_memory")
    # The first block reuses the 8 MiB that the script freed before it (from the heap too), the second grows it...
    assert steps["grown"] == pytest.approx(8, abs=0.5), steps
    # ...and freeing both hands nothing back.
    assert steps["freed"] == steps["grown"], steps


@pytest.mark.parametrize("limit", ["1 << 31", "1 << 32"])
def test_keep_freed_memory_above_what_mallopt_takes_still_keeps_the_blocks(limit):
    # mallopt takes a C int. Passed through unchecked, 1 << 31 set the mmap threshold to -2**31 (huge) and the
    # trim threshold (2**32) to 0: every free at the end of the heap trimmed it. 1 << 32 set the mmap threshold
    # to 0: every block mapped. Both are clamped to 2**31 - 1 now.
    steps = heap_steps(f"keep_freed_memory({limit})")
    assert steps["grown"] == pytest.approx(8, abs=0.5), steps
    assert steps["freed"] == steps["grown"], steps


def test_return_freed_memory_maps_every_block_outside_the_heap():
    steps = heap_steps("return_freed_memory")
    assert steps["grown"] == pytest.approx(0, abs=0.5), steps
    assert steps["freed"] == pytest.approx(0, abs=0.5), steps
