"""Compiler settings and sources of the native extensions.

Imported by setup.py (ahead-of-time builds) and by `extending_pytorch.native`
(just-in-time builds), so both compile the same files with the same flags.
This module must not import torch or the rest of the package.
"""

from __future__ import annotations

import os
import pathlib
import platform
import sys

EXTENSIONS_DIR = pathlib.Path(__file__).resolve().parents[1]
CSRC = EXTENSIONS_DIR / "csrc"

# Extension name -> its C++ sources, relative to extensions/.
SOURCES = {
    "_scale_add": ["csrc/scale_add.cpp", "csrc/scale_add_bindings.cpp"],
    "_C": ["csrc/triplet.cpp", "csrc/involution.cpp", "csrc/module.cpp"],
}

# Added to an extension's sources when torch and the toolkit have CUDA. The
# kernels (.cu) include no torch header; the binding (.cpp) includes torch's
# CUDA headers, which a CPU-only torch lacks.
CUDA_SOURCES = {
    "_C": [
        "csrc/cuda/triplet.cu",
        "csrc/cuda/triplet_cuda.cpp",
        "csrc/cuda/involution.cu",
        "csrc/cuda/involution_cuda.cpp",
    ],
}

# The kernels' translation units, compiled on their own by the CPU-only tests.
CUDA_KERNELS = ["csrc/cuda/triplet.cu", "csrc/cuda/involution.cu"]


# The C++ standard of torch's own headers, passed to g++ and nvcc alike. torch's
# build helpers add the same flag when none is given (tests/test_cuda.py checks
# that this is still the standard torch.utils.cpp_extension uses).
CXX_STANDARD = "c++20"

# The GPU architectures the CUDA kernels are compiled for when nothing else says:
# TORCH_CUDA_ARCH_LIST is unset and no GPU is visible (a Colab CPU runtime, a CI
# runner, a cluster's login node). Machine code (SASS) runs on GPUs of the same
# major version and an equal or higher minor one, so three builds cover CUDA 13's
# GPUs: 7.5 (Turing: Colab's T4), 8.0 (Ampere and Ada: A100, A10, RTX 30xx, L4,
# RTX 40xx) and 9.0 (Hopper: H100, H200); plus PTX for 9.0, which the driver
# compiles at first use for newer GPUs (Blackwell: 10.x, 11.0, 12.x). CUDA 13
# supports nothing older than 7.5 (no V100, no P100).
DEFAULT_CUDA_ARCH_LIST = "7.5;8.0;9.0+PTX"


def cuda_arch_list(requested: str | None, visible_gpus: int) -> str | None:
    """The TORCH_CUDA_ARCH_LIST a CUDA build should run with.

    `requested` is the user's TORCH_CUDA_ARCH_LIST (None or "" when unset).
    Returns None to leave the choice to torch: the user set a list, or a GPU
    is visible and torch builds for it. With neither, torch's own detection
    fails (IndexError in torch.utils.cpp_extension._get_cuda_arch_flags, an
    open upstream bug), so the build uses DEFAULT_CUDA_ARCH_LIST instead.
    """
    if requested:
        return None
    if visible_gpus > 0:
        return None
    return DEFAULT_CUDA_ARCH_LIST


def use_default_cuda_arch_list(visible_gpus: int, *, announce=print) -> str | None:
    """Set TORCH_CUDA_ARCH_LIST for this process if `cuda_arch_list` says so.

    Returns the list it set, or None if it changed nothing.
    """
    archs = cuda_arch_list(os.environ.get("TORCH_CUDA_ARCH_LIST"), visible_gpus)
    if archs is not None:
        os.environ["TORCH_CUDA_ARCH_LIST"] = archs
        announce(
            "extending_pytorch: no GPU is visible and TORCH_CUDA_ARCH_LIST is unset; "
            f'building the CUDA kernels for TORCH_CUDA_ARCH_LIST="{archs}". '
            "Set TORCH_CUDA_ARCH_LIST to choose other GPUs."
        )
    return archs


# EXTENDING_PYTORCH_CUDA: "1" builds the CUDA kernels (and fails if torch or
# the toolkit lacks CUDA), "0" never builds them, unset builds them only when
# they can run here: torch has CUDA, the toolkit is found and a GPU is visible.
# Without a GPU the kernels cannot run, and compiling them for three
# architectures costs minutes; chapter 5 runs them through the emulator then.
CUDA_SWITCH = "EXTENDING_PYTORCH_CUDA"


def build_cuda(torch_cuda: str | None, cuda_home: str | None, visible_gpus: int) -> bool:
    """Whether a build includes the CUDA kernels (see CUDA_SWITCH).

    torch_cuda is torch.version.cuda, cuda_home torch's CUDA_HOME (None when
    no toolkit is found).
    """
    switch = os.environ.get(CUDA_SWITCH, "")
    if switch not in ("", "0", "1"):
        raise ValueError(f'{CUDA_SWITCH} must be "0", "1" or unset, got {switch!r}')
    if switch == "0":
        return False
    possible = torch_cuda is not None and cuda_home is not None
    if switch == "1":
        if not possible:
            missing = "a CUDA build of torch" if torch_cuda is None else "the CUDA toolkit (nvcc)"
            raise RuntimeError(
                f"{CUDA_SWITCH}=1 asks for the CUDA kernels, but this machine lacks {missing}."
            )
        return True
    return possible and visible_gpus > 0


def nvcc_flags() -> list[str]:
    """Flags for nvcc. The GPU architectures come from TORCH_CUDA_ARCH_LIST,
    or, when it is unset, from the GPUs of the building machine (see
    `cuda_arch_list` for a machine without one)."""
    return [f"-std={CXX_STANDARD}", "-O3", "-lineinfo"]


def _cpu_flags() -> set[str]:
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# Instruction-set flags that only some CPUs of an architecture run: code
# compiled with them dies with "Illegal instruction" on the others.
NATIVE_ONLY_FLAGS = ("-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2", "-march=native")


def portable_build(local_build: bool) -> bool:
    """Whether a build must run on any CPU of this architecture.

    A wheel (pip wheel, python -m build) may be installed on other machines,
    so it is portable; an editable or in-place build (`pip install -e`, the
    JIT builds) runs where it was built, so it may use this CPU's AVX2.
    EXTENDING_PYTORCH_PORTABLE=1 (or 0) overrides, e.g. for an environment
    shared by machines with different CPUs.
    """
    override = os.environ.get("EXTENDING_PYTORCH_PORTABLE")
    if override in ("0", "1"):
        return override == "1"
    return not local_build


def cxx_flags(*, portable: bool = False) -> list[str]:
    """Flags for the C++ compiler (the linker needs none of them).

    With portable=True, none of NATIVE_ONLY_FLAGS: at::vec::Vectorized then
    compiles for the architecture's baseline (SSE2 on x86-64).
    """
    flags = [f"-std={CXX_STANDARD}", "-O3"]
    if sys.platform.startswith("linux"):
        # at::parallel_for is a template whose OpenMP pragma is compiled into
        # the extension: without -fopenmp it silently runs on one thread.
        flags.append("-fopenmp")
    if (
        not portable
        and platform.machine() in ("x86_64", "AMD64")
        and {"avx2", "fma", "f16c"} <= _cpu_flags()
    ):
        # Compile at::vec::Vectorized for AVX2: 8 floats per register. The
        # -m flags let the compiler emit AVX2/FMA/F16C instructions;
        # CPU_CAPABILITY_AVX2 is an ATen-internal macro (private, may change),
        # defined by ATen's own build for its per-capability kernels, that
        # at::vec's headers (ATen/cpu/vec/vec256/) test to select their AVX2
        # specialisations: without it Vectorized<float> stays the generic one.
        flags += ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"]
    return flags
