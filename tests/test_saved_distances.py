"""Chapter 5, section 9 (fewer bytes): the operators that let a CUDA training step move 9N
(the forward saves each row's two squared distances; the backward reads them and each row
once) and grad_in_forward's in-place scaling, decided on the device.

ops.triplet_hinge_loss takes them for CUDA inputs; their CPU kernels make the operators
complete, and let these tests check everything but the routing without a GPU (the GPU tests
at the end run where there is one). The kernels' bytes are counted in test_traffic.py, and
the CUDA kernels run in the emulator in test_emulator.py.
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
WITH_DISTANCES = torch.ops.extending_pytorch.triplet_hinge_loss_with_distances.default
FROM_DISTANCES = torch.ops.extending_pytorch.triplet_hinge_loss_backward_from_distances.default
SCALE = torch.ops.extending_pytorch.triplet_scale_gradients_.default
WITH_GRADS = torch.ops.extending_pytorch.triplet_hinge_loss_with_grads.default
PLAIN = torch.ops.extending_pytorch.triplet_hinge_loss.default
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def saving_distances(anchor, positive, negative, *, t1, t2, beta, reduction="mean"):
    """The loss through the operator that saves distances (what CUDA inputs take)."""
    return WITH_DISTANCES(anchor, positive, negative, t1, t2, beta, reduction)[0]


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def leaves(batch=24, dim=9, seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, dim, generator=generator, dtype=dtype).requires_grad_() for _ in range(3)]


# Catches a backward that reads a distance of the wrong row or swaps d_ap and d_an (the
# masks then differ: t2 = 30 sits inside the spread of d_ap at dim 17), a scale wrong for a
# reduction, and a layout the CPU kernel mishandles, with the view on each input in turn.
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_matches_the_reference_for_every_layout(layout):
    for position, reduction in enumerate(ep.REDUCTIONS):
        layouts = ["contiguous"] * 3
        layouts[position] = layout
        testing.check_against_reference(
            saving_distances, tuple(layouts), 21, 17, reduction=reduction, dtype=torch.float64,
            seed=position, hyper=SETTINGS,
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_distances_are_the_rows_squared_distances_in_the_accumulation_type(dtype):
    a, p, n = (t.detach().to(dtype) for t in leaves())
    _, distances = WITH_DISTANCES(a, p, n, -2.0, 30.0, 0.3, "none")
    assert distances.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    expected = torch.stack([(a.double() - p.double()).pow(2).sum(1), (a.double() - n.double()).pow(2).sum(1)], 1)
    assert_close(distances.double(), expected, rtol=1e-5 if dtype != torch.float64 else 1e-12, atol=1e-5)


def test_double_backward_is_correct():
    # Catches a missing autograd formula on the backward operator (a silently wrong second
    # derivative) and a formula that forgets the distances' argument slot.
    x = leaves(batch=6, dim=4)
    for reduction in ep.REDUCTIONS:
        torch.autograd.gradgradcheck(
            lambda a, p, n: saving_distances(a, p, n, **SETTINGS, reduction=reduction), x
        )


def test_the_distances_get_no_zero_gradient_in_backward():
    # Catches materialised gradients: autograd would fill a (B, 2) tensor of zeros for the
    # distances' unused gradient before every backward.
    x = leaves()
    loss = saving_distances(*x, **SETTINGS)
    with OpLog() as log:
        torch.autograd.grad(loss, x)
    assert FROM_DISTANCES in log.ops
    assert not [op for op in log.ops if "zeros" in str(op)], log.ops


def test_opcheck():
    x = [t.detach().float() for t in leaves(batch=8, dim=6)]
    for reduction in ep.REDUCTIONS:
        torch.library.opcheck(WITH_DISTANCES, (*(t.requires_grad_() for t in x), -2.0, 30.0, 0.3, reduction))
        _, distances = WITH_DISTANCES(*(t.detach() for t in x), -2.0, 30.0, 0.3, reduction)
        g = torch.ones(8) if reduction == "none" else torch.tensor(1.5)
        for mask in ([True, True, True], [False, True, False]):
            torch.library.opcheck(FROM_DISTANCES, (g, *(t.detach() for t in x), distances, -2.0, 30.0, 0.3,
                                                   reduction, mask))
        grads = [torch.randn(8, 6) for _ in range(3)]
        torch.library.opcheck(SCALE, (g, grads[0], None, grads[2], reduction))


def test_torch_compile_fullgraph_sees_the_operators():
    # Compile-friendly: no graph break, and the compiled step gives eager's numbers.
    x = leaves(dtype=torch.float32)
    torch.compiler.reset()
    step = lambda a, p, n: saving_distances(a, p, n, **SETTINGS)  # noqa: E731
    compiled = torch.compile(step, fullgraph=True)
    got, want = compiled(*x), reference_triplet_hinge_loss(*x, **SETTINGS)
    assert_close(got, want)
    for g, e in zip(torch.autograd.grad(got, x), torch.autograd.grad(want, x)):
        assert_close(g, e)


def test_compiled_in_place_scaling_changes_its_arguments():
    # The mutation is in the schema (Tensor(a!)?): torch.compile keeps it, and a
    # compiled call changes the caller's tensors as the eager one does.
    grads = [torch.randn(5, 4) for _ in range(3)]
    eager = [g.clone() for g in grads]
    SCALE(torch.tensor(2.0), eager[0], None, eager[2], "sum")
    torch.compiler.reset()
    compiled = torch.compile(lambda g, a, n: SCALE(g, a, None, n, "sum"), fullgraph=True)
    compiled(torch.tensor(2.0), grads[0], grads[2])
    assert torch.equal(grads[0], eager[0]) and torch.equal(grads[2], eager[2])


def test_the_device_side_backward_scales_compiles_and_refuses_a_second_backward():
    # grad_in_forward's backward on CUDA (ops.DEVICE_SIDE_SCALING) scales the saved gradients
    # in place. No GPU here: a process of its own sends CPU tensors down that path, the real
    # code of ops.py. Catches a scaling that is skipped or done twice (loss * 3), a graph
    # break under torch.compile (fullgraph=True raises), and an in-place change autograd does
    # not see (a second backward with retain_graph=True must raise, not scale twice).
    code = """
import pytest, torch
from extending_pytorch import ops, reference

ops.DEVICE_SIDE_SCALING.add("cpu")
hyper = dict(t1=-1.0, t2=0.5, beta=0.5)
x = [t.requires_grad_() for t in torch.randn(3, 16, 8, generator=torch.Generator().manual_seed(0)).unbind(0)]
eager = lambda a, p, n: ops.triplet_hinge_loss(a, p, n, **hyper, grad_in_forward=True)
for step in (eager, torch.compile(eager, fullgraph=True)):
    for scale in (1.0, 3.0):
        got = torch.autograd.grad(step(*x) * scale, x)
        want = torch.autograd.grad(reference.reference_triplet_hinge_loss(*x, **hyper) * scale, x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
loss = eager(*x)
torch.autograd.grad(loss * 2, x, retain_graph=True)
with pytest.raises(RuntimeError, match="modified by an inplace operation"):
    torch.autograd.grad(loss, x)
"""
    result = testing.run_in_fresh_process(code, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


def test_scaling_multiplies_each_row_by_its_grad_output():
    # Catches a scaling that skips a row that is not 1 or reads the wrong row's grad_output.
    # (Scaling a row whose value is 1 gives the same values: test_traffic.py counts that.)
    grads = [torch.randn(7, 5, dtype=torch.float64) for _ in range(3)]
    g = torch.tensor([1.0, 2.0, 1.0, -0.5, 0.0, 1.0, 3.0], dtype=torch.float64)
    scaled = [t.clone() for t in grads]
    SCALE(g, *scaled, "none")
    for got, original in zip(scaled, grads):
        assert torch.equal(got, original * g.unsqueeze(1))


def test_bad_arguments_get_messages_naming_them():
    a, p, n = (t.detach() for t in leaves(batch=4, dim=3))
    _, d = WITH_DISTANCES(a, p, n, -2.0, 30.0, 0.3, "mean")
    one = torch.tensor(1.0, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"distances must have shape \(4, 2\)"):
        FROM_DISTANCES(one, a, p, n, d[:3], -2.0, 30.0, 0.3, "mean", [True] * 3)
    with pytest.raises(RuntimeError, match="distances must have dtype Double"):
        FROM_DISTANCES(one, a, p, n, d.float(), -2.0, 30.0, 0.3, "mean", [True] * 3)
    with pytest.raises(RuntimeError, match="distances must be contiguous"):
        FROM_DISTANCES(one, a, p, n, d.t().contiguous().t(), -2.0, 30.0, 0.3, "mean", [True] * 3)
    with pytest.raises(RuntimeError, match="grad_positive must be a contiguous"):
        SCALE(one, a.clone(), a.t(), None, "mean")
    with pytest.raises(RuntimeError, match="grad_output must have shape"):
        SCALE(torch.ones(3, dtype=torch.float64), a.clone(), None, None, "none")
    with pytest.raises(RuntimeError, match="grad_anchor must have grad_output's dtype"):
        SCALE(one, a.float(), None, None, "mean")
    with pytest.raises(RuntimeError, match="grad_negative and grad_anchor must be different tensors"):
        twice = a.clone()
        SCALE(one, twice, None, twice, "mean")
    with pytest.raises(RuntimeError, match="grad_output must have a floating-point dtype"):
        SCALE(torch.tensor(1), a.long(), None, None, "mean")


def test_cpu_inputs_keep_chapter_4s_operator():
    # The CPU's stored outputs (chapter 4's compiled graph, chapter 5's profile) name the
    # plain operator: the routing must not change them; meta tensors take it too.
    for device in ("cpu", "meta"):
        x = [torch.ones(4, 3, device=device, requires_grad=True) for _ in range(3)]
        with OpLog() as log:
            ops.triplet_hinge_loss(*x, **SETTINGS)
        assert PLAIN in log.ops and WITH_DISTANCES not in log.ops, device


# ---- On a GPU -------------------------------------------------------------------------------


def cuda_leaves(**kw):
    return [t.detach().cuda().requires_grad_() for t in leaves(**kw)]


@requires_cuda
def test_cuda_training_step_saves_the_distances_and_inference_does_not():
    x = cuda_leaves()
    with OpLog() as log:
        loss = ops.triplet_hinge_loss(*x, **SETTINGS)
        torch.autograd.grad(loss, x)
    assert WITH_DISTANCES in log.ops and FROM_DISTANCES in log.ops and PLAIN not in log.ops
    with OpLog() as log, torch.no_grad():
        ops.triplet_hinge_loss(*x, **SETTINGS)
    assert PLAIN in log.ops and WITH_DISTANCES not in log.ops
    testing.check_against_reference(ops.triplet_hinge_loss, ("contiguous",) * 3, 33, 40,
                                    reduction="mean", dtype=torch.float64, device="cuda", hyper=SETTINGS)


@requires_cuda
@pytest.mark.parametrize("dim", [64, 8192, 8200])  # one pass; the largest one pass; two kernels
def test_cuda_grad_in_forward_matches_the_reference(dim):
    x = cuda_leaves(batch=5, dim=dim, dtype=torch.float32)
    for reduction, grad_output in (("mean", torch.tensor(1.0)), ("mean", torch.tensor(3.0)),
                                   ("none", torch.linspace(0, 2, 5))):
        ref = [t.detach().double().requires_grad_() for t in x]
        loss = ops.triplet_hinge_loss(*x, **SETTINGS, reduction=reduction, grad_in_forward=True)
        want = reference_triplet_hinge_loss(*ref, **SETTINGS, reduction=reduction)
        g = grad_output.cuda()
        for got, expected in zip(torch.autograd.grad(loss, x, g),
                                 torch.autograd.grad(want, ref, g.double())):
            assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


@requires_cuda
def test_cuda_grad_in_forward_refuses_a_second_backward():
    # Documented: the saved gradients are scaled in place, so a second backward through the
    # graph raises autograd's error instead of scaling them twice.
    x = cuda_leaves()
    loss = ops.triplet_hinge_loss(*x, **SETTINGS, grad_in_forward=True)
    torch.autograd.grad(loss * 2, x, retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, x)


@requires_cuda
def test_cuda_graph_capture_of_grad_in_forward():
    # Catches a host synchronisation in the decision "is grad_output 1?".
    testing.check_cuda_graph_capture_in_fresh_process("ops", "triplet_hinge_loss",
                                                      keywords={"grad_in_forward": True})
