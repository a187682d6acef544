"""The GPU report: every check of the book's GPU code, and what it measured, in one run.

    make gpu-report                              (from the repository root)
    python -m extending_pytorch.gpu_report [--output-dir DIR] [--budget SECONDS]

On a Linux machine with an NVIDIA GPU, with whatever torch is installed there
(2.11 or newer), it builds the operators with `native.load_jit` and then runs
each step in a process of its own, under its own time limit, recording
passed, failed, timed out or skipped (with the reason) without stopping the
rest (`steps.plan` lists them): the GPU tests; compute-sanitizer's memcheck,
racecheck, initcheck and synccheck on the book's kernels at small shapes; a
wrong-rank involution weight, which must be a clear error and never a crash;
Nsight Compute's DRAM bytes per kernel; the SIMT emulator (which CUDA headers
it found, its kernels against the GPU's); chapter 9's Helion kernels
autotuned once; and the benchmark sweep (eager, torch.compile, the CUDA
operator, Triton and Helion, float32 and bfloat16, up to B x D = 32768 x
8192, with the copy bandwidth measured in the same run). With --parallel
(the default of `make gpu-report`) the steps that time kernels or read DRAM
counters run alone, and the others side by side.

It writes one JSON and one Markdown file per run, named after the date, the
GPU and torch, with their provenance (GPU, driver, CUDA, torch, triton,
commit, date, command): by default into notebooks/data/gpu/, which the book's
pages render (`records.load_reports`, `records.report_table`,
`records.plot_fraction_of_copy`). Without a GPU it measures nothing and writes
a record that says so, into _build/gpu-report/ unless told otherwise.

It needs neither the network nor matplotlib (only the pages' plot does).
"""

from extending_pytorch.gpu_report.records import (
    REPORT_DIR,
    RecordsView,
    has_fractions,
    load_reports,
    markdown,
    plot_fraction_of_copy,
    report_table,
    steps_table,
)
from extending_pytorch.gpu_report.run import main, run_report

__all__ = [
    "REPORT_DIR",
    "RecordsView",
    "has_fractions",
    "load_reports",
    "main",
    "markdown",
    "plot_fraction_of_copy",
    "report_table",
    "run_report",
    "steps_table",
]
