"""Chapter 6: the Triton kernels of the triplet hinge loss.

Without a GPU the kernels run through Triton's interpreter (TRITON_INTERPRET=1,
which extending_pytorch.triton_ops sets before it imports triton), so every test
here executes the kernels' indexing, masks, strides and reductions on the CPU.
The interpreter is slow (a few milliseconds per program), so shapes are small.
Same style as the C++ operator's tests: `_test_x(device)` behind `test_x_cpu`
and `test_x_cuda`. CPU tensors reach these kernels only through the
interpreter, so `test_x_cpu` is skipped on a machine with a GPU (where
`test_x_cuda` runs the compiled kernels), and `test_x_cuda` without one. The
other tests run on DEVICE: the CPU under the interpreter, the GPU otherwise.

What the interpreter cannot check: it runs every tl.* call with numpy, so
tl.maximum propagates NaN there (np.maximum) although on a GPU its default,
propagate_nan=NONE, does not. test_kernels_clamp_with_where_not_maximum is
therefore a source-level guard, labelled as such.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import REPO_ROOT, requires_cuda, sample_inputs
from extending_pytorch import testing, triton_ops

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
OP = triton_ops.triplet_hinge_loss_op
BACKWARD_OP = triton_ops.triplet_hinge_loss_backward_op
# Where the kernels run: through the interpreter on the CPU, or compiled on the GPU.
DEVICE = "cpu" if triton_ops.INTERPRETED else "cuda"
interpreted_only = pytest.mark.skipif(
    not triton_ops.INTERPRETED, reason="about Triton's interpreter"
)
requires_interpreter = pytest.mark.skipif(
    not triton_ops.INTERPRETED,
    reason="CPU tensors reach Triton kernels only through the interpreter; "
    "with a GPU, the _cuda twin of this test runs",
)


def test_interpreter_runs_the_kernels_exactly_when_there_is_no_gpu():
    assert triton_ops.INTERPRETED == (not torch.cuda.is_available())


# ---- Values and gradients against chapter 1's reference ----


def _test_values_and_gradients(device):
    # 16-bit inputs: test_16_bit_values_and_gradients_against_float64.
    for dtype in (torch.float32, torch.float64):
        for inputs in sample_inputs(device, requires_grad=True, dtype=dtype):
            for reduction in ep.REDUCTIONS:
                expected = ep.reference_triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                actual = triton_ops.triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                assert actual.dtype == dtype and actual.shape == expected.shape
                assert_close(actual, expected)
                # A non-trivial upstream gradient, one per row for "none".
                weights = torch.randn_like(expected)
                grads = torch.autograd.grad(actual, inputs, weights)
                ref_grads = torch.autograd.grad(expected, inputs, weights)
                for grad, ref_grad in zip(grads, ref_grads):
                    assert_close(grad, ref_grad)


@requires_interpreter
def test_values_and_gradients_cpu():
    _test_values_and_gradients("cpu")


@requires_cuda
def test_values_and_gradients_cuda():
    _test_values_and_gradients("cuda")


@pytest.mark.parametrize("dim", [31, 64, 100, 130])
def test_rows_longer_than_one_block(dim):
    # Several blocks per row, the last one partial (dim 100 and 130) or full
    # (64): the loop and its tail mask. The interpreter's block is at most 64.
    assert triton_ops.interpreter_block(dim) <= 64
    generator = torch.Generator().manual_seed(dim)
    inputs = [
        t.to(DEVICE).requires_grad_()
        for t in torch.randn(
            3, 3, dim, generator=generator, dtype=torch.float64
        ).unbind(0)
    ]
    actual = triton_ops.triplet_hinge_loss(*inputs, **HYPER, reduction="none")
    expected = ep.reference_triplet_hinge_loss(
        *inputs, **HYPER, reduction="none"
    )
    assert_close(actual, expected)
    for grad, ref_grad in zip(
        torch.autograd.grad(actual.sum(), inputs),
        torch.autograd.grad(expected.sum(), inputs),
    ):
        assert_close(grad, ref_grad)


def _test_gradcheck(device):
    # Finite differences call the forward twice per input element: small.
    inputs = [
        t.to(device).requires_grad_()
        for t in torch.randn(3, 3, 5, dtype=torch.float64).unbind(0)
    ]
    for reduction in ep.REDUCTIONS:
        assert torch.autograd.gradcheck(
            lambda a, p, n: triton_ops.triplet_hinge_loss(
                a, p, n, **HYPER, reduction=reduction
            ),
            inputs,
        )


@requires_interpreter
def test_gradcheck_cpu():
    _test_gradcheck("cpu")


@requires_cuda
def test_gradcheck_cuda():
    _test_gradcheck("cuda")


# ---- Views: read in place, gradients with respect to the base ----

# Each view reaches the kernel as a view (never a contiguous copy), its layout
# checked by extending_pytorch.testing; gradients are compared with respect to
# the base tensor.
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_views_are_read_in_place_and_differentiated_through(layout, position):
    layouts = ["contiguous"] * 3
    layouts[position] = layout
    for reduction in ep.REDUCTIONS:
        testing.check_against_reference(
            triton_ops.triplet_hinge_loss,
            tuple(layouts),
            6,
            11,
            reduction=reduction,
            dtype=torch.float64,
            device=DEVICE,
            seed=position,
        )


@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_views_reach_the_kernels_as_views(layout):
    # Catches a wrapper that calls .contiguous() (or clones) before the launch:
    # the results would still be right, but the kernels would receive a copy,
    # at another address and with other strides than the caller's view.
    generator = torch.Generator().manual_seed(0)
    _, view = testing.make_view(
        layout, 5, 9, dtype=torch.float64, device=DEVICE, generator=generator
    )
    positive, negative = torch.randn(2, 5, 9, dtype=torch.float64, device=DEVICE)
    with triton_ops.record_launches() as launches:
        loss = triton_ops.triplet_hinge_loss(view, positive, negative, **HYPER)
        torch.autograd.grad(loss, view)
    kernels = {name for name, _ in launches}
    assert kernels == {"_forward_kernel", "_backward_kernel"}, kernels
    for _, arguments in launches:
        assert arguments["a_ptr"].data_ptr() == view.data_ptr()
        assert (
            arguments["a_row_stride"],
            arguments["a_col_stride"],
        ) == view.stride()


def test_no_read_past_the_end_of_a_row():
    # Rows of 17 inside rows of 64 filled with NaN: a load that ignores the
    # mask picks up a NaN and spoils the row's loss and gradients.
    padded = torch.full((3, 5, 64), float("nan"), dtype=torch.float64, device=DEVICE)
    padded[..., :17] = torch.randn(3, 5, 17, dtype=torch.float64, device=DEVICE)
    inputs = [t[:, :17].requires_grad_() for t in padded.unbind(0)]
    actual = triton_ops.triplet_hinge_loss(*inputs, **HYPER, reduction="none")
    expected = ep.reference_triplet_hinge_loss(
        *inputs, **HYPER, reduction="none"
    )
    assert not actual.isnan().any()
    assert_close(actual, expected)
    for grad, ref_grad in zip(
        torch.autograd.grad(actual.sum(), inputs),
        torch.autograd.grad(expected.sum(), inputs),
    ):
        assert not grad.isnan().any()
        assert_close(grad, ref_grad)


def test_gradient_of_a_scalar_upstream_gradient_that_is_expanded():
    # loss.sum() of reduction="none" sends back ones with stride 0.
    inputs = [
        t.requires_grad_()
        for t in torch.randn(3, 7, 5, dtype=torch.float64, device=DEVICE).unbind(0)
    ]
    grads = torch.autograd.grad(
        triton_ops.triplet_hinge_loss(*inputs, **HYPER, reduction="none").sum(),
        inputs,
    )
    ref_grads = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(
            *inputs, **HYPER, reduction="none"
        ).sum(),
        inputs,
    )
    for grad, ref_grad in zip(grads, ref_grads):
        assert_close(grad, ref_grad)


# ---- Edge cases ----


def test_subgradient_at_the_clamp_boundaries_is_torch_clamps():
    # Row 0: d_ap = 0.25 = t2 exactly; row 1: d_ap - d_an = -1 = t1 exactly
    # (all exact in binary). torch.clamp passes the gradient through there.
    anchor = torch.zeros(2, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    positive = torch.tensor([[0.5, 0.0], [0.5, 0.0]], dtype=torch.float64, device=DEVICE)
    negative = torch.tensor([[4.0, 0.0], [1.0, 0.5]], dtype=torch.float64, device=DEVICE)
    settings = dict(t1=-1.0, t2=0.25, beta=0.5, reduction="sum")
    (grad,) = torch.autograd.grad(
        triton_ops.triplet_hinge_loss(anchor, positive, negative, **settings),
        anchor,
    )
    (ref_grad,) = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(anchor, positive, negative, **settings),
        anchor,
    )
    assert_close(grad, ref_grad)


def test_hyperparameters_keep_float64_precision():
    # Triton types a Python float argument as float32. Catches kernels that
    # take t1, t2 and beta as Python floats: each value below differs from its
    # float32 rounding by about 2**-40 (beta: 1/3, off by 3e-8 relative), and
    # each row sits on a boundary that the rounding moves.
    t1, t2, beta = -1.0 + 2**-40, 0.25 + 2**-40, 1.0 / 3.0
    assert (torch.tensor([t1, t2, beta]).double() != torch.tensor([t1, t2, beta], dtype=torch.float64)).all()
    # Row 0: d_ap = 0.25 (just below t2, so no pull gradient; float32's t2 =
    # 0.25 would pass one). Row 1: d_ap - d_an = -1 (just below t1, so no push
    # gradient). Row 2: d_ap = 1 (pull active: beta multiplies it).
    anchor = torch.zeros(3, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    positive = torch.tensor([[0.5, 0.0], [0.5, 0.0], [1.0, 0.0]], dtype=torch.float64, device=DEVICE)
    negative = torch.tensor([[4.0, 0.0], [1.0, 0.5], [4.0, 0.0]], dtype=torch.float64, device=DEVICE)
    settings = dict(t1=t1, t2=t2, beta=beta, reduction="none")
    actual = triton_ops.triplet_hinge_loss(anchor, positive, negative, **settings)
    expected = ep.reference_triplet_hinge_loss(anchor, positive, negative, **settings)
    # The inputs are exact in binary: only t1, t2 and beta are rounded, and
    # by far more than these tolerances.
    assert_close(actual, expected, rtol=1e-14, atol=0.0)
    weights = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64, device=DEVICE)
    (grad,) = torch.autograd.grad(actual, anchor, weights)
    (ref_grad,) = torch.autograd.grad(expected, anchor, weights)
    assert_close(grad, ref_grad, rtol=1e-14, atol=0.0)
    # And through the mean, whose 1 / batch scaling is float64 too.
    mean = dict(settings, reduction="mean")
    (grad,) = torch.autograd.grad(triton_ops.triplet_hinge_loss(anchor, positive, negative, **mean), anchor)
    (ref_grad,) = torch.autograd.grad(ep.reference_triplet_hinge_loss(anchor, positive, negative, **mean), anchor)
    assert_close(grad, ref_grad, rtol=1e-14, atol=0.0)


def test_offsets_are_64_bit():
    # Catches row * row_stride computed in 32 bits. Row 2 of this fp16 input
    # starts 2 * (2**31 - 8) = 2**32 - 16 elements in: in int32 that wraps to
    # -16, and a kernel would read the 16 NaNs placed just before row 0. The
    # buffer is 8 GiB of address space, but only the pages written here are
    # ever touched (the CPU allocator maps memory lazily).
    stride = 2**31 - 8  # below 2**31: Triton passes it as an int32
    dim = 5
    try:
        buffer = torch.empty(2 * stride + 64 + dim, dtype=torch.float16, device=DEVICE)
    except (RuntimeError, MemoryError) as error:  # no 8 GiB of address space
        pytest.skip(f"cannot reserve 8 GiB of address space: {error}")
    buffer[:64] = float("nan")
    anchor = buffer[64:].as_strided((3, dim), (stride, 1))
    for row in range(3):
        anchor[row] = torch.arange(dim) * 0.25 + row
    positive = torch.zeros(3, dim, dtype=torch.float16, device=DEVICE)
    negative = torch.ones(3, dim, dtype=torch.float16, device=DEVICE)
    actual = OP(anchor, positive, negative, -1.0, 0.5, 0.5, "none")
    # The 16-bit inputs are exact in float32, the reference's dtype here.
    wide = [t.float() for t in (anchor, positive, negative)]
    expected = ep.reference_triplet_hinge_loss(*wide, **HYPER, reduction="none")
    assert_close(actual.float(), expected, rtol=1e-3, atol=0.0)
    grads = BACKWARD_OP(torch.ones(3, dtype=torch.float16, device=DEVICE), anchor, positive, negative, -1.0, 0.5, 0.5, "none")
    wide = [t.requires_grad_() for t in wide]
    ref_grads = torch.autograd.grad(ep.reference_triplet_hinge_loss(*wide, **HYPER, reduction="sum"), wide)
    for grad, ref_grad in zip(grads, ref_grads):
        assert_close(grad.float(), ref_grad, rtol=1e-3, atol=0.0)
    del buffer, anchor


def test_empty_batch_follows_the_reference():
    empty = torch.empty(0, 5, device=DEVICE, requires_grad=True)
    mean = triton_ops.triplet_hinge_loss(empty, empty, empty, **HYPER)
    assert mean.isnan().item()
    total = triton_ops.triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="sum"
    )
    assert total.item() == 0
    (grad,) = torch.autograd.grad(total, empty)
    assert grad.shape == (0, 5)
    none = triton_ops.triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="none"
    )
    assert none.shape == (0,)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_inf_follow_the_reference(value):
    a, p, n = torch.randn(3, 4, 5, dtype=torch.float64, device=DEVICE).unbind(0)
    a[1, 2] = value
    p[3, 0] = value
    inputs = [t.requires_grad_() for t in (a, p, n)]
    for reduction in ep.REDUCTIONS:
        actual = triton_ops.triplet_hinge_loss(
            *inputs, **HYPER, reduction=reduction
        )
        expected = ep.reference_triplet_hinge_loss(
            *inputs, **HYPER, reduction=reduction
        )
        assert_close(actual, expected, equal_nan=True)
        for grad, ref_grad in zip(
            torch.autograd.grad(actual.sum(), inputs),
            torch.autograd.grad(expected.sum(), inputs),
        ):
            assert_close(grad, ref_grad, equal_nan=True)


def test_kernels_clamp_with_where_not_maximum():
    # A SOURCE-LEVEL GUARD, not a behavioural test: under the interpreter
    # tl.maximum propagates NaN (numpy's maximum; see the next test), so a
    # kernel clamping with tl.maximum would pass every test above there, and
    # lose the NaN only on a GPU, where its default propagate_nan=NONE does.
    for kernel in (triton_ops._forward_kernel, triton_ops._backward_kernel):
        source = inspect.getsource(kernel.fn)
        assert not re.search(r"tl\.(maximum|clamp)\(", source)
    forward = inspect.getsource(triton_ops._forward_kernel.fn)
    assert "tl.where(diff < t1, t1, diff)" in forward
    assert "tl.where(d_ap < t2, t2, d_ap)" in forward


@interpreted_only
def test_interpreter_cannot_tell_maximum_from_where():
    # Why the guard above is a source check. If a Triton release makes the
    # interpreter honour propagate_nan, this fails: replace the guard by a
    # test of NaN inputs run through a kernel that uses tl.maximum.
    import triton
    import triton.language as tl

    @triton.jit
    def clamp_below(x_ptr, out_ptr):
        tl.store(out_ptr, tl.maximum(tl.load(x_ptr), 0.0))

    out = torch.zeros(1)
    clamp_below[(1,)](torch.tensor([float("nan")]), out)
    assert out.isnan().all()


@pytest.mark.parametrize(
    "dtype, rtol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2)]
)
def test_half_precision_accumulates_in_float(dtype, rtol):
    # The first block of each row adds 64 (a difference of 8, squared) to every
    # lane's running sum; the 63 blocks after it add 0.01 each. In half
    # precision 64 + 0.01 rounds back to 64, so those terms (0.63 of each
    # lane's 64.63, about 0.97% of the sum) would vanish. In float32, only the final loss is rounded (half an ulp:
    # 2.4e-4 for float16, 2e-3 for bfloat16).
    dim = 64 * 64
    anchor = torch.zeros(2, dim, device=DEVICE)
    positive = torch.full((2, dim), 0.1, device=DEVICE)
    positive[:, :64] = 8.0
    negative = torch.full((2, dim), 0.2, device=DEVICE)
    negative[:, :64] = 9.0
    a, p, n = (t.to(dtype) for t in (anchor, positive, negative))
    actual = triton_ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    expected = ep.reference_triplet_hinge_loss(
        *(t.float() for t in (a, p, n)), **HYPER, reduction="none"
    )
    assert actual.dtype == dtype
    assert_close(actual.float(), expected, rtol=rtol, atol=0.0)


@pytest.mark.parametrize(
    "dtype, tolerance", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)]
)
def test_16_bit_values_and_gradients_against_float64(dtype, tolerance):
    # Values and gradients of 16-bit inputs, views included, against the
    # reference computed in float64 on the same (rounded) inputs: the only
    # error left is the final rounding to 16 bits (half an ulp: 4.9e-4 for
    # float16, 3.9e-3 for bfloat16, and a little more after a subtraction).
    # Catches zero or missing gradients, a wrong weight or scale, and
    # gradients computed in the 16-bit dtype throughout.
    # (Not the expanded layout: its gradient is the sum of six rounded 16-bit
    # row gradients, and their cancellation can exceed any tolerance that is
    # relative to the sum. float64 checks it in the tests above.)
    for layouts in (("contiguous",) * 3, ("column-strided", "misaligned", "transposed")):
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                triton_ops.triplet_hinge_loss,
                layouts,
                6,
                100,
                reduction=reduction,
                dtype=dtype,
                device=DEVICE,
                reference_dtype=torch.float64,
                rtol=tolerance,
                atol=tolerance,
            )


def test_module_matches_chapter_one():
    settings = dict(t1=-0.5, t2=0.1, beta=0.3, reduction="sum")
    module = triton_ops.TritonTripletHingeLoss(**settings)
    assert repr(module) == (
        "TritonTripletHingeLoss(t1=-0.5, t2=0.1, beta=0.3, reduction='sum')"
    )
    inputs = torch.randn(3, 5, 4, device=DEVICE).unbind(0)
    assert_close(module(*inputs), ep.TripletHingeLoss(**settings)(*inputs))


# ---- The operator's registration ----


def _test_opcheck(device):
    # Under the interpreter the AOT-dispatch tests cannot run: they trace into
    # the kernels with fake tensors (test_torch_compile_needs_a_gpu_...).
    tests = (
        ("test_schema", "test_autograd_registration", "test_faketensor")
        if triton_ops.INTERPRETED
        else torch.library._OPCHECK_DEFAULT_UTILS
    )
    a, p, n = (
        t.to(device).requires_grad_()
        for t in torch.randn(3, 4, 6, dtype=torch.float64).unbind(0)
    )
    for reduction in ep.REDUCTIONS:
        report = torch.library.opcheck(
            OP, (a, p, n, -1.0, 0.5, 0.5, reduction), test_utils=tests
        )
        assert set(report) == set(tests)
    for reduction, grad_shape in (("mean", ()), ("none", (4,))):
        grad = torch.randn(grad_shape, dtype=torch.float64, device=device)
        torch.library.opcheck(
            BACKWARD_OP,
            (grad, a.detach(), p.detach(), n.detach(), -1.0, 0.5, 0.5, reduction),
            test_utils=tests,
        )


@requires_interpreter
def test_opcheck_cpu():
    _test_opcheck("cpu")


@requires_cuda
def test_opcheck_cuda():
    _test_opcheck("cuda")


@requires_cuda
def test_torch_compile_fullgraph_cuda():
    inputs = [
        t.requires_grad_()
        for t in torch.randn(3, 37, 21, device="cuda").unbind(0)
    ]
    eager = lambda a, p, n: triton_ops.triplet_hinge_loss(  # noqa: E731
        a, p, n, **HYPER
    )
    torch._dynamo.reset()
    compiled = torch.compile(eager, fullgraph=True)
    loss_compiled, loss_eager = compiled(*inputs), eager(*inputs)
    assert_close(loss_compiled, loss_eager)
    for g_c, g_e in zip(
        torch.autograd.grad(loss_compiled, inputs),
        torch.autograd.grad(loss_eager, inputs),
    ):
        assert_close(g_c, g_e)


@interpreted_only
def test_torch_compile_needs_a_gpu_and_says_so():
    a, p, n = torch.randn(3, 4, 5).unbind(0)
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda a, p, n: triton_ops.triplet_hinge_loss(a, p, n, **HYPER),
        fullgraph=True,
    )
    with pytest.raises(Exception, match=re.escape("Compiling it needs a GPU")):
        compiled(a, p, n)
    torch._dynamo.reset()


def test_double_backward_is_refused_not_silently_wrong():
    a = torch.randn(3, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    p, n = torch.randn(2, 3, 4, dtype=torch.float64, device=DEVICE).unbind(0)
    (grad,) = torch.autograd.grad(
        triton_ops.triplet_hinge_loss(a, p, n, **HYPER), a, create_graph=True
    )
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        torch.autograd.grad(grad.sum(), a)


# ---- Every check, with its message ----

GOOD = torch.randn(4, 3, device=DEVICE)


@pytest.mark.parametrize(
    "args, error, message",
    [
        (
            (GOOD[0], GOOD, GOOD),
            ValueError,
            "anchor must be 2-D (batch, dim), got 1-D with shape (3,)",
        ),
        (
            (GOOD, GOOD[None], GOOD),
            ValueError,
            "positive must be 2-D (batch, dim), got 3-D with shape (1, 4, 3)",
        ),
        (
            (GOOD.long(), GOOD, GOOD),
            TypeError,
            "anchor must have a floating-point dtype, got torch.int64",
        ),
        (
            (GOOD, GOOD[:, :2], GOOD),
            ValueError,
            "positive must have the same shape as anchor (4, 3), got (4, 2)",
        ),
        (
            (GOOD, GOOD, GOOD.double()),
            TypeError,
            "negative must have the same dtype as anchor (torch.float32), "
            "got torch.float64",
        ),
        (
            tuple(GOOD.to(torch.float8_e4m3fn) for _ in range(3)),
            TypeError,
            "anchor must be float16, bfloat16, float32 or float64 for the "
            "Triton kernels, got torch.float8_e4m3fn",
        ),
    ],
)
def test_input_checks(args, error, message):
    with pytest.raises(error, match=re.escape(message)):
        triton_ops.triplet_hinge_loss(*args, **HYPER)
    # The operator itself checks too, for callers of torch.ops.
    with pytest.raises(error, match=re.escape(message)):
        OP(*args, -1.0, 0.5, 0.5, "mean")


def test_reduction_check():
    message = "reduction must be one of ('mean', 'sum', 'none'), got 'avg'"
    with pytest.raises(ValueError, match=re.escape(message)):
        triton_ops.triplet_hinge_loss(GOOD, GOOD, GOOD, **HYPER, reduction="avg")
    with pytest.raises(ValueError, match=re.escape(message)):
        OP(GOOD, GOOD, GOOD, -1.0, 0.5, 0.5, "avg")


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(t1=1.0), "t1 must be <= 0"),
        (dict(t2=-0.5), "t2 must be >= 0 (a squared distance), got -0.5"),
        (dict(beta=float("nan")), "beta must be finite, got nan"),
    ],
)
def test_python_wrapper_checks_the_settings(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        triton_ops.triplet_hinge_loss(GOOD, GOOD, GOOD, **{**HYPER, **settings})


@pytest.mark.parametrize(
    "grad, reduction, error, message",
    [
        (
            torch.ones(4, device=DEVICE),
            "mean",
            ValueError,
            "grad_output must be a scalar for reduction='mean', got shape (4,)",
        ),
        (
            torch.ones((), device=DEVICE),
            "none",
            ValueError,
            "grad_output must have shape (4,) for reduction='none', got ()",
        ),
        (
            torch.ones((), dtype=torch.float64, device=DEVICE),
            "sum",
            TypeError,
            "grad_output must have the dtype of anchor (torch.float32), "
            "got torch.float64",
        ),
    ],
)
def test_backward_checks(grad, reduction, error, message):
    with pytest.raises(error, match=re.escape(message)):
        BACKWARD_OP(grad, GOOD, GOOD, GOOD, -1.0, 0.5, 0.5, reduction)


def test_compiled_kernels_refuse_cpu_tensors(monkeypatch):
    # With a GPU, Triton compiles the kernels, and they cannot read CPU memory.
    monkeypatch.setattr(triton_ops, "INTERPRETED", False)
    cpu = torch.randn(4, 3)
    with pytest.raises(
        ValueError,
        match=re.escape("anchor must be on a CUDA device: Triton compiles"),
    ):
        triton_ops._check_inputs(cpu, cpu, cpu, "mean")


@requires_cuda
def test_device_mismatch_check_cuda():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "positive must be on the same device as anchor (cuda:0), got cpu"
        ),
    ):
        cpu = GOOD.cpu()
        triton_ops.triplet_hinge_loss(cpu.cuda(), cpu, cpu.cuda(), **HYPER)


def test_autotune_key_names_are_kernel_arguments():
    # triton.autotune drops a key name that is not an argument of the kernel
    # without a word (a typo like "dimm" would tune once for every dim).
    for tuned in (triton_ops._forward_tuned, triton_ops._backward_tuned):
        assert tuned.keys == triton_ops.AUTOTUNE_KEY
        assert set(tuned.keys) <= set(tuned.arg_names), tuned.keys


@interpreted_only
def test_importing_triton_first_is_reported_clearly():
    # Triton's own library functions are built for the interpreter or for the
    # compiler when triton is imported; importing it first is caught, not a
    # confusing failure inside the first kernel.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", "import triton, extending_pytorch.triton_ops"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert result.returncode != 0
    assert "Triton's interpreter could not be enabled" in result.stderr
    assert "TRITON_INTERPRET=1 python" in result.stderr
