"""Builds the C++ (and CUDA) extensions of extending_pytorch.

The package's metadata is in pyproject.toml. From the repository root:

    pip install --no-build-isolation -e extensions

--no-build-isolation builds against the torch already installed, the one the
extensions will be loaded into. Set EXTENDING_PYTORCH_SKIP_NATIVE=1 to install
the pure-Python part only (no compiler needed; `make book` does this).
"""

import importlib.util
import os
import pathlib

from setuptools import setup

HERE = pathlib.Path(__file__).parent


def build_flags():
    # Load build_flags.py by path: importing the package would need it built.
    path = HERE / "extending_pytorch" / "build_flags.py"
    spec = importlib.util.spec_from_file_location("build_flags", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ext_modules_and_commands():
    if os.environ.get("EXTENDING_PYTORCH_SKIP_NATIVE") == "1":
        return [], {}
    import torch
    from torch.utils.cpp_extension import (
        CUDA_HOME,
        BuildExtension,
        CppExtension,
        CUDAExtension,
    )

    flags = build_flags()
    # CUDA kernels need a CUDA build of torch and the CUDA toolkit (nvcc).
    with_cuda = torch.version.cuda is not None and CUDA_HOME is not None
    modules = []
    for name, sources in flags.SOURCES.items():
        if with_cuda and name in flags.CUDA_SOURCES:
            modules.append(
                CUDAExtension(
                    f"extending_pytorch.{name}",
                    sources + flags.CUDA_SOURCES[name],
                    extra_compile_args={
                        "cxx": flags.cxx_flags(),
                        "nvcc": flags.nvcc_flags(),
                    },
                )
            )
        else:
            modules.append(
                CppExtension(
                    f"extending_pytorch.{name}",
                    sources,
                    extra_compile_args={"cxx": flags.cxx_flags()},
                )
            )
    return modules, {"build_ext": BuildExtension}


ext_modules, cmdclass = ext_modules_and_commands()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
