"""Chapter 5: the CUDA kernels of extending_pytorch::triplet_hinge_loss.

Without a GPU (CI, most laptops), nvcc still compiles every kernel file for
sm_80 and sm_90, and the CPU tests exercise the arithmetic the kernels share
(csrc/triplet_math.h). The tests below that need a GPU are skipped without one;
test_cpp_ops.py's `_cuda` twins run there too.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import requires_cuda
from extending_pytorch import build_flags, ops

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
DTYPES = ("float", "double", "__half", "__nv_bfloat16")


def nvcc() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME and (pathlib.Path(CUDA_HOME) / "bin" / "nvcc").exists():
        return str(pathlib.Path(CUDA_HOME) / "bin" / "nvcc")
    return shutil.which("nvcc")


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc (the CUDA toolkit)")
@pytest.mark.parametrize("kernel", build_flags.CUDA_KERNELS)
def test_kernel_file_compiles_with_nvcc_for_sm80_and_sm90(kernel, tmp_path):
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    obj = tmp_path / "kernels.o"
    command = [
        nvcc(),
        "-c",
        "-std=c++17",
        *COMMON_NVCC_FLAGS,
        *build_flags.nvcc_flags(),
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-I",
        str(build_flags.CSRC),
        str(build_flags.EXTENSIONS_DIR / kernel),
        "-o",
        str(obj),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    symbols = subprocess.run(
        ["nm", "-C", str(obj)], capture_output=True, text=True
    ).stdout
    for kernel_name in ("triplet_forward_kernel", "triplet_backward_kernel"):
        for dtype in DTYPES:
            assert re.search(rf"{kernel_name}<{re.escape(dtype)}>", symbols), (
                kernel_name,
                dtype,
            )


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

LAYOUTS = {
    "contiguous": lambda b, d: torch.randn(b, d, device="cuda"),
    "misaligned": lambda b, d: torch.randn(b, d + 1, device="cuda")[:, 1:],
    "transposed": lambda b, d: torch.randn(d, b, device="cuda").T,
    "expanded": lambda b, d: torch.randn(1, d, device="cuda").expand(b, d),
}


@requires_cuda
@pytest.mark.parametrize("dim", [1, 3, 4, 31, 512, 1027])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_and_dims_cuda(layout, dim):
    anchor = torch.randn(37, dim, device="cuda")
    inputs = [
        anchor,
        LAYOUTS[layout](37, dim),
        torch.randn(37, dim, device="cuda"),
    ]
    for reduction in ep.REDUCTIONS:
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        ours = ops.triplet_hinge_loss(*inputs, **HYPER, reduction=reduction)
        reference = ep.reference_triplet_hinge_loss(
            *leaves, **HYPER, reduction=reduction
        )
        # float32 sums of D squares round more as D grows.
        tol = dict(rtol=1e-5, atol=1e-5 * dim)
        assert_close(ours, reference, **tol)
        leaves_ours = [t.detach().clone().requires_grad_() for t in inputs]
        weights = torch.randn_like(reference)
        grads = torch.autograd.grad(
            ops.triplet_hinge_loss(*leaves_ours, **HYPER, reduction=reduction),
            leaves_ours,
            weights,
        )
        for grad, ref in zip(
            grads, torch.autograd.grad(reference, leaves, weights)
        ):
            assert_close(grad, ref, **tol)


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
