"""Builds extending_pytorch_stable: one wheel for every torch >= 2.10.

From the repository root:

    pip wheel --no-build-isolation --no-deps -w dist extensions/stable

Two promises make the wheel portable, and the flags below keep both:

- across torch versions: the C++ includes only torch/csrc/stable and
  torch/headeronly, and TORCH_TARGET_VERSION (2.10) hides every stable API
  newer than 2.10, so the library calls only C functions that torch 2.10 and
  every later torch export;
- across Python versions: py_limited_api=True builds a cp310-abi3 module
  (only CPython's limited API), loadable by CPython 3.10 and later.

It also runs on any x86-64 CPU: no -march/-mavx2 here; the hot loops are
cloned per instruction set and picked at load time (target_clones).
"""

from setuptools import setup

# The oldest torch the wheel loads on. TORCH_TARGET_VERSION wants it as one
# 64-bit number, bytes [major][minor][patch][5 bytes of ABI tag], as
# TORCH_ABI_VERSION in torch/headeronly/version.h.
TARGET_TORCH = (2, 10, 0)
major, minor, patch = TARGET_TORCH
TORCH_TARGET_VERSION = f"0x{major << 56 | minor << 48 | patch << 40:016x}"

CXX_FLAGS = [
    "-O3",
    # `#pragma omp simd` without the OpenMP runtime: threads come from
    # torch::stable::parallel_for.
    "-fopenmp-simd",
    f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}",
    # No -DPy_LIMITED_API: for py_limited_api=True, torch's BuildExtension
    # defines it as CPython 3.10's version (the abi3 tag below) and stops
    # linking libtorch_python, torch's Python bindings.
]


def ext_modules_and_commands():
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    module = CppExtension(
        "extending_pytorch_stable._C",
        # Relative to this directory: the source lives with the other C++.
        ["../csrc/stable/triplet_stable.cpp"],
        extra_compile_args={"cxx": CXX_FLAGS},
        py_limited_api=True,
    )
    return [module], {"build_ext": BuildExtension}


ext_modules, cmdclass = ext_modules_and_commands()
setup(
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
