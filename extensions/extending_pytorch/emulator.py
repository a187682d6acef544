"""Run CUDA kernels on the CPU: the SIMT emulator (no GPU needed).

The emulator (extensions/csrc/simt/simt.h) compiles a kernel's .cu source,
unchanged, with g++: each thread of a block is a fiber, each collective
(__syncthreads, __syncwarp, shuffles, votes) waits until every thread it names
has arrived, and a broken rule is reported, never a hang: a lane that exits
or goes elsewhere while others wait for it, a shuffle that reads a lane
outside its mask, a barrier not every thread reaches, an invalid launch. Each
report names the .cu file:line, blockIdx and threadIdx, and arrives here as a
RuntimeError. Outputs are filled with a signalling-NaN pattern before a
launch, and an element a kernel left unwritten is reported too.

Three build modes:

- ``"fast"``: -O2, the emulator's own checks.
- ``"memory"``: -fsanitize=address,undefined: out-of-bounds reads and writes,
  misaligned (e.g. 16-byte vector) loads, other undefined behaviour.
- ``"races"``: -fsanitize=thread, with each GPU thread a ThreadSanitizer
  fiber: unsynchronised accesses of two threads to the same memory (a missing
  __syncthreads, two blocks writing one element).

and three schedules, the order in which blocks, and threads within a block,
run until their next collective: ``"forward"``, ``"reverse"`` and
``"random"`` (with ``seed``), so that order-dependent bugs show.

Every emulated call runs in a worker process, one per mode, started at the
first call: a sanitizer's runtime must be loaded before anything else
(LD_PRELOAD), and a kernel that crashes takes down the worker, not your
Python session; the crash report comes back as a RuntimeError.

The API:

- ``load_source(source, mode="fast")``: build your own .cu code (a string or
  a path); returns a module whose ``__global__`` functions launch like CUDA's
  ``kernel<<<grid, block>>>(args)``: ``module.kernel[grid, block](args)``,
  with CPU tensors for pointer parameters.
- ``triplet_hinge_loss``, ``triplet_forward``, ``triplet_backward``,
  ``involution``, ``involution_forward``, ``involution_backward``: the book's
  kernels (csrc/cuda/triplet.cu, involution.cu) through a binding that makes
  the same launch calls as the CUDA binding.
- ``available()`` / ``cuda_include_dir()``: whether the headers it needs are
  here (else calls raise ``EmulatorUnavailable``), and where;
  ``cuda_include_description()`` says which, in words (no machine path), and
  why the candidates before it were skipped.

Honest limits. g++ is not nvcc: floating-point results can differ in the last
bits (no FMA contraction; __CUDA_ARCH__ is undefined, so code under
``#ifdef __CUDA_ARCH__`` takes its host branch). There is no memory model
(threads switch only at collectives, so a missing __syncwarp or volatile can
go unnoticed outside "races" mode), no timing, no coalescing, registers or
occupancy, no tensor cores, cp.async or TMA. The emulator proves logic and
memory safety, never speed. It is also stricter than a GPU in places: lanes of
a warp must meet at the same collective call (Volta and later tolerate
different call sites with the same mask), and a thread that has exited may not
be waited for.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import pickle
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

from extending_pytorch import build_flags
from extending_pytorch.simt_rewrite import code_mask, rewrite

__all__ = [
    "MODES",
    "SCHEDULES",
    "EmulatorUnavailable",
    "available",
    "cuda_include_dir",
    "cuda_include_description",
    "load_source",
    "triplet_hinge_loss",
    "triplet_forward",
    "triplet_backward",
    "involution",
    "involution_forward",
    "involution_backward",
    "shutdown",
]

MODES = ("fast", "memory", "races")
SCHEDULES = ("forward", "reverse", "random")

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


def _mode_flags(mode: str) -> tuple[list[str], list[str]]:
    """Compiler and linker flags of a build mode."""
    common = [
        f"-std={build_flags.CXX_STANDARD}",
        "-ffp-contract=off",  # as ISO C++ says; nvcc would contract a*b+c into an FMA
        "-Wno-unknown-pragmas",  # #pragma unroll
        "-Wno-attributes",
    ]
    if mode == "fast":
        return common + ["-O2"], []
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
    if mode == "fast":
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


# ---- Builds (run in the worker) ------------------------------------------------------


def _load_extension(name, sources, mode, include_dirs, directory, python_module=True):
    from torch.utils.cpp_extension import load

    cflags, ldflags = _mode_flags(mode)
    directory.mkdir(parents=True, exist_ok=True)
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


def _book_module(mode: str, csrc: str | None):
    """Build (if needed) and load the book's kernels for `mode`."""
    csrc_dir = pathlib.Path(csrc or os.environ.get(CSRC_ENV) or build_flags.CSRC).resolve()
    include = cuda_include_dir()
    kernels = {k: csrc_dir / "cuda" / f"{k}.cu" for k in ("triplet", "involution")}
    rewritten = {k: rewrite(p.read_text(), str(p)) for k, p in kernels.items()}
    headers = sorted(csrc_dir.rglob("*.h"))
    key = _digest(
        mode,
        _mode_flags(mode),
        include,
        _torch_variant(),
        *(rewritten[k] for k in sorted(rewritten)),
        *(f"{h}\n{h.read_text()}" for h in headers),
        *(f"{p}\n{p.read_text()}" for p in _simt_files()),
    )[:16]
    directory = BUILD_ROOT / f"{mode}-{_torch_variant()}" / f"book-{key}"
    directory.mkdir(parents=True, exist_ok=True)
    sources = []
    for k, text in rewritten.items():
        path = directory / f"{k}_cu.cpp"
        _write_if_changed(path, text)
        sources.append(path)
    sources.append(SIMT_DIR / "book_launch.cpp")
    name = f"ep_simt_book_{mode}_{key}"
    _load_extension(
        name,
        sources,
        mode,
        # The kernels' own directory too: their quoted #includes are
        # relative to it, and the rewritten copies live elsewhere.
        [SIMT_DIR / "include", SIMT_DIR, csrc_dir / "cuda", csrc_dir, include],
        directory,
        python_module=False,
    )
    return _BookLibrary(directory / f"{name}.so")


def _dtype_code(dtype) -> int:
    import torch

    codes = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
    return codes[dtype]


def _check_written(t, kernel: str, output: str) -> None:
    """Every element of `t` must have been written (no poison left)."""
    if t.numel() == 0:
        return
    unwritten = _poison_view(t) == _poison_value(t)
    if unwritten.any():
        first = [int(i) for i in unwritten.nonzero()[0]]
        raise RuntimeError(
            f"simt: {kernel} left {int(unwritten.sum())} of the {t.numel()} elements of "
            f"{output} (shape {list(t.shape)}) unwritten, the first at {first}: they still "
            "hold the poison written before the launch"
        )


def _poisoned_empty(*shape, like):
    import torch

    t = torch.empty(shape, dtype=like.dtype)
    _poison_view(t).fill_(_poison_value(t))
    return t


class _BookLibrary:
    """The book's kernels in the worker: the torch side of triplet_cuda.cpp
    and involution_cuda.cpp (checks, allocation, reduction), in Python, around
    the launches of csrc/simt/book_launch.cpp."""

    def __init__(self, path: pathlib.Path):
        self.library = ctypes.CDLL(str(path))

    def configure(self, schedule, seed, max_blocks):
        self.library.simt_configure(
            ctypes.c_int(SCHEDULES.index(schedule)), ctypes.c_ulonglong(seed), ctypes.c_uint(max_blocks)
        )

    def _run(self, function, *args):
        error = ctypes.create_string_buffer(16384)
        fn = getattr(self.library, function)
        fn.restype = ctypes.c_int
        if fn(*args, error, ctypes.c_uint64(len(error))) != 0:
            raise RuntimeError(error.value.decode(errors="replace"))

    @staticmethod
    def _check_triplet(anchor, positive, negative, t1, t2, beta, reduction):
        import torch

        from extending_pytorch.reference import check_hyperparameters, check_triplet_inputs

        check_triplet_inputs(anchor, positive, negative)
        if anchor.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise TypeError(
                "anchor must have a floating-point dtype (float32, float64, float16 or "
                f"bfloat16), got {anchor.dtype}"
            )
        if anchor.device.type != "cpu":
            raise ValueError(f"the emulator runs on CPU tensors; anchor is on {anchor.device}")
        return check_hyperparameters(t1, t2, beta, reduction)

    def _triplet_args(self, anchor, positive, negative, t1, t2, beta):
        strides = (ctypes.c_int64 * 6)(*anchor.stride(), *positive.stride(), *negative.stride())
        return (
            ctypes.c_int(_dtype_code(anchor.dtype)),
            ctypes.c_void_p(anchor.data_ptr()),
            ctypes.c_void_p(positive.data_ptr()),
            ctypes.c_void_p(negative.data_ptr()),
            strides,
            ctypes.c_int64(anchor.size(0)),
            ctypes.c_int64(anchor.size(1)),
            ctypes.c_double(t1),
            ctypes.c_double(t2),
            ctypes.c_double(beta),
        )

    def triplet_forward(self, anchor, positive, negative, t1, t2, beta, reduction):
        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        per_triplet = _poisoned_empty(anchor.size(0), like=anchor)
        self._run("simt_triplet_forward", *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(per_triplet.data_ptr()))
        _check_written(per_triplet, "triplet_forward_kernel", "the per-triplet losses")
        if reduction == "none":
            return per_triplet
        return per_triplet.sum() if reduction == "sum" else per_triplet.mean()

    def triplet_backward(self, grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                         output_mask):
        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        batch, dim = anchor.shape
        expected = (batch,) if reduction == "none" else ()
        if grad_output.numel() != (batch if reduction == "none" else 1) or (
            reduction == "none" and tuple(grad_output.shape) != expected
        ):
            raise ValueError(
                f"grad_output must have shape {expected} for reduction={reduction!r}, got "
                f"{tuple(grad_output.shape)}"
            )
        if grad_output.dtype != anchor.dtype:
            raise TypeError(f"grad_output must have the dtype of anchor ({anchor.dtype}), got {grad_output.dtype}")
        grads = [_poisoned_empty(batch, dim, like=anchor) if needed else None for needed in output_mask]
        if not any(output_mask):
            return tuple(grads)
        g = grad_output.contiguous()
        scale = 1.0 / batch if reduction == "mean" and batch > 0 else 1.0
        pointer = lambda t: ctypes.c_void_p(t.data_ptr() if t is not None else None)  # noqa: E731
        self._run("simt_triplet_backward", *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(g.data_ptr()), ctypes.c_int(reduction == "none"),
                  ctypes.c_double(scale), *(pointer(t) for t in grads))
        for t, name in zip(grads, ("grad_anchor", "grad_positive", "grad_negative")):
            if t is not None:
                _check_written(t, "triplet_backward_kernel", name)
        return tuple(grads)

    @staticmethod
    def _involution_shape(op, input, weight, stride, padding, dilation):
        import torch

        if input.dim() != 4:
            raise ValueError(f"{op}: input must be 4-D (batch, channels, height, width), got "
                             f"{input.dim()}-D with shape {list(input.shape)}")
        if weight.dim() != 6:
            raise ValueError(f"{op}: weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, "
                             f"out_w), got {weight.dim()}-D with shape {list(weight.shape)}")
        if input.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise TypeError(f"{op}: input must have a floating-point dtype (float32, float64, "
                            f"float16 or bfloat16), got {input.dtype}")
        if weight.dtype != input.dtype:
            raise TypeError(f"{op}: weight must have the dtype of input ({input.dtype}), got {weight.dtype}")
        if input.device.type != "cpu" or weight.device.type != "cpu":
            raise ValueError(f"{op}: the emulator runs on CPU tensors")
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
            raise ValueError(f"{op}: stride and dilation must be positive and padding non-negative, "
                             f"got {stride}, {padding}, {dilation}")
        b, c, h, w = input.shape
        _, g, kh, kw, oh, ow = weight.shape
        if weight.shape[0] != b or g <= 0 or c % g or kh <= 0 or kw <= 0:
            raise ValueError(f"{op}: weight {list(weight.shape)} does not fit input {list(input.shape)}")
        out = lambda n, k, s_, p_, d_: max(n + 2 * p_ - d_ * (k - 1) - 1, -1) // s_ + 1  # noqa: E731
        expected = (out(h, kh, sh, ph, dh), out(w, kw, sw, pw, dw))
        if min(expected) <= 0 or (oh, ow) != expected:
            raise ValueError(f"{op}: weight must have shape {[b, g, kh, kw, *expected]} for this "
                             f"input, stride, padding and dilation, got {list(weight.shape)}")
        return (ctypes.c_int64 * 15)(b, c, g, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw)

    def involution_forward(self, input, weight, stride, padding, dilation):
        s = self._involution_shape("involution", input, weight, stride, padding, dilation)
        input, weight = input.contiguous(), weight.contiguous()
        output = _poisoned_empty(s[0], s[1], s[7], s[8], like=input)
        if output.numel():
            self._run("simt_involution_forward", ctypes.c_int(_dtype_code(input.dtype)), s,
                      ctypes.c_void_p(input.data_ptr()), ctypes.c_void_p(weight.data_ptr()),
                      ctypes.c_void_p(output.data_ptr()))
        _check_written(output, "involution_forward_kernel", "the output")
        return output

    def involution_backward(self, grad_output, input, weight, stride, padding, dilation, output_mask):
        s = self._involution_shape("involution_backward", input, weight, stride, padding, dilation)
        if tuple(grad_output.shape) != (s[0], s[1], s[7], s[8]) or grad_output.dtype != input.dtype:
            raise ValueError(
                f"involution_backward: grad_output must have the output's shape "
                f"{[s[0], s[1], s[7], s[8]]} and dtype {input.dtype}, got "
                f"{list(grad_output.shape)} and {grad_output.dtype}")
        code = ctypes.c_int(_dtype_code(input.dtype))
        grad_output = grad_output.contiguous()
        grad_input = grad_weight = None
        if output_mask[0]:
            weight_c = weight.contiguous()
            grad_input = _poisoned_empty(*input.shape, like=input)
            self._run("simt_involution_grad_input", code, s, ctypes.c_void_p(grad_output.data_ptr()),
                      ctypes.c_void_p(weight_c.data_ptr()), ctypes.c_void_p(grad_input.data_ptr()))
            _check_written(grad_input, "involution_grad_input_kernel", "grad_input")
        if output_mask[1]:
            input_c = input.contiguous()
            grad_weight = _poisoned_empty(*weight.shape, like=input)
            self._run("simt_involution_grad_weight", code, s, ctypes.c_void_p(grad_output.data_ptr()),
                      ctypes.c_void_p(input_c.data_ptr()), ctypes.c_void_p(grad_weight.data_ptr()))
            _check_written(grad_weight, "involution_grad_weight_kernel", "grad_weight")
        return grad_input, grad_weight


# ---- Reader kernels: load_source ----------------------------------------------------------

# Scalar parameter types: C++ spelling -> (ctypes type, what the thunk reads).
_SCALARS = {
    "bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "signed char": ctypes.c_int8,
    "int8_t": ctypes.c_int8,
    "unsigned char": ctypes.c_uint8,
    "uint8_t": ctypes.c_uint8,
    "short": ctypes.c_int16,
    "int16_t": ctypes.c_int16,
    "unsigned short": ctypes.c_uint16,
    "uint16_t": ctypes.c_uint16,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32,
    "long": ctypes.c_long,
    "long long": ctypes.c_longlong,
    "int64_t": ctypes.c_int64,
    "unsigned long": ctypes.c_ulong,
    "unsigned long long": ctypes.c_ulonglong,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "__half": ctypes.c_uint16,
    "half": ctypes.c_uint16,
    "__nv_bfloat16": ctypes.c_uint16,
    "nv_bfloat16": ctypes.c_uint16,
}


def _pointer_dtypes():
    import torch

    return {
        "float": (torch.float32,),
        "float2": (torch.float32,),
        "float4": (torch.float32,),
        "double": (torch.float64,),
        "double2": (torch.float64,),
        "__half": (torch.float16,),
        "half": (torch.float16,),
        "__half2": (torch.float16,),
        "__nv_bfloat16": (torch.bfloat16,),
        "nv_bfloat16": (torch.bfloat16,),
        "__nv_bfloat162": (torch.bfloat16,),
        "int": (torch.int32,),
        "int32_t": (torch.int32,),
        "unsigned": (torch.int32, torch.uint32),
        "unsigned int": (torch.int32, torch.uint32),
        "uint32_t": (torch.int32, torch.uint32),
        "long": (torch.int64,),
        "long long": (torch.int64,),
        "int64_t": (torch.int64,),
        "unsigned long long": (torch.int64, torch.uint64),
        "uint64_t": (torch.int64, torch.uint64),
        "short": (torch.int16,),
        "int16_t": (torch.int16,),
        "char": (torch.int8, torch.uint8),
        "signed char": (torch.int8,),
        "int8_t": (torch.int8,),
        "unsigned char": (torch.uint8,),
        "uint8_t": (torch.uint8,),
        "bool": (torch.bool,),
    }


class Parameter:
    """A kernel parameter: its name, C++ type, and whether it is a pointer."""

    def __init__(self, declaration: str, index: int):
        text = " ".join(declaration.replace("__restrict__", " ").split())
        text = text.split("=")[0].strip()
        m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
        if not m or not m.group(1).strip():
            self.name, type_ = f"arg{index}", text
        else:
            self.name, type_ = m.group(2), m.group(1).strip()
        self.type = type_
        self.pointer = "*" in type_
        self.const = bool(re.match(r"^const\b", type_))
        base = re.sub(r"\b(const|volatile)\b|\*|&", " ", type_)
        self.base = " ".join(base.split())
        self.supported = self.pointer or self.base in _SCALARS

    def __repr__(self):
        return f"{self.type} {self.name}"


class KernelSignature:
    def __init__(self, name: str, parameters: list[Parameter], line: int, template: bool):
        self.name, self.parameters, self.line, self.template = name, parameters, line, template

    @property
    def bindable(self) -> bool:
        return not self.template and all(p.supported for p in self.parameters)

    def __repr__(self):
        return f"__global__ void {self.name}({', '.join(map(repr, self.parameters))})"


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in text:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and p.strip() != "void"]


def parse_kernels(text: str) -> list[KernelSignature]:
    """The __global__ functions defined in CUDA source `text`."""
    mask = code_mask(text)
    kernels, seen = [], set()
    for m in re.finditer(r"\b__global__\b", mask):
        open_paren = mask.find("(", m.end())
        # Skip __launch_bounds__(...) between __global__ and the name.
        head = mask[m.end() : open_paren]
        while "__launch_bounds__" in head:
            close = mask.find(")", open_paren)
            open_paren = mask.find("(", close)
            head = mask[m.end() : open_paren]
        name_match = re.search(r"([A-Za-z_]\w*)\s*$", mask[m.end() : open_paren])
        if not name_match:
            continue
        depth, i = 0, open_paren
        while i < len(mask):
            depth += {"(": 1, ")": -1}.get(mask[i], 0)
            if depth == 0:
                break
            i += 1
        after = mask[i + 1 :].lstrip()
        if not after.startswith("{") and not after.startswith("__"):
            if not after.startswith("{"):
                continue  # a declaration without body
        statement_start = max(mask.rfind(c, 0, m.start()) for c in ";}") + 1
        template = re.search(r"\btemplate\b", mask[statement_start : m.start()]) is not None
        name = name_match.group(1)
        if name in seen:
            continue
        seen.add(name)
        params = [Parameter(p, k) for k, p in enumerate(_split_top_level(text[open_paren + 1 : i]))]
        kernels.append(KernelSignature(name, params, text.count("\n", 0, m.start()) + 1, template))
    return kernels


def _thunks(kernels: list[KernelSignature]) -> str:
    """extern "C" entry points that launch each kernel (appended to the source)."""
    lines = [
        '#line 1 "<simt launch glue>"',
        "#include <cstdio>",
        'extern "C" void simt_configure(int schedule, unsigned long long seed, unsigned max_grid_x) {',
        "  ::simt::configure(static_cast<::simt::Schedule>(schedule), seed, max_grid_x);",
        "}",
    ]
    for k in kernels:
        if not k.bindable:
            continue
        args = []
        for i, p in enumerate(k.parameters):
            if p.pointer:
                args.append(f"reinterpret_cast<{p.type}>(*static_cast<void**>(args[{i}]))")
            elif p.base in ("__half", "half", "__nv_bfloat16", "nv_bfloat16"):
                args.append(f"::simt::detail::from_bits<{p.base}>(*static_cast<unsigned short*>(args[{i}]))")
            else:
                args.append(f"*static_cast<{p.base}*>(args[{i}])")
        call_args = ", ".join(args)
        lines += [
            f'extern "C" int simt_launch_{k.name}(const unsigned* g, const unsigned* b,',
            "    unsigned long long shared, void** args, char* error, unsigned long long size) {",
            "  (void)args;",
            "  try {",
            f'    ::simt::launch("{k.name}", [&](auto&&... a) {{ {k.name}(a...); }},',
            "        dim3(g[0], g[1], g[2]), dim3(b[0], b[1], b[2]), shared)(" + call_args + ");",
            "    return 0;",
            "  } catch (const std::exception& e) {",
            '    std::snprintf(error, size, "%s", e.what());',
            "    return 1;",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


class _SourceLibrary:
    """A reader's kernels, built and loaded in the worker; launched through ctypes."""

    def __init__(self, path: pathlib.Path, kernels: list[KernelSignature]):
        self.library = ctypes.CDLL(str(path))
        self.kernels = {k.name: k for k in kernels if k.bindable}

    def configure(self, schedule, seed, max_blocks):
        self.library.simt_configure(
            ctypes.c_int(SCHEDULES.index(schedule)), ctypes.c_ulonglong(seed), ctypes.c_uint(max_blocks)
        )

    def launch(self, name, grid, block, shared, values):
        kernel = self.kernels[name]
        keep = []
        pointers = (ctypes.c_void_p * max(1, len(values)))()
        for i, (p, value) in enumerate(zip(kernel.parameters, values)):
            if p.pointer:
                cell = ctypes.c_void_p(value.data_ptr() if value is not None else 0)
            else:
                cell = _SCALARS[p.base](value)
            keep.append(cell)
            pointers[i] = ctypes.cast(ctypes.pointer(cell), ctypes.c_void_p)
        error = ctypes.create_string_buffer(16384)
        fn = getattr(self.library, f"simt_launch_{name}")
        fn.restype = ctypes.c_int
        status = fn(
            (ctypes.c_uint * 3)(*grid),
            (ctypes.c_uint * 3)(*block),
            ctypes.c_ulonglong(shared),
            pointers,
            error,
            ctypes.c_ulonglong(len(error)),
        )
        if status != 0:
            raise RuntimeError(error.value.decode(errors="replace"))


def _source_library(mode: str, text: str, filename: str):
    include = cuda_include_dir()
    kernels = parse_kernels(text)
    program = rewrite(text, filename) + "\n" + _thunks(kernels)
    key = _digest(mode, _mode_flags(mode), include, _torch_variant(), program,
                  *(f"{p}\n{p.read_text()}" for p in _simt_files()))[:16]
    directory = BUILD_ROOT / f"{mode}-{_torch_variant()}" / f"source-{key}"
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "kernels_cu.cpp"
    _write_if_changed(source, program)
    name = f"ep_simt_source_{key}"
    includes = [SIMT_DIR / "include", SIMT_DIR, include]
    if pathlib.Path(filename).is_file():  # its quoted #includes are relative to it
        includes.insert(2, pathlib.Path(filename).parent)
    _load_extension(name, [source], mode, includes, directory, python_module=False)
    return _SourceLibrary(directory / f"{name}.so", kernels)


# ---- Tensors across the process boundary ---------------------------------------------------
#
# A tensor travels as its whole storage (bytes) plus dtype, sizes, strides and
# storage offset, so a view arrives as the same view: misaligned, strided,
# expanded (stride 0) or sharing memory with another argument. Storages are
# allocated by torch on both sides (64-byte aligned), so the alignment of a
# view's first element is kept too.


class _TensorRef:
    def __init__(self, storage, dtype, size, stride, offset):
        self.storage, self.dtype, self.size, self.stride, self.offset = (
            storage, dtype, size, stride, offset)


def _pack(value, storages: list, index: dict, originals: list | None = None):
    import torch

    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        key = storage.data_ptr(), storage.nbytes()
        if key not in index:
            index[key] = len(storages)
            storages.append(torch.empty(0, dtype=torch.uint8).set_(storage).clone())
            if originals is not None:
                originals.append(storage)
        return _TensorRef(index[key], value.dtype, tuple(value.shape), value.stride(),
                          value.storage_offset())
    if isinstance(value, (list, tuple)):
        return type(value)(_pack(v, storages, index, originals) for v in value)
    if isinstance(value, dict):
        return {k: _pack(v, storages, index, originals) for k, v in value.items()}
    return value


def _unpack(value, storages: list):
    import torch

    if isinstance(value, _TensorRef):
        storage = storages[value.storage].untyped_storage()
        return torch.empty(0, dtype=value.dtype).set_(storage, value.offset, value.size, value.stride)
    if isinstance(value, (list, tuple)):
        return type(value)(_unpack(v, storages) for v in value)
    if isinstance(value, dict):
        return {k: _unpack(v, storages) for k, v in value.items()}
    return value


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    message = struct.pack("<Q", len(data)) + data
    view = memoryview(message)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _receive(fd: int, timeout: float | None = None):
    def read_exactly(n):
        chunks, left = [], n
        while left:
            if timeout is not None:
                ready, _, _ = select.select([fd], [], [], timeout)
                if not ready:
                    raise TimeoutError
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (length,) = struct.unpack("<Q", read_exactly(8))
    return pickle.loads(read_exactly(length))


# ---- The worker process ---------------------------------------------------------------------


def _serve(read_fd: int, write_fd: int, mode: str) -> None:
    """The worker's loop: build and load what is asked, call it, answer."""
    # The sanitizer runtime is loaded; compilers started from here must not load it.
    os.environ.pop("LD_PRELOAD", None)
    import logging

    # (Its warning that no CUDA runtime is found is beside the point here.)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(1)
    libc = ctypes.CDLL(None)
    targets = {}
    while True:
        try:
            request = _receive(read_fd)
        except EOFError:
            return
        try:
            target, function, settings, storages, args, kwargs = request
            if target not in targets:
                if target[0] == "book":
                    targets[target] = _book_module(mode, target[1])
                else:
                    targets[target] = _source_library(mode, target[1], target[2])
            module = targets[target]
            module.configure(*settings)
            args = _unpack(args, storages)
            kwargs = _unpack(kwargs, storages)
            result = getattr(module, function)(*args, **kwargs)
            out_storages, out_index = [], {}
            written = storages if target[0] == "source" else None
            reply = ("ok", _pack(result, out_storages, out_index), out_storages, written)
        except Exception as error:  # reported to the caller as it was raised
            kind = type(error).__name__ if type(error).__name__ in _RERAISED else "RuntimeError"
            reply = ("error", (kind, str(error)), None, None)
        libc.fflush(None)
        sys.stdout.flush()
        sys.stderr.flush()
        _send(write_fd, reply)


# Exceptions the worker raises that reach the caller as the same type.
_RERAISED = {"ValueError": ValueError, "TypeError": TypeError, "RuntimeError": RuntimeError}


class _Worker:
    def __init__(self, mode: str):
        self.mode = mode
        self.lock = threading.Lock()
        self.process = None

    def _start(self):
        env = dict(os.environ)
        env.update(_sanitizer_env(self.mode))
        package_root = str(pathlib.Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = package_root + os.pathsep + env.get("PYTHONPATH", "")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()
        code = (
            "from extending_pytorch.emulator import _serve; "
            f"_serve({to_worker_r}, {from_worker_w}, {self.mode!r})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(to_worker_r, from_worker_w),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.stdout,
            stderr=self.stderr,
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.write_fd, self.read_fd = to_worker_w, from_worker_r
        self.shown = [0, 0]

    def _forward_output(self):
        """Show what the worker printed (a kernel's printf) since the last call."""
        for i, (source, sink) in enumerate(((self.stdout, sys.stdout), (self.stderr, sys.stderr))):
            source.seek(self.shown[i])
            data = source.read()
            self.shown[i] += len(data)
            if sink is sys.stderr:
                data = _ASAN_FIBER_WARNING.sub(b"", data)
            if data:
                sink.write(data.decode(errors="replace"))
                sink.flush()

    def _stop(self):
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            os.close(self.write_fd)
            os.close(self.read_fd)
        self.process = None

    def call(self, target, function, settings, args, kwargs, timeout):
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._stop()
                self._start()
            storages, index, originals = [], {}, []
            packed = _pack((args, kwargs), storages, index, originals)
            try:
                _send(self.write_fd, (target, function, settings, storages, *packed))
                reply = _receive(self.read_fd, timeout)
            except (EOFError, BrokenPipeError, TimeoutError) as error:
                timed_out = isinstance(error, TimeoutError)
                if timed_out:
                    self.process.kill()
                code = self.process.wait()
                self.stderr.seek(self.shown[1])
                report = self.stderr.read().decode(errors="replace")
                self.shown[1] += len(report)
                self._stop()
                what = (
                    f"did not finish in {timeout:.0f} s (an endless loop?)"
                    if timed_out
                    else f"crashed (exit status {code})"
                )
                raise RuntimeError(
                    f"The emulated kernel ({self.mode} mode) {what}. The report:\n"
                    + _tail(report)
                ) from None
            self._forward_output()
            status, result, out_storages, in_storages = reply
            if status == "error":
                kind, message = result
                raise _RERAISED[kind](message)
            return _unpack(result, out_storages), in_storages, originals


def _tail(text: str, limit: int = 12000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


_workers: dict[str, _Worker] = {}


def _worker(mode: str) -> _Worker:
    _check_mode(mode)
    if mode not in _workers:
        _workers[mode] = _Worker(mode)
    return _workers[mode]


def shutdown() -> None:
    """Stop the worker processes (they also stop when Python exits)."""
    for worker in _workers.values():
        with worker.lock:
            worker._stop()
    _workers.clear()


def _settings(schedule: str, seed: int, max_blocks: int):
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not isinstance(max_blocks, int) or max_blocks < 0:
        raise ValueError(f"max_blocks must be a non-negative int (0: no cap), got {max_blocks!r}")
    return (schedule, seed, max_blocks)


def _call(target, function, args, kwargs=None, *, mode, schedule, seed, max_blocks, timeout):
    cuda_include_dir()  # fails early, with the reason, where the headers are missing
    result, _, _ = _worker(mode).call(
        target, function, _settings(schedule, seed, max_blocks), args, kwargs or {}, timeout
    )
    return result


# ---- The book's kernels ------------------------------------------------------------------------


def _book(csrc):
    return ("book", None if csrc is None else str(pathlib.Path(csrc).resolve()))


def triplet_forward(anchor, positive, negative, t1, t2, beta, reduction="mean", *, mode="fast",
                    schedule="forward", seed=0, max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """triplet.cu's forward kernel on CPU tensors: the loss, reduced.

    `max_blocks` caps gridDim.x (0: no cap), as a smaller kMaxBlocks would:
    with 1 or 2 blocks every warp loops over many rows. `csrc` reads the
    kernels from another copy of extensions/csrc (default: this one, or
    $EXTENDING_PYTORCH_EMULATOR_CSRC).
    """
    return _call(_book(csrc), "triplet_forward",
                 (anchor, positive, negative, float(t1), float(t2), float(beta), reduction),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_backward(grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                     output_mask=(True, True, True), *, mode="fast", schedule="forward", seed=0,
                     max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """triplet.cu's backward kernel: (grad_anchor, grad_positive, grad_negative),
    None for a gradient output_mask does not ask for."""
    return _call(_book(csrc), "triplet_backward",
                 (grad_output, anchor, positive, negative, float(t1), float(t2), float(beta),
                  reduction, list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def _autograd_function():
    import torch

    class EmulatedTriplet(torch.autograd.Function):
        @staticmethod
        def forward(ctx, anchor, positive, negative, t1, t2, beta, reduction, options):
            ctx.save_for_backward(anchor, positive, negative)
            ctx.hyper = (t1, t2, beta, reduction)
            ctx.options = options
            return triplet_forward(anchor, positive, negative, t1, t2, beta, reduction, **options)

        @staticmethod
        def backward(ctx, grad):
            anchor, positive, negative = ctx.saved_tensors
            grads = triplet_backward(grad, anchor, positive, negative, *ctx.hyper,
                                     ctx.needs_input_grad[:3], **ctx.options)
            return (*grads, None, None, None, None, None)

    class EmulatedInvolution(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, stride, padding, dilation, options):
            ctx.save_for_backward(input, weight)
            ctx.settings = (stride, padding, dilation)
            ctx.options = options
            return involution_forward(input, weight, stride, padding, dilation, **options)

        @staticmethod
        def backward(ctx, grad):
            input, weight = ctx.saved_tensors
            grads = involution_backward(grad, input, weight, *ctx.settings,
                                        ctx.needs_input_grad[:2], **ctx.options)
            return (*grads, None, None, None, None)

    return EmulatedTriplet, EmulatedInvolution


_functions = None


def _autograd():
    global _functions
    if _functions is None:
        _functions = _autograd_function()
    return _functions


def triplet_hinge_loss(anchor, positive, negative, *, t1, t2, beta, reduction="mean", **options):
    """The triplet loss computed by triplet.cu's kernels, differentiable.

    The signature of chapter 1's reference (so testing.check_against_reference
    takes it), plus the emulator's options: mode, schedule, seed, max_blocks,
    csrc, timeout.
    """
    return _autograd()[0].apply(anchor, positive, negative, t1, t2, beta, reduction, options)


def _pairs(stride, padding, dilation):
    def pair(v):
        return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]

    return pair(stride), pair(padding), pair(dilation)


def involution_forward(input, weight, stride=1, padding=0, dilation=1, *, mode="fast",
                       schedule="forward", seed=0, max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """involution.cu's forward kernel: output (B, C, Ho, Wo)."""
    return _call(_book(csrc), "involution_forward", (input, weight, *_pairs(stride, padding, dilation)),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def involution_backward(grad_output, input, weight, stride=1, padding=0, dilation=1,
                        output_mask=(True, True), *, mode="fast", schedule="forward", seed=0,
                        max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """involution.cu's gradient kernels: (grad_input, grad_weight), None where not asked for."""
    return _call(_book(csrc), "involution_backward",
                 (grad_output, input, weight, *_pairs(stride, padding, dilation),
                  list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def involution(input, weight, stride=1, padding=0, dilation=1, **options):
    """Involution computed by involution.cu's kernels, differentiable."""
    return _autograd()[1].apply(input, weight, stride, padding, dilation, options)


# ---- load_source: a reader's kernels -------------------------------------------------------------

# Signalling NaNs (float types) or a byte pattern: what outputs hold before a launch.
_POISON_BITS = {2: 0x7D5A, 4: 0x7FA5A5A5, 8: 0x7FF4A5A5A5A5A5A5}


def _poison_view(t):
    import torch

    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(bits)


def _poison_value(t):
    import torch

    if t.dtype == torch.bfloat16:
        return 0x7FA5
    if t.element_size() == 1:
        return 0xA5
    value = _POISON_BITS[t.element_size()]
    # As a signed integer of the element's width.
    return value - (1 << (8 * t.element_size())) if value >= 1 << (8 * t.element_size() - 1) else value


class Kernel:
    """A __global__ function of a module from `load_source`.

    Launch it as CUDA's ``kernel<<<grid, block, shared>>>(args)``:
    ``kernel[grid, block](args)`` or ``kernel[grid, block, shared](args)``,
    grid and block an int or a tuple of up to 3 ints. Pointer parameters take
    CPU tensors (of the pointer's dtype, where the emulator knows it), the
    others numbers. ``outputs=("y",)`` names parameters (or their positions)
    the kernel must write completely: they are filled with a signalling-NaN
    pattern before the launch, and an element still holding it afterwards is
    reported. Tensors the kernel writes are updated in place.
    """

    def __init__(self, module: "EmulatedModule", signature: KernelSignature):
        self._module, self.signature = module, signature
        self.__doc__ = repr(signature)

    def __repr__(self):
        return f"<emulated kernel {self.signature!r}>"

    def __getitem__(self, config):
        if not isinstance(config, tuple):
            config = (config,)
        if len(config) not in (2, 3):
            raise TypeError(
                "launch a kernel as kernel[grid, block](args) or kernel[grid, block, shared](args)"
            )
        grid, block = _dim3("grid", config[0]), _dim3("block", config[1])
        shared = int(config[2]) if len(config) == 3 else 0
        return lambda *args, outputs=(): self._launch(grid, block, shared, args, outputs)

    def _launch(self, grid, block, shared, args, outputs):
        import torch

        params = self.signature.parameters
        if len(args) != len(params):
            raise TypeError(f"{self.signature.name} takes {len(params)} arguments ({self}), got {len(args)}")
        dtypes = _pointer_dtypes()
        for p, value in zip(params, args):
            if p.pointer:
                if value is None:
                    continue
                if not isinstance(value, torch.Tensor):
                    raise TypeError(f"{self.signature.name}: {p.name} ({p.type}) takes a tensor, got {type(value).__name__}")
                if value.device.type != "cpu":
                    raise ValueError(f"{self.signature.name}: {p.name} must be a CPU tensor (the emulator runs on the CPU), got {value.device}")
                expected = dtypes.get(p.base)
                if expected and value.dtype not in expected:
                    raise TypeError(f"{self.signature.name}: {p.name} ({p.type}) needs a tensor of dtype "
                                    f"{' or '.join(map(str, expected))}, got {value.dtype}")
            elif isinstance(value, torch.Tensor):
                raise TypeError(f"{self.signature.name}: {p.name} ({p.type}) takes a number, got a tensor")
        values = list(args)
        for i, p in enumerate(params):
            if not p.pointer and p.base in ("__half", "half", "__nv_bfloat16", "nv_bfloat16"):
                dtype = torch.float16 if "half" in p.base else torch.bfloat16
                values[i] = int(torch.tensor(float(values[i]), dtype=dtype).view(torch.int16).item()) & 0xFFFF
        checked = []
        for name in outputs:
            index = name if isinstance(name, int) else next(
                (i for i, p in enumerate(params) if p.name == name), None)
            if index is None or not 0 <= index < len(params) or not params[index].pointer:
                raise ValueError(f"outputs: {name!r} is not a pointer parameter of {self.signature!r}")
            if values[index] is None or not values[index].is_contiguous():
                raise ValueError(f"outputs: {params[index].name} must be a contiguous tensor to be checked")
            checked.append((params[index].name, values[index]))
        for _, tensor in checked:
            _poison_view(tensor).fill_(_poison_value(tensor))
        module = self._module
        _, storages, originals = _worker(module.mode).call(
            ("source", module.source, module.filename), "launch",
            _settings(module.schedule, module.seed, module.max_blocks),
            (self.signature.name, grid, block, shared, values), {}, module.timeout)
        # The kernel wrote into the worker's copies: copy every storage back.
        for original, written in zip(originals, storages):
            torch.empty(0, dtype=torch.uint8).set_(original).copy_(written)
        for name, tensor in checked:
            unwritten = _poison_view(tensor) == _poison_value(tensor)
            if unwritten.any():
                first = [int(i) for i in unwritten.nonzero()[0]]
                raise RuntimeError(
                    f"simt: {self.signature.name} left {int(unwritten.sum())} of the "
                    f"{tensor.numel()} elements of {name} unwritten, the first at {first}: "
                    "they still hold the poison written before the launch")


def _dim3(what, value):
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 0 for d in dims):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 non-negative ints, got {value!r}")
    return tuple(dims) + (1,) * (3 - len(dims))


class EmulatedModule:
    """The kernels of one CUDA source, built for the emulator (see load_source)."""

    def __init__(self, source, filename, mode, schedule, seed, max_blocks, timeout):
        self.source, self.filename, self.mode = source, filename, mode
        self.schedule, self.seed, self.max_blocks, self.timeout = schedule, seed, max_blocks, timeout
        self.kernels = {k.name: k for k in parse_kernels(source)}
        for k in self.kernels.values():
            if k.bindable:
                setattr(self, k.name, Kernel(self, k))

    @property
    def unbound(self) -> dict[str, str]:
        """Kernels that cannot be launched from Python, and why."""
        reasons = {}
        for k in self.kernels.values():
            if k.template:
                reasons[k.name] = "a template: launch it from a C++ host function instead"
            elif not k.bindable:
                bad = [p for p in k.parameters if not p.supported]
                reasons[k.name] = f"parameters of types the emulator cannot pass from Python: {bad}"
        return reasons

    def __repr__(self):
        names = ", ".join(k for k in self.kernels if k not in self.unbound)
        return f"<emulated CUDA module {self.filename!r} ({self.mode}): {names}>"


def load_source(source, *, mode="fast", name="kernel", schedule="forward", seed=0,
                max_blocks=0, timeout=DEFAULT_TIMEOUT) -> EmulatedModule:
    """Build CUDA source for the emulator; returns a module of its kernels.

    `source` is the text of a .cu file, or a path to one. The build (g++,
    cached by content under extensions/build/emulator/) happens here, so
    compiler errors show at once, pointing at lines of the source.

    Example::

        module = emulator.load_source(r'''
        __global__ void add_one(const float* x, float* y, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i] + 1;
        }
        ''')
        y = torch.empty(1000)
        module.add_one[(1000 + 255) // 256, 256](x, y, 1000, outputs=["y"])
    """
    _check_mode(mode)
    _settings(schedule, seed, max_blocks)
    if isinstance(source, pathlib.Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))
    ):
        path = pathlib.Path(source).resolve()
        text, filename = path.read_text(), str(path)
    else:
        text, filename = str(source), f"{name}.cu"
    cuda_include_dir()
    module = EmulatedModule(text, filename, mode, schedule, seed, max_blocks, timeout)
    # Build now (in the worker), so that errors come with the load.
    _worker(mode).call(("source", text, filename), "configure",
                       _settings(schedule, seed, max_blocks), (schedule, seed, max_blocks), {}, timeout)
    return module
