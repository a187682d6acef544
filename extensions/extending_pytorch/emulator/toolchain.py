"""The emulator's build toolchain: g++, CUDA's half-precision headers, the
build modes (their flags and the sanitizer runtimes their workers preload),
and the builds, cached by content: a reader's kernels with g++ alone (their
library needs no torch, so neither does the worker that loads it), the book's
through torch.utils.cpp_extension.load."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

from extending_pytorch import build_flags

MODES = ("fast", "memory", "races")
# ... and the build of emulator.traffic(), the counter (fast mode's checks, and every
# global-memory access counted): not a mode a call names, the counter chooses it.
BUILD_MODES = (*MODES, "traffic")
SCHEDULES = ("forward", "reverse", "random", "independent")

SIMT_DIR = build_flags.CSRC / "simt"
BUILD_ROOT = build_flags.EXTENSIONS_DIR / "build" / "emulator"
# Where the book's kernels are read from; a test may point it at a copy.
CSRC_ENV = "EXTENDING_PYTORCH_EMULATOR_CSRC"
# Seconds a call may take before the worker is stopped (an endless loop).
DEFAULT_TIMEOUT = 600.0


class EmulatorUnavailable(RuntimeError):
    """The emulator cannot build here (no g++, or no CUDA half-precision headers)."""


# ---- What a build needs --------------------------------------------------------

_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_runtime_api.h", "vector_types.h")


def _include_candidates() -> list[pathlib.Path]:
    candidates = []
    # The CUDA build of torch depends on NVIDIA's wheels: nvidia/cu13/include
    # (CUDA 13), nvidia/cuda_runtime/include (CUDA 12).
    for entry in sys.path:
        nvidia = pathlib.Path(entry or ".") / "nvidia"
        if nvidia.is_dir():
            candidates += sorted(nvidia.glob("cu*/include"), reverse=True)
            candidates.append(nvidia / "cuda_runtime" / "include")
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(pathlib.Path(os.environ[variable]) / "include")
    candidates.append(pathlib.Path("/usr/local/cuda/include"))
    return candidates


def _include_kind(directory: pathlib.Path) -> str:
    """What a candidate directory is, in words and without a machine path."""
    if directory.parent.parent.name == "nvidia":
        return f"the NVIDIA pip package's headers (nvidia/{directory.parent.name}/include)"
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable) and directory == pathlib.Path(os.environ[variable]) / "include":
            return f"the CUDA toolkit's headers (${variable}/include)"
    if directory == pathlib.Path("/usr/local/cuda/include"):
        return "the CUDA toolkit's headers"
    return f"the headers in .../{directory.name}"


# (compiler, directory) -> why the headers do not preprocess there, or "" where they do.
_include_checks: dict[tuple[str, str], str] = {}


def _include_problem(directory: pathlib.Path) -> str:
    """Why `directory` cannot serve the emulator's builds, or "" where it can.

    Not only the named headers: everything they include must be there too
    (torch's CUDA 13 wheel has a cuda_fp16.h that includes <nv/target>, and no
    nv/target). The preprocessor, with the emulator's own include directories
    and flags in front, says so; the answer is kept for the session.
    """
    if not directory.is_dir():
        return "does not exist"
    missing = [h for h in _HEADERS if not (directory / h).is_file()]
    if missing:
        return "has no " + ", ".join(missing)
    key = (_compiler(), str(directory.resolve()))
    if key not in _include_checks:
        result = subprocess.run(
            [key[0], "-E", "-x", "c++", *_mode_flags("fast")[0],
             f"-I{SIMT_DIR / 'include'}", f"-I{SIMT_DIR}", f"-I{key[1]}", "-", "-o", os.devnull],
            input="".join(f"#include <{h}>\n" for h in _HEADERS),
            capture_output=True,
            text=True,
        )
        problem = ""
        if result.returncode != 0:
            # g++: "x.h:1:10: fatal error: nv/target: No such file or directory";
            # clang: "x.h:1:10: fatal error: 'nv/target' file not found".
            found = re.search(
                r"^(.*?):\d+:\d+: fatal error: '?([^':]+?)'?"
                r"(?:: No such file or directory| file not found)",
                result.stderr,
                re.MULTILINE,
            )
            if found:
                problem = f"{pathlib.Path(found[1]).name} includes <{found[2]}>, which is missing"
            else:
                errors = [line for line in result.stderr.splitlines() if "error" in line]
                problem = "its headers do not preprocess: " + (errors or ["(no message)"])[0]
        _include_checks[key] = problem
    return _include_checks[key]


def _choose_include_dir() -> tuple[pathlib.Path, list[tuple[pathlib.Path, str]]]:
    """The first complete candidate, and (candidate, reason) for each skipped before it."""
    skipped = []
    for directory in dict.fromkeys(_include_candidates()):
        problem = _include_problem(directory)
        if not problem:
            return directory, skipped
        skipped.append((directory, problem))
    looked = "\n  ".join(f"{d} ({problem})" for d, problem in skipped)
    raise EmulatorUnavailable(
        "The SIMT emulator needs CUDA's half-precision headers (cuda_fp16.h, "
        "cuda_bf16.h, cuda_runtime_api.h, and every header they include; no GPU "
        "and no nvcc), and found no directory with all of them. They come with "
        "the CUDA build of torch (the nvidia-cuda-runtime pip package) or the "
        "CUDA toolkit. Looked in:\n  " + looked
    )


def cuda_include_dir() -> pathlib.Path:
    """The directory with CUDA's cuda_fp16.h, cuda_bf16.h and cuda_runtime_api.h.

    Looked for in NVIDIA's pip packages first (they come with the CUDA build
    of torch), then $CUDA_HOME/include and /usr/local/cuda/include; the first
    where those headers and every header they include preprocess is taken (a
    pip package can ship cuda_fp16.h without the nv/target it includes).
    Raises EmulatorUnavailable, saying where it looked and what each lacked,
    if none has them all. cuda_include_description() says which, in words.
    """
    return _choose_include_dir()[0].resolve()


def cuda_include_description() -> str:
    """Which headers the emulator uses, and why earlier candidates were skipped.

    In words, without machine paths (so a notebook can print it), e.g. "the
    CUDA toolkit's headers ($CUDA_HOME/include); skipped: the NVIDIA pip
    package's headers (nvidia/cu13/include): cuda_fp16.h includes
    <nv/target>, which is missing". The path is cuda_include_dir(). Raises
    EmulatorUnavailable like cuda_include_dir().
    """
    directory, skipped = _choose_include_dir()
    # Those with the named headers only: a pip environment has many nvidia/cu*/include.
    incomplete = [(d, why) for d, why in skipped if all((d / h).is_file() for h in _HEADERS)]
    text = _include_kind(directory)
    if incomplete:
        text += "; skipped: " + "; ".join(f"{_include_kind(d)}: {why}" for d, why in incomplete)
    return text


def _cxx() -> str:
    """The compiler the builds run: torch.utils.cpp_extension.get_cxx_compiler()'s choice
    ($CXX, else c++) on Linux, without importing torch."""
    return os.environ.get("CXX", "c++")


def _compiler() -> str:
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("g++")
    if compiler is None:
        raise EmulatorUnavailable("The SIMT emulator needs g++ (GCC 11 or newer), and found none.")
    return compiler


def available() -> bool:
    """Whether the emulator can build here."""
    try:
        cuda_include_dir()
        _compiler()
    except EmulatorUnavailable:
        return False
    return True


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def _check_build_mode(mode: str) -> None:
    if mode not in BUILD_MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def _mode_flags(mode: str) -> tuple[list[str], list[str]]:
    """Compiler and linker flags of a build mode."""
    common = [
        f"-std={build_flags.CXX_STANDARD}",
        "-ffp-contract=off",  # as ISO C++ says; nvcc would contract a*b+c into an FMA
        "-Wno-unknown-pragmas",  # #pragma unroll
        "-Wno-attributes",
        # <memory> first in every translation unit: libstdc++ spells an attribute
        # __attribute__((__noinline__)), which CUDA's headers' (and simt.h's) __noinline__
        # macro breaks once defined; read first, a later #include <memory> is a no-op.
        "-include", "memory",
    ]
    if mode == "fast":
        return common + ["-O2"], []
    if mode == "traffic":
        # ThreadSanitizer's instrumentation (a call before each load and store), linked
        # without its runtime: csrc/simt/traffic.h defines the calls (see traffic.py).
        # -fno-tree-sra: a copy of a 16-byte struct (triplet.cu's Pack) stays one 16-byte
        # access, as nvcc's vector load is one instruction; split, two 8-byte loads at two
        # instructions would count each sector twice.
        instrument = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0",
                      "-fno-tree-sra"]
        return common + ["-O2", "-DSIMT_TRAFFIC", *instrument], []
    if mode == "memory":
        sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
        return common + ["-O1", "-g", "-fno-omit-frame-pointer", *sanitize], sanitize
    sanitize = ["-fsanitize=thread"]
    return common + ["-O1", "-g", *sanitize], sanitize


# AddressSanitizer prints this once in every process that switches stacks with swapcontext, as
# the emulator's fibers do: a caution about the method (csrc/simt/README.md), not a report, and
# it names the worker's process id. Reports still fail the call.
_ASAN_FIBER_WARNING = re.compile(
    rb"^==\d+==WARNING: ASan doesn't fully support makecontext/swapcontext[^\n]*\n", re.MULTILINE
)


def _runtime_library(mode: str) -> str | None:
    """The sanitizer runtime a worker must preload, or None."""
    if mode in ("fast", "traffic"):
        return None
    name = "libasan.so" if mode == "memory" else "libtsan.so"
    found = subprocess.run(
        [_compiler(), f"-print-file-name={name}"], capture_output=True, text=True
    ).stdout.strip()
    if not found or not os.path.isabs(found) or not os.path.exists(found):
        raise EmulatorUnavailable(
            f"mode {mode!r} needs the sanitizer runtime {name}, which {_compiler()} does not have"
        )
    return os.path.realpath(found)


def _sanitizer_env(mode: str) -> dict[str, str]:
    env = {}
    library = _runtime_library(mode)
    if library:
        # libstdc++ right after the sanitizer: Python itself does not load it,
        # and AddressSanitizer's interceptor of __cxa_throw (a C++ exception,
        # how the emulator reports) needs it loaded when it starts.
        stdcxx = subprocess.run(
            [_compiler(), "-print-file-name=libstdc++.so"], capture_output=True, text=True
        ).stdout.strip()
        preload = [library] + ([os.path.realpath(stdcxx)] if os.path.isabs(stdcxx) else [])
        env["LD_PRELOAD"] = ":".join(preload)
    if mode == "memory":
        env["ASAN_OPTIONS"] = (
            "detect_leaks=0:halt_on_error=1:symbolize=1:detect_odr_violation=0:"
            "allocator_may_return_null=1"
        )
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    if mode == "races":
        env["TSAN_OPTIONS"] = "halt_on_error=1:report_signal_unsafe=0:exitcode=66"
    return env


def _torch_variant() -> str:
    import torch

    return torch.__version__.replace("+", "-")


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def _simt_files() -> list[pathlib.Path]:
    return sorted(p for p in SIMT_DIR.rglob("*") if p.is_file() and p.suffix in (".h", ".cpp"))


def _write_if_changed(path: pathlib.Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _runtime_object(mode: str) -> pathlib.Path:
    """simt.h's runtime compiled for `mode` (runtime.cpp), once per build of the emulator's
    sources: every module of that mode links it instead of compiling the runtime again
    (about three quarters of a small kernel's build in memory mode)."""
    cflags, _ = _mode_flags(mode)
    include = cuda_include_dir()
    compiler = _cxx()  # the compiler torch's load() compiles the book's modules with
    key = _digest(mode, cflags, include, compiler,
                  *(f"{p}\n{p.read_text()}" for p in _simt_files()))[:16]
    directory = BUILD_ROOT / mode  # it does not depend on torch
    target = directory / f"runtime-{key}.o"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f"runtime-{key}.{os.getpid()}.o"  # two processes may build at once
    command = [compiler, "-fPIC", *cflags, "-DSIMT_SEPARATE_RUNTIME",
               f"-I{SIMT_DIR / 'include'}", f"-I{SIMT_DIR}", f"-I{include}",
               "-c", str(SIMT_DIR / "runtime.cpp"), "-o", str(partial)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        log = directory / f"runtime-{key}-error.log"
        log.write_text(" ".join(command) + "\n" + result.stdout + result.stderr)
        raise RuntimeError(summarize_build_error(result.stdout + result.stderr, mode, log))
    os.replace(partial, target)
    return target


def _load_extension(name, sources, mode, include_dirs, directory, python_module=True):
    from torch.utils.cpp_extension import load

    cflags, ldflags = _mode_flags(mode)
    # simt.h's runtime, compiled once for the mode, linked into this module.
    cflags = [*cflags, "-DSIMT_SEPARATE_RUNTIME"]
    ldflags = [str(_runtime_object(mode)), *ldflags]
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return load(
            name=name,
            sources=[str(s) for s in sources],
            extra_cflags=cflags,
            extra_ldflags=ldflags,
            extra_include_paths=[str(d) for d in include_dirs],
            build_directory=str(directory),
            is_python_module=python_module,
            verbose=os.environ.get("EXTENDING_PYTORCH_EMULATOR_VERBOSE") == "1",
        )
    except RuntimeError as error:
        if "Error building extension" not in str(error):
            raise
        log = directory / "build-error.log"
        log.write_text(str(error))
        raise RuntimeError(summarize_build_error(str(error), mode, log)) from None


def _build_library(name, source, mode, include_dirs, directory, with_torch=False) -> pathlib.Path:
    """directory/name.so: one C++ source built for `mode` with the compiler alone and
    linked with simt.h's runtime; with torch's headers and libraries only `with_torch`
    (the worker loads it with ctypes, torch first where it links torch). Rebuilt where it
    is missing, or older than the source or a header the compiler read (its dependency
    file lists them, as ninja's would)."""
    cflags, ldflags = _mode_flags(mode)
    if with_torch:
        cflags, ldflags = [*cflags, *_torch_flags()[0]], [*ldflags, *_torch_flags()[1]]
    target, dependencies = directory / f"{name}.so", directory / f"{name}.d"
    if _up_to_date(target, dependencies):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f"{name}.{os.getpid()}"  # two processes may build at once
    # Compiled, then linked: the counting build's -fsanitize=thread instruments the code
    # but must not link ThreadSanitizer's runtime (its ldflags say what to link).
    compile_command = [_cxx(), "-fPIC", *cflags, "-DSIMT_SEPARATE_RUNTIME",
                       *(f"-I{d}" for d in include_dirs), "-MMD", "-MF", f"{partial}.d",
                       "-c", str(source), "-o", f"{partial}.o"]
    link_command = [_cxx(), "-shared", f"{partial}.o", str(_runtime_object(mode)), *ldflags,
                    "-o", f"{partial}.so"]
    for command in (compile_command, link_command):
        if os.environ.get("EXTENDING_PYTORCH_EMULATOR_VERBOSE") == "1":
            print(" ".join(command), file=sys.stderr)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            log = directory / "build-error.log"
            log.write_text(" ".join(command) + "\n" + result.stdout + result.stderr)
            raise RuntimeError(summarize_build_error(result.stdout + result.stderr, mode, log))
    os.remove(f"{partial}.o")
    os.replace(f"{partial}.d", dependencies)
    os.replace(f"{partial}.so", target)
    return target


def _torch_flags() -> tuple[list[str], list[str]]:
    """Compiler and linker flags of a source that includes torch's headers, as
    torch.utils.cpp_extension.load would give it (its include and library paths, the
    C++ ABI, Python's headers) for a library that is not a Python module."""
    import sysconfig

    import torch
    from torch.utils.cpp_extension import include_paths, library_paths

    cflags = [*(f"-isystem{p}" for p in include_paths()), f"-isystem{sysconfig.get_paths()['include']}",
              f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"]
    libraries = ["c10", "torch_cpu", "torch", "torch_python"]
    # A CUDA build of torch: its CUDA libraries too (host code that asks for the current
    # stream links c10_cuda; importing torch loads them anyway, GPU or not).
    libraries += [name for name in ("c10_cuda", "torch_cuda")
                  if any((pathlib.Path(p) / f"lib{name}.so").exists() for p in library_paths())]
    ldflags = [*(f"-L{p}" for p in library_paths()), *(f"-Wl,-rpath,{p}" for p in library_paths()),
               *(f"-l{name}" for name in libraries)]
    return cflags, ldflags


def _up_to_date(target: pathlib.Path, dependencies: pathlib.Path) -> bool:
    """Whether `target` exists and is newer than every file its dependency file names."""
    if not target.exists() or not dependencies.exists():
        return False
    # "target: a.cpp b.h \<newline> c.h", a space in a name escaped with a backslash.
    text = dependencies.read_text().replace("\\\n", " ")
    names = re.split(r"(?<!\\)\s+", text.split(": ", 1)[-1].strip())
    built = target.stat().st_mtime
    for name in filter(None, names):
        path = pathlib.Path(name.replace("\\ ", " "))
        if not path.exists() or path.stat().st_mtime > built:
            return False
    return True


# What a first compiler error usually means on the emulator, and what to do.
_BUILD_HINTS = [
    (r"__shared__ variables are supported inside functions only",
     "the emulator rewrites __shared__ declarations inside functions of the .cu file it is "
     "given and of the headers it includes with quotes (found next to the file including "
     "them); one at namespace scope, or in a header included with <...> or found elsewhere, "
     "is not rewritten: move it into a function, or include its header with quotes"),
    (r"(mma\.h|wmma|__hmma|cp\.async|cuda/pipeline|cuda/barrier|cute/|cutlass/)",
     "tensor cores, cp.async, TMA and CUTLASS/CuTe are not emulated"),
    (r"(cub/|thrust/|cuda/std/)",
     "CUB, Thrust and libcu++ are not available to the emulator (they need nvcc's own headers)"),
    (r"No such file or directory",
     "the emulator looks for #include files next to the source, in its own stand-ins "
     "(extensions/csrc/simt/include) and in CUDA's include directory (emulator.cuda_include_description())"),
    (r"[‘'](__\w+|atomic\w+|\w+_sync|\w+_block|\w+_system)[’'] was not declared in this scope",
     "a CUDA intrinsic the emulator does not provide (simt.h lists those it has, under "
     "'Device functions that have a plain host meaning')"),
    (r"no such instruction|unknown instruction|invalid instruction|\basm\b",
     "PTX inline assembly (asm volatile(...)) cannot run on the CPU"),
]


def summarize_build_error(text: str, mode: str, log: pathlib.Path) -> str:
    """A compiler failure in a few lines: the first error with its context (it names the
    .cu file and line: the rewrite keeps them), what it usually means on the emulator,
    how many more errors there were, and where the whole output is."""
    import re

    lines = text.splitlines()
    error_line = re.compile(r":\d+:(\d+:)? (fatal )?error:", re.I)
    first = next((i for i, line in enumerate(lines) if error_line.search(line)), None)
    errors = sum(1 for line in lines if error_line.search(line))
    if first is None:  # no compiler error: a link error or ninja's own
        first = next((i for i, line in enumerate(lines) if "error" in line.lower()), 0)
    context = [lines[first]]
    for line in lines[first + 1 : first + 6]:
        if re.search(r":\d+:(\d+:)? |^ninja:|^FAILED:|^\[\d+/\d+\]|^In file included from|^\s+from ",
                     line):
            break
        context.append(line)
    # The "In file included from ..." lines just before it say where the header came from.
    included = [line for line in lines[max(0, first - 4) : first] if "included from" in line]
    hints = [hint for pattern, hint in _BUILD_HINTS if re.search(pattern, "\n".join(context))]
    message = [f"The emulator's build ({mode} mode) failed. The first compiler error:", *included,
               *context]
    if hints:
        message.append(f"On the emulator this usually means: {hints[0]}.")
    if errors > 1:
        message.append(f"({errors - 1} more error{'s' if errors > 2 else ''}.)")
    message.append(f"The whole compiler output: {log}")
    return "\n".join(message)

