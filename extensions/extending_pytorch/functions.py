"""Chapter 3: autograd Functions with hand-written backward passes.

Each Function here is derived in chapter 3 and checked there with gradcheck:

- `LinearFunction`: y = x W^T + b, skipping gradients nobody needs;
- `Exp`: saves its output, because exp' = exp;
- `GlobalMaxPool`: max over H x W, with non-differentiable indices;
- `TripletHingeLossFunction`: the triplet hinge loss with its analytic
  gradient, in the `setup_context` style that torch.func needs, with a
  backward made of differentiable ops so it supports double backward;
  torch.compile traces it whole (fullgraph=True);
- `TripletHingeLossFunctionWithJvp`: the same Function plus a `jvp` for
  forward-mode AD (torch.func.jvp, jacfwd, hessian). Dynamo does not trace
  Functions with a custom jvp, so torch.compile graph-breaks on this one.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from extending_pytorch.reference import (
    TripletHingeLoss,
    check_hyperparameters,
    check_triplet_inputs,
)


class LinearFunction(Function):
    """y = x W^T + b for x (N, in), W (out, in) and an optional b (out,)."""

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        output = x @ weight.T
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        # Compute only what some input needs: a frozen weight costs nothing.
        if ctx.needs_input_grad[0]:
            grad_x = grad_output @ weight
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.T @ x
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(dim=0)
        # Called without a bias, forward had two inputs: autograd drops a
        # trailing None beyond them (a tensor there would be an error).
        return grad_x, grad_weight, grad_bias


class Exp(Function):
    """exp(x), saving its output: the derivative of exp is exp itself."""

    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class GlobalMaxPool(Function):
    """The maximum of each (n, c) plane of an (N, C, H, W) tensor.

    Returns the values, shaped (N, C, 1, 1), and the flat indices of the
    maxima within each plane, shaped (N, C), as torch's max pooling does.
    """

    @staticmethod
    def forward(ctx, x):
        n, c, h, w = x.shape
        values, indices = x.reshape(n, c, h * w).max(dim=-1)
        ctx.save_for_backward(indices)
        ctx.input_shape = x.shape
        ctx.mark_non_differentiable(indices)
        return values.reshape(n, c, 1, 1), indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        # grad_indices is always zero: the indices were marked
        # non-differentiable. Each plane's gradient goes to its maximum.
        (indices,) = ctx.saved_tensors
        n, c, h, w = ctx.input_shape
        grad = grad_values.reshape(n, c, 1)
        zeros = grad.new_zeros(n, c, h * w)
        # scatter into fresh zeros is differentiable in grad: double
        # backward works (in place, scatter_, would too; the old version's
        # .data, which hides the write from autograd, did not).
        grad_x = zeros.scatter(-1, indices.unsqueeze(-1), grad)
        return grad_x.reshape(n, c, h, w)


def global_max_pool(x: Tensor) -> tuple[Tensor, Tensor]:
    """`GlobalMaxPool` with a check of its input."""
    if not isinstance(x, Tensor) or x.dim() != 4:
        got = f"{x.dim()}-D" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"x must be a 4-D (N, C, H, W) tensor, got {got}")
    if x.shape[2] * x.shape[3] == 0:
        raise ValueError(f"x must have H * W > 0, got shape {tuple(x.shape)}")
    return GlobalMaxPool.apply(x)


class TripletHingeLossFunction(Function):
    """The triplet hinge loss with a hand-written, differentiable backward.

    Written in the `setup_context` style: `forward` takes no ctx, and
    `setup_context` saves what backward needs; that is what torch.func.grad
    and jacrev need. `generate_vmap_rule` adds torch.func.vmap (and so
    per-sample gradients). torch.compile traces its forward and backward
    into its graph.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(anchor, positive, negative, t1, t2, beta, reduction):
        d_ap = (anchor - positive).pow(2).sum(dim=-1)
        d_an = (anchor - negative).pow(2).sum(dim=-1)
        push = torch.clamp(d_ap - d_an, min=t1)
        per_triplet = push + beta * torch.clamp(d_ap, min=t2)
        if reduction == "mean":
            return per_triplet.mean()
        if reduction == "sum":
            return per_triplet.sum()
        return per_triplet

    @staticmethod
    def setup_context(ctx, inputs, output):
        anchor, positive, negative, t1, t2, beta, reduction = inputs
        # Save the inputs; backward recomputes the differences from them.
        # That costs no memory only where the inputs are alive anyway
        # (chapter 3, section 10 measures where they are not).
        ctx.save_for_backward(anchor, positive, negative)
        ctx.t1, ctx.t2, ctx.beta, ctx.reduction = t1, t2, beta, reduction

    @staticmethod
    def backward(ctx, grad_output):
        anchor, positive, negative = ctx.saved_tensors
        diff_p, diff_n = anchor - positive, anchor - negative
        d_ap = diff_p.pow(2).sum(dim=-1)
        d_an = diff_n.pow(2).sum(dim=-1)
        # 1 strictly above the bound, 0 at it: the loss's subgradient at
        # its kinks (reference.py, and chapter 1, explain the choice).
        push = (d_ap - d_an > ctx.t1).to(anchor.dtype)
        pull = (d_ap > ctx.t2).to(anchor.dtype)
        g = grad_output  # dL/d(loss_i): a scalar, or one value per triplet
        if ctx.reduction == "mean":
            g = g / anchor.shape[0]
        # dL/dd_ap = g (push + beta pull) and dL/dd_an = -g push; times
        # dd_ap/dp = -2 (a - p) and dd_an/dn = -2 (a - n).
        w_ap = (2 * g * (push + ctx.beta * pull)).unsqueeze(-1)
        w_an = (2 * g * push).unsqueeze(-1)
        grad_p = -w_ap * diff_p
        grad_n = w_an * diff_n
        grad_a = -(grad_p + grad_n)
        needed = ctx.needs_input_grad
        return (
            grad_a if needed[0] else None,
            grad_p if needed[1] else None,
            grad_n if needed[2] else None,
            None,  # t1
            None,  # t2
            None,  # beta
            None,  # reduction
        )


class TripletHingeLossFunctionWithJvp(TripletHingeLossFunction):
    """`TripletHingeLossFunction` plus forward-mode AD.

    `jvp` gives it torch.func.jvp, jacfwd, and hessian (forward over
    reverse). The price: Dynamo does not trace a Function with a custom
    jvp, so torch.compile graph-breaks on it and runs it eagerly.
    """

    @staticmethod
    def setup_context(ctx, inputs, output):
        TripletHingeLossFunction.setup_context(ctx, inputs, output)
        ctx.save_for_forward(*inputs[:3])  # anchor, positive, negative

    @staticmethod
    def jvp(ctx, tangent_a, tangent_p, tangent_n, *_):
        # Forward mode: the loss's change along tangents of the inputs.
        # A tensor input without a tangent receives a zero-filled one (as of
        # torch 2.13 to 2.15); the None branch below is only a safeguard.
        anchor, positive, negative = ctx.saved_tensors
        zero = torch.zeros_like(anchor)
        ta, tp, tn = (
            zero if t is None else t for t in (tangent_a, tangent_p, tangent_n)
        )
        diff_p, diff_n = anchor - positive, anchor - negative
        d_ap = diff_p.pow(2).sum(dim=-1)
        d_an = diff_n.pow(2).sum(dim=-1)
        push = (d_ap - d_an > ctx.t1).to(anchor.dtype)
        pull = (d_ap > ctx.t2).to(anchor.dtype)
        # d(d_ap) = 2 (a - p) . (ta - tp), and likewise for d_an.
        dd_ap = 2 * (diff_p * (ta - tp)).sum(dim=-1)
        dd_an = 2 * (diff_n * (ta - tn)).sum(dim=-1)
        per_triplet = push * (dd_ap - dd_an) + ctx.beta * pull * dd_ap
        if ctx.reduction == "mean":
            return per_triplet.mean()
        if ctx.reduction == "sum":
            return per_triplet.sum()
        return per_triplet


def triplet_hinge_loss_function(
    anchor, positive, negative, *, t1, t2, beta, reduction="mean"
) -> Tensor:
    """The loss through `TripletHingeLossFunction`, arguments checked."""
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    return TripletHingeLossFunction.apply(
        anchor, positive, negative, t1, t2, beta, reduction
    )


def triplet_hinge_loss_function_with_jvp(
    anchor, positive, negative, *, t1, t2, beta, reduction="mean"
) -> Tensor:
    """The loss through `TripletHingeLossFunctionWithJvp` (forward mode)."""
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    check_triplet_inputs(anchor, positive, negative)
    return TripletHingeLossFunctionWithJvp.apply(
        anchor, positive, negative, t1, t2, beta, reduction
    )


class HandwrittenTripletHingeLoss(TripletHingeLoss):
    """Chapter 1's module, computing the loss with `TripletHingeLossFunction`.

    Settings, their checks, `forward` and `extra_repr` are inherited.
    """

    loss_function = staticmethod(triplet_hinge_loss_function)
