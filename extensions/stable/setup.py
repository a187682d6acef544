"""Builds extending_pytorch_stable: one wheel meant for torch 2.13 and later.

From the repository root:

    pip wheel --no-build-isolation --no-deps -w dist extensions/stable

Two promises make the wheel portable, and the flags below keep both:

- across torch versions: the C++ includes only torch/csrc/stable and
  torch/headeronly, and TORCH_TARGET_VERSION (2.13) hides every stable API
  newer than 2.13, so the library calls only C functions that torch 2.13 and
  every later torch export. 2.13 and not older: the CUDA kernels launch on
  torch's current stream, and the stable API hands out the CUDA stream itself
  (Stream::nativeHandle) only from 2.13 on;
- across Python versions: py_limited_api=True builds a cp310-abi3 module
  (only CPython's limited API), which installers accept on CPython 3.10 and
  later (not on the free-threaded builds).

It also runs on any x86-64 CPU: no -march/-mavx2 here; the hot loops are
cloned per instruction set and picked at load time (target_clones).

The CUDA kernels (chapter 5's, csrc/cuda/triplet.cu) are compiled in when
this torch has CUDA and the CUDA toolkit (nvcc) is found; no GPU is needed to
build them. Otherwise the wheel is CPU-only, and the build says so.
EXTENDING_PYTORCH_STABLE_CUDA=0 builds CPU-only anyway, =1 fails instead of
falling back. A CUDA wheel links the CUDA runtime statically and needs
neither libtorch_cuda nor libcudart to load: it also loads (CPU kernels only
in use) into a CPU-only torch.
"""

from __future__ import annotations

import os
import pathlib
import shutil

from setuptools import setup

# The oldest torch the wheel loads on. TORCH_TARGET_VERSION wants it as one
# 64-bit number, bytes [major][minor][patch][5 bytes of ABI tag], as
# TORCH_ABI_VERSION in torch/headeronly/version.h.
TARGET_TORCH = (2, 13, 0)
major, minor, patch = TARGET_TORCH
TORCH_TARGET_VERSION = f"0x{major << 56 | minor << 48 | patch << 40:016x}"

CXX_FLAGS = [
    "-O3",
    # `#pragma omp simd` without the OpenMP runtime: threads come from
    # torch::stable::parallel_for.
    "-fopenmp-simd",
    f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}",
    # No -DPy_LIMITED_API: for py_limited_api=True, torch's BuildExtension
    # defines it as CPython 3.10's version (the abi3 tag below), and
    # CppExtension and CUDAExtension leave out libtorch_python, torch's Python
    # bindings.
]

# triplet.cu includes no torch header, but any .cu that did would need the
# same gate as the C++, so nvcc gets it too.
NVCC_FLAGS = ["-O3", f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]

SOURCES = ["../csrc/stable/triplet_stable.cpp"]  # relative to this directory
CUDA_SOURCES = ["../csrc/stable/triplet_stable_cuda.cpp", "../csrc/cuda/triplet.cu"]

CUDA_SWITCH = "EXTENDING_PYTORCH_STABLE_CUDA"

# The GPUs a CUDA wheel is built for unless TORCH_CUDA_ARCH_LIST says
# otherwise: the ATen package's default (build_flags.DEFAULT_CUDA_ARCH_LIST,
# where the choice is explained; a test keeps the two equal). A wheel is for
# other machines, so this list applies with or without a GPU here.
DEFAULT_CUDA_ARCH_LIST = "7.5;8.0;9.0+PTX"

# What CUDAExtension links that this library must not: torch's CUDA libraries
# (absent from a CPU-only torch) and the shared CUDA runtime. The static
# runtime replaces it; it uses librt, libdl and libpthread.
SHARED_CUDA_LIBRARIES = ("cudart", "c10_cuda", "torch_cuda")
STATIC_CUDA_LIBRARIES = ["cudart_static", "rt", "dl", "pthread"]


def cuda_plan(torch_cuda: str | None, cuda_home: str | None, switch: str) -> tuple[bool, str]:
    """Whether to build the CUDA kernels, and the sentence the build prints.

    torch_cuda is torch.version.cuda, cuda_home toolkit_home() (None when no
    toolkit is found), switch the value of CUDA_SWITCH ("" when unset).
    """
    if switch not in ("", "0", "1"):
        raise ValueError(f'{CUDA_SWITCH} must be "0", "1" or unset, got {switch!r}')
    missing = (
        "this torch has no CUDA (a CPU-only build)"
        if torch_cuda is None
        else "no CUDA toolkit (nvcc) was found (set CUDA_HOME)"
        if cuda_home is None
        else None
    )
    if switch == "0":
        return False, f"extending_pytorch_stable: CPU-only wheel: {CUDA_SWITCH}=0."
    if missing is not None:
        if switch == "1":
            raise RuntimeError(f"{CUDA_SWITCH}=1 asks for the CUDA kernels, but {missing}.")
        return False, f"extending_pytorch_stable: CPU-only wheel: {missing}."
    return True, (
        f"extending_pytorch_stable: building the CUDA kernels too (torch CUDA {torch_cuda}, "
        f"toolkit in {cuda_home})."
    )


def toolkit_home() -> str | None:
    """The CUDA toolkit to build with: CUDA_HOME (or CUDA_PATH) if set, else
    the first directory with bin/nvcc and include/cuda_runtime.h among the
    parent of the `nvcc` on PATH and /usr/local/cuda. (torch takes the parent
    of the `nvcc` on PATH without looking further, which is wrong where that
    nvcc is a wrapper script: /usr/local/bin/nvcc on some images, making
    CUDA_HOME /usr/local, where cuda_runtime.h is not.)"""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            return os.environ[variable]
    nvcc = shutil.which("nvcc")
    candidates = [pathlib.Path(nvcc).resolve().parents[1]] if nvcc else []
    candidates.append(pathlib.Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").is_file() and (home / "include" / "cuda_runtime.h").is_file():
            return str(home)
    return None


def ext_modules_and_commands():
    import torch

    home = toolkit_home()
    with_cuda, message = cuda_plan(torch.version.cuda, home, os.environ.get(CUDA_SWITCH, ""))
    print(message, flush=True)
    if with_cuda:
        # torch.utils.cpp_extension reads CUDA_HOME when it is imported.
        os.environ["CUDA_HOME"] = home
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    if not with_cuda:
        module = CppExtension(
            "extending_pytorch_stable._C",
            SOURCES,
            extra_compile_args={"cxx": CXX_FLAGS},
            py_limited_api=True,
        )
        return [module], {"build_ext": BuildExtension}

    # A wheel is for other machines: without an explicit TORCH_CUDA_ARCH_LIST,
    # build for the book's list of GPUs, not for the GPU of this one (if any).
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCH_LIST
    print(
        f'extending_pytorch_stable: TORCH_CUDA_ARCH_LIST="{os.environ["TORCH_CUDA_ARCH_LIST"]}"',
        flush=True,
    )
    module = CUDAExtension(
        "extending_pytorch_stable._C",
        SOURCES + CUDA_SOURCES,
        extra_compile_args={"cxx": CXX_FLAGS, "nvcc": NVCC_FLAGS},
        py_limited_api=True,
    )
    module.libraries = [
        lib for lib in module.libraries if lib not in SHARED_CUDA_LIBRARIES
    ] + STATIC_CUDA_LIBRARIES
    return [module], {"build_ext": BuildExtension}


# setuptools runs this file as __main__; tests import it to call cuda_plan.
if __name__ == "__main__":
    # The build sets CUDA_HOME and TORCH_CUDA_ARCH_LIST for torch's build
    # helpers; put them back afterwards, for a caller that runs this file in
    # its own process (setuptools' run_setup).
    saved = {name: os.environ.get(name) for name in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST")}
    try:
        ext_modules, cmdclass = ext_modules_and_commands()
        setup(
            ext_modules=ext_modules,
            cmdclass=cmdclass,
            options={"bdist_wheel": {"py_limited_api": "cp310"}},
        )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
