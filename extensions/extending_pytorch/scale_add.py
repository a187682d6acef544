"""Chapter 4, sections 1-4: z = 2x + y as a pybind11 extension, with autograd."""

from __future__ import annotations

import importlib

import torch
from torch import Tensor, nn
from torch.autograd import Function

from extending_pytorch.native import BUILD_HINT


def aot_module():
    """The pybind11 module built ahead of time by setup.py."""
    try:
        return importlib.import_module("extending_pytorch._scale_add")
    except ImportError as error:
        raise RuntimeError(
            "The C++ extension _scale_add is not built "
            f"({error}).\n{BUILD_HINT}"
        ) from error


class ScaleAddFunction(Function):
    """z = 2x + y with the forward and backward of a C++ extension module."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor, extension) -> Tensor:
        ctx.extension = extension  # a Python module: kept on ctx, not saved
        return extension.forward(x, y)

    @staticmethod
    def backward(ctx, grad_z: Tensor):
        grad_x, grad_y = ctx.extension.backward(grad_z)
        return grad_x, grad_y, None


class ScaleAdd(nn.Module):
    """z = 2x + y as a layer; `extension` defaults to the AOT build."""

    def __init__(self, extension=None) -> None:
        super().__init__()
        self.extension = extension if extension is not None else aot_module()

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return ScaleAddFunction.apply(x, y, self.extension)
