"""Run the report: every step in turn, then one record as JSON and Markdown."""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import pathlib
import sys
import tempfile
import time

from extending_pytorch.gpu_report import environment, parse, records, steps
from extending_pytorch.gpu_report.workloads import PROFILE_SIZE

# The GPU machine this project borrows gives 10 minutes a command: the report
# stops starting steps once this budget is spent, and each step's own limit
# is cut to what is left.
DEFAULT_BUDGET = 540


def _dram(results: list[dict]) -> list[dict]:
    """Nsight Compute's kernels of each ncu step that passed."""
    profiles = []
    for result in results:
        if result["name"].startswith("ncu-") and result["status"] == "passed":
            kernels = parse.ncu_kernels(result["output"])
            for kernel in kernels:
                kernel["kernel"] = parse.short_kernel_name(kernel["kernel"])
            batch, dim = PROFILE_SIZE
            profiles.append(dict(implementation=result["name"][4:], batch=batch, dim=dim,
                                 dtype="float32", element_size=4, kernels=kernels))
    return profiles


def run_report(
    *,
    budget: float = DEFAULT_BUDGET,
    quick: bool = False,
    parallel: bool = False,
    only: list[str] | None = None,
    log_dir: pathlib.Path | None = None,
    argv: list[str] = (),
    announce=print,
) -> dict:
    """Every step of `steps.plan` (or those named in `only`): the record."""
    import torch

    has_gpu = torch.cuda.is_available()
    started = time.monotonic()
    work_dir = pathlib.Path(tempfile.mkdtemp(prefix="gpu-report-"))
    log_dir = log_dir or records.NO_GPU_DIR / "logs"
    env = environment.python_env()
    report = dict(schema=records.SCHEMA, kind="report",
                  provenance=environment.provenance(list(argv)), budget_s=budget)
    planned = steps.plan(environment.interpreter(), work_dir, has_gpu=has_gpu, quick=quick)
    if only:
        unknown = sorted(set(only) - {s.name for s in planned})
        if unknown:
            raise ValueError(f"unknown step(s) {unknown}; the steps are {[s.name for s in planned]}")
        planned = [s for s in planned if s.name in only]
    results = {}

    def run(step):
        left = budget - (time.monotonic() - started)
        announce(f"== {step.name}: {step.what}", flush=True)
        result = steps.run_step(step, env=env, log_dir=log_dir, seconds_left=left)
        announce(f"   {step.name} {result['status']} ({result['seconds']:.0f} s): "
                 f"{result.get('summary') or result.get('reason', '')}", flush=True)
        results[step.name] = result
        if step.name == "build" and result["status"] != "passed":
            # Nothing after it can load the operators: say so once, per step.
            for later in planned[planned.index(step) + 1:]:
                later.skip = later.skip or "the operators did not build (see the build step)"

    if parallel:
        # The steps that time kernels or read DRAM counters (alone) run one at a
        # time with the GPU to themselves: those the plan puts first (the build)
        # before the others, the rest after them. The others run in their lanes
        # side by side, each lane's steps one after another.
        leading = list(itertools.takewhile(lambda step: step.alone, planned))
        lanes = {}
        for step in planned:
            if not step.alone:
                lanes.setdefault(step.lane, []).append(step)
        for step in leading:
            run(step)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(lanes))) as pool:
            for future in [pool.submit(lambda lane: [run(s) for s in lane], lane) for lane in lanes.values()]:
                future.result()
        for step in planned[len(leading):]:
            if step.alone:
                run(step)
    else:
        for step in planned:
            run(step)
    report["parallel"] = parallel
    results = [results[step.name] for step in planned]  # in the plan's order
    sweep = work_dir / "sweep.json"
    report["benchmark"] = json.loads(sweep.read_text()) if sweep.is_file() else None
    tuned = work_dir / "helion_configs.json"
    report["helion_configs"] = json.loads(tuned.read_text()) if tuned.is_file() else None
    report["dram"] = _dram(results)
    for result in results:
        result.pop("output", None)
    report["steps"] = results
    report["seconds"] = round(time.monotonic() - started)
    return report


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m extending_pytorch.gpu_report",
        description="Check the book's GPU code and record what it measured (see the package's docstring).",
    )
    parser.add_argument("--output-dir", type=pathlib.Path,
                        help=f"where the JSON and Markdown go (default: notebooks/data/gpu with a GPU, "
                             f"{records.NO_GPU_DIR.relative_to(records.REPO_ROOT)} without one)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                        help=f"seconds for all the steps together (default {DEFAULT_BUDGET})")
    parser.add_argument("--quick", action="store_true", help="two sizes in the sweep")
    parser.add_argument("--only", nargs="+", metavar="STEP", help="run only these steps")
    parser.add_argument("--note", action="append", default=[], metavar="TEXT",
                        help="a line for the record's notes: what was done to this machine's environment, say")
    parser.add_argument("--parallel", action="store_true",
                        help="run the steps that neither time kernels nor read DRAM counters side by side, "
                             "after the build and before the steps that do (each of those alone)")
    parser.add_argument("--log-dir", type=pathlib.Path, help="each step's full output (default: _build/gpu-report/logs)")
    args = parser.parse_args(argv)
    report = run_report(budget=args.budget, quick=args.quick, parallel=args.parallel, only=args.only,
                        log_dir=args.log_dir, argv=argv)
    if args.note:
        report["notes"] = args.note
    has_gpu = bool(report["provenance"]["gpus"])
    output_dir = args.output_dir or (records.REPORT_DIR if has_gpu else records.NO_GPU_DIR)
    json_path, md_path = records.write(report, output_dir)
    counts = {}
    for step in report["steps"]:
        counts[step["status"]] = counts.get(step["status"], 0) + 1
    print()
    if not has_gpu:
        print("No CUDA device on this machine: nothing was measured; the record says so.")
    print("steps: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    print(f"wrote {json_path.name} and {md_path.name} in {output_dir}")
    # Failures are in the record; the command itself fails only when a step
    # failed, so that a script or CI notices.
    if any(s["status"] in ("failed", "timed out") for s in report["steps"]):
        sys.exit(1)
