"""The worker processes: one per build mode, started at the first call (a
sanitizer's runtime must be preloaded, and a crashing kernel must take down
the worker, not the reader's Python), and how tensors travel to them."""

from __future__ import annotations

import ctypes
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
# of a view's first element is kept too.


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
            storages.append(torch.empty(0, dtype=torch.uint8).set_(storage))
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
        buffer, shift = storages[value.storage], 0
        if isinstance(buffer, _Guarded):  # the storage starts GUARD bytes in
            buffer, shift = buffer.buffer, GUARD // value.dtype.itemsize
        return torch.empty(0, dtype=value.dtype).set_(
            buffer.untyped_storage(), value.offset + shift, value.size, value.stride)
    if isinstance(value, (list, tuple)):
        return type(value)(_unpack(v, storages) for v in value)
    if isinstance(value, dict):
        return {k: _unpack(v, storages) for k, v in value.items()}
    return value


# ---- Guard zones: writes outside a tensor's memory, seen without a sanitizer -----------------
#
# In the fast and races modes each storage a call is given lives, in the worker, between two
# guard zones of GUARD bytes of a known pattern; a kernel that writes past either end of it
# (the classic unguarded tail, y[i] for i == n) changes a guard, which is reported after the
# call, naming the argument. Not seen: a write past a view's end that stays inside its
# storage, one that jumps over the guard, and reads (the memory mode's AddressSanitizer sees
# all of those, and runs without guards, which would hide them from it).
GUARD = 4096  # a multiple of every element size and of 64: alignment is kept


def _guard_pattern():
    """The zones' bytes: they change from byte to byte, so that a kernel storing one
    constant (0, or any byte) past the end is seen wherever it lands."""
    import torch

    return ((torch.arange(GUARD) * 167 + 0xA7) % 251).to(torch.uint8)


class _Guarded:
    """A storage's bytes between two guard zones: buffer[GUARD : GUARD + nbytes]."""

    def __init__(self, storage):
        import torch

        self.nbytes = storage.numel()
        self.buffer = torch.empty(self.nbytes + 2 * GUARD, dtype=torch.uint8)
        self.buffer[:GUARD] = _guard_pattern()
        self.buffer[GUARD + self.nbytes :] = _guard_pattern()
        self.buffer[GUARD : GUARD + self.nbytes].copy_(storage)

    def contents(self):
        return self.buffer[GUARD : GUARD + self.nbytes]


def _guard_violations(buffers: list) -> list[tuple[int, str]]:
    """(storage index, what was written where) for each storage whose guards changed."""
    found = []
    for i, guarded in enumerate(buffers):
        if not isinstance(guarded, _Guarded):
            continue
        buffer, n = guarded.buffer, guarded.nbytes
        before = (buffer[:GUARD] != _guard_pattern()).nonzero()
        after = (buffer[GUARD + n :] != _guard_pattern()).nonzero()
        # Offsets in bytes from the start of the tensor's memory (its storage).
        parts = []
        if len(before):
            parts.append(f"bytes {int(before[0]) - GUARD} to {int(before[-1]) - GUARD}")
        if len(after):
            parts.append(f"bytes {n + int(after[0])} to {n + int(after[-1])}")
        if parts:
            found.append((i, " and ".join(parts) + f", outside its memory (bytes 0 to {n - 1})"))
    return found


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
        self.slices = _map_shared(self.handle())
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


def _map_shared(handle) -> list:
    """The storages of a _SharedStorages handle, as uint8 views of the shared file."""
    import torch

    path, total, layout = handle
    if path is None:
        return [torch.empty(0, dtype=torch.uint8) for _ in layout]
    mapping = torch.from_file(path, shared=True, size=total, dtype=torch.uint8)
    return [mapping[offset : offset + size] for offset, size in layout]


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
        module = None
        try:
            target, function, settings, shared, args, kwargs = request
            storages = _map_shared(shared)
            if target not in targets:
                from extending_pytorch.emulator.book import _book_module
                from extending_pytorch.emulator.source import _source_library

                if target[0] == "book":
                    targets[target] = _book_module(mode, target[1])
                else:
                    targets[target] = _source_library(mode, *target[1:])
            module = targets[target]
            module.configure(*settings)
            names = module.storage_names(function, args) if hasattr(module, "storage_names") else {}
            # Each storage copied out of the shared file: into its own allocation, so that
            # AddressSanitizer sees its bounds (memory mode), or between guard zones.
            buffers = ([s.clone() for s in storages] if mode == "memory"
                       else [_Guarded(s) for s in storages])
            args = _unpack(args, buffers)
            kwargs = _unpack(kwargs, buffers)
            result = getattr(module, function)(*args, **kwargs)
            violations = _guard_violations(buffers)
            if violations:
                what = "; ".join(f"{names.get(i, f'tensor argument #{i + 1}')}: {where}"
                                 for i, where in violations)
                raise RuntimeError(f"the kernel wrote outside the memory it was given: {what}. "
                                   "Check the guard (if (i < n)) of its stores. (Its other "
                                   "writes are not copied back.)")
            out_storages, out_index = [], {}
            written = target[0] == "source"  # a launch writes into its arguments: send them back
            if written:
                for piece, buffer in zip(storages, buffers):
                    piece.copy_(buffer.contents() if isinstance(buffer, _Guarded) else buffer)
            counted = module.counter.take() if module.counter is not None else []
            reply = ("ok", _pack(result, out_storages, out_index), out_storages, written, counted)
        except Exception as error:  # reported to the caller as it was raised
            kind = type(error).__name__ if type(error).__name__ in _RERAISED else "RuntimeError"
            if module is not None and module.counter is not None:
                module.counter.take()  # a failed call's counts are not kept
            reply = ("error", (kind, str(error)), None, None, None)
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
        package_root = str(pathlib.Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + os.pathsep + env.get("PYTHONPATH", "")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()
        code = (
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
            return _unpack(result, out_storages), (shared.slices if written else None), originals


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


