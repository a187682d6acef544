"""Peak memory of a piece of code, from the allocator events of `torch.profiler`.

Chapter 8 measures what its involution implementations allocate with
`peak_bytes`. On a CPU, `torch.profiler` with `profile_memory=True` records
every allocation and release made through PyTorch's CPU allocator (c10's),
each with a running total of bytes allocated. That total (c10's
`ProfiledCPUMemoryReporter`, in c10/core/CPUAllocator.h) counts the bytes
allocated while memory profiling was on, in this session or an earlier one,
and not yet freed: it is not reset between sessions. So `peak_bytes`
subtracts its value before the first event of the session: what remains is
the peak of the code inside the profiler, temporaries freed before it
returns included. It misses memory allocated outside c10's allocator
(libraries that call `malloc` themselves, Python objects).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile

from torch.profiler import ProfilerActivity, profile

__all__ = ["peak_bytes", "quiet_profiler"]


@contextlib.contextmanager
def quiet_profiler():
    """Silence the lines the profiler's C++ side writes to standard error.

    It logs "profiler_start" and "profiler_stop" straight to the process's file
    descriptor 2, past `sys.stderr`; this sends descriptor 2 to /dev/null
    inside the block and restores it after.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_bytes(fn) -> int:
    """Peak of the bytes that fn() allocates through c10's CPU allocator and has not yet freed.

    Temporaries that fn frees before it returns count while they live. The
    count is net: memory allocated before the call and freed by fn lowers it
    (never below 0).
    """
    with quiet_profiler(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    # The allocator's events are in the trace that export_chrome_trace writes.
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as file:
            events = json.load(file)["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    if not memory:
        return 0
    # "Total Allocated" is not reset between sessions (it still holds what earlier ones
    # allocated and did not free): subtract its value before the first event of this
    # session (that event's total, less its own bytes).
    start = memory[0]["args"]["Total Allocated"] - memory[0]["args"]["Bytes"]
    return max(0, max(e["args"]["Total Allocated"] for e in memory) - start)
