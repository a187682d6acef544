"""Chapter 8: the involution operator, checked against its plain-torch reference.

Each test names the bug it catches. The CPU kernels run the per-element sums
of csrc/involution_math.h, which the CUDA kernels include too, so the CPU tests
also check that index arithmetic; the launch, the grid-stride loops, the
half-precision conversions of accumulate.h and the binding are CUDA-only, and
the `_cuda` tests check them where a GPU is.
"""

from __future__ import annotations

import itertools
import re
import subprocess

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from conftest import requires_cuda
from extending_pytorch import build_flags, testing
from extending_pytorch import involution as inv

OP = inv.involution_op
BACKWARD_OP = inv.involution_backward_op


def make_inputs(
    batch,
    channels,
    groups,
    size,
    kernel,
    stride=1,
    padding=0,
    dilation=1,
    *,
    dtype=torch.float64,
    device="cpu",
    seed=0,
):
    """input (B, C, H, W) and a weight whose spatial size fits the settings."""
    (sh, sw), (ph, pw), (dh, dw) = inv.settings(stride, padding, dilation)
    height, width = size
    kh, kw = kernel
    out_h = inv.output_size(height, kh, sh, ph, dh)
    out_w = inv.output_size(width, kw, sw, pw, dw)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, height, width, generator=generator, dtype=dtype)
    w = torch.randn(
        batch, groups, kh, kw, out_h, out_w, generator=generator, dtype=dtype
    )
    return x.to(device), w.to(device)


# (batch, channels, groups, (H, W), (Kh, Kw), stride, padding, dilation):
# groups 1 and > 1, non-square kernels and images, B = 1, odd sizes, a 1x1
# kernel, a kernel as large as the padded image, strides that skip pixels.
CASES = [
    (1, 1, 1, (5, 5), (3, 3), 1, 1, 1),
    (2, 4, 1, (6, 7), (3, 3), 1, 1, 1),
    (2, 6, 3, (7, 5), (3, 2), (2, 1), (1, 0), (1, 2)),
    (1, 8, 4, (9, 11), (5, 3), 2, 2, 1),
    (3, 4, 2, (8, 8), (3, 3), 3, 0, 2),
    (1, 6, 2, (5, 4), (1, 1), 1, 0, 1),
    (2, 4, 4, (4, 5), (5, 5), 1, 2, 1),
    (1, 2, 2, (3, 3), (3, 3), (1, 2), (0, 1), (1, 1)),
]
CASE_IDS = [f"case{i}" for i in range(len(CASES))]


def assert_matches_reference(x, w, stride, padding, dilation, **close):
    """Values and both gradients of the operator equal the unfold reference's."""
    x1, w1 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    ours = inv.involution(x1, w1, stride, padding, dilation)
    expected = inv.reference_involution(x2, w2, stride, padding, dilation)
    assert ours.dtype == x.dtype and ours.shape == expected.shape
    assert_close(ours, expected, **close)
    upstream = torch.randn_like(expected)  # a non-trivial upstream gradient
    grads = torch.autograd.grad(ours, (x1, w1), upstream)
    ref_grads = torch.autograd.grad(expected, (x2, w2), upstream)
    assert_close(grads[0], ref_grads[0], **close)
    assert_close(grads[1], ref_grads[1], **close)


# ---- The reference itself ----


@pytest.mark.parametrize("case", CASES[:5], ids=CASE_IDS[:5])
def test_reference_matches_the_loop_definition(case):
    # Catches a reference that reshapes the unfolded windows in the wrong
    # order (groups and channels swapped, taps and positions mixed up): the
    # loops transcribe the definition itself.
    batch, channels, groups, size, kernel, stride, padding, dilation = case
    x, w = make_inputs(batch, channels, groups, size, kernel, stride, padding, dilation)
    assert_close(
        inv.reference_involution(x, w, stride, padding, dilation),
        inv.loop_involution(x, w, stride, padding, dilation),
    )


def test_unfold_materialises_k_squared_times_the_output():
    # The memory claim of the chapter: F.unfold's buffer has B*C*Kh*Kw*Ho*Wo
    # numbers, Kh*Kw times the output.
    x, w = make_inputs(2, 8, 2, (10, 12), (3, 5), 1, (1, 2), 1)
    windows = torch.nn.functional.unfold(x, (3, 5), padding=(1, 2))
    out = inv.reference_involution(x, w, 1, (1, 2))
    assert windows.numel() == 3 * 5 * out.numel() == 2 * 8 * 3 * 5 * 10 * 12


# ---- The operator against the reference ----


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_values_and_gradients_cpu(case):
    # Catches wrong group index (c % G instead of c // (C/G)), ignored stride,
    # padding or dilation, rows and columns swapped, and a grad-weight sum over
    # the wrong channel range: each changes values or a gradient here.
    batch, channels, groups, size, kernel, stride, padding, dilation = case
    x, w = make_inputs(batch, channels, groups, size, kernel, stride, padding, dilation)
    assert_matches_reference(x, w, stride, padding, dilation)


SETTINGS_PER_DIM = list(itertools.product((1, 2, 3), (0, 1, 2), (1, 2)))


@pytest.mark.parametrize(
    "height_settings", SETTINGS_PER_DIM, ids=lambda s: "s%d-p%d-d%d" % s
)
def test_every_stride_padding_dilation_combination(height_settings):
    # Every stride (1: no skipping; 2, 3: skipped pixels, where the gradient
    # of the input must test divisibility), padding (0, 1, 2) and dilation
    # (1, 2) along the height, paired with a different combination along the
    # width: catches a setting applied to the wrong dimension.
    sh, ph, dh = height_settings
    sw, pw, dw = SETTINGS_PER_DIM[(SETTINGS_PER_DIM.index(height_settings) + 7) % 18]
    x, w = make_inputs(2, 4, 2, (9, 8), (3, 2), (sh, sw), (ph, pw), (dh, dw))
    assert_matches_reference(x, w, (sh, sw), (ph, pw), (dh, dw))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_realistic_layer_size(dtype):
    # A layer of the paper's networks (C=64, G=4, K=7) at a reduced image
    # size: catches indexing that only goes wrong with many groups or taps.
    x, w = make_inputs(2, 64, 4, (14, 13), (7, 7), 1, 3, 1, dtype=dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    assert_matches_reference(x, w, 1, 3, 1, **tol)


def _test_half_precision_accumulates_in_float(dtype, device):
    # Catches sums kept in half precision: 49 taps (forward, grad_input) and
    # 16 channels (grad_weight) rounded to 11 (8) bits at every addition.
    # Summed in float, each result is the exact sum of the rounded inputs
    # rounded once: within one unit in the last place of the half result,
    # which is the tolerance (rtol = eps). Half accumulation misses it.
    x, w = make_inputs(2, 32, 2, (12, 12), (7, 7), 1, 3, 1, dtype=torch.float64)
    go = torch.randn(2, 32, 12, 12, dtype=torch.float64)
    x, w, go = (t.to(dtype).double() for t in (x, w, go))  # exactly representable
    tol = dict(rtol=torch.finfo(dtype).eps, atol=1e-3 * torch.finfo(dtype).eps)
    out = inv.involution(x.to(device, dtype), w.to(device, dtype), 1, 3)
    assert out.dtype == dtype
    assert_close(out.cpu().double(), inv.reference_involution(x, w, 1, 3), **tol)
    xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
    exact = torch.autograd.grad(inv.reference_involution(xe, we, 1, 3), (xe, we), go)
    grads = BACKWARD_OP(
        *(t.to(device, dtype) for t in (go, x, w)), [1, 1], [3, 3], [1, 1], [True, True]
    )
    for grad, expected in zip(grads, exact):
        assert grad.dtype == dtype
        assert_close(grad.cpu().double(), expected, **tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_float(dtype):
    _test_half_precision_accumulates_in_float(dtype, "cpu")


def _test_non_contiguous_inputs(device):
    # Catches kernels that read a view's storage as if it were dense: a
    # channels-last input, a weight with its two spatial dims transposed, and
    # a sliced input. Gradients are taken w.r.t. the bases, not a copy.
    options = dict(dtype=torch.float64, device=device)
    base_x = torch.randn(2, 4, 7, 14, **options, requires_grad=True)
    x = base_x[..., ::2]  # (2, 4, 7, 7), every other column
    base_w = torch.randn(2, 2, 3, 3, 7, 7, **options, requires_grad=True)
    w = base_w.transpose(4, 5)
    cl = torch.randn(2, 4, 7, 7, **options).to(
        memory_format=torch.channels_last
    ).requires_grad_()
    for inp in (x, cl):
        assert not inp.is_contiguous()
        ours = inv.involution(inp, w, 1, 1)
        expected = inv.reference_involution(inp, w, 1, 1)
        assert_close(ours, expected)
        leaf = base_x if inp is x else cl
        go = torch.randn_like(ours)
        for grad, ref in zip(
            torch.autograd.grad(ours, (leaf, base_w), go),
            torch.autograd.grad(expected, (leaf, base_w), go),
        ):
            assert_close(grad, ref)


def test_non_contiguous_inputs():
    _test_non_contiguous_inputs("cpu")


def _test_backward_computes_only_the_gradients_asked_for(device):
    # Catches a backward that ignores output_mask (the role of
    # ctx.needs_input_grad): a gradient not asked for must be None, and the
    # other one still correct.
    x, w = make_inputs(1, 4, 2, (6, 6), (3, 3), 1, 1, 1, device=device)
    go = torch.randn(1, 4, 6, 6, dtype=torch.float64, device=device)
    both = BACKWARD_OP(go, x, w, [1, 1], [1, 1], [1, 1], [True, True])
    only_input = BACKWARD_OP(go, x, w, [1, 1], [1, 1], [1, 1], [True, False])
    only_weight = BACKWARD_OP(go, x, w, [1, 1], [1, 1], [1, 1], [False, True])
    assert only_input[1] is None and only_weight[0] is None
    assert torch.equal(only_input[0], both[0])
    assert torch.equal(only_weight[1], both[1])
    # Through autograd: with a weight that needs no gradient, the input's
    # gradient is still right (setup_context then saves only the weight).
    leaf = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(inv.involution(leaf, w, 1, 1), leaf, go)
    assert torch.equal(grad, both[0])
    leaf_w = w.clone().requires_grad_()
    (grad_w,) = torch.autograd.grad(inv.involution(x, leaf_w, 1, 1), leaf_w, go)
    assert torch.equal(grad_w, both[1])


def test_backward_computes_only_the_gradients_asked_for():
    _test_backward_computes_only_the_gradients_asked_for("cpu")


@pytest.mark.parametrize("needs", [(True, False), (False, True), (True, True)])
def test_autograd_asks_and_saves_only_what_it_needs(monkeypatch, needs):
    # Catches a _backward that always asks for both gradients ([True, True]),
    # and a _setup_context that always saves both tensors: the input's
    # gradient reads only the weight, the weight's only the input.
    x, w = make_inputs(1, 4, 2, (6, 6), (3, 3), 1, 1, 1)
    leaves = [t.clone().requires_grad_(need) for t, need in zip((x, w), needs)]
    masks, saved = [], []

    def recording_backward(*args):
        masks.append(list(args[-1]))
        return BACKWARD_OP(*args)

    monkeypatch.setattr(inv, "involution_backward_op", recording_backward)

    def pack(tensor):
        saved.append(tensor.dim())  # 4: the input, 6: the weight
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = inv.involution(*leaves, 1, 1)
    wanted = [t for t in leaves if t.requires_grad]
    grads = torch.autograd.grad(out, wanted, torch.ones_like(out))
    assert masks == [list(needs)]
    assert sorted(saved) == sorted(dim for dim, need in ((6, needs[0]), (4, needs[1])) if need)
    expected = torch.autograd.grad(
        inv.reference_involution(*leaves, 1, 1), wanted, torch.ones_like(out)
    )
    for grad, ref in zip(grads, expected):
        assert_close(grad, ref)


def _test_empty_batch(device):
    # Catches a launch or a parallel_for over zero elements that fails, and a
    # backward that returns None or a wrong shape for an empty batch.
    x, w = make_inputs(0, 4, 2, (5, 5), (3, 3), 1, 1, 1, device=device)
    x.requires_grad_()
    w.requires_grad_()
    out = inv.involution(x, w, 1, 1)
    assert out.shape == (0, 4, 5, 5)
    grad_x, grad_w = torch.autograd.grad(out, (x, w), torch.ones_like(out))
    assert grad_x.shape == x.shape and grad_w.shape == w.shape
    go = torch.zeros(0, 4, 5, 5, dtype=torch.float64, device=device)
    for mask in ([True, True], [True, False], [False, True]):
        grads = BACKWARD_OP(go, x.detach(), w.detach(), [1, 1], [1, 1], [1, 1], mask)
        for grad, asked, like in zip(grads, mask, (x, w)):
            assert (grad.shape == like.shape) if asked else grad is None


def test_empty_batch():
    _test_empty_batch("cpu")


# ---- What autograd and torch.compile see ----


@pytest.mark.parametrize("case", [CASES[2], CASES[4]], ids=["case2", "case4"])
def test_gradcheck_and_gradgradcheck(case):
    # gradcheck catches a backward that disagrees with finite differences;
    # gradgradcheck, a wrong double backward (the formulas in involution.py).
    batch, channels, groups, size, kernel, stride, padding, dilation = case
    x, w = make_inputs(batch, channels, groups, size, kernel, stride, padding, dilation)
    x.requires_grad_()
    w.requires_grad_()
    fn = lambda a, b: inv.involution(a, b, stride, padding, dilation)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w))
    assert torch.autograd.gradgradcheck(fn, (x, w))


def test_opcheck():
    # Catches a fake implementation with the wrong shape, a schema that lies
    # about mutation or aliasing, and autograd registered incompletely.
    x, w = make_inputs(2, 6, 3, (7, 5), (3, 2), (2, 1), (1, 0), (1, 2))
    x.requires_grad_()
    w.requires_grad_()
    torch.library.opcheck(OP, (x, w, [2, 1], [1, 0], [1, 2]))
    go = torch.randn(2, 6, *w.shape[-2:], dtype=torch.float64)
    for mask in ([True, True], [True, False], [False, True]):
        torch.library.opcheck(
            BACKWARD_OP, (go, x.detach(), w.detach(), [2, 1], [1, 0], [1, 2], mask)
        )


def test_torch_compile_fullgraph_is_identical_to_eager():
    # Catches a graph break (fullgraph raises) and a fake implementation
    # whose shapes differ from the kernel's.
    x, w = make_inputs(2, 8, 2, (9, 7), (3, 3), 2, 1, 2, dtype=torch.float32)
    x.requires_grad_()
    w.requires_grad_()
    eager = lambda a, b: inv.involution(a, b, 2, 1, 2)  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(eager, fullgraph=True)
    out_c, out_e = compiled(x, w), eager(x, w)
    assert torch.equal(out_c, out_e)
    go = torch.randn_like(out_e)
    for g_c, g_e in zip(
        torch.autograd.grad(out_c, (x, w), go), torch.autograd.grad(out_e, (x, w), go)
    ):
        assert torch.equal(g_c, g_e)


# ---- Every TORCH_CHECK, with its message ----

X, W = make_inputs(2, 4, 2, (6, 6), (3, 3), 1, 1, 1, dtype=torch.float32)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (X[0], W, [1, 1], [1, 1], [1, 1]),
            "input must be 4-D (batch, channels, height, width), got 3-D with shape [4, 6, 6]",
        ),
        (
            (X, W[0], [1, 1], [1, 1], [1, 1]),
            "weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, out_w), "
            "got 5-D with shape [2, 3, 3, 6, 6]",
        ),
        (
            (X.long(), W, [1, 1], [1, 1], [1, 1]),
            "input must have a floating-point dtype (float32, float64, float16 or "
            "bfloat16), got Long",
        ),
        (
            # float8 passes at::isFloatingType, but no kernel is built for it.
            (X.to(torch.float8_e4m3fn), W.to(torch.float8_e4m3fn), [1, 1], [1, 1], [1, 1]),
            "input must have a floating-point dtype (float32, float64, float16 or "
            "bfloat16), got Float8_e4m3fn",
        ),
        (
            # in + 2 pad - dilation (kernel - 1) - 1 would overflow int64.
            (X, W, [1, 1], [1, 1], [2**62, 1]),
            "dilation must be at most 2147483647, got [4611686018427387904, 1]",
        ),
        (
            (X, W, [1, 1], [2**40, 1], [1, 1]),
            "padding must be at most 2147483647, got [1099511627776, 1]",
        ),
        (
            (X, W.double(), [1, 1], [1, 1], [1, 1]),
            "weight must have the dtype of input (Float), got Double",
        ),
        (
            (X, W, [1, 1, 1], [1, 1], [1, 1]),
            "stride must have 2 values (height, width), got [1, 1, 1]",
        ),
        ((X, W, [0, 1], [1, 1], [1, 1]), "stride must be positive, got [0, 1]"),
        ((X, W, [1, 1], [-1, 1], [1, 1]), "padding must be non-negative, got [-1, 1]"),
        ((X, W, [1, 1], [1, 1], [1, 0]), "dilation must be positive, got [1, 0]"),
        (
            (X, W[:1], [1, 1], [1, 1], [1, 1]),
            "weight must have the batch size of input (2) in dim 0, got 1",
        ),
        (
            (X, torch.zeros(2, 3, 3, 3, 6, 6), [1, 1], [1, 1], [1, 1]),
            "the number of groups (weight dim 1, 3) must be positive and divide "
            "the channels of input (4)",
        ),
        (
            (X, torch.zeros(2, 0, 3, 3, 6, 6), [1, 1], [1, 1], [1, 1]),
            "the number of groups (weight dim 1, 0) must be positive",
        ),
        (
            (X, torch.zeros(2, 2, 0, 3, 6, 6), [1, 1], [1, 1], [1, 1]),
            "weight must have a kernel of at least 1x1 (dims 2 and 3), got 0x3",
        ),
        (
            (X, torch.zeros(2, 2, 7, 3, 1, 6), [1, 1], [0, 1], [1, 1]),
            "the 7x3 kernel with dilation [1, 1] does not fit in the 6x6 input "
            "with padding [0, 1]: the output would be empty",
        ),
        (
            (X, W, [2, 1], [1, 1], [1, 1]),
            "weight must have shape [2, 2, 3, 3, 3, 6] for this input, stride, "
            "padding and dilation (output 3x6), got [2, 2, 3, 3, 6, 6]",
        ),
        (
            (X, W, [1, 1], [1, 1], [2, 1]),
            "weight must have shape [2, 2, 3, 3, 4, 6] for this input, stride, "
            "padding and dilation (output 4x6), got [2, 2, 3, 3, 6, 6]",
        ),
    ],
)
def test_input_checks(args, message):
    with pytest.raises(RuntimeError, match=re.escape(f"involution: {message}")):
        OP(*args)
    # The backward operator runs the same checks, under its own name.
    go = torch.zeros(2, 4, 6, 6)
    with pytest.raises(
        RuntimeError, match=re.escape(f"involution_backward: {message}")
    ):
        BACKWARD_OP(go, *args, [True, True])


@pytest.mark.parametrize(
    "grad_output, message",
    [
        (
            torch.zeros(2, 4, 5, 6),
            "grad_output must have the output's shape [2, 4, 6, 6], got [2, 4, 5, 6]",
        ),
        (
            torch.zeros(2, 4, 6, 6, dtype=torch.float64),
            "grad_output must have the dtype of input (Float), got Double",
        ),
    ],
)
def test_backward_checks(grad_output, message):
    with pytest.raises(
        RuntimeError, match=re.escape(f"involution_backward: {message}")
    ):
        BACKWARD_OP(grad_output, X, W, [1, 1], [1, 1], [1, 1], [True, True])


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (X, W, [2, 1], [1, 1], [1, 1]),
            "weight must have shape [2, 2, 3, 3, 3, 6] for this input, stride, "
            "padding and dilation (output 3x6), got [2, 2, 3, 3, 6, 6]",
        ),
        (
            (X, torch.zeros(2, 3, 3, 3, 6, 6), [1, 1], [1, 1], [1, 1]),
            "the number of groups (weight dim 1, 3) must be positive and divide "
            "the channels of input (4)",
        ),
        ((X[0], W, [1, 1], [1, 1], [1, 1]), "input must be 4-D"),
        ((X, W.double(), [1, 1], [1, 1], [1, 1]), "weight must have the dtype of input (Float), got Double"),
    ],
)
def test_fake_implementation_refuses_what_the_kernel_refuses(args, message):
    # Catches a fake that checks only the number of dims: torch.compile
    # traces with fake tensors, and would accept a shape the kernel refuses.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(RuntimeError, match=re.escape(f"involution: {message}")):
            OP(*fakes)
        go = mode.from_tensor(torch.zeros(2, 4, 6, 6))
        with pytest.raises(RuntimeError, match=re.escape(f"involution_backward: {message}")):
            BACKWARD_OP(go, *fakes, [True, True])
        bad_go = mode.from_tensor(torch.zeros(2, 4, 5, 6))
        with pytest.raises(RuntimeError, match=re.escape("grad_output must have the output's shape")):
            BACKWARD_OP(bad_go, *(mode.from_tensor(a) for a in (X, W)), [1, 1], [1, 1], [1, 1], [True, True])


@requires_cuda
def test_device_checks_cuda():
    with pytest.raises(
        RuntimeError,
        match=re.escape("involution: weight must be on the device of input (cuda:0), got cpu"),
    ):
        OP(X.cuda(), W, [1, 1], [1, 1], [1, 1])
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "involution_backward: grad_output must be on the device of input (cuda:0), got cpu"
        ),
    ):
        BACKWARD_OP(torch.zeros(2, 4, 6, 6), X.cuda(), W.cuda(), [1, 1], [1, 1], [1, 1], [True, True])


# ---- A tensor of the wrong rank, on every device and through every entry point ----

# Case: (the argument of the wrong rank, how to make the pair from a valid
# one). 5-D and 7-D weights, 3-D and 5-D inputs. On CUDA with torch 2.11, a
# 5-D weight once killed the process (SIGSEGV in the dispatcher) where the
# CPU raised "weight must be 6-D".
WRONG_RANKS = {
    "5-D weight": ("weight", lambda x, w: (x, w[0])),
    "7-D weight": ("weight", lambda x, w: (x, w.unsqueeze(-1))),
    "3-D input": ("input", lambda x, w: (x[0], w)),
    "5-D input": ("input", lambda x, w: (x.unsqueeze(0), w)),
}
RANK_MESSAGE = {
    "input": "input must be 4-D (batch, channels, height, width), got {dim}-D with shape {shape}",
    "weight": "weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, out_w), "
    "got {dim}-D with shape {shape}",
}


def _test_wrong_rank_is_refused(case, device):
    # Catches a rank check that runs after a size is read (an IndexError, or
    # a crash on a device whose kernel reads sizes unchecked), or that is
    # missing from one entry point: the public function (Python), the
    # operator with inputs that require gradients (autograd, then the
    # device's kernel or, on meta, the fake implementation) and without, and
    # the backward operator.
    name, make = WRONG_RANKS[case]
    x, w = make_inputs(2, 4, 2, (6, 6), (3, 3), 1, 1, 1, dtype=torch.float32, device=device)
    x, w = make(x, w)
    bad = x if name == "input" else w
    message = RANK_MESSAGE[name].format(dim=bad.dim(), shape=list(bad.shape))
    settings = ([1, 1], [1, 1], [1, 1])
    calls = {
        "involution()": lambda: inv.involution(
            x.clone().requires_grad_(), w.clone().requires_grad_(), 1, 1, 1
        ),
        "the operator, with gradients": lambda: OP(
            x.clone().requires_grad_(), w.clone().requires_grad_(), *settings
        ),
        "the operator": lambda: OP(x, w, *settings),
    }
    for what, call in calls.items():
        with pytest.raises(RuntimeError, match=re.escape(f"involution: {message}")):
            call()
            pytest.fail(f"{what} accepted a {case}")
    go = torch.zeros(2, 4, 6, 6, device=device)
    with pytest.raises(RuntimeError, match=re.escape(f"involution_backward: {message}")):
        BACKWARD_OP(go, x, w, *settings, [True, True])


@pytest.mark.parametrize("case", list(WRONG_RANKS))
def test_wrong_rank_is_refused_cpu(case):
    _test_wrong_rank_is_refused(case, "cpu")


@pytest.mark.parametrize("case", list(WRONG_RANKS))
def test_wrong_rank_is_refused_meta(case):
    # The meta device runs the fake implementation (torch.compile's), not a kernel.
    _test_wrong_rank_is_refused(case, "meta")


@requires_cuda
def test_wrong_rank_is_refused_cuda():
    # In a process of its own: should the binding crash again, this test fails
    # and the rest of the session goes on.
    result = testing.run_in_fresh_process(
        "import test_involution\n"
        "for case in test_involution.WRONG_RANKS:\n"
        "    test_involution._test_wrong_rank_is_refused(case, 'cuda')\n",
        timeout=300,
    )
    assert result.returncode == 0, (
        f"exit status {result.returncode}:\n{result.stderr[-8000:]}"
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(stride=(1, 2, 3)), TypeError, "stride must be an int or a pair of ints, got (1, 2, 3)"),
        (dict(padding=1.5), TypeError, "padding must be an int or a pair of ints, got 1.5"),
        (dict(dilation=True), TypeError, "dilation must be an int or a pair of ints, got True"),
        (dict(stride=0), ValueError, "stride must be >= 1, got 0"),
        (dict(padding=(0, -1)), ValueError, "padding must be >= 0, got (0, -1)"),
    ],
)
def test_python_wrapper_checks_the_settings(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        inv.involution(X, W, **{"padding": 1, **kwargs})


# ---- The layer ----


@pytest.mark.parametrize("stride, size", [(1, (8, 8)), (2, (9, 7)), (3, (10, 11))])
def test_layer_is_a_drop_in_for_a_convolution(stride, size):
    # Catches a kernel generator whose output size differs from the
    # convolution's (AvgPool2d without ceil_mode loses the last row of an odd
    # image at stride 2), and a layer whose gradients do not reach its
    # parameters.
    torch.manual_seed(0)
    x = torch.randn(2, 32, *size)
    conv = nn.Conv2d(32, 32, 3, stride, padding=1)
    layer = inv.Involution(32, 3, stride)
    out = layer(x)
    assert out.shape == conv(x).shape
    out.square().mean().backward()
    for name, parameter in layer.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    assert "groups=2" in repr(layer)


def test_layer_computes_involution_with_generated_kernels():
    # Catches a layer that reshapes its generated kernels in the wrong order:
    # recompute the output with the reference from the same kernels.
    torch.manual_seed(0)
    layer = inv.Involution(16, 5, 2, group_channels=8).eval()
    x = torch.randn(2, 16, 9, 9)
    kernels = layer.span(torch.relu(layer.norm(layer.reduce(layer.pool(x)))))
    weight = kernels.view(2, 2, 5, 5, *kernels.shape[-2:])
    assert_close(layer(x), inv.reference_involution(x, weight, 2, 2))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(channels=16, kernel_size=4), "kernel_size must be odd"),
        (dict(channels=24, kernel_size=3), "channels (24) must be a multiple of group_channels (16)"),
        (dict(channels=16, kernel_size=3, stride=0), "stride must be a positive int, got 0"),
    ],
)
def test_layer_checks_its_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        inv.Involution(**kwargs)


# ---- CUDA ----


def test_kernel_file_is_listed_and_torch_free():
    assert "csrc/cuda/involution.cu" in build_flags.CUDA_KERNELS
    assert "csrc/cuda/involution_cuda.cpp" in build_flags.CUDA_SOURCES["_C"]
    text = (build_flags.EXTENSIONS_DIR / "csrc/cuda/involution.cu").read_text()
    included = re.findall(r'#include [<"]([^>"]+)[>"]', text)
    assert not any(h.startswith(("torch/", "ATen/", "c10/")) for h in included)


def _nvcc():
    from test_cuda import nvcc

    return nvcc()


@pytest.mark.skipif(_nvcc() is None, reason="needs nvcc (the CUDA toolkit)")
@pytest.mark.same_on_every_torch  # involution.cu includes no torch header
def test_involution_kernels_compile_with_nvcc_for_every_dtype(tmp_path):
    # Catches a kernel that does not compile, or a dtype whose kernels are not
    # instantiated (the binding would fail to link on a GPU machine).
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    obj = tmp_path / "involution.o"
    command = [
        _nvcc(),
        "-c",
        *COMMON_NVCC_FLAGS,
        *build_flags.nvcc_flags(),
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-I",
        str(build_flags.CSRC),
        str(build_flags.EXTENSIONS_DIR / "csrc/cuda/involution.cu"),
        "-o",
        str(obj),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    symbols = subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True).stdout
    for kernel in ("forward", "grad_input", "grad_weight"):
        for dtype in ("float", "double", "__half", "__nv_bfloat16"):
            assert re.search(
                rf"involution_{kernel}_kernel<{re.escape(dtype)}>", symbols
            ), (kernel, dtype)


@requires_cuda
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_values_and_gradients_cuda(case):
    batch, channels, groups, size, kernel, stride, padding, dilation = case
    x, w = make_inputs(
        batch, channels, groups, size, kernel, stride, padding, dilation, device="cuda"
    )
    assert_matches_reference(x, w, stride, padding, dilation)


@requires_cuda
def test_cuda_matches_cpu_at_a_realistic_size():
    x, w = make_inputs(4, 64, 4, (56, 56), (7, 7), 1, 3, 1, dtype=torch.float32)
    go = torch.randn(4, 64, 56, 56)
    settings = ([1, 1], [3, 3], [1, 1])
    assert_close(OP(x.cuda(), w.cuda(), *settings).cpu(), OP(x, w, *settings), rtol=1e-4, atol=1e-4)
    for gpu, cpu in zip(
        BACKWARD_OP(go.cuda(), x.cuda(), w.cuda(), *settings, [True, True]),
        BACKWARD_OP(go, x, w, *settings, [True, True]),
    ):
        assert_close(gpu.cpu(), cpu, rtol=1e-4, atol=1e-4)


@requires_cuda
def test_gradcheck_opcheck_and_compile_cuda():
    x, w = make_inputs(2, 6, 3, (7, 5), (3, 2), (2, 1), (1, 0), (1, 2), device="cuda")
    x.requires_grad_()
    w.requires_grad_()
    fn = lambda a, b: inv.involution(a, b, (2, 1), (1, 0), (1, 2))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w))
    torch.library.opcheck(OP, (x, w, [2, 1], [1, 0], [1, 2]))
    torch._dynamo.reset()
    assert torch.equal(torch.compile(fn, fullgraph=True)(x, w), fn(x, w))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_cuda(dtype):
    _test_half_precision_accumulates_in_float(dtype, "cuda")


@requires_cuda
def test_non_contiguous_inputs_cuda():
    _test_non_contiguous_inputs("cuda")


@requires_cuda
def test_backward_computes_only_the_gradients_asked_for_cuda():
    _test_backward_computes_only_the_gradients_asked_for("cuda")


@requires_cuda
def test_empty_batch_cuda():
    _test_empty_batch("cuda")
