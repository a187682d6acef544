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
_forward_with_distances = (
    torch.ops.extending_pytorch_stable.triplet_hinge_loss_with_distances.default
)
_backward_from_distances_op = (
    torch.ops.extending_pytorch_stable.triplet_hinge_loss_backward_from_distances.default
)


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


@torch.library.register_fake("extending_pytorch_stable::triplet_hinge_loss_with_distances")
def _(anchor, positive, negative, t1, t2, beta, reduction):
    _check_fake_inputs(anchor, positive, negative)
    loss = anchor.new_empty(anchor.shape[0]) if reduction == "none" else anchor.new_empty(())
    distance_dtype = torch.float64 if anchor.dtype == torch.float64 else torch.float32
    return loss, anchor.new_empty((anchor.shape[0], 2), dtype=distance_dtype)


@torch.library.register_fake("extending_pytorch_stable::triplet_hinge_loss_backward_from_distances")
def _(grad_output, anchor, positive, negative, distances, t1, t2, beta, reduction):
    return tuple(anchor.new_empty(anchor.shape) for _ in range(3))


def _input_gradients(ctx, grads):
    # The three tensors' gradients where autograd asks for them; none for t1,
    # t2, beta and reduction.
    return (
        *(g if need else None for g, need in zip(grads, ctx.needs_input_grad)),
        None,
        None,
        None,
        None,
    )


# The plain operator's autograd formula: its backward recomputes each row's
# squared distances, reading every row a second time. triplet_hinge_loss
# below takes it only when no backward can follow; it stays for callers of
# torch.ops.extending_pytorch_stable.triplet_hinge_loss itself.
def _setup_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    ctx.save_for_backward(anchor, positive, negative)
    ctx.settings = (t1, t2, beta, reduction)


def _backward(ctx, grad_output):
    anchor, positive, negative = ctx.saved_tensors
    grads = _backward_op(grad_output, anchor, positive, negative, *ctx.settings)
    return _input_gradients(ctx, grads)


torch.library.register_autograd(
    "extending_pytorch_stable::triplet_hinge_loss",
    _backward,
    setup_context=_setup_context,
)


# The autograd path: the forward also returns each row's two squared
# distances, (B, 2) in the accumulation type, which the backward reads
# instead of recomputing them, as the ATen operator does on CUDA
# (extending_pytorch.ops, "Saved distances"): each row is read once by the
# forward and once by the backward, so a training step moves 9 B D numbers on
# a GPU, not 12 B D. The distances are an output nobody differentiates.
def _setup_distances_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    _, distances = output
    ctx.mark_non_differentiable(distances)
    # No (B, 2) tensor of zeros for the distances' unused gradient.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(anchor, positive, negative, distances)
    ctx.settings = (t1, t2, beta, reduction)


def _backward_with_distances(ctx, grad_output, _grad_distances):
    if grad_output is None:  # (materialize_grads is off)
        return (None,) * 7
    anchor, positive, negative, distances = ctx.saved_tensors
    grads = _backward_from_distances_op(
        grad_output, anchor, positive, negative, distances, *ctx.settings
    )
    return _input_gradients(ctx, grads)


torch.library.register_autograd(
    "extending_pytorch_stable::triplet_hinge_loss_with_distances",
    _backward_with_distances,
    setup_context=_setup_distances_context,
)


# This package stops at first derivatives. Without a formula for the backward
# operator, torch's autograd fallback would only warn (its default mode) and a
# second derivative would come out wrong; refusing says so instead.
def _refuse_double_backward(ctx, *grads):
    raise RuntimeError(
        "extending_pytorch_stable::triplet_hinge_loss supports first derivatives "
        "only; for double backward use extending_pytorch.ops.triplet_hinge_loss"
    )


for _name in ("triplet_hinge_loss_backward", "triplet_hinge_loss_backward_from_distances"):
    torch.library.register_autograd(
        f"extending_pytorch_stable::{_name}",
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

    When a backward can follow (grad mode is on and an input requires
    gradients), on the CPU and on CUDA, it calls the operator that also saves
    each row's two squared distances, so that the backward reads each row
    once; otherwise the plain operator, which keeps nothing.
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
    backward_can_follow = torch.is_grad_enabled() and any(
        t.requires_grad for t in (anchor, positive, negative)
    )
    # The operators with kernels for the CPU and CUDA; other devices (meta)
    # take the plain operator, whose fake implementation serves them.
    if backward_can_follow and anchor.device.type in ("cpu", "cuda"):
        return _forward_with_distances(anchor, positive, negative, t1, t2, beta, reduction)[0]
    return _forward(anchor, positive, negative, t1, t2, beta, reduction)


# Autocast: like the ATen operator (and torch's own losses), compute in float32
# when autocast hands the loss lower-precision embeddings, on the CPU
# (bfloat16) and on the GPU (float16 or bfloat16): the squared distances sum D
# products, which bfloat16 would round to 8 significant bits and float16 can
# overflow (65504). It also lets float16 activations meet a float32 tensor
# (a bank of negatives), which the kernels would refuse as a dtype mismatch.
# The operator saving distances follows the same rule.
for _name in ("triplet_hinge_loss", "triplet_hinge_loss_with_distances"):
    for _device in ("cpu", "cuda"):
        torch.library.register_autocast(
            f"extending_pytorch_stable::{_name}", _device, torch.float32
        )
