"""Helpers for honest CPU timings, shared by the chapters that measure."""

from __future__ import annotations

import ctypes
import platform
import statistics
import sys

# mallopt(3) parameter numbers, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


# glibc's initial thresholds (`man 3 mallopt`), the same for both: a block of
# 128 KiB or more is mapped fresh (M_MMAP_THRESHOLD), and free() shrinks the
# heap when 128 KiB or more at its top are free (M_TRIM_THRESHOLD). glibc
# adjusts both as the process runs, unless either is set.
GLIBC_DEFAULT_THRESHOLD = 128 * 1024
# What a trimmed heap keeps free at its top, and grows by beyond a request
# when it needs more (M_TOP_PAD, 128 KiB by default).
GLIBC_TOP_PAD = 128 * 1024


# mallopt(3) takes its value as a C int: the largest threshold it can set.
MALLOPT_MAX = 2**31 - 1


def _set_malloc_thresholds(mmap_bytes: int, trim_bytes: int) -> bool:
    """mallopt(3) both thresholds; False where malloc is not glibc's."""
    for name, value in (("mmap_bytes", mmap_bytes), ("trim_bytes", trim_bytes)):
        # Without this check a larger value would wrap around in the C int
        # (2**31 arrives as -2**31) and set something else entirely.
        if not 0 <= value <= MALLOPT_MAX:
            raise ValueError(
                f"{name} must be in [0, 2**31 - 1] (mallopt takes a C int), got {value}"
            )
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, for example)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, mmap_bytes)
        and mallopt(_M_TRIM_THRESHOLD, trim_bytes)
    )


def keep_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Let glibc's malloc keep freed blocks instead of handing them back.

    glibc starts by serving each allocation of 128 KiB or more (a tensor of a
    few MiB) with a fresh mmap and unmapping it on free, so every new tensor
    of that size page-faults on first touch. After such a block is freed it
    raises that mmap threshold to the block's size (up to 32 MiB) and its trim
    threshold to twice that, so tensors of that size come from the heap. But
    a large free() still shrinks the heap whenever the free space at its top
    reaches the trim threshold, as when a loop frees its two largest
    temporaries there, and then every call faults their pages in again:
    whether that happens depends on the history and memory layout of the
    process. In a loop of tensor ops the faults can cost more than the ops
    themselves. Setting the mmap threshold to `limit_bytes` and the trim
    threshold to twice that, both at most 2**31 - 1 (mallopt takes a C int:
    a larger `limit_bytes` sets that), makes freed memory reusable in every
    process, as a caching allocator would (setting them also switches glibc's
    own adjustment off). The default sets 1 GiB and 2 GiB less a byte.

    Returns True when the setting was applied (Linux with glibc), else False.
    """
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes must be at least 0, got {limit_bytes}")
    # glibc's own adjustment never raises the mmap threshold above
    # DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit systems). mallopt may set
    # it higher on current glibc (2.36 accepts 1 GiB), but `man 3 mallopt`
    # documents 32 MiB as the upper limit, and a glibc that enforces it
    # refuses a larger value: then fall back to 32 MiB. The trim threshold
    # has no such limit but mallopt's int.
    trim_bytes = min(2 * limit_bytes, MALLOPT_MAX)
    return any(
        _set_malloc_thresholds(min(limit, MALLOPT_MAX), trim_bytes)
        for limit in (limit_bytes, 32 << 20)
    )


def return_freed_memory() -> bool:
    """Pin glibc's malloc at its initial thresholds (the opposite setting).

    Blocks of 128 KiB or more are then always mapped fresh and unmapped on
    free: setting the thresholds switches off the adjustment that
    `keep_freed_memory` describes, so no block ever moves to the heap. This
    is the worst case, the same in every process, where glibc's default
    state pays about as much or nothing, depending on the process. The
    allocator appendix uses it to show the cost on every run. Returns True
    when applied (Linux, glibc).
    """
    return _set_malloc_thresholds(
        GLIBC_DEFAULT_THRESHOLD, GLIBC_DEFAULT_THRESHOLD
    )


def page_faults_per_call(
    fn, calls: int = 20, warmup: int = 10
) -> float | None:
    """Minor page faults (fresh pages touched) per call of `fn()`.

    The `warmup` calls come first and are not counted: after a change of
    malloc settings the heap takes a few calls to settle. None where the
    operating system does not count page faults (Windows).
    """
    try:
        import resource
    except ImportError:
        return None

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    for _ in range(warmup):
        fn()
    before = faults()
    for _ in range(calls):
        fn()
    return (faults() - before) / calls


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
    touching fresh pages and lazy initialisation, which is not the cost
    being measured. Returns a
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


def processor_name() -> str:
    """The processor's model name, as the operating system reports it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine() or "unknown processor"


def machine(num_threads: int = 1, device=None) -> dict:
    """Where a measurement runs: processor or GPU, threads and versions."""
    import torch

    device = torch.device(device or "cpu")
    on_gpu = device.type == "cuda"
    return dict(
        processor=processor_name(),
        device=torch.cuda.get_device_name(device) if on_gpu else "cpu",
        threads=num_threads,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=platform.python_version(),
    )


def describe_machine(machine: dict) -> str:
    """One line saying where a measurement was taken, for a caption."""
    if machine["device"] != "cpu":
        where = f"{machine['device']}, CUDA {machine['cuda']}"
    else:
        threads = machine["threads"]
        plural = "s" if threads != 1 else ""
        where = f"{threads} thread{plural} of {machine['processor']}"
    return f"Measured on {where}, torch {machine['torch']}."


def measured_on(num_threads: int = 1, device=None) -> str:
    """One line saying where this process measures, for a table caption."""
    return describe_machine(machine(num_threads, device))


class Timing(float):
    """Median seconds over interleaved rounds, with the rounds' spread.

    A float (the median), so arithmetic and formatting work as on any number;
    `spread` is (slowest round - fastest round) / median, the run-to-run noise
    of this measurement (0 with a single round), and `rounds` the per-round
    seconds it summarises.
    """

    spread: float
    rounds: tuple

    def __new__(cls, rounds):
        rounds = tuple(float(r) for r in rounds)
        if not rounds:
            raise ValueError("a Timing needs at least one round")
        median = statistics.median(rounds)
        timing = super().__new__(cls, median)
        timing.rounds = rounds
        timing.spread = (max(rounds) - min(rounds)) / median if median > 0 else 0.0
        return timing

    def __reduce__(self):  # pickles (and copies) as a Timing, rounds included
        return (Timing, (self.rounds,))


def compare(
    cases: dict,
    *,
    rounds: int = 3,
    min_run_time: float = 0.2,
    num_threads: int = 1,
) -> dict:
    """Median seconds of each case, over interleaved rounds.

    `cases` maps a key to `(stmt, names)`, as `timed` takes them. Every round
    times each case once with `timed`, and a case's result is the median of
    its rounds: a burst of noise from the rest of the machine lands in one
    round of one case and moves no result far, where a single long timing
    of each case in turn would carry it whole. Each result is a `Timing`: a
    float, the median, that also carries the rounds' spread.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    samples = {key: [] for key in cases}
    for _ in range(rounds):
        for key, (stmt, names) in cases.items():
            measurement = timed(
                stmt,
                names,
                min_run_time=min_run_time,
                num_threads=num_threads,
            )
            samples[key].append(measurement.median)
    return {key: Timing(times) for key, times in samples.items()}
