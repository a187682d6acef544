"""Load the C++ extensions: built ahead of time by setup.py, or just in time.

- `load_ops()` loads the TORCH_LIBRARY operators (`extending_pytorch._C`),
  which `pip install --no-build-isolation -e extensions` (or `make build`)
  compiled ahead of time. If they are missing, it says how to build them.
- `load_jit(name)` compiles an extension from the same sources with
  `torch.utils.cpp_extension.load`, into extensions/build/jit/<name>. The
  first call compiles; later calls with unchanged sources only load.
"""

from __future__ import annotations

import importlib

from extending_pytorch import build_flags

BUILD_HINT = (
    "Build them from the repository root with `make build`, or with\n"
    "    pip install --no-build-isolation -e extensions\n"
    "(this needs a C++ compiler; on Colab, run the notebook's first cell)."
)

_ops_loaded = False


def load_ops() -> None:
    """Load the C++ operators into torch.ops.extending_pytorch, once."""
    global _ops_loaded
    if _ops_loaded:
        return
    try:
        importlib.import_module("extending_pytorch._C")
    except ImportError as error:
        raise RuntimeError(
            "The C++ operators of extending_pytorch are not built "
            f"({error}).\n{BUILD_HINT}"
        ) from error
    _ops_loaded = True


def jit_build_directory(name: str):
    """Where `load_jit` builds: inside the repository, ignored by git."""
    return build_flags.EXTENSIONS_DIR / "build" / "jit" / name


def load_jit(name: str, *, module_name: str | None = None, verbose=False):
    """Compile (if needed) and load extension `name` of build_flags.SOURCES.

    `module_name` is the name the extension is built and imported under;
    it defaults to `name` without its leading underscore.
    """
    from torch.utils.cpp_extension import load

    if name not in build_flags.SOURCES:
        raise ValueError(
            f"name must be one of {sorted(build_flags.SOURCES)}, got {name!r}"
        )
    module_name = module_name or name.lstrip("_")
    directory = jit_build_directory(module_name)
    directory.mkdir(parents=True, exist_ok=True)
    sources = list(build_flags.SOURCES[name])
    if with_cuda():
        sources += build_flags.CUDA_SOURCES.get(name, [])
    return load(
        name=module_name,
        sources=[str(build_flags.EXTENSIONS_DIR / s) for s in sources],
        extra_cflags=build_flags.cxx_flags(),
        extra_cuda_cflags=build_flags.nvcc_flags(),
        build_directory=str(directory),
        verbose=verbose,
    )


def with_cuda() -> bool:
    """Whether builds include the CUDA kernels: torch and toolkit have CUDA."""
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    return torch.version.cuda is not None and CUDA_HOME is not None
