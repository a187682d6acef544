"""Chapter 4: the C++ operator extending_pytorch::triplet_hinge_loss, and z = 2x + y.

Written in the style of pytorch/extension-cpp: `_test_x(device)` behind
`test_x_cpu` and `test_x_cuda` (the latter skipped without a GPU).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import pathlib
import re
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda, sample_inputs, KINK_SETTINGS, kink_batch, kink_gradients
from extending_pytorch import bench, native, ops, scale_add, testing

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
OP = torch.ops.extending_pytorch.triplet_hinge_loss.default
BACKWARD_OP = torch.ops.extending_pytorch.triplet_hinge_loss_backward.default


def assert_matches_reference(inputs, reduction, **close):
    """Values only, for inputs that need no gradient (NaN, inf)."""
    expected = ep.reference_triplet_hinge_loss(
        *inputs, **HYPER, reduction=reduction
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
    # With inputs that require gradients (opcheck then also checks the autograd
    # registration) and with inputs that do not (the path of inference code).
    for requires_grad in (True, False):
        for inputs in sample_inputs(
            device, requires_grad=requires_grad, dtype=torch.float64
        )[:3]:
            for reduction in ep.REDUCTIONS:
                torch.library.opcheck(OP, (*inputs, -1.0, 0.5, 0.5, reduction))
    a, p, n = sample_inputs(device, dtype=torch.float64)[3]
    for reduction, grad_shape in (("mean", ()), ("none", (a.shape[0],))):
        grad = torch.randn(grad_shape, dtype=torch.float64, device=device)
        for mask in ([True, True, True], [True, True, False], [False, True, False]):
            torch.library.opcheck(
                BACKWARD_OP, (grad, a, p, n, -1.0, 0.5, 0.5, reduction, mask)
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
    torch.compiler.reset()
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


# ---- Only the gradients that are needed ----


def test_backward_computes_only_the_gradients_in_output_mask():
    a, p, n = torch.randn(3, 6, 5, dtype=torch.float64).unbind(0)
    grad = torch.tensor(0.7, dtype=torch.float64)
    full = BACKWARD_OP(grad, a, p, n, -1.0, 0.5, 0.5, "mean", [True] * 3)
    for mask in ([True, True, False], [False, False, True], [False] * 3):
        partial = BACKWARD_OP(grad, a, p, n, -1.0, 0.5, 0.5, "mean", mask)
        for needed, got, expected in zip(mask, partial, full):
            if needed:
                assert_close(got, expected)
            else:
                assert got is None


def test_autograd_asks_only_for_the_gradients_it_needs(monkeypatch):
    # A detached negative (mined negatives often are) needs no gradient: the
    # backward must not compute, allocate and write it.
    a, p = torch.randn(2, 6, 5, requires_grad=True).unbind(0)
    n = torch.randn(6, 5)
    masks = []

    def recording_backward(*args):
        masks.append(list(args[-1]))
        return BACKWARD_OP(*args)

    monkeypatch.setattr(ops, "triplet_hinge_loss_backward_op", recording_backward)
    grads = torch.autograd.grad(ops.triplet_hinge_loss(a, p, n, **HYPER), [a, p])
    assert masks == [[True, True, False]]
    expected = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(a, p, n, **HYPER), [a, p]
    )
    for grad, ref in zip(grads, expected):
        assert_close(grad, ref)


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_double_backward_of_an_empty_batch(reduction):
    # The formula used to divide by the batch size: ZeroDivisionError for "mean".
    a, p, n = (
        torch.empty(0, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)
    )
    loss = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction=reduction)
    (grad_a,) = torch.autograd.grad(loss.sum(), a, create_graph=True)
    (second,) = torch.autograd.grad(grad_a.sum(), a, materialize_grads=True)
    assert second.shape == (0, 4)


def test_double_backward_keeps_the_shape_of_grad_output():
    # grad_output of shape (1,) is accepted for a scalar loss; the gradient
    # with respect to it must have that shape too, not ().
    a, p, n = torch.randn(3, 5, 4, dtype=torch.float64).unbind(0)
    g = torch.ones(1, dtype=torch.float64, requires_grad=True)

    def grad_anchor(g_):
        return BACKWARD_OP(g_, a, p, n, -1.0, 0.5, 0.5, "sum", [True] * 3)[0]

    (grad_g,) = torch.autograd.grad(grad_anchor(g).sum(), g)
    assert grad_g.shape == (1,)
    assert torch.autograd.gradcheck(grad_anchor, (g,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_double_backward_masks_use_float_like_the_kernel(dtype):
    # A difference of 300 squares to 9e4: infinite in float16, finite in
    # float. The kernel accumulates in float, so d_ap = 9e4 < t2 = 1e5 and the
    # pull term is off; recomputed in float16 (as the formula once did), d_ap
    # would be inf and switch it on.
    a = torch.zeros(2, 1, dtype=dtype, requires_grad=True)
    p = torch.full((2, 1), 300.0, dtype=dtype)
    n = torch.full((2, 1), 1.0, dtype=dtype)
    hyper = dict(t1=-1e6, t2=1e5, beta=0.5)
    loss = ops.triplet_hinge_loss(a, p, n, **hyper, reduction="sum")
    (grad,) = torch.autograd.grad(loss, a, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), a)
    a32 = a.detach().float().requires_grad_()
    loss32 = ep.reference_triplet_hinge_loss(
        a32, p.float(), n.float(), **hyper, reduction="sum"
    )
    (grad32,) = torch.autograd.grad(loss32, a32, create_graph=True)
    (second32,) = torch.autograd.grad(grad32.sum(), a32)
    assert_close(second.float(), second32)


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


# Catches: a kernel that ignores an input's column stride (reads x[:, ::2] as
# if it were contiguous), its row stride (an expanded input read as B separate
# rows), or that takes the vectorised path for rows that are not adjacent in
# memory; and a backward that does not sum an expanded input's gradient over
# the rows sharing its memory. The views reach the operator as views.
def _test_layouts(device, layout, dim):
    for position in range(3):
        layouts = ["contiguous"] * 3
        layouts[position] = layout
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                ops.triplet_hinge_loss,
                tuple(layouts),
                9,
                dim,
                reduction=reduction,
                dtype=torch.float64,
                device=device,
                seed=position,
            )


@pytest.mark.parametrize("dim", [1, 5, 16, 67])
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_layouts_cpu(layout, dim):
    _test_layouts("cpu", layout, dim)


@requires_cuda
@pytest.mark.parametrize("dim", [1, 5, 16, 67])
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_layouts_cuda(layout, dim):
    _test_layouts("cuda", layout, dim)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [512, 513])
def test_streaming_store_path_matches_the_reference(dim, dtype):
    # The kernels switch to streaming stores above kStreamingThresholdBytes
    # (8 MiB of gradients); B=3000 crosses it for every case here (18 MiB
    # and more). D=513 leaves rows that start unaligned, so the aligned
    # streaming stores and the ordinary ones alternate along a row. Catches
    # a wrong stream intrinsic or address, a missing sfence, and a remainder
    # loop that the streaming branch skips; both the backward operator and
    # grad_in_forward's one-pass operator.
    batch = 3000
    assert 3 * batch * dim * dtype.itemsize > 8 << 20
    generator = torch.Generator().manual_seed(7)
    x = [torch.randn(batch, dim, generator=generator, dtype=dtype).requires_grad_() for _ in range(3)]
    with torch.no_grad():
        d_ap = (x[0] - x[1]).pow(2).sum(1)
    # Both branches of each mask, and no row on a kink: t2 halfway between the two
    # middle distances (t2 = the median itself puts a row exactly at d_ap == t2, where
    # the kernel's and the reference's rounding of d_ap decide the subgradient).
    middle = d_ap.sort().values[batch // 2 - 1 : batch // 2 + 1]
    hyper = dict(t1=0.0, t2=middle.mean().item(), beta=0.5)
    expected = torch.autograd.grad(ep.reference_triplet_hinge_loss(*x, **hyper), x)
    for grad_in_forward in (False, True):
        loss = ops.triplet_hinge_loss(*x, **hyper, grad_in_forward=grad_in_forward)
        for got, want in zip(torch.autograd.grad(loss, x), expected):
            assert_close(got, want)


def test_all_inputs_strided_at_once():
    testing.check_against_reference(
        ops.triplet_hinge_loss,
        ("column-strided", "expanded", "transposed"),
        7,
        6,
        dtype=torch.float64,
    )


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(0, 12),
    dim=st.integers(1, 40),
    layouts=st.lists(
        st.sampled_from(sorted(testing.LAYOUTS)), min_size=3, max_size=3
    ),
    reduction=st.sampled_from(ep.REDUCTIONS),
    seed=st.integers(0, 2**16),
)
def test_hypothesis_shapes_and_strides(batch, dim, layouts, reduction, seed):
    testing.check_against_reference(
        ops.triplet_hinge_loss,
        tuple(layouts),
        batch,
        dim,
        reduction=reduction,
        dtype=torch.float64,
        seed=seed,
    )


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
            "anchor must have a floating-point dtype (float32, float64, float16 or bfloat16), got Long",
        ),
        # 8-bit floats are floating types too, but the kernels have no code
        # for them: the same clear message, not a generic dispatch error.
        (
            (GOOD, GOOD.to(torch.float8_e4m3fn), GOOD),
            "positive must have a floating-point dtype (float32, float64, float16 or bfloat16), got Float8_e4m3fn",
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
        BACKWARD_OP(grad, GOOD, GOOD, GOOD, -1.0, 0.5, 0.5, reduction, [True] * 3)


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
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name == "extending_pytorch._C":
            return None
        return real_find_spec(name, *args)

    monkeypatch.setattr(native, "_ops_loaded", False)
    monkeypatch.setattr(native, "operators_registered", lambda: False)
    monkeypatch.setattr(native.importlib.util, "find_spec", find_spec)
    with pytest.raises(
        RuntimeError,
        match=r"not built[\s\S]*make build[\s\S]*--no-build-isolation",
    ):
        native.load_ops()


def test_unloadable_library_says_how_to_rebuild(monkeypatch):
    real_import = importlib.import_module

    def fake_import(name, *args):
        if name == "extending_pytorch._C":
            raise ImportError("undefined symbol: _ZN3c106detail14torchCheckFail")
        return real_import(name, *args)

    monkeypatch.setattr(native, "_ops_loaded", False)
    monkeypatch.setattr(native, "operators_registered", lambda: False)
    monkeypatch.setattr(native.importlib, "import_module", fake_import)
    with pytest.raises(
        RuntimeError,
        match=r"could not be loaded \(undefined symbol[\s\S]*make build",
    ):
        native.load_ops()


def test_build_records_the_torch_it_was_built_against():
    info = native.build_info()
    assert info is not None, "setup.py wrote no _build_info.json beside _C"
    assert info["torch"] == torch.__version__


def test_library_built_for_another_torch_is_refused(monkeypatch):
    # The C++ ABI of torch changes between versions: a library built against
    # 2.11 may fail to load into 2.13 with "undefined symbol", or load and
    # misbehave. The check names both versions and the fix.
    monkeypatch.setattr(native, "_ops_loaded", False)
    monkeypatch.setattr(native, "operators_registered", lambda: False)
    monkeypatch.setattr(native, "build_info", lambda: {"torch": "2.11.0+cpu"})
    expected = re.escape(
        f"built against torch 2.11.0+cpu, but torch {torch.__version__} is running"
    )
    with pytest.raises(RuntimeError, match=expected + r"[\s\S]*make build"):
        native.load_ops()


def test_load_jit_of_the_operators_refuses_when_they_are_registered():
    # The ahead-of-time library is loaded (ops imported it): a second library
    # defining TORCH_LIBRARY(extending_pytorch) would abort the process.
    assert native.operators_registered()
    with pytest.raises(
        RuntimeError, match=r"already registered in this process[\s\S]*fresh process"
    ):
        native.load_jit("_C")


JIT_SCRIPT = """
import sys
import torch
import extending_pytorch as ep
from extending_pytorch import native
module = native.load_jit("_C")
assert module.__name__ == "_C", module.__name__
from extending_pytorch import ops
a, p, n = torch.randn(3, 5, 7, dtype=torch.float64).unbind(0)
ours = ops.triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5)
ref = ep.reference_triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5)
torch.testing.assert_close(ours, ref)
assert "extending_pytorch._C" not in sys.modules
print("ok")
"""


def test_load_jit_of_the_operators_works_in_a_fresh_process():
    # Catches a JIT build whose module name does not match the PyInit_ symbol
    # its source exports, and ops.py loading the ahead-of-time library on top
    # of the JIT one (which would abort the process).
    result = subprocess.run(
        [sys.executable, "-c", JIT_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("ok")


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



# ---- The examples of chapter 4, section 3 and section 5 ----

EXAMPLES = native.build_flags.EXTENSIONS_DIR / "examples"


def test_minimal_setup_builds_the_scale_add_sources():
    """The 10-line setup.py names the scale_add sources that the chapter copies beside it."""
    text = (EXAMPLES / "minimal_setup" / "setup.py").read_text()
    (listed,) = re.findall(r'CppExtension\("scale_add_minimal", \[(.*?)\]\)', text)
    names = re.findall(r'"([^"]+)"', listed)
    book_build = [pathlib.PurePosixPath(source).name for source in native.build_flags.SOURCES["_scale_add"]]
    assert names == book_build  # the files the book's own build compiles
    assert all((native.build_flags.CSRC / name).is_file() for name in names)


def test_library_calling_another_torchs_function_fails_to_load_with_undefined_symbol(tmp_path):
    from torch.utils.cpp_extension import load

    with pytest.raises(OSError) as raised:
        load(
            name="calls_another_torch",
            sources=[str(EXAMPLES / "version_mismatch" / "calls_another_torch.cpp")],
            build_directory=str(tmp_path),
            is_python_module=False,
        )
    cause = str(raised.value.__cause__)
    assert "undefined symbol: _ZN3c1033function_of_another_torch_releaseEi" in cause, cause


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


@pytest.mark.parametrize("grad_in_forward", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_gradient_on_the_kinks_is_the_losss_exactly(dtype, grad_in_forward):
    # Rows exactly on each kink (conftest.kink_batch; small integers, exact in every dtype):
    # the subgradient there is 0. A kernel with >= in either mask (torch.clamp's rule until
    # torch 2.14) gives row 0's negative, row 1's positive or row 2 a gradient.
    inputs = [t.requires_grad_() for t in kink_batch(dtype)]
    loss = ops.triplet_hinge_loss(*inputs, **KINK_SETTINGS, grad_in_forward=grad_in_forward)
    grads = torch.autograd.grad(loss, inputs)
    for got, want, name in zip(grads, kink_gradients(dtype), ("anchor", "positive", "negative")):
        assert torch.equal(got, want), f"{name}: {got.tolist()} != {want.tolist()}"


FAKE_GXX = """#!/bin/sh
# A stand-in for g++: says it is GCC, and for a header build records its arguments and writes the output.
if [ "$1" = --version ]; then echo "g++ (fake) 12"; echo "Copyright (C) 2022 Free Software Foundation, Inc."; exit 0; fi
echo "$@" >> "$(dirname "$0")/calls"
while [ $# -gt 1 ]; do [ "$1" = -o ] && echo gch > "$2"; shift; done
"""


def fake_build(directory, cxx, name, *extra):
    directory.mkdir()
    flags = " ".join([f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H", *extra, "-O3"])
    (directory / "build.ninja").write_text(f"ninja_required_version = 1.3\ncxx = {cxx}\n\ncflags = {flags}\n")
    return directory


def test_precompiled_header_is_built_once_with_the_flags_of_the_build_it_copies(tmp_path):
    # Catches: the library's name (-DTORCH_EXTENSION_NAME, which differs per answer: g++ then refuses the
    # copy) or the copy's own directory kept in its flags (a new copy per build); a copy rebuilt on every
    # call; a copy for other flags left beside the new one (400 MB each).
    cxx = tmp_path / "g++"
    cxx.write_text(FAKE_GXX)
    cxx.chmod(0o755)
    root = tmp_path / "pch"
    first = native.precompiled_header("ATen/ATen.h", fake_build(tmp_path / "a", cxx, "ex_a"), root=root)
    (directory,) = first
    assert (pathlib.Path(directory) / "ATen" / "ATen.h.gch").read_text() == "gch\n"
    (call,) = (tmp_path / "calls").read_text().splitlines()
    assert "TORCH_EXTENSION_NAME" not in call and "-x c++-header" in call and "-O3" in call
    assert call.split(" -o ")[0].endswith("/ATen/ATen.h")  # torch's own header, from its include path
    # Another answer's build, which already reads the copy: its name and -I differ, nothing else.
    again = native.precompiled_header("ATen/ATen.h", fake_build(tmp_path / "b", cxx, "ex_b", f"-I{directory}"), root=root)
    assert again == first and len((tmp_path / "calls").read_text().splitlines()) == 1
    other = native.precompiled_header("ATen/ATen.h", fake_build(tmp_path / "c", cxx, "ex_c", "-DNDEBUG"), root=root)
    assert other != first and [p.name for p in root.iterdir() if p.is_dir()] == [pathlib.Path(other[0]).name]


def test_precompiled_header_names_the_argument_at_fault(tmp_path):
    (tmp_path / "build.ninja").write_text("ninja_required_version = 1.3\n")
    with pytest.raises(ValueError, match="like: .* no build.ninja of a finished C\\+\\+ build"):
        native.precompiled_header("ATen/ATen.h", tmp_path, root=tmp_path / "pch")
    cxx = tmp_path / "g++"
    cxx.write_text(FAKE_GXX)
    cxx.chmod(0o755)
    with pytest.raises(ValueError, match="header: ATen/Nothing.h is not in torch's include directories"):
        native.precompiled_header("ATen/Nothing.h", fake_build(tmp_path / "a", cxx, "ex_a"), root=tmp_path / "pch")
