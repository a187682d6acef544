"""Compiler settings and sources of the native extensions.

Imported by setup.py (ahead-of-time builds) and by `extending_pytorch.native`
(just-in-time builds), so both compile the same files with the same flags.
This module must not import torch or the rest of the package.
"""

from __future__ import annotations

import pathlib
import platform
import sys

EXTENSIONS_DIR = pathlib.Path(__file__).resolve().parents[1]
CSRC = EXTENSIONS_DIR / "csrc"

# Extension name -> its C++ sources, relative to extensions/.
SOURCES = {
    "_scale_add": ["csrc/scale_add.cpp", "csrc/scale_add_bindings.cpp"],
    "_C": ["csrc/triplet.cpp", "csrc/module.cpp"],
}

# Added to an extension's sources when torch and the toolkit have CUDA. The
# kernels (.cu) include no torch header; the binding (.cpp) includes torch's
# CUDA headers, which a CPU-only torch lacks.
CUDA_SOURCES = {
    "_C": ["csrc/cuda/triplet.cu", "csrc/cuda/triplet_cuda.cpp"],
}

# The kernels' translation units, compiled on their own by the CPU-only tests.
CUDA_KERNELS = ["csrc/cuda/triplet.cu"]


def nvcc_flags() -> list[str]:
    """Flags for nvcc. The GPU architectures come from TORCH_CUDA_ARCH_LIST,
    or, when it is unset, from the GPUs of the building machine."""
    return ["-O3", "-lineinfo"]


def _cpu_flags() -> set[str]:
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cxx_flags() -> list[str]:
    """Flags for the C++ compiler (the linker needs none of them)."""
    flags = ["-O3"]
    if sys.platform.startswith("linux"):
        # at::parallel_for is a template whose OpenMP pragma is compiled into
        # the extension: without -fopenmp it silently runs on one thread.
        flags.append("-fopenmp")
    if (
        platform.machine() in ("x86_64", "AMD64")
        and {"avx2", "fma", "f16c"} <= _cpu_flags()
    ):
        # Compile at::vec::Vectorized for AVX2: 8 floats per register.
        flags += ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"]
    return flags
