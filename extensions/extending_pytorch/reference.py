"""The reference triplet hinge loss, which every other chapter checks against.

For a batch of B triplets (anchor a_i, positive p_i, negative n_i), each a
row of D numbers,

    d_ap = ||a_i - p_i||^2        d_an = ||a_i - n_i||^2
    loss_i = max(d_ap - d_an, t1) + beta * max(d_ap, t2)

and the batch loss is the mean (or sum) of loss_i. Chapter 1 derives it.

At its two kinks (d_ap - d_an == t1, d_ap == t2) the loss has no derivative,
so its definition includes a subgradient: 0 at the kink, the minimum-norm
choice (relu, hardtanh and, since torch 2.14, clamp with a number as its
bound make it too). Every implementation in this book computes that one, on
every supported torch.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

REDUCTIONS = ("mean", "sum", "none")


def _check_real(name: str, value: object) -> float:
    # bool is a subclass of int: a flag passed by mistake must not become 1.0.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def check_hyperparameters(t1, t2, beta, reduction):
    """Validate the hyper-parameters; return them as floats and a string.

    Raises TypeError or ValueError naming the argument, what was expected
    and what was given.
    """
    t1 = _check_real("t1", t1)
    t2 = _check_real("t2", t2)
    beta = _check_real("beta", beta)
    if t1 > 0:
        raise ValueError(
            "t1 must be <= 0 (it is minus the margin by which d_an should "
            f"exceed d_ap), got {t1}"
        )
    if t2 < 0:
        raise ValueError(f"t2 must be >= 0 (a squared distance), got {t2}")
    if beta < 0:
        raise ValueError(
            "beta must be >= 0 (a negative weight would push positives "
            f"apart), got {beta}"
        )
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {REDUCTIONS}, got {reduction!r}"
        )
    return t1, t2, beta, reduction


def check_triplet_inputs(anchor, positive, negative) -> None:
    """Check for floating-point (B, D) tensors of one shape, dtype, device."""
    named = {"anchor": anchor, "positive": positive, "negative": negative}
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor, got {type(tensor).__name__}"
            )
        if tensor.dim() != 2:
            raise ValueError(
                f"{name} must be 2-D (batch, dim), got {tensor.dim()}-D "
                f"with shape {tuple(tensor.shape)}"
            )
        if not tensor.is_floating_point():
            raise TypeError(
                f"{name} must have a floating-point dtype, got {tensor.dtype}"
            )
    for name in ("positive", "negative"):
        tensor = named[name]
        if tensor.shape != anchor.shape:
            raise ValueError(
                f"{name} must have the same shape as anchor "
                f"{tuple(anchor.shape)}, got {tuple(tensor.shape)}"
            )
        if tensor.dtype != anchor.dtype:
            raise TypeError(
                f"{name} must have the same dtype as anchor "
                f"({anchor.dtype}), got {tensor.dtype}"
            )
        if tensor.device != anchor.device:
            raise ValueError(
                f"{name} must be on the same device as anchor "
                f"({anchor.device}), got {tensor.device}"
            )


def squared_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Row-wise squared Euclidean distance, without a square root."""
    return (x - y).pow(2).sum(dim=-1)


def floor_at(x: torch.Tensor, floor: float) -> torch.Tensor:
    """max(x, floor) whose gradient is 1 where x > floor, 0 elsewhere.

    The value is torch.clamp(x, min=floor)'s, NaN included. The gradient is
    not left to clamp: torch 2.14 changed clamp's at the boundary x == floor
    (a number as the bound) from 1 to 0, and a reference must not change
    with the torch version.
    """
    return torch.where(x > floor, x, x.detach().clamp(min=floor))


def reference_triplet_hinge_loss(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor,
    *,
    t1: float,
    t2: float,
    beta: float,
    reduction: str = "mean",
) -> torch.Tensor:
    """The triplet hinge loss in plain tensor ops; autograd gives the backward.

    anchor, positive, negative: (B, D) floating-point tensors of one dtype
    and device. Returns a scalar for reduction "mean" or "sum", and a (B,)
    tensor for "none".
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    d_ap = squared_distance(anchor, positive)
    d_an = squared_distance(anchor, negative)
    push = floor_at(d_ap - d_an, t1)
    pull = floor_at(d_ap, t2)
    per_triplet = push + beta * pull
    if reduction == "mean":
        return per_triplet.mean()
    if reduction == "sum":
        return per_triplet.sum()
    return per_triplet


class TripletHingeLoss(nn.Module):
    """`reference_triplet_hinge_loss` as a module, like torch's own losses.

    Args:
        t1: floor of d_ap - d_an; minus the margin, so <= 0.
        t2: squared distance under which positives are not pulled; >= 0.
        beta: weight of the pull term; >= 0.
        reduction: "mean" (default), "sum" or "none".
    """

    # The function that computes the loss. Later chapters subclass this
    # module and replace only this line (the hand-written Function, the C++
    # operator with its CUDA kernels, the Triton kernels, the Helion kernels).
    loss_function = staticmethod(reference_triplet_hinge_loss)

    def __init__(self, t1, t2, beta, reduction: str = "mean") -> None:
        super().__init__()
        self.t1, self.t2, self.beta, self.reduction = check_hyperparameters(
            t1, t2, beta, reduction
        )

    def forward(self, anchor, positive, negative) -> torch.Tensor:
        return self.loss_function(
            anchor,
            positive,
            negative,
            t1=self.t1,
            t2=self.t2,
            beta=self.beta,
            reduction=self.reduction,
        )

    def extra_repr(self) -> str:
        return (
            f"t1={self.t1}, t2={self.t2}, beta={self.beta}, "
            f"reduction={self.reduction!r}"
        )
