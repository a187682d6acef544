"""Chapter 6: what the Triton kernels compile to on a GPU, checked without one.

Triton compiles for a GPU it does not have: `triton_ops.compile_for_gpu` runs
the whole pipeline (Triton IR, LLVM, PTX, and ptxas to a cubin) for a chosen
compute capability, sm_80 (A100) or sm_90a (H100), specialising the launch
arguments as a real launch would. This file reads the GPU assembly (PTX) for
what chapter 6 claims about it:

- every autotuning configuration loads aligned rows with 128-bit loads
  (`ld.global.v4.b32` for float32 and 16-bit rows, `ld.global.v2.b64` for
  float64), and a misaligned row with scalar ones, whichever input carries it;
- the configurations left out could not have done so, or spill registers;
- the hyper-parameters travel as 64-bit integers, never as float arguments;
- 16-bit results are rounded to nearest even (`cvt.rn`), as torch rounds.

The compiler cannot run where the tests run: conftest.py (like
extending_pytorch.triton_ops without a GPU) switches on Triton's interpreter
before triton is imported, and a process has one or the other. So one
subprocess, started with TRITON_INTERPRET=0, runs this file as a script,
compiles everything once, and writes what it found to a JSON file that the
tests read. (Nothing is launched: PTX is text, and a cubin is bytes.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

ARCHS = (80, 90)
DTYPES = ("float32", "float16", "bfloat16", "float64")
DIM = 4096  # long enough for every configuration the autotuner may try
BATCH = 4
HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
# The 128-bit load of each dtype, and its scalar load (one element).
VECTOR_LOAD = {
    "float32": "ld.global.v4.b32",
    "float16": "ld.global.v4.b32",
    "bfloat16": "ld.global.v4.b32",
    "float64": "ld.global.v2.b64",
}
SCALAR_LOAD = {
    "float32": "ld.global.b32",
    "float16": "ld.global.b16",
    "bfloat16": "ld.global.b16",
    "float64": "ld.global.b64",
}


def global_loads(ptx: str) -> list[str]:
    """The distinct kinds of global-memory load in a PTX listing."""
    return sorted(set(re.findall(r"\bld\.global(?:\.[a-z0-9]+)*", ptx)))


def _entry_parameters(ptx: str) -> list[str]:
    match = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S)
    return [line.strip().rstrip(",") for line in match.group(1).splitlines() if line.strip()]


# ---- The subprocess: compile, and record what the assembly says ------------


def _compile_everything() -> dict:
    # Imported here: only this process may import triton with the compiler.
    import torch
    from triton.backends.nvidia.compiler import get_ptxas

    from extending_pytorch import triton_ops

    assert not triton_ops.INTERPRETED, "the compiler is needed, not the interpreter"
    hyper = triton_ops._hyperparameters(**HYPER)
    bucket = triton_ops.batch_bucket(BATCH)

    def rows(dtype, misaligned=()):
        # anchor, positive, negative: (BATCH, DIM) rows, those named in
        # `misaligned` one element past a 16-byte boundary (x[:, 1:] of a
        # (BATCH, DIM + 1) tensor: every row start is misaligned too).
        tensors = []
        for name in ("anchor", "positive", "negative"):
            if name in misaligned:
                tensors.append(torch.zeros(BATCH, DIM + 1, dtype=dtype)[:, 1:])
            else:
                tensors.append(torch.zeros(BATCH, DIM, dtype=dtype))
        return tensors

    def forward(dtype, config, arch, misaligned=()):
        a, p, n = rows(dtype, misaligned)
        return triton_ops.compile_for_gpu(
            triton_ops._forward_kernel,
            a, p, n, torch.empty(BATCH, dtype=dtype),
            torch.empty(BATCH, 2, dtype=triton_ops.distance_dtype(dtype)), DIM,
            *triton_ops._layout(a, p, n),
            **hyper,
            batch_bucket=bucket,
            FP64=dtype == torch.float64,
            BLOCK_D=config.kwargs["BLOCK_D"],
            num_warps=config.num_warps,
            arch=arch,
        )

    def backward(dtype, config, arch):
        a, p, n = rows(dtype)
        grads = [torch.empty(BATCH, DIM, dtype=dtype) for _ in range(3)]
        return triton_ops.compile_for_gpu(
            triton_ops._backward_kernel,
            torch.ones(BATCH, dtype=dtype), 1, 1,
            a, p, n, torch.empty(BATCH, 2, dtype=triton_ops.distance_dtype(dtype)),
            *grads, DIM,
            *triton_ops._layout(a, p, n),
            **hyper,
            batch_bucket=bucket,
            FP64=dtype == torch.float64,
            BLOCK_D=config.kwargs["BLOCK_D"],
            num_warps=config.num_warps,
            arch=arch,
        )

    def ptxas_report(ptx: str, arch: int, scratch: str) -> dict:
        # ptxas -v, as Triton runs it for the cubin, reports registers and spills.
        path = os.path.join(scratch, "kernel.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        result = subprocess.run(
            [get_ptxas(arch).path, "-v", "--regAllocOptLevel=2", f"--gpu-name={gpu}",
             path, "-o", path + ".o"],
            capture_output=True, text=True, check=True,
        )
        registers = int(re.search(r"Used (\d+) registers", result.stderr).group(1))
        spills = int(re.search(r"(\d+) bytes spill stores", result.stderr).group(1))
        return dict(registers=registers, spill_stores=spills)

    def key(config):
        return f"{config.kwargs['BLOCK_D']}x{config.num_warps}"

    found = dict(kept={}, left_out={}, misaligned={}, backward={},
                 spills={}, parameters={}, targets={}, rounding={})
    # Every configuration the autotuner may try, per dtype, aligned: float32
    # for both GPUs, float16 and float64 for sm_90a, bfloat16 (the same
    # bytes per element as float16) its widest only; misaligned inputs in
    # the widest configuration.
    plan = {
        ("float32", 80): "all", ("float32", 90): "all", ("float16", 90): "all",
        ("float64", 90): "all", ("bfloat16", 90): "widest",
    }
    for (dtype_name, arch), which_configs in plan.items():
        dtype = getattr(torch, dtype_name)
        kept = triton_ops.configs_for(dtype, DIM)
        widest = kept[-1]
        tag = f"{dtype_name}/sm_{arch}"
        found["kept"][tag] = {
            key(c): global_loads(forward(dtype, c, arch).asm["ptx"])
            for c in (kept if which_configs == "all" else [widest])
        }
        variants = [("anchor", "positive", "negative")]
        if (dtype_name, arch) == ("float32", 90):
            variants += [("anchor",), ("positive",), ("negative",)]
        found["misaligned"][tag] = {
            ",".join(which): global_loads(forward(dtype, widest, arch, which).asm["ptx"])
            for which in variants
        }
    # Left out for giving each thread fewer than 16 bytes (float32, sm_90a).
    dtype = torch.float32
    kept = triton_ops.configs_for(dtype, DIM)
    found["left_out"]["float32/sm_90"] = {
        key(c): global_loads(forward(dtype, c, 90).asm["ptx"])
        for c in triton_ops._CONFIGS
        if c not in kept
        and triton_ops.bytes_per_thread(c, dtype) < triton_ops.VECTOR_BYTES
        and c.kwargs["BLOCK_D"] >= 32 * c.num_warps
    }
    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        widest = triton_ops.configs_for(dtype, DIM)[-1]
        compiled = backward(dtype, widest, 90)
        found["backward"][dtype_name] = global_loads(compiled.asm["ptx"])
        found["rounding"][dtype_name] = sorted(
            set(re.findall(r"\bcvt(?:\.[a-z0-9]+)+", compiled.asm["ptx"]))
        )
        compiled = forward(dtype, widest, 90)
        found["parameters"][dtype_name] = _entry_parameters(compiled.asm["ptx"])
        found["targets"][dtype_name] = re.findall(r"\.target\s+(\w+)", compiled.asm["ptx"])
    # Registers and spills of both kernels at the most bytes per thread the
    # autotuner allows (every such configuration for float64, two registers
    # per element; the widest for the others), and at a configuration the
    # old list had and this one leaves out: float64, 1024 columns on one
    # warp, 256 bytes of each input per thread. The heavier kernel is the
    # forward, which keeps both distances' sums over its loop; the backward
    # reads them from memory since it stopped recomputing them.
    scratch = os.environ["PTX_SCRATCH"]

    def both(dtype, config):
        return {
            "forward": ptxas_report(forward(dtype, config, 90).asm["ptx"], 90, scratch),
            "backward": ptxas_report(backward(dtype, config, 90).asm["ptx"], 90, scratch),
        }

    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        at_bound = [
            c for c in triton_ops.configs_for(dtype, DIM)
            if triton_ops.bytes_per_thread(c, dtype) == triton_ops.MAX_BYTES_PER_THREAD
        ]
        if dtype != torch.float64:
            at_bound = at_bound[-1:]
        found["spills"][dtype_name] = {key(c): both(dtype, c) for c in at_bound}
    # Twice the bound, where the configurations left out would have put each
    # thread: the widest such configuration per dtype.
    found["above_bound"] = {}
    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        above = [
            c for c in triton_ops._CONFIGS
            if triton_ops.bytes_per_thread(c, dtype) == 2 * triton_ops.MAX_BYTES_PER_THREAD
        ]
        found["above_bound"][dtype_name] = {key(c): both(dtype, c) for c in above[-1:]}
    old = next(c for c in triton_ops._CONFIGS if key(c) == "1024x1")
    found["spills"]["float64 1024x1"] = both(torch.float64, old)
    return found


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump(_compile_everything(), out, indent=1)
    sys.exit(0)


# ---- The tests --------------------------------------------------------------

import pytest  # noqa: E402
import torch  # noqa: E402

from extending_pytorch import triton_ops  # noqa: E402


@pytest.fixture(scope="module")
def assembly(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("ptx")
    out = scratch / "assembly.json"
    env = dict(os.environ)
    env.update(
        TRITON_INTERPRET="0",  # the compiler; triton_ops only sets it if unset
        TRITON_CACHE_DIR=str(scratch / "cache"),  # not the user's ~/.triton
        TRITON_DEFAULT_FP_FUSION="1",  # Triton 3.9's default, without its warning
        PTX_SCRATCH=str(scratch),
        # The extending_pytorch this process imported, wherever it is.
        PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(triton_ops.__file__)), env.get("PYTHONPATH", "")]
        ),
    )
    result = subprocess.run(
        [sys.executable, __file__, str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


def test_every_autotuning_configuration_loads_aligned_rows_128_bits_at_a_time(assembly):
    # Catches a configuration whose BLOCK_D leaves each thread fewer than 16
    # bytes (BLOCK_D = 128 on 4 warps: one float32 per thread), which compiles
    # to scalar loads however the rows are aligned.
    for tag, loads in assembly["kept"].items():
        dtype = tag.split("/")[0]
        assert loads, tag
        for config, kinds in loads.items():
            assert kinds == [VECTOR_LOAD[dtype]], (tag, config, kinds)


def test_the_configurations_left_out_could_not_vectorise(assembly):
    # The other side of the rule: what it leaves out for giving a thread fewer
    # than 16 bytes really compiles to narrower loads. If a Triton release
    # vectorised them, the rule would be dropping configurations for nothing.
    loads = assembly["left_out"]["float32/sm_90"]
    kept = triton_ops.configs_for(torch.float32, DIM)
    expected = {  # the configurations that give every thread an element
        f"{c.kwargs['BLOCK_D']}x{c.num_warps}"
        for c in triton_ops._CONFIGS
        if c not in kept
        and triton_ops.bytes_per_thread(c, torch.float32) < triton_ops.VECTOR_BYTES
        and c.kwargs["BLOCK_D"] >= 32 * c.num_warps
    }
    assert set(loads) == expected and "128x4" in loads
    for config, kinds in loads.items():
        assert kinds == ["ld.global.b32"] or kinds == ["ld.global.v2.b32"], (config, kinds)


@pytest.mark.parametrize("which", ["anchor", "positive", "negative"])
def test_a_misaligned_input_is_read_with_scalar_loads(assembly, which):
    # x[:, 1:] starts 4 bytes past a 16-byte boundary: no 128-bit load may
    # touch it. The other two inputs keep their vector loads.
    kinds = assembly["misaligned"]["float32/sm_90"][which]
    assert sorted(kinds) == ["ld.global.b32", "ld.global.v4.b32"], (which, kinds)


def test_misaligned_rows_are_read_with_scalar_loads_only(assembly):
    for tag, cases in assembly["misaligned"].items():
        dtype = tag.split("/")[0]
        kinds = cases["anchor,positive,negative"]
        assert kinds == [SCALAR_LOAD[dtype]], (tag, kinds)


def test_backward_kernel_loads_aligned_rows_128_bits_at_a_time(assembly):
    for dtype, kinds in assembly["backward"].items():
        # The upstream gradient is one scalar per row, in the inputs' dtype;
        # the row's two saved distances are scalars of the accumulation dtype
        # (float32 for the 16-bit dtypes, which adds ld.global.b32 there).
        distance = SCALAR_LOAD["float64" if dtype == "float64" else "float32"]
        assert set(kinds) <= {VECTOR_LOAD[dtype], SCALAR_LOAD[dtype], distance}, (dtype, kinds)
        assert VECTOR_LOAD[dtype] in kinds, (dtype, kinds)


def test_configurations_at_the_bound_spill_little_or_nothing(assembly):
    # The upper bound of 64 bytes per thread: at it, the backward keeps
    # everything in registers, and the forward spills at most 16 bytes (0, or
    # 4 and 16 bytes in three configurations with Triton 3.9 on sm_90a: float64
    # 512x2 and 1024x4, float32 4096x8; its code, the distances' loop, was
    # the same before the backward stopped recomputing the distances). The
    # old list's 1024 columns on one warp (256 bytes of each input per thread)
    # runs out of registers and spills hundreds of bytes.
    for dtype in DTYPES:
        reports = assembly["spills"][dtype]
        assert reports, dtype  # some configuration sits at the bound
        for config, kernels in reports.items():
            assert kernels["backward"]["spill_stores"] == 0, (dtype, config, kernels)
            assert kernels["forward"]["spill_stores"] <= 16, (dtype, config, kernels)
    old = assembly["spills"]["float64 1024x1"]["forward"]
    assert old["spill_stores"] > 100 and old["registers"] >= 250, old


def test_the_bound_keeps_both_kernels_within_128_registers(assembly):
    # Why the upper bound is 64 bytes per thread and not 128: at 64 the
    # heavier kernel (the forward) needs at most 128 registers per thread
    # (56 to 127 with Triton 3.9, sm_90a), at 128 bytes more (164 to 232), so
    # fewer warps fit on a multiprocessor. The exact counts vary between
    # Triton releases; the side of 128 each bound falls on is what
    # triton_ops' comment relies on.
    def heaviest(reports):
        return [max(k["forward"]["registers"], k["backward"]["registers"]) for k in reports.values()]

    for dtype in DTYPES:
        at_bound = heaviest(assembly["spills"][dtype])
        assert at_bound and all(r <= 128 for r in at_bound), (dtype, assembly["spills"][dtype])
        above = heaviest(assembly["above_bound"][dtype])
        assert above and all(r > 128 for r in above), (dtype, assembly["above_bound"][dtype])


def test_hyperparameters_are_64_bit_integer_arguments(assembly):
    # A float argument would be a float32 (Triton types every Python float
    # so): t2 = 0.5 + 2**-40 would reach the float64 kernel as 0.5. The
    # interpreter cannot show this (it keeps a Python float a Python float).
    for dtype, parameters in assembly["parameters"].items():
        assert not any(re.search(r"\.f(16|32|64)\b", p) for p in parameters), parameters
        scalars_64 = [p for p in parameters if ".u64" in p and ".ptr" not in p]
        assert len(scalars_64) == 3, (dtype, parameters)  # t1, t2, beta


def test_16_bit_results_are_rounded_to_nearest_even(assembly):
    # The backward stores float32 gradients into 16-bit tensors: cvt.rn
    # (round to nearest even), as torch rounds. Triton's interpreter
    # truncates float32 to bfloat16 instead (test_triton.py's
    # test_interpreter_truncates_float32_to_bfloat16).
    for dtype, short in (("float16", "f16"), ("bfloat16", "bf16")):
        narrowing = [
            c for c in assembly["rounding"][dtype]
            if re.search(rf"\.{short}(x2)?\.f32$", c)
        ]
        assert narrowing, assembly["rounding"][dtype]
        for conversion in narrowing:
            # cvt.rn.bf16.f32, or cvt.rn.f16x2.f32 (two at a time)
            assert re.fullmatch(rf"cvt\.rn\.{short}(x2)?\.f32", conversion), narrowing


def test_compiled_for_the_gpus_asked_for(assembly):
    assert set(assembly["kept"]) >= {"float32/sm_80", "float32/sm_90"}
    for targets in assembly["targets"].values():
        assert targets == ["sm_90a"]


def test_compile_for_gpu_refuses_the_interpreter(monkeypatch):
    monkeypatch.setattr(triton_ops, "INTERPRETED", True)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=0"):
        triton_ops.compile_for_gpu(triton_ops._forward_kernel)
