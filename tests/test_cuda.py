"""Chapter 5: the CUDA kernels of extending_pytorch::triplet_hinge_loss.

Without a GPU (CI, most laptops), nvcc still compiles every kernel file for
sm_80 and sm_90, and the CPU tests exercise the arithmetic the kernels share
(csrc/triplet_math.h). The tests below that need a GPU are skipped without one;
test_cpp_ops.py's `_cuda` twins run there too.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda
from extending_pytorch import build_flags, ops, testing

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
DTYPES = ("float", "double", "__half", "__nv_bfloat16")


def nvcc() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME and (pathlib.Path(CUDA_HOME) / "bin" / "nvcc").exists():
        return str(pathlib.Path(CUDA_HOME) / "bin" / "nvcc")
    return shutil.which("nvcc")


def torch_cxx_standard() -> str:
    """The newest -std=c++NN that torch.utils.cpp_extension passes to compilers."""
    import inspect

    import torch.utils.cpp_extension as cpp_extension

    found = re.findall(r"-std=c\+\+(\d+)", inspect.getsource(cpp_extension))
    return f"c++{max(map(int, found))}"


def test_build_uses_the_cxx_standard_torch_uses():
    # torch's headers need its standard; nvcc refuses two -std flags, so the
    # one in build_flags replaces torch's own: they must agree.
    assert build_flags.CXX_STANDARD == torch_cxx_standard()
    assert f"-std={build_flags.CXX_STANDARD}" in build_flags.nvcc_flags()
    assert f"-std={build_flags.CXX_STANDARD}" in build_flags.cxx_flags()


# The kernels each kernel file must define, for every dtype.
KERNELS = {
    "csrc/cuda/triplet.cu": ("triplet_forward_kernel", "triplet_backward_kernel"),
}


def nvcc_command(kernel: str, obj: pathlib.Path, archs=("80", "90")) -> list[str]:
    """nvcc as torch.utils.cpp_extension runs it, for the given architectures."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    return [
        nvcc(),
        "-c",
        *COMMON_NVCC_FLAGS,
        *build_flags.nvcc_flags(),
        *(
            flag
            for arch in archs
            for flag in ("-gencode", f"arch=compute_{arch},code=sm_{arch}")
        ),
        "-I",
        str(build_flags.CSRC),
        str(build_flags.EXTENSIONS_DIR / kernel),
        "-o",
        str(obj),
    ]


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc (the CUDA toolkit)")
@pytest.mark.parametrize("kernel", build_flags.CUDA_KERNELS)
def test_kernel_file_compiles_with_nvcc_for_sm80_and_sm90(kernel, tmp_path):
    obj = tmp_path / "kernels.o"
    result = subprocess.run(
        nvcc_command(kernel, obj), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    symbols = subprocess.run(
        ["nm", "-C", str(obj)], capture_output=True, text=True
    ).stdout
    for kernel_name in KERNELS.get(kernel, ()):
        for dtype in DTYPES:
            assert re.search(rf"{kernel_name}<{re.escape(dtype)}>", symbols), (
                kernel_name,
                dtype,
            )


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_grid_covers_every_row_once_for_any_batch(tmp_path):
    # Catches a grid size that overflows its unsigned int (a batch of more
    # than 2^34 rows), and a grid-stride loop that skips or repeats rows.
    # launch_config.h is plain C++: the CPU compiler checks the very code
    # the kernels use to find their rows.
    exe = tmp_path / "launch_config_test"
    source = pathlib.Path(__file__).parent / "native" / "launch_config_test.cpp"
    build = subprocess.run(
        ["g++", "-std=c++20", "-O1", f"-I{build_flags.CSRC}", str(source), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_default_cuda_architectures_without_a_gpu():
    # With a CUDA torch, no visible GPU and TORCH_CUDA_ARCH_LIST unset, torch's
    # own detection crashes (IndexError); the build uses the book's list then,
    # and leaves every other case to torch.
    assert build_flags.cuda_arch_list(None, 0) == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert build_flags.cuda_arch_list("", 0) == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert build_flags.cuda_arch_list("8.0", 0) is None
    assert build_flags.cuda_arch_list(None, 1) is None


def test_default_cuda_architectures_are_ones_torch_accepts(monkeypatch):
    from torch.utils.cpp_extension import _get_cuda_arch_flags

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", build_flags.DEFAULT_CUDA_ARCH_LIST)
    flags = _get_cuda_arch_flags()
    assert "-gencode=arch=compute_75,code=sm_75" in flags
    assert "-gencode=arch=compute_90,code=compute_90" in flags  # the PTX


def test_setting_the_default_is_announced(monkeypatch):
    messages = []
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert build_flags.use_default_cuda_arch_list(0, announce=messages.append)
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert "no GPU is visible" in messages[0]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert build_flags.use_default_cuda_arch_list(0, announce=messages.append) is None
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_cuda_sources_are_listed_and_exist():
    for sources in build_flags.CUDA_SOURCES.values():
        for source in sources:
            assert (build_flags.EXTENSIONS_DIR / source).is_file(), source
    for kernel in build_flags.CUDA_KERNELS:
        text = (build_flags.EXTENSIONS_DIR / kernel).read_text()
        included = re.findall(r'#include [<"]([^>"]+)[>"]', text)
        assert not any(
            h.startswith(("torch/", "ATen/", "c10/")) for h in included
        ), included


def cuda_include_dir() -> pathlib.Path | None:
    """The CUDA toolkit's headers (cuda_runtime.h), if a toolkit is here."""
    from torch.utils.cpp_extension import CUDA_HOME

    # nvcc may be a wrapper script outside the toolkit: look where it is too.
    candidates = [CUDA_HOME, "/usr/local/cuda"]
    if nvcc() is not None:
        candidates.append(pathlib.Path(nvcc()).resolve().parents[1])
    for home in filter(None, candidates):
        include = pathlib.Path(home) / "include"
        if (include / "cuda_runtime.h").is_file():
            return include
    return None


BINDINGS = [
    source
    for sources in build_flags.CUDA_SOURCES.values()
    for source in sources
    if source.endswith(".cpp")
]


@pytest.mark.skipif(
    cuda_include_dir() is None, reason="needs the CUDA toolkit's headers"
)
@pytest.mark.parametrize("binding", BINDINGS)
def test_binding_compiles_against_torch_and_cuda_headers(binding, tmp_path):
    # The torch-facing layer (device guard, stream, dispatch) is compiled on a
    # GPU machine only; this checks it with the host compiler everywhere. A
    # CPU wheel of torch lacks one generated header of its CUDA API: a stand-in
    # is enough for a syntax check, and a CUDA wheel has the real one.
    from torch.utils.cpp_extension import include_paths

    torch_includes = include_paths()
    generated = pathlib.Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any(
        (pathlib.Path(d) / generated).is_file() for d in torch_includes
    ):
        (tmp_path / generated).parent.mkdir(parents=True)
        (tmp_path / generated).write_text(
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"
        )
    command = [
        shutil.which("c++") or "g++",
        "-std=c++20",
        "-fsyntax-only",
        f"-I{tmp_path}",
        *(f"-I{d}" for d in torch_includes),
        f"-I{cuda_include_dir()}",
        f"-I{build_flags.CSRC}",
        str(build_flags.EXTENSIONS_DIR / binding),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]


# ---- On a GPU ----

# float32 and 16-bit sums of D squares round more as D grows; float64 is exact enough.
TOLERANCE = {
    torch.float32: lambda dim: dict(rtol=1e-5, atol=1e-5 * dim),
    torch.float64: lambda dim: dict(rtol=1e-7, atol=1e-7),
    torch.float16: lambda dim: dict(rtol=2e-2, atol=2e-2 * dim),
    torch.bfloat16: lambda dim: dict(rtol=5e-2, atol=5e-2 * dim),
}


# Catches the CUDA twins of the CPU layout bugs, and those of the 16-byte
# path: a row read in packs that is not aligned (misaligned), not adjacent
# (column-strided, transposed) or not a whole number of packs (dim 1, 3, 31,
# 1027), for every dtype the kernels are compiled for. Views are passed as
# views and gradients compared with respect to their bases.
@requires_cuda
@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("dim", [1, 3, 4, 8, 31, 512, 1027])
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_layouts_dims_and_dtypes_cuda(layout, dim, dtype):
    for position in range(3):
        layouts = ["contiguous"] * 3
        layouts[position] = layout
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                ops.triplet_hinge_loss,
                tuple(layouts),
                37,
                dim,
                reduction=reduction,
                dtype=dtype,
                device="cuda",
                seed=position,
                **TOLERANCE[dtype](dim),
            )


@requires_cuda
def test_backward_output_mask_cuda():
    a, p, n = torch.randn(3, 40, 64, device="cuda").unbind(0)
    grad = torch.tensor(0.5, device="cuda")
    full = ops.triplet_hinge_loss_backward_op(grad, a, p, n, -1.0, 0.5, 0.5, "mean", [True] * 3)
    for mask in ([True, True, False], [False, True, False]):
        partial = ops.triplet_hinge_loss_backward_op(grad, a, p, n, -1.0, 0.5, 0.5, "mean", mask)
        for needed, got, expected in zip(mask, partial, full):
            assert (got is None) != needed
            if needed:
                assert torch.equal(got, expected)


@requires_cuda
def test_kernels_launch_on_the_current_stream():
    # Work queued on a side stream must see the kernel's results without a
    # device-wide synchronisation: the binding launches on the current stream.
    a, p, n = torch.randn(3, 4096, 256, device="cuda").unbind(0)
    expected = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
        copy = out.clone()  # ordered after the kernel on the same stream
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(copy, expected)


@requires_cuda
def test_cuda_graph_capture_replays_the_same_results():
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 512, 128, device="cuda").unbind(0))

    def step():
        loss = ops.triplet_hinge_loss(a, p, n, **HYPER)
        return (loss, *torch.autograd.grad(loss, (a, p, n)))

    eager = step()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()  # warm-up on a side stream, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    graph.replay()
    torch.cuda.synchronize()
    for got, expected in zip(captured, eager):
        assert torch.equal(got, expected)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_cuda(dtype):
    a, p, n = (t.to("cuda", dtype) for t in torch.randn(3, 64, 1024).unbind(0))
    ours = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    exact = ep.reference_triplet_hinge_loss(
        *(t.double() for t in (a, p, n)), **HYPER, reduction="none"
    )
    assert ours.dtype == dtype
    assert_close(ours.double(), exact, rtol=1e-2, atol=1e-2)


@requires_cuda
def test_large_batch_matches_cpu():
    a, p, n = torch.randn(3, 65536 + 3, 64).unbind(0)
    for reduction in ep.REDUCTIONS:
        cpu = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction=reduction)
        gpu = ops.triplet_hinge_loss(
            a.cuda(), p.cuda(), n.cuda(), **HYPER, reduction=reduction
        )
        assert_close(gpu.cpu(), cpu, rtol=1e-4, atol=1e-4)


@requires_cuda
def test_empty_batch_cuda():
    empty = torch.empty(0, 8, device="cuda")
    assert ops.triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="none"
    ).shape == (0,)
    assert (
        ops.triplet_hinge_loss(
            empty, empty, empty, **HYPER, reduction="sum"
        ).item()
        == 0
    )
