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


def _is_exactly_one(grad_output: Tensor) -> bool:
    # Only for a real CPU tensor: reading its value needs data. Under
    # torch.compile it is a fake tensor, and the compiled backward scales.
    if type(grad_output) is not torch.Tensor or grad_output.device.type != "cpu":
        return False
    return bool((grad_output == 1).all())


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

    grad_in_forward=True: when a backward can follow (grad mode is on and an
    input requires gradients) and the inputs are CPU tensors, compute the
    gradients in the forward pass and keep them until backward. It moves
    fewer bytes only for a backward with grad_output exactly 1 in eager mode
    (`loss.backward()` on a scalar loss); it moves more when no backward
    runs, when grad_output is not 1 (loss scaling, `loss / k` for gradient
    accumulation, reduction="none" followed by `.mean()`) and always under
    torch.compile, whose backward graph scales. It holds the three gradients
    in memory between forward and backward, in addition to the inputs, which
    are saved too (for double backward). Other devices take the plain
    operator, which has CUDA kernels (chapter 5).

    Aliasing: with grad_output exactly 1, backward returns the saved gradient
    tensors themselves, not copies. With `retain_graph=True`, two calls of
    `torch.autograd.grad` return the same tensor object; changing one in
    place makes the next backward through this graph raise autograd's
    "modified by an inplace operation" error instead of returning wrong
    values. (`.backward()` into `.grad` is unaffected: autograd copies a
    gradient that is still referenced elsewhere before accumulating.)
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    needs_grad = [t.requires_grad for t in (anchor, positive, negative)]
    # The one-pass kernel is CPU only; on other devices (CUDA, meta) the plain
    # operator and its two-pass kernels run, with the same results.
    on_cpu = anchor.device.type == "cpu"
    if grad_in_forward and on_cpu and torch.is_grad_enabled() and any(needs_grad):
        return triplet_hinge_loss_with_grads_op(
            anchor, positive, negative, t1, t2, beta, reduction, needs_grad
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
# grad_in_forward's operator follows the same rule.
for _name in ("triplet_hinge_loss", "triplet_hinge_loss_with_grads"):
    for _device in ("cpu", "cuda"):
        torch.library.register_autocast(f"extending_pytorch::{_name}", _device, torch.float32)
