"""How fast the emulator runs a launch (fast mode), measured with torch.utils.benchmark.

    python tools/emulator_speed.py            # the table below, on this machine
    python tools/emulator_speed.py --quick    # smaller sizes

Two launches from extensions/csrc/simt/examples/softmax_rows.cu: an empty kernel on
4096 x 256 threads (what a launch costs beyond the kernel's work: one fiber per thread) and
a row softmax on 4096 x 1024 floats with a warp per row (10 shuffles per warp), next to
torch.softmax on the CPU for scale. Each time is the median of repeated launches from
Python, so it includes moving the tensors to the emulator's worker process and back.
Last, what a fresh worker process costs: load_source of the module already built, after
emulator.shutdown() (the worker starts, and loads the library).
Nothing is asserted: the numbers are shown (the simt README quotes them, with the machine).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = ROOT / "extensions" / "csrc" / "simt" / "examples" / "softmax_rows.cu"


def cpu_name() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1024 rows, 1024 x 256 threads")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCH_LOGS", "-torch.utils.cpp_extension")
    import torch
    from torch.utils import benchmark

    from extending_pytorch import emulator

    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = 1024 if args.quick else 4096
    module = emulator.load_source(SOURCE)
    x = torch.randn(rows, 1024)
    y = torch.empty_like(x)
    module.softmax_rows[rows // 8, 256](x, y, rows, 1024)  # warm-up, and a check
    torch.testing.assert_close(y, torch.softmax(x, 1))
    cases = [
        (f"empty kernel, {rows} x 256 threads", lambda: module.empty_kernel[rows, 256]()),
        (f"softmax, {rows} x 1024 floats, a warp per row",
         lambda: module.softmax_rows[rows // 8, 256](x, y, rows, 1024)),
        (f"torch.softmax, {rows} x 1024 floats (CPU, one thread)", lambda: torch.softmax(x, 1)),
        ("a fresh worker: load_source of a module already built", lambda: fresh_worker()),
    ]

    def fresh_worker():
        emulator.shutdown()
        emulator.load_source(SOURCE)

    print(f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}")
    print(f"{'launch':58} {'median':>10} {'IQR':>10}")
    for label, fn in cases:
        m = benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=3)
        print(f"{label:58} {m.median * 1e3:8.1f} ms {m.iqr * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
