"""Chapter 4: the C++ operator extending_pytorch::triplet_hinge_loss, and z = 2x + y.

Written in the style of pytorch/extension-cpp: `_test_x(device)` behind
`test_x_cpu` and `test_x_cuda` (the latter skipped without a GPU).
"""

from __future__ import annotations

import importlib
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda, sample_inputs
from extending_pytorch import bench, native, ops, scale_add

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
OP = torch.ops.extending_pytorch.triplet_hinge_loss.default
BACKWARD_OP = torch.ops.extending_pytorch.triplet_hinge_loss_backward.default


def assert_matches_reference(inputs, reduction, **close):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    views = [
        leaf.expand_as(t) if t.stride(0) == 0 else leaf
        for leaf, t in zip(leaves, inputs)
    ]
    expected = ep.reference_triplet_hinge_loss(
        *views, **HYPER, reduction=reduction
    )
    actual = ops.triplet_hinge_loss(*inputs, **HYPER, reduction=reduction)
    assert (
        actual.dtype == inputs[0].dtype and actual.device == inputs[0].device
    )
    assert_close(actual, expected, equal_nan=True, **close)


def _test_values_and_gradients(device):
    for dtype in (torch.float32, torch.float64):
        for inputs in sample_inputs(device, requires_grad=True, dtype=dtype):
            for reduction in ep.REDUCTIONS:
                expected = ep.reference_triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                actual = ops.triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                assert actual.dtype == dtype
                assert_close(actual, expected)
                weights = torch.randn_like(
                    expected
                )  # a non-trivial upstream gradient
                grads = torch.autograd.grad(actual, inputs, weights)
                ref_grads = torch.autograd.grad(expected, inputs, weights)
                for grad, ref_grad in zip(grads, ref_grads):
                    assert_close(grad, ref_grad)


def test_values_and_gradients_cpu():
    _test_values_and_gradients("cpu")


@requires_cuda
def test_values_and_gradients_cuda():
    _test_values_and_gradients("cuda")


def _test_gradcheck(device):
    for inputs in sample_inputs(
        device, requires_grad=True, dtype=torch.float64
    ):
        for reduction in ep.REDUCTIONS:
            assert torch.autograd.gradcheck(
                lambda a, p, n: ops.triplet_hinge_loss(
                    a, p, n, **HYPER, reduction=reduction
                ),
                inputs,
            )


def test_gradcheck_cpu():
    _test_gradcheck("cpu")


@requires_cuda
def test_gradcheck_cuda():
    _test_gradcheck("cuda")


def _test_opcheck(device):
    for inputs in sample_inputs(
        device, requires_grad=True, dtype=torch.float64
    )[:3]:
        for reduction in ep.REDUCTIONS:
            torch.library.opcheck(OP, (*inputs, -1.0, 0.5, 0.5, reduction))
    a, p, n = sample_inputs(device, dtype=torch.float64)[3]
    for reduction, grad_shape in (("mean", ()), ("none", (a.shape[0],))):
        grad = torch.randn(grad_shape, dtype=torch.float64, device=device)
        torch.library.opcheck(
            BACKWARD_OP, (grad, a, p, n, -1.0, 0.5, 0.5, reduction)
        )


def test_opcheck_cpu():
    _test_opcheck("cpu")


@requires_cuda
def test_opcheck_cuda():
    _test_opcheck("cuda")


def _test_torch_compile_fullgraph(device):
    inputs = [
        t.requires_grad_()
        for t in torch.randn(3, 37, 21, device=device).unbind(0)
    ]
    eager = lambda a, p, n: ops.triplet_hinge_loss(
        a, p, n, **HYPER
    )  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(eager, fullgraph=True)
    loss_compiled, loss_eager = compiled(*inputs), eager(*inputs)
    assert torch.equal(loss_compiled, loss_eager)
    for g_c, g_e in zip(
        torch.autograd.grad(loss_compiled, inputs),
        torch.autograd.grad(loss_eager, inputs),
    ):
        assert torch.equal(g_c, g_e)


def test_torch_compile_fullgraph_cpu():
    _test_torch_compile_fullgraph("cpu")


@requires_cuda
def test_torch_compile_fullgraph_cuda():
    _test_torch_compile_fullgraph("cuda")


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_double_backward_is_correct(reduction):
    loss = lambda a, p, n: ops.triplet_hinge_loss(  # noqa: E731
        a, p, n, **HYPER, reduction=reduction
    )
    for inputs in sample_inputs(
        "cpu", requires_grad=True, dtype=torch.float64
    ):
        assert torch.autograd.gradgradcheck(loss, inputs)


def test_hessian_vector_product_matches_the_reference():
    a, p, n = torch.randn(3, 6, 4, dtype=torch.float64).unbind(0)
    v = torch.randn_like(a)
    _, ours = torch.autograd.functional.hvp(
        lambda x: ops.triplet_hinge_loss(x, p, n, **HYPER), a, v, strict=True
    )
    _, reference = torch.autograd.functional.hvp(
        lambda x: ep.reference_triplet_hinge_loss(x, p, n, **HYPER),
        a,
        v,
        strict=True,
    )
    assert_close(ours, reference)


def test_non_contiguous_and_expanded_inputs():
    base = torch.randn(8, 10)
    layouts = {
        "column slice": base[:, ::2],
        "transposed": torch.randn(5, 8).T,
        "expanded row": torch.randn(1, 5).expand(8, 5),
        "contiguous": torch.randn(8, 5),
    }
    for first in layouts.values():
        for second in layouts.values():
            for reduction in ep.REDUCTIONS:
                assert_matches_reference(
                    (first, second, layouts["contiguous"]), reduction
                )
                assert_matches_reference(
                    (layouts["contiguous"], first, second), reduction
                )


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(0, 12),
    dim=st.integers(1, 40),
    layouts=st.lists(
        st.sampled_from(["contiguous", "transposed", "sliced", "expanded"]),
        min_size=3,
        max_size=3,
    ),
    reduction=st.sampled_from(ep.REDUCTIONS),
    seed=st.integers(0, 2**16),
)
def test_hypothesis_shapes_and_strides(batch, dim, layouts, reduction, seed):
    generator = torch.Generator().manual_seed(seed)

    def make(layout):
        if layout == "transposed":
            return torch.randn(
                dim, batch, generator=generator, dtype=torch.float64
            ).T
        if layout == "sliced":
            return torch.randn(
                batch, 2 * dim, generator=generator, dtype=torch.float64
            )[:, ::2]
        if layout == "expanded":
            return torch.randn(
                1, dim, generator=generator, dtype=torch.float64
            ).expand(batch, dim)
        return torch.randn(
            batch, dim, generator=generator, dtype=torch.float64
        )

    inputs = [make(layout) for layout in layouts]
    assert_matches_reference(inputs, reduction)
    if batch == 0:
        return
    leaves = [t.clone().requires_grad_() for t in inputs]
    grads = torch.autograd.grad(
        ops.triplet_hinge_loss(*leaves, **HYPER, reduction=reduction).sum(),
        leaves,
    )
    ref_grads = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(
            *leaves, **HYPER, reduction=reduction
        ).sum(),
        leaves,
    )
    for grad, ref_grad in zip(grads, ref_grads):
        assert_close(grad, ref_grad)


def test_gradient_of_an_expanded_input_sums_over_rows():
    prototype = torch.randn(1, 6, dtype=torch.float64, requires_grad=True)
    anchor, negative = torch.randn(2, 9, 6, dtype=torch.float64).unbind(0)
    (grad,) = torch.autograd.grad(
        ops.triplet_hinge_loss(
            anchor, prototype.expand(9, 6), negative, **HYPER
        ),
        prototype,
    )
    (expected,) = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(
            anchor, prototype.expand(9, 6), negative, **HYPER
        ),
        prototype,
    )
    assert_close(grad, expected)


def test_empty_batch_follows_the_reference():
    empty = torch.empty(0, 5)
    assert math.isnan(
        ops.triplet_hinge_loss(empty, empty, empty, **HYPER).item()
    )
    assert (
        ops.triplet_hinge_loss(
            empty, empty, empty, **HYPER, reduction="sum"
        ).item()
        == 0
    )
    assert ops.triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="none"
    ).shape == (0,)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_inf_inputs_follow_the_reference(value):
    a, p, n = torch.randn(3, 4, 5).unbind(0)
    a[1, 2] = value
    p[3, 0] = value
    for reduction in ep.REDUCTIONS:
        assert_matches_reference((a, p, n), reduction)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_float(dtype):
    # 2048 terms per distance: summed in half precision itself, the error would be large.
    a, p, n = (t.to(dtype) for t in torch.randn(3, 16, 2048).unbind(0))
    actual = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    expected = ep.reference_triplet_hinge_loss(
        *(t.float() for t in (a, p, n)), **HYPER, reduction="none"
    )
    assert actual.dtype == dtype
    assert_close(actual.float(), expected, rtol=1e-2, atol=1e-2)


def test_module_matches_chapter_one():
    settings_ = dict(t1=-0.5, t2=0.1, beta=0.3, reduction="sum")
    module = ops.CppTripletHingeLoss(**settings_)
    assert (
        repr(module)
        == "CppTripletHingeLoss(t1=-0.5, t2=0.1, beta=0.3, reduction='sum')"
    )
    inputs = torch.randn(3, 5, 4).unbind(0)
    assert_close(module(*inputs), ep.TripletHingeLoss(**settings_)(*inputs))


# ---- Every TORCH_CHECK, with its message ----

GOOD = torch.randn(4, 3)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (GOOD[0], GOOD, GOOD),
            "anchor must be 2-D (batch, dim), got 1-D with shape [3]",
        ),
        (
            (GOOD, GOOD[None], GOOD),
            "positive must be 2-D (batch, dim), got 3-D with shape [1, 4, 3]",
        ),
        (
            (GOOD, GOOD, GOOD[0]),
            "negative must be 2-D (batch, dim), got 1-D with shape [3]",
        ),
        (
            (GOOD.long(), GOOD, GOOD),
            "anchor must have a floating-point dtype, got Long",
        ),
        (
            (GOOD, GOOD[:, :2], GOOD),
            "positive must have the same shape as anchor [4, 3], got [4, 2]",
        ),
        (
            (GOOD, GOOD, GOOD[:3]),
            "negative must have the same shape as anchor [4, 3], got [3, 3]",
        ),
        (
            (GOOD, GOOD.double(), GOOD),
            "positive must have the same dtype as anchor (Float), got Double",
        ),
    ],
)
def test_input_checks(args, message):
    with pytest.raises(
        RuntimeError, match=re.escape(f"triplet_hinge_loss: {message}")
    ):
        OP(*args, -1.0, 0.5, 0.5, "mean")


def test_reduction_check():
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "triplet_hinge_loss: reduction must be 'mean', 'sum' or 'none', got 'avg'"
        ),
    ):
        OP(GOOD, GOOD, GOOD, -1.0, 0.5, 0.5, "avg")


def test_finite_settings_check():
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "triplet_hinge_loss: t1, t2 and beta must be finite, got t1=nan, t2=0.5, beta=0.5"
        ),
    ):
        OP(GOOD, GOOD, GOOD, float("nan"), 0.5, 0.5, "mean")


@pytest.mark.parametrize(
    "grad, reduction, message",
    [
        (
            torch.ones(4),
            "mean",
            "grad_output must be a scalar for reduction='mean', got shape [4]",
        ),
        (
            torch.ones(()),
            "none",
            "grad_output must have shape (4,) for reduction='none', got []",
        ),
        (
            torch.ones((), dtype=torch.float64),
            "sum",
            "grad_output must have the dtype of anchor (Float), got Double",
        ),
    ],
)
def test_backward_checks(grad, reduction, message):
    with pytest.raises(
        RuntimeError,
        match=re.escape(f"triplet_hinge_loss_backward: {message}"),
    ):
        BACKWARD_OP(grad, GOOD, GOOD, GOOD, -1.0, 0.5, 0.5, reduction)


@requires_cuda
def test_device_mismatch_check_cuda():
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "positive must be on the same device as anchor (cuda:0), got cpu"
        ),
    ):
        OP(GOOD.cuda(), GOOD, GOOD.cuda(), -1.0, 0.5, 0.5, "mean")


def test_python_wrapper_checks_the_settings():
    with pytest.raises(ValueError, match=re.escape("t1 must be <= 0")):
        ops.triplet_hinge_loss(GOOD, GOOD, GOOD, t1=1.0, t2=0.5, beta=0.5)


def test_missing_library_says_how_to_build(monkeypatch):
    real_import = importlib.import_module

    def fake_import(name, *args):
        if name == "extending_pytorch._C":
            raise ImportError("No module named 'extending_pytorch._C'")
        return real_import(name, *args)

    monkeypatch.setattr(native, "_ops_loaded", False)
    monkeypatch.setattr(native.importlib, "import_module", fake_import)
    with pytest.raises(
        RuntimeError,
        match=r"not built[\s\S]*make build[\s\S]*--no-build-isolation",
    ):
        native.load_ops()


# ---- z = 2x + y (pybind11) ----


def test_scale_add_forward_backward_and_gradcheck():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    layer = scale_add.ScaleAdd()
    assert_close(layer(x, y), 2 * x + y)
    assert torch.autograd.gradcheck(layer, (x, y))


@pytest.mark.parametrize(
    "x, y, message",
    [
        (
            torch.ones(2, 3),
            torch.ones(3, 2),
            "y must have the shape of x [2, 3], got [3, 2]",
        ),
        (
            torch.ones(2),
            torch.ones(2, dtype=torch.float64),
            "y must have the dtype of x (Float), got Double",
        ),
        (
            torch.ones(2, dtype=torch.int64),
            torch.ones(2, dtype=torch.int64),
            "x must have a floating-point dtype, got Long",
        ),
    ],
)
def test_scale_add_checks(x, y, message):
    with pytest.raises(RuntimeError, match=re.escape(f"scale_add: {message}")):
        scale_add.aot_module().forward(x, y)


def test_scale_add_jit_build_matches_the_ahead_of_time_build():
    jit = native.load_jit("_scale_add")
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    assert torch.equal(jit.forward(x, y), scale_add.aot_module().forward(x, y))
    assert all(
        torch.equal(j, a)
        for j, a in zip(jit.backward(x), scale_add.aot_module().backward(x))
    )


def test_load_jit_refuses_unknown_extensions():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "name must be one of ['_C', '_scale_add'], got 'nope'"
        ),
    ):
        native.load_jit("nope")


# ---- The benchmark command ----


def test_benchmark_reports_every_implementation_task_and_ratio():
    records = bench.measure_size(
        64, 32, rounds=1, min_run_time=0.01, names=["eager", "cpp"]
    )
    assert {(r["implementation"], r["task"]) for r in records} == {
        (name, task) for name in ("eager", "cpp") for task in bench.TASKS
    }
    for record in records:
        assert record["seconds"] > 0 and record["copy_gbps"] > 0
        assert (
            record["floor_bytes"]
            == bench.FLOOR_ELEMENTS[record["task"]] * 64 * 32 * 4
        )
    ratios = bench.ratios(records, 64, 32)
    assert set(ratios) == {"eager", "fraction_of_copy"}
    assert "eager" in str(bench.table(records))
    assert "cpp" in str(bench.table(records))
