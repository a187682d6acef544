"""Where a report ran: the provenance every record carries.

Paths of the machine are left out (they name nobody's book): the command is
recorded as the module it ran, with its arguments.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys

from extending_pytorch.benchmarking import processor_name
from extending_pytorch.display import REPO_ROOT


def _output(argv, cwd=None) -> str | None:
    """stdout of a short command, stripped, or None where it cannot run."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, cwd=cwd
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cuda_tool(name: str) -> str | None:
    """An NVIDIA tool (nvcc, ncu, compute-sanitizer) on PATH, or in the toolkit torch found."""
    from torch.utils.cpp_extension import CUDA_HOME

    found = shutil.which(name)
    if found is None and CUDA_HOME:
        candidate = os.path.join(CUDA_HOME, "bin", name)
        found = candidate if os.path.isfile(candidate) else None
    return found


def nvcc_version() -> str | None:
    """The CUDA toolkit's release, as `nvcc --version` prints it ("13.0, V13.0.88")."""
    nvcc = cuda_tool("nvcc")
    text = _output([nvcc, "--version"]) if nvcc else None
    if not text:
        return None
    for line in text.splitlines():
        if "release" in line:
            return line.split("release", 1)[1].strip()
    return text.splitlines()[-1]


def commit() -> dict:
    """The repository's commit, and whether the working tree differs from it."""
    if os.environ.get("GPU_REPORT_COMMIT"):
        # A copy of the working tree whose .git is not its own (a borrowed GPU
        # machine's copy, say): the commit the copy was made from, as told.
        return dict(commit=os.environ["GPU_REPORT_COMMIT"], dirty=None)
    head = _output(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT)
    if head is None:
        return dict(commit=None, dirty=None)
    status = _output(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT
    )
    return dict(commit=head, dirty=bool(status))


def gpus() -> list[dict]:
    """One entry per visible GPU: name, compute capability, memory, driver."""
    import torch

    if not torch.cuda.is_available():
        return []
    driver = _output(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    )
    drivers = driver.splitlines() if driver else []
    found = []
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        found.append(
            dict(
                name=properties.name,
                capability=".".join(map(str, torch.cuda.get_device_capability(index))),
                memory_gib=round(properties.total_memory / 2**30, 1),
                driver=drivers[index].strip() if index < len(drivers) else None,
            )
        )
    return found


# Options whose value is a path of this machine (recorded as DIR), or a text
# the record keeps in full elsewhere (--note: its notes, recorded as TEXT).
PATH_OPTIONS = ("--output-dir", "--log-dir")
TEXT_OPTIONS = ("--note",)


def command(argv: list[str]) -> str:
    """The command that made a record, without the machine's paths."""
    words = ["python -m extending_pytorch.gpu_report"]
    for k, word in enumerate(argv):
        if k and argv[k - 1] in PATH_OPTIONS:
            words.append("DIR")
        elif k and argv[k - 1] in TEXT_OPTIONS:
            words.append("TEXT")
        elif word.startswith(tuple(f"{o}=" for o in PATH_OPTIONS)):
            words.append(word.split("=", 1)[0] + "=DIR")
        elif word.startswith(tuple(f"{o}=" for o in TEXT_OPTIONS)):
            words.append(word.split("=", 1)[0] + "=TEXT")
        else:
            words.append(word)
    return " ".join(words)


def provenance(argv: list[str]) -> dict:
    """What a record says about where and when it was made."""
    import torch

    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command(argv),
        gpus=gpus(),
        processor=processor_name(),
        cpu_count=os.cpu_count(),
        torch=torch.__version__,
        torch_cuda=torch.version.cuda,
        nvcc=nvcc_version(),
        triton=_version("triton"),
        helion=_version("helion"),
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        **commit(),
    )


def python_env(extra_paths=()) -> dict:
    """The environment of each step: this Python, the package importable."""
    env = dict(os.environ)
    paths = [str(REPO_ROOT / "extensions"), *map(str, extra_paths)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # The report needs the CUDA kernels: a build without them is an error,
    # not a silent CPU-only library.
    env["EXTENDING_PYTORCH_CUDA"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # a step's output reaches its log as it happens
    return env


def interpreter() -> str:
    return sys.executable
