"""Chapter 2: numpy/scipy-backed operations, as Functions and custom ops."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda, sample_inputs, KINK_SETTINGS, kink_batch, kink_gradients
from extending_pytorch import numpy_ops

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
TRIPLET_VERSIONS = {
    "function": numpy_ops.triplet_hinge_loss_numpy_function,
    "custom_op": numpy_ops.triplet_hinge_loss_numpy,
}
BESSEL_VERSIONS = {
    "function": numpy_ops.bessel_kv_function,
    "custom_op": numpy_ops.bessel_kv,
}


def _test_triplet_matches_reference(device, loss):
    for dtype in (torch.float32, torch.float64):
        for inputs in sample_inputs(device, requires_grad=True, dtype=dtype):
            for reduction in ep.REDUCTIONS:
                expected = ep.reference_triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                actual = loss(*inputs, **HYPER, reduction=reduction)
                assert (
                    actual.dtype == dtype and actual.device == inputs[0].device
                )
                assert_close(actual, expected)
                grads = torch.autograd.grad(actual.sum(), inputs)
                ref_grads = torch.autograd.grad(expected.sum(), inputs)
                for grad, ref_grad in zip(grads, ref_grads):
                    assert_close(grad, ref_grad)


@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
def test_triplet_matches_reference_cpu(version):
    _test_triplet_matches_reference("cpu", TRIPLET_VERSIONS[version])


@requires_cuda
@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
def test_triplet_matches_reference_cuda(version):
    _test_triplet_matches_reference("cuda", TRIPLET_VERSIONS[version])


@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_triplet_gradcheck(version, reduction):
    loss = TRIPLET_VERSIONS[version]
    for inputs in sample_inputs(
        "cpu", requires_grad=True, dtype=torch.float64
    ):
        assert torch.autograd.gradcheck(
            lambda a, p, n: loss(a, p, n, **HYPER, reduction=reduction), inputs
        )


def test_triplet_gradient_at_the_kinks_is_the_losss_exactly():
    # Rows exactly on each kink (conftest.kink_batch): a numpy backward with >= gives them
    # the gradient torch.clamp gave until torch 2.13.
    for name, loss in TRIPLET_VERSIONS.items():
        inputs = [t.requires_grad_() for t in kink_batch()]
        grads = torch.autograd.grad(loss(*inputs, **KINK_SETTINGS), inputs)
        for got, want in zip(grads, kink_gradients()):
            assert torch.equal(got, want), name


def test_triplet_only_requested_gradients_are_returned():
    a, p, n = torch.randn(3, 4, 2).unbind(0)
    a.requires_grad_()
    numpy_ops.triplet_hinge_loss_numpy_function(a, p, n, **HYPER).backward()
    assert a.grad is not None and p.grad is None and n.grad is None


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_triplet_custom_op_passes_opcheck(reduction):
    a, p, n = torch.randn(3, 5, 3, dtype=torch.float64).unbind(0)
    for t in (a, p, n):
        t.requires_grad_()
    torch.library.opcheck(
        torch.ops.extending_pytorch_numpy.triplet_hinge_loss.default,
        (a, p, n, -1.0, 0.5, 0.5, reduction),
    )


def test_triplet_custom_op_compiles_with_fullgraph():
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 7, 5).unbind(0))
    compiled = torch.compile(
        lambda a, p, n: numpy_ops.triplet_hinge_loss_numpy(a, p, n, **HYPER),
        fullgraph=True,
    )
    expected = ep.reference_triplet_hinge_loss(a, p, n, **HYPER)
    actual = compiled(a, p, n)
    assert_close(actual, expected)
    assert_close(
        torch.autograd.grad(actual, a)[0], torch.autograd.grad(expected, a)[0]
    )


def test_triplet_double_backward_is_refused_clearly():
    a, p, n = (
        t.double().requires_grad_() for t in torch.randn(3, 4, 2).unbind(0)
    )
    loss = numpy_ops.triplet_hinge_loss_numpy(a, p, n, **HYPER)
    (grad,) = torch.autograd.grad(loss, a, create_graph=True)
    with pytest.raises(
        RuntimeError, match="no autograd formula was registered"
    ):
        grad.sum().backward()


def test_triplet_empty_batch_follows_reference():
    empty = torch.empty(0, 3)
    for loss in TRIPLET_VERSIONS.values():
        assert math.isnan(loss(empty, empty, empty, **HYPER).item())
        assert (
            loss(empty, empty, empty, **HYPER, reduction="sum").item() == 0.0
        )
        assert loss(empty, empty, empty, **HYPER, reduction="none").shape == (
            0,
        )


@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
def test_triplet_checks_its_arguments(version):
    loss = TRIPLET_VERSIONS[version]
    good = torch.randn(4, 3)
    with pytest.raises(
        ValueError, match=re.escape("positive must have the same shape")
    ):
        loss(good, good[:2], good, **HYPER)
    with pytest.raises(
        ValueError, match=re.escape("reduction must be one of")
    ):
        loss(good, good, good, **HYPER, reduction="avg")


# ---- K_v(x) ----

X = torch.linspace(0.2, 5.0, 25, dtype=torch.float64)


@pytest.mark.parametrize("version", BESSEL_VERSIONS)
def test_bessel_matches_torch_and_closed_form(version):
    kv = BESSEL_VERSIONS[version]
    assert_close(kv(X, 0), torch.special.modified_bessel_k0(X))
    assert_close(kv(X, 1), torch.special.modified_bessel_k1(X))
    # K_{1/2}(x) = sqrt(pi / (2x)) exp(-x)
    assert_close(kv(X, 0.5), torch.sqrt(math.pi / (2 * X)) * torch.exp(-X))


@pytest.mark.parametrize("version", BESSEL_VERSIONS)
def test_bessel_gradient_matches_recurrence(version):
    # K_0'(x) = -K_1(x)
    x = X.clone().requires_grad_()
    (grad,) = torch.autograd.grad(BESSEL_VERSIONS[version](x, 0).sum(), x)
    assert_close(grad, -torch.special.modified_bessel_k1(X))


@pytest.mark.parametrize("version", BESSEL_VERSIONS)
def test_bessel_keeps_dtype_and_passes_gradcheck(version):
    kv = BESSEL_VERSIONS[version]
    assert kv(X.float(), 1.5).dtype == torch.float32
    x = X.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda x: kv(x, 2.3), (x,))


def test_bessel_custom_op_has_every_derivative():
    x = X.clone().requires_grad_()
    assert torch.autograd.gradgradcheck(
        lambda x: numpy_ops.bessel_kv(x, 2.3), (x,)
    )
    torch.library.opcheck(
        torch.ops.extending_pytorch_numpy.bessel_kv.default, (x, 2.3)
    )


def test_bessel_function_refuses_double_backward():
    x = X.clone().requires_grad_()
    (grad,) = torch.autograd.grad(
        numpy_ops.bessel_kv_function(x, 1.5).sum(), x, create_graph=True
    )
    assert (
        grad.grad_fn is None
    )  # once_differentiable: no graph to differentiate
    with pytest.raises(RuntimeError, match="does not require grad"):
        grad.sum().backward()


@pytest.mark.parametrize("version", BESSEL_VERSIONS)
@pytest.mark.parametrize(
    "x, v, error, message",
    [
        (
            [1.0],
            1.0,
            TypeError,
            "x must be a floating-point torch.Tensor, got list",
        ),
        (
            torch.ones(2, dtype=torch.int64),
            1.0,
            TypeError,
            "x must be a floating-point torch.Tensor, got torch.int64",
        ),
        (torch.ones(2), float("nan"), ValueError, "v must be finite, got nan"),
        (torch.ones(2), "1", TypeError, "v must be a real number, got str"),
    ],
)
def test_bessel_checks_its_arguments(version, x, v, error, message):
    with pytest.raises(error, match=re.escape(message)):
        BESSEL_VERSIONS[version](x, v)


# ---- The rest of an operator's contract: dtypes, autocast, devices, vmap ----

OPERATORS = (
    "extending_pytorch_numpy::bessel_kv",
    "extending_pytorch_numpy::triplet_hinge_loss",
    "extending_pytorch_numpy::triplet_hinge_loss_backward",
)


@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
def test_triplet_refuses_bfloat16_naming_the_argument(version):
    # Bug caught: a bare .numpy() raising "Got unsupported ScalarType BFloat16", naming nothing.
    bf16 = torch.randn(4, 3).bfloat16()
    with pytest.raises(
        TypeError,
        match=re.escape("anchor must be float16, float32 or float64 for numpy, got torch.bfloat16"),
    ):
        TRIPLET_VERSIONS[version](bf16, bf16, bf16, **HYPER)


@pytest.mark.parametrize("version", BESSEL_VERSIONS)
def test_bessel_refuses_bfloat16_naming_the_argument(version):
    with pytest.raises(TypeError, match=re.escape("x must be float16, float32 or float64")):
        BESSEL_VERSIONS[version](torch.ones(3, dtype=torch.bfloat16), 1.0)


@pytest.mark.parametrize("version", TRIPLET_VERSIONS)
def test_triplet_casts_to_float32_under_cpu_autocast(version):
    # Bug caught: a missing register_autocast (operator) or custom_fwd (Function): the bfloat16
    # embeddings autocast makes would reach numpy and raise.
    torch.manual_seed(0)
    linear = torch.nn.Linear(6, 4)
    features = torch.randn(3, 5, 6).unbind(0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embedded = [linear(f) for f in features]
        assert embedded[0].dtype == torch.bfloat16
        loss = TRIPLET_VERSIONS[version](*embedded, **HYPER)
    assert loss.dtype == torch.float32
    expected = ep.reference_triplet_hinge_loss(*(e.float() for e in embedded), **HYPER)
    assert_close(loss, expected)
    loss.backward()
    assert linear.weight.grad.dtype == torch.float32 and linear.weight.grad.abs().sum() > 0


def test_bessel_operator_casts_to_float32_under_cpu_autocast():
    x = torch.linspace(0.5, 3.0, 6, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = numpy_ops.bessel_kv(x, 1.3)
    assert result.dtype == torch.float32
    assert_close(result, numpy_ops.bessel_kv(x.float(), 1.3))


@pytest.mark.parametrize("name", OPERATORS)
def test_operators_have_a_cpu_kernel_only(name):
    # Bug caught: dropping device_types="cpu", which would let a CUDA tensor be copied to the
    # host and back silently (the kernel would then be registered for every device).
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has_kernel(name, "CPU") and not has_kernel(name, "CUDA")


@requires_cuda
def test_operators_refuse_cuda_tensors():
    x = torch.linspace(0.5, 3.0, 6, device="cuda")
    with pytest.raises(NotImplementedError, match="CUDA"):
        numpy_ops.bessel_kv(x, 1.3)
    a = torch.randn(4, 3, device="cuda")
    with pytest.raises(NotImplementedError, match="CUDA"):
        numpy_ops.triplet_hinge_loss_numpy(a, a, a, **HYPER)


@pytest.fixture
def numpy_calls(monkeypatch):
    """Counts numpy round trips: every operator converts its result once with from_numpy."""
    calls = []
    convert = numpy_ops.from_numpy

    def counted(array, like):
        calls.append(like.shape)
        return convert(array, like)

    monkeypatch.setattr(numpy_ops, "from_numpy", counted)
    return calls


def test_bessel_vmap_rule_calls_numpy_once_per_batch(numpy_calls):
    # Bug caught: no vmap rule (PyTorch then loops: one call per row) or a rule that moves the batch dim.
    rows = torch.rand(6, 5, dtype=torch.float64) + 0.5
    for in_dim, x in ((0, rows), (1, rows.T)):
        numpy_calls.clear()
        result = torch.func.vmap(lambda r: numpy_ops.bessel_kv(r, 1.3), in_dims=in_dim)(x)
        assert len(numpy_calls) == 1
        assert_close(result, numpy_ops.bessel_kv(rows, 1.3))


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_triplet_vmap_rule_matches_a_loop(reduction, numpy_calls):
    # Bug caught: reducing over the wrong dimension, or mishandling an input that is not batched.
    stacked = torch.randn(3, 5, 7, 4, generator=torch.Generator().manual_seed(0))
    loss = lambda a, p, n: numpy_ops.triplet_hinge_loss_numpy(  # noqa: E731
        a, p, n, **HYPER, reduction=reduction
    )
    for in_dims in ((0, 0, 0), (0, None, 1)):
        a, p, n = stacked[0], stacked[1, 0], stacked[2].transpose(0, 1)
        if in_dims[1] == 0:
            p = stacked[1]
        if in_dims[2] == 0:
            n = stacked[2]
        numpy_calls.clear()
        result = torch.func.vmap(loss, in_dims=in_dims)(a, p, n)
        assert len(numpy_calls) == 1
        expected = torch.stack(
            [
                ep.reference_triplet_hinge_loss(
                    stacked[0, i],
                    stacked[1, i] if in_dims[1] == 0 else stacked[1, 0],
                    stacked[2, i],
                    **HYPER,
                    reduction=reduction,
                )
                for i in range(5)
            ]
        )
        assert_close(result, expected)
