"""The worker processes: one per build mode, started at the first call (a
sanitizer's runtime must be preloaded, and a crashing kernel must take down
the worker, not the reader's Python), and how tensors travel to them."""

from __future__ import annotations

import ctypes
import mmap
import os
import pathlib
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import threading

from extending_pytorch.emulator.traffic import active as _active_counter
from extending_pytorch.emulator.traffic import add as _add_counts
from extending_pytorch.emulator.toolchain import (
    _ASAN_FIBER_WARNING,
    SCHEDULES,
    _check_build_mode,
    _check_mode,
    _sanitizer_env,
    cuda_include_dir,
)

# ---- Tensors across the process boundary ---------------------------------------------------
#
# A tensor travels as its whole storage (bytes) plus dtype, sizes, strides and
# storage offset, so a view arrives as the same view: misaligned, strided,
# expanded (stride 0) or sharing memory with another argument. The storages of a
# call's arguments go through shared memory (_SharedStorages), the rest through
# the pipe; every storage starts 64-byte aligned on both sides, so the alignment
# of a view's first element is kept too. The worker does not import torch for a
# load_source launch (its start took seconds, and a sanitizer's longer): the dtype
# travels as its name, the storages as memory the worker allocates (_Memory), and a
# tensor argument as a _View of it; the book's kernels, which allocate tensors, get
# torch tensors over the same memory.


class _TensorRef:
    def __init__(self, storage, dtype, itemsize, size, stride, offset):
        self.storage, self.dtype, self.itemsize = storage, dtype, itemsize  # dtype: its name
        self.size, self.stride, self.offset = size, stride, offset


def _is_tensor(value) -> bool:
    torch = sys.modules.get("torch")  # no torch imported: no tensor either
    return torch is not None and isinstance(value, torch.Tensor)


def _pack(value, storages: list, index: dict, originals: list | None = None):
    if _is_tensor(value):
        import torch

        storage = value.untyped_storage()
        key = storage.data_ptr(), storage.nbytes()
        if key not in index:
            index[key] = len(storages)
            storages.append(torch.empty(0, dtype=torch.uint8).set_(storage))
            if originals is not None:
                originals.append(storage)
        return _TensorRef(index[key], str(value.dtype).removeprefix("torch."), value.element_size(),
                          tuple(value.shape), value.stride(), value.storage_offset())
    if isinstance(value, (list, tuple)):
        return type(value)(_pack(v, storages, index, originals) for v in value)
    if isinstance(value, dict):
        return {k: _pack(v, storages, index, originals) for k, v in value.items()}
    return value


def _unpack(value, make):
    """`value` with each _TensorRef replaced by make(ref)."""
    if isinstance(value, _TensorRef):
        return make(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_unpack(v, make) for v in value)
    if isinstance(value, dict):
        return {k: _unpack(v, make) for k, v in value.items()}
    return value


def _tensor_over(storages: list):
    """make(ref) for _unpack: a torch tensor, the view `ref` of its uint8 storage."""
    import torch

    def make(ref):
        return torch.empty(0, dtype=getattr(torch, ref.dtype)).set_(
            storages[ref.storage].untyped_storage(), ref.offset, ref.size, ref.stride)

    return make


# ---- Guard zones: writes outside a tensor's memory, seen without a sanitizer -----------------
#
# In the fast and races modes each storage a call is given lives, in the worker, between two
# guard zones of GUARD bytes of a known pattern; a kernel that writes past either end of it
# (the classic unguarded tail, y[i] for i == n) changes a guard, which is reported after the
# call, naming the argument. Not seen: a write past a view's end that stays inside its
# storage, one that jumps over the guard, and reads (the memory mode's AddressSanitizer sees
# all of those, and runs without guards, which would hide them from it).
GUARD = 4096  # a multiple of every element size and of 64: alignment is kept
# The zones' bytes: they change from byte to byte, so that a kernel storing one constant
# (0, or any byte) past the end is seen wherever it lands.
_GUARD_PATTERN = bytes((i * 167 + 0xA7) % 251 for i in range(GUARD))


class _Memory:
    """A storage's bytes in the worker: copied from `address` into memory of their own,
    from posix_memalign (64-byte aligned; in memory mode its bounds are AddressSanitizer's
    as the allocation is exact), between two guard zones where `guarded`."""

    def __init__(self, address: int, nbytes: int, guarded: bool):
        libc = _libc()
        self.nbytes, guard = nbytes, GUARD if guarded else 0
        pointer = ctypes.c_void_p()
        if libc.posix_memalign(ctypes.byref(pointer), 64, nbytes + 2 * guard) != 0:
            raise MemoryError(f"the worker could not allocate {nbytes + 2 * guard} bytes")
        self.base = pointer.value or 0
        self.address = self.base + guard  # the storage's first byte
        self.guarded = guarded
        if guarded:
            ctypes.memmove(self.base, _GUARD_PATTERN, GUARD)
            ctypes.memmove(self.address + nbytes, _GUARD_PATTERN, GUARD)
        ctypes.memmove(self.address, address, nbytes)

    def violation(self) -> str | None:
        """What was written outside the storage (offsets in bytes from its start), or None."""
        if not self.guarded:
            return None
        n, parts = self.nbytes, []
        for zone, offset in ((self.base, -GUARD), (self.address + n, n)):
            found = ctypes.string_at(zone, GUARD)
            if found != _GUARD_PATTERN:
                changed = [i for i, (a, b) in enumerate(zip(found, _GUARD_PATTERN)) if a != b]
                parts.append(f"bytes {offset + changed[0]} to {offset + changed[-1]}")
        if not parts:
            return None
        return " and ".join(parts) + f", outside its memory (bytes 0 to {n - 1})"

    def free(self):
        if self.base:
            _libc().free(self.base)
        self.base = self.address = 0

    def as_tensor(self):
        """A torch uint8 tensor over the storage's bytes (the book's kernels)."""
        import torch

        if self.nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer((ctypes.c_ubyte * self.nbytes).from_address(self.address),
                                dtype=torch.uint8)


class _View:
    """A tensor argument of a load_source launch in the worker, without torch: where its
    first element is, and its shape (the traffic counter reads them)."""

    def __init__(self, ref: _TensorRef, memory: _Memory):
        self.ref, self.memory = ref, memory
        self.shape = ref.size

    def data_ptr(self) -> int:
        return self.memory.address + self.ref.offset * self.ref.itemsize

    def element_size(self) -> int:
        return self.ref.itemsize

    def stride(self) -> tuple:
        return self.ref.stride

    def numel(self) -> int:
        count = 1
        for size in self.ref.size:
            count *= size
        return count


_libc_handle = None


def _libc():
    global _libc_handle
    if _libc_handle is None:
        libc = ctypes.CDLL(None)  # the process's own symbols: a preloaded sanitizer's first
        libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                        ctypes.c_size_t]
        libc.posix_memalign.restype = ctypes.c_int
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        _libc_handle = libc
    return _libc_handle


class _SharedStorages:
    """The storages of a call's tensors in one file in shared memory that both processes
    map: the caller copies them in, the worker reads them there (and, for a load_source
    launch, writes them back there), so their bytes never go through the pipe (pickling
    16 MiB tensors through it took longer than many kernels)."""

    def __init__(self, storages: list):
        import torch

        self.layout, total = [], 0
        for storage in storages:
            self.layout.append((total, storage.numel()))
            total += (storage.numel() + 63) // 64 * 64
        self.path, self.total = None, total
        if total == 0:
            self.slices = [torch.empty(0, dtype=torch.uint8) for _ in storages]
            return
        directory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        fd, self.path = tempfile.mkstemp(prefix="ep-simt-", dir=directory)
        try:
            os.ftruncate(fd, total)
        finally:
            os.close(fd)
        mapping = torch.from_file(self.path, shared=True, size=total, dtype=torch.uint8)
        self.slices = [mapping[offset : offset + size] for offset, size in self.layout]
        for piece, storage in zip(self.slices, storages):
            piece.copy_(storage)

    def handle(self):
        return self.path, self.total, self.layout

    def close(self):
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _map_shared(handle):
    """The worker's side of a _SharedStorages handle: (the mapping, to keep while the
    addresses are used; the address of each storage), without torch."""
    path, total, layout = handle
    if path is None:
        return None, [0 for _ in layout]
    with open(path, "r+b") as file:
        mapping = mmap.mmap(file.fileno(), total)
    view = (ctypes.c_ubyte * total).from_buffer(mapping)
    base = ctypes.addressof(view)
    return (mapping, view), [base + offset for offset, _ in layout]


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
    """The worker's loop: build and load what is asked, call it, answer (torch is
    imported where a target needs it: _load_target)."""
    # The sanitizer runtime is loaded; compilers started from here must not load it.
    os.environ.pop("LD_PRELOAD", None)
    targets = {}
    while True:
        try:
            request = _receive(read_fd)
        except EOFError:
            return
        module, memories, mapping = None, [], None
        try:
            target, function, settings, shared, args, kwargs = request
            if target not in targets:
                targets[target] = _load_target(mode, target)
            module = targets[target]
            module.configure(*settings)
            names = module.storage_names(function, args) if hasattr(module, "storage_names") else {}
            # Each storage copied out of the shared file into memory of its own: its bounds
            # are AddressSanitizer's (memory mode), or it lies between guard zones.
            mapping, addresses = _map_shared(shared)
            memories = [_Memory(address, size, guarded=mode != "memory")
                        for address, (_, size) in zip(addresses, shared[2])]
            if target[0] == "book" or function == "host":  # (torch is imported for those)
                make = _tensor_over([m.as_tensor() for m in memories])
            else:
                def make(ref):
                    return _View(ref, memories[ref.storage])
            result = getattr(module, function)(*_unpack(args, make), **_unpack(kwargs, make))
            violations = [(i, where) for i, m in enumerate(memories) if (where := m.violation())]
            if violations:
                what = "; ".join(f"{names.get(i, f'tensor argument #{i + 1}')}: {where}"
                                 for i, where in violations)
                raise RuntimeError(f"the kernel wrote outside the memory it was given: {what}. "
                                   "Check the guard (if (i < n)) of its stores. (Its other "
                                   "writes are not copied back.)")
            out_storages = []
            written = target[0] == "source"  # a launch writes into its arguments: send them back
            if written:
                for address, memory in zip(addresses, memories):
                    ctypes.memmove(address, memory.address, memory.nbytes)
            counted = module.counter.take() if module.counter is not None else []
            reply = ("ok", _pack(result, out_storages, {}), out_storages, written, counted)
        except Exception as error:  # reported to the caller as it was raised
            kind = type(error).__name__ if type(error).__name__ in _RERAISED else "RuntimeError"
            if module is not None and module.counter is not None:
                module.counter.take()  # a failed call's counts are not kept
            reply = ("error", (kind, str(error)), None, None, None)
        _libc().fflush(None)
        sys.stdout.flush()
        sys.stderr.flush()
        _send(write_fd, reply)  # (a result's tensors are pickled here: the memory may go)
        for memory in memories:
            memory.free()
        del mapping


def _load_target(mode: str, target: tuple):
    """Build (if needed) and load a target: ("book", csrc) or ("source", text, filename,
    instantiations, headers). torch is imported for the book's kernels (their binding
    allocates tensors) and for a source that includes torch's headers (its library links
    torch) only."""
    from extending_pytorch.emulator.source import _source_library, includes_torch

    if target[0] == "book" or includes_torch(target[1], target[4]):
        import logging

        # (Its warning that no CUDA runtime is found is beside the point here.)
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        import torch

        torch.set_num_threads(1)
    if target[0] == "book":
        from extending_pytorch.emulator.book import _book_module

        return _book_module(mode, target[1])
    return _source_library(mode, *target[1:])


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
        package_root = str(pathlib.Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + os.pathsep + env.get("PYTHONPATH", "")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()
        # The package's __init__ imports torch (its chapters' helpers): the worker stands
        # an empty package in for it, so that only what a call needs is imported.
        code = (
            "import sys, types; package = types.ModuleType('extending_pytorch'); "
            f"package.__path__ = [{str(pathlib.Path(__file__).resolve().parents[1])!r}]; "
            "sys.modules['extending_pytorch'] = package; "
            "from extending_pytorch.emulator.worker import _serve; "
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
            shared = _SharedStorages(storages)
            try:
                _send(self.write_fd, (target, function, settings, shared.handle(), *packed))
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
                    + _shorten(report)
                ) from None
            finally:
                shared.close()  # the name; the mappings live as long as their tensors
            self._forward_output()
            status, result, out_storages, written, counted = reply
            if status == "error":
                kind, message = result
                raise _RERAISED[kind](message)
            if counted:
                _add_counts(counted)
            if out_storages:
                result = _unpack(result, _tensor_over(out_storages))
            return result, (shared.slices if written else None), originals


def _shorten(text: str, head: int = 200_000, tail: int = 20_000) -> str:
    """A report as it is, unless it is huge: then its beginning (a sanitizer's first
    report, with both accesses of a race) and its end (the kernel, block and thread)."""
    text = text.strip()
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n... ({len(text) - head - tail} characters left out) ...\n{text[-tail:]}"


_workers: dict[str, _Worker] = {}


def _worker(mode: str) -> _Worker:
    _check_build_mode(mode)
    if mode not in _workers:
        _workers[mode] = _Worker(mode)
    return _workers[mode]


def shutdown() -> None:
    """Stop the worker processes (they also stop when Python exits)."""
    for worker in _workers.values():
        with worker.lock:
            worker._stop()
    _workers.clear()


def _settings(schedule: str, seed: int, max_blocks: int, gpu_like: bool = False):
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not isinstance(max_blocks, int) or max_blocks < 0:
        raise ValueError(f"max_blocks must be a non-negative int (0: no cap), got {max_blocks!r}")
    if not isinstance(gpu_like, bool):
        raise ValueError(f"gpu_like must be True or False, got {gpu_like!r}")
    return (schedule, seed, max_blocks, gpu_like)


def counting_mode(mode: str) -> str:
    """The build a call runs in: `mode`, or the counter's inside emulator.traffic()."""
    _check_mode(mode)
    if _active_counter() is None:
        return mode
    if mode != "fast":
        raise ValueError(
            "emulator.traffic() counts in a build of its own, with fast mode's checks: call with "
            f"mode='fast' (the default) inside it, got mode={mode!r}")
    return "traffic"


def _call(target, function, args, kwargs=None, *, mode, schedule, seed, max_blocks, timeout):
    cuda_include_dir()  # fails early, with the reason, where the headers are missing
    result, _, _ = _worker(counting_mode(mode)).call(
        target, function, _settings(schedule, seed, max_blocks), args, kwargs or {}, timeout
    )
    return result


