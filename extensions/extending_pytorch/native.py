"""Load the C++ extensions: built ahead of time by setup.py, or just in time.

- `load_ops()` loads the TORCH_LIBRARY operators (`extending_pytorch._C`),
  which `pip install --no-build-isolation -e extensions` (or `make build`)
  compiled ahead of time. If they are missing, or were built against another
  torch, it says how to build them.
- `load_jit(name)` compiles an extension from the same sources with
  `torch.utils.cpp_extension.load`, into extensions/build/jit/<name>. The
  first call compiles; later calls with unchanged sources only load.

The operators can be registered once per process: a second library defining
`TORCH_LIBRARY(extending_pytorch, ...)` aborts the process when it loads. So
`load_jit("_C")` refuses when the operators are already registered (by the
ahead-of-time library, say), and `load_ops()` does nothing after
`load_jit("_C")`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pathlib

from extending_pytorch import build_flags

BUILD_HINT = (
    "Build them from the repository root with `make build`, or with\n"
    "    pip install --no-build-isolation -e extensions\n"
    "(this needs a C++ compiler; on Colab, run the notebook's first cell)."
)

# The operator every build of _C defines: its presence means _C is loaded.
MARKER_OP = "extending_pytorch::triplet_hinge_loss"

_ops_loaded = False


def operators_registered() -> bool:
    """Whether some library already registered the extending_pytorch operators."""
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(MARKER_OP, "")
    except RuntimeError:
        return False
    return True


def build_info(module: str = "extending_pytorch._C") -> dict | None:
    """What setup.py recorded beside a built extension, or None."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    path = pathlib.Path(spec.origin).with_name("_build_info.json")
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def check_built_for_this_torch(info: dict | None) -> None:
    """Refuse a library built against another torch, with the fix.

    torch's C++ ABI is not stable between versions: such a library fails to
    load with an 'undefined symbol' error, or loads and misbehaves.
    """
    import torch

    if info is None or info.get("torch") == torch.__version__:
        return
    raise RuntimeError(
        "The C++ operators of extending_pytorch were built against torch "
        f"{info.get('torch')}, but torch {torch.__version__} is running. They use "
        "torch's C++ API, whose ABI changes between versions, so they must be "
        f"rebuilt for this torch.\n{BUILD_HINT}"
    )


def load_ops() -> None:
    """Load the C++ operators into torch.ops.extending_pytorch, once."""
    global _ops_loaded
    if _ops_loaded or operators_registered():
        _ops_loaded = True
        return
    if importlib.util.find_spec("extending_pytorch._C") is None:
        raise RuntimeError(
            "The C++ operators of extending_pytorch are not built (no module "
            f"extending_pytorch._C).\n{BUILD_HINT}"
        )
    check_built_for_this_torch(build_info())
    try:
        importlib.import_module("extending_pytorch._C")
    except ImportError as error:
        raise RuntimeError(
            "The C++ operators of extending_pytorch could not be loaded "
            f"({error}).\n{BUILD_HINT}"
        ) from error
    _ops_loaded = True


def jit_build_directory(name: str):
    """Where `load_jit` builds: inside the repository, ignored by git; one
    directory per torch build (2.13.0+cpu, 2.13.0+cu130, ...), whose libraries
    differ and cannot be shared."""
    import torch

    variant = torch.__version__.replace("+", "-")
    return build_flags.EXTENSIONS_DIR / "build" / "jit" / f"{name}-{variant}"


def load_jit(name: str, *, verbose=False):
    """Compile (if needed) and load extension `name` of build_flags.SOURCES.

    The module is built and imported under `name` itself (its source defines
    PyInit_<name>), as a top-level module, so it never shadows the ahead-of-time
    build `extending_pytorch.<name>`.
    """
    import torch
    from torch.utils.cpp_extension import load

    if name not in build_flags.SOURCES:
        raise ValueError(
            f"name must be one of {sorted(build_flags.SOURCES)}, got {name!r}"
        )
    if name == "_C" and operators_registered():
        raise RuntimeError(
            "load_jit('_C'): the extending_pytorch operators are already "
            "registered in this process (by the ahead-of-time build, imported "
            "by extending_pytorch.ops, or by an earlier load_jit). A library "
            "can define them only once per process; a second one would abort "
            "it. Use them as they are, or call load_jit('_C') in a fresh "
            "process before importing extending_pytorch.ops."
        )
    directory = jit_build_directory(name)
    directory.mkdir(parents=True, exist_ok=True)
    sources = list(build_flags.SOURCES[name])
    if with_cuda():
        sources += build_flags.CUDA_SOURCES.get(name, [])
        build_flags.use_default_cuda_arch_list(torch.cuda.device_count())
    module = load(
        name=name,
        sources=[str(build_flags.EXTENSIONS_DIR / s) for s in sources],
        extra_cflags=build_flags.cxx_flags(),
        extra_cuda_cflags=build_flags.nvcc_flags(),
        build_directory=str(directory),
        verbose=verbose,
    )
    if name == "_C":
        global _ops_loaded
        _ops_loaded = True
    return module


def with_cuda() -> bool:
    """Whether builds include the CUDA kernels (build_flags.build_cuda)."""
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    return build_flags.build_cuda(torch.version.cuda, CUDA_HOME, torch.cuda.device_count())


def precompiled_header(header: str, like: pathlib.Path, *, root: pathlib.Path | None = None) -> list[str]:
    """Include paths that make g++ read `header` precompiled (g++'s `<header>.gch`).

    `like` is the directory of a finished `torch.utils.cpp_extension` build (load or load_inline):
    the header is compiled once with the compiler and flags of its build.ninja, less its
    -DTORCH_EXTENSION_NAME, which names one library. Pass the result in `extra_include_paths` of a
    later build with those flags: g++ looks for `<header>.gch` in each include directory before the
    header itself, and uses it when the source's first #include is `header` and the flags match
    (or else reads the header as usual: the result is the same, only slower). ATen/ATen.h is most
    of a small operator's 10-20 s build; precompiled, that build takes a few seconds.

    g++ on Linux only; anywhere else it returns [] (clang does not look for .gch files in the
    include path). One copy per compiler and flags, under `root` (default extensions/build/pch/),
    where copies for other flags are removed (each is some 400 MB).
    """
    import fcntl
    import hashlib
    import os
    import shlex
    import shutil
    import subprocess
    import sys

    from torch.utils.cpp_extension import include_paths

    ninja = {}
    for line in (pathlib.Path(like) / "build.ninja").read_text().splitlines():
        key, _, value = line.partition(" = ")
        if key in ("cxx", "cflags"):
            ninja[key] = value
    if set(ninja) != {"cxx", "cflags"}:
        raise ValueError(f"like: {like} holds no build.ninja of a finished C++ build (no cxx or cflags line)")
    if not sys.platform.startswith("linux"):
        return []
    version = subprocess.run([ninja["cxx"], "--version"], capture_output=True, text=True).stdout
    if "Free Software Foundation" not in version:  # g++ says so; clang does not
        return []
    root = pathlib.Path(root or build_flags.EXTENSIONS_DIR / "build" / "pch")
    flags = [  # less the name, and less this function's own directories (in a later build's flags)
        flag for flag in shlex.split(ninja["cflags"])
        if not flag.startswith(("-DTORCH_EXTENSION_NAME=", f"-I{root}"))
    ]
    command = [ninja["cxx"], *flags, "-x", "c++-header"]
    key = hashlib.sha256("\0".join([header, *command]).encode()).hexdigest()[:12]
    directory = root / key
    target = directory / f"{header}.gch"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a waiting one finds the copy built
        if not target.exists():
            for other in root.iterdir():
                if other.is_dir():
                    shutil.rmtree(other)
            source = next(
                (pathlib.Path(d) / header for d in include_paths() if (pathlib.Path(d) / header).exists()),
                None,
            )
            if source is None:
                raise ValueError(f"header: {header} is not in torch's include directories")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            subprocess.run([*command, str(source), "-o", str(partial)], check=True, capture_output=True)
            os.replace(partial, target)
    return [str(directory)]
