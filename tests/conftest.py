"""Shared fixtures and helpers for the book's tests."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib

import pytest
import torch

# Chapter 6: without a GPU, Triton's interpreter runs the kernels on the CPU. It must be
# chosen before anything imports triton (torch.compile does), so it is set here, first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


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
