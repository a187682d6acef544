"""Builds the C++ (and CUDA) extensions of extending_pytorch.

The package's metadata is in pyproject.toml. From the repository root:

    pip install --no-build-isolation -e extensions

--no-build-isolation builds against the torch already installed, the one the
extensions will be loaded into. The extensions use torch's C++ API, whose ABI
changes between torch versions, so a build works with that torch only: the
build records its version next to the library (_build_info.json), and
extending_pytorch.native refuses to load it into another one. Set EXTENDING_PYTORCH_SKIP_NATIVE=1 to install
the pure-Python part only (no compiler needed; `make book` does this).
"""

import importlib.util
import json
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
    # CUDA kernels need a CUDA build of torch and the CUDA toolkit (nvcc); by
    # default they are built only where a GPU can run them (build_flags.CUDA_SWITCH).
    with_cuda = flags.build_cuda(torch.version.cuda, CUDA_HOME, torch.cuda.device_count())
    if with_cuda:
        # Without a visible GPU and without TORCH_CUDA_ARCH_LIST, torch cannot
        # pick architectures (and crashes trying): build for the book's list.
        flags.use_default_cuda_arch_list(torch.cuda.device_count())

    class BuildWithInfo(BuildExtension):
        """Records the torch the extensions were built against, beside them.

        Also picks the CPU flags: this CPU's (AVX2) for an editable or
        in-place build, portable ones for a wheel (build_flags.portable_build).
        """

        def choose_cpu_flags(self) -> bool:
            local = bool(self.inplace or getattr(self, "editable_mode", False))
            portable = flags.portable_build(local)
            for ext in self.distribution.ext_modules:
                ext.extra_compile_args["cxx"] = flags.cxx_flags(portable=portable)
            return portable

        def run(self):
            self.choose_cpu_flags()
            super().run()
            for ext in self.extensions:
                path = pathlib.Path(self.get_ext_fullpath(ext.name))
                info = {
                    "torch": torch.__version__,
                    "cuda": torch.version.cuda if with_cuda else None,
                    "cuda_arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST")
                    if with_cuda
                    else None,
                }
                (path.parent / "_build_info.json").write_text(
                    json.dumps(info, indent=1) + "\n"
                )
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
    return modules, {"build_ext": BuildWithInfo}


ext_modules, cmdclass = ext_modules_and_commands()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
