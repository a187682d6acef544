"""Chapter 3: hand-written backward passes, proven with gradcheck."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda, sample_inputs, KINK_SETTINGS, kink_batch, kink_gradients
from extending_pytorch import functions as fn

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)


def double(*shape, generator=None):
    return torch.randn(*shape, dtype=torch.float64, generator=generator)


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_torch_and_passes_gradcheck(with_bias):
    x, weight = double(5, 3).requires_grad_(), double(4, 3).requires_grad_()
    args = (
        (x, weight, double(4).requires_grad_()) if with_bias else (x, weight)
    )
    assert_close(fn.LinearFunction.apply(*args), F.linear(*args))
    assert torch.autograd.gradcheck(fn.LinearFunction.apply, args)
    assert torch.autograd.gradgradcheck(fn.LinearFunction.apply, args)


def test_linear_skips_gradients_nobody_needs():
    x, weight = double(5, 3).requires_grad_(), double(4, 3)  # frozen weight
    bias = double(4)
    fn.LinearFunction.apply(x, weight, bias).sum().backward()
    assert x.grad is not None and weight.grad is None and bias.grad is None


def test_exp_saves_its_output_and_passes_gradcheck():
    x = double(7).requires_grad_()
    assert_close(fn.Exp.apply(x), x.exp())
    assert torch.autograd.gradcheck(fn.Exp.apply, (x,))
    assert torch.autograd.gradgradcheck(fn.Exp.apply, (x,))


def test_exp_refuses_a_backward_after_its_output_changed():
    x = double(3).requires_grad_()
    y = fn.Exp.apply(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_global_max_pool_matches_adaptive_max_pool():
    x = double(2, 3, 4, 5).requires_grad_()
    values, indices = fn.global_max_pool(x)
    expected, expected_indices = F.adaptive_max_pool2d(
        x, 1, return_indices=True
    )
    assert_close(values, expected)
    assert torch.equal(indices, expected_indices.reshape(2, 3))
    assert not indices.requires_grad
    (grad,) = torch.autograd.grad(values.sum(), x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    assert_close(grad, expected_grad)


def test_global_max_pool_passes_gradcheck_and_gradgradcheck():
    x = double(2, 3, 4, 5).requires_grad_()
    values_only = lambda t: fn.GlobalMaxPool.apply(t)[0]  # noqa: E731
    assert torch.autograd.gradcheck(values_only, (x,))
    assert torch.autograd.gradgradcheck(values_only, (x,))


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(2, 3), "x must be a 4-D (N, C, H, W) tensor, got 2-D"),
        ([1.0], "x must be a 4-D (N, C, H, W) tensor, got list"),
        (
            torch.ones(1, 2, 0, 3),
            "x must have H * W > 0, got shape (1, 2, 0, 3)",
        ),
    ],
)
def test_global_max_pool_checks_its_input(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        fn.global_max_pool(bad)


def _test_triplet_matches_reference(device):
    for dtype in (torch.float32, torch.float64):
        for inputs in sample_inputs(device, requires_grad=True, dtype=dtype):
            for reduction in ep.REDUCTIONS:
                expected = ep.reference_triplet_hinge_loss(
                    *inputs, **HYPER, reduction=reduction
                )
                actual = fn.triplet_hinge_loss_function(
                    *inputs, **HYPER, reduction=reduction
                )
                assert_close(actual, expected)
                grads = torch.autograd.grad(actual.sum(), inputs)
                ref_grads = torch.autograd.grad(expected.sum(), inputs)
                for grad, ref_grad in zip(grads, ref_grads):
                    assert_close(grad, ref_grad)


def test_triplet_matches_reference_cpu():
    _test_triplet_matches_reference("cpu")


@requires_cuda
def test_triplet_matches_reference_cuda():
    _test_triplet_matches_reference("cuda")


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_triplet_gradcheck_and_gradgradcheck(reduction):
    loss = lambda a, p, n: fn.triplet_hinge_loss_function(  # noqa: E731
        a, p, n, **HYPER, reduction=reduction
    )
    for inputs in sample_inputs(
        "cpu", requires_grad=True, dtype=torch.float64
    ):
        assert torch.autograd.gradcheck(loss, inputs)
        assert torch.autograd.gradgradcheck(loss, inputs)


def test_triplet_gradient_on_the_kinks_is_the_losss_exactly():
    # Rows exactly on each kink (conftest.kink_batch), gradients worked out by hand.
    for function in (fn.triplet_hinge_loss_function, fn.triplet_hinge_loss_function_with_jvp):
        inputs = [t.requires_grad_() for t in kink_batch()]
        grads = torch.autograd.grad(function(*inputs, **KINK_SETTINGS), inputs)
        for got, want in zip(grads, kink_gradients()):
            assert torch.equal(got, want), function


def test_triplet_works_with_torch_func_per_sample_gradients():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(6, 4, generator=generator)
    xa, xp, xn = torch.randn(3, 9, 4, generator=generator).unbind(0)

    def one_triplet(w, a, p, n):
        embed = lambda x: (x @ w.T)[None]  # noqa: E731
        return fn.triplet_hinge_loss_function(
            embed(a), embed(p), embed(n), **HYPER
        )

    per_sample = torch.func.vmap(
        torch.func.grad(one_triplet), in_dims=(None, 0, 0, 0)
    )(weight, xa, xp, xn)
    assert per_sample.shape == (9, 6, 4)
    for i in range(9):
        w = weight.clone().requires_grad_()
        loss = ep.reference_triplet_hinge_loss(
            xa[i : i + 1] @ w.T,
            xp[i : i + 1] @ w.T,
            xn[i : i + 1] @ w.T,
            **HYPER,
        )
        assert_close(per_sample[i], torch.autograd.grad(loss, w)[0])


def test_triplet_saves_no_new_memory_when_the_caller_holds_the_inputs():
    inputs = [t.requires_grad_() for t in torch.randn(3, 16, 8).unbind(0)]
    input_storages = {t.untyped_storage().data_ptr() for t in inputs}
    saved = []

    def pack(tensor):
        saved.append(tensor.untyped_storage().data_ptr() in input_storages)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn.triplet_hinge_loss_function(*inputs, **HYPER)
    assert saved == [True, True, True]


def test_in_a_training_step_the_function_saves_three_embeddings_the_composite_two():
    # Chapter 3's memory claim, in a realistic graph: nn.Linear makes the embeddings inside the
    # measured scope and saves its input and weight, not its output. Bug caught: a Function that
    # saved more (or a claim that it saves nothing new in training).
    B, D = 64, 32
    features = torch.randn(3, B, 16).unbind(0)
    embed = torch.nn.Linear(16, D)
    held = {t.untyped_storage().data_ptr() for t in (*features, *embed.parameters())}

    def new_bytes(loss_fn):
        total = 0

        def pack(tensor):
            nonlocal total
            if tensor.untyped_storage().data_ptr() not in held:
                total += tensor.numel() * tensor.element_size()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss_fn(*(embed(f) for f in features), **HYPER)
        return total

    one = B * D * 4
    assert new_bytes(fn.triplet_hinge_loss_function) == 3 * one
    composite = new_bytes(ep.reference_triplet_hinge_loss)
    assert 2 * one <= composite < 2 * one + 8 * B * 4


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_triplet_forward_mode_matches_the_reference(reduction):
    # Bug caught: a wrong jvp (a sign, a missing factor 2, the wrong reduction), or none at all.
    generator = torch.Generator().manual_seed(0)
    a, p, n = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64).unbind(0)
    tangents = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64).unbind(0)
    ours = lambda a, p, n: fn.triplet_hinge_loss_function_with_jvp(  # noqa: E731
        a, p, n, **HYPER, reduction=reduction
    )
    theirs = lambda a, p, n: ep.reference_triplet_hinge_loss(  # noqa: E731
        a, p, n, **HYPER, reduction=reduction
    )
    assert_close(
        torch.func.jvp(ours, (a, p, n), tangents),
        torch.func.jvp(theirs, (a, p, n), tangents),
    )
    # Tangents for some inputs only: the others arrive as None.
    only_anchor = lambda x: ours(x, p, n)  # noqa: E731
    assert_close(
        torch.func.jacfwd(only_anchor)(a), torch.func.jacrev(lambda x: theirs(x, p, n))(a)
    )
    if reduction != "none":
        assert_close(
            torch.func.hessian(only_anchor)(a),
            torch.func.hessian(lambda x: theirs(x, p, n))(a),
        )
    inputs = [t.clone().requires_grad_() for t in (a, p, n)]
    assert torch.autograd.gradcheck(ours, inputs, check_forward_ad=True)


def test_the_function_without_jvp_has_no_forward_mode():
    # The split chapter 3 relies on: forward mode lives in the subclass only.
    a, p, n = torch.randn(3, 4, 2, dtype=torch.float64).unbind(0)
    loss = lambda x: fn.triplet_hinge_loss_function(x, p, n, **HYPER)  # noqa: E731
    with pytest.raises(NotImplementedError, match="implement the jvp function"):
        torch.func.jvp(loss, (a,), (torch.ones_like(a),))


def test_compile_traces_the_function_and_its_backward_whole():
    # Chapter 3's claim: torch.compile puts TripletHingeLossFunction, backward included, into one
    # graph. Bug caught: a custom jvp (or anything else Dynamo cannot trace) put back on the
    # Function, which makes fullgraph=True raise and leaves the eager backward in place.
    torch.compiler.reset()
    inputs = [t.requires_grad_() for t in torch.randn(3, 16, 8).unbind(0)]
    compiled = torch.compile(fn.triplet_hinge_loss_function, fullgraph=True)
    loss = compiled(*inputs, **HYPER)
    assert type(loss.grad_fn).__name__ == "CompiledFunctionBackward"
    expected = fn.triplet_hinge_loss_function(*inputs, **HYPER)
    assert_close(loss, expected)
    for grad, ref in zip(
        torch.autograd.grad(loss, inputs), torch.autograd.grad(expected, inputs)
    ):
        assert_close(grad, ref)


def test_compile_refuses_the_function_with_a_custom_jvp():
    # The limitation chapter 3 shows: Dynamo does not trace a Function that defines jvp.
    torch.compiler.reset()
    inputs = [t.requires_grad_() for t in torch.randn(3, 16, 8).unbind(0)]
    compiled = torch.compile(fn.triplet_hinge_loss_function_with_jvp, fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="jvp"):
        compiled(*inputs, **HYPER)


def test_linear_without_bias_returns_a_trailing_none():
    # Chapter 2's rule, as LinearFunction uses it: two inputs, three values, the last None.
    x = torch.randn(3, 2, requires_grad=True)
    weight = torch.randn(4, 2, requires_grad=True)
    out = fn.LinearFunction.apply(x, weight)
    grads = fn.LinearFunction.backward(out.grad_fn, torch.ones(3, 4))
    assert len(grads) == 3 and grads[2] is None
    out.sum().backward()
    assert_close(weight.grad, torch.ones(4, 3) @ x.detach())


def test_module_matches_the_reference_module():
    settings = dict(t1=-0.5, t2=0.1, beta=0.3, reduction="sum")
    module = fn.HandwrittenTripletHingeLoss(**settings)
    assert repr(module) == (
        "HandwrittenTripletHingeLoss(t1=-0.5, t2=0.1, beta=0.3, reduction='sum')"
    )
    inputs = torch.randn(3, 5, 4).unbind(0)
    assert_close(module(*inputs), ep.TripletHingeLoss(**settings)(*inputs))
    with pytest.raises(ValueError, match=re.escape("beta must be >= 0")):
        fn.HandwrittenTripletHingeLoss(t1=-1, t2=0, beta=-1)
