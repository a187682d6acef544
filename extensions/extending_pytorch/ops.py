"""Chapter 4: the fused triplet hinge loss as a C++ operator.

The C++ library (csrc/triplet.cpp) defines the schemas and the CPU kernels
with TORCH_LIBRARY. This module adds what Python knows best:

- fake implementations, so torch.compile can trace the operators;
- the autograd formula, whose backward is the C++ backward operator;
- the public `triplet_hinge_loss` and the module `CppTripletHingeLoss`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from extending_pytorch.native import load_ops
from extending_pytorch.reference import TripletHingeLoss, check_hyperparameters

# Defines torch.ops.extending_pytorch.*; if unbuilt, says how to build.
load_ops()

triplet_hinge_loss_op = torch.ops.extending_pytorch.triplet_hinge_loss.default
triplet_hinge_loss_backward_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_backward.default
)


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss")
def _(anchor, positive, negative, t1, t2, beta, reduction="mean"):
    # Shapes only: a scalar, or one value per triplet.
    torch._check(anchor.dim() == 2, lambda: "anchor must be 2-D (batch, dim)")
    if reduction == "none":
        return anchor.new_empty(anchor.shape[0])
    return anchor.new_empty(())


@torch.library.register_fake("extending_pytorch::triplet_hinge_loss_backward")
def _(grad_output, anchor, positive, negative, t1, t2, beta, reduction):
    return tuple(anchor.new_empty(anchor.shape) for _ in range(3))


def _setup_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    ctx.save_for_backward(anchor, positive, negative)
    ctx.settings = (t1, t2, beta, reduction)


def _backward(ctx, grad_output):
    anchor, positive, negative = ctx.saved_tensors
    grads = triplet_hinge_loss_backward_op(
        grad_output, anchor, positive, negative, *ctx.settings
    )
    needed = ctx.needs_input_grad
    return (
        *(grad if need else None for grad, need in zip(grads, needed)),
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
    grad_output, anchor, positive, negative, *settings = inputs
    ctx.save_for_backward(grad_output, anchor, positive, negative)
    ctx.settings = settings


def _backward_of_backward(ctx, grad_ga, grad_gp, grad_gn):
    g, anchor, positive, negative = ctx.saved_tensors
    t1, t2, beta, reduction = ctx.settings
    zeros = torch.zeros_like(anchor)
    grad_ga = zeros if grad_ga is None else grad_ga
    grad_gp = zeros if grad_gp is None else grad_gp
    grad_gn = zeros if grad_gn is None else grad_gn
    diff_p, diff_n = anchor - positive, anchor - negative
    d_ap, d_an = diff_p.pow(2).sum(-1), diff_n.pow(2).sum(-1)
    push = (d_ap - d_an >= t1).to(anchor.dtype)
    pull = (d_ap >= t2).to(anchor.dtype)
    scale = 1.0 / anchor.shape[0] if reduction == "mean" else 1.0
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
    grad_g = per_row if reduction == "none" else per_row.sum()
    return (
        grad_g,
        grad_diff_p + grad_diff_n,  # anchor
        -grad_diff_p,  # positive
        -grad_diff_n,  # negative
        None,
        None,
        None,
        None,
    )


torch.library.register_autograd(
    "extending_pytorch::triplet_hinge_loss_backward",
    _backward_of_backward,
    setup_context=_setup_backward_context,
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
) -> Tensor:
    """The triplet hinge loss, computed by the C++ operator.

    Same arguments and results as `reference_triplet_hinge_loss`. The C++
    operator checks the tensors; the hyper-parameters are checked here.
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    return triplet_hinge_loss_op(
        anchor, positive, negative, t1, t2, beta, reduction
    )


class CppTripletHingeLoss(TripletHingeLoss):
    """Chapter 1's module, computing the loss with the C++ operator."""

    loss_function = staticmethod(triplet_hinge_loss)
