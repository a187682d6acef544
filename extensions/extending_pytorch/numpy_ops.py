"""Chapter 2: operations computed by numpy and scipy, made differentiable.

Two operations, each in two forms:

- the modified Bessel function of the second kind K_v(x) of real order v,
  from scipy.special (torch has only the orders 0 and 1);
- the triplet hinge loss of chapter 1, forward and backward in numpy.

The first form is a `torch.autograd.Function` (`BesselKv`,
`TripletHingeLossNumpy`): the simplest way to give numpy code a backward,
but opaque to torch.compile. The second registers each as an operator with
`torch.library.custom_op` (namespace `extending_pytorch_numpy`), with a fake
(meta) implementation and an autograd formula whose backward is an operator
too, so torch.compile can capture a whole graph around it. The operators
run on the CPU only (numpy does) and cast to float32 under torch.autocast
(numpy has no bfloat16); the two forward operators have vmap rules that
call numpy once per batch instead of once per sample.
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


def to_numpy(tensor: Tensor, name: str = "tensor") -> np.ndarray:
    """A numpy view (CPU) or copy (other devices), outside the graph."""
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16 type
        raise TypeError(
            f"{name} must be float16, float32 or float64 for numpy, got "
            "torch.bfloat16; cast it with .float() (under CPU autocast, the "
            "Functions and operators of this module cast for you)"
        )
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
        return from_numpy(scipy.special.kv(v, to_numpy(x, "x")), like=x)

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
    # The loss's subgradient: 1 strictly above the bound, 0 at it and below
    # (reference.py explains the choice).
    push = d_ap - d_an > t1
    pull = d_ap > t2
    # dL/dd_ap = g (push + beta pull), dL/dd_an = -g push, per triplet.
    w_ap = (2 * g * (push + beta * pull)).astype(a.dtype)[:, None]
    w_an = (2 * g * push).astype(a.dtype)[:, None]
    grad_p = -w_ap * diff_p
    grad_n = w_an * diff_n
    grad_a = -(grad_p + grad_n)  # a appears in both differences
    return grad_a, grad_p, grad_n


def _triplet_arrays(anchor, positive, negative):
    """The three inputs as numpy arrays, each named in a dtype error."""
    return (
        to_numpy(anchor, "anchor"),
        to_numpy(positive, "positive"),
        to_numpy(negative, "negative"),
    )


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
    # Under CPU autocast, cast floating-point inputs to float32 and run
    # forward with autocast off: numpy cannot take bfloat16.
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, anchor, positive, negative, t1, t2, beta, reduction):
        a, p, n = _triplet_arrays(anchor, positive, negative)
        per_triplet = triplet_hinge_forward_np(a, p, n, t1, t2, beta)
        ctx.save_for_backward(anchor, positive, negative)
        ctx.hyper = (t1, t2, beta)
        ctx.reduction = reduction
        return _reduce(from_numpy(per_triplet, like=anchor), reduction)

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cpu")  # same autocast state as forward
    def backward(ctx, grad_output):
        anchor, positive, negative = ctx.saved_tensors
        g = _per_triplet_grad(grad_output, anchor.shape[0], ctx.reduction)
        arrays = _triplet_arrays(anchor, positive, negative)
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
# mutates_args=(): it writes to no input. device_types="cpu": a kernel for
# CPU tensors only, so a CUDA tensor raises instead of being copied to the
# host and back behind the caller's back.
@torch.library.custom_op(
    "extending_pytorch_numpy::bessel_kv", mutates_args=(), device_types="cpu"
)
def _bessel_kv_op(x: Tensor, v: float, n: int = 0) -> Tensor:
    """The n-th derivative of K_v at x (n = 0: K_v itself)."""
    return from_numpy(scipy.special.kvp(v, to_numpy(x, "x"), n), like=x)


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


@_bessel_kv_op.register_vmap
def _(info, in_dims, x, v, n=0):
    # Elementwise: one call on the whole batch; the batch dim stays put.
    return _bessel_kv_op(x, v, n), in_dims[0]


# Under CPU autocast, cast floating-point inputs to float32 first.
torch.library.register_autocast(
    "extending_pytorch_numpy::bessel_kv", "cpu", torch.float32
)


def bessel_kv(x: Tensor, v: float) -> Tensor:
    """K_v(x) through the operator `extending_pytorch_numpy::bessel_kv`."""
    return torch.ops.extending_pytorch_numpy.bessel_kv(
        x, _check_bessel_args(x, v)
    )


# The triplet loss as an operator, with its backward as a second one.
@torch.library.custom_op(
    "extending_pytorch_numpy::triplet_hinge_loss",
    mutates_args=(),
    device_types="cpu",
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
    a, p, n = _triplet_arrays(anchor, positive, negative)
    per_triplet = triplet_hinge_forward_np(a, p, n, t1, t2, beta)
    return _reduce(from_numpy(per_triplet, like=anchor), reduction)


@_triplet_op.register_fake
def _(anchor, positive, negative, t1, t2, beta, reduction):
    if reduction == "none":
        return anchor.new_empty(anchor.shape[0])
    return anchor.new_empty(())


@torch.library.custom_op(
    "extending_pytorch_numpy::triplet_hinge_loss_backward",
    mutates_args=(),
    device_types="cpu",
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
    arrays = _triplet_arrays(anchor, positive, negative)
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


@_triplet_op.register_vmap
def _(info, in_dims, anchor, positive, negative, t1, t2, beta, reduction):
    # Stack the vmapped batch in front, flatten it with the triplets, make
    # one numpy call on all of them, then reduce each vmapped row alone.
    size = info.batch_size
    a, p, n = (
        t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape)
        for t, dim in zip((anchor, positive, negative), in_dims[:3])
    )
    batch, features = a.shape[1], a.shape[2]
    flat = (t.reshape(size * batch, features) for t in (a, p, n))
    per_triplet = _triplet_op(*flat, t1, t2, beta, "none").reshape(size, batch)
    if reduction == "mean":
        return per_triplet.mean(dim=1), 0
    if reduction == "sum":
        return per_triplet.sum(dim=1), 0
    return per_triplet, 0


# Under CPU autocast, the loss casts its inputs to float32 too.
torch.library.register_autocast(
    "extending_pytorch_numpy::triplet_hinge_loss", "cpu", torch.float32
)


def triplet_hinge_loss_numpy(
    anchor, positive, negative, *, t1, t2, beta, reduction="mean"
) -> Tensor:
    """The loss through `extending_pytorch_numpy::triplet_hinge_loss`."""
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    return torch.ops.extending_pytorch_numpy.triplet_hinge_loss(
        anchor, positive, negative, t1, t2, beta, reduction
    )
