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

What the interpreter gets wrong, each shown by a test here: it converts
float32 to bfloat16 by truncation where a GPU rounds to nearest even
(test_interpreter_truncates_float32_to_bfloat16), and it keeps a Python float
argument a Python float where a GPU launch makes it a float32 (so the
hyper-parameters' types are checked on the launches, and in the PTX:
tests/test_triton_ptx.py, which compiles the kernels for sm_80 and sm_90a
without a GPU). Releases before Triton 3.9 also ran tl.maximum with numpy's
NaN rules (test_kernels_clamp_with_where_not_maximum guards the source).
"""

from __future__ import annotations

import inspect
import os
import re
import struct
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

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


# ---- The saved distances: a backward that reads each row once ----


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_forward_returns_each_rows_distances_in_the_accumulation_dtype(dtype):
    # The operator's second output: (d_ap, d_an) per row, float32 for 16- and
    # 32-bit inputs, float64 for float64, not differentiable.
    a, p, n = (t.to(dtype).requires_grad_() for t in torch.randn(3, 5, 70, device=DEVICE))
    loss, distances = OP(a, p, n, -1.0, 0.5, 0.5, "none")
    accumulation = torch.float64 if dtype == torch.float64 else torch.float32
    assert distances.dtype == accumulation and distances.shape == (5, 2)
    assert loss.requires_grad and not distances.requires_grad
    wide = [t.detach().double() for t in (a, p, n)]
    expected = torch.stack(
        [(wide[0] - wide[1]).pow(2).sum(1), (wide[0] - wide[2]).pow(2).sum(1)], dim=1
    )
    assert_close(distances.double(), expected, rtol=1e-6 if dtype != torch.float64 else 1e-12, atol=0)


def test_backward_takes_its_weights_from_the_saved_distances():
    # Catches a backward that recomputes the distances instead of reading the
    # ones it is given: the same inputs, with distances that say "no push,
    # no pull" (d_ap = 0, d_an = 100) and with distances that say "both"
    # (d_ap = 100, d_an = 0), give zero and nonzero gradients. (Together with
    # tests/test_traffic.py, which counts each row read once.)
    a, p, n = torch.randn(3, 4, 9, dtype=torch.float64, device=DEVICE).unbind(0)
    grad = torch.ones((), dtype=torch.float64, device=DEVICE)
    nothing = torch.tensor([[0.0, 100.0]] * 4, dtype=torch.float64, device=DEVICE)
    both = torch.tensor([[100.0, 0.0]] * 4, dtype=torch.float64, device=DEVICE)
    for zero in BACKWARD_OP(grad, a, p, n, nothing, -1.0, 0.5, 0.5, "sum"):
        assert (zero == 0).all()
    grad_a, grad_p, grad_n = BACKWARD_OP(grad, a, p, n, both, -1.0, 0.5, 0.5, "sum")
    # push = pull = 1: grad_p = -2 (1 + beta) (a - p), grad_n = 2 (a - n).
    assert_close(grad_p, -2 * 1.5 * (a - p))
    assert_close(grad_n, 2 * (a - n))
    assert_close(grad_a, -(grad_p + grad_n))


def test_saved_distances_are_the_forwards_and_carry_no_gradient():
    # autograd saves the forward's distances for the backward; a loss that
    # ignores the distances' (absent) gradient still trains, and a graph that
    # uses only the distances has nothing to differentiate.
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 4, 6, dtype=torch.float64, device=DEVICE))
    loss, distances = OP(a, p, n, -1.0, 0.5, 0.5, "sum")
    assert loss.grad_fn is not None and distances.grad_fn is None
    grads = torch.autograd.grad(loss, (a, p, n))
    ref = torch.autograd.grad(ep.reference_triplet_hinge_loss(a, p, n, **HYPER, reduction="sum"), (a, p, n))
    for got, expected in zip(grads, ref):
        assert_close(got, expected)


# ---- Edge cases ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_subgradient_at_the_kinks_is_zero(dtype):
    # The rule (reference.py): push weight [d_ap - d_an > t1], pull weight
    # [d_ap > t2], strict, so 0 at each kink. All values below are exact in
    # binary, so the gradients are exact, and compared exactly, with the
    # values written out (not torch.clamp's gradient, which changed at the
    # boundary in torch 2.14) and with the reference's. Catches >= in either
    # weight, and a kernel that zeroes gradients near the kinks too.
    # Row 0: d_ap = 0.25 = t2 exactly (d_an far above: no push).
    # Row 1: d_ap - d_an = 0.0625 - 1.0625 = -1 = t1 exactly (d_ap < t2).
    # Row 2: just past both kinks: d_ap = 0.25 + 2**-8, d_ap - d_an = -1 + 2**-8.
    t1, t2, beta = -1.0, 0.25, 0.5
    anchor = torch.zeros(3, 2, dtype=dtype, device=DEVICE, requires_grad=True)
    positive = torch.tensor(
        [[0.5, 0.0], [0.25, 0.0], [0.5, 2**-4]], dtype=dtype, device=DEVICE, requires_grad=True
    )
    negative = torch.tensor(
        [[4.0, 0.0], [1.0, 0.25], [1.0, 0.5]], dtype=dtype, device=DEVICE, requires_grad=True
    )
    inputs = (anchor, positive, negative)
    settings = dict(t1=t1, t2=t2, beta=beta, reduction="sum")
    grads = torch.autograd.grad(triton_ops.triplet_hinge_loss(*inputs, **settings), inputs)
    ref_grads = torch.autograd.grad(ep.reference_triplet_hinge_loss(*inputs, **settings), inputs)
    # By hand: d loss / d positive = -2 (push + beta pull) (a - p), d / d negative
    # = 2 push (a - n), d / d anchor = minus their sum. Rows 0 and 1 have no
    # weight at all; row 2 has both.
    a, p, n = (t.detach() for t in inputs)
    push = torch.tensor([0.0, 0.0, 1.0], dtype=dtype, device=DEVICE)[:, None]
    pull = torch.tensor([0.0, 0.0, 1.0], dtype=dtype, device=DEVICE)[:, None]
    grad_p = -2 * (push + beta * pull) * (a - p)
    grad_n = 2 * push * (a - n)
    expected = (-(grad_p + grad_n), grad_p, grad_n)
    assert expected[1][2].abs().sum() > 0 and expected[1][:2].abs().sum() == 0
    for grad, ref_grad, by_hand in zip(grads, ref_grads, expected):
        assert_close(grad, by_hand, rtol=0, atol=0)
        assert_close(ref_grad, by_hand, rtol=0, atol=0)


def test_hyperparameters_keep_float64_precision():
    # Catches t1, t2 or beta rounded to float32 on their way to a float64
    # kernel (a Python float argument is a float32 on a GPU; under the
    # interpreter, a float32 step in decoding their bits): each value below
    # differs from its float32 rounding by about 2**-40 (beta: 1/3, off by
    # 3e-8 relative), and each row sits on a boundary that the rounding moves.
    # (Whether they travel as floats at all, the interpreter cannot show: see
    # test_hyperparameters_reach_the_kernels_as_integer_bits and
    # tests/test_triton_ptx.py.)
    t1, t2, beta = -1.0 - 2**-40, 0.25 - 2**-40, 1.0 / 3.0
    assert (torch.tensor([t1, t2, beta]).double() != torch.tensor([t1, t2, beta], dtype=torch.float64)).all()
    # Row 0: d_ap = 0.25, just above t2: a pull gradient (float32's t2 = 0.25
    # would give none, 0.25 > 0.25 being false). Row 1: d_ap - d_an = -1, just
    # above t1: a push gradient (none with float32's t1 = -1). Row 2: d_ap = 1
    # (pull active: beta multiplies it).
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


def test_hyperparameters_reach_the_kernels_as_integer_bits():
    # Catches t1, t2 or beta passed to a kernel as a Python float, which a GPU
    # launch types float32 (the interpreter keeps it a Python float, so no
    # value test here can see it): every scalar argument of every launch is
    # an int, and the hyper-parameters' are the bits of their float64 values.
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 4, 5, dtype=torch.float64, device=DEVICE))
    t1, t2, beta = -1.0 - 2**-40, 0.25 - 2**-40, 1.0 / 3.0
    with triton_ops.record_launches() as launches:
        loss = triton_ops.triplet_hinge_loss(a, p, n, t1=t1, t2=t2, beta=beta)
        torch.autograd.grad(loss, (a, p, n))
    assert {name for name, _ in launches} == {"_forward_kernel", "_backward_kernel"}
    for name, arguments in launches:
        floats = {k: v for k, v in arguments.items() if isinstance(v, float)}
        assert not floats, (name, floats)
        for key, value in (("t1_bits", t1), ("t2_bits", t2), ("beta_bits", beta)):
            bits = arguments[key]
            assert isinstance(bits, int)
            assert struct.unpack("<d", struct.pack("<q", bits))[0] == value


class _RecordOps(TorchDispatchMode):
    """Every aten operation run inside, except those of the kernel launches.

    (The interpreter copies tensors to and from numpy around each launch: its
    own machinery, not the operator's, and absent on a GPU.)
    """

    # On a GPU, wrap_triton's launches reach the mode as the higher-order operator
    # triton_kernel_wrapper_mutation, which a mode must accept (torch raises
    # NotImplementedError otherwise): it is a launch, and runs unrecorded.
    supports_higher_order_operators = True

    def __init__(self):
        super().__init__()
        self.ops = []
        self.launching = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if isinstance(func, torch._ops.HigherOrderOperator):
            return func(*args, **(kwargs or {}))
        if not self.launching:
            self.ops.append(func.name())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_no_tensor_is_built_from_host_values_per_call(dtype, monkeypatch):
    # Catches a per-call torch.tensor([t1, t2, beta], device=...) (aten
    # lift_fresh), or any other copy: on a GPU each is a copy from pageable
    # host memory that waits for the device, twice per training step, and
    # cannot be captured in a CUDA graph. The operators' functions may only
    # allocate their outputs, launch, and reduce the rows.
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    record = _RecordOps()
    kind = InterpretedFunction if triton_ops.INTERPRETED else triton.JITFunction
    launch = kind.run

    def run(self, *args, **kwargs):
        record.launching = True
        try:
            return launch(self, *args, **kwargs)
        finally:
            record.launching = False

    monkeypatch.setattr(kind, "run", run)
    a, p, n = torch.randn(3, 4, 5, dtype=dtype, device=DEVICE).unbind(0)
    for reduction in ep.REDUCTIONS:
        grad = torch.ones(4 if reduction == "none" else (), dtype=dtype, device=DEVICE)
        # Once unrecorded: on a GPU the first call autotunes, and the timing
        # allocates and clears buffers of its own.
        _, distances = triton_ops._triplet_forward(a, p, n, -1.0, 0.5, 0.5, reduction)
        triton_ops._triplet_backward(grad, a, p, n, distances, -1.0, 0.5, 0.5, reduction)
        record.ops = []
        with record:
            _, distances = triton_ops._triplet_forward(a, p, n, -1.0, 0.5, 0.5, reduction)
            triton_ops._triplet_backward(grad, a, p, n, distances, -1.0, 0.5, 0.5, reduction)
        assert set(record.ops) <= {"aten::empty.memory_format", "aten::sum", "aten::mean"}, record.ops
        # The outputs: the loss per row, the distances, the three gradients.
        assert record.ops.count("aten::empty.memory_format") == 5


def test_mean_gradient_is_scaled_in_float32_for_float16():
    # Catches grad_output / B computed in float16. With the upstream gradient
    # 2**-24 (float16's smallest) and B = 4, float16 gives 2**-26 -> 0, and
    # every gradient vanishes; in float32 it is exact. (A large batch does the
    # same to an ordinary gradient: 1 / B underflows in float16 for B >= 2**25.)
    # Values chosen so that every gradient is exact in float16.
    a = torch.zeros(4, 2, dtype=torch.float16, device=DEVICE)
    p = torch.full((4, 2), 2.0**12, dtype=torch.float16, device=DEVICE)
    n = torch.full((4, 2), -(2.0**11), dtype=torch.float16, device=DEVICE)
    grad = torch.tensor(2.0**-24, dtype=torch.float16, device=DEVICE)
    _, distances = OP(a, p, n, -1.0, 0.5, 0.5, "mean")
    grads = BACKWARD_OP(grad, a, p, n, distances, -1.0, 0.5, 0.5, "mean")
    wide = [t.double().requires_grad_() for t in (a, p, n)]
    loss = ep.reference_triplet_hinge_loss(*wide, **HYPER, reduction="mean")
    ref_grads = torch.autograd.grad(loss, wide, grad.double())
    for got, expected in zip(grads, ref_grads):
        assert (expected != 0).all()
        assert_close(got.double(), expected, rtol=0, atol=0)


# Capturable because nothing is copied from the host per call. The autotuner
# times its configurations on the first calls, which check_cuda_graph_capture
# makes before the capture, on a side stream as torch.cuda.graphs asks. In a
# process of its own: a failed capture would leave the CUDA generator in
# capture state and fail every later test that draws random numbers on the GPU.
@requires_cuda
def test_cuda_graph_capture_replays_the_same_results_cuda():
    testing.check_cuda_graph_capture_in_fresh_process("triton_ops", "triplet_hinge_loss")


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
    actual, distances = OP(anchor, positive, negative, -1.0, 0.5, 0.5, "none")
    # The 16-bit inputs are exact in float32, the reference's dtype here.
    wide = [t.float() for t in (anchor, positive, negative)]
    expected = ep.reference_triplet_hinge_loss(*wide, **HYPER, reduction="none")
    assert_close(actual.float(), expected, rtol=1e-3, atol=0.0)
    grads = BACKWARD_OP(
        torch.ones(3, dtype=torch.float16, device=DEVICE), anchor, positive, negative, distances,
        -1.0, 0.5, 0.5, "none",
    )
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
    # A SOURCE-LEVEL GUARD, kept for the Triton releases whose interpreter
    # runs tl.maximum with numpy's NaN-propagating maximum (before
    # triton-lang/triton#10333): there a kernel clamping with tl.maximum
    # would pass the NaN test above and lose the NaN only on a GPU. From
    # Triton 3.9 the interpreter drops the NaN as a GPU does (next test), and
    # test_nan_and_inf_follow_the_reference (its inf rows) catches tl.maximum
    # by itself.
    for kernel in (triton_ops._forward_kernel, triton_ops._backward_kernel):
        source = inspect.getsource(kernel.fn)
        assert not re.search(r"tl\.(maximum|clamp)\(", source)
    forward = inspect.getsource(triton_ops._forward_kernel.fn)
    assert "tl.where(diff < t1, t1, diff)" in forward
    assert "tl.where(d_ap < t2, t2, d_ap)" in forward


# Triton's interpreter ran tl.maximum with numpy's NaN-propagating maximum
# until triton-lang/triton#10333: 3.7.1 (the oldest environment's) does, 3.9.0
# (the book's) does not. 3.8 was not checked.
INTERPRETER_MAXIMUM_DROPS_NAN = tuple(
    int(part) for part in triton.__version__.split(".")[:2]
) >= (3, 9)


@interpreted_only
def test_interpreter_maximum_and_nan():
    # tl.maximum's default, propagate_nan=NONE, returns the other operand
    # when one is NaN (a GPU's max.f32). From Triton 3.9 the interpreter does
    # the same (np.fmax), so the NaN test catches a kernel that clamps with
    # tl.maximum; before, it propagated the NaN, and only the source guard
    # above could. Fails if the installed Triton behaves otherwise than this
    # says for its version.
    import triton.language as tl

    @triton.jit
    def clamp_below(x_ptr, out_ptr):
        tl.store(out_ptr, tl.maximum(tl.load(x_ptr), 0.0))

    out = torch.full((1,), -1.0)
    clamp_below[(1,)](torch.tensor([float("nan")]), out)
    if INTERPRETER_MAXIMUM_DROPS_NAN:
        assert out.tolist() == [0.0]
    else:
        assert out.isnan().all()


@interpreted_only
def test_interpreter_truncates_float32_to_bfloat16():
    # What the interpreter gets wrong, shown: converting float32 to bfloat16
    # (as tl.store does into a bfloat16 tensor) it drops the low 16 bits,
    # where a GPU (cvt.rn.bf16.f32, tests/test_triton_ptx.py) and torch round
    # to nearest even. 1 + 1.5 * 2**-7 lies between the bfloat16 neighbours
    # 1 + 2**-7 and 1 + 2**-6, nearer the second. float16 it rounds right.
    # So under the interpreter a bfloat16 result can be one unit in the last
    # place below the GPU's, for every value that is not exactly representable.
    import triton
    import triton.language as tl

    @triton.jit
    def store(x_ptr, out_ptr, N: tl.constexpr):
        cols = tl.arange(0, N)
        tl.store(out_ptr + cols, tl.load(x_ptr + cols))

    x = torch.tensor([1 + 1.5 * 2**-7, -(1 + 1.5 * 2**-7), 1 + 2**-8 + 2**-12, 3.0])
    x = torch.cat([x, torch.randn(60, generator=torch.Generator().manual_seed(0))])
    out = torch.empty(64, dtype=torch.bfloat16)
    store[(1,)](x, out, N=64)
    assert out[:2].tolist() == [1 + 2**-7, -(1 + 2**-7)]  # torch: 1 + 2**-6
    assert x[:2].to(torch.bfloat16).tolist() == [1 + 2**-6, -(1 + 2**-6)]
    # Every value: exactly the float32 with its low 16 bits cleared.
    truncated = (x.view(torch.int32) & ~0xFFFF).view(torch.float32)
    assert torch.equal(out.float(), truncated)
    assert not torch.equal(out, x.to(torch.bfloat16))
    half = torch.empty(64, dtype=torch.float16)
    store[(1,)](x, half, N=64)
    assert torch.equal(half, x.to(torch.float16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_inputs_are_summed_in_float32_at_any_block_width(dtype):
    # Catches sums kept in the 16-bit input dtype, whatever BLOCK_D a GPU's
    # autotuner picks. Each lane of a block sums the columns it is given;
    # the first LARGE columns (as many as the widest block) put 1.0 in every
    # lane's sum, for any block width up to LARGE, before the rest add 2**-12
    # each: below half a unit in the last place of 1.0 in float16 (2**-11)
    # and bfloat16 (2**-8), so in 16 bits every one of them is lost. The
    # loss is built from just those terms: the 1.0s are the same in d_ap and
    # d_an, and cancel in d_ap - d_an, and beta = 0. Row 0 has them in d_ap
    # (loss 256 * 2**-12 = 0.0625; 16-bit sums give 0), row 1 in d_an (loss
    # max(-0.0625, t1) = -0.03125, and no push gradient; 16-bit sums give 0
    # and a push gradient). In float32 every partial sum here is exact, so
    # the comparison is exact.
    large = max(c.kwargs["BLOCK_D"] for c in triton_ops._CONFIGS)
    small = 256
    assert triton_ops.interpreter_block(large + small) <= large
    dim = large + small
    anchor = torch.zeros(2, dim, dtype=dtype, device=DEVICE)
    positive = torch.zeros(2, dim, dtype=dtype, device=DEVICE)
    negative = torch.zeros(2, dim, dtype=dtype, device=DEVICE)
    positive[:, :large] = 1.0
    negative[:, :large] = 1.0
    positive[0, large:] = 2**-6  # squared: 2**-12
    negative[1, large:] = 2**-6
    inputs = (anchor, positive, negative)
    settings = dict(t1=-0.03125, t2=0.0, beta=0.0, reduction="none")
    actual = triton_ops.triplet_hinge_loss(*inputs, **settings)
    assert actual.dtype == dtype
    assert actual.tolist() == [0.0625, -0.03125]
    wide = [t.detach().double().requires_grad_() for t in inputs]
    expected = ep.reference_triplet_hinge_loss(*wide, **settings)
    assert expected.tolist() == [0.0625, -0.03125]
    ref_grads = torch.autograd.grad(expected.sum(), wide)
    # And at each block width the autotuner may pick on a GPU (the
    # interpreter's is 64), the kernels launched directly: the loss, and the
    # gradients, whose push weight is 0 for row 1 only if d_an kept its terms.
    widths = sorted({c.kwargs["BLOCK_D"] for c in triton_ops.configs_for(dtype, dim)})
    assert widths[-1] == large
    a, p, n = inputs
    layout = triton_ops._layout(a, p, n)
    hyper = triton_ops._hyperparameters(-0.03125, 0.0, 0.0)
    out = torch.empty(2, dtype=dtype, device=DEVICE)
    distances = torch.empty(2, 2, dtype=torch.float32, device=DEVICE)
    grads = [torch.empty(2, dim, dtype=dtype, device=DEVICE) for _ in range(3)]
    ones = torch.ones(2, dtype=dtype, device=DEVICE)
    for width in widths:
        out.fill_(float("nan"))
        triton_ops._forward_kernel[(2,)](
            a, p, n, out, distances, dim, *layout, **hyper, batch_bucket=2, FP64=False, BLOCK_D=width
        )
        assert out.tolist() == [0.0625, -0.03125], width
        triton_ops._backward_kernel[(2,)](
            ones, 1, 1, a, p, n, distances, *grads, dim, *layout, **hyper,
            batch_bucket=2, FP64=False, BLOCK_D=width,
        )
        for grad, ref_grad in zip(grads, ref_grads):
            assert_close(grad.double(), ref_grad, rtol=0, atol=0)


@pytest.mark.parametrize(
    "dtype, tolerance", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)]
)
def test_16_bit_values_and_gradients_against_float64(dtype, tolerance):
    # Values and gradients of 16-bit inputs, views included, against the
    # reference computed in float64 on the same (rounded) inputs: the only
    # error left is the final rounding to 16 bits (half an ulp: 4.9e-4 for
    # float16, 3.9e-3 for bfloat16, and a little more after a subtraction).
    # Catches zero or missing gradients, a wrong weight or scale, and
    # gradients computed in the 16-bit dtype throughout. The expanded input's
    # gradient sums six rounded 16-bit row gradients, which can cancel:
    # check_against_reference holds it to the tolerance relative to the sum
    # of the rows' magnitudes instead of the sum's.
    for layouts in (
        ("contiguous",) * 3,
        ("column-strided", "misaligned", "transposed"),
        ("expanded", "contiguous", "expanded"),
    ):
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
        _, distances = OP(a.detach(), p.detach(), n.detach(), -1.0, 0.5, 0.5, reduction)
        torch.library.opcheck(
            BACKWARD_OP,
            (grad, a.detach(), p.detach(), n.detach(), distances, -1.0, 0.5, 0.5, reduction),
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
    distances = torch.zeros(4, 2, device=DEVICE)
    with pytest.raises(error, match=re.escape(message)):
        BACKWARD_OP(grad, GOOD, GOOD, GOOD, distances, -1.0, 0.5, 0.5, reduction)


@pytest.mark.parametrize(
    "distances, error, message",
    [
        (torch.zeros(4, device=DEVICE), ValueError,
         "distances must have shape (4, 2), one (d_ap, d_an) pair per row, got (4,)"),
        (torch.zeros(4, 2, dtype=torch.float16, device=DEVICE), TypeError,
         "distances must be torch.float32 for torch.float32 inputs (the accumulation dtype), "
         "got torch.float16"),
        (torch.zeros(2, 4, device=DEVICE).t(), ValueError,
         "distances must be contiguous, got strides (1, 4)"),
    ],
)
def test_backward_checks_the_distances(distances, error, message):
    # The kernel reads two numbers per row at 2 * row and 2 * row + 1, in the
    # accumulation dtype: anything else would be read as garbage.
    with pytest.raises(error, match=re.escape(message)):
        BACKWARD_OP(torch.ones((), device=DEVICE), GOOD, GOOD, GOOD, distances, -1.0, 0.5, 0.5, "mean")


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
    # A key name that is not an argument of the kernel: Triton 3.9 refuses
    # it, earlier releases dropped it without a word (a typo like "dimm"
    # would tune once for every dim).
    for tuned in (triton_ops._forward_tuned, triton_ops._backward_tuned):
        assert tuned.keys == triton_ops.AUTOTUNE_KEY == ["dim", "batch_bucket"]
        assert set(tuned.keys) <= set(tuned.arg_names), tuned.keys


def test_launches_pass_the_batch_bucket():
    # The autotuner's batch key: B rounded up to a power of 2, so that a new
    # batch size is tuned for only when it changes how many programs run.
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 5, 4, dtype=torch.float64, device=DEVICE))
    with triton_ops.record_launches() as launches:
        torch.autograd.grad(triton_ops.triplet_hinge_loss(a, p, n, **HYPER), (a, p, n))
    assert [arguments["batch_bucket"] for _, arguments in launches] == [8, 8]
    assert [triton_ops.batch_bucket(b) for b in (1, 2, 3, 4, 5, 1000)] == [1, 2, 4, 4, 8, 1024]


@pytest.mark.parametrize("dtype", triton_ops.DTYPES)
def test_every_configuration_tried_can_issue_128_bit_loads(dtype):
    # Catches configurations that can never vectorise (float32 BLOCK_D = 128
    # on 4 warps: one element, 4 bytes, per thread, so scalar loads however
    # aligned the rows), that spill (float64 BLOCK_D = 1024 on 1 warp: 256
    # bytes per thread), or whose block dwarfs the row. The PTX itself is
    # read in tests/test_triton_ptx.py.
    for dim in (1, 17, 100, 128, 129, 1000, 4096, 100_000):
        configs = triton_ops.configs_for(dtype, dim)
        assert configs, (dtype, dim)
        smallest = min(
            c.kwargs["BLOCK_D"]
            for c in triton_ops._CONFIGS
            if triton_ops.bytes_per_thread(c, dtype) >= 16
        )
        for config in configs:
            block, warps = config.kwargs["BLOCK_D"], config.num_warps
            per_thread = block * dtype.itemsize // (32 * warps)
            assert 16 <= per_thread <= 64, (dtype, block, warps)
            assert block <= max(triton.next_power_of_2(dim), smallest), (dim, block)
    # Long rows get every configuration that passes, 11 or 12 per dtype.
    assert len(triton_ops.configs_for(dtype, 100_000)) >= 11


def test_autotuner_prunes_with_configs_for():
    # The autotuner calls early_config_prune with the launch's arguments by
    # name: catches the hook not being installed, or reading the wrong ones.
    a = torch.empty(2, 300, dtype=torch.float16)
    for tuned in (triton_ops._forward_tuned, triton_ops._backward_tuned):
        position = tuned.arg_names.index("a_ptr")
        args = [None] * len(tuned.arg_names)
        args[position] = a
        args[tuned.arg_names.index("dim")] = 300
        tuned.nargs = dict(zip(tuned.arg_names, args))
        try:
            pruned = tuned.prune_configs({})
        finally:
            tuned.nargs = None
        assert pruned == triton_ops.configs_for(torch.float16, 300)
        assert len(pruned) < len(triton_ops._CONFIGS)


def test_benchmark_times_triton_without_the_cpp_build(monkeypatch):
    # Chapter 6's GPU cell times eager, torch.compile and Triton on Colab,
    # where the chapter installs the package without its C++ operators (and
    # extending_pytorch.ops refuses to import). Catches bench importing
    # chapter 3's or chapter 4's implementations when they are not asked for.
    from extending_pytorch import bench

    monkeypatch.setitem(sys.modules, "extending_pytorch.ops", None)
    monkeypatch.setitem(sys.modules, "extending_pytorch.functions", None)
    factories = bench.implementations()
    assert factories["triton"]() is triton_ops.triplet_hinge_loss
    with pytest.raises(ImportError):
        factories["cpp"]()
    records = bench.measure_size(4, 8, rounds=1, min_run_time=0.001, names=["eager", "triton"], device=DEVICE)
    assert {r["implementation"] for r in records} == {"eager", "triton"}


# ---- Chapter 6's exercise 1: its check compiles the reader's kernel ----


def _exercise_check_and_answer(source):
    # As tests/test_exercises.py runs an answer, but with its source registered in linecache, as
    # IPython registers a notebook cell's: the check compiles the kernel from its source.
    import hashlib
    import linecache

    from test_exercises import load_check, namespace, path_of

    path = path_of("06_triton_kernel")
    names = namespace(path)
    check = load_check(path, 1)  # in a namespace of its own, as run_check defines it
    filename = f"<exercise answer {hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)
    return check, names[check.answer]


def _compiled_answers(kind="WRONG_ANSWERS_FOR_THE_COMPILER"):
    import importlib.util

    file = REPO_ROOT / "tests" / "exercise_answers" / "06_triton_kernel.py"
    spec = importlib.util.spec_from_file_location("exercise_answers_06", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, kind)[1]


def _solution_source():
    from conftest import cell_source, load_notebook

    cells = load_notebook(REPO_ROOT / "notebooks" / "06_triton_kernel.ipynb")["cells"]
    return next(cell_source(c) for c in cells if cell_source(c).startswith("# @title Solution to exercise 1"))


@interpreted_only
def test_exercise_check_compiles_the_solution_for_a_gpu(capsys):
    check, answer = _exercise_check_and_answer(_solution_source())
    check(answer)
    assert "and it compiles for a GPU (float16 and float32)" in capsys.readouterr().out


def test_the_compile_step_finds_a_load_without_a_mask():
    # Catches the hole of exercise 1's check on a GPU, where no interpreter records the
    # addresses: a load without a mask, whose lanes past the row tl.where drops, gives the
    # right sums there while it reads past the row. The compiled kernel shows the load.
    solution = _solution_source()
    unmasked = solution.replace(
        "x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)",
        "x = tl.load(x_ptr + row * row_stride + cols * col_stride)\n        x = tl.where(mask, x, 0.0)",
    )
    assert unmasked != solution
    launch = ([torch.empty(4, 100), torch.empty(4), 100, 100, 1], dict(BLOCK=16))
    reports = {}
    for label, source in (("solution", solution), ("unmasked", unmasked)):
        _check, answer = _exercise_check_and_answer(source)
        (reports[label],) = triton_ops.gpu_compile(answer.__globals__["squared_norms_kernel"], [launch])
    assert reports["solution"] == dict(error=None, unmasked_loads=[])
    assert reports["unmasked"]["error"] is None
    (load,) = reports["unmasked"]["unmasked_loads"]
    assert "tt.load" in load and "tensor<16x!tt.ptr<f32>>" in load


@interpreted_only
@pytest.mark.parametrize("wrong", _compiled_answers(), ids=lambda w: w[0][:40])
def test_exercise_check_rejects_what_only_the_compiler_rejects(wrong):
    # Review turn 4, findings 3 and 6: the interpreter runs these kernels right; a GPU's
    # compiler refuses them. (Without a source, the check could not compile them.)
    what, source, error, message = wrong
    check, answer = _exercise_check_and_answer(source)
    with pytest.raises(error, match=message):
        check(answer)


@interpreted_only
@pytest.mark.parametrize("right", _compiled_answers("RIGHT_ANSWERS_FOR_THE_COMPILER"), ids=lambda r: r[0][:40])
def test_exercise_check_compiles_a_kernel_with_its_modules_globals(right, capsys):
    # Review turn 5, finding 5: the fresh process that compiles the kernel rebuilds the globals
    # it reads (a module-level tl.constexpr, a `jit` imported from triton) instead of failing.
    what, source = right
    check, answer = _exercise_check_and_answer(source)
    check(answer)
    assert "and it compiles for a GPU (float16 and float32)" in capsys.readouterr().out


@interpreted_only
def test_exercise_check_says_when_it_cannot_rebuild_a_global(capsys):
    # A global the fresh process cannot rebuild is reported, and a right answer still passes.
    source = "OPTIONS = object()\n\n" + _solution_source().replace("    row = tl.program_id(0)", (
        "    if OPTIONS is None:\n        dim = 0\n    row = tl.program_id(0)"
    ), 1)
    check, answer = _exercise_check_and_answer(source)
    check(answer)
    out = capsys.readouterr().out
    assert "(not compiled for a GPU: squared_norms_kernel uses the global OPTIONS (a object)" in out
    assert "Exercise 1 passed" in out


def test_record_launches_leaves_out_launch_options_and_binds_defaults():
    # Review turn 5, findings 1 and 7: num_warps is an option of the launch, not an argument of
    # the kernel, and a constexpr left at its default is recorded with that default.
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr = 8):
        offsets = tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

    x = torch.zeros(5, device=DEVICE)
    with triton_ops.record_launches() as launches:
        add_one[(1,)](x, 5, num_warps=1)
    (launch,) = launches
    assert launch[1] == {"x_ptr": x, "n": 5, "BLOCK": 8}
    assert x.tolist() == [1.0] * 5


@interpreted_only
def test_recorded_accesses_stay_inside_the_launchs_tensors():
    # Review turn 5, finding 4: a load that misses its mask, reading far past its tensor, is
    # counted and not performed, so a check can say so instead of the process dying.
    @triton.jit
    def unmasked_sum(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK).to(tl.int64) * stride)
        tl.store(out_ptr, tl.sum(tl.where(tl.arange(0, BLOCK) < 2, x, 0.0), axis=0))

    x, out = torch.ones(2), torch.zeros(1)
    with triton_ops.record_launches(accesses=True) as launches:
        unmasked_sum[(1,)](x, out, 2**40, BLOCK=16)
    (launch,) = launches
    assert launch.outside == 15
    assert [a.program for a in launch.loads] == [(0, 0, 0)] and launch.loads[0].lanes == 16
    assert launch.loads[0].addresses.tolist() == [x.data_ptr()]
    assert launch.stores[0].addresses.tolist() == [out.data_ptr()]
    assert out.item() == 1.0
    from triton.runtime import interpreter

    assert "create_masked_load" not in vars(interpreter.interpreter_builder)  # the hook is gone


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
