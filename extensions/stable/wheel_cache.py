"""A cache of built stable wheels, keyed by everything that goes into one.

Not part of the wheel (pyproject.toml packages extending_pytorch_stable
only). `make test` builds the wheel twice otherwise: chapter 7 builds it to
show the build, and tests/test_stable_abi.py builds it to install it beside
two torches. The chapter stores the wheel it built; the test reuses it when
the key of the sources it would build is the same, and builds (and stores)
otherwise. A cached wheel is never stale: the key hashes

- every file of the two source trees the build reads: the package directory
  (extensions/stable: setup.py, pyproject.toml, the Python package; not its
  build/ and *.egg-info outputs) and all of extensions/csrc (the stable
  sources include ../triplet_math.h and ../cuda/..., and a header that one of
  them includes may be anywhere in it);
- the tools that compile it: Python (version and ABI), torch (version, its
  CUDA version and git commit), setuptools and wheel, the C++ compiler's and
  nvcc's `--version`, and the CUDA toolkit setup.py would pick;
- the environment variables that setup.py, torch's build helpers,
  setuptools or nvcc read (BUILD_ENVIRONMENT), and the compiler found on PATH.

Each caller computes the key over the copy it builds from (both build from a
copy in a temporary directory), so no edit between hashing and compiling can
put a wheel under the key of other sources.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CACHE = HERE / "build" / "wheel-cache"

# What the build writes into the package directory, and bytecode: not sources.
NOT_SOURCES = ("build", "dist", "__pycache__")

# Read by setup.py (the CUDA switch, the GPU list, the toolkit),
# torch.utils.cpp_extension, setuptools' compiler (CC, CXX, the *FLAGS) and
# nvcc itself (NVCC_*). PATH is not hashed but what the build finds on it:
# the compiler and the toolkit (toolchain()).
BUILD_ENVIRONMENT = (
    "EXTENDING_PYTORCH_STABLE_CUDA", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH",
    "CUDA_INC_PATH", "PYTORCH_NVCC", "TORCH_DONT_CHECK_COMPILER_ABI",
    "TORCH_NO_COMPILER_WRAPPER", "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS",
    "LDSHARED", "AR", "ARFLAGS", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN",
    "CUDAHOSTCXX", "SETUPTOOLS_USE_DISTUTILS",
)


def _source_files(root: pathlib.Path):
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not any(
            part in NOT_SOURCES or part.endswith(".egg-info") for part in relative.parts
        ):
            yield relative, path


def _version_output(command: list[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except OSError as error:
        return f"not runnable: {error}"
    return result.stdout + result.stderr


def toolchain(stable_dir: pathlib.Path, environ=os.environ) -> dict:
    """The build's tools and settings, as the key sees them."""
    import torch

    spec = importlib.util.spec_from_file_location("stable_setup", stable_dir / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # setup() runs only as __main__
    cuda_home = setup.toolkit_home()
    compiler = environ.get("CXX") or "c++"
    return {
        "python": [sys.version, sys.implementation.cache_tag, sysconfig.get_config_var("SOABI"),
                   sysconfig.get_platform()],
        "torch": [torch.__version__, torch.version.cuda, torch.version.git_version],
        "packages": {name: importlib.metadata.version(name) for name in ("setuptools", "wheel")},
        "c++": [shutil.which(compiler), _version_output([compiler, "--version"])],
        "cuda_home": cuda_home,
        "nvcc": _version_output([str(pathlib.Path(cuda_home) / "bin" / "nvcc"), "--version"])
        if cuda_home
        else None,
        "environment": {name: environ.get(name) for name in BUILD_ENVIRONMENT},
    }


def key(stable_dir: pathlib.Path, csrc_dir: pathlib.Path, environ=os.environ) -> str:
    """The cache key of a wheel built from these two directories, here, now."""
    digest = hashlib.sha256()
    for label, root in (("stable", stable_dir), ("csrc", csrc_dir)):
        for relative, path in _source_files(pathlib.Path(root)):
            data = path.read_bytes()
            digest.update(f"{label}/{relative.as_posix()}\0{len(data)}\0".encode())
            digest.update(data)
    toolchain_json = json.dumps(toolchain(pathlib.Path(stable_dir), environ), sort_keys=True)
    digest.update(toolchain_json.encode())
    return digest.hexdigest()


def cached(wheel_key: str, cache: pathlib.Path = CACHE) -> pathlib.Path | None:
    """The wheel stored under this key, or None."""
    found = sorted((cache / wheel_key).glob("*.whl"))
    return found[0] if len(found) == 1 else None


# Wheels kept: the newest few keys (one per torch environment and setting in use).
KEEP = 4


def store(wheel: pathlib.Path, wheel_key: str, cache: pathlib.Path = CACHE) -> pathlib.Path:
    """Copies a built wheel into the cache under its key; returns the copy.

    The copy is written under a temporary name and renamed, so a reader never
    sees half a wheel. Keys older than the KEEP newest are removed."""
    directory = cache / wheel_key
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / wheel.name
    with tempfile.NamedTemporaryFile(dir=directory, suffix=".partial", delete=False) as partial:
        shutil.copyfile(wheel, partial.name)
    os.replace(partial.name, target)
    older = sorted((d for d in cache.iterdir() if d.is_dir() and d != directory),
                   key=lambda d: d.stat().st_mtime, reverse=True)
    for old_key in older[KEEP - 1:]:
        shutil.rmtree(old_key, ignore_errors=True)
    return target
