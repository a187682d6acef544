"""Shared fixtures and helpers for the book's tests."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import shutil

import pytest
import torch

# Chapter 6: without a GPU, Triton's interpreter runs the kernels on the CPU. It must be
# chosen before anything imports triton (torch.compile does), so it is set here, first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


# `make test-oldest` runs the notebooks and tests/ again on the oldest torch the book supports, on
# the same two cores as `make test` in CI. Tests whose subject is the same on every torch (the
# book's files, the exercise checks' verdicts on wrong answers, the emulator's own C++) are marked
# so, and it leaves them out (-m "not same_on_every_torch"); `make test` runs everything.
def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "same_on_every_torch: what this tests does not depend on torch's version; "
        "make test-oldest leaves it out",
    )


# Reader profiles (book/setup.md, "Where the book runs"). The stored outputs come from profile (b):
# the pinned torch's CUDA build, with nvcc, no GPU. A cell whose output is a fact of that machine
# carries one of these tags, and strict nbval compares its output only where that fact holds; on
# another machine the cell must still run without error. (nbval-ignore-output never compares.)
#   output-pinned-torch   what the pinned torch (and the Triton it requires) prints: torch's own
#                         behaviour, messages, allocations. Compared on the torch requirements.txt pins.
#   output-cuda-toolkit   what needs the CUDA toolkit: nvcc's reports, the SIMT emulator's results (it
#                         needs CUDA's headers). Compared where nvcc and the emulator's headers are found.
PROFILE_TAGS = ("output-pinned-torch", "output-cuda-toolkit")


def pinned_torch() -> str:
    text = (REPO_ROOT / "requirements.txt").read_text()
    return re.search(r"^torch==(\S+)$", text, re.MULTILINE).group(1)


def output_compared(tags, *, torch_version: str, has_cuda_toolkit: bool) -> bool:
    """Whether strict nbval compares the output of a cell with these tags on this machine."""
    if "output-pinned-torch" in tags and torch_version.split("+")[0] != pinned_torch():
        return False
    if "output-cuda-toolkit" in tags and not has_cuda_toolkit:
        return False
    return True


def cuda_toolkit_here() -> bool:
    """nvcc on PATH and the CUDA headers the emulator builds with (profile (b)'s machine)."""
    if shutil.which("nvcc") is None:
        return False
    from extending_pytorch import emulator

    return emulator.available()


def pytest_collection_modifyitems(config, items):
    toolkit = None
    for item in items:
        cell, options = getattr(item, "cell", None), getattr(item, "options", None)
        tags = set(cell.metadata.get("tags", [])) & set(PROFILE_TAGS) if cell is not None else set()
        if not tags or options is None:
            continue
        if toolkit is None and "output-cuda-toolkit" in tags:
            toolkit = cuda_toolkit_here()
        if not output_compared(tags, torch_version=torch.__version__, has_cuda_toolkit=bool(toolkit)):
            options["check"] = False


def load_tool(name: str):
    """A script of tools/ as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chapter_notebooks() -> list[pathlib.Path]:
    """The chapters: notebooks/NN_topic.ipynb (files starting with '_' are templates, not chapters)."""
    return sorted(
        p for p in NOTEBOOK_DIR.glob("*.ipynb") if not p.name.startswith("_")
    )


def load_notebook(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def sample_inputs(
    device: str | torch.device,
    *,
    requires_grad: bool = False,
    dtype=torch.float32,
):
    """Triplet batches of several shapes, in the style of pytorch/extension-cpp's tests.

    Each entry is (anchor, positive, negative) of one shape; `requires_grad` makes them leaves.
    """
    generator = torch.Generator().manual_seed(0)
    shapes = [(1, 1), (1, 7), (5, 1), (8, 4), (33, 17)]
    samples = []
    for batch, dim in shapes:
        tensors = torch.randn(
            3, batch, dim, generator=generator, dtype=dtype
        ).unbind(0)
        samples.append(
            tuple(t.to(device).requires_grad_(requires_grad) for t in tensors)
        )
    return samples


requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"
)


# Triplets exactly on the loss's kinks, in small integers (exact in every float dtype).
# With t1 = -3, t2 = 1: row 0 is on the push kink only (d_ap - d_an = 2 - 5 = t1), row 1 on
# the pull kink only (d_ap = 1 = t2), row 2 on both, row 3 on neither. The loss's subgradient
# at a kink is 0, so row 0's negative and row 2's three inputs get no gradient, and row 1's
# positive gets only the push term's.
KINK_SETTINGS = dict(t1=-3.0, t2=1.0, beta=0.5)


def kink_batch(dtype=torch.float64):
    anchor = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=dtype)
    positive = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=dtype)
    negative = torch.tensor([[1.0, 2.0], [1.0, 0.0], [2.0, 0.0], [0.0, 2.0]], dtype=dtype)
    return anchor, positive, negative


def kink_gradients(dtype=torch.float64):
    """The exact gradients of the mean loss over kink_batch(), worked out by hand.

    Per row, with g = 1/4: w_ap = 2 g (push + beta pull), w_an = 2 g push;
    dL/dp = -w_ap (a - p), dL/dn = w_an (a - n), dL/da = -(dL/dp + dL/dn).
    push, pull = (0, 1), (1, 0), (0, 0), (1, 1) for rows 0..3.
    """
    a, p, n = kink_batch(dtype)
    push = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=dtype)
    pull = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=dtype)
    g = 0.25
    w_ap = (2 * g * (push + KINK_SETTINGS["beta"] * pull))[:, None]
    w_an = (2 * g * push)[:, None]
    grad_p = -w_ap * (a - p)
    grad_n = w_an * (a - n)
    return -(grad_p + grad_n), grad_p, grad_n
