"""A cache of built stable wheels, keyed by what goes into one (listed below).

Not part of the wheel (pyproject.toml packages extending_pytorch_stable
only). `make test` builds the wheel twice otherwise: chapter 7 builds it to
show the build, and tests/test_stable_abi.py builds it to install it beside
two torches. The chapter stores the wheel it built; the test reuses it when
the key of the sources it would build is the same, and builds (and stores)
otherwise. The key hashes

- every file of the two source trees the build reads: the package directory
  (extensions/stable: setup.py, pyproject.toml, the Python package; not its
  build/ and *.egg-info outputs) and all of extensions/csrc (the stable
  sources include ../triplet_math.h and ../cuda/..., and a header that one of
  them includes may be anywhere in it);
- the tools that compile and link it: Python (version and ABI), torch
  (version, its CUDA version and git commit, and the path, size and mtime of
  every file under its include/ and lib/, so that a locally patched torch
  with the same version gets another key), setuptools and wheel, glibc's
  version, the path and `--version` of each compiler driver the build runs
  (CXX or c++ for the objects, the first word of LDCXXSHARED for the link,
  CC or gcc and g++ for nvcc's host compiler), the path and `--version` of the
  `ld` that the link driver runs, nvcc's `--version` and the CUDA toolkit
  setup.py would pick;
- the environment variables that setup.py, torch's build helpers,
  setuptools, GCC or nvcc read (BUILD_ENVIRONMENT), and the contents of the
  distutils configuration files setuptools reads besides the package's own
  (its system-wide distutils.cfg, ~/.pydistutils.cfg, DIST_EXTRA_CONFIG's).

A cached wheel is stale only if something outside that list changes what the
build produces: a system header or library (glibc's headers, libstdc++, the
CUDA toolkit's headers and libraries: only nvcc's version is hashed), a
compiler's internal files without a change in its `--version`, or ninja
(torch falls back to setuptools' compile path without it). Then remove
extensions/stable/build/wheel-cache.

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
# torch.utils.cpp_extension, setuptools' compiler (CC, CXX, the *FLAGS; a C++
# extension is linked with LDCXXSHARED, not LDSHARED), setuptools' extra
# configuration file (DIST_EXTRA_CONFIG), GCC (its header and library search
# paths, where it finds ld and its own programs) and nvcc itself (NVCC_*).
# PATH is not hashed but what the build finds on it: the compilers, the
# linker and the toolkit (toolchain()).
BUILD_ENVIRONMENT = (
    "EXTENDING_PYTORCH_STABLE_CUDA", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH",
    "CUDA_INC_PATH", "PYTORCH_NVCC", "TORCH_DONT_CHECK_COMPILER_ABI",
    "TORCH_NO_COMPILER_WRAPPER", "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS",
    "LDSHARED", "LDCXXSHARED", "AR", "ARFLAGS", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN", "CUDAHOSTCXX", "SETUPTOOLS_USE_DISTUTILS", "DIST_EXTRA_CONFIG",
    "CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "LIBRARY_PATH", "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
)


def _source_files(root: pathlib.Path):
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not any(
            part in NOT_SOURCES or part.endswith(".egg-info") for part in relative.parts
        ):
            yield relative, path


def _version_output(command: list[str], environ=os.environ) -> str:
    # Run with the environment the key is for (PATH, COMPILER_PATH, ...), as the build would.
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=dict(environ))
    except OSError as error:
        return f"not runnable: {error}"
    return result.stdout + result.stderr


def _which(program: str, environ) -> str | None:
    return shutil.which(program, path=environ.get("PATH", os.defpath))


def _tool(program: str, environ) -> list:
    """A program of the build as the key sees it: its path and its --version."""
    return [_which(program, environ), _version_output([program, "--version"], environ)]


def _link_driver(environ) -> str:
    """The program setuptools links a C++ extension with (the first word of
    LDCXXSHARED, from the environment or Python's build configuration)."""
    ldcxxshared = environ.get("LDCXXSHARED") or sysconfig.get_config_var("LDCXXSHARED") or "c++"
    return ldcxxshared.split()[0]


def _linker(driver: str, environ) -> list:
    """The ld that the link driver runs (GCC names it; a bare name is found on PATH)."""
    try:
        asked = subprocess.run([driver, "-print-prog-name=ld"], capture_output=True, text=True,
                               timeout=60, env=dict(environ))
        named = asked.stdout.strip() if asked.returncode == 0 and asked.stdout.strip() else "ld"
    except OSError:
        named = "ld"
    return _tool(named, environ)


def torch_files(torch_dir: pathlib.Path) -> str:
    """A digest of the path, size and mtime of every file under torch's
    include/ and lib/ (about 10,000 stat calls, a tenth of a second): the
    headers the build compiles against and the libraries it links."""
    digest = hashlib.sha256()
    for part in ("include", "lib"):
        for path in sorted((torch_dir / part).rglob("*")):
            if path.is_file():
                stat = path.stat()
                digest.update(f"{path.relative_to(torch_dir).as_posix()}\0{stat.st_size}\0"
                              f"{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _config_files(environ) -> dict:
    """The contents of the distutils configuration files setuptools reads
    besides the package's own setup.cfg (hashed as a source): None where absent."""
    import setuptools._distutils as distutils

    home = environ.get("HOME")
    paths = {
        "system": pathlib.Path(distutils.__file__).parent / "distutils.cfg",
        "user": pathlib.Path(home) / ".pydistutils.cfg" if home else None,
        "DIST_EXTRA_CONFIG": pathlib.Path(environ["DIST_EXTRA_CONFIG"])
        if environ.get("DIST_EXTRA_CONFIG") else None,
    }
    return {name: path.read_text(errors="replace") if path and path.is_file() else None
            for name, path in paths.items()}


def toolchain(stable_dir: pathlib.Path, environ=os.environ) -> dict:
    """The build's tools and settings, as the key sees them."""
    import torch

    spec = importlib.util.spec_from_file_location("stable_setup", stable_dir / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # setup() runs only as __main__
    cuda_home = setup.toolkit_home()
    compiler = environ.get("CXX") or "c++"
    driver = _link_driver(environ)
    # nvcc's host compiler: CC where torch passes it as -ccbin, else gcc and g++ from PATH.
    host = [environ["CC"]] if environ.get("CC") else ["gcc", "g++"]
    return {
        "python": [sys.version, sys.implementation.cache_tag, sysconfig.get_config_var("SOABI"),
                   sysconfig.get_platform()],
        "torch": [torch.__version__, torch.version.cuda, torch.version.git_version,
                  torch_files(pathlib.Path(torch.__file__).parent)],
        "packages": {name: importlib.metadata.version(name) for name in ("setuptools", "wheel")},
        "glibc": os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None,
        "compilers": {program: _tool(program, environ) for program in {compiler, driver, *host}},
        "ld": _linker(driver, environ),
        "cuda_home": cuda_home,
        "nvcc": _version_output([str(pathlib.Path(cuda_home) / "bin" / "nvcc"), "--version"],
                                environ)
        if cuda_home
        else None,
        "environment": {name: environ.get(name) for name in BUILD_ENVIRONMENT},
        "config_files": _config_files(environ),
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
