"""On Colab: make sure the runtime has a torch the book supports, before anything imports torch.

    %run /content/extending-pytorch/tools/colab_torch.py      (each chapter's Colab setup cell)

The book supports torch 2.13 to 2.15 (CI runs 2.13.0 and 2.15.0). Colab's own torch was older
(2.11 on the GPU image in June 2026, googlecolab/backend-info's pip-freeze.gpu.txt), so:

- torch 2.13 or newer already installed: nothing is installed.
- otherwise, on a CPU runtime: torch 2.15.0 from PyPI, the CUDA 13.2 build that requirements.txt
  installs on Linux (it runs on a CPU; about 3 GB with the CUDA libraries and Triton it pulls in,
  measured for the book's .venv).
- otherwise, on a GPU runtime whose driver runs CUDA 13 (580 or newer): the same, and the new
  torch must see the GPU (checked in a fresh process), or this script fails saying so.
- otherwise (a GPU runtime with an older driver): the CUDA 13 build would not see the GPU, so
  Colab's torch is kept, and the script says that the chapter runs outside the tested range.

Only the torch already imported by this kernel would keep running after an install: if torch was
imported before this script ran, it asks for a restart (Runtime -> Restart session) instead.
The script imports nothing that imports torch; it reads versions with importlib.metadata.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys

OLDEST, PINNED = (2, 13), "2.15.0"  # the range CI tests, and the version requirements.txt pins
TRITON = "3.9.0"  # the Triton torch 2.15.0's CUDA build requires (requirements.txt)
CUDA13_DRIVER = 580  # CUDA 13's minimum Linux driver (torch 2.15.0's PyPI build is CUDA 13.2)


def major_minor(version: str) -> tuple[int, int]:
    """(2, 11) from '2.11.0+cu128'."""
    parts = version.split("+")[0].split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"version must look like MAJOR.MINOR[.PATCH][+LOCAL], got {version!r}")
    return int(parts[0]), int(parts[1])


def decide(torch_version: str | None, driver: str | None) -> str:
    """'keep', 'install' or 'old-driver', from the installed torch (None: none) and the GPU
    driver's version (None: no GPU)."""
    if torch_version is not None and major_minor(torch_version) >= OLDEST:
        return "keep"
    if driver is not None and int(driver.split(".")[0]) < CUDA13_DRIVER:
        return "old-driver"
    return "install"


def installed_torch() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_driver() -> str | None:
    """The first GPU's driver version as nvidia-smi reports it; None without a GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    result = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True, text=True,
    )
    lines = result.stdout.split()
    return lines[0] if result.returncode == 0 and lines else None


def main() -> None:
    found, driver = installed_torch(), gpu_driver()
    action = decide(found, driver)
    if action == "keep":
        print(f"torch {found}: supported (2.13 to 2.15), kept")
        # Chapter 6's kernels: the CUDA build of torch brings Triton, the CPU build does not.
        if importlib.util.find_spec("triton") is None:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", f"triton=={TRITON}"], check=True)
        return
    if action == "old-driver":
        print(
            f"torch {found} is older than the book supports (2.13 to 2.15), and this GPU's driver "
            f"({driver}) is older than torch {PINNED}'s CUDA 13 build needs ({CUDA13_DRIVER}): "
            f"keeping torch {found}. The chapter runs outside the tested range; a cell may fail "
            "or print other values than the book shows."
        )
        return
    if "torch" in sys.modules:
        raise RuntimeError(
            f"torch {found} is already imported in this session, so installing torch {PINNED} "
            "would not take effect: restart the session (Runtime -> Restart session) and run "
            "this cell first"
        )
    print(f"torch {found} is older than the book supports (2.13 to 2.15): installing torch {PINNED} "
          "(about 3 GB with its CUDA libraries; a minute or two)")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", f"torch=={PINNED}", f"triton=={TRITON}"],
        check=True,
    )
    # A fresh process: this kernel must not import torch before the chapter does.
    check = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
        capture_output=True, text=True, check=True,
    )
    version, sees_gpu = check.stdout.split()
    if driver is not None and sees_gpu != "True":
        raise RuntimeError(
            f"torch {version} does not see this runtime's GPU (driver {driver}): "
            + check.stderr.strip()[-500:]
        )
    print(f"torch {version} installed" + (", GPU visible" if driver is not None else ""))


if __name__ == "__main__":
    main()
