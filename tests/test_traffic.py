"""The traffic counter (emulator.traffic()): bytes and sectors of global memory,
counted without a GPU, for the book's CUDA kernels, a reader's kernels
(load_source) and the Triton kernels (through Triton's interpreter).

Budgets are written k*N + c*B, with N = B * D * element size (one input, or
one gradient) and c*B the per-row part: the backward's upstream gradient,
which every lane of a row's warp reads (32 elements per row; a Triton program
reads one), and the loss written once per row. The book's kernels today
(chapter 5): forward 3N + c*B, backward 6N + 3N + c*B - each row read twice,
once for its distances, once for its gradients - as Nsight Compute measured
on an H200 (notebooks/data/gpu/); then the kernels that move fewer bytes: a
forward saving the distances and a backward reading them (9N in all), and
the one-pass kernel of grad_in_forward (6N). Chapter 6's Triton kernels save
the distances too (9N). A kernel that re-reads a row, or a counter that loses
or doubles accesses, fails here.
"""

from __future__ import annotations

import pathlib

import pytest
import torch

from extending_pytorch import emulator, triton_ops

pytestmark = pytest.mark.skipif(
    not emulator.available(),
    reason="the emulator needs g++ and CUDA's cuda_fp16.h (emulator.cuda_include_dir)",
)

KERNELS = pathlib.Path(__file__).parent / "emulator" / "traffic.cu"
HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
INPUTS = ("anchor", "positive", "negative")
GRADS = ("grad_anchor", "grad_positive", "grad_negative")


def _kernels():
    return emulator.load_source(KERNELS, timeout=120)


def _triplet(batch, dim, dtype, seed=0, one_storage=False):
    g = torch.Generator().manual_seed(seed)
    if one_storage:  # three views of one tensor: each view's own elements are its tensor's
        return list(torch.randn(3, batch, dim, generator=g).to(dtype).unbind(0))
    return [torch.randn(batch, dim, generator=g).to(dtype) for _ in range(3)]


def _only(launches, kernel):
    found = [x for x in launches if x.kernel == kernel]
    assert len(found) == 1, [x.kernel for x in launches]
    return found[0]


# ---- The book's CUDA kernels (triplet.cu) ---------------------------------------------------

# batch 37: not a multiple of the 8 rows a block takes; dims >= 256 (a row is
# several 512-byte warp loads); every dtype the binding dispatches.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [256, 1024])
def test_book_triplet_kernels_move_3N_forward_and_6N_plus_3N_backward(dtype, dim):
    batch = 37
    # float32: the three inputs are views of one storage (a tensor of shape (3, B, D) unbound),
    # which a counter that attributed accesses by storage would give all to the anchor.
    a, p, n = _triplet(batch, dim, dtype, seed=dim, one_storage=dtype == torch.float32)
    size = a.element_size()
    N = batch * dim * size
    with emulator.traffic() as t:
        emulator.triplet_forward(a, p, n, **HYPER, reduction="sum")
        emulator.triplet_backward(torch.ones((), dtype=dtype), a, p, n, **HYPER, reduction="sum")
    forward = _only(t.launches, "triplet_forward_kernel")
    backward = _only(t.launches, "triplet_backward_kernel")
    for name in INPUTS:
        assert forward.buffer(name).bytes_read == N, name  # each row read once
        assert forward.buffer(name).bytes_written == 0
        assert backward.buffer(name).bytes_read == 2 * N, name  # ... and twice
    for name in GRADS:
        assert backward.buffer(name).bytes_written == N and backward.buffer(name).bytes_read == 0
    # c*B: the loss, one element per row; the upstream gradient, read by each of the 32 lanes.
    assert forward.buffer("loss").bytes_written == batch * size
    assert backward.buffer("grad_output").bytes_read == 32 * batch * size
    assert forward.bytes_read == 3 * N and forward.bytes_written == batch * size
    assert backward.bytes_read == 6 * N + 32 * batch * size and backward.bytes_written == 3 * N
    # Contiguous, aligned rows in 16-byte packs: every sector a warp touches is full.
    for launch in (forward, backward):
        for b in launch.buffers:
            if b.name not in ("loss", "grad_output"):
                assert 32 * (b.sectors_read + b.sectors_written) == b.bytes_read + b.bytes_written
    assert t.bytes_read == forward.bytes_read + backward.bytes_read
    assert t.kernels["triplet_backward_kernel"].bytes_written == 3 * N


# The fix (chapter 5, section 9): the forward saves each row's two distances, so the backward
# reads each row once: 3N + (3N read + 3N written) = 9N for a training step. A backward that
# still recomputes the distances (a re-read), or a forward that reads a row twice, fails.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [256, 1024])
def test_book_kernels_with_saved_distances_move_9N(dtype, dim):
    batch = 37
    a, p, n = _triplet(batch, dim, dtype, seed=dim)
    size = a.element_size()
    acc = 8 if dtype == torch.float64 else 4  # the distances' type: the accumulation type
    N = batch * dim * size
    with emulator.traffic() as t:
        _, distances = emulator.triplet_forward_with_distances(a, p, n, **HYPER, reduction="sum")
        emulator.triplet_backward_from_distances(torch.ones((), dtype=dtype), a, p, n, distances,
                                                 **HYPER, reduction="sum")
    forward, backward = t.launches
    assert (forward.kernel, backward.kernel) == ("triplet_forward_kernel", "triplet_backward_kernel")
    for name in INPUTS:
        assert forward.buffer(name).bytes_read == N and backward.buffer(name).bytes_read == N, name
    for name in GRADS:
        assert backward.buffer(name).bytes_written == N and backward.buffer(name).bytes_read == 0
    # c*B: the two distances written once per row and read once per row (lane 0 reads, the
    # warp's shuffle hands them on), the loss, and the upstream gradient every lane reads.
    assert forward.buffer("distances").bytes_written == 2 * batch * acc
    assert backward.buffer("distances").bytes_read == 2 * batch * acc
    assert forward.bytes_read == 3 * N and forward.bytes_written == batch * size + 2 * batch * acc
    assert backward.bytes_read == 3 * N + 2 * batch * acc + 32 * batch * size
    assert backward.bytes_written == 3 * N
    assert t.bytes == 9 * N + batch * size + 4 * batch * acc + 32 * batch * size


# The one-pass kernel (grad_in_forward=True on CUDA): 3N read, 3N written, the minimum, for
# rows that fit its registers, and 9N (distances saved, then the backward) for rows that do
# not. A kernel that re-reads a row for its gradients fails.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [256, 2048])
def test_book_one_pass_kernel_moves_6N(dtype, dim):
    batch = 13
    a, p, n = _triplet(batch, dim, dtype, seed=dim)
    size = a.element_size()
    N = batch * dim * size
    with emulator.traffic() as t:
        emulator.triplet_forward_with_grads(a, p, n, **HYPER)
    (launch,) = t.launches
    assert launch.kernel == "triplet_forward_with_grads_kernel"
    for name in INPUTS:
        assert launch.buffer(name).bytes_read == N and launch.buffer(name).bytes_written == 0, name
    for name in GRADS:
        assert launch.buffer(name).bytes_written == N and launch.buffer(name).bytes_read == 0, name
    assert launch.bytes_read == 3 * N and launch.bytes_written == 3 * N + batch * size
    # In 16-byte packs, a warp's accesses fill their sectors.
    for name in INPUTS + GRADS:
        b = launch.buffer(name)
        assert 32 * (b.sectors_read + b.sectors_written) == b.bytes_read + b.bytes_written


def test_rows_too_long_for_one_pass_move_9N():
    batch, dim = 3, 8192 + 4  # one pack more than the one-pass kernel holds
    a, p, n = _triplet(batch, dim, torch.float32)
    N = batch * dim * 4
    with emulator.traffic() as t:
        emulator.triplet_forward_with_grads(a, p, n, **HYPER)
    assert [x.kernel for x in t.launches] == ["triplet_forward_kernel", "triplet_backward_kernel"]
    forward, backward = t.launches
    assert sum(forward.buffer(name).bytes_read for name in INPUTS) == 3 * N
    assert sum(backward.buffer(name).bytes_read for name in INPUTS) == 3 * N
    assert sum(backward.buffer(name).bytes_written for name in GRADS) == 3 * N


# grad_in_forward's backward: nothing but grad_output is read where it is exactly 1 (the
# usual loss.backward()); every gradient read and written once more where it is not.
def test_scaling_the_saved_gradients_costs_nothing_when_grad_output_is_one():
    batch, dim = 37, 256
    grads = _triplet(batch, dim, torch.float32)
    N = batch * dim * 4
    with emulator.traffic() as t:
        emulator.triplet_scale_gradients(torch.ones(()), *grads, "mean")
        emulator.triplet_scale_gradients(torch.full((), 0.5), *grads, "mean")
    one, half = t.launches
    assert one.bytes_written == 0 and one.bytes_read == batch * 4  # each row's warp reads g
    assert half.bytes_read == 3 * N + batch * 4 and half.bytes_written == 3 * N
    # One value per row (reduction="none"), 1 in every third row: only the other rows move.
    per_row = torch.full((batch,), 2.0)
    per_row[::3] = 1.0
    with emulator.traffic() as t:
        emulator.triplet_scale_gradients(per_row, *grads, "none")
    (launch,) = t.launches
    moved_rows = batch - len(range(0, batch, 3))
    assert launch.buffer("grad_anchor").bytes_read == moved_rows * dim * 4
    assert launch.buffer("grad_anchor").bytes_written == moved_rows * dim * 4
    assert launch.buffer("grad_output").bytes_read == batch * 4


def test_book_kernels_read_a_strided_input_in_more_sectors():
    # A transposed anchor (column stride B): the element loop, lanes a row apart, so
    # every 4-byte read is a sector of its own; the other inputs stay in full sectors.
    batch, dim = 37, 256
    a, p, n = _triplet(batch, dim, torch.float32)
    a = a.t().contiguous().t()
    with emulator.traffic() as t:
        emulator.triplet_forward(a, p, n, **HYPER)
    forward = _only(t.launches, "triplet_forward_kernel")
    N = batch * dim * 4
    assert forward.buffer("anchor").bytes_read == N
    assert forward.buffer("anchor").sectors_read == batch * dim  # one sector per element
    # positive and negative: the element loop too (packs need all three), 32 lanes x 4 bytes.
    assert forward.buffer("positive").sectors_read == N // 32


def test_book_involution_kernels_are_counted():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 6, 6, generator=g)
    w = torch.randn(2, 2, 3, 3, 6, 6, generator=g)
    with emulator.traffic() as t:
        emulator.involution_forward(x, w, padding=1)
    launch = _only(t.launches, "involution_forward_kernel")
    # Each output element is written once; every input element is read at least once.
    assert launch.buffer("output").bytes_written == x.nbytes
    assert launch.buffer("input").bytes_read >= x.nbytes
    assert launch.buffer("weight").bytes_read > 0


# ---- A reader's kernels (load_source) --------------------------------------------------------


def test_copy_moves_each_byte_once_in_full_sectors():
    # Bugs: an access lost or counted twice; a sector counted per lane, not per warp.
    n = 1000
    x, y = torch.arange(n, dtype=torch.float32), torch.empty(n)
    with emulator.traffic() as t:
        _kernels().copy[(n + 255) // 256, 256](x, y, n, outputs=["y"])
    assert torch.equal(x, y)
    (launch,) = t.launches
    assert (launch.kernel, launch.engine) == ("copy", "CUDA (emulated)")
    assert (launch.grid, launch.block) == ((4, 1, 1), (256, 1, 1))
    assert launch.buffer("x").bytes_read == 4 * n and launch.buffer("x").bytes_written == 0
    assert launch.buffer("y").bytes_written == 4 * n and launch.buffer("y").bytes_read == 0
    # 1000 floats: 125 sectors; ceil(1000 / 32) = 32 warp-wide reads and writes.
    assert launch.buffer("x").sectors_read == 125 and launch.buffer("y").sectors_written == 125
    assert (launch.requests_read, launch.requests_written) == (32, 32)
    assert t.bytes == 8 * n and t.sectors == 250


def test_a_row_is_coalesced_a_column_is_not():
    # The coalescing table of chapter 5: the same bytes, 8x the sectors.
    rows, cols = 64, 64
    m = torch.randn(rows, cols, generator=torch.Generator().manual_seed(1))
    out = torch.empty(rows)
    kernels = _kernels()
    with emulator.traffic() as t:
        kernels.sum_by_rows[rows, 32](m, out, rows, cols, outputs=["out"])
        kernels.sum_by_columns[cols, 32](m, out, rows, cols, outputs=["out"])
    torch.testing.assert_close(out, m.sum(0))
    by_rows, by_columns = (_only(t.launches, k).buffer("m") for k in ("sum_by_rows", "sum_by_columns"))
    assert by_rows.bytes_read == by_columns.bytes_read == m.nbytes
    assert by_rows.sectors_read == m.nbytes // 32  # 4 sectors per warp-wide read
    assert by_columns.sectors_read == rows * cols  # 32 per warp-wide read: one per lane


def test_16_byte_accesses_and_a_misaligned_start():
    n4 = 64
    x = torch.randn(4 * n4 + 4, generator=torch.Generator().manual_seed(2))
    y = torch.empty(4 * n4 + 4)
    kernels = _kernels()
    with emulator.traffic() as t:
        kernels.copy4[1, n4](x, y, n4)
        # Starting one float in: each warp's 512 bytes straddle one more sector.
        kernels.copy[1, 64](x[1:], y[1:], 64)
    (copy4, copy) = t.launches
    assert copy4.buffer("x").bytes_read == 16 * n4
    assert copy4.buffer("x").sectors_read == 16 * n4 // 32  # 16 sectors per warp-wide read
    assert copy4.requests_read == n4 // 32
    assert copy.buffer("x").bytes_read == 4 * 64
    assert copy.buffer("x").sectors_read == 2 * (128 // 32 + 1)  # 5 sectors per warp, not 4


def test_registers_local_arrays_and_shared_memory_are_not_counted_atomics_are():
    n = 128
    x = torch.arange(n, dtype=torch.float32)
    y, total = torch.empty(n), torch.zeros(1)
    with emulator.traffic() as t:
        _kernels().staged[2, 64](x, y, total, n, outputs=["y"])
    assert total.item() == n
    (launch,) = t.launches
    assert launch.buffer("x").bytes_read == 4 * n and launch.buffer("x").bytes_written == 0
    assert launch.buffer("y").bytes_written == 4 * n and launch.buffer("y").bytes_read == 0
    # One read-modify-write of 4 bytes per thread, all 32 lanes of a warp on one sector.
    assert launch.buffer("total").bytes_read == launch.buffer("total").bytes_written == 4 * n
    assert launch.buffer("total").sectors_read == n // 32


def test_counts_need_fast_mode_and_stay_inside_the_block():
    a, p, n = _triplet(4, 8, torch.float32)
    with emulator.traffic() as t:
        with pytest.raises(ValueError, match="mode='fast'"):
            emulator.triplet_forward(a, p, n, **HYPER, mode="memory")
        with emulator.traffic() as inner:
            emulator.triplet_forward(a, p, n, **HYPER)
    emulator.triplet_forward(a, p, n, **HYPER)  # outside: not counted
    assert len(inner.launches) == 1 and len(t.launches) == 1  # nested blocks both count
    # The counting build computes what the fast build does.
    with emulator.traffic():
        counted = emulator.triplet_forward(a, p, n, **HYPER, reduction="none")
    assert torch.equal(counted, emulator.triplet_forward(a, p, n, **HYPER, reduction="none"))


# ---- Triton's kernels (interpreted) ----------------------------------------------------------


# Chapter 6's kernels save the distances as chapter 5's do: each row is read once by the forward
# and once by the backward, 3N + (3N read + 3N written) = 9N for a training step, plus c*B. A
# backward that recomputes the distances (each input read 2N), or a forward that reads a row
# twice, fails here.
@pytest.mark.skipif(not triton_ops.INTERPRETED, reason="counts the interpreter's loads and stores")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_triton_kernels_move_9N_with_saved_distances(dtype):
    batch, dim = 6, 384  # 384: not a power of 2, the last block is masked
    a, p, n = (x.requires_grad_() for x in _triplet(batch, dim, dtype, seed=3))
    size = a.element_size()
    acc = 8 if dtype == torch.float64 else 4  # the distances' type: the accumulation type
    N = batch * dim * size
    with emulator.traffic() as t:
        triton_ops.triplet_hinge_loss(a, p, n, **HYPER).backward()
    forward = _only(t.launches, "_forward_kernel")
    backward = _only(t.launches, "_backward_kernel")
    assert forward.engine == "Triton (interpreted)" and forward.grid == (batch, 1, 1)
    for name in ("a_ptr", "p_ptr", "n_ptr"):
        assert forward.buffer(name).bytes_read == N, name  # each row read once ...
        assert backward.buffer(name).bytes_read == N, name  # ... and once more, not twice
        assert forward.buffer(name).sectors_read * 32 == N
        assert forward.buffer(name).bytes_written == backward.buffer(name).bytes_written == 0
    for name in ("grad_a_ptr", "grad_p_ptr", "grad_n_ptr"):
        assert backward.buffer(name).bytes_written == N and backward.buffer(name).bytes_read == 0
    # c*B: one loss and two distances written per program (row); the two distances and one
    # upstream gradient (a scalar, stride 0: each program reads it) read per program.
    assert forward.buffer("out_ptr").bytes_written == batch * size
    assert forward.buffer("dist_ptr").bytes_written == 2 * batch * acc
    assert backward.buffer("dist_ptr").bytes_read == 2 * batch * acc
    assert backward.buffer("grad_out_ptr").bytes_read == batch * size
    assert forward.bytes_read == 3 * N and forward.bytes_written == batch * size + 2 * batch * acc
    assert backward.bytes_read == 3 * N + 2 * batch * acc + batch * size
    assert backward.bytes_written == 3 * N
    assert t.bytes == 9 * N + 2 * batch * size + 4 * batch * acc


@pytest.mark.skipif(not triton_ops.INTERPRETED, reason="counts the interpreter's loads and stores")
def test_triton_hook_is_removed_after_the_block_also_on_an_error():
    from triton.runtime import interpreter

    original = interpreter.GridExecutor.__call__
    a, p, n = _triplet(2, 16, torch.float32)
    with pytest.raises(ValueError, match="t1 must be <= 0"):
        with emulator.traffic():
            triton_ops.triplet_hinge_loss(a, p, n, t1=1.0, t2=0.5, beta=0.5)
    assert interpreter.GridExecutor.__call__ is original
    assert "create_masked_load" not in vars(interpreter.interpreter_builder)
    with emulator.traffic() as t:
        triton_ops.triplet_hinge_loss(a, p, n, **HYPER)
    assert [x.kernel for x in t.launches] == ["_forward_kernel"]


def _add_one_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        tl.store(y_ptr + i, tl.load(x_ptr + i, mask=mask) + 1, mask=mask)

    return add_one


@pytest.mark.skipif(not triton_ops.INTERPRETED, reason="counts the interpreter's loads and stores")
def test_triton_launch_options_defaults_and_overlapping_arguments():
    import triton

    add_one = _add_one_kernel()
    x = torch.arange(100, dtype=torch.float32)
    y = torch.empty(100)
    empty = torch.empty(0)
    with emulator.traffic() as t:
        # A launch option (num_warps) that is not a parameter, and a grid reading a defaulted constexpr.
        add_one[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100, num_warps=4)
        add_one[(1,)](x, x, 64)  # in place: the two arguments are one tensor
        add_one[(1,)](empty, y, 0)
    assert torch.equal(y, torch.arange(100, dtype=torch.float32) + 1)
    first, in_place, nothing = t.launches
    assert first.grid == (2, 1, 1)
    assert first.buffer("x_ptr").bytes_read == 400 and first.buffer("y_ptr").bytes_written == 400
    # An address counts once, for the first argument that holds it.
    assert in_place.buffer("x_ptr").bytes_read == 256 and in_place.buffer("x_ptr").bytes_written == 256
    assert in_place.buffer("y_ptr").bytes_read == in_place.buffer("y_ptr").bytes_written == 0
    assert nothing.buffer("x_ptr").nbytes == 0 and nothing.bytes_read == nothing.bytes_written == 0


def test_a_counter_that_fails_to_start_leaves_nothing_active(monkeypatch):
    from extending_pytorch.emulator import traffic as counter_module  # the function (the package's name)
    from extending_pytorch.emulator.traffic import _TritonHook, active

    def broken():
        raise RuntimeError("no hook")

    monkeypatch.setattr(_TritonHook, "install", broken)
    with pytest.raises(RuntimeError, match="no hook"):
        with counter_module():
            pass
    assert active() is None


def test_empty_tensor_arguments_are_listed_with_zero_bytes():
    x = torch.empty(0)
    with emulator.traffic() as t:
        _kernels().copy[1, 32](x, torch.empty(0), 0)
    assert t.launches[0].buffer("x").nbytes == 0 and t.launches[0].bytes_read == 0
