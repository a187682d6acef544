"""Checking an implementation of the triplet loss against chapter 1's reference.

Used by the tests and by the chapters that build a new rung. The important
part is *how* inputs with unusual memory layouts are passed: a view must reach
the implementation as the view itself. `view.detach().clone()` would hand it a
fresh contiguous tensor, and the strided, misaligned or stride-0 code path
would never run. So each case starts from a base tensor (the leaf that
requires gradients), takes the view, checks that the view really has the
layout its name claims, passes the view, and compares gradients with respect
to the base: for an expanded input, that is the sum over the rows that share
one row of memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.testing import assert_close

from extending_pytorch.reference import reference_triplet_hinge_loss


@dataclass(frozen=True)
class Layout:
    """A way to lay out a (batch, dim) input: base shape, view, and its claim."""

    describe: str
    base_shape: Callable[[int, int], tuple[int, ...]]
    view: Callable[[Tensor, int, int], Tensor]  # (base, batch, dim) -> view
    # Whether a (batch, dim) view has the layout described (checked on every use).
    holds: Callable[[Tensor], bool]


def _aligned16(t: Tensor) -> bool:
    return t.data_ptr() % 16 == 0


LAYOUTS: dict[str, Layout] = {
    "contiguous": Layout(
        "rows one after another, elements adjacent",
        lambda b, d: (b, d),
        lambda base, b, d: base,
        lambda v: v.is_contiguous(),
    ),
    "misaligned": Layout(
        "x[:, 1:] of a (B, D + 1) tensor: unit element stride, but the first "
        "row starts one element past a 16-byte boundary",
        lambda b, d: (b, d + 1),
        lambda base, b, d: base[:, 1:],
        lambda v: v.stride(1) == 1 and v.storage_offset() == 1 and not _aligned16(v),
    ),
    "row-padded": Layout(
        "x[:, :D] of a (B, D + 1) tensor: the first row starts aligned, later "
        "rows one element further each",
        lambda b, d: (b, d + 1),
        lambda base, b, d: base[:, :d],
        lambda v: v.size(0) <= 1 or (v.stride() == (v.size(1) + 1, 1) and v.storage_offset() == 0),
    ),
    "offset": Layout(
        "a (B, D) view one element into its storage: rows adjacent (row "
        "stride D), but no row start on a 16-byte boundary when D is a "
        "multiple of 4 floats",
        lambda b, d: (b * d + 1,),
        lambda base, b, d: base[1:].view(b, d),
        lambda v: v.stride() == (v.size(1), 1) and v.storage_offset() == 1 and not _aligned16(v),
    ),
    "column-strided": Layout(
        "x[:, ::2] of a (B, 2D) tensor: every other element",
        lambda b, d: (b, 2 * d),
        lambda base, b, d: base[:, ::2],
        lambda v: v.size(1) <= 1 or v.stride(1) == 2,
    ),
    "transposed": Layout(
        "x.T of a (D, B) tensor: rows are columns of memory",
        lambda b, d: (d, b),
        lambda base, b, d: base.T,
        lambda v: v.size(0) <= 1 or v.size(1) <= 1 or (v.stride(0) == 1 and v.stride(1) == v.size(0)),
    ),
    "expanded": Layout(
        "x.expand(B, D) of a (1, D) tensor: every row is the same memory (row stride 0)",
        lambda b, d: (1, d),
        lambda base, b, d: base.expand(b, d),
        lambda v: v.size(0) <= 1 or v.stride(0) == 0,
    ),
}


def make_view(
    layout: str,
    batch: int,
    dim: int,
    *,
    dtype=torch.float32,
    device="cpu",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """A base tensor (a leaf that requires grad) and a (batch, dim) view of it.

    Raises AssertionError if the view does not have the layout its name says.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    spec = LAYOUTS[layout]
    base = torch.randn(spec.base_shape(batch, dim), generator=generator, dtype=torch.float64)
    base = base.to(device=device, dtype=dtype).requires_grad_()
    view = spec.view(base, batch, dim)
    assert view.shape == (batch, dim), (layout, view.shape)
    # (An empty view has no layout to speak of.)
    assert view.numel() == 0 or spec.holds(view), (
        f"the {layout!r} view of shape {tuple(view.shape)} has strides {view.stride()} "
        f"and offset {view.storage_offset()}: not {spec.describe}"
    )
    return base, view


def check_against_reference(
    loss_fn,
    layouts: tuple[str, str, str],
    batch: int,
    dim: int,
    *,
    reduction: str = "mean",
    dtype=torch.float32,
    device="cpu",
    seed: int = 0,
    hyper: dict | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    reference_dtype=None,
) -> None:
    """Values and gradients of `loss_fn` on views of the given layouts.

    `loss_fn(anchor, positive, negative, *, t1, t2, beta, reduction)` receives
    the views themselves; gradients are taken with respect to the bases and
    compared with the reference's, computed on the same views of copies of the
    bases, with a random upstream gradient. `reference_dtype` (e.g. float64)
    computes the reference in a wider type than the inputs, as the truth for
    half-precision implementations; `rtol`/`atol` then apply to the values
    and gradients converted to it.
    """
    hyper = hyper or dict(t1=-1.0, t2=0.5, beta=0.5)
    generator = torch.Generator().manual_seed(seed)
    cases = [
        make_view(layout, batch, dim, dtype=dtype, device=device, generator=generator)
        for layout in layouts
    ]
    bases = [base for base, _ in cases]
    views = [view for _, view in cases]
    ref_dtype = reference_dtype or dtype
    ref_bases = [base.detach().to(ref_dtype).requires_grad_() for base in bases]
    ref_views = [
        LAYOUTS[layout].view(base, batch, dim) for layout, base in zip(layouts, ref_bases)
    ]
    actual = loss_fn(*views, **hyper, reduction=reduction)
    expected = reference_triplet_hinge_loss(*ref_views, **hyper, reduction=reduction)
    close = {} if rtol is None else dict(rtol=rtol, atol=atol)
    assert actual.dtype == dtype and actual.device == views[0].device
    assert_close(actual.to(ref_dtype), expected, equal_nan=True, **close)
    weights = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    weights = weights.to(device=device, dtype=dtype)
    grads = torch.autograd.grad(actual, bases, weights)
    ref_grads = torch.autograd.grad(expected, ref_bases, weights.to(ref_dtype))
    for layout, grad, ref_grad in zip(layouts, grads, ref_grads):
        assert grad.dtype == dtype
        assert_close(
            grad.to(ref_dtype), ref_grad, **close, msg=lambda m: f"gradient of the {layout} input: {m}"
        )
