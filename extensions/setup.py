"""Builds the C++ extensions of extending_pytorch (metadata is in pyproject.toml).

    pip install --no-build-isolation -e extensions     # from the repository root

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
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    flags = build_flags()
    modules = [
        CppExtension(
            f"extending_pytorch.{name}",
            sources,
            extra_compile_args={"cxx": flags.cxx_flags()},
        )
        for name, sources in flags.SOURCES.items()
    ]
    return modules, {"build_ext": BuildExtension}


ext_modules, cmdclass = ext_modules_and_commands()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
