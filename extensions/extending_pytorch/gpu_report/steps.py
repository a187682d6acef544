"""The report's steps, and how one runs: a process of its own, a time limit.

A step that fails, crashes or runs out of time is recorded as such and the
next one runs: one broken kernel must not hide what the others would show.
Each step's limit is its own, cut to what is left of the report's budget.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import signal
import subprocess
import time
from typing import Callable

from extending_pytorch.display import REPO_ROOT
from extending_pytorch.gpu_report import parse
from extending_pytorch.gpu_report.workloads import HELION_EFFORT, HELION_TUNE_SIZE, PROFILE_IMPLEMENTATIONS
from extending_pytorch.gpu_report.environment import cuda_tool

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# The GPU tests, by file; the stable package's need torch 2.13 or newer.
TEST_FILES = (
    "tests/test_cuda.py",
    "tests/test_involution.py",
    "tests/test_triton.py",
    "tests/test_helion.py",
    "tests/test_cpp_ops.py",
    "tests/test_functions.py",
    "tests/test_grad_in_forward.py",
    "tests/test_saved_distances.py",
    "tests/test_on_gpu.py",
)
STABLE_TEST_FILE = "tests/test_stable_abi.py"
OLDEST_STABLE_TORCH = (2, 13)


@dataclasses.dataclass
class Step:
    name: str
    what: str  # one line for the reader of the report
    argv: list[str]
    limit: float  # seconds
    skip: str | None = None  # the reason it cannot run here
    summarize: Callable[[str, int], str] | None = None
    extra_paths: tuple = ()  # more directories for PYTHONPATH
    env: dict = dataclasses.field(default_factory=dict)  # more environment variables
    # What makes an exit status of 0 a failure all the same (a reason), if anything.
    verify: Callable[[str], str | None] | None = None
    # Whether it must have the GPU to itself: it times kernels, or reads
    # device-wide counters (DRAM bytes count every process's traffic).
    alone: bool = False
    # With --parallel, the steps that need not run alone run in lanes side by
    # side, each lane's steps one after another.
    lane: str = "checks"


def _last_line(output: str, returncode: int) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else f"exit status {returncode}"


def torch_version() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def plan(python: str, work_dir: pathlib.Path, *, has_gpu: bool, quick: bool = False) -> list[Step]:
    """Every step, in the order they run (the most telling first)."""
    workloads = [python, "-m", "extending_pytorch.gpu_report.workloads"]
    no_gpu = None if has_gpu else "no CUDA device on this machine"
    no_helion = None if importlib.util.find_spec("helion") else "helion is not installed"
    helion_configs = ["--helion-configs", str(work_dir / "helion_configs.json")]
    tests_there = (REPO_ROOT / TEST_FILES[0]).is_file()
    no_tests = None if tests_there else "the repository's tests/ folder is not here"

    def needs(*reasons):
        return next((r for r in reasons if r), None)

    pytest = [python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
              "--continue-on-collection-errors"]
    # The GPU tests spend most of their time compiling kernels: 4 processes
    # where pytest-xdist is installed.
    workers = ["-n", "4"] if importlib.util.find_spec("xdist") else []
    stable_skip = None
    if torch_version() < OLDEST_STABLE_TORCH:
        stable_skip = "the stable package needs torch 2.13 or newer"
    # The most telling first. Each limit is what the step should take on an
    # H100 or H200 with room to spare; the report's budget cuts the later
    # ones. The sweep writes each size as it goes, so a cut sweep keeps those.
    steps = [
        Step("build", "build and load the operators with their CUDA kernels (native.load_jit)",
             [*workloads, "build"], 180, no_gpu, _last_line, alone=True),
        Step("tests", "the GPU tests (those marked as needing a CUDA device, those on a CUDA parameter, "
             "and Triton's, in " + ", ".join(TEST_FILES) + ")",
             [*pytest, *workers, "-p", "extending_pytorch.gpu_report.pytest_plugin", *TEST_FILES],
             180, needs(no_gpu, no_tests), lambda out, rc: parse.pytest_summary(out),
             extra_paths=(REPO_ROOT / "tests",)),
        Step("wrong-rank", "the involution operators, called directly on CUDA with a 5-D and a 7-D weight "
             "and a 3-D input: a clear error, never a crash",
             [*workloads, "wrong-rank"], 45, no_gpu, _last_line, lane="small"),
    ]
    sanitizer = cuda_tool("compute-sanitizer")
    for k, tool in enumerate(SANITIZER_TOOLS):
        steps.append(Step(
            f"sanitizer-{tool}",
            f"compute-sanitizer --tool {tool} on the book's kernels at small shapes",
            [sanitizer or "compute-sanitizer", "--tool", tool, "--error-exitcode", "1",
             "--print-limit", "20", *workloads, "sanitize"],
            60, needs(no_gpu, None if sanitizer else "compute-sanitizer is not installed"),
            lambda out, rc: parse.sanitizer_summary(out) or _last_line(out, rc),
            # PyTorch's caching allocator hands out pieces of larger blocks: an
            # access past a tensor's end would land in its own block, unseen.
            env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
            lane=f"sanitizers {k // 2}",  # two lanes of two
        ))
    steps.append(Step(
        "helion-autotune",
        f"Helion's autotuner (effort {HELION_EFFORT!r}) on chapter 9's forward and backward kernels, once, "
        f"at {HELION_TUNE_SIZE[0]} x {HELION_TUNE_SIZE[1]} float32: the configs the sweep and Nsight Compute use",
        [*workloads, "helion-autotune", helion_configs[1]], 240, needs(no_gpu, no_helion), _last_line,
        alone=True,
    ))
    steps.append(Step(
        "sweep", "benchmark sweep: eager, torch.compile, the CUDA operator, Triton and Helion, "
        "float32 and bfloat16, forward and forward + backward, with the copy bandwidth",
        [*workloads, "sweep", str(work_dir / "sweep.json"), *(["--quick"] if quick else []), *helion_configs],
        180, no_gpu, _last_line, alone=True,
    ))
    ncu = cuda_tool("ncu")
    for name in PROFILE_IMPLEMENTATIONS:
        steps.append(Step(
            f"ncu-{name}",
            f"Nsight Compute: DRAM bytes and duration of each kernel of one {name} "
            "forward + backward, 32768 x 8192 float32",
            # --clock-control none: the GPU's own clocks, as the sweep runs at.
            [ncu or "ncu", "--profile-from-start", "off", "--clock-control", "none", "--csv",
             "--print-units", "base", "--metrics", ",".join(parse.NCU_METRICS), *workloads, "profile", name,
             *(helion_configs if name == "helion" else [])],
            75, needs(no_gpu, None if ncu else "Nsight Compute (ncu) is not installed",
                      no_helion if name == "helion" else None),
            lambda out, rc: f"{len(parse.ncu_kernels(out))} kernels profiled" if rc == 0 else _last_line(out, rc),
            verify=lambda out: None if parse.ncu_kernels(out) else "ncu exited 0 but profiled no kernel",
            alone=True,
        ))
    steps.append(Step(
        "emulator", "the SIMT emulator here: the CUDA headers it chose, and its kernels against the GPU's",
        [*workloads, "emulator"], 90, no_gpu, _last_line, lane="small",
    ))
    steps.append(Step(
        "stable", "the stable-ABI package's tests (its wheel built and loaded with this torch)",
        [*pytest, STABLE_TEST_FILE], 90, needs(no_gpu, no_tests, stable_skip),
        lambda out, rc: parse.pytest_summary(out), extra_paths=(REPO_ROOT / "tests",),
    ))
    return steps


def run_step(step: Step, *, env: dict, log_dir: pathlib.Path, seconds_left: float) -> dict:
    """Run one step; its record (status, seconds, summary, the log's tail)."""
    record = dict(name=step.name, what=step.what, limit=round(step.limit))
    if step.skip:
        return dict(record, status="skipped", reason=step.skip, seconds=0.0)
    limit = min(step.limit, seconds_left)
    if seconds_left < 5:
        return dict(record, status="skipped", seconds=0.0,
                    reason="the report's time budget was spent before this step")
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{step.name}.log"
    start = time.monotonic()
    step_env = dict(env, **step.env)
    if step.extra_paths:
        step_env["PYTHONPATH"] = os.pathsep.join(
            [*map(str, step.extra_paths), env.get("PYTHONPATH", "")]
        )
    with open(log_path, "w") as log:
        try:
            # A session of its own: on time-out the whole group goes (the
            # sanitizers and ncu start the Python process as their child).
            process = subprocess.Popen(step.argv, cwd=REPO_ROOT, env=step_env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            return dict(record, status="failed", seconds=0.0, summary=f"could not start: {error}")
        try:
            returncode = process.wait(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
            timed_out = True
    output = log_path.read_text(errors="replace")
    seconds = round(time.monotonic() - start, 1)
    if timed_out:
        status = "timed out"
        summary = f"stopped after {limit:.0f} s (its limit)"
    elif returncode < 0:
        status = "failed"
        summary = f"killed by {signal.Signals(-returncode).name}"
    else:
        status = "passed" if returncode == 0 else "failed"
        try:
            summary = (step.summarize or _last_line)(output, returncode)
            problem = step.verify(output) if step.verify and returncode == 0 else None
        except Exception as error:  # noqa: BLE001 - an output the report cannot read fails this step only
            summary = problem = f"the report could not read this step's output: {type(error).__name__}: {error}"
        if problem:
            status, summary = "failed", problem
    return dict(record, status=status, seconds=seconds, returncode=returncode,
                summary=summary, output_tail=output[-3000:], output=output)
