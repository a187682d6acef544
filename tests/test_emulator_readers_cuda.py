"""The emulator on CUDA as its readers write it (tests/emulator/real_cuda.cu, unchanged):
kernels in namespaces, parameters of typedef'd and enum types, template kernels launched
from Python, structs by value explained, cache-hint loads and stores, CUDA's mixed-sign
min, and standard headers such as <memory> next to the kernels.

Each test names the bug it catches; one fast-mode build serves them all (a template
instantiation asked for later is built on demand, which one test exercises).
"""

from __future__ import annotations

import functools
import pathlib

import pytest
import torch
from torch.testing import assert_close

from extending_pytorch import emulator

pytestmark = [
    pytest.mark.skipif(
        not emulator.available(),
        reason="the emulator needs g++ and CUDA's cuda_fp16.h (emulator.cuda_include_dir)",
    ),
    # What these test is the emulator's own C++ (simt.h) running CUDA sources: the same on every
    # torch (chapter 5's notebook runs it on the oldest torch too).
    pytest.mark.same_on_every_torch,
]

SOURCE = pathlib.Path(__file__).parent / "emulator" / "real_cuda.cu"


@functools.cache
def module():
    # Before: the build failed (<memory> after simt.h's __noinline__, no __ldcs/__stcs/__ldcg/
    # __stcg, min(int, unsigned) ambiguous).
    return emulator.load_source(SOURCE, timeout=300, instantiate=["copy_chunks<float, 4>"])


def test_signatures_record_namespaces_and_template_parameters():
    # Bug: a kernel in a namespace was called unqualified by the launch glue (the build
    # failed), and a template's parameters were not known (no instantiation possible).
    kernels = {k.qualified: k for k in emulator.parse_kernels(SOURCE.read_text())}
    assert list(kernels) == ["ops::scale", "v2::scale", "apply", "copy_chunks", "clamp_index", "affine",
                             "add4", "fill_bytes", "seed", "requires_scale"]
    assert kernels["copy_chunks"].template_parameters == ["T", "kPerThread"]
    assert kernels["copy_chunks"].template_kinds == ["type", "value"]
    assert kernels["copy_chunks"].template_required == 1  # kPerThread has a default
    assert kernels["apply"].namespace == ""  # an unnamed namespace adds no qualifier
    nested = emulator.parse_kernels(
        'extern "C" { }\nnamespace a::b { inline namespace c { template <class T, int... Ns>\n'
        "__global__ void k(T* x) {} } }\nnamespace x = a; __global__ void top(int n) {}\n")
    assert [(k.qualified, k.template_parameters) for k in nested] == [
        ("a::b::c::k", ["T", "Ns"]), ("top", [])]


def test_kernels_in_namespaces_launch():
    m = module()
    x = torch.arange(100, dtype=torch.float32)
    y = torch.empty(100)
    m["ops::scale"][1, 128](x, y, 100, 3.0, outputs=["y"])
    assert_close(y, 3 * x)
    m["v2::scale"][1, 128](x, y, 100, 3.0, outputs=["y"])
    assert_close(y, 3 * x + 1)
    # One name in two namespaces: no attribute; the qualified item, and a clear error.
    assert not hasattr(m, "scale")
    with pytest.raises(KeyError, match="names several"):
        m["scale"]


def test_typedef_and_enum_parameters_take_numbers():
    # Bug: `uint n` and `Op op` left the kernel unbound, then a bare AttributeError.
    m = module()
    x = torch.linspace(-2, 2, 70)
    y = torch.empty(70)
    m["ops::scale"][3, 32](x, y, 70, -0.5, outputs=["y"])
    assert_close(y, -0.5 * x)
    m.apply[3, 32](x, y, 70, 1, 4.0, outputs=["y"])  # Op::mul
    assert_close(y, 4 * x)
    m.apply[3, 32](x, y, 70, 0, 4.0, outputs=["y"])  # Op::add
    assert_close(y, x + 4)
    with pytest.raises(RuntimeError, match=r"n \(uint\) is an integer type"):
        m["ops::scale"][3, 32](x, y, 70.5, 1.0)
    with pytest.raises(TypeError, match="op .* takes a number"):
        m.apply[3, 32](x, y, 70, "mul", 1.0)


def test_template_kernels_launch_as_instantiations():
    # Bug: a template kernel could not be launched from Python at all.
    m = module()
    assert "a template: launch an instantiation" in m.unbound["copy_chunks"]
    x = torch.randn(1001)
    y = torch.empty(1001)
    m.copy_chunks[torch.float32, 4][1, 256](x, y, 1001, outputs=["y"])  # built with the module
    assert_close(y, x, rtol=0, atol=0)
    # Not asked for at load: built on demand. The default template argument is used.
    xd, yd = torch.randn(77, dtype=torch.float64), torch.empty(77, dtype=torch.float64)
    m.copy_chunks["double"][1, 32](xd, yd, 77, outputs=["y"])
    assert_close(yd, xd, rtol=0, atol=0)
    # The instantiation's parameter types are checked like any kernel's.
    with pytest.raises(TypeError, match="needs a tensor of dtype torch.float64"):
        m.copy_chunks["double"][1, 32](x, yd, 77)
    with pytest.raises(TypeError, match="takes 1 to 2 template arguments"):
        m.copy_chunks["float", 4, 1]
    # Built with the module, then one more on demand.
    assert m.instantiations[:2] == [("copy_chunks", ("float", "4")), ("copy_chunks", ("double",))]


def test_an_instantiation_that_does_not_build_leaves_the_module_working():
    # Bug: the failed instantiation was kept, so every later launch of the module failed
    # ("Could not load this library").
    m = module()
    before = list(m.instantiations)
    with pytest.raises(RuntimeError, match=r"failed"):
        m.requires_scale["float"]
    assert m.instantiations == before
    x, y = torch.ones(8), torch.empty(8)
    m["ops::scale"][1, 32](x, y, 8, 2.0, outputs=["y"])
    assert_close(y, 2 * x)


def test_kernels_named_like_module_settings_are_items():
    # Bug: a kernel named `seed` replaced the module's seed, and every launch failed.
    m = module()
    assert m.seed == 0
    y = torch.empty(32)
    m["seed"][1, 32](y, outputs=["y"])
    assert (y == 7).all()


def test_numbers_that_do_not_fit_their_parameter_are_refused():
    m = module()
    y = torch.zeros(4, dtype=torch.uint8)
    m.fill_bytes[1, 32](y, 255, 4, outputs=["y"])
    assert y.tolist() == [255] * 4
    with pytest.raises(RuntimeError, match=r"value \(u8\) cannot hold 300 \(it holds 0 to 255\)"):
        m.fill_bytes[1, 32](y, 300, 4)
    with pytest.raises(RuntimeError, match=r"n \(uint\) cannot hold -1"):
        m["ops::scale"][1, 32](torch.ones(4), torch.empty(4), -1, 1.0)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        m.fill_bytes[1, 32](y, 2**70, 4)


def test_cache_hint_loads_stores_and_mixed_sign_min():
    m = module()
    index = torch.tensor([-1, 0, 5, 9, 12, -7], dtype=torch.int32)
    out = torch.empty(6, dtype=torch.int32)
    m.clamp_index[1, 32](index, 9, out, 6, outputs=["out"])
    # As on a GPU: min(int, unsigned) is unsigned, so -1 and -7 are huge and clamp to 9.
    assert out.tolist() == [9, 0, 5, 9, 9, 9]


def test_struct_parameters_are_explained():
    m = module()
    assert "takes Affine f by value" in m.unbound["affine"]
    assert "takes float4 v by value" in m.unbound["add4"]  # CUDA's own struct, known to the glue
    x, y = torch.ones(4), torch.empty(4)
    with pytest.raises(RuntimeError, match=r"f \(Affine\) is not a number.*C\+\+ host function"):
        m.affine[1, 32](x, y, 4, 1.0)
    assert "affine" not in repr(m) and "apply" in repr(m)


def test_the_books_sources_build_and_say_what_python_cannot_launch():
    # Bug: load_source hung on triplet.cu (__launch_bounds__), and a kernel taking a struct
    # defined in an included header was reported as launchable.
    from extending_pytorch import build_flags

    for name, kernels in [("triplet.cu", ["triplet_forward_kernel", "triplet_backward_kernel"]),
                          ("involution.cu", ["involution_forward_kernel"])]:
        m = emulator.load_source(build_flags.CSRC / "cuda" / name, timeout=600)
        for kernel in kernels:
            reason = m.unbound[f"extending_pytorch::cuda::{kernel}"]
            assert "by value: Python cannot build a struct" in reason, reason
        assert "no kernel Python can launch" in repr(m)


COOPERATIVE = pathlib.Path(__file__).parent / "emulator" / "cooperative.cu"


@functools.cache
def cooperative():
    # Before: #include <cooperative_groups.h> failed ("cuda/std/type_traits: No such file").
    return emulator.load_source(COOPERATIVE, timeout=300)


@pytest.mark.parametrize("cols, threads", [(1000, 256), (37, 64), (5, 96)])
def test_cooperative_groups_block_reduction(cols, threads):
    # A tile's reduce that dropped a lane, or meta_group_rank/size wrong, changes the sums;
    # 96 threads: three warps, so warp 0 adds three partial sums.
    x = torch.randn(3, cols)
    out = torch.empty(3)
    cooperative().row_sums[3, threads](x, out, cols, outputs=["out"])
    assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


def test_cooperative_groups_tiles_smaller_than_a_warp():
    n = 64
    x = torch.randint(-50, 50, (n,), dtype=torch.int32)
    x[8:16] = -torch.arange(1, 9, dtype=torch.int32)  # a tile with no positive value
    groups = n // 8
    outs = [torch.empty(groups, dtype=torch.int32) for _ in range(2)]
    positive = torch.empty(groups, dtype=torch.int32)
    sums = torch.empty(groups, dtype=torch.int32)
    cooperative().tiles_of_8[2, 32](x, outs[0], outs[1], positive, sums, n,
                                    outputs=["minimum", "maximum", "positive", "sum_down"])
    tiles = x.view(groups, 8)
    assert outs[0].tolist() == tiles.min(1).values.tolist()
    assert outs[1].tolist() == tiles.max(1).values.tolist()
    weights = 2 ** torch.arange(8)
    assert positive.tolist() == ((tiles > 0).long() * weights).sum(1).tolist()
    assert sums.tolist() == tiles.sum(1).tolist()


def test_cooperative_groups_ranks_in_a_block_with_a_partial_warp():
    # 80 threads: 3 warps (the last of 16 lanes), 10 tiles of 8; tiles of 4 cut from a
    # warp's tile count within the warp (8 of them), as CUDA's do.
    out = torch.empty(80, 9, dtype=torch.int32)
    cooperative().group_shape[1, 80](out, outputs=["out"])
    rank = torch.arange(80)
    full = torch.full_like
    expected = torch.stack([rank % 32, rank // 32, full(rank, 3), rank % 8, rank // 8,
                            full(rank, 10), rank % 4, rank % 32 // 4, full(rank, 8)], 1)
    assert out.tolist() == expected.tolist()


def test_cooperative_groups_tile_shuffles_votes_and_bitwise_reductions():
    x = torch.randint(0, 40, (64,), dtype=torch.int32)
    x[20] = 45  # only the second tile has a value over 40
    out = torch.empty(64, 8, dtype=torch.int32)
    cooperative().tile_ops[1, 64](x, out, outputs=["out"])
    tiles = x.view(4, 16)
    rank = torch.arange(64)
    base = rank // 16 * 16
    expected = torch.stack([
        x[base + 3],
        torch.where(rank % 16 == 0, x, x[(rank - 1).clamp(min=0)]),
        x[base + (rank % 16 ^ 5)],
        (tiles > 40).any(1).int().repeat_interleave(16),
        (tiles >= 0).all(1).int().repeat_interleave(16),
        torch.tensor([int(functools.reduce(lambda a, b: a & b, t.tolist())) for t in tiles]).repeat_interleave(16),
        torch.tensor([int(functools.reduce(lambda a, b: a | b, t.tolist())) for t in tiles]).repeat_interleave(16),
        torch.tensor([int(functools.reduce(lambda a, b: a ^ b, t.tolist())) for t in tiles]).repeat_interleave(16),
    ], 1)
    assert out.tolist() == expected.tolist()


def test_grid_wide_synchronisation_is_refused_with_a_reason():
    with pytest.raises(RuntimeError, match=r"cooperative\.cu:\d+: cooperative_groups::this_grid\(\).*not supported"):
        cooperative().grid_barrier[2, 32](torch.zeros(32))


@pytest.mark.parametrize("source, line, hint", [
    ("__global__ void k(float* x) {\n  x[0] = 1;\n  __nanosleep(100);\n}\n", 3,
     "a CUDA intrinsic the emulator does not provide"),
    ("#include <cub/cub.cuh>\n__global__ void k(float* x) { x[0] = 1; }\n", 1,
     "CUB, Thrust and libcu++ are not available"),
    ('__global__ void k(float* x) {\n  asm volatile("membar.gl;");\n  x[0] = 1;\n}\n', 2,
     "PTX inline assembly"),
])
def test_build_errors_are_summarised(source, line, hint):
    # Bug: a failed build raised the whole ninja log (up to 70 kB), the error lost in it.
    with pytest.raises(RuntimeError) as info:
        emulator.load_source(source, name="broken_build", timeout=300)
    message = str(info.value)
    assert f"broken_build.cu:{line}:" in message
    assert hint in message
    assert len(message.splitlines()) <= 14, message
    log = pathlib.Path(message.rsplit("The whole compiler output: ", 1)[1].strip())
    assert f"broken_build.cu:{line}:" in log.read_text()  # the whole output is kept there


def test_long_reports_keep_their_beginning():
    # Bug: reports were cut to their last 12,000 characters, so a sanitizer report lost its
    # first access. Kept whole up to 220,000 characters; beyond, beginning and end.
    from extending_pytorch.emulator.worker import _shorten

    report = "WARNING: ThreadSanitizer: data race\n  Write of size 4\n" + "x" * 50_000 + "\nblockIdx"
    assert _shorten(report) == report.strip()
    huge = "FIRST ACCESS\n" + "y" * 500_000 + "\nTHE KERNEL, BLOCK AND THREAD"
    short = _shorten(huge)
    assert short.startswith("FIRST ACCESS") and short.endswith("THE KERNEL, BLOCK AND THREAD")
    assert len(short) < 230_000 and "characters left out" in short


def test_softmax_example_matches_torch():
    # The benchmark's kernel (tools/emulator_speed.py) computes a softmax: 37 rows on 40 warps,
    # so three warps leave at once; 300 columns, not a multiple of 32.
    source = pathlib.Path(__file__).parents[1] / "extensions" / "csrc" / "simt" / "examples" / "softmax_rows.cu"
    m = emulator.load_source(source, timeout=300)
    x = torch.randn(37, 300) * 10
    y = torch.empty_like(x)
    m.softmax_rows[5, 256](x, y, 37, 300, outputs=["y"])
    assert_close(y, torch.softmax(x, 1))


RECURSION = """
__device__ __noinline__ float deep(int n) {
  volatile float frame[256];
  frame[n % 256] = n;
  return n == 0 ? frame[0] : deep(n - 1) + frame[n % 256];
}
__global__ void recurse(float* y, int depth) { y[threadIdx.x] = deep(depth); }
"""


def test_a_stack_overflow_is_reported_naming_the_thread():
    # Bug: recursing past a thread's 128 KiB stack wrote over the heap (a report naming a
    # garbage threadIdx, or none). A page below each stack now stops it where it happens.
    m = emulator.load_source(RECURSION, name="recursion", timeout=300)
    y = torch.empty(32)
    m.recurse[1, 32](y, 10, outputs=["y"])
    assert (y == 55).all()
    with pytest.raises(RuntimeError, match=r"signal 11 in kernel recurse .*blockIdx \(0,0,0\), threadIdx \(0,0,0\)"):
        m.recurse[1, 32](y, 100_000)
    m.recurse[1, 32](y, 10, outputs=["y"])  # a new worker, as good as the first
    assert (y == 55).all()


def test_simt_h_included_on_its_own_builds_a_program_that_runs_a_kernel(tmp_path):
    # Bug: the runtime's definitions reachable only through runtime.cpp (the emulator's
    # builds link it; SIMT_SEPARATE_RUNTIME), so that a reader's own program that includes
    # simt.h, as its README says it may, fails to link (undefined run_launch, ...).
    import subprocess

    from extending_pytorch.emulator.toolchain import SIMT_DIR, _compiler, cuda_include_dir

    program = tmp_path / "main.cpp"
    program.write_text(
        '#include "simt.h"\n'
        "#include <cstdio>\n"
        "__global__ void sums(const int* x, int* out) {\n"
        "  int v = x[threadIdx.x];\n"
        "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);\n"
        "  __syncthreads();\n"
        "  out[threadIdx.x] = v;\n"
        "}\n"
        "int main() {\n"
        "  int x[64], out[64];\n"
        "  for (int i = 0; i < 64; ++i) x[i] = i;\n"
        '  simt::launch("sums", [](auto&&... a) { sums(a...); }, dim3(1), dim3(64))(x, out);\n'
        '  std::printf("%d %d\\n", out[0], out[63]);\n'
        "}\n"
    )
    exe = tmp_path / "main"
    build = subprocess.run(
        [_compiler(), "-std=c++20", "-include", "memory", "-O1", f"-I{SIMT_DIR / 'include'}", f"-I{SIMT_DIR}",
         f"-I{cuda_include_dir()}", str(program), "-o", str(exe)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(sum(range(32))), str(sum(range(32, 64)))]


ACTIVEMASK = r"""
// NVIDIA's "Using CUDA Warp-Level Primitives" calls this use of __activemask() incorrect:
// the lanes that pass the bound need not be converged when the mask is read.
__global__ void sum_by_activemask(const float* x, float* out, int n) {
  const int i = threadIdx.x;
  if (i < n) {
    unsigned mask = __activemask();
    float v = x[i];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(mask, v, offset);
    if (i == 0) out[0] = v;
  }
}

// A right use: warp-aggregated atomics. Whichever lanes the mask names, their leader adds
// their count once and each lane gets its own slot.
__global__ void aggregated_append(int* counter, int* slots, const int* keep, int n) {
  const int i = threadIdx.x;
  if (i < n && keep[i]) {
    const unsigned mask = __activemask();
    const int leader = __ffs(mask) - 1;
    const int lane = threadIdx.x % 32;
    int base = 0;
    if (lane == leader) base = atomicAdd(counter, __popc(mask));
    base = __shfl_sync(mask, base, leader);
    slots[base + __popc(mask & ((1u << lane) - 1))] = i;
  }
}
"""


def test_the_independent_schedule_reports_a_shuffle_over_a_mask_from_activemask():
    # Bug: __activemask() returned every lane that has not exited, whatever the schedule, so
    # a kernel that shuffles over it (wrong on a GPU since Volta, where the lanes need not be
    # converged) ran right in the emulator and a reader's check accepted it.
    m = emulator.load_source(ACTIVEMASK, name="activemask", schedule="independent", timeout=120)
    x, out = torch.arange(32, dtype=torch.float32), torch.zeros(1)
    with pytest.raises(RuntimeError, match=r"__shfl_down_sync\(\) in lane 0 .* reads lane 16, which is not "
                                           r"in its mask 0x00000001: the value is undefined"):
        m.sum_by_activemask[1, 32](x, out, 32, outputs=["out"])
    forward = emulator.load_source(ACTIVEMASK, name="activemask", timeout=120)
    forward.sum_by_activemask[1, 32](x, out, 32, outputs=["out"])
    assert out.item() == x.sum().item()  # the other schedules keep every lane not exited


@pytest.mark.parametrize("schedule", ["independent", "forward", "reverse", "random"])
def test_warp_aggregated_atomics_are_right_in_every_schedule(schedule):
    # Bugs: the independent schedule breaking a right use of __activemask() (a mask of the
    # calling lane alone must still give every kept element its own slot); the other
    # schedules' __activemask() naming every lane not exited, lanes that skipped the branch
    # too (the kernel then counted them and wrote past its slots).
    m = emulator.load_source(ACTIVEMASK, name="activemask", schedule=schedule, timeout=120)
    keep = (torch.arange(64) % 3 != 0).int()
    counter, slots = torch.zeros(1, dtype=torch.int32), torch.full((64,), -1, dtype=torch.int32)
    m.aggregated_append[1, 64](counter, slots, keep, 60)
    kept = int(keep[:60].sum())
    assert counter.item() == kept
    assert sorted(slots[:kept].tolist()) == [i for i in range(60) if keep[i]]
    assert (slots[kept:] == -1).all()


RENDEZVOUS = r"""
// Lanes 0-7 leave; the odd and the even lanes left read the mask at two calls.
__global__ void branch_masks(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane < 8) return;
  unsigned mask;
  if (lane % 2) {
    mask = __activemask();
  } else {
    mask = __activemask();
  }
  out[threadIdx.x] = mask;
}

// Lane i loops trips[i] times: at iteration k the lanes still looping read the mask.
__global__ void loop_masks(const int* trips, unsigned* out) {
  for (int k = 0; k < trips[threadIdx.x]; ++k) out[k * 32 + threadIdx.x] = __activemask();
}
"""


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_activemask_names_the_lanes_that_reach_it_together(schedule):
    # Bug: __activemask() named every lane of the warp that had not exited when the
    # calling lane ran (lanes of the other branch and lanes yet to exit too, depending on
    # the schedule). It is a rendezvous: the lanes at the same call, once no other lane of
    # the warp can get there, as lanes a GPU runs converged.
    m = emulator.load_source(RENDEZVOUS, name="rendezvous", schedule=schedule, seed=3, timeout=120)
    out = torch.zeros(64, dtype=torch.int32)
    m.branch_masks[1, 64](out)
    lane = torch.arange(64) % 32
    expected = torch.where(lane < 8, 0, torch.where(lane % 2 == 1, 0xAAAAAA00, 0x55555500))
    assert (out.long() & 0xFFFFFFFF).tolist() == expected.tolist()
    trips = (torch.arange(32) % 4 + 1).int()
    out = torch.zeros(4 * 32, dtype=torch.int32)
    m.loop_masks[1, 32](trips, out)
    looping = [sum(1 << i for i in range(32) if trips[i] > k) for k in range(4)]
    expected = [looping[k] if trips[i] > k else 0 for k in range(4) for i in range(32)]
    assert (out.long() & 0xFFFFFFFF).tolist() == expected


# ---- GPU-like rules (load_source(..., gpu_like=True)) -----------------------------------------

RELAXED = r"""
// Threads past n leave before the barrier: a GPU lets the others through it (exited
// threads count as arrived); CUDA's programming guide does not promise that.
__global__ void early_exit_sum(const float* x, float* out, int* count, int n) {
  __shared__ float tile[256];
  const int i = threadIdx.x;
  if (i >= n) return;
  tile[i] = x[i];
  const int arrived = __syncthreads_count(1);
  if (i == 0) {
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += tile[j];
    out[0] = s;
    count[0] = arrived;
  }
}

// A full mask on a block whose last warp is partial: a GPU leaves the missing lanes out.
__global__ void full_mask_partial_warp(int* leader, unsigned* ballot, int* shifted) {
  const int t = threadIdx.x;
  leader[t] = __shfl_sync(0xffffffff, t * 10, 0);  // lane 0 of each warp exists
  ballot[t] = __ballot_sync(0xffffffff, t % 2);
  shifted[t] = __shfl_down_sync(0xffffffff, t, 4);  // lanes 4 above a partial warp's end do not exist
}
"""


def test_gpu_like_rules_let_threads_exit_before_a_barrier():
    # Bug: without the option, a kernel whose threads return before __syncthreads (it runs on
    # every GPU) could not run at all; with it, an exited thread must neither block the barrier
    # nor be counted by __syncthreads_count, and the strict default must still report it.
    x, out, count = torch.arange(256, dtype=torch.float32), torch.zeros(1), torch.zeros(1, dtype=torch.int32)
    strict = emulator.load_source(RELAXED, name="relaxed", timeout=120)
    with pytest.raises(RuntimeError, match=r"which (has )?exited the kernel: not every thread of the block "
                                           r"reaches this barrier"):
        strict.early_exit_sum[1, 256](x, out, count, 100)
    # Forward: the last thread to exit releases the barrier; reverse: the last to arrive does.
    for schedule in ("forward", "reverse"):
        relaxed = emulator.load_source(RELAXED, name="relaxed", gpu_like=True, schedule=schedule, timeout=120)
        for n in (100, 1, 256):
            relaxed.early_exit_sum[1, 256](x, out, count, n, outputs=["out", "count"])
            assert out.item() == x[:n].sum().item() and count.item() == n, (schedule, n)


def test_gpu_like_rules_leave_a_partial_warps_missing_lanes_out_of_a_full_mask():
    # Bug: a full mask on a 40-thread block (lanes 8-31 of its second warp do not exist) was
    # refused even under the GPU-like rules, or their votes counted lanes that do not exist, or
    # a shuffle that reads one of them crashed instead of returning the caller's own value.
    leader, ballot, shifted = (torch.zeros(40, dtype=torch.int32) for _ in range(3))
    strict = emulator.load_source(RELAXED, name="relaxed", timeout=120)
    with pytest.raises(RuntimeError, match=r"names lane 8, which does not exist: the block has 40 threads"):
        strict.full_mask_partial_warp[1, 40](leader, ballot, shifted)
    relaxed = emulator.load_source(RELAXED, name="relaxed", gpu_like=True, timeout=120)
    relaxed.full_mask_partial_warp[1, 40](leader, ballot, shifted, outputs=["leader", "ballot", "shifted"])
    t = torch.arange(40)
    assert leader.tolist() == [0] * 32 + [320] * 8
    odd_lanes = lambda lanes: sum(1 << lane for lane in range(1, lanes, 2))  # noqa: E731
    assert [b & 0xFFFFFFFF for b in ballot.tolist()] == [odd_lanes(32)] * 32 + [odd_lanes(8)] * 8
    expected = torch.where((t % 32 + 4 < 32) & (t + 4 < 40), t + 4, t)  # a missing lane: the caller's own
    assert shifted.tolist() == expected.tolist()


def test_gpu_like_must_be_a_bool():
    with pytest.raises(ValueError, match="gpu_like must be True or False, got 'yes'"):
        emulator.load_source(RELAXED, name="relaxed", gpu_like="yes")


# ---- __shared__ in included headers ----------------------------------------------------------

BLOCK_SUM_HEADER = r"""
#pragma once
#include "../common/warp.cuh"
// A block-wide sum, as libraries ship it: the tile lives in the header's device function.
template <int kThreads>
__device__ float block_sum(float value) {
  __shared__ float partial[kThreads / 32];
  value = warp_sum(value);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return total;
}
"""

WARP_HEADER = r"""
#pragma once
__device__ inline float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffff, value, offset);
  return value;
}
"""

ROW_SUMS = r"""
#include "reduce/block_sum.cuh"
__global__ void row_sums(const float* x, float* out, int dim) {
  float mine = 0.0f;
  for (int j = threadIdx.x; j < dim; j += 128) mine += x[blockIdx.x * dim + j];
  const float total = block_sum<128>(mine);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


def test_shared_variables_in_an_included_header_are_rewritten(tmp_path):
    # Bug: a __shared__ variable inside a device function of a header the .cu file includes
    # was not rewritten (only the .cu file was), so the build failed with "__shared__
    # variables are supported inside functions only". The header also reaches another one
    # through "../": the copies must find each other as the originals do.
    (tmp_path / "src" / "reduce").mkdir(parents=True)
    (tmp_path / "src" / "common").mkdir()
    (tmp_path / "src" / "reduce" / "block_sum.cuh").write_text(BLOCK_SUM_HEADER)
    (tmp_path / "src" / "common" / "warp.cuh").write_text(WARP_HEADER)
    source = tmp_path / "src" / "row_sums.cu"
    source.write_text(ROW_SUMS)
    m = emulator.load_source(source, timeout=300)
    x, out = torch.randn(5, 300), torch.zeros(5)
    m.row_sums[5, 128](x, out, 300, outputs=["out"])
    assert_close(out, x.sum(1))
    # A report inside the header names the header's own line.
    (tmp_path / "src" / "reduce" / "block_sum.cuh").write_text(
        BLOCK_SUM_HEADER.replace("  __syncthreads();", "  if (threadIdx.x < 64) __syncthreads();"))
    m = emulator.load_source(source, timeout=300)
    with pytest.raises(RuntimeError, match=r"block_sum\.cuh:10: __syncthreads\(\)"):
        m.row_sums[5, 128](x, out, 300)


# ---- Built-in variables are not macros ------------------------------------------------------

NAMED_LIKE_BUILTINS = r"""
// As headers write it (torch's, cuSPARSE's): a parameter named like a built-in variable.
inline unsigned threads_in(dim3 blockDim) { return blockDim.x * blockDim.y * blockDim.z; }

__global__ void fill_index(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<float>(i + gridDim.x * 0);
}

// As CUDA's samples write host code: locals named like the built-ins.
void launch_fill_index(float* x, int n) {
  dim3 blockDim(128);
  dim3 gridDim((n + threads_in(blockDim) - 1) / threads_in(blockDim));
  fill_index<<<gridDim, blockDim>>>(x, n);
}
"""


def test_host_code_may_name_its_own_blockDim_and_gridDim():
    # Bug: blockDim, gridDim and blockIdx were macros, so `dim3 blockDim(128);` in host code,
    # or a parameter named blockDim in an included header, expanded into the emulator's
    # variable and the build failed.
    m = emulator.load_source(NAMED_LIKE_BUILTINS, name="named_like_builtins", timeout=300)
    x = torch.zeros(300)
    m.fill_index[3, 128](x, 300, outputs=["x"])
    assert x.tolist() == [float(i) for i in range(300)]


@pytest.mark.skipif(torch.version.cuda is None,
                    reason="a CPU build of torch lacks CUDA's headers and libraries that ATen/cuda needs")
def test_an_extensions_whole_cuda_file_builds_and_its_kernel_and_host_functions_run():
    # Bugs: a .cu file that links torch's CUDA library (at::cuda::getCurrentCUDAStream in its
    # host code) built but did not load ("undefined symbol: ...getCurrentCUDAStream..."), so
    # none of its kernels could run; once the worker stopped importing torch for a reader's
    # kernels, builds without torch's headers ("ATen/Operators.h: No such file"); and its host
    # functions were out of reach (their device checks want CUDA tensors, their launches a
    # CUDA stream): the CPU shim of module.host. tests/emulator/torch_extension.cu has the
    # shape of pytorch/extension-cpp's muladd.cu.
    m = emulator.load_source(pathlib.Path(__file__).parent / "emulator" / "torch_extension.cu",
                             timeout=300)
    assert m.unbound == {}
    x, out = torch.randn(1000), torch.empty(1000)
    m.scale_shift_kernel[4, 256](1000, x, 2.0, 0.5, out, outputs=["out"])
    assert_close(out, x * 2.0 + 0.5)
    assert dir(m.host) == ["scale_shift_cuda", "scale_shift_out_cuda"]
    assert_close(m.host.scale_shift_cuda(x[::2], 3.0, -1.0), x[::2] * 3.0 - 1.0)
    out = torch.zeros(1000)
    m.host.scale_shift_out_cuda(x, 0.5, 2.0, out)  # writes its out tensor in place
    assert_close(out, x * 0.5 + 2.0)
    with pytest.raises(RuntimeError, match="x must be float32, got double"):
        m.host.scale_shift_cuda(x.double(), 1.0, 0.0)
    with pytest.raises(AttributeError, match=r"'scale_shift' is not a host function .* "
                                             r"scale_shift_cuda, scale_shift_out_cuda"):
        m.host.scale_shift
