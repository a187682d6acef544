"""The SIMT emulator: the book's CUDA kernels (.cu, unchanged) run on the CPU.

extensions/csrc/simt/simt.h runs each thread of a block as a fiber and each
collective as a meeting of the threads it names (extending_pytorch.emulator).
Here:

- the kernels of triplet.cu and involution.cu against chapter 1's and
  chapter 8's references, through testing.check_against_reference: every
  layout, dtype, reduction and output mask in "fast" mode, a representative
  subset under AddressSanitizer + UBSan ("memory") and ThreadSanitizer
  ("races"); the grid-stride loop with the grid capped to 1 and 2 blocks; an
  empty batch; dims that are and are not whole 16-byte packs;
- the emulator itself, on tiny kernels (tests/emulator/collectives.cu): each
  broken rule is reported with the .cu file:line, blockIdx and threadIdx, not
  a hang; correct code computes what CUDA defines.

tools/emulate.py (make emulate) runs this file for every mode.
EXTENDING_PYTORCH_EMULATOR_MODES=fast,memory picks the modes (default: all
this machine can build).
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import threading

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from extending_pytorch import emulator, testing
from extending_pytorch.emulator import toolchain
from extending_pytorch.simt_rewrite import rewrite

pytestmark = [
    pytest.mark.skipif(
        not emulator.available(),
        reason="the emulator needs g++ and CUDA's cuda_fp16.h (emulator.cuda_include_dir)",
    ),
    # What these test is the emulator's own C++ (simt.h) running CUDA sources: the same on every
    # torch (chapter 5's notebook runs it on the oldest torch too).
    pytest.mark.same_on_every_torch,
]

KERNELS = pathlib.Path(__file__).parent / "emulator" / "collectives.cu"
HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)


def _mode_available(mode: str) -> bool:
    try:
        toolchain._runtime_library(mode)
        emulator.cuda_include_dir()
    except emulator.EmulatorUnavailable:
        return False
    return True


def selected_modes() -> list[str]:
    wanted = os.environ.get("EXTENDING_PYTORCH_EMULATOR_MODES")
    modes = wanted.split(",") if wanted else list(emulator.MODES)
    return [m for m in modes if m in emulator.MODES]


def modes(*which):
    """pytest params for the given modes, skipped where not selected or not buildable."""
    params = []
    for mode in which or emulator.MODES:
        marks = []
        if mode not in selected_modes():
            marks.append(pytest.mark.skip(reason=f"mode {mode} not selected"))
        elif not _mode_available(mode):
            marks.append(pytest.mark.skip(reason=f"no sanitizer runtime for mode {mode}"))
        params.append(pytest.param(mode, marks=marks, id=mode))
    return params


SANITIZERS = ("memory", "races")


@pytest.fixture(autouse=True)
def _mode_independent_tests_run_with_fast(request):
    # Tests without a mode (the emulator's semantics, the rewrite, the API)
    # run once, with the fast mode: tools/emulate.py runs one mode at a time.
    if "mode" not in request.fixturenames and "fast" not in selected_modes():
        pytest.skip("runs with the fast mode")

# As tests/test_cuda.py: compared with the reference in float64.
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-9),
    torch.float16: dict(rtol=4e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=3e-2, atol=8e-3),
}

# 3: no dtype takes it in packs. 8: whole packs for every dtype (4 floats,
# 2 doubles, 8 halfs). 36: whole packs of floats and doubles, not of halfs.
DIMS = (3, 8, 36)


def check_triplet(layout, position, reduction, dtype, dim, *, batch=37, **options):
    layouts = ["contiguous"] * 3
    layouts[position] = layout
    testing.check_against_reference(
        functools.partial(emulator.triplet_hinge_loss, **options),
        tuple(layouts),
        batch,
        dim,
        reduction=reduction,
        dtype=dtype,
        seed=position + 3 * dim,
        reference_dtype=torch.float64,
        **TOLERANCE[dtype],
    )


# ---- triplet.cu: the full matrix in fast mode ----------------------------------


# Catches what test_cuda.py's GPU twin catches, without a GPU: a row read in
# packs that is not aligned, adjacent or a whole number of packs, a wrong
# stride, a wrong reduction or scale, for every dtype, with the unusual layout
# on each input in turn (the position cycles with the reduction).
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
@pytest.mark.parametrize("mode", modes("fast"))
def test_triplet_layouts_dtypes_reductions(mode, layout, dtype):
    for dim in DIMS:
        for position, reduction in enumerate(ep.REDUCTIONS):
            check_triplet(layout, position, reduction, dtype, dim, mode=mode)


# The same under the sanitizers, on a representative subset: every layout
# once (float32, dim 36), the 16-bit packed and scalar paths, and rows whose
# last pack is partial (a kernel reading it whole runs past the last row).
SUBSET = [(layout, torch.float32, 36) for layout in sorted(testing.LAYOUTS)] + [
    ("contiguous", torch.float16, 8),
    ("misaligned", torch.float16, 8),
    ("offset", torch.bfloat16, 3),
    ("row-padded", torch.float64, 8),
    # A last partial pack (dim not a whole number of packs) on aligned rows.
    ("contiguous", torch.float32, 3),
    ("contiguous", torch.float16, 36),
]


@pytest.mark.parametrize("mode", modes(*SANITIZERS))
def test_triplet_subset_under_sanitizers(mode):
    for k, (layout, dtype, dim) in enumerate(SUBSET):
        check_triplet(layout, k % 3, ep.REDUCTIONS[k % 3], dtype, dim, batch=9, mode=mode)


# Catches a kernel that writes through a null gradient pointer or skips a
# gradient that was asked for, on the packed (contiguous) and element
# (misaligned) paths. Unwritten elements of a requested gradient are
# reported by the poison check.
@pytest.mark.parametrize("layout", ["contiguous", "misaligned"])
@pytest.mark.parametrize("mode", modes())
def test_triplet_backward_output_mask(mode, layout):
    batch = 37 if mode == "fast" else 9
    _, p = testing.make_view(layout, batch, 64)
    a, n = torch.randn(2, batch, 64).unbind(0)
    p = p.detach()
    grad = torch.tensor(0.5)
    args = (grad, a, p, n, -1.0, 0.5, 0.5, "mean")
    full = emulator.triplet_backward(*args, [True] * 3, mode=mode)
    expected = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(*(t.requires_grad_() for t in (a, p, n)), **HYPER) * 0.5,
        (a, p, n),
    )
    for got, want in zip(full, expected):
        assert_close(got, want)
    masks = range(8) if mode == "fast" else (1, 6)
    for bits in masks:
        mask = [bool(bits & 4), bool(bits & 2), bool(bits & 1)]
        partial = emulator.triplet_backward(*args, mask, mode=mode)
        for needed, got, want in zip(mask, partial, full):
            assert (got is None) != needed, mask
            if needed:
                assert torch.equal(got, want), mask


# Catches a kernel without the grid-stride loop (or with a wrong stride): with
# gridDim.x capped to 1 or 2 blocks (as a smaller kMaxBlocks would), each warp
# must take many rows; rows it skips stay poisoned and are reported.
@pytest.mark.parametrize("max_blocks", [1, 2])
@pytest.mark.parametrize("mode", modes())
def test_triplet_grid_stride_loop(mode, max_blocks):
    check_triplet("contiguous", 0, "none", torch.float32, 36, batch=37, mode=mode,
                  max_blocks=max_blocks)
    check_triplet("misaligned", 2, "sum", torch.float16, 3, batch=37, mode=mode,
                  max_blocks=max_blocks)


# Order-dependent bugs show in another schedule: blocks and threads in
# reverse and in a random order (two seeds); and the book's kernels take no mask
# from __activemask() (the independent schedule).
@pytest.mark.parametrize("schedule, seed", [("reverse", 0), ("random", 1), ("random", 2), ("independent", 0)])
@pytest.mark.parametrize("mode", modes("fast"))
def test_triplet_schedules(mode, schedule, seed):
    for layout in ("contiguous", "transposed"):
        check_triplet(layout, 1, "mean", torch.float32, 36, mode=mode, schedule=schedule, seed=seed)


@pytest.mark.parametrize("mode", modes())
def test_triplet_empty_batch(mode):
    for reduction in ep.REDUCTIONS:
        check_triplet("contiguous", 0, reduction, torch.float32, 8, batch=0, mode=mode)


# ---- triplet.cu: the kernels that move fewer bytes (chapter 5, section 9) ------------------
# emulator.triplet_hinge_loss takes the forward that saves the distances and the backward
# that reads them whenever a gradient is needed, so every check_triplet above runs them.
# grad_in_forward=True takes the one-pass kernel (a block per row, the row in registers)
# where the rows fit, else the two kernels above with grad_output 1.


# Catches, in the one-pass kernel: a pack index off by a block (rows longer than 256 packs,
# dim 1040 floats and 2056 halfs: 260 and 257 packs), a partial block sum (the last warp's
# partial dropped, or a missing barrier: then every row's distances are wrong), the mean's
# 1/B missing, a gradient written to the wrong row; and in the choice between the two paths,
# a layout taken in packs that cannot be (misaligned, offset, transposed inputs, dims 3 and
# 36 for halfs), with the unusual layout on each input in turn.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
@pytest.mark.parametrize("mode", modes("fast"))
def test_triplet_grad_in_forward_layouts_dtypes_reductions(mode, layout, dtype):
    dims = DIMS + ((1040,) if dtype != torch.float16 else (2056,))
    for dim in dims:
        for position, reduction in enumerate(ep.REDUCTIONS):
            check_triplet(layout, position, reduction, dtype, dim, batch=11, mode=mode,
                          grad_in_forward=True)


# Under the sanitizers: the one-pass kernel's shared-memory partial sums between two
# barriers (a missing second barrier is a race with the next row's writes, when a block
# takes several rows: max_blocks=2), and its packs (an out-of-bounds pack in memory mode).
@pytest.mark.parametrize("mode", modes())
def test_triplet_grad_in_forward_under_every_mode(mode):
    for k, (layout, dtype, dim) in enumerate([("contiguous", torch.float32, 1040),
                                              ("contiguous", torch.bfloat16, 24),
                                              ("misaligned", torch.float32, 36)]):
        check_triplet(layout, k % 3, ep.REDUCTIONS[k % 3], dtype, dim, batch=5, mode=mode,
                      max_blocks=2, grad_in_forward=True)


@pytest.mark.parametrize("mode", modes("fast"))
def test_triplet_one_pass_with_the_longest_rows(mode):
    # 8 packs per thread (8192 floats, 16384 bfloat16s): the instantiation the book's
    # 32768 x 8192 case takes; two blocks for three rows, so a block takes a second row.
    check_triplet("contiguous", 0, "mean", torch.float32, 8192, batch=3, mode=mode, max_blocks=2,
                  grad_in_forward=True)
    check_triplet("contiguous", 1, "none", torch.bfloat16, 16384, batch=3, mode=mode, max_blocks=2,
                  grad_in_forward=True)


def test_triplet_grad_in_forward_refuses_a_second_backward():
    # As the CUDA operator: the saved gradients are scaled in place, so a second backward
    # through the graph raises instead of scaling them twice.
    x = [t.requires_grad_() for t in torch.randn(3, 5, 8).unbind(0)]
    loss = emulator.triplet_hinge_loss(*x, **HYPER, grad_in_forward=True)
    torch.autograd.grad(loss * 2, x, retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, x)


def test_triplet_one_pass_takes_the_rows_that_fit_and_no_others():
    # Catches a capacity off by a pack (8192 floats is the last that fits: 256 threads x
    # 8 packs x 4) and a layout taken in packs that cannot be.
    def fits(dim, dtype=torch.float32, layout="contiguous"):
        anchor = testing.make_view(layout, 2, dim, dtype=dtype)[1].detach()
        other = torch.zeros(2, dim, dtype=dtype)
        return emulator.triplet_takes_one_pass(anchor, other, other)

    assert fits(8192) and not fits(8196) and not fits(8190)
    assert fits(16384, torch.bfloat16) and not fits(16392, torch.bfloat16)
    assert fits(4096, torch.float64) and not fits(4098, torch.float64)
    assert fits(8) and not fits(8, layout="misaligned") and not fits(8, layout="transposed")
    # Beyond the capacity the binding takes the forward saving distances and its backward.
    a, p, n = (torch.randn(3, 8200, generator=torch.Generator().manual_seed(k)) for k in range(3))
    inputs = [t.double().requires_grad_() for t in (a, p, n)]
    expected = torch.autograd.grad(ep.reference_triplet_hinge_loss(*inputs, **HYPER), inputs)
    loss, *grads = emulator.triplet_forward_with_grads(a, p, n, **HYPER)
    for got, want in zip(grads, expected):
        assert_close(got.double(), want, **TOLERANCE[torch.float32])


# Catches a scaling kernel that skips rows whose grad_output is not 1, reads the wrong row's
# value, or writes a gradient that is not there (rows whose value is 1 keep their values
# either way: test_traffic.py counts that they are not touched).
@pytest.mark.parametrize("mode", modes())
def test_triplet_scale_gradients_in_place(mode):
    batch, dim = 19, 12
    base = [torch.randn(batch, dim, generator=torch.Generator().manual_seed(k)) for k in range(3)]
    per_row = torch.linspace(-2, 2, batch)
    per_row[::3] = 1.0  # every third row exactly 1
    for reduction, g in (("none", per_row), ("mean", torch.tensor(0.25)), ("sum", torch.tensor(1.0))):
        grads = [t.clone() for t in base]
        grads[1] = None  # a gradient nobody asked for
        scaled = emulator.triplet_scale_gradients(g, *grads, reduction, mode=mode)
        scale = g.unsqueeze(-1) if reduction == "none" else g
        assert scaled[1] is None
        for got, original in zip(scaled[::2], base[::2]):
            assert torch.equal(got, original * scale), reduction


# The backward of grad_in_forward on the "device": a loss that is not the one the forward
# computed gradients for (loss * 3, a per-row weighting) must still get the right gradients.
@pytest.mark.parametrize("mode", modes("fast"))
def test_triplet_grad_in_forward_with_grad_output_not_one(mode):
    a, p, n = (torch.randn(13, 40, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(k)) for k in range(3))
    weights = torch.linspace(0.5, 2, 13, dtype=torch.float64)
    weights[4] = 1.0
    for reduction, outer in (("mean", lambda loss: 3 * loss), ("none", lambda loss: (weights * loss).sum())):
        mine = [t.clone().requires_grad_() for t in (a, p, n)]
        ref = [t.clone().requires_grad_() for t in (a, p, n)]
        got = torch.autograd.grad(outer(emulator.triplet_hinge_loss(
            *mine, **HYPER, reduction=reduction, grad_in_forward=True, mode=mode)), mine)
        want = torch.autograd.grad(outer(ep.reference_triplet_hinge_loss(*ref, **HYPER, reduction=reduction)), ref)
        for x, y in zip(got, want):
            assert_close(x, y)


def test_triplet_bad_input_is_refused():
    a = torch.randn(4, 8)
    with pytest.raises(ValueError, match="positive must have the same shape as anchor"):
        emulator.triplet_forward(a, torch.randn(4, 9), a, -1.0, 0.5, 0.5, "mean")
    with pytest.raises(ValueError, match="reduction must be one of"):
        emulator.triplet_forward(a, a, a, -1.0, 0.5, 0.5, "max")
    with pytest.raises(ValueError, match="mode must be one of"):
        emulator.triplet_forward(a, a, a, -1.0, 0.5, 0.5, "mean", mode="slow")
    with pytest.raises(ValueError, match="schedule must be one of"):
        emulator.triplet_forward(a, a, a, -1.0, 0.5, 0.5, "mean", schedule="sideways")


# ---- involution.cu ----------------------------------------------------------------------

# (batch, channels, groups, height, width, kernel, stride, padding, dilation)
INVOLUTION_SHAPES = [
    (2, 4, 2, 7, 6, 3, 1, 1, 1),
    (1, 6, 3, 9, 8, (3, 2), (2, 1), (0, 1), (2, 1)),
]


def check_involution(shape, dtype, **options):
    from extending_pytorch.involution import output_size, reference_involution, settings

    b, c, g, h, w, kernel, stride, padding, dilation = shape
    (sh, sw), (ph, pw), (dh, dw) = settings(stride, padding, dilation)
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    oh, ow = output_size(h, kh, sh, ph, dh), output_size(w, kw, sw, pw, dw)
    generator = torch.Generator().manual_seed(sum(map(hash, map(str, shape))) % 1000)
    x = torch.randn(b, c, h, w, generator=generator, dtype=torch.float64)
    weight = torch.randn(b, g, kh, kw, oh, ow, generator=generator, dtype=torch.float64)
    x, weight = (t.to(dtype).requires_grad_() for t in (x, weight))
    ours = emulator.involution(x, weight, (sh, sw), (ph, pw), (dh, dw), **options)
    ref_x, ref_w = (t.detach().double().requires_grad_() for t in (x, weight))
    expected = reference_involution(ref_x, ref_w, (sh, sw), (ph, pw), (dh, dw))
    assert ours.dtype == dtype
    assert_close(ours.double(), expected, **TOLERANCE[dtype])
    # (Rounded to dtype first: both sides get the same upstream gradient.)
    upstream = torch.randn(expected.shape, generator=generator, dtype=torch.float64).to(dtype)
    grads = torch.autograd.grad(ours, (x, weight), upstream)
    ref_grads = torch.autograd.grad(expected, (ref_x, ref_w), upstream.double())
    for name, got, want in zip(("input", "weight"), grads, ref_grads):
        assert_close(got.double(), want, **TOLERANCE[dtype], msg=lambda m: f"grad {name}: {m}")


# Catches an indexing bug in any of the three kernels (forward, grad input,
# grad weight), with stride, padding and dilation that differ per axis.
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("mode", modes("fast"))
def test_involution_kernels(mode, dtype):
    for shape in INVOLUTION_SHAPES:
        check_involution(shape, dtype, mode=mode)


@pytest.mark.parametrize("mode", modes(*SANITIZERS))
def test_involution_kernels_under_sanitizers(mode):
    check_involution(INVOLUTION_SHAPES[1], torch.float32, mode=mode)
    check_involution(INVOLUTION_SHAPES[0], torch.float16, mode=mode)


# Large enough that, with the grid capped to 1 or 2 blocks of 256 threads, every
# thread's loop takes 8 to 72 elements of each array a kernel writes (output and
# grad input: 4,096 elements; grad weight: 18,432).
GRID_STRIDE_SHAPE = (2, 8, 4, 16, 16, 3, 1, 1, 1)


# Catches a kernel without the grid-stride loop (or with a wrong stride): with
# the grid capped, the elements past the first blocks' threads stay unwritten.
@pytest.mark.parametrize("max_blocks", [1, 2])
@pytest.mark.parametrize("mode", modes())
def test_involution_grid_stride_loop(mode, max_blocks):
    b, c, _, h, w = GRID_STRIDE_SHAPE[:5]
    assert b * c * h * w > max_blocks * 256 * 4, "too small for the loop to loop"
    check_involution(GRID_STRIDE_SHAPE, torch.float32, mode=mode, max_blocks=max_blocks)


@pytest.mark.parametrize("mode", modes("fast"))
def test_involution_output_mask(mode):
    x, weight = torch.randn(2, 4, 5, 5), torch.randn(2, 2, 3, 3, 5, 5)
    grad = torch.randn(2, 4, 5, 5)
    full = emulator.involution_backward(grad, x, weight, 1, 1, 1, (True, True), mode=mode)
    for mask in ((True, False), (False, True), (False, False)):
        partial = emulator.involution_backward(grad, x, weight, 1, 1, 1, mask, mode=mode)
        for needed, got, want in zip(mask, partial, full):
            assert (got is None) != needed
            if needed:
                assert torch.equal(got, want)


def test_involution_empty_batch():
    x, weight = torch.randn(0, 4, 5, 5), torch.randn(0, 2, 3, 3, 5, 5)
    assert emulator.involution_forward(x, weight, 1, 1, 1).shape == (0, 4, 5, 5)


# ---- The emulator's own rules: reports, not hangs -----------------------------------------


def line_of(marker: str) -> int:
    for number, line in enumerate(KERNELS.read_text().splitlines(), 1):
        if line.rstrip().endswith(f"// LINE {marker}"):
            return number
    raise AssertionError(marker)


@functools.lru_cache(maxsize=None)
def kernels(mode="fast", schedule="forward"):
    return emulator.load_source(KERNELS, mode=mode, schedule=schedule, timeout=120)


def report(launch) -> str:
    with pytest.raises(RuntimeError) as caught:
        launch()
    return str(caught.value)


def assert_points_at(message: str, marker: str, block="(0,0,0)", thread=None):
    assert f"collectives.cu:{line_of(marker)}" in message, message
    assert f"blockIdx {block}" in message, message
    if thread is not None:
        assert f"threadIdx {thread}" in message, message
    else:
        assert re.search(r"threadIdx \(\d+,\d+,\d+\)", message), message


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_lane_exiting_while_the_warp_waits_is_reported(schedule):
    out = torch.empty(32)
    message = report(lambda: kernels("fast", schedule).exit_while_waited[1, 32](out))
    assert_points_at(message, "exit_while_waited")
    assert "exited" in message and "lane 31" in message


def test_lanes_at_different_shuffles_are_reported():
    message = report(lambda: kernels().diverged_shuffles[1, 32](torch.empty(32)))
    assert "diverged" in message
    assert f"collectives.cu:{line_of('diverged_low')}" in message
    assert_points_at(message, "diverged_high")


def test_shuffle_reading_outside_its_mask_is_reported():
    message = report(lambda: kernels().reads_outside_mask[1, 32](torch.empty(32)))
    assert_points_at(message, "reads_outside_mask", thread="(0,0,0)")
    assert "reads lane 16, which is not in its mask 0x0000ffff" in message


def test_lane_missing_from_its_own_mask_is_reported():
    message = report(lambda: kernels().lane_not_in_mask[1, 32](torch.empty(32)))
    assert_points_at(message, "lane_not_in_mask", thread="(0,0,0)")
    assert "is not in the mask 0xfffffffe" in message


def test_mask_naming_lanes_of_a_partial_warp_is_reported():
    message = report(lambda: kernels().partial_warp_full_mask[1, 48](torch.empty(48)))
    assert_points_at(message, "partial_warp", thread="(32,0,0)")
    assert "does not exist" in message


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_barrier_not_every_thread_reaches_is_reported(schedule):
    message = report(lambda: kernels("fast", schedule).barrier_not_reached[(2, 1), 64](torch.empty(64)))
    # (The reverse schedule runs the last block first.)
    assert_points_at(message, "barrier_not_reached", block="(0,0,0)" if schedule == "forward" else "(1,0,0)")
    assert "not every thread of the block reaches" in message


def test_threads_at_different_barriers_are_reported():
    message = report(lambda: kernels().different_barriers[1, 64](torch.empty(64)))
    assert "different barriers" in message
    assert_points_at(message, "barrier_high")


def test_invalid_launches_are_reported():
    k = kernels().half_written
    message = report(lambda: k[1, 1025](torch.empty(1), 1))
    assert "invalid launch" in message and "1025 threads" in message
    assert "collectives.cu" not in message  # launched from Python: no launch line
    assert "at most 1024" in message
    assert "zero dimension" in report(lambda: k[0, 32](torch.empty(1), 1))
    assert "(1024, 1024, 64)" in report(lambda: k[1, (1, 1, 65)](torch.empty(1), 1))
    assert "65535" in report(lambda: k[(1, 65536), 32](torch.empty(1), 1))


def test_unwritten_output_is_reported():
    y = torch.empty(100)
    message = report(lambda: kernels().half_written[1, 128](y, 100, outputs=["y"]))
    assert "left 50 of the 100 elements of y unwritten, the first at [50]" in message


def test_missing_barrier_reads_poisoned_shared_memory_in_fast_mode():
    # Without the barrier, thread 0 reads tile[1] before thread 1 wrote it:
    # shared memory starts filled with 0xff bytes, a NaN.
    x, y = torch.arange(64.0), torch.empty(64)
    kernels().missing_syncthreads[1, 64](x, y)
    assert y.isnan().any()
    kernels().with_syncthreads[1, 64](x, y)
    assert torch.equal(y, x.view(32, 2).flip(1).reshape(64))


@pytest.mark.parametrize("width", [32, 16, 8])
def test_warp_primitives_compute_what_cuda_defines(width):
    blocks, threads = 2, 64
    out = torch.empty(blocks * threads, 10, dtype=torch.int32)
    kernels().warp_primitives[blocks, threads](out, width)
    for t in range(blocks * threads):
        lane = t % 32
        base = lane - lane % width
        up = lane - 2 if lane - base >= 2 else lane
        down = lane + 2 if lane - base + 2 < width else lane
        xor = lane ^ 5 if (lane ^ 5) < base + width else lane
        ballot = sum(1 << k for k in range(32) if k % 3 == 0)  # < 2**31: a positive int32
        expected = [100 + base + 3 % width, 100 + up, 100 + down, 100 + xor,
                    ballot, 1, 0, t % threads + 1000 * (t // threads), 0,
                    (100 + (lane + 1 if lane < 15 else lane)) if lane < 16 else 0]
        expected[8] = 8  # 4 lanes of each of the 2 warps
        assert out[t].tolist() == expected, (t, out[t].tolist(), expected)


def test_block_sum_with_dynamic_shared_memory_and_atomics():
    x = torch.randn(1000)
    total = torch.zeros(1)
    kernels().block_sum[4, 256, 8 * 4](x, total, 1000)
    assert_close(total[0], x.sum(), rtol=1e-5, atol=1e-4)


def test_built_in_variables_in_three_dimensions():
    grid, block = (2, 3, 2), (4, 2, 3)
    out = torch.empty(12 * 24, 4, dtype=torch.int32)
    kernels().indices[grid, block](out)
    rows = out.tolist()
    seen = {tuple(r[:2]) for r in rows}
    assert len(seen) == 12 * 24
    assert {r[2] for r in rows} == {4 + 20 + 300} and {r[3] for r in rows} == {2 + 30 + 200}


def test_half_precision_data_and_arguments():
    x = torch.randn(100).half()
    y = torch.empty(100, dtype=torch.float16)
    kernels().half_scale[1, 128](x, y, 3.0, 100, outputs=["y"])
    assert torch.equal(y, (x.float() * 3).half())
    with pytest.raises(TypeError, match="needs a tensor of dtype torch.float16"):
        kernels().half_scale[1, 128](x.float(), y, 3.0, 100)


# ---- The sanitizer modes on the tiny kernels --------------------------------------------------


# The emulator's own reports hold in the sanitizer builds too (a thread
# stopped mid-collective must not upset the sanitizer).
@pytest.mark.parametrize("mode", modes(*SANITIZERS))
def test_collective_reports_in_sanitizer_modes(mode):
    message = report(lambda: kernels(mode).exit_while_waited[1, 32](torch.empty(32)))
    assert_points_at(message, "exit_while_waited")
    message = report(lambda: kernels(mode).barrier_not_reached[1, 64](torch.empty(64)))
    assert_points_at(message, "barrier_not_reached")


@pytest.mark.parametrize("mode", modes("memory"))
def test_out_of_bounds_access_is_reported_in_memory_mode(mode):
    x, y = torch.randn(100), torch.empty(100)
    message = report(lambda: kernels(mode).out_of_bounds[1, 128](x, y, 100))
    assert "AddressSanitizer: heap-buffer-overflow" in message, message
    assert f"collectives.cu:{line_of('out_of_bounds')}" in message
    assert re.search(r"blockIdx \(0,0,0\), threadIdx \(1\d\d,0,0\)", message), message


@pytest.mark.parametrize("mode", modes("races"))
def test_missing_barrier_is_a_race_in_races_mode(mode):
    x, y = torch.arange(64.0), torch.empty(64)
    message = report(lambda: kernels(mode).missing_syncthreads[1, 64](x, y))
    assert "ThreadSanitizer: data race" in message, message
    assert f"collectives.cu:{line_of('missing_syncthreads')}" in message
    assert "blockIdx (0,0,0)" in message
    kernels(mode).with_syncthreads[1, 64](x, y)  # and the barrier orders them
    assert torch.equal(y, x.view(32, 2).flip(1).reshape(64))


@pytest.mark.parametrize("mode", modes("races"))
def test_blocks_writing_one_element_race_in_races_mode(mode):
    message = report(lambda: kernels(mode).blocks_collide[2, 32](torch.empty(32)))
    assert "ThreadSanitizer: data race" in message, message
    assert f"collectives.cu:{line_of('blocks_collide')}" in message
    assert re.search(r"blockIdx \(1,0,0\) threadIdx \(\d+,0,0\)", message), message


# ---- The rewrite and the API ------------------------------------------------------------------


def test_rewrite_keeps_line_numbers_and_handles_launches_and_shared():
    source = (
        "__global__ void k(float* x) {\n"
        "  __shared__ float tile[32][33];\n"
        "  extern __shared__ float dynamic[];\n"
        "}\n"
        "void launch(float* x, cudaStream_t s) {\n"
        "  k\n"
        "     <<<dim3(2, 1), 32, 0, s>>>(x);  // <<<not a launch>>>\n"
        '  const char* text = "<<<";\n'
        "}\n"
    )
    out = rewrite(source, "/tmp/k.cu")
    body = out.split('#line 1 "/tmp/k.cu"\n', 1)[1]
    assert body.count("\n") == source.count("\n")
    lines = body.splitlines()
    assert "::simt::shared_variable<float[32][33]" in lines[1]
    assert "float* dynamic = ::simt::dynamic_shared<float>()" in lines[2]
    assert lines[5].lstrip().startswith('::simt::launch("k"')
    assert lines[5].endswith("dim3(2, 1), 32, 0, s)")
    assert lines[6].strip() == "(x);  // <<<not a launch>>>"
    assert lines[7] == source.splitlines()[7]


def test_kernels_compile_unchanged():
    # The emulator compiles the very files nvcc compiles: no copy, no edit.
    for kernel in ("triplet.cu", "involution.cu"):
        text = (ep.build_flags.CSRC / "cuda" / kernel).read_text()
        assert "simt" not in text
        assert "<<<" in text


def test_missing_headers_give_a_clear_error(monkeypatch):
    monkeypatch.setattr(toolchain, "_include_candidates", lambda: [pathlib.Path("/nonexistent")])
    with pytest.raises(emulator.EmulatorUnavailable, match="cuda_fp16.h.*Looked in:\n  /nonexistent"):
        emulator.cuda_include_dir()
    with pytest.raises(emulator.EmulatorUnavailable):
        emulator.load_source("__global__ void k() {}")
    assert not emulator.available()


def _fake_include(directory: pathlib.Path, headers: dict[str, str]) -> pathlib.Path:
    """A fake CUDA include directory: the named headers (empty unless given), and `headers`."""
    for name in (*toolchain._HEADERS, *headers):
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#pragma once\n" + headers.get(name, ""))
    return directory


def test_incomplete_headers_are_skipped(tmp_path, monkeypatch):
    # torch 2.11's CUDA 13 wheel: its cuda_fp16.h includes <nv/target> (here through
    # cuda_fp16.hpp), which the wheel lacks; the toolkit has it. The first directory with
    # the named headers is not enough: the one taken must have what they include too.
    fp16 = {"cuda_fp16.h": '#include "cuda_fp16.hpp"\n', "cuda_fp16.hpp": "#include <nv/target>\n"}
    pip = _fake_include(tmp_path / "site-packages" / "nvidia" / "cu13" / "include", fp16)
    toolkit = _fake_include(tmp_path / "cuda" / "include", {**fp16, "nv/target": ""})
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(toolchain, "_include_candidates", lambda: [tmp_path / "none", pip, toolkit])
    assert emulator.cuda_include_dir() == toolkit.resolve()
    described = emulator.cuda_include_description()
    assert described == (
        "the CUDA toolkit's headers ($CUDA_HOME/include); skipped: the NVIDIA pip package's "
        "headers (nvidia/cu13/include): cuda_fp16.hpp includes <nv/target>, which is missing"
    )
    assert str(tmp_path) not in described  # notebooks print it

    # None complete: the error names each directory and what it lacks.
    monkeypatch.setattr(toolchain, "_include_candidates", lambda: [tmp_path / "none", pip])
    with pytest.raises(emulator.EmulatorUnavailable) as error:
        emulator.cuda_include_dir()
    assert str(error.value).endswith(
        f"Looked in:\n  {tmp_path / 'none'} (does not exist)\n"
        f"  {pip} (cuda_fp16.hpp includes <nv/target>, which is missing)"
    )
    assert not emulator.available()


def test_launch_arguments_are_checked():
    k = kernels().out_of_bounds
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k[1, 32](torch.empty(1))
    with pytest.raises(TypeError, match="x .* takes a tensor"):
        k[1, 32](1.0, torch.empty(1), 1)
    with pytest.raises(TypeError, match="kernel\\[grid, block\\]"):
        k[1](torch.empty(1), torch.empty(1), 1)
    with pytest.raises(ValueError, match="outputs: 'z' is not a pointer parameter"):
        k[1, 32](torch.empty(32), torch.empty(32), 32, outputs=["z"])


def _parse_within(text: str, seconds: float = 20.0):
    """parse_kernels(text), failing (not hanging) if it does not return in `seconds`."""
    result = []
    worker = threading.Thread(target=lambda: result.append(emulator.parse_kernels(text)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"parse_kernels did not return in {seconds} s (a loop that never advances)"
    return result[0]


LAUNCH_BOUNDS = """
__global__ void __launch_bounds__(256) before_name(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2 * x[i];
}
__global__ __launch_bounds__((128), 2) void before_type(float* y, int n) {
  if (threadIdx.x < n) y[threadIdx.x] = 1;
}
template <typename T>
__global__ void __launch_bounds__(64, 1) templated(T* y) { y[threadIdx.x] = 0; }
"""


def test_launch_bounds_are_skipped_when_reading_signatures():
    # The bug: the loop that skipped __launch_bounds__(...) searched on past the kernel's own
    # parameter list and never ended (load_source hung on the book's triplet.cu).
    kernels_ = {k.name: k for k in _parse_within(LAUNCH_BOUNDS)}
    assert list(kernels_) == ["before_name", "before_type", "templated"]
    assert [repr(p) for p in kernels_["before_name"].parameters] == ["const float* x", "float* y", "int n"]
    assert [repr(p) for p in kernels_["before_type"].parameters] == ["float* y", "int n"]
    assert kernels_["templated"].template and not kernels_["before_name"].template
    book = _parse_within((ep.build_flags.CSRC / "cuda" / "triplet.cu").read_text())
    assert {k.name for k in book} >= {"triplet_forward_kernel", "triplet_backward_kernel"}


def test_kernel_with_launch_bounds_launches():
    module = emulator.load_source(LAUNCH_BOUNDS, name="launch_bounds", timeout=120)
    x, y = torch.arange(300, dtype=torch.float32), torch.empty(300)
    module.before_name[2, 256](x, y, 300, outputs=["y"])
    assert_close(y, 2 * x)
    assert "templated" in module.unbound


UNGUARDED = """
__global__ void unguarded_tail(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.0f * x[i % n];  // no if (i < n): the last block writes past y's end
}
__global__ void shifted(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i - 1] = x[i];  // i = 0 writes one element before out's start
}
"""


@pytest.mark.parametrize("mode", modes("fast", "races"))
def test_writes_outside_a_tensor_are_reported_without_a_sanitizer(mode):
    # Bug: in fast mode an unguarded tail write passed silently (or crashed the worker with an
    # empty report). The guard zones around each tensor's memory in the worker catch it.
    m = emulator.load_source(UNGUARDED, name="unguarded", mode=mode, timeout=300)
    # Values whose bytes at the report's first and last byte differ from the zones' pattern
    # (a written byte equal to the pattern's is not seen).
    x, y = torch.arange(1.0, 101.0), torch.zeros(100)
    with pytest.raises(RuntimeError, match=r"y: bytes 400 to 511, outside its memory \(bytes 0 to 399\)"):
        m.unguarded_tail[1, 128](x, y, 100)
    with pytest.raises(RuntimeError, match=r"out: bytes -4 to -1, outside"):
        m.shifted[1, 32](x, y, 100)
    # In bounds: no report, and the values arrive.
    m.unguarded_tail[1, 100](x, y, 100, outputs=["y"])
    assert_close(y, 2 * x)


@pytest.mark.parametrize("mode", modes())
@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps")
def test_a_reader_kernel_runs_in_a_worker_without_torch(mode):
    # Bug: every worker imported torch as it started (seconds, more under a sanitizer), also
    # for load_source launches, which need none of it. A fresh worker runs one with tensors
    # from Python (guard zones and all) and has no torch library loaded.
    from extending_pytorch.emulator import worker

    emulator.shutdown()
    m = emulator.load_source(UNGUARDED, name="unguarded", mode=mode, timeout=300)
    x, y = torch.arange(1.0, 101.0), torch.zeros(100)
    m.unguarded_tail[1, 100](x, y, 100, outputs=["y"])
    assert_close(y, 2 * x)
    maps = pathlib.Path(f"/proc/{worker._workers[mode].process.pid}/maps").read_text()
    assert "libtorch" not in maps


def test_compile_errors_point_at_the_source_line():
    with pytest.raises(RuntimeError, match=r"broken\.cu:3"):
        emulator.load_source("__global__ void k(float* x) {\n  x[0] = 1;\n  undefined_name = 2;\n}\n",
                             name="broken")


@pytest.mark.parametrize("grad_in_forward", [False, True], ids=["two-kernels", "one-pass"])
@pytest.mark.parametrize("mode", modes("fast", "memory"))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_cuda_kernels_give_zero_gradient_on_the_kinks(mode, dtype, grad_in_forward):
    # Rows exactly on each kink (conftest.kink_batch; exact in every dtype): the loss's
    # subgradient there is 0. Catches >= in triplet_math.h's masks as the CUDA kernels
    # compile them (the C++ tests cover the same header through the CPU kernels only).
    from conftest import KINK_SETTINGS, kink_batch, kink_gradients

    inputs = [t.requires_grad_() for t in kink_batch(dtype)]
    loss = emulator.triplet_hinge_loss(*inputs, **KINK_SETTINGS, mode=mode,
                                       grad_in_forward=grad_in_forward)
    grads = torch.autograd.grad(loss, inputs)
    for got, want, name in zip(grads, kink_gradients(dtype), ("anchor", "positive", "negative")):
        assert torch.equal(got, want), f"{name}: {got.tolist()} != {want.tolist()}"


def test_only_asans_fiber_caution_is_dropped_from_the_workers_stderr():
    # Catches a filter that drops too much (a sanitizer report, or a kernel's printf to stderr)
    # or too little (the caution, with the worker's process id, stored in a notebook's output).
    from extending_pytorch import emulator

    stderr = (
        b"==4242==WARNING: ASan doesn't fully support makecontext/swapcontext functions and may "
        b"produce false positives in some cases!\n"
        b"==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020\n"
        b"printf from the kernel\n"
    )
    kept = toolchain._ASAN_FIBER_WARNING.sub(b"", stderr)
    assert kept == (
        b"==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020\n"
        b"printf from the kernel\n"
    )
