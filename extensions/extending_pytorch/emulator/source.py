"""load_source: a reader's CUDA kernels, built for the emulator and launched
from Python as kernel[grid, block](args)."""

from __future__ import annotations

import ctypes
import os
import pathlib

from extending_pytorch.emulator.poison import check_written
from extending_pytorch.emulator.poison import poison_value as _poison_value
from extending_pytorch.emulator.poison import poison_view as _poison_view
from extending_pytorch.emulator.signatures import (
    _SCALARS,
    Binding,
    KernelSignature,
    _pointer_dtypes,
    _thunks,
    parse_host_functions,
    parse_instantiation,
    parse_kernels,
    template_arguments,
)
from extending_pytorch.emulator.toolchain import (
    BUILD_ROOT,
    DEFAULT_TIMEOUT,
    SCHEDULES,
    SIMT_DIR,
    _build_library,
    _check_mode,
    _cxx,
    _digest,
    _mode_flags,
    _simt_files,
    _torch_flags,
    _torch_variant,
    _write_if_changed,
    cuda_include_dir,
)
from extending_pytorch.emulator.traffic import NativeCounter
from extending_pytorch.emulator.worker import _settings, _worker, counting_mode
from extending_pytorch.simt_rewrite import code_mask, rewrite

class _Number(ctypes.Structure):
    """simt::detail::Number: a number for a parameter whose type only the compiler knows."""

    _fields_ = [("real", ctypes.c_double), ("bits", ctypes.c_ulonglong),
                ("is_real", ctypes.c_int), ("negative", ctypes.c_int)]


def _number(value, name: str) -> _Number:
    if isinstance(value, float):
        return _Number(value, 0, 1, value < 0)
    value = int(value)
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"{name}: {value} does not fit in 64 bits")
    return _Number(float(value), value & (2**64 - 1), 0, value < 0)


def _bindings(kernels: list[KernelSignature], instantiations) -> list[Binding]:
    """What the launch glue is built for: every kernel that is not a template, and each
    requested instantiation (qualified name, template arguments) of a template one."""
    by_name = {k.qualified: k for k in kernels}
    return [Binding(k) for k in kernels if not k.template] + [
        Binding(by_name[name], arguments) for name, arguments in instantiations]


class _SourceLibrary:
    """A reader's kernels, built and loaded in the worker; launched through ctypes."""

    def __init__(self, path: pathlib.Path, bindings: list[Binding], mode: str,
                 host_namespace: str | None = None):
        self.library = ctypes.CDLL(str(path))
        self.bindings = {b.key: (i, b) for i, b in enumerate(bindings)}
        self.host_namespace = host_namespace  # torch.ops.<it>: the host functions
        # In the counting build: counts each launch (emulator.traffic()).
        self.counter = NativeCounter(self.library) if mode == "traffic" else None

    def configure(self, schedule, seed, max_blocks, gpu_like):
        self.library.simt_configure(
            ctypes.c_int(SCHEDULES.index(schedule)), ctypes.c_ulonglong(seed), ctypes.c_uint(max_blocks),
            ctypes.c_int(gpu_like),
        )

    def describe(self) -> dict[str, list[str]]:
        """Kernel -> its parameters that take a struct by value (the compiled glue knows)."""
        structs = {}
        for key, (number, binding) in self.bindings.items():
            fn = getattr(self.library, f"simt_structs_{number}")
            fn.restype = ctypes.c_char_p
            names = fn().decode().rstrip(",")
            if names:
                structs[key] = names.split(",")
        return structs

    def storage_names(self, function, args) -> dict[int, str]:
        """Storage index -> the parameters (of a launch's packed arguments) that use it."""
        if function != "launch":
            return {}
        _, binding = self.bindings[args[0]]
        names = {}
        for p, value in zip(binding.parameters, args[4]):
            index = getattr(value, "storage", None)
            if p.pointer and index is not None:
                names[index] = f"{names[index]} and {p.name}" if index in names else p.name
        return names

    def host(self, name, args):
        """Call a host function of the source (registered as torch.ops.<namespace>.<name>)
        with torch tensors."""
        import torch

        return getattr(getattr(torch.ops, self.host_namespace), name.split("::")[-1])(*args)

    def launch(self, key, grid, block, shared, values):
        number, binding = self.bindings[key]
        keep = []
        pointers = (ctypes.c_void_p * max(1, len(values)))()
        for i, (p, value) in enumerate(zip(binding.parameters, values)):
            if p.pointer:
                cell = ctypes.c_void_p(value.data_ptr() if value is not None else 0)
            elif p.known:
                cell = _SCALARS[p.base](value)
            else:
                cell = _number(value, f"{key}: {p.name} ({p.type})")
            keep.append(cell)
            pointers[i] = ctypes.cast(ctypes.pointer(cell), ctypes.c_void_p)
        error = ctypes.create_string_buffer(16384)
        fn = getattr(self.library, f"simt_launch_{number}")
        fn.restype = ctypes.c_int

        def call():
            status = fn((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                        ctypes.c_ulonglong(shared), pointers, error, ctypes.c_ulonglong(len(error)))
            if status != 0:
                raise RuntimeError(error.value.decode(errors="replace"))

        if self.counter is None:
            call()
        else:
            self.counter.run([(p.name, v) for p, v in zip(binding.parameters, values) if p.pointer],
                             call)


def includes_torch(text: str, headers=()) -> bool:
    """Whether a source, or a local header it includes (path, text), includes torch's
    headers (torch/, ATen/, c10/): its library is then built with them and linked with
    torch, which the worker imports before loading it."""
    import re

    pattern = re.compile(r'^\s*#\s*include\s*[<"](torch|ATen|c10)/', re.M)
    return any(pattern.search(t) for t in (text, *(header for _, header in headers)))


def _source_library(mode: str, text: str, filename: str, instantiations=(), headers=None):
    include = cuda_include_dir()
    bindings = _bindings(parse_kernels(text), instantiations)
    program = rewrite(text, filename) + "\n" + _thunks(bindings)
    host_namespace = None
    # The local headers (as load_source read them) are part of the key: an edited header
    # makes another module (a worker that loaded the old one cannot load a rebuilt library
    # under the same name).
    headers = (_local_headers(text, filename) if headers is None
               else {pathlib.Path(path): header for path, header in headers})
    with_torch = includes_torch(text, headers.items())
    if with_torch:
        # The CPU shim, and the host functions registered as torch ops (module.host).
        host_namespace = "simt_host_" + _digest(text, filename, instantiations, *headers.items())[:12]
        program = cpu_shim(program) + _host_glue(parse_host_functions(text), host_namespace)
    key = _digest(mode, _mode_flags(mode), include, _cxx(), program,
                  (_torch_variant(), _torch_flags()) if with_torch else "no torch",
                  *(f"{p}\n{p.read_text()}" for p in _simt_files()),
                  *(f"{p}\n{t}" for p, t in headers.items()))[:16]
    directory = BUILD_ROOT / mode / f"source-{key}"  # torch is neither included nor linked
    directory.mkdir(parents=True, exist_ok=True)
    source = _mirror_local_headers(headers, filename, directory) / "kernels_cu.cpp"
    _write_if_changed(source, program)
    name = f"ep_simt_source_{key}"
    includes = [SIMT_DIR / "include", SIMT_DIR, include]
    if pathlib.Path(filename).is_file():  # its quoted #includes are relative to it
        includes.insert(2, pathlib.Path(filename).parent)
    library = _build_library(name, source, mode, includes, directory, with_torch=with_torch)
    return _SourceLibrary(library, bindings, mode, host_namespace)


# The CPU shim of a source that includes torch's headers: its CPU tensors stand for CUDA
# tensors (device checks ask for the CPU), its current CUDA stream is the emulator's one
# stream (a null cudaStream_t), and its CUDA error checks read the emulator's runtime
# functions (c10's would ask a CUDA driver): replacements within a line, so lines keep
# their numbers.
_CPU_SHIM = [
    (r"\b(?:at|c10)::cuda::getCurrentCUDAStream\s*\(\s*\)", "cudaStream_t{}"),
    (r"\b((?:at|c10|torch)::)?DeviceType::CUDA\b", r"\1DeviceType::CPU"),
    (r"\b((?:at|c10|torch)::)?kCUDA\b", r"\1kCPU"),
    (r"\.is_cuda\(\s*\)", ".is_cpu()"),
    (r"\bC10_CUDA_KERNEL_LAUNCH_CHECK\s*\(\s*\)", "::simt::cuda_check(cudaGetLastError())"),
    (r"\bC10_CUDA_CHECK\s*\(", "::simt::cuda_check("),
]
# Before the rewritten source's #line 1: it adds no line to the source's numbering.
_CPU_SHIM_PRELUDE = """namespace simt {
inline void cuda_check(cudaError_t error) {
  if (error != cudaSuccess) throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(error));
}
}  // namespace simt
"""


def cpu_shim(program: str) -> str:
    """`program` (rewrite's output: simt.h's #include, then #line 1) with the CPU shim's
    replacements (_CPU_SHIM) and what they call."""
    import re

    for pattern, replacement in _CPU_SHIM:
        program = re.sub(pattern, replacement, program)
    include, rest = program.split("\n", 1)
    return f"{include}\n{_CPU_SHIM_PRELUDE}{rest}"


def _host_glue(names: list[str], namespace: str) -> str:
    """The host functions registered as torch ops of `namespace`, their schemas inferred
    from their C++ types (torch::Library::def with a function pointer)."""
    if not names:
        return ""
    lines = ['#line 1 "<simt host glue>"', "#include <torch/library.h>",
             f"TORCH_LIBRARY({namespace}, m) {{"]
    lines += [f'  m.def("{name.split("::")[-1]}", &::{name});' for name in names]
    return "\n".join([*lines, "}"]) + "\n"


def _mirror_local_headers(headers: dict, filename: str, directory: pathlib.Path) -> pathlib.Path:
    """Where the program is compiled from: `directory`, or, when a header the source
    includes with quotes declares __shared__ variables, the source's place in a copy of
    its local headers under directory/local, each header with __shared__ rewritten as
    the source is. A quoted #include looks next to the file that includes it first, so
    the copies are found before the originals, also by each other and through `../`.
    Each copy starts with a #line naming its original: reports name the original's lines.
    `headers`: _local_headers of the source.
    """
    if not any("__shared__" in code_mask(h) for h in headers.values()):
        return directory
    source_dir = pathlib.Path(filename).resolve().parent
    root = pathlib.Path(os.path.commonpath([source_dir, *(path.parent for path in headers)]))
    mirror = directory / "local"
    for path, header in headers.items():
        target = mirror / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        escaped = str(path).replace("\\", "\\\\").replace('"', '\\"')
        copy = rewrite(header, str(path)) if "__shared__" in code_mask(header) else (
            f'#line 1 "{escaped}"\n{header}')
        _write_if_changed(target, copy)
    place = mirror / source_dir.relative_to(root)
    place.mkdir(parents=True, exist_ok=True)
    return place


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

    def __init__(self, module: "EmulatedModule", signature: Binding):
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

        params, name = self.signature.parameters, self.signature.key
        if len(args) != len(params):
            raise TypeError(f"{name} takes {len(params)} arguments ({self}), got {len(args)}")
        dtypes = _pointer_dtypes()
        for p, value in zip(params, args):
            if p.pointer:
                if value is None:
                    continue
                if not isinstance(value, torch.Tensor):
                    raise TypeError(f"{name}: {p.name} ({p.type}) takes a tensor, got {type(value).__name__}")
                if value.device.type != "cpu":
                    raise ValueError(f"{name}: {p.name} must be a CPU tensor (the emulator runs on the CPU), got {value.device}")
                expected = dtypes.get(p.base)
                if expected and value.dtype not in expected:
                    raise TypeError(f"{name}: {p.name} ({p.type}) needs a tensor of dtype "
                                    f"{' or '.join(map(str, expected))}, got {value.dtype}")
            elif not isinstance(value, (bool, int, float)):
                raise TypeError(f"{name}: {p.name} ({p.type}) takes a number, got {type(value).__name__}")
        values = list(args)
        for i, p in enumerate(params):
            if not p.pointer and p.base in ("__half", "half", "__nv_bfloat16", "nv_bfloat16"):
                dtype = torch.float16 if "half" in p.base else torch.bfloat16
                values[i] = int(torch.tensor(float(values[i]), dtype=dtype).view(torch.int16).item()) & 0xFFFF
        checked = []
        for output in outputs:
            index = output if isinstance(output, int) else next(
                (i for i, p in enumerate(params) if p.name == output), None)
            if index is None or not 0 <= index < len(params) or not params[index].pointer:
                raise ValueError(f"outputs: {output!r} is not a pointer parameter of {self.signature!r}")
            if values[index] is None or not values[index].is_contiguous():
                raise ValueError(f"outputs: {params[index].name} must be a contiguous tensor to be checked")
            checked.append((params[index].name, values[index]))
        for _, tensor in checked:
            _poison_view(tensor).fill_(_poison_value(tensor))
        self._module._call("launch", (name, grid, block, shared, values))
        for parameter, tensor in checked:
            check_written(tensor, name, parameter)


def _dim3(what, value):
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 0 for d in dims):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 non-negative ints, got {value!r}")
    return tuple(dims) + (1,) * (3 - len(dims))


class TemplateKernel:
    """A template __global__ function of a module from `load_source`.

    ``kernel[float, 256]`` (C++ spellings as strings, ints, bools or torch dtypes)
    is the launchable instantiation ``kernel<float, 256>``; one not built yet is
    built then (pass ``instantiate=`` to `load_source` to build them all at once).
    """

    def __init__(self, module: "EmulatedModule", signature: KernelSignature):
        self._module, self.signature = module, signature
        self.__doc__ = repr(signature)

    def __repr__(self):
        return f"<emulated template kernel {self.signature!r}>"

    def __getitem__(self, arguments) -> Kernel:
        return self._module._instantiation(self.signature, template_arguments(arguments))


def _local_headers(text: str, filename: str) -> dict[pathlib.Path, str]:
    """The headers the source includes with quotes, where they are found next to the file
    including them (recursively): resolved path -> text."""
    import re

    found: dict[pathlib.Path, str] = {}
    source = pathlib.Path(filename)
    pending = [(text, source.resolve().parent)] if source.is_file() else []
    while pending:
        current, directory = pending.pop()
        for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', current, re.M):
            header = (directory / name).resolve()
            if header in found or not header.is_file():
                continue
            found[header] = header.read_text(errors="replace")
            pending.append((found[header], header.parent))
    return found


def _struct_parameters(kernel: KernelSignature, source: str) -> list:
    """Parameters that take a struct by value (a template-id, or a struct or class the
    source or its local headers define): Python cannot build those."""
    import re

    return [p for p in kernel.parameters if not p.pointer and not p.known and (
        "<" in p.base
        or re.search(rf"(?<!enum )\b(struct|class)\s+{re.escape(p.base.split('::')[-1])}\b", source))]


class HostFunctions:
    """The host functions of a source that includes torch's headers (an extension's .cu
    file): ``module.host.name(args)`` calls ``name`` in the worker, through the CPU shim.

    Those found are the functions at namespace scope that return ``at::Tensor``, or
    return nothing and take one, each by its own name where that is unique. They are registered as torch ops (schemas
    inferred from their C++ types), so they take CPU tensors and numbers (double,
    int64_t, bool) and return what they return; tensors they write are updated in place.
    The shim lets the host code run on the CPU as it would on a GPU: ``kCUDA`` and
    ``DeviceType::CUDA`` read as the CPU's (a device check for CUDA tensors passes for CPU
    tensors), ``.is_cuda()`` as ``.is_cpu()``, and ``at::cuda::getCurrentCUDAStream()``
    is the emulator's one stream (a null ``cudaStream_t``); its ``<<<>>>`` launches run in
    the emulator, with its reports. Not there: ``TORCH_LIBRARY_IMPL(..., CUDA, ...)``
    registrations (CPU tensors never reach the CUDA key; call the function itself).
    """

    def __init__(self, module: "EmulatedModule", names: list[str]):
        self._module = module
        self._names = {name.split("::")[-1]: name for name in names}

    def __dir__(self):
        return sorted(self._names)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._names:
            known = ", ".join(sorted(self._names)) or "none"
            raise AttributeError(f"{name!r} is not a host function of the source on at::Tensor "
                                 f"(its host functions: {known})")
        return lambda *args: self._module._call("host", (self._names[name], args))

    def __repr__(self):
        return f"<host functions of {self._module.filename!r}: {', '.join(sorted(self._names)) or 'none'}>"


class EmulatedModule:
    """The kernels of one CUDA source, built for the emulator (see load_source).

    Each kernel is an attribute (``module.add_one``) and an item under its qualified
    name (``module["ops::add_one"]``); a template kernel's instantiations are items
    of it (``module.scale[float, 256]``)."""

    def __init__(self, source, filename, mode, schedule, seed, max_blocks, timeout,
                 instantiate=(), gpu_like=False):
        self.source, self.filename, self.mode = source, filename, mode
        self.schedule, self.seed, self.max_blocks, self.timeout = schedule, seed, max_blocks, timeout
        self.gpu_like = gpu_like
        self.kernels = {k.qualified: k for k in parse_kernels(source)}
        # The headers it includes with quotes, as they are now: part of what the worker builds.
        self._headers = tuple((str(path), header) for path, header in _local_headers(source, filename).items())
        self._declarations = "\n".join([source, *(header for _, header in self._headers)])
        self.instantiations: list[tuple[str, tuple[str, ...]]] = []
        self._launchers = {}
        for k in self.kernels.values():
            self._launchers[k.qualified] = TemplateKernel(self, k) if k.template else Kernel(self, Binding(k))
        self._structs: dict[str, list[str]] = {}
        self.host = HostFunctions(self, parse_host_functions(source) if includes_torch(
            source, self._headers) else [])
        names = [k.name for k in self.kernels.values()]
        for k in self.kernels.values():
            # A kernel named like the module's own attributes (seed, mode, ...) is an
            # item only: module["seed"].
            if names.count(k.name) == 1 and not hasattr(self, k.name):
                setattr(self, k.name, self._launchers[k.qualified])
        for text in instantiate:
            name, arguments = parse_instantiation(text)
            kernel = self._kernel(name)
            if not kernel.template:
                raise ValueError(f"instantiate: {kernel.qualified} is not a template")
            self._add(kernel, arguments)

    def _kernel(self, name: str) -> KernelSignature:
        if name in self.kernels:
            return self.kernels[name]
        found = [k for k in self.kernels.values() if name == k.name]
        if len(found) != 1:
            known = ", ".join(self.kernels) or "none"
            why = "names several" if found else "is not a __global__ function of the source"
            raise KeyError(f"{name!r} {why} (its kernels: {known})")
        return found[0]

    def __getitem__(self, name: str):
        return self._launchers[self._kernel(name).qualified]

    def _add(self, kernel: KernelSignature, arguments: tuple[str, ...]) -> Binding:
        binding = Binding(kernel, arguments)  # checks the number of arguments
        entry = (kernel.qualified, binding.arguments)
        if entry not in self.instantiations:
            self.instantiations.append(entry)
            self._launchers[binding.key] = Kernel(self, binding)
        return binding

    def _instantiation(self, kernel: KernelSignature, arguments: tuple[str, ...]) -> Kernel:
        known = len(self.instantiations)
        binding = self._add(kernel, arguments)
        if len(self.instantiations) > known:
            # Build now (in the worker), so that a compiler error comes with the
            # instantiation; one that does not build is not kept.
            try:
                self._describe()
            except Exception:
                del self.instantiations[known:]
                del self._launchers[binding.key]
                raise
        return self._launchers[binding.key]

    def _call(self, function: str, args: tuple):
        """Call `function` of the library in the worker with `args`; the call wrote into
        the worker's copies of the tensors: every storage is copied back."""
        import torch

        result, storages, originals = _worker(counting_mode(self.mode)).call(
            self._target(), function, _settings(self.schedule, self.seed, self.max_blocks, self.gpu_like),
            args, {}, self.timeout)
        for original, written in zip(originals, storages):
            torch.empty(0, dtype=torch.uint8).set_(original).copy_(written)
        return result

    def _describe(self) -> None:
        """Build and load (in the worker); learn which parameters take structs."""
        self._structs = _worker(counting_mode(self.mode)).call(
            self._target(), "describe", _settings(self.schedule, self.seed, self.max_blocks, self.gpu_like),
            (), {}, self.timeout)[0]

    def _target(self):
        """What the worker builds and loads: the source and the instantiations asked for."""
        return ("source", self.source, self.filename, tuple(self.instantiations), self._headers)

    @property
    def unbound(self) -> dict[str, str]:
        """Kernels that cannot be launched from Python as they are, and why."""
        reasons = {}
        for k in self.kernels.values():
            # Known from the build for a kernel that is not a template; for a template, from
            # its source (a template-id, or a struct or class it or its local headers define).
            structs = ([p for p in k.parameters if p.name in self._structs.get(k.qualified, ())]
                       if not k.template else _struct_parameters(k, self._declarations))
            if structs:
                reasons[k.qualified] = (
                    f"takes {', '.join(map(repr, structs))} by value: Python cannot build a struct; "
                    "launch it through a C++ host function of the source")
            elif k.template:
                example = ", ".join("float" if kind == "type" else "4" for kind in k.template_kinds)
                reasons[k.qualified] = (
                    f"a template: launch an instantiation, module[{k.qualified!r}][{example}][grid, block](...)"
                    if k.namespace else
                    f"a template: launch an instantiation, module.{k.name}[{example}][grid, block](...)")
        return reasons

    def __repr__(self):
        names = ", ".join(k for k in self.kernels if k not in self.unbound)
        if not names:
            names = "no kernel Python can launch as it is (see .unbound)"
        return f"<emulated CUDA module {self.filename!r} ({self.mode}): {names}>"


def load_source(source, *, mode="fast", name="kernel", schedule="forward", seed=0,
                max_blocks=0, timeout=DEFAULT_TIMEOUT, instantiate=(), gpu_like=False) -> EmulatedModule:
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

    Kernels inside namespaces are attributes by their own name (and items by their
    qualified one, ``module["ops::add_one"]``). A template kernel is launched as an
    instantiation, ``module.scale[float, 4][grid, block](...)``; ``instantiate=
    ["scale<float, 4>", ...]`` builds those with the module instead of one build
    each. A parameter whose type the emulator does not know by name (a typedef, an
    enum) takes a number, converted to its type by the compiled glue.

    A source that includes torch's headers (an extension's whole .cu file, host code
    and all) is built with them, and its host functions on ``at::Tensor`` are
    ``module.host.name(...)``, called through a CPU shim (HostFunctions).

    ``gpu_like=True`` trades two of the strict rules for what hardware tolerates:
    threads that have exited count as arrived at ``__syncthreads()`` (and are not
    counted by ``__syncthreads_count``), and a warp collective's mask may name lanes
    that a partial warp (a block size that is not a multiple of 32) does not have:
    they are left out of it, and a shuffle that reads one returns the caller's own
    value (a GPU leaves it undefined). CUDA's programming guide promises neither.
    Every other report stays.
    """
    _check_mode(mode)
    _settings(schedule, seed, max_blocks, gpu_like)
    if isinstance(source, pathlib.Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))
    ):
        path = pathlib.Path(source).resolve()
        text, filename = path.read_text(), str(path)
    else:
        text, filename = str(source), f"{name}.cu"
    if isinstance(instantiate, str):
        instantiate = [instantiate]
    cuda_include_dir()
    module = EmulatedModule(text, filename, mode, schedule, seed, max_blocks, timeout, instantiate,
                            gpu_like)
    module._describe()  # builds now (in the worker), so that errors come with the load
    return module
