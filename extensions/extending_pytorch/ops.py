"""Chapter 4: the fused triplet hinge loss as a C++ operator.

The C++ library (csrc/triplet.cpp) defines the schemas and the CPU kernels
with TORCH_LIBRARY. This module adds what Python knows best:

- fake implementations, so torch.compile can trace the operators;
- the autograd formula, whose backward is the C++ backward operator;
- grad_in_forward: a forward that also computes the gradients, for a
  backward known to follow;
- the public `triplet_hinge_loss` and the module `CppTripletHingeLoss`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from extending_pytorch.native import load_ops
from extending_pytorch.reference import TripletHingeLoss, check_hyperparameters, check_triplet_inputs

# Defines torch.ops.extending_pytorch.*; if unbuilt, says how to build.
load_ops()

triplet_hinge_loss_op = torch.ops.extending_pytorch.triplet_hinge_loss.default
triplet_hinge_loss_backward_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_backward.default
)


def _check_fake_inputs(anchor, positive, negative):
    # The checks the C++ kernel makes (dimensions, matching shapes, dtypes and
    # devices), so that under torch.compile or export a mismatch is reported
    # while tracing, naming the argument, and not only when the kernel runs.
    check_triplet_inputs(anchor, positive, negative)


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss")
def _(anchor, positive, negative, t1, t2, beta, reduction="mean"):
    # A scalar, or one value per triplet.
    _check_fake_inputs(anchor, positive, negative)
    if reduction == "none":
        return anchor.new_empty(anchor.shape[0])
    return anchor.new_empty(())


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss_backward")
def _(grad_output, anchor, positive, negative, t1, t2, beta, reduction, output_mask):
    # A gradient that output_mask leaves out is not computed: None.
    return tuple(
        anchor.new_empty(anchor.shape) if needed else None
        for needed in output_mask
    )


def _setup_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    ctx.save_for_backward(anchor, positive, negative)
    ctx.settings = (t1, t2, beta, reduction)


def _backward(ctx, grad_output):
    anchor, positive, negative = ctx.saved_tensors
    # Only the gradients autograd needs are computed (a detached negative, say,
    # saves a third of the writes); the others come back as None.
    output_mask = list(ctx.needs_input_grad[:3])
    grads = triplet_hinge_loss_backward_op(
        grad_output, anchor, positive, negative, *ctx.settings, output_mask
    )
    return (
        *grads,
        None,  # t1
        None,  # t2
        None,  # beta
        None,  # reduction
    )


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss",
    _backward,
    setup_context=_setup_context,
)


# Double backward. Without an autograd formula, autograd would treat the C++
# backward operator as a constant (with only a warning), and a second
# derivative would be silently wrong. The backward is linear in grad_output
# and in the differences a - p, a - n (its masks are piecewise constant), so
# its own gradient has a closed form, written here with differentiable ops.
def _setup_backward_context(ctx, inputs, output):
    grad_output, anchor, positive, negative, *settings, output_mask = inputs
    ctx.save_for_backward(grad_output, anchor, positive, negative)
    ctx.settings = settings


def _backward_of_backward(ctx, grad_ga, grad_gp, grad_gn):
    g, anchor, positive, negative = ctx.saved_tensors
    t1, t2, beta, reduction = ctx.settings
    dtype = anchor.dtype
    # The kernels accumulate half and bfloat16 in float; so does this formula,
    # or its masks (push, pull) could differ from the ones the kernel used.
    acc = torch.promote_types(dtype, torch.float32)
    g, anchor, positive, negative = (t.to(acc) for t in (g, anchor, positive, negative))
    zeros = torch.zeros_like(anchor)
    grad_ga = zeros if grad_ga is None else grad_ga.to(acc)
    grad_gp = zeros if grad_gp is None else grad_gp.to(acc)
    grad_gn = zeros if grad_gn is None else grad_gn.to(acc)
    diff_p, diff_n = anchor - positive, anchor - negative
    d_ap, d_an = diff_p.pow(2).sum(-1), diff_n.pow(2).sum(-1)
    push = (d_ap - d_an > t1).to(acc)
    pull = (d_ap > t2).to(acc)
    batch = anchor.shape[0]
    # An empty batch has nothing to differentiate; its "mean" scale is moot.
    scale = 1.0 / batch if reduction == "mean" and batch > 0 else 1.0
    # The backward computed grad_a = w_ap (a-p) - w_an (a-n), grad_p =
    # -w_ap (a-p), grad_n = w_an (a-n), with w_ap, w_an proportional to g.
    w_ap = 2 * scale * g * (push + beta * pull)
    w_an = 2 * scale * g * push
    u = grad_ga - grad_gp  # pairs with a - p
    v = grad_gn - grad_ga  # pairs with a - n
    grad_diff_p = w_ap.unsqueeze(-1) * u
    grad_diff_n = w_an.unsqueeze(-1) * v
    per_row = (
        2
        * scale
        * (
            (push + beta * pull) * (diff_p * u).sum(-1)
            + push * (diff_n * v).sum(-1)
        )
    )
    # The gradient of grad_output has grad_output's shape: (B,) for "none";
    # for "mean" and "sum" a scalar, which may have come as () or (1,).
    grad_g = per_row if reduction == "none" else per_row.sum().reshape(g.shape)
    return (
        grad_g.to(dtype),
        (grad_diff_p + grad_diff_n).to(dtype),  # anchor
        (-grad_diff_p).to(dtype),  # positive
        (-grad_diff_n).to(dtype),  # negative
        None,  # t1
        None,  # t2
        None,  # beta
        None,  # reduction
        None,  # output_mask
    )


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss_backward",
    _backward_of_backward,
    setup_context=_setup_backward_context,
)


# ---- grad_in_forward: move fewer bytes --------------------------------------
# When a backward will follow, the forward can compute the gradients in the
# same pass (the row is in the L1 cache) and autograd can keep them instead of
# the inputs: 6 B D numbers moved instead of 9 B D. They are the gradients for
# grad_output = 1, so backward returns them as they are when grad_output is
# exactly 1 and scales them otherwise (an extra pass over each). Double
# backward (create_graph=True) takes the plain backward operator, which has an
# autograd formula of its own.
triplet_hinge_loss_with_grads_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_with_grads.default
)


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss_with_grads")
def _(anchor, positive, negative, t1, t2, beta, reduction, output_mask):
    _check_fake_inputs(anchor, positive, negative)
    if reduction == "none":
        loss = anchor.new_empty(anchor.shape[0])
    else:
        loss = anchor.new_empty(())
    grads = (anchor.new_empty(anchor.shape) if needed else None for needed in output_mask)
    return (loss, *grads)


def _setup_with_grads_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction, output_mask = inputs
    _, *grads = output
    # The gradients are a means, not a result: nothing differentiates them.
    ctx.mark_non_differentiable(*(g for g in grads if g is not None))
    # Their incoming gradients are unused; left to the default, autograd would
    # first fill B x D tensors with zeros for them: the very traffic saved here.
    ctx.set_materialize_grads(False)
    # Saving keeps a reference and copies nothing. The inputs are kept for
    # double backward only, and saved unconditionally: whether a backward
    # will build a graph (create_graph=True) is unknown here. Where an input
    # is an intermediate that nothing else keeps alive (an embedding layer's
    # output), this keeps it alive until backward, as the plain operator does.
    ctx.save_for_backward(*grads, anchor, positive, negative)
    ctx.settings = (t1, t2, beta, reduction)


# The backward of grad_in_forward's operator when grad_output is not a CPU
# tensor whose value Python can read for free: on a GPU, reading it would
# synchronise with the device (which CUDA-graph capture forbids), and under
# torch.compile it has no value yet. The operator multiplies the saved
# gradients in place and decides on the device, per row, whether there is
# anything to do: nothing where grad_output is exactly 1.
triplet_scale_gradients_op = torch.ops.extending_pytorch.triplet_scale_gradients_.default


@torch.library.register_fake("extending_pytorch::triplet_scale_gradients_")
def _(grad_output, grad_anchor, grad_positive, grad_negative, reduction):
    return None


def _is_exactly_one(grad_output: Tensor) -> bool:
    # Only for a real CPU tensor: reading its value needs data. Under
    # torch.compile it is a fake tensor, and the compiled backward scales.
    if type(grad_output) is not torch.Tensor or grad_output.device.type != "cpu":
        return False
    return bool((grad_output == 1).all())


# The devices whose backward scales on the device, without reading grad_output
# on the host (tests add "cpu" in a process of their own to run this path).
DEVICE_SIDE_SCALING = {"cuda"}


def _scale_on_the_device(grad_output, grads, reduction):
    triplet_scale_gradients_op(grad_output, *grads, reduction)
    # The operator changed the saved gradients in place. The dispatcher does
    # not count that on its own for a custom operator, so it is counted here:
    # a second backward through this graph (retain_graph=True) then raises
    # autograd's "modified by an inplace operation" error instead of scaling
    # them a second time.
    for g in grads:
        if g is not None:
            torch.autograd.graph.increment_version(g)
    return grads


def _backward_with_grads(ctx, grad_output, *unused):
    grad_a, grad_p, grad_n, anchor, positive, negative = ctx.saved_tensors
    t1, t2, beta, reduction = ctx.settings
    output_mask = list(ctx.needs_input_grad[:3])
    if grad_output is None:  # (materialize_grads is off)
        grads = (None, None, None)
    elif torch.is_grad_enabled():
        # create_graph=True: the plain backward operator, whose autograd formula
        # makes the second derivative correct. The saved gradients are
        # constants to autograd; differentiating them would give zero.
        grads = triplet_hinge_loss_backward_op(
            grad_output, anchor, positive, negative, t1, t2, beta, reduction,
            output_mask,
        )
    elif grad_output.device.type in DEVICE_SIDE_SCALING:
        grads = _scale_on_the_device(grad_output, (grad_a, grad_p, grad_n), reduction)
    elif _is_exactly_one(grad_output):
        grads = (grad_a, grad_p, grad_n)
    else:
        scale = grad_output.unsqueeze(-1) if reduction == "none" else grad_output
        grads = tuple(None if g is None else g * scale for g in (grad_a, grad_p, grad_n))
    return (
        *grads,
        None,  # t1
        None,  # t2
        None,  # beta
        None,  # reduction
        None,  # output_mask
    )


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss_with_grads",
    _backward_with_grads,
    setup_context=_setup_with_grads_context,
)


# ---- Saved distances: a backward that reads each row once ---------------------
# The plain backward operator recomputes each row's two squared distances,
# reading the row a second time: on a GPU, a training step moves 12 B D
# numbers where 9 B D would do (chapter 5, section 9, counts them). This
# operator's forward also returns the distances, (B, 2) in the accumulation
# type, and its backward reads them instead. CUDA inputs take it when a
# backward can follow; the CPU keeps chapter 4's operator.
triplet_hinge_loss_with_distances_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_with_distances.default
)
triplet_hinge_loss_backward_from_distances_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_backward_from_distances.default
)


def _distance_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss_with_distances")
def _(anchor, positive, negative, t1, t2, beta, reduction):
    _check_fake_inputs(anchor, positive, negative)
    loss = anchor.new_empty(anchor.shape[0]) if reduction == "none" else anchor.new_empty(())
    return loss, anchor.new_empty((anchor.shape[0], 2), dtype=_distance_dtype(anchor.dtype))


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss_backward_from_distances")
def _(grad_output, anchor, positive, negative, distances, t1, t2, beta, reduction, output_mask):
    return tuple(anchor.new_empty(anchor.shape) if needed else None for needed in output_mask)


def _setup_distances_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    _, distances = output
    ctx.mark_non_differentiable(distances)
    # No (B, 2) tensor of zeros for the distances' unused gradient.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(anchor, positive, negative, distances)
    ctx.settings = (t1, t2, beta, reduction)


def _backward_from_distances(ctx, grad_output, _grad_distances):
    if grad_output is None:  # (materialize_grads is off)
        return (None,) * 7
    anchor, positive, negative, distances = ctx.saved_tensors
    output_mask = list(ctx.needs_input_grad[:3])
    grads = triplet_hinge_loss_backward_from_distances_op(
        grad_output, anchor, positive, negative, distances, *ctx.settings, output_mask
    )
    return (*grads, None, None, None, None)


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss_with_distances",
    _backward_from_distances,
    setup_context=_setup_distances_context,
)


# Its double backward: the plain backward's formula. The distances only pick
# the masks, which are piecewise constant: their gradient is zero.
def _setup_from_distances_context(ctx, inputs, output):
    grad_output, anchor, positive, negative, _distances, *settings, output_mask = inputs
    _setup_backward_context(
        ctx, (grad_output, anchor, positive, negative, *settings, output_mask), output
    )


def _backward_of_backward_from_distances(ctx, grad_ga, grad_gp, grad_gn):
    grad_g, grad_a, grad_p, grad_n, *rest = _backward_of_backward(ctx, grad_ga, grad_gp, grad_gn)
    return (grad_g, grad_a, grad_p, grad_n, None, *rest)


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss_backward_from_distances",
    _backward_of_backward_from_distances,
    setup_context=_setup_from_distances_context,
)


def triplet_hinge_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    t1: float,
    t2: float,
    beta: float,
    reduction: str = "mean",
    grad_in_forward: bool = False,
) -> Tensor:
    """The triplet hinge loss, computed by the C++ operator.

    Same arguments and results as `reference_triplet_hinge_loss`. The C++
    operator checks the tensors; the hyper-parameters are checked here.

    On CUDA tensors, when a backward can follow, the operator also saves
    each row's two squared distances, so that the backward reads each row
    once (9 B D numbers moved by a training step, not 12 B D).

    grad_in_forward=True: when a backward can follow (grad mode is on and an
    input requires gradients) and the inputs are CPU or CUDA tensors, compute
    the gradients in the forward pass and keep them until backward. It moves
    fewer bytes only for a backward with grad_output exactly 1
    (`loss.backward()` on a scalar loss); it moves more when no backward
    runs and when grad_output is not 1 (loss scaling, `loss / k` for
    gradient accumulation, reduction="none" followed by `.mean()`). On the
    CPU, backward reads grad_output's value in eager mode and scales under
    torch.compile; on CUDA, a kernel reads it on the device and scales the
    saved gradients in place where it is not 1, so nothing synchronises (as
    CUDA-graph capture requires; tests/test_saved_distances.py checks the
    capture on a GPU). Under torch.compile the compiled backward first copies
    the saved gradients, and moves as many bytes as scaling. On
    CUDA, one pass needs rows that fit the kernel's registers (contiguous,
    16-byte aligned, dim a multiple of 16 bytes and at most 32 KiB per row);
    other rows take the forward saving distances and its backward. It holds
    the three gradients in memory between forward and backward, in addition
    to the inputs, which are saved too (for double backward).

    Aliasing: with grad_output exactly 1, backward returns the saved gradient
    tensors themselves, not copies. With `retain_graph=True`, two calls of
    `torch.autograd.grad` return the same tensor object; changing one in
    place makes the next backward through this graph raise autograd's
    "modified by an inplace operation" error instead of returning wrong
    values. (`.backward()` into `.grad` is unaffected: autograd copies a
    gradient that is still referenced elsewhere before accumulating.) On
    CUDA the in-place scaling changes the saved gradients: a second backward
    through the same graph (retain_graph=True) raises that error.
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    needs_grad = [t.requires_grad for t in (anchor, positive, negative)]
    backward_can_follow = torch.is_grad_enabled() and any(needs_grad)
    # The operators with kernels for the CPU and CUDA; other devices (meta)
    # take the plain operator, whose fake implementation serves them.
    device = anchor.device.type
    if grad_in_forward and backward_can_follow and device in ("cpu", "cuda"):
        return triplet_hinge_loss_with_grads_op(
            anchor, positive, negative, t1, t2, beta, reduction, needs_grad
        )[0]
    if backward_can_follow and device == "cuda":
        return triplet_hinge_loss_with_distances_op(
            anchor, positive, negative, t1, t2, beta, reduction
        )[0]
    return triplet_hinge_loss_op(
        anchor, positive, negative, t1, t2, beta, reduction
    )


class CppTripletHingeLoss(TripletHingeLoss):
    """Chapter 1's module, computing the loss with the C++ operator."""

    loss_function = staticmethod(triplet_hinge_loss)


# Autocast. Under torch.autocast("cpu", dtype=torch.bfloat16), or
# torch.autocast("cuda", dtype=torch.float16 or torch.bfloat16), a model's
# layers run in lower precision and hand the loss lower-precision embeddings.
# Like torch's own losses (triplet_margin_loss is on autocast's float32 list),
# the operator then computes in float32, on either device: the squared
# distances sum D products, which in bfloat16 (8 significant bits) would lose
# most of their digits and in float16 can overflow (65504). Casting every
# floating-point input also lets float16 activations meet a float32 tensor
# (a bank of negatives), which the kernels refuse as a dtype mismatch. The
# casts are ordinary differentiable ops, so gradients reach the embeddings in
# their own dtype.
# grad_in_forward's operator and the one saving distances follow the same rule.
for _name in ("triplet_hinge_loss", "triplet_hinge_loss_with_grads", "triplet_hinge_loss_with_distances"):
    for _device in ("cpu", "cuda"):
        torch.library.register_autocast(f"extending_pytorch::{_name}", _device, torch.float32)
