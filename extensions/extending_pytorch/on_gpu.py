"""A reader's CUDA source compiled by nvcc and, where there is a GPU, launched on it.

The SIMT emulator (`extending_pytorch.emulator`) compiles a kernel's source with g++, which accepts
some code that nvcc rejects: a helper function without `__device__` called from a kernel, a host-only
function such as `std::min` in device code. `load_source` compiles the source with nvcc and returns a
module whose kernels launch with the emulator's syntax,

    module = on_gpu.load_source(source, name="exercise_4")
    module.row_sums[blocks, threads](x, out, rows, cols, outputs=["out"])

so that an exercise's check runs the same code on both. CPU tensors are copied to the GPU for the launch;
those named in `outputs` start as NaN there (an element the kernel does not write stays NaN) and are
copied back into the CPU tensor afterwards. CUDA tensors are passed as they are.

The library holds, next to the source, one `extern "C"` launcher per kernel that calls
`cudaLaunchKernel` with the arguments' addresses, so no torch header is compiled (a build takes a
second or two); the CUDA runtime is linked statically, and launches on torch's current device, in the same
(primary) context as torch.
Kernels that are templates are not supported. Without a GPU, `load_source` still compiles: the module's
kernels then refuse to launch, saying why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import shutil
import subprocess

from extending_pytorch import build_flags
from extending_pytorch.emulator import signatures

BUILD_ROOT = build_flags.EXTENSIONS_DIR / "build" / "nvcc"


def nvcc() -> str | None:
    """nvcc's path: on PATH, or in torch's CUDA_HOME; None where there is none."""
    found = shutil.which("nvcc")
    if found:
        return found
    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except ImportError:
        return None
    candidate = pathlib.Path(CUDA_HOME or "/nonexistent") / "bin" / "nvcc"
    return str(candidate) if candidate.is_file() else None


def _gpu_present() -> bool:
    import torch

    return torch.cuda.is_available()


def _launchers(kernels) -> str:
    lines = ["", "// Added by extending_pytorch.on_gpu: one launcher per kernel.", "#include <cuda_runtime.h>"]
    for kernel in kernels:
        lines += [
            f'extern "C" const char* ep_launch_{kernel.name}(int device, unsigned gx, unsigned gy, unsigned gz,',
            "                                  unsigned bx, unsigned by, unsigned bz, void** args) {",
            "  cudaError_t error = cudaSetDevice(device);  // torch's current device, where the tensors are",
            f"  if (error == cudaSuccess) error = cudaLaunchKernel((const void*)&{kernel.qualified}, dim3(gx, gy, gz),",
            "                                       dim3(bx, by, bz), args, 0, nullptr);",
            "  if (error == cudaSuccess) error = cudaDeviceSynchronize();",
            "  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);",
            "}",
        ]
    return "\n".join(lines) + "\n"


def load_source(source: str, name: str = "kernels") -> "Module":
    """Compile `source` with nvcc (for this machine's GPU where there is one) and load it.

    Raises RuntimeError with nvcc's messages when it does not compile, and ValueError for a source
    without a `__global__` kernel or with a template kernel.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of CUDA C++, got {type(source).__name__}")
    if not name.isidentifier():
        raise ValueError(f"name must be an identifier (it names the library), got {name!r}")
    compiler = nvcc()
    if compiler is None:
        raise RuntimeError("on_gpu.load_source needs nvcc, the CUDA toolkit's compiler: none is on PATH or in CUDA_HOME")
    kernels = signatures.parse_kernels(source)
    if not kernels:
        raise ValueError("source: no __global__ kernel found")
    templates = [k.name for k in kernels if k.template]
    if templates:
        raise ValueError(f"source: kernels that are templates cannot be launched by name here: {templates}")
    gpu = _gpu_present()
    arch = ["-arch=native"] if gpu else []  # without a GPU: nvcc's default architecture, to compile
    text = source + _launchers(kernels)
    flags = ["-shared", "-Xcompiler", "-fPIC", "-O2", f"-std={build_flags.CXX_STANDARD}", *arch]
    key = hashlib.sha256("\0".join([text, compiler, *flags]).encode()).hexdigest()[:16]
    directory = BUILD_ROOT / f"{name}-{key}"
    library = directory / f"{name}.so"
    if not library.exists():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}.cu").write_text(text)
        partial = directory / f"{name}.so.partial"
        result = subprocess.run(
            [compiler, *flags, "-o", str(partial), str(directory / f"{name}.cu")],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            # Said without this machine's paths: the messages name the file and line.
            raise RuntimeError(f"nvcc rejected {name}.cu:\n{result.stderr.strip().replace(f'{directory}/', '')}")
        os.replace(partial, library)
    return Module(ctypes.CDLL(str(library)), kernels, gpu)


class Module:
    """The kernels of a library `load_source` built: `module.kernel[grid, block](*args, outputs=[...])`."""

    def __init__(self, library, kernels, gpu: bool):
        self._kernels = {k.name: Kernel(library, k, gpu) for k in kernels}

    def __getattr__(self, name):
        try:
            return self.__dict__["_kernels"][name]
        except KeyError:
            raise AttributeError(f"no __global__ kernel named {name!r} in the source") from None

    def __dir__(self):
        return [*super().__dir__(), *self._kernels]


def _dim3(value, what):
    values = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(values) <= 3 or not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(f"{what} must be a positive int or a tuple of 1 to 3 of them, got {value!r}")
    return (*values, *(1,) * (3 - len(values)))


class Kernel:
    def __init__(self, library, signature, gpu: bool):
        self.signature, self._gpu = signature, gpu
        self._launch = getattr(library, f"ep_launch_{signature.name}")
        self._launch.restype = ctypes.c_char_p
        self._launch.argtypes = [ctypes.c_int] + [ctypes.c_uint] * 6 + [ctypes.POINTER(ctypes.c_void_p)]

    def __getitem__(self, launch):
        grid, block = launch
        return lambda *args, outputs=(): self._run(_dim3(grid, "grid"), _dim3(block, "block"), args, outputs)

    def _run(self, grid, block, args, outputs):
        import torch

        name, parameters = self.signature.name, self.signature.parameters
        if len(args) != len(parameters):
            raise TypeError(f"{name} takes {len(parameters)} arguments ({parameters}), got {len(args)}")
        unknown = set(outputs) - {p.name for p in parameters if p.pointer}
        if unknown:
            raise ValueError(f"outputs must name pointer parameters of {name}; {sorted(unknown)} are not")
        dtypes = signatures._pointer_dtypes()  # the C type a pointer points to -> the tensor dtypes it reads
        for parameter, arg in zip(parameters, args):
            if parameter.pointer and not isinstance(arg, torch.Tensor):
                raise TypeError(f"{name}: {parameter.name} is a pointer; pass a tensor, got {type(arg).__name__}")
            expected = dtypes.get(parameter.base) if parameter.pointer else None
            if expected and arg.dtype not in expected:
                raise TypeError(f"{name}: {parameter.name} ({parameter.type}) needs a tensor of dtype "
                                f"{' or '.join(map(str, expected))}, got {arg.dtype}")
            if not parameter.pointer and parameter.base not in signatures._SCALARS:
                raise TypeError(f"{name}: parameter {parameter.name} has type {parameter.type}, which this "
                                "launcher cannot pass; use int, float, double or a pointer")
        if not self._gpu:
            raise RuntimeError(f"{name}: compiled by nvcc, but there is no GPU here to launch it on")
        values, copies, alive = [], [], []
        for parameter, arg in zip(parameters, args):
            if not parameter.pointer:
                values.append(signatures._SCALARS[parameter.base](arg))  # the emulator's C types
                continue
            device_arg = arg if arg.is_cuda else arg.detach().to("cuda").contiguous()
            if not device_arg.is_contiguous():
                raise ValueError(f"{name}: {parameter.name} must be contiguous, got strides {tuple(arg.stride())}")
            if parameter.name in outputs:
                device_arg.fill_(float("nan") if device_arg.is_floating_point() else -1)
                if not arg.is_cuda:
                    copies.append((arg, device_arg))
            alive.append(device_arg)  # kept until the launch returns
            values.append(ctypes.c_void_p(device_arg.data_ptr()))
        torch.cuda.synchronize()  # torch's copies above run on its stream; the launch on the default one
        addresses = (ctypes.c_void_p * len(values))(*(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values))
        error = self._launch(torch.cuda.current_device(), *grid, *block, addresses)
        if error is not None:
            raise RuntimeError(f"{name} failed on the GPU: {error.decode()}")
        for host, device in copies:
            host.copy_(device)
