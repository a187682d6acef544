"""Exercises a learner can trust: each check accepts the solution and rejects a named wrong answer.

The checks are taken from the notebooks themselves (the cell that defines `check_exercise_N`), run in
a namespace prepared by the chapter's import cell, against the chapter's folded solution and against
the plausible wrong answers below. A check that let one of them through would make a learner believe
a wrong answer.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re

import pytest
from torch.autograd.gradcheck import GradcheckError

from conftest import cell_source, chapter_notebooks, load_notebook

# Chapters whose exercises must each name a wrong answer here (the others are added as they adopt the form).
COVERED = ("01_", "02_", "03_", "04_", "05_", "06_", "07_", "90_")

# (notebook stem, exercise) -> [(what is wrong, source defining the answer's name, exception, message regex)]
WRONG_ANSWERS = {
    ("01_custom_loss", 1): [
        (
            "returns the reference (which calls clamp for its values)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    return ep.reference_triplet_hinge_loss(anchor, positive, negative, t1=t1, t2=t2, beta=beta)\n",
            AssertionError,
            r"use F\.relu instead of \['clamp'\]",
        ),
        (
            "uses relu but forgets the constants t1 and beta * t2",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + beta * F.relu(d_ap - t2)).mean()\n",
            AssertionError,
            r"not close",
        ),
        (
            "computes with torch.maximum and calls F.relu on the side (passed the old name-only check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    F.relu(torch.zeros(1))\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = torch.maximum(d_ap - d_an, torch.tensor(t1))\n"
            "    return (push + beta * torch.maximum(d_ap, torch.tensor(t2))).mean()\n",
            AssertionError,
            r"compute the loss with F\.relu: its graph holds \['MaximumBackward0'\]",
        ),
        (
            "relu for the push term, torch.where for the pull term (passed the old check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    pull = torch.where(d_ap > t2, d_ap, torch.full_like(d_ap, t2))\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * pull).mean()\n",
            AssertionError,
            r"compute the loss with F\.relu: its graph holds \['WhereBackward0'\]",
        ),
        (
            "the sign of t inside relu flipped: relu(x + t) - t",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an + t1) - t1 + beta * (F.relu(d_ap + t2) - t2)).mean()\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("01_custom_loss", 2): [
        (
            ">= counts the triplets on a boundary, which receive no gradient",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an >= t1).float().mean().item(), (d_ap >= t2).float().mean().item()\n",
            AssertionError,
            r"push fraction is off",
        ),
        (
            "the push rule right, but >= in the pull rule",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean().item(), (d_ap >= t2).float().mean().item()\n",
            AssertionError,
            r"pull fraction is off",
        ),
        (
            "distances without the square (F.pairwise_distance)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = F.pairwise_distance(anchor, positive)\n"
            "    d_an = F.pairwise_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean().item(), (d_ap > t2).float().mean().item()\n",
            AssertionError,
            r"(push|pull) fraction is off",
        ),
        (
            "returns 0-d tensors instead of Python floats (no .item())",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean(), (d_ap > t2).float().mean()\n",
            AssertionError,
            r"return two Python floats \(\.item\(\)\), got Tensor and Tensor",
        ),
    ],
    ("01_custom_loss", 3): [
        (
            "pairs an anchor with itself (no i != j)",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    return (same[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"0 missing, 32 invalid",
        ),
        (
            "lists each anchor-positive pair once (i < j), not both orders",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    upper = torch.ones(len(labels), len(labels), dtype=torch.bool).triu(1)\n"
            "    return ((same & upper)[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"22 missing, 0 invalid",
        ),
        (
            "forgets labels[i] == labels[j]: any two distinct indices and a negative of j's class",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool)\n"
            "    valid = distinct[:, :, None] & ~same[None, :, :]\n"
            "    return valid.nonzero(as_tuple=True)\n",
            AssertionError,
            r"0 missing, \d+ invalid",
        ),
    ],
    ("02_numpy_scipy_function", 1): [
        (
            "always returns float64 (torch.from_numpy without like=)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = torch.from_numpy(scipy.special.lambertw(x.detach().numpy()).real)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"float32 input gave torch\.float64",
        ),
        (
            "saves the input and calls scipy again in backward (right gradient, output not saved)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "saves x beside w and calls scipy again in backward (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(x, w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, _ = ctx.saved_tensors\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "saves w.detach(): right first derivative, wrong second (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w.detach())\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"second derivative is off: save w itself, not a detached copy",
        ),
        (
            "forgets the 1 + w factor: W' = 1 / e^W",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / torch.exp(w)\n",
            AssertionError,
            r"gradient is off",
        ),
    ],
    ("02_numpy_scipy_function", 2): [
        (
            "backward in gaussian_filter1d's default mode, reflect",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1)\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"gradient is off: is the backward the same filter, mode='constant'\?",
        ),
        (
            "the right backward calling scipy, without @once_differentiable (an old official solution): "
            "a gradient penalty built on it silently loses its term",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"the backward calls scipy: mark it @once_differentiable, or make it the Function itself",
        ),
        (
            "scipy in backward, given a history by adding 0 * grad: gradcheck passes, second derivative 0",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=grad) + 0 * grad, None\n",
            AssertionError,
            r"the second derivative is off: make the backward the Function itself",
        ),
        (
            "forward and backward both in mode nearest (A not symmetric)",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='nearest')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='nearest')\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("02_numpy_scipy_function", 3): [
        (
            "softmax without the incoming gradient",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return torch.exp(x - lse[..., None])\n",
            AssertionError,
            r"not close",
        ),
        (
            "softmax from scipy in backward, no @once_differentiable: second derivative silently wrong (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        soft = numpy_ops.from_numpy(scipy.special.softmax(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        return grad[..., None] * soft\n",
            AssertionError,
            r"second derivative is off: compute the backward with torch operations",
        ),
        (
            "always float64: torch.from_numpy of a float64 result, no like= (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = torch.from_numpy(scipy.special.logsumexp(x.detach().numpy().astype('float64'), axis=-1))\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - lse[..., None])\n",
            AssertionError,
            r"torch\.float32 input gave torch\.float64",
        ),
        (
            "unstable: log(exp(x).sum()) in forward, exp(x) / exp(x).sum() in backward (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(np.log(np.exp(numpy_ops.to_numpy(x)).sum(axis=-1)), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * x.exp() / x.exp().sum(dim=-1, keepdim=True)\n",
            AssertionError,
            r"torch\.float32: the value overflowed",
        ),
        (
            "scipy's stable forward, but the softmax as exp(x) / exp(x).sum() in backward",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * x.exp() / x.exp().sum(dim=-1, keepdim=True)\n",
            AssertionError,
            r"torch\.float32: the gradient overflowed: compute exp\(x - lse\)",
        ),
        (
            "keeps x as an attribute on ctx, saves only lse (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.x = x\n"
            "        ctx.save_for_backward(lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (lse,) = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(ctx.x - lse[..., None])\n",
            AssertionError,
            r"save x with ctx\.save_for_backward, not as an attribute on ctx",
        ),
    ],
    ("03_handwritten_backward", 1): [
        (
            "the buggy sigmoid(-x) left as it is",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(-x)\n",
            AssertionError,
            r"the gradient is still off",
        ),
        (
            "right first derivative, but @once_differentiable",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x)\n",
            AssertionError,
            r"the second derivative is off: make the backward differentiable",
        ),
        (
            "right first derivative, computed from a detached x",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x.detach())\n",
            AssertionError,
            r"the second derivative is off: make the backward differentiable",
        ),
    ],
    ("03_handwritten_backward", 2): [
        (
            "divides by the norm and forgets the projection term",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(norm)\n"
            "        return x / norm\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (norm,) = ctx.saved_tensors\n"
            "        return grad_output / norm\n",
            AssertionError,
            r"the gradient is off: did you keep the projection term",
        ),
        (
            "saves the norm, an intermediate (the old official solution): double backward wrong",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        y = x / norm\n"
            "        ctx.save_for_backward(y, norm)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        y, norm = ctx.saved_tensors\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"the second derivative is off: save only inputs and outputs",
        ),
        (
            "the projection with x in place of y",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(x, y)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        x, y = ctx.saved_tensors\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        return (grad_output - x * (x * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"the gradient is off",
        ),
    ],
    ("03_handwritten_backward", 3): [
        (
            "the classic style, forward(ctx, x)",
            "FuncExp = fn.Exp\n",
            RuntimeError,
            r"must override the setup_context staticmethod",
        ),
        (
            "setup_context style without a vmap rule",
            "class FuncExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            RuntimeError,
            r"vmap",
        ),
        (
            "keeps the output as an attribute on ctx (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.result = output\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output * ctx.result\n",
            AssertionError,
            r"save the output with ctx\.save_for_backward, not as an attribute on ctx",
        ),
        (
            "returns the saved output without multiplying by the incoming gradient",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return result\n",
            AssertionError,
            r"the gradient is off",
        ),
        (
            "saves the input and recomputes exp in backward (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(inputs[0])\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * x.exp()\n",
            AssertionError,
            r"save the output, and only the output, with ctx\.save_for_backward",
        ),
        (
            "saves the input beside the output (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(inputs[0], output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        _, result = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"save the output, and only the output, with ctx\.save_for_backward",
        ),
        (
            "saves output.detach(): right first derivative, wrong second (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output.detach())\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"the second derivative is off: save the output itself, not a detached copy",
        ),
    ],
    ("04_cpp_extension", 1): [
        (
            "counts the fused design like the two-pass one (9 B D)",
            "def minimum_bytes(batch, dim, element_size, design):\n"
            "    numbers = {\"forward\": 3, \"two-pass\": 9, \"fused\": 9}[design] * batch * dim\n"
            "    return numbers * element_size\n",
            AssertionError,
            r"fused",
        ),
    ],
    ("04_cpp_extension", 2): [
        (
            "never trains: returns the two starting weights",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for _ in range(2):\n"
            "        torch.manual_seed(0)\n"
            "        finals.append(torch.nn.Linear(16, 4).weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"did it train\?",
        ),
        (
            "trains with the reference twice: the C++ operator never runs",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for criterion in (ep.TripletHingeLoss(-1.0, 0.05, 0.1), ep.TripletHingeLoss(-1.0, 0.05, 0.1)):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            criterion(*(net(t) for t in batch)).backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"was the C\+\+ operator used\?",
        ),
    ],
    ("04_cpp_extension", 3): [
        (
            "returns the first row's gradient instead of the sum over rows",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row[:1]\n",
            AssertionError,
            r"not close",
        ),
        (
            "drops the pull mask (as if d_ap > t2 always held)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("04_cpp_extension", 4): [
        (
            "says grad_in_forward always moves 6 B D (ignores the scaling)",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\":\n"
            "        return 9 if backward else 3\n"
            "    return 6\n",
            AssertionError,
            r"scaling reads and writes the three saved gradients",
        ),
        (
            "says a forward without backward costs 3 B D under grad_in_forward",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\" or not backward:\n"
            "        return 9 if backward else 3\n"
            "    return 6 if grad_output_is_one else 12\n",
            AssertionError,
            r"the forward still writes three gradients",
        ),
    ],
    ("04_cpp_extension", 5): [
        (
            "the distance, not its square: a square root too many",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) { return (x - y).square().sum(1).sqrt(); }\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"float32: the values are off; is each difference squared\?",
        ),
        (
            "saves a temporary: subtracts and squares in x's memory (the schema says x is not mutated)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) { return x.sub_(y).square_().sum(1); }\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"opcheck, \(1, 1\) float32: .*'test_schema': 'Argument x is not defined as mutable but was mutated'.*"
            r"\nthe schema's `-> Tensor` promises a new tensor",
        ),
        (
            "indexes data_ptr() as if contiguous (row * D + j), without .contiguous()",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            "  const int64_t rows = x.size(0), dim = x.size(1);\n"
            "  at::Tensor out = at::empty({rows}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const scalar_t* xs = x.data_ptr<scalar_t>();\n"
            "    const scalar_t* ys = y.data_ptr<scalar_t>();\n"
            "    scalar_t* d = out.data_ptr<scalar_t>();\n"
            "    for (int64_t i = 0; i < rows; ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < dim; ++j) {\n"
            "        const scalar_t diff = xs[i * dim + j] - ys[i * dim + j];\n"
            "        total += diff * diff;\n"
            "      }\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x transposed, strides \(1, 33\): the values are off; index with the strides, or call \.contiguous\(\)",
        ),
        (
            "checks dims and dtypes but not that y has the shape of x (reads only x's rows and columns of y)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2 && y.dim() == 2, "squared_distance: x and y must be 2-D");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,\n"
            '              "squared_distance: x must be float32 or float64");\n'
            "  const int64_t rows = x.size(0), dim = x.size(1);\n"
            "  at::Tensor out = at::empty({rows}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    for (int64_t i = 0; i < rows; ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < dim; ++j) {\n"
            "        total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      }\n"
            "      out.data_ptr<scalar_t>()[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.randn\(3, 4\), y = torch\.randn\(5, 6\) raised no error: reject it with a TORCH_CHECK naming y",
        ),
        (
            "ATen's arithmetic with no shape check: its broadcasting error does not name y",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D");\n'
            '  TORCH_CHECK(x.is_floating_point(), "squared_distance: x must be floating point");\n'
            "  return (x - y).square().sum(1);\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"y = torch\.randn\(5, 6\) raised RuntimeError\('The size of tensor a \(4\) must match the size of tensor b "
            r"\(6\).*raise it with a TORCH_CHECK naming y",
        ),
    ],
    ("05_cuda_kernel", 1): [
        (
            "no cap on the grid (2^37 blocks for 2^40 rows, past gridDim.x's limit)",
            "def launch_shape(batch):\n    return (batch + 7) // 8, 256\n",
            AssertionError,
            r"capped at 2\^20 blocks",
        ),
    ],
    ("05_cuda_kernel", 2): [
        (
            "stops one exchange early (offsets 16, 8, 4, 2)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[i ^ offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum",
        ),
        (
            "rotates (lane i + offset) instead of exchanging (lane i XOR offset)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[(i + offset) % 32] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
        (
            "skips the exchanges and hands every lane the total",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    return [sum(values)] * 32\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
    ],
    ("05_cuda_kernel", 3): [
        (
            "counts only the inputs (3 B D numbers, not 9 B D)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 3 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"take 1 ms",
        ),
    ],
    ("05_cuda_kernel", 4): [
        (
            "no broadcast: lane 0 holds the sum, the other lanes their partial sums",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"only lane 0 holds the sum: broadcast it with __shfl_sync",
        ),
        (
            "the shuffle inside divergent code (if (lane < 16)): lanes 16-31 never reach it",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) {\n"
            "    if (lane < 16) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  }\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            RuntimeError,
            r"exercise_4\.cu:11: __shfl_sync\(\) .* diverged: lane 0 .* waits at __shfl_down_sync\(\) at exercise_4\.cu:9",
        ),
        (
            "stops one exchange early (offset > 1): lane 0 misses the other half of the sums",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 1; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"lane 0 does not hold the row's sum",
        ),
        (
            "the row bound only on the write: the two warps without a row read past the input",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  if (row < rows) out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:6: the warp of row 10 has no row \(rows = 10\); "
            r"a warp with row >= rows must not read or write",
        ),
        (
            "no row bound: the two warps without a row read and write past the tensors",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:6: the warp of row 10 has no row \(rows = 10\); "
            r"a warp with row >= rows must not read or write",
        ),
    ],
    ("05_cuda_kernel", 5): [
        (
            "no row bound: the warp past the last row reads past the inputs",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_5\.cu:7: the warp of row 5 accessed memory past the last row",
        ),
        (
            "no column bound: the lanes read whole chunks of 32 columns, past the end of the last row",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int k = 0; k < (dim + 31) / 32; ++k) {\n"
            "    const int j = 32 * k + lane;\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_5\.cu:9: row 4 read past its last column",
        ),
        (
            "no warp reduction: lane 0 writes its own partial sum",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"not torch's distances \(does lane 0 write the warp's sum of all 32 lanes\?\)",
        ),
    ],
    ("06_triton_kernel", 1): [
        (
            "no mask on the last block (reads past the end of each row)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"read past the end of a row",
        ),
        (
            "one block as wide as the row (next_power_of_2(dim)), no loop",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, BLOCK)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](\n"
            "        x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(x.shape[1])\n"
            "    )\n"
            "    return out\n",
            AssertionError,
            r"launched with BLOCK=128: loop over the row 16 columns at a time",
        ),
        (
            "a single hard-coded block, tl.arange(0, 64) with a mask, launched with BLOCK=16 (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, 64)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong on rows of 100 columns: does the loop cover the whole row\?",
        ),
        (
            "one program loops over every row, given their number (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, n_rows, BLOCK: tl.constexpr):\n"
            "    for row in range(0, n_rows):\n"
            "        total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "        for start in range(0, dim, BLOCK):\n"
            "            cols = start + tl.arange(0, BLOCK)\n"
            "            mask = cols < dim\n"
            "            cols = cols.to(tl.int64)\n"
            "            x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "            total += x * x\n"
            "        tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(1,)](x, out, x.shape[1], x.stride(0), x.stride(1), x.shape[0], BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"takes \['n_rows'\] besides the exercise's arguments: .* launch one program per row",
        ),
        (
            "32-bit offsets: row * row_stride and col * col_stride in int32 (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong where row \* row_stride passes 2\*\*31: compute offsets in 64 bits",
        ),
        (
            "64-bit rows, but col * col_stride still in int32",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong where col \* col_stride passes 2\*\*31: compute offsets in 64 bits",
        ),
        (
            "returns the sums in the input's dtype (float16 for float16 rows)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"return the sums in float32, got torch\.float16",
        ),
        (
            "plain torch, no kernel",
            "def squared_norms(x):\n    return x.pow(2).sum(1)\n",
            AssertionError,
            r"no Triton kernel was launched",
        ),
        (
            "copies the view with .contiguous() and ignores col_stride",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < dim, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    x = x.contiguous()\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"the kernel received a copy of the view",
        ),
        (
            "32-bit offsets behind a .float() copy (float32 rows pass through uncopied; float16 views are copied)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    x = x.float()\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"the kernel received a copy of the float16 view \(x\.float\(\)\? x\.contiguous\(\)\?\)",
        ),
        (
            "squares float16 values in float16 (no .to(tl.float32) before x * x)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"an infinity: a square was computed in float16",
        ),
    ],
    ("06_triton_kernel", 2): [
        (
            "block - dim % block (a full last block is not idle)",
            "def idle_lanes(dim, block):\n    return block - dim % block\n",
            AssertionError,
            r"64 columns in blocks of 64: .* got 64 \(a full last block has no idle lanes",
        ),
        (
            "dim % block: the lanes in use in the last block, not the idle ones",
            "def idle_lanes(dim, block):\n    return dim % block\n",
            AssertionError,
            r"37 columns in blocks of 16: the last block holds 5 column\(s\), so 11 lanes are idle, got 5",
        ),
        (
            "block - dim: as if the row fit in one block",
            "def idle_lanes(dim, block):\n    return max(block - dim, 0)\n",
            AssertionError,
            r"37 columns in blocks of 16: .* 11 lanes are idle, got 0",
        ),
        (
            "counts the idle lanes of every block but the last (dim // block * block - dim)",
            "def idle_lanes(dim, block):\n    return abs(dim // block * block - dim)\n",
            AssertionError,
            r"37 columns in blocks of 16: .* 11 lanes are idle, got 5",
        ),
        (
            "block - dim % block, except for a row within one block (block - dim)",
            "def idle_lanes(dim, block):\n    return block - dim % block if dim > block else block - dim\n",
            AssertionError,
            r"128 columns in blocks of 64: .* got 64 \(a full last block has no idle lanes",
        ),
    ],
    ("07_involution", 1): [
        (
            "forgets the dilation",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + 2 * p - (k - 1) - 1) // s + 1\n"
            "                 for n, k, s, p in zip((height, width), kernel, stride, padding))\n",
            AssertionError,
            r"\(5, 3\) for \(9, 8, \(3, 2\), \(2, 3\), \(1, 0\), \(2, 1\)\): expected \(4, 3\)",
        ),
        (
            "rounds the division instead of flooring it",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple(round((n + 2 * p - d * (k - 1) - 1) / s) + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"\(4, 5\) for \(9, 8, \(3, 3\), \(3, 2\), \(1, 1\), \(1, 1\)\): expected \(3, 4\)",
        ),
    ],
    ("07_involution", 2): [
        (
            "sums over every channel, not the channels of each group",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, c, kernel[0] * kernel[1], out_h, out_w)\n"
            "    total = (windows * grad_out.view(b, c, 1, out_h, out_w)).sum(dim=1)\n"
            "    return total[:, None].expand(b, groups, -1, -1, -1).reshape(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"sum over the channels of each group only",
        ),
        (
            "computes in float32 and returns float32 for float64 inputs",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x.float(), kernel, padding=padding)\n"
            "    windows = windows.view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.float().view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"dtype torch.float32, expected torch.float64",
        ),
    ],
    ("07_involution", 3): [
        (
            "counts the output, not the K x K windows",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"count the windows",
        ),
        (
            "ignores dtype_bytes (always 4 bytes an element)",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * kernel * size * size * 4 / 2**20\n",
            AssertionError,
            r"use dtype_bytes",
        ),
    ],
    ("90_appendix_allocator", 1): [
        (
            "counts elements instead of bytes",
            "def pages(tensor):\n    return -(-tensor.numel() // 4096)\n",
            AssertionError,
            r"expected 2048 pages, got 512",
        ),
    ],
}

# Grading a student's fork: EXERCISE_CHECKS_FROM=/path/to/your/notebooks takes each check (and the
# chapter's import cell) from your copy of the chapter; only the answers come from this checkout.
CHECKS_FROM = os.environ.get("EXERCISE_CHECKS_FROM")


def checks_source(path):
    """The notebook the checks are read from: this one, or its namesake in EXERCISE_CHECKS_FROM."""
    return pathlib.Path(CHECKS_FROM) / path.name if CHECKS_FROM else path


CHECK = re.compile(r"^def (check_exercise_(\d+))\(", re.MULTILINE)


def covered_chapters():
    return [p for p in chapter_notebooks() if p.name.startswith(COVERED)]


def exercises(path):
    """(number, solution cell, check cell) for each exercise of a notebook."""
    cells = load_notebook(path)["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and (match := CHECK.search(cell_source(cell))):
            found.append((int(match.group(2)), cells[index - 1], cell))
    return found


def namespace(path):
    """The chapter's imports (the cell that imports the book's package), run in a fresh namespace."""
    cells = load_notebook(checks_source(path))["cells"]
    imports = next(
        cell_source(c) for c in cells
        if c["cell_type"] == "code" and "import extending_pytorch as ep" in cell_source(c)
    )
    names = {"__name__": "exercise_check"}
    exec(imports, names)
    # Wrong answers below also use these.
    exec(
        "from torch.autograd import Function\n"
        "from torch.autograd.function import once_differentiable\n"
        "from torch.autograd.gradcheck import GradcheckError\n",
        names,
    )
    return names


def load_check(path, number, names):
    """Define check_exercise_<number> (and its helpers) from the notebook; returns (check, answer name)."""
    check_cell = next(c for n, _, c in exercises(checks_source(path)) if n == number)
    module = ast.parse(cell_source(check_cell))
    *definitions, call = module.body
    assert isinstance(call, ast.Expr) and ast.unparse(call.value.func) == f"check_exercise_{number}", (
        "a check cell ends by calling its check on the solution"
    )
    exec(compile(ast.Module(definitions, type_ignores=[]), str(path), "exec"), names)
    return names[f"check_exercise_{number}"], ast.unparse(call.value.args[0])


def exercise_ids():
    return [
        (path, number)
        for path in covered_chapters()
        for number, _, _ in exercises(path)
    ]


WRONG = [
    pytest.param(stem, number, wrong, id=f"{stem}-ex{number}-{wrong[0]}")
    for (stem, number), answers in WRONG_ANSWERS.items()
    for wrong in answers
]


def path_of(stem):
    (path,) = [p for p in chapter_notebooks() if p.stem == stem]
    return path


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_every_exercise_names_a_wrong_answer_its_check_rejects(path, number):
    assert WRONG_ANSWERS.get((path.stem, number)), (
        f"{path.name}, exercise {number}: name a plausible wrong answer in tests/test_exercises.py"
    )


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_solution_is_folded_on_the_site_in_jupyter_and_on_colab(path, number):
    solution = next(s for n, s, _ in exercises(path) if n == number)
    metadata = solution["metadata"]
    assert "hide-input" in metadata.get("tags", []), "the site folds cells tagged hide-input"
    assert metadata.get("jupyter", {}).get("source_hidden") is True, "Jupyter folds source_hidden cells"
    assert metadata.get("cellView") == "form", "Colab shows a form instead of the code"
    assert cell_source(solution).startswith("# @title "), "Colab's form view needs a # @title line"


def needs_missing_emulator(stem: str, number: int) -> bool:
    """Chapter 5's exercises 4 and 5 build the reader's CUDA in the SIMT emulator, which needs
    g++ and CUDA's headers; where they are missing the check says so and skips."""
    if (stem, number) not in {("05_cuda_kernel", 4), ("05_cuda_kernel", 5)}:
        return False
    from extending_pytorch import emulator

    return not emulator.available()


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_check_accepts_the_solution(path, number, capsys):
    if needs_missing_emulator(path.stem, number):
        pytest.skip("needs the SIMT emulator (g++ and CUDA's headers)")
    names = namespace(path)
    check, answer = load_check(path, number, names)
    solution = next(s for n, s, _ in exercises(path) if n == number)
    exec(cell_source(solution), names)
    check(names[answer])
    assert f"Exercise {number} passed" in capsys.readouterr().out


@pytest.mark.parametrize("stem, number, wrong", WRONG)
def test_check_rejects_the_named_wrong_answer(stem, number, wrong):
    what, source, error, message = wrong
    if needs_missing_emulator(stem, number):
        pytest.skip("needs the SIMT emulator (g++ and CUDA's headers)")
    path = path_of(stem)
    names = namespace(path)
    check, answer = load_check(path, number, names)
    exec(source, names)
    with pytest.raises(error, match=message):
        check(names[answer])
