"""Chapter 2: operations computed by numpy and scipy, made differentiable.

Two operations, each in two forms:

- the modified Bessel function of the second kind K_v(x) of real order v,
  from scipy.special (torch has only the orders 0 and 1, without gradients);
- the triplet hinge loss of chapter 1, forward and backward in numpy.

The first form is a `torch.autograd.Function` (`BesselKv`,
`TripletHingeLossNumpy`): the simplest way to give numpy code a backward,
but opaque to torch.compile. The second registers each as an operator with
`torch.library.custom_op` (namespace `extending_pytorch_numpy`), with a fake
(meta) implementation and an autograd formula whose backward is an operator
too, so torch.compile can capture a whole graph around it.
"""

from __future__ import annotations

import numpy as np
import scipy.special
import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from extending_pytorch.reference import (
    _check_real,
    check_hyperparameters,
    check_triplet_inputs,
)


def to_numpy(tensor: Tensor) -> np.ndarray:
    """A numpy view (CPU) or copy (other devices), outside the graph."""
    return tensor.detach().cpu().numpy()


def from_numpy(array, like: Tensor) -> Tensor:
    """A tensor with `like`'s dtype and device, whatever numpy returned."""
    return torch.from_numpy(np.asarray(array)).to(like.device, like.dtype)


# ---------------------------------------------------------------------------
# K_v(x), the modified Bessel function of the second kind, as a Function.
# ---------------------------------------------------------------------------


class BesselKv(Function):
    """K_v(x) from scipy; the derivative dK_v/dx from scipy.special.kvp."""

    @staticmethod
    def forward(ctx, x: Tensor, v: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.v = v  # a Python float: kept on ctx, not saved as a tensor
        return from_numpy(scipy.special.kv(v, to_numpy(x)), like=x)

    @staticmethod
    @once_differentiable  # scipy's derivative is a constant to autograd
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        dkv_dx = from_numpy(scipy.special.kvp(ctx.v, to_numpy(x)), like=x)
        return grad * dkv_dx, None  # no gradient for the order v


def _check_bessel_args(x, v) -> float:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(
            "x must be a floating-point torch.Tensor, got "
            + (str(x.dtype) if isinstance(x, Tensor) else type(x).__name__)
        )
    return _check_real("v", v)


def bessel_kv_function(x: Tensor, v: float) -> Tensor:
    """K_v(x) through the `BesselKv` Function (first derivatives only)."""
    return BesselKv.apply(x, _check_bessel_args(x, v))


# ---------------------------------------------------------------------------
# The triplet hinge loss, forward and backward in numpy.
# ---------------------------------------------------------------------------


def triplet_hinge_forward_np(a, p, n, t1, t2, beta) -> np.ndarray:
    """Per-triplet losses of (B, D) arrays, in their dtype."""
    d_ap = np.sum((a - p) ** 2, axis=1)
    d_an = np.sum((a - n) ** 2, axis=1)
    return np.maximum(d_ap - d_an, t1) + beta * np.maximum(d_ap, t2)


def triplet_hinge_backward_np(g, a, p, n, t1, t2, beta):
    """Gradients for a, p, n, given g = dL/d(loss_i) for each triplet."""
    diff_p, diff_n = a - p, a - n
    d_ap = np.sum(diff_p**2, axis=1)
    d_an = np.sum(diff_n**2, axis=1)
    # Like torch.clamp, pass the gradient through where x >= the bound.
    push = d_ap - d_an >= t1
    pull = d_ap >= t2
    # dL/dd_ap = g (push + beta pull), dL/dd_an = -g push, per triplet.
    w_ap = (2 * g * (push + beta * pull)).astype(a.dtype)[:, None]
    w_an = (2 * g * push).astype(a.dtype)[:, None]
    grad_p = -w_ap * diff_p
    grad_n = w_an * diff_n
    grad_a = -(grad_p + grad_n)  # a appears in both differences
    return grad_a, grad_p, grad_n


def _reduce(per_triplet: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per_triplet.mean()
    if reduction == "sum":
        return per_triplet.sum()
    return per_triplet


def _per_triplet_grad(grad_output: Tensor, batch: int, reduction: str):
    """dL/d(loss_i) as a numpy array of shape (B,)."""
    g = to_numpy(grad_output)
    if reduction == "mean":
        g = g / batch
    return np.broadcast_to(g, (batch,))


class TripletHingeLossNumpy(Function):
    """The triplet hinge loss with numpy forward and backward."""

    @staticmethod
    def forward(ctx, anchor, positive, negative, t1, t2, beta, reduction):
        a, p, n = (to_numpy(t) for t in (anchor, positive, negative))
        per_triplet = triplet_hinge_forward_np(a, p, n, t1, t2, beta)
        ctx.save_for_backward(anchor, positive, negative)
        ctx.hyper = (t1, t2, beta)
        ctx.reduction = reduction
        return _reduce(from_numpy(per_triplet, like=anchor), reduction)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        anchor, positive, negative = ctx.saved_tensors
        g = _per_triplet_grad(grad_output, anchor.shape[0], ctx.reduction)
        arrays = (to_numpy(t) for t in (anchor, positive, negative))
        grads = triplet_hinge_backward_np(g, *arrays, *ctx.hyper)
        # One gradient per forward input: None where none is needed, and
        # for the four non-tensor arguments.
        tensors = tuple(
            from_numpy(grad, like=anchor) if needed else None
            for grad, needed in zip(grads, ctx.needs_input_grad[:3])
        )
        return (*tensors, None, None, None, None)


def triplet_hinge_loss_numpy_function(
    anchor, positive, negative, *, t1, t2, beta, reduction="mean"
) -> Tensor:
    """The loss through `TripletHingeLossNumpy`, arguments checked."""
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    return TripletHingeLossNumpy.apply(
        anchor, positive, negative, t1, t2, beta, reduction
    )


# ---------------------------------------------------------------------------
# The same two operations as custom operators, visible to torch.compile.
# ---------------------------------------------------------------------------


# K_v as an operator: the n-th derivative of K_v, computed by scipy.
@torch.library.custom_op("extending_pytorch_numpy::bessel_kv", mutates_args=())
def _bessel_kv_op(x: Tensor, v: float, n: int = 0) -> Tensor:
    """The n-th derivative of K_v at x (n = 0: K_v itself)."""
    return from_numpy(scipy.special.kvp(v, to_numpy(x), n), like=x)


@_bessel_kv_op.register_fake
def _(x, v, n=0):
    # Shape, dtype and device of the result, without computing it.
    return torch.empty_like(x)


def _bessel_kv_setup(ctx, inputs, output):
    x, v, n = inputs
    ctx.save_for_backward(x)
    ctx.v, ctx.n = v, n


def _bessel_kv_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    # The derivative of the n-th derivative is the (n+1)-th: an op again,
    # so autograd can differentiate the backward itself.
    return grad * _bessel_kv_op(x, ctx.v, ctx.n + 1), None, None


_bessel_kv_op.register_autograd(
    _bessel_kv_backward, setup_context=_bessel_kv_setup
)


def bessel_kv(x: Tensor, v: float) -> Tensor:
    """K_v(x) through the operator `extending_pytorch_numpy::bessel_kv`."""
    return torch.ops.extending_pytorch_numpy.bessel_kv(
        x, _check_bessel_args(x, v)
    )


# The triplet loss as an operator, with its backward as a second one.
@torch.library.custom_op(
    "extending_pytorch_numpy::triplet_hinge_loss", mutates_args=()
)
def _triplet_op(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    t1: float,
    t2: float,
    beta: float,
    reduction: str,
) -> Tensor:
    a, p, n = (to_numpy(t) for t in (anchor, positive, negative))
    per_triplet = triplet_hinge_forward_np(a, p, n, t1, t2, beta)
    return _reduce(from_numpy(per_triplet, like=anchor), reduction)


@_triplet_op.register_fake
def _(anchor, positive, negative, t1, t2, beta, reduction):
    if reduction == "none":
        return anchor.new_empty(anchor.shape[0])
    return anchor.new_empty(())


@torch.library.custom_op(
    "extending_pytorch_numpy::triplet_hinge_loss_backward", mutates_args=()
)
def _triplet_backward_op(
    grad_output: Tensor,
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    t1: float,
    t2: float,
    beta: float,
    reduction: str,
) -> tuple[Tensor, Tensor, Tensor]:
    g = _per_triplet_grad(grad_output, anchor.shape[0], reduction)
    arrays = (to_numpy(t) for t in (anchor, positive, negative))
    grads = triplet_hinge_backward_np(g, *arrays, t1, t2, beta)
    return tuple(from_numpy(grad, like=anchor) for grad in grads)


@_triplet_backward_op.register_fake
def _(grad_output, anchor, positive, negative, t1, t2, beta, reduction):
    return tuple(torch.empty_like(anchor) for _ in range(3))


def _triplet_setup(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    ctx.save_for_backward(anchor, positive, negative)
    ctx.args = (t1, t2, beta, reduction)


def _triplet_backward(ctx, grad_output):
    anchor, positive, negative = ctx.saved_tensors
    grads = _triplet_backward_op(
        grad_output, anchor, positive, negative, *ctx.args
    )
    return (*grads, None, None, None, None)


_triplet_op.register_autograd(_triplet_backward, setup_context=_triplet_setup)


def triplet_hinge_loss_numpy(
    anchor, positive, negative, *, t1, t2, beta, reduction="mean"
) -> Tensor:
    """The loss through `extending_pytorch_numpy::triplet_hinge_loss`."""
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    return torch.ops.extending_pytorch_numpy.triplet_hinge_loss(
        anchor, positive, negative, t1, t2, beta, reduction
    )
