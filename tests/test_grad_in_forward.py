"""Appendix 91 (moving fewer bytes), section 2: ops.triplet_hinge_loss(..., grad_in_forward=True).

The operator extending_pytorch::triplet_hinge_loss_with_grads returns the loss
and its gradients for grad_output = 1, in one pass; autograd keeps the
gradients instead of the inputs, and backward returns them as they are when
grad_output is exactly 1 and scales them otherwise (on CUDA: in place, decided
on the device; test_saved_distances.py). Every test compares with
chapter 1's reference, in float64 unless it says otherwise.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

import extending_pytorch as ep
from extending_pytorch import ops, testing
from extending_pytorch.reference import reference_triplet_hinge_loss

SETTINGS = dict(t1=-2.0, t2=30.0, beta=0.3)
WITH_GRADS = torch.ops.extending_pytorch.triplet_hinge_loss_with_grads.default
PLAIN = torch.ops.extending_pytorch.triplet_hinge_loss.default
BACKWARD = torch.ops.extending_pytorch.triplet_hinge_loss_backward.default


def leaves(batch=40, dim=17, seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(batch, dim, generator=generator, dtype=dtype).requires_grad_()
        for _ in range(3)
    ]


def fused(reduction="mean"):
    return lambda a, p, n: ops.triplet_hinge_loss(
        a, p, n, reduction=reduction, grad_in_forward=True, **SETTINGS
    )


def reference(reduction="mean"):
    return lambda a, p, n: reference_triplet_hinge_loss(
        a, p, n, reduction=reduction, **SETTINGS
    )


def fused_loss_fn(anchor, positive, negative, **kwargs):
    """A loss_fn for testing.check_against_reference."""
    return ops.triplet_hinge_loss(anchor, positive, negative, grad_in_forward=True, **kwargs)


def assert_same_loss_and_grads(fn, expected_fn, inputs, grad_output):
    loss = fn(*inputs)
    expected = expected_fn(*inputs)
    assert_close(loss, expected)
    for g, e in zip(
        torch.autograd.grad(loss, inputs, grad_output),
        torch.autograd.grad(expected, inputs, grad_output),
    ):
        assert_close(g, e)


class OpLog(TorchDispatchMode):
    """Records the operators that run, and the largest output of each."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.largest = []  # elements

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else [out]
        self.ops.append(func)
        self.largest.append(
            max((t.numel() for t in results if isinstance(t, torch.Tensor)), default=0)
        )
        return out


# ---- Values and gradients ---------------------------------------------------


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
@pytest.mark.parametrize("unit", [True, False], ids=["grad_output=1", "grad_output!=1"])
def test_matches_the_reference(reduction, unit):
    # Catches a wrong scale folded into the saved gradients (1/B for "mean"),
    # and a backward that returns the saved gradients when grad_output is
    # not 1 (as under loss scaling or a weighted sum of losses).
    x = leaves()
    if reduction == "none":
        grad_output = torch.ones(40, dtype=torch.float64)
        if not unit:
            grad_output = torch.linspace(-2, 3, 40, dtype=torch.float64)
    else:
        grad_output = torch.tensor(1.0 if unit else 1.7, dtype=torch.float64)
    assert_same_loss_and_grads(fused(reduction), reference(reduction), x, grad_output)


def test_a_per_row_grad_output_with_a_single_non_one_entry():
    # Catches a test of "grad_output is 1" that looks at one element only.
    x = leaves()
    grad_output = torch.ones(40, dtype=torch.float64)
    grad_output[-1] = 2.0
    assert_same_loss_and_grads(fused("none"), reference("none"), x, grad_output)


@pytest.mark.parametrize("layout", list(testing.LAYOUTS))
def test_views_as_each_input(layout):
    # Catches a kernel that ignores strides (a view is passed as the view;
    # gradients are taken with respect to its base).
    for position in range(3):
        layouts = ["contiguous"] * 3
        layouts[position] = layout
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                fused_loss_fn, tuple(layouts), 9, 13,
                reduction=reduction, dtype=torch.float64, hyper=SETTINGS,
            )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_matches_the_plain_operator(dtype):
    # The same arithmetic as the plain forward and backward kernels.
    x = [t.detach().to(dtype).requires_grad_() for t in leaves(batch=33, dim=70)]
    loss = fused()(*x)
    plain = ops.triplet_hinge_loss(*x, **SETTINGS)
    assert loss.dtype == dtype
    assert torch.equal(loss, plain)
    for g, p in zip(torch.autograd.grad(loss, x), torch.autograd.grad(plain, x)):
        assert_close(g, p, rtol=0, atol=0)


def test_an_empty_batch():
    x = [torch.empty(0, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    for reduction in ep.REDUCTIONS:
        loss = fused(reduction)(*x)
        assert_close(loss, reference(reduction)(*x), equal_nan=True)
        grads = torch.autograd.grad(loss, x, torch.ones_like(loss))
        assert all(g.shape == (0, 4) for g in grads)


# ---- Only what is needed -----------------------------------------------------


def test_backward_writes_no_batch_sized_tensor_when_grad_output_is_one():
    # Catches a backward that multiplies anyway (a full pass over B x D
    # numbers per gradient, the traffic this design saves), one that calls
    # the backward operator, and autograd filling zeros for the unused
    # gradient outputs (what it does unless setup_context calls
    # ctx.set_materialize_grads(False)).
    x = leaves()
    loss = fused()(*x)
    with OpLog() as log:
        torch.autograd.grad(loss, x)
    batch_sized = [op for op, n in zip(log.ops, log.largest) if n >= x[0].numel()]
    assert batch_sized == []
    assert BACKWARD not in log.ops


def test_falls_back_to_the_plain_operator_when_no_backward_can_follow():
    # Catches computing gradients nobody will use: under no_grad, or for
    # inputs that do not require gradients.
    x = leaves()
    detached = [t.detach() for t in x]
    for inputs, context in ((detached, torch.enable_grad()), (x, torch.no_grad())):
        with context, OpLog() as log:
            fused()(*inputs)
        assert WITH_GRADS not in log.ops
        assert PLAIN in log.ops


def test_only_the_gradients_of_inputs_that_require_them_are_computed(monkeypatch):
    # Catches an output_mask ignored (a detached negative would still cost
    # B x D writes and B x D numbers of memory until backward).
    a, p, n = leaves()
    p = p.detach()
    masks = []

    def recording(*args):
        masks.append(list(args[-1]))
        return WITH_GRADS(*args)

    monkeypatch.setattr(ops, "triplet_hinge_loss_with_grads_op", recording)
    loss = fused()(a, p, n)
    assert masks == [[True, False, True]]
    grad_a, grad_n = torch.autograd.grad(loss, (a, n))
    expected = torch.autograd.grad(reference()(a, p, n), (a, n))
    assert_close(grad_a, expected[0])
    assert_close(grad_n, expected[1])
    _, *grads = WITH_GRADS(a, p, n, -2.0, 30.0, 0.3, "mean", [True, False, True])
    assert grads[1] is None and grads[0] is not None and grads[2] is not None


def test_returned_gradients_do_not_require_grad():
    # Catches handing back the saved tensors with a graph attached.
    x = leaves()
    (grad_a,) = torch.autograd.grad(fused()(*x), x[0])
    assert not grad_a.requires_grad


# ---- Second derivatives -------------------------------------------------------


@pytest.mark.parametrize("reduction", ep.REDUCTIONS)
def test_double_backward_is_correct(reduction):
    # Catches a second derivative that treats the saved gradients as
    # constants (it would be silently zero).
    x = leaves(batch=6, dim=5, seed=4)
    assert torch.autograd.gradgradcheck(fused(reduction), x)


def test_hessian_vector_product_with_grad_output_one():
    # gradgradcheck uses random grad_outputs; loss.backward(create_graph=True)
    # passes exactly 1. Catches a backward that checks "is it 1?" before
    # "is a graph being built?": its gradients would be constants.
    x = leaves(batch=12, dim=7, seed=5)
    v = [torch.randn_like(t) for t in x]
    products = []
    for fn in (fused(), reference()):
        grads = torch.autograd.grad(fn(*x), x, create_graph=True)
        dot = sum((g * u).sum() for g, u in zip(grads, v))
        products.append(torch.autograd.grad(dot, x))
    for h, e in zip(*products):
        assert_close(h, e)
    assert any(h.abs().sum() > 0 for h in products[0])


def test_inputs_modified_in_place_are_refused():
    # As with the plain operator: a saved input changed before backward.
    x = leaves()
    a = x[0] * 1
    loss = ops.triplet_hinge_loss(a, x[1], x[2], grad_in_forward=True, **SETTINGS)
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# ---- Registration, compile, autocast, devices --------------------------------


def test_opcheck():
    x = [t.detach().float().requires_grad_() for t in leaves(batch=8, dim=6)]
    for reduction in ep.REDUCTIONS:
        for mask in ([True, True, True], [False, True, False]):
            torch.library.opcheck(WITH_GRADS, (*x, -2.0, 30.0, 0.3, reduction, mask))


def test_torch_compile_fullgraph():
    # Catches a graph break (fullgraph=True raises) and a compiled backward
    # that gets grad_output = 1 or 3 wrong (under compile it always scales).
    x = leaves(dtype=torch.float32)
    torch.compiler.reset()
    compiled = torch.compile(fused(), fullgraph=True)
    for grad_output in (torch.tensor(1.0), torch.tensor(3.0)):
        assert_same_loss_and_grads(compiled, reference(), x, grad_output)


def test_compiled_backward_always_scales_the_saved_gradients():
    # Pins appendix 91's claim that under torch.compile the fast path is gone:
    # the value of grad_output is unknown while tracing, so AOTAutograd's
    # backward graph multiplies each saved gradient (three aten.mul, 3 B D
    # read + 3 B D written on top of the forward's 6 B D). Catches a compiled
    # backward that stopped scaling (wrong for grad_output != 1) or one that
    # started calling the two-pass backward operator.
    # Private APIs (may change), as torch's custom-backends documentation uses
    # them: no public API hands a backend AOTAutograd's backward graph.
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    backward_graphs = []

    def keep_backward(graph_module, example_inputs):
        backward_graphs.append(graph_module)
        return make_boxed_func(graph_module.forward)

    backend = aot_autograd(
        fw_compiler=lambda gm, _: make_boxed_func(gm.forward), bw_compiler=keep_backward
    )
    x = leaves(dtype=torch.float32)
    torch.compiler.reset()
    torch.compile(fused(), backend=backend, fullgraph=True)(*x).backward()
    (graph,) = backward_graphs
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.aten.mul.Tensor] * 3


def test_autocast_computes_in_float32():
    # Catches the fused operator missing its autocast rule: it would compute
    # in bfloat16, unlike the plain operator.
    x = [t.detach().bfloat16().requires_grad_() for t in leaves(batch=24, dim=64)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = fused()(*x)
    assert loss.dtype == torch.float32
    expected = reference()(*(t.float() for t in x))
    assert_close(loss, expected)
    grads = torch.autograd.grad(loss, x)
    assert all(g.dtype == torch.bfloat16 for g in grads)


def test_other_devices_take_the_plain_two_pass_operator():
    # Catches a device check that raises, or that sends a tensor of a device
    # without a one-pass kernel (meta; CPU and CUDA have one) to the one-pass
    # operator. The CUDA tests are in test_saved_distances.py.
    x = [torch.empty(4, 3, device="meta", requires_grad=True) for _ in range(3)]
    with OpLog() as log:
        loss = fused()(*x)
    assert WITH_GRADS not in log.ops and PLAIN in log.ops
    assert loss.device.type == "meta" and loss.requires_grad


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_inputs_take_the_one_pass_operator_and_get_correct_gradients():
    x = [t.detach().cuda().requires_grad_() for t in leaves()]
    with OpLog() as log:
        assert_same_loss_and_grads(fused(), reference(), x, torch.tensor(1.0, device="cuda"))
    assert WITH_GRADS in log.ops
    assert_same_loss_and_grads(fused(), reference(), x, torch.tensor(3.0, device="cuda"))


def test_saved_gradients_are_returned_as_they_are_and_guarded_by_version():
    # Pins the documented aliasing: with grad_output = 1 backward hands over
    # the saved tensors (no copy), so two backward calls with retain_graph
    # return the same object; an in-place change to it is caught by autograd
    # at the next backward instead of silently returning changed gradients.
    # Catches a copy sneaking into the fast path (the identity assert) and a
    # fast path that bypasses the saved-tensor version check.
    x = leaves()
    loss = fused()(*x)
    first = torch.autograd.grad(loss, x, retain_graph=True)
    second = torch.autograd.grad(loss, x, retain_graph=True)
    assert first[0] is second[0]
    first[0].mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, x)


def test_backward_into_grad_twice_accumulates_correctly():
    # .backward() with retain_graph twice: .grad must be twice the gradient.
    # Catches .grad aliasing a saved gradient (the second accumulation would
    # then also change the saved tensor and double-count).
    x = leaves()
    loss = fused()(*x)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward()
    expected = torch.autograd.grad(reference()(*x), x)
    for t, e in zip(x, expected):
        assert_close(t.grad, 3 * e)


def test_bad_inputs_get_the_plain_operators_messages():
    good = torch.randn(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="positive must have the same shape as anchor"):
        fused()(good, good[:, :2], good)
    with pytest.raises(RuntimeError, match="anchor must be 2-D"):
        WITH_GRADS(good[0], good[0], good[0], -1.0, 0.5, 0.5, "mean", [True] * 3)
