"""The reference triplet hinge loss of chapter 1, and the small helpers of extending_pytorch."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda, sample_inputs, kink_batch, kink_gradients, KINK_SETTINGS

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)


def loss_by_loops(anchor, positive, negative, t1, t2, beta):
    """An independent definition: the formula triplet by triplet, in numpy float64."""
    a, p, n = (
        t.detach().cpu().double().numpy() for t in (anchor, positive, negative)
    )
    values = []
    for row in range(a.shape[0]):
        d_ap = float(np.sum((a[row] - p[row]) ** 2))
        d_an = float(np.sum((a[row] - n[row]) ** 2))
        values.append(max(d_ap - d_an, t1) + beta * max(d_ap, t2))
    return np.array(values)


def _test_values_match_the_formula(device):
    for anchor, positive, negative in sample_inputs(
        device, dtype=torch.float64
    ):
        expected = loss_by_loops(anchor, positive, negative, **HYPER)
        per_triplet = ep.reference_triplet_hinge_loss(
            anchor, positive, negative, **HYPER, reduction="none"
        )
        assert per_triplet.shape == (anchor.shape[0],)
        np.testing.assert_allclose(
            per_triplet.cpu().numpy(), expected, rtol=1e-12
        )
        mean = ep.reference_triplet_hinge_loss(
            anchor, positive, negative, **HYPER
        )
        total = ep.reference_triplet_hinge_loss(
            anchor, positive, negative, **HYPER, reduction="sum"
        )
        assert mean.shape == total.shape == ()
        assert math.isclose(mean.item(), expected.mean(), rel_tol=1e-12)
        assert math.isclose(total.item(), expected.sum(), rel_tol=1e-12)


def test_values_match_the_formula_cpu():
    _test_values_match_the_formula("cpu")


@requires_cuda
def test_values_match_the_formula_cuda():
    _test_values_match_the_formula("cuda")


def _test_gradcheck(device):
    for inputs in sample_inputs(
        device, requires_grad=True, dtype=torch.float64
    ):
        for reduction in ep.REDUCTIONS:
            assert torch.autograd.gradcheck(
                lambda a, p, n: ep.reference_triplet_hinge_loss(
                    a, p, n, **HYPER, reduction=reduction
                ),
                inputs,
            )


def test_gradcheck_cpu():
    _test_gradcheck("cpu")


@requires_cuda
def test_gradcheck_cuda():
    _test_gradcheck("cuda")


def test_equals_triplet_margin_with_squared_distance_minus_margin():
    margin = 0.7
    for inputs in sample_inputs("cpu", requires_grad=True):
        ours = ep.reference_triplet_hinge_loss(
            *inputs, t1=-margin, t2=0.0, beta=0.0, reduction="none"
        )
        builtin = nn.TripletMarginWithDistanceLoss(
            distance_function=ep.squared_distance,
            margin=margin,
            reduction="none",
        )
        theirs = builtin(*inputs)
        assert_close(ours + margin, theirs)
        for g_ours, g_theirs in zip(
            torch.autograd.grad(ours.sum(), inputs),
            torch.autograd.grad(theirs.sum(), inputs),
        ):
            assert_close(g_ours, g_theirs)


def test_gradient_at_the_kinks_is_zero_on_every_torch():
    # The loss's own subgradient, whatever torch.clamp does: a reference built on plain
    # clamp gives row 0's negative and row 2's inputs a gradient on torch <= 2.13.
    inputs = [t.requires_grad_() for t in kink_batch()]
    grads = torch.autograd.grad(ep.reference_triplet_hinge_loss(*inputs, **KINK_SETTINGS), inputs)
    for got, want, name in zip(grads, kink_gradients(), ("anchor", "positive", "negative")):
        assert torch.equal(got, want), f"{name}: {got.tolist()} != {want.tolist()}"


def test_gradient_just_off_a_kink_is_the_one_sided_slope():
    # d_ap - d_an = -3 + 1e-9 > t1: the push term is active, 2 (n - p) = 2 for the anchor.
    anchor = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    one, two = torch.ones(1, 1, dtype=torch.float64), torch.full((1, 1), 2.0, dtype=torch.float64)
    loss = ep.reference_triplet_hinge_loss(anchor, one, two, t1=-3.0 - 1e-9, t2=0.0, beta=0.0)
    (grad,) = torch.autograd.grad(loss, anchor)
    assert grad.item() == 2.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_floor_at_has_clamps_values_and_a_strict_mask_as_gradient(dtype):
    x = torch.tensor([-2.0, 1.0, 1.5, float("nan"), float("inf"), -float("inf")], dtype=dtype)
    x.requires_grad_()
    value = ep.floor_at(x, 1.0)
    torch.testing.assert_close(value, torch.clamp(x.detach(), min=1.0), equal_nan=True, rtol=0, atol=0)
    assert value.dtype == dtype
    (grad,) = torch.autograd.grad(value.sum(), x)
    assert grad.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_torch_clamp_changed_its_boundary_gradient_in_2_14():
    # What chapter 1, section 5.2 tells: pass-through (1) until torch 2.13, 0 from torch
    # 2.14 on (pytorch#184574). CI runs this on both sides of the change.
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    (grad,) = torch.autograd.grad(torch.clamp(x, min=1.0).sum(), x)
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    expected = [0.0, 1.0, 1.0] if (major, minor) < (2, 14) else [0.0, 0.0, 1.0]
    assert grad.tolist() == expected, f"torch {torch.__version__}"


def test_gradient_is_zero_not_nan_at_coincident_points():
    anchor = torch.zeros(2, 3, requires_grad=True)
    ep.reference_triplet_hinge_loss(
        anchor, torch.zeros(2, 3), torch.ones(2, 3), **HYPER
    ).backward()
    assert torch.isfinite(anchor.grad).all()


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64]
)
def test_result_keeps_the_input_dtype(dtype):
    anchor, positive, negative = (
        t.to(dtype) for t in torch.randn(3, 4, 5).unbind(0)
    )
    assert (
        ep.TripletHingeLoss(**HYPER)(anchor, positive, negative).dtype == dtype
    )


def test_empty_batch_follows_torch_reductions():
    empty = torch.empty(0, 4)
    assert math.isnan(
        ep.reference_triplet_hinge_loss(empty, empty, empty, **HYPER).item()
    )
    assert (
        ep.reference_triplet_hinge_loss(
            empty, empty, empty, **HYPER, reduction="sum"
        ).item()
        == 0.0
    )
    assert ep.reference_triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="none"
    ).shape == (0,)


def test_module_matches_function_and_shows_its_settings():
    module = ep.TripletHingeLoss(t1=-1, t2=0.5, beta=0.25, reduction="sum")
    assert (
        repr(module)
        == "TripletHingeLoss(t1=-1.0, t2=0.5, beta=0.25, reduction='sum')"
    )
    assert list(module.parameters()) == [] and module.state_dict() == {}
    anchor, positive, negative = torch.randn(3, 6, 2).unbind(0)
    expected = ep.reference_triplet_hinge_loss(
        anchor, positive, negative, t1=-1, t2=0.5, beta=0.25, reduction="sum"
    )
    assert_close(module(anchor, positive, negative), expected)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (
            dict(t1=0.5),
            ValueError,
            "t1 must be <= 0 (it is minus the margin by which d_an should exceed d_ap), got 0.5",
        ),
        (dict(t1=float("nan")), ValueError, "t1 must be finite, got nan"),
        (
            dict(t2=-1.0),
            ValueError,
            "t2 must be >= 0 (a squared distance), got -1.0",
        ),
        (dict(t2=float("inf")), ValueError, "t2 must be finite, got inf"),
        (
            dict(beta=-0.5),
            ValueError,
            "beta must be >= 0 (a negative weight would push positives apart), got -0.5",
        ),
        (dict(beta="0.5"), TypeError, "beta must be a real number, got str"),
        (dict(t1=True), TypeError, "t1 must be a real number, got bool"),
        (
            dict(t2=torch.tensor(0.5)),
            TypeError,
            "t2 must be a real number, got Tensor",
        ),
        (
            dict(reduction="avg"),
            ValueError,
            "reduction must be one of ('mean', 'sum', 'none'), got 'avg'",
        ),
    ],
)
def test_bad_hyperparameters_are_refused_by_module_and_function(
    bad, error, message
):
    settings = {**HYPER, "reduction": "mean", **bad}
    with pytest.raises(error, match=re.escape(message)):
        ep.TripletHingeLoss(**settings)
    anchor = torch.randn(2, 3)
    with pytest.raises(error, match=re.escape(message)):
        ep.reference_triplet_hinge_loss(anchor, anchor, anchor, **settings)


GOOD = torch.randn(4, 3)


@pytest.mark.parametrize(
    "inputs, error, message",
    [
        (
            (GOOD.tolist(), GOOD, GOOD),
            TypeError,
            "anchor must be a torch.Tensor, got list",
        ),
        (
            (GOOD, GOOD[0], GOOD),
            ValueError,
            "positive must be 2-D (batch, dim), got 1-D with shape (3,)",
        ),
        (
            (GOOD, GOOD, GOOD[None]),
            ValueError,
            "negative must be 2-D (batch, dim), got 3-D with shape (1, 4, 3)",
        ),
        (
            (GOOD, GOOD[:, :2], GOOD),
            ValueError,
            "positive must have the same shape as anchor (4, 3), got (4, 2)",
        ),
        (
            (GOOD, GOOD, GOOD[:3]),
            ValueError,
            "negative must have the same shape as anchor (4, 3), got (3, 3)",
        ),
        (
            (GOOD.long(), GOOD, GOOD),
            TypeError,
            "anchor must have a floating-point dtype, got torch.int64",
        ),
        (
            (GOOD, GOOD.double(), GOOD),
            TypeError,
            "positive must have the same dtype as anchor (torch.float32), got torch.float64",
        ),
        (
            (GOOD, GOOD, GOOD.to("meta")),
            ValueError,
            "negative must be on the same device as anchor (cpu), got meta",
        ),
    ],
)
def test_bad_inputs_are_refused_with_a_clear_message(inputs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ep.reference_triplet_hinge_loss(*inputs, **HYPER)


def test_show_source_titles_files_relative_to_the_repository():
    listing = ep.show_source(ep.reference_triplet_hinge_loss)
    assert listing.title == "extensions/extending_pytorch/reference.py"
    assert listing.code.startswith("def reference_triplet_hinge_loss(")
    assert "```python" in listing._repr_markdown_()
    by_path = ep.show_source("extensions/extending_pytorch/reference.py")
    assert (
        by_path.title == "extensions/extending_pytorch/reference.py"
        and "class TripletHingeLoss" in by_path.code
    )


def test_show_source_rejects_what_it_cannot_show():
    with pytest.raises(
        FileNotFoundError,
        match="obj must name a file relative to the repository root",
    ):
        ep.show_source("extensions/no_such_file.cpp")
    with pytest.raises(
        TypeError,
        match="obj must be a function, class, module or a file path, got int",
    ):
        ep.show_source(42)


@pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"),
    reason="glibc malloc tuning is Linux-only",
)
def test_keep_freed_memory_applies_on_linux_glibc():
    assert ep.keep_freed_memory() is True


def test_keep_freed_memory_refuses_what_mallopt_cannot_take():
    # Checked before any mallopt call: nothing is set.
    with pytest.raises(ValueError, match="limit_bytes must be at least 0, got -1"):
        ep.keep_freed_memory(-1)
    with pytest.raises(ValueError, match=r"mmap_bytes must be in \[0, 2\*\*31 - 1\] \(mallopt takes a C int\), got 2147483648"):
        ep.benchmarking._set_malloc_thresholds(2**31, 0)


def test_show_source_selects_lines_of_a_file():
    listing = ep.show_source(
        "extensions/extending_pytorch/reference.py",
        start="def squared_distance(",
        stop="def reference_triplet_hinge_loss(",
    )
    assert listing.code.startswith("def squared_distance(")
    assert "return (x - y).pow(2).sum(dim=-1)" in listing.code
    assert "def reference_triplet_hinge_loss(" not in listing.code
    with pytest.raises(
        ValueError, match="start marker 'no such line' not found"
    ):
        ep.show_source(
            "extensions/extending_pytorch/reference.py", start="no such line"
        )
    with pytest.raises(
        TypeError, match="start and stop select lines of files only"
    ):
        ep.show_source(ep.squared_distance, start="def")
