"""load_source: a reader's CUDA kernels, built for the emulator and launched
from Python as kernel[grid, block](args)."""

from __future__ import annotations

import ctypes
import pathlib

from extending_pytorch.emulator.poison import check_written
from extending_pytorch.emulator.poison import poison_value as _poison_value
from extending_pytorch.emulator.poison import poison_view as _poison_view
from extending_pytorch.emulator.signatures import (
    _SCALARS,
    KernelSignature,
    _pointer_dtypes,
    _thunks,
    parse_kernels,
)
from extending_pytorch.emulator.toolchain import (
    BUILD_ROOT,
    DEFAULT_TIMEOUT,
    SCHEDULES,
    SIMT_DIR,
    _check_mode,
    _digest,
    _load_extension,
    _mode_flags,
    _simt_files,
    _torch_variant,
    _write_if_changed,
    cuda_include_dir,
)
from extending_pytorch.emulator.traffic import NativeCounter
from extending_pytorch.emulator.worker import _settings, _worker, counting_mode
from extending_pytorch.simt_rewrite import rewrite

class _SourceLibrary:
    """A reader's kernels, built and loaded in the worker; launched through ctypes."""

    def __init__(self, path: pathlib.Path, kernels: list[KernelSignature], mode: str):
        self.library = ctypes.CDLL(str(path))
        self.kernels = {k.name: k for k in kernels if k.bindable}
        # In the counting build: counts each launch (emulator.traffic()).
        self.counter = NativeCounter(self.library) if mode == "traffic" else None

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

        def call():
            status = fn((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                        ctypes.c_ulonglong(shared), pointers, error, ctypes.c_ulonglong(len(error)))
            if status != 0:
                raise RuntimeError(error.value.decode(errors="replace"))

        if self.counter is None:
            call()
        else:
            self.counter.run([(p.name, v) for p, v in zip(kernel.parameters, values) if p.pointer],
                             call)


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
    return _SourceLibrary(directory / f"{name}.so", kernels, mode)


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
        _, storages, originals = _worker(counting_mode(module.mode)).call(
            ("source", module.source, module.filename), "launch",
            _settings(module.schedule, module.seed, module.max_blocks),
            (self.signature.name, grid, block, shared, values), {}, module.timeout)
        # The kernel wrote into the worker's copies: copy every storage back.
        for original, written in zip(originals, storages):
            torch.empty(0, dtype=torch.uint8).set_(original).copy_(written)
        for name, tensor in checked:
            check_written(tensor, self.signature.name, name)


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
    _worker(counting_mode(mode)).call(("source", text, filename), "configure",
                       _settings(schedule, seed, max_blocks), (schedule, seed, max_blocks), {}, timeout)
    return module
