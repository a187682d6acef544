"""Python registrations of extending_pytorch_stable::triplet_hinge_loss.

The same as extending_pytorch.ops for the ATen operator: the stable ABI
changes how the C++ is built, not what Python adds to it. This package does
not import extending_pytorch, so the wheel needs nothing but torch.
"""

from __future__ import annotations

import torch
from torch import Tensor

_forward = torch.ops.extending_pytorch_stable.triplet_hinge_loss.default
_backward_op = torch.ops.extending_pytorch_stable.triplet_hinge_loss_backward.default


def _check_fake_inputs(anchor, positive, negative):
    # The checks the C++ kernels make (dimensions, matching shapes, dtypes and
    # devices), so that under torch.compile or export a mismatch is reported
    # while tracing, naming the argument, and not only when a kernel runs.
    # (The same as extending_pytorch.reference.check_triplet_inputs, copied:
    # this package depends on torch alone.)
    named = {"anchor": anchor, "positive": positive, "negative": negative}
    for name, tensor in named.items():
        if tensor.dim() != 2:
            raise ValueError(
                f"{name} must be 2-D (batch, dim), got {tensor.dim()}-D "
                f"with shape {tuple(tensor.shape)}"
            )
        if not tensor.is_floating_point():
            raise TypeError(f"{name} must have a floating-point dtype, got {tensor.dtype}")
    for name in ("positive", "negative"):
        tensor = named[name]
        if tensor.shape != anchor.shape:
            raise ValueError(
                f"{name} must have the same shape as anchor "
                f"{tuple(anchor.shape)}, got {tuple(tensor.shape)}"
            )
        if tensor.dtype != anchor.dtype:
            raise TypeError(
                f"{name} must have the same dtype as anchor ({anchor.dtype}), got {tensor.dtype}"
            )
        if tensor.device != anchor.device:
            raise ValueError(
                f"{name} must be on the same device as anchor ({anchor.device}), "
                f"got {tensor.device}"
            )


@torch.library.register_fake("extending_pytorch_stable::triplet_hinge_loss")
def _(anchor, positive, negative, t1, t2, beta, reduction="mean"):
    _check_fake_inputs(anchor, positive, negative)
    if reduction == "none":
        return anchor.new_empty(anchor.shape[0])
    return anchor.new_empty(())


@torch.library.register_fake("extending_pytorch_stable::triplet_hinge_loss_backward")
def _(grad_output, anchor, positive, negative, t1, t2, beta, reduction):
    return tuple(anchor.new_empty(anchor.shape) for _ in range(3))


def _setup_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    ctx.save_for_backward(anchor, positive, negative)
    ctx.settings = (t1, t2, beta, reduction)


def _backward(ctx, grad_output):
    anchor, positive, negative = ctx.saved_tensors
    grads = _backward_op(grad_output, anchor, positive, negative, *ctx.settings)
    return (
        *(g if need else None for g, need in zip(grads, ctx.needs_input_grad)),
        None,
        None,
        None,
        None,
    )


torch.library.register_autograd(
    "extending_pytorch_stable::triplet_hinge_loss",
    _backward,
    setup_context=_setup_context,
)


# This package stops at first derivatives. Without a formula for the backward
# operator, autograd would treat it as a constant and a second derivative
# would be silently wrong; refusing says so instead.
def _refuse_double_backward(ctx, *grads):
    raise RuntimeError(
        "extending_pytorch_stable::triplet_hinge_loss supports first derivatives "
        "only; for double backward use extending_pytorch.ops.triplet_hinge_loss"
    )


torch.library.register_autograd(
    "extending_pytorch_stable::triplet_hinge_loss_backward",
    _refuse_double_backward,
    setup_context=lambda ctx, inputs, output: None,
)


_REDUCTIONS = ("mean", "sum", "none")


def triplet_hinge_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    t1: float,
    t2: float,
    beta: float,
    reduction: str = "mean",
) -> Tensor:
    """The triplet hinge loss, computed by the stable-ABI C++ operator.

    Same arguments, checks and results as extending_pytorch's
    `triplet_hinge_loss`; the C++ operator checks the tensors.
    """
    t1, t2, beta = float(t1), float(t2), float(beta)
    if t1 > 0:
        raise ValueError(f"t1 must be <= 0 (minus the margin), got {t1}")
    if t2 < 0:
        raise ValueError(f"t2 must be >= 0 (a squared distance), got {t2}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return _forward(anchor, positive, negative, t1, t2, beta, reduction)


# Autocast: like the ATen operator (and torch's own losses), compute in float32
# when autocast hands the loss lower-precision embeddings, on the CPU
# (bfloat16) and on the GPU (float16 or bfloat16): the squared distances sum D
# products, which bfloat16 would round to 8 significant bits and float16 can
# overflow (65504). It also lets float16 activations meet a float32 tensor
# (a bank of negatives), which the kernels would refuse as a dtype mismatch.
for _device in ("cpu", "cuda"):
    torch.library.register_autocast(
        "extending_pytorch_stable::triplet_hinge_loss", _device, torch.float32
    )
