"""Chapter 9: the Helion kernels of the triplet hinge loss.

Helion compiles each kernel to Triton; without a GPU, that Triton runs through
Triton's interpreter (TRITON_INTERPRET=1, set by conftest.py and by
extending_pytorch.triton_ops before triton is imported), so these tests run the
generated code's indexing, masks, strides and reductions on the CPU.

The Helion operator keeps chapter 6's contract (arguments, checks, messages,
saved distances), so chapter 6's behavioural tests are run again here against
it (`test_chapter_6s_checks_hold_for_helion`): values and gradients on sample
shapes, gradcheck, rows of several blocks, the kinks' subgradient, float64
hyper-parameters, the float16 mean, 64-bit offsets, NaN and inf, empty
batches, 16-bit inputs on every layout, and every input check. The tests
below are Helion's own: a second configuration, the generated code, its bytes,
its compilation for a GPU, and mutations of its indexing that the reference
checks must catch.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch.testing import assert_close

pytest.importorskip("helion", reason="helion is installed on Linux only, like triton (requirements.txt)")

import extending_pytorch as ep  # noqa: E402
from extending_pytorch import emulator, helion_ops, testing, triton_ops  # noqa: E402

import helion  # noqa: E402  (after helion_ops: triton must see TRITON_INTERPRET first)
import test_triton as chapter6  # noqa: E402

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
DEVICE = chapter6.DEVICE
interpreted_only = pytest.mark.skipif(
    not helion_ops.INTERPRETED, reason="runs the generated Triton through the interpreter"
)


# ---- Chapter 6's tests, against the Helion operator ----


@pytest.fixture
def helion_in_chapter_6(monkeypatch):
    """Chapter 6's tests call triton_ops.triplet_hinge_loss and its two operators: here, Helion's."""
    monkeypatch.setattr(triton_ops, "triplet_hinge_loss", helion_ops.triplet_hinge_loss)
    monkeypatch.setattr(chapter6, "OP", helion_ops.triplet_hinge_loss_op)
    monkeypatch.setattr(chapter6, "BACKWARD_OP", helion_ops.triplet_hinge_loss_backward_op)


# Chapter 6's tests that check behaviour, not Triton itself (its kernels' sources,
# block widths, launches and autotuner are Triton's and stay in test_triton.py).
REUSED = [
    ("_test_values_and_gradients", dict(device=DEVICE)),
    ("_test_gradcheck", dict(device=DEVICE)),
    ("test_rows_longer_than_one_block", None),
    ("test_views_are_read_in_place_and_differentiated_through", None),
    ("test_gradient_of_a_scalar_upstream_gradient_that_is_expanded", None),
    ("test_forward_returns_each_rows_distances_in_the_accumulation_dtype", None),
    ("test_backward_takes_its_weights_from_the_saved_distances", None),
    ("test_saved_distances_are_the_forwards_and_carry_no_gradient", None),
    ("test_subgradient_at_the_kinks_is_zero", None),
    ("test_hyperparameters_keep_float64_precision", None),
    ("test_mean_gradient_is_scaled_in_float32_for_float16", None),
    ("test_offsets_are_64_bit", None),
    ("test_empty_batch_follows_the_reference", None),
    ("test_nan_and_inf_follow_the_reference", None),
    ("test_16_bit_values_and_gradients_against_float64", None),
    ("test_double_backward_is_refused_not_silently_wrong", None),
    ("test_input_checks", None),
    ("test_reduction_check", None),
    ("test_python_wrapper_checks_the_settings", None),
    ("test_backward_checks", None),
    ("test_backward_checks_the_distances", None),
]


def _parameter_sets(mark):
    # The {argument: value} dicts of one @pytest.mark.parametrize.
    names = mark.args[0]
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    for values in mark.args[1]:
        values = values.values if hasattr(values, "values") else values  # a pytest.param
        yield dict(zip(names, values if len(names) > 1 else (values,)))


def _reused_cases():
    # One case per test and per parameter set of its @pytest.mark.parametrize marks (all combined).
    import itertools

    for name, arguments in REUSED:
        function = getattr(chapter6, name)
        marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
        if arguments is not None or not marks:
            yield pytest.param(name, arguments or {}, id=name)
            continue
        for index, combination in enumerate(itertools.product(*map(list, map(_parameter_sets, marks)))):
            yield pytest.param(name, {k: v for part in combination for k, v in part.items()}, id=f"{name}[{index}]")


@pytest.mark.parametrize("name, arguments", list(_reused_cases()))
def test_chapter_6s_checks_hold_for_helion(name, arguments, helion_in_chapter_6):
    getattr(chapter6, name)(**arguments)


def test_chapter_6s_checks_reach_the_helion_kernels(helion_in_chapter_6):
    # The fixture must reroute chapter 6's tests: with it, their calls launch
    # Helion's generated kernels, and none of chapter 6's.
    with triton_ops.record_launches() as launches:
        chapter6.test_empty_batch_follows_the_reference()
        chapter6.test_backward_takes_its_weights_from_the_saved_distances()
        chapter6.test_saved_distances_are_the_forwards_and_carry_no_gradient()
    kernels = {name for name, _ in launches}
    assert kernels == {"_helion__forward_body", "_helion__backward_body"}, kernels


# ---- A second configuration ----

# Four rows per program (the batch's tile masked where B is not a multiple
# of 4) and 16 columns per step: the same source, other generated code.
SECOND_CONFIG = helion.Config(block_sizes=[4, 16], num_warps=2, num_stages=1)


@pytest.fixture
def second_config(monkeypatch):
    forward, backward = helion_ops.make_kernels(SECOND_CONFIG, SECOND_CONFIG)
    monkeypatch.setattr(helion_ops, "forward_kernel", forward)
    monkeypatch.setattr(helion_ops, "backward_kernel", backward)


@pytest.mark.parametrize(
    "layouts, dtype",
    [(("misaligned", "column-strided", "expanded"), torch.float32), (("transposed", "row-padded", "offset"), torch.float64)],
    ids=["views-float32", "views-float64"],
)
def test_a_config_of_several_rows_per_program_follows_the_reference(layouts, dtype, second_config):
    # B = 7: the second program's tile of 4 rows has one row masked off.
    # Catches a mask missing on the batch axis (a read or write of row 7).
    with triton_ops.record_launches() as launches:
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                helion_ops.triplet_hinge_loss, layouts, 7, 37, reduction=reduction, dtype=dtype, device=DEVICE
            )
    assert {launch.grid for launch in launches} == {(2, 1, 1)}


# ---- The generated code ----


def _triplet(batch, dim, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, batch, dim, generator=generator, dtype=torch.float64).to(dtype).unbind(0)


def _generated(dtype=torch.float32):
    a, p, n = _triplet(4, 100, dtype)
    hyper = helion_ops.hyperparameter_tensor(-1.0, 0.5, 0.5, dtype, "cpu")
    forward = helion_ops.triton_code(helion_ops.forward_kernel, (a, p, n, hyper), helion_ops.FORWARD_CONFIG)
    # Bound, not run: CPU tensors give the code on a GPU machine too.
    distances = torch.zeros(4, 2, dtype=helion_ops.distance_dtype(dtype))
    scale = torch.ones(4, dtype=helion_ops.distance_dtype(dtype))
    backward = helion_ops.triton_code(
        helion_ops.backward_kernel, (scale, a, p, n, distances, hyper), helion_ops.BACKWARD_CONFIG
    )
    return forward, backward


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_generated_kernels_read_each_input_once_per_step_with_64_bit_offsets(dtype):
    # What the configuration and the settings promise, read in the generated
    # Triton: one program per row (the batch's tile of 1), a column loop whose
    # last step is masked, 64-bit indices (index_dtype=torch.int64; Helion would
    # pick int32 for these sizes), one load of each input per step, sums in the
    # accumulation dtype. Catches the settings or the configuration lost on
    # their way to the compiler.
    accumulation = "tl.float64" if dtype == torch.float64 else "tl.float32"
    for code in _generated(dtype):
        assert "_BLOCK_SIZE_1 = tl.constexpr(64)" in code
        assert re.findall(r"_BLOCK_SIZE_0 = tl.constexpr\((\d+)\)", code) in ([], ["1"])  # one row a program
        assert "tl.program_id(0).to(tl.int64)" in code
        assert "tl.arange(0, _BLOCK_SIZE_1).to(tl.int64)" in code
        assert "mask_1 = indices_1 < dim" in code
        assert "tl.int32" not in code
        for name in ("anchor", "positive", "negative"):
            assert len(re.findall(rf"tl\.load\({name} \+", code)) == 1, name
        assert "num_warps=4, num_stages=1" in code
        if dtype.itemsize == 2:  # each 16-bit input converted to float32 after its load
            assert len(re.findall(rf"tl\.cast\(load(_\d)?, {accumulation}\)", code)) == 3
    forward, backward = _generated(dtype)
    assert forward.count(f"tl.full([_BLOCK_SIZE_0], 0.0, {accumulation})") == 2  # the two sums
    # The backward reads the saved distances, and never sums a row.
    assert "tl.load(distances +" in backward and "tl.sum(" not in backward


@interpreted_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_generated_kernels_move_9N_with_saved_distances(dtype):
    # As tests/test_traffic.py counts chapter 6's kernels: 3N read by the
    # forward, 3N read and 3N written by the backward (N = B * D * element
    # size), plus a few numbers per row: the loss, the two distances, the
    # upstream gradient and the three hyper-parameters, which each program
    # loads. Catches a backward that recomputes the distances (6N read) and a
    # forward that reads a row twice. The 6N of the one-pass design
    # (appendix 91) is out of reach of a separate forward and backward.
    batch, dim = 6, 100  # 100: the last block of 64 is masked
    a, p, n = (x.requires_grad_() for x in _triplet(batch, dim, dtype, seed=3))
    size, acc = a.element_size(), (8 if dtype == torch.float64 else 4)
    N = batch * dim * size
    with emulator.traffic() as t:
        helion_ops.triplet_hinge_loss(a, p, n, **HYPER).backward()
    forward, backward = t.launches
    assert forward.kernel == "_helion__forward_body" and backward.kernel == "_helion__backward_body"
    assert forward.grid == backward.grid == (batch, 1, 1)
    for name in ("anchor", "positive", "negative"):
        assert forward.buffer(name).bytes_read == backward.buffer(name).bytes_read == N, name
        assert forward.buffer(name).bytes_written == backward.buffer(name).bytes_written == 0
    for name in ("grad_a", "grad_p", "grad_n"):
        assert backward.buffer(name).bytes_written == N and backward.buffer(name).bytes_read == 0
    per_row = 3 * acc  # the hyper-parameters, loaded by each program
    assert forward.bytes_read == 3 * N + batch * per_row
    assert forward.bytes_written == batch * size + 2 * batch * acc
    assert backward.bytes_read == 3 * N + batch * (per_row + 2 * acc + acc)  # + distances, scale
    assert backward.bytes_written == 3 * N
    assert t.bytes == 9 * N + batch * (2 * per_row + size + 5 * acc)


def test_generated_kernels_compile_for_a_gpu_without_one():
    # The interpreter runs code the compiler may reject; here Triton's compiler
    # takes the generated kernels for an H100 (sm_90a), in a process of its own.
    # With 1024 columns on 2 warps each thread loads 16 bytes at once where the
    # rows are aligned (ld.global.v4.b32, chapter 6's 128-bit loads); the pinned
    # CI configuration (64 columns on 4 warps) gives each thread one float.
    # Three distinct inputs: Helion specialises a kernel on which arguments alias, and
    # (a, a, a) would compile a kernel with one input (review turn 6, F2).
    a, p, n = torch.zeros(3, 4, 1024).unbind(0)
    hyper = helion_ops.hyperparameter_tensor(-1.0, 0.5, 0.5, a.dtype, "cpu")
    wide = helion.Config(block_sizes=[1, 1024], num_warps=2, num_stages=1)
    distances, scale = torch.zeros(4, 2), torch.ones(4)
    jobs = [
        (helion_ops.triton_code(helion_ops.forward_kernel, (a, p, n, hyper), config), "_forward_body", (a, p, n, hyper))
        for config in (helion_ops.FORWARD_CONFIG, wide)
    ]
    backward_args = (scale, a, p, n, distances, hyper)
    jobs.append((helion_ops.triton_code(helion_ops.backward_kernel, backward_args, wide), "_backward_body", backward_args))
    (pinned,), (forward,), (backward,) = helion_ops.compile_generated_for_gpu(jobs)

    def loads(ptx):
        return set(re.findall(r"ld\.global[.\w]*", ptx))

    assert "ld.global.v4.b32" not in loads(pinned)
    assert "ld.global.v4.b32" in loads(forward) and "ld.global.v4.b32" in loads(backward)
    assert ".target sm_90a" in forward


# ---- The operator ----


def test_opcheck_every_utility():
    # custom_op, not triton_op: torch.compile calls the operator as a black box,
    # so the fake-tensor tracing of every utility works without a GPU too.
    a, p, n = (t.to(DEVICE).requires_grad_() for t in torch.randn(3, 4, 6, dtype=torch.float64).unbind(0))
    for reduction in ep.REDUCTIONS:
        report = torch.library.opcheck(helion_ops.triplet_hinge_loss_op, (a, p, n, -1.0, 0.5, 0.5, reduction))
        assert set(report.values()) == {"SUCCESS"}
    _, distances = helion_ops.triplet_hinge_loss_op(a.detach(), p.detach(), n.detach(), -1.0, 0.5, 0.5, "none")
    grad = torch.randn(4, dtype=torch.float64, device=DEVICE)
    torch.library.opcheck(
        helion_ops.triplet_hinge_loss_backward_op,
        (grad, a.detach(), p.detach(), n.detach(), distances, -1.0, 0.5, 0.5, "none"),
    )


def test_torch_compile_fullgraph_calls_the_operator():
    inputs = [t.to(DEVICE).requires_grad_() for t in torch.randn(3, 5, 21).unbind(0)]
    eager = lambda a, p, n: helion_ops.triplet_hinge_loss(a, p, n, **HYPER)  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(eager, fullgraph=True)
    loss_compiled, loss_eager = compiled(*inputs), eager(*inputs)
    assert_close(loss_compiled, loss_eager)
    for got, expected in zip(torch.autograd.grad(loss_compiled, inputs), torch.autograd.grad(loss_eager, inputs)):
        assert_close(got, expected)
    torch._dynamo.reset()


def test_module_matches_chapter_one():
    settings = dict(t1=-0.5, t2=0.1, beta=0.3, reduction="sum")
    module = helion_ops.HelionTripletHingeLoss(**settings)
    assert repr(module) == "HelionTripletHingeLoss(t1=-0.5, t2=0.1, beta=0.3, reduction='sum')"
    inputs = torch.randn(3, 5, 4, device=DEVICE).unbind(0)
    assert_close(module(*inputs), ep.TripletHingeLoss(**settings)(*inputs))


def test_no_autotuning_with_the_pinned_configs():
    # A kernel without a config autotunes on its first call (on a GPU, minutes);
    # the operator's kernels carry the pinned ones and compile nothing else.
    assert helion_ops.forward_kernel.configs == [helion_ops.FORWARD_CONFIG]
    assert helion_ops.backward_kernel.configs == [helion_ops.BACKWARD_CONFIG]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="autotuning times configurations on a GPU")
def test_autotuned_kernels_follow_the_reference_cuda(monkeypatch):
    # Tuned once (float32, 256 x 512) among a few configs, as the GPU report tunes them
    # among many (a search of effort "quick" took over a minute per kernel on an H200);
    # then every dtype and layout under the configs chosen. Kernels without a config
    # would tune again for every new dtype.
    candidates = [helion.Config(block_sizes=[rows, columns], num_warps=warps, num_stages=1)
                  for rows, columns, warps in [(1, 64, 4), (1, 256, 2), (2, 512, 4), (1, 1024, 8)]]
    forward, backward = helion_ops.make_kernels(*helion_ops.autotune(256, 512, configs=candidates))
    monkeypatch.setattr(helion_ops, "forward_kernel", forward)
    monkeypatch.setattr(helion_ops, "backward_kernel", backward)
    testing.check_against_reference(helion_ops.triplet_hinge_loss, ("contiguous",) * 3, 64, 256, device="cuda")


# ---- Mutations of the kernels' indexing, which the reference checks must catch ----

# Each replaces one index of the kernels' source. None was used to write the
# reference checks (chapter 1's check_against_reference, written for earlier
# rungs); each must fail them.
MUTATIONS = {
    "forward stores d_ap in d_an's column": ("_forward_body", "distances[rows, 0] = sum_p", "distances[rows, 1] = sum_p"),
    "forward reads positive for negative": ("_forward_body", "a - negative[rows, cols]", "a - positive[rows, cols]"),
    "backward reads d_ap for d_an": ("_backward_body", "d_an = distances[rows, 1]", "d_an = distances[rows, 0]"),
    "backward writes grad_n for grad_p": ("_backward_body", "grad_p[rows, cols] = gp", "grad_n[rows, cols] = gp"),
    # Seen only where each row has its own upstream gradient (reduction="none"): under the mean
    # every row's is the same number (review turn 6, F4).
    "backward reads row 0's upstream gradient": ("_backward_body", "g = scale[rows]", "g = scale[0]"),
}


@pytest.mark.parametrize("mutation", MUTATIONS, ids=list(MUTATIONS))
def test_reference_checks_catch_a_mutated_index(mutation, tmp_path, monkeypatch):
    body, old, new = MUTATIONS[mutation]
    kernel = "forward_kernel" if body == "_forward_body" else "backward_kernel"
    monkeypatch.setattr(helion_ops, kernel, helion_ops.mutated_kernel(body, old, new, tmp_path))
    # Every reduction: a wrong index into the upstream gradient shows only with reduction="none".
    failed = []
    for reduction in ep.REDUCTIONS:
        try:
            testing.check_against_reference(helion_ops.triplet_hinge_loss, ("contiguous",) * 3, 5, 70,
                                            reduction=reduction, device=DEVICE)
        except AssertionError:
            failed.append(reduction)
    assert failed, f"the mutation ({mutation}) passed the reference checks under every reduction"


def test_32_bit_offsets_fail_the_64_bit_check(monkeypatch, helion_in_chapter_6):
    # Helion picks int32 indices unless an argument has more than 2**31 - 1 elements; it
    # counts elements, not the memory a strided view reaches: row * row_stride wraps past 2**31,
    # and chapter 6's test of 64-bit offsets fails. Why KERNEL_SETTINGS asks for int64.
    forward, backward = helion_ops.make_kernels(index_dtype=torch.int32)
    monkeypatch.setattr(helion_ops, "forward_kernel", forward)
    monkeypatch.setattr(helion_ops, "backward_kernel", backward)
    with pytest.raises(AssertionError):
        chapter6.test_offsets_are_64_bit()
