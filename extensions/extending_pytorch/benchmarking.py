"""Helpers for honest CPU timings, shared by the chapters that measure."""

from __future__ import annotations

import ctypes
import sys

# mallopt(3) parameter numbers, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Let glibc's malloc keep freed blocks instead of unmapping them.

    By default glibc serves a large allocation (a tensor of a few MiB) with a
    fresh mmap and unmaps it on free, so every new tensor of that size
    page-faults on first touch. In a loop of tensor ops that cost can exceed
    the ops themselves and swamp a comparison. Raising the mmap and trim
    thresholds to `limit_bytes` makes freed memory reusable, as a caching
    allocator would.

    Returns True when the setting was applied (Linux with glibc), else False.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, for example)
        return False
    # Older glibc caps the mmap threshold at 32 MiB: fall back to that cap.
    for limit in (limit_bytes, 32 << 20):
        if mallopt(_M_MMAP_THRESHOLD, limit) and mallopt(
            _M_TRIM_THRESHOLD, 2 * limit
        ):
            return True
    return False


def timed(
    stmt: str,
    names: dict,
    *,
    label: str = "",
    sub_label: str = "",
    description: str = "",
    min_run_time: float = 0.5,
    warmup: int = 3,
    num_threads: int = 1,
):
    """Median timing of `stmt` with torch.utils.benchmark, after warm-up.

    `names` are the globals `stmt` uses; `num_threads` the number of threads
    torch may use while timing (one by default, as in torch.utils.benchmark).
    The `warmup` runs come first and are
    discarded: the first calls at a new size pay for growing the heap,
    touching fresh pages and lazy initialisation, and at large sizes they
    can take ten times longer than the steady state. Returns a
    `torch.utils.benchmark.Measurement` (use `.median`, in seconds).
    """
    from torch.utils import benchmark

    timer = benchmark.Timer(
        stmt,
        globals=names,
        label=label,
        sub_label=sub_label,
        description=description,
        num_threads=num_threads,
    )
    timer.timeit(warmup)
    return timer.blocked_autorange(min_run_time=min_run_time)
