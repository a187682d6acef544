"""Memory traffic: the bytes a kernel's own loads and stores move in global
memory, and the 32-byte sectors they touch, counted without a GPU.

``with emulator.traffic() as t:`` counts every launch inside the block:

- CUDA kernels run by the emulator (the book's, and any ``load_source``
  module), in a build of their own: the kernel is compiled with
  ThreadSanitizer's instrumentation, which calls a function before each load
  and store, and linked with csrc/simt/traffic.h's functions in place of
  ThreadSanitizer's runtime. An access counts if a GPU thread makes it and its
  address lies in one of the launch's tensors (in the range of a tensor's own
  elements; where two tensor arguments overlap, the first counts; registers, shared memory and
  the emulator's own bookkeeping do not). The calls must use mode="fast" (the
  counting build has fast mode's checks).
- Triton kernels run by Triton's interpreter (TRITON_INTERPRET=1): a hook on
  its masked loads and stores counts the elements the mask lets through.

For each launch: bytes read and written per tensor (what the threads asked
for: an element read twice counts twice, as it does on a GPU whose caches do
not keep it), requests (warp-wide accesses) and sectors. Sectors are a model
of coalescing: the k-th access a lane makes at one instruction is grouped with
the k-th access of the other lanes of its warp at that instruction, as if the
warp ran in lockstep; a group touches each 32-byte sector once. 32 lanes
reading 32 consecutive floats: 4 sectors; reading a column (a stride of a
row): 32. A Triton load is one group per program. Caches are not modelled:
``sectors * 32`` is the traffic of a GPU whose L1 and L2 keep nothing between
instructions, which for rows of a few KiB streamed once is what Nsight
Compute's DRAM counters show.

Not counted: shared-memory bank conflicts; accesses a CUDA kernel makes through
memcpy or memset (library calls, which ThreadSanitizer's runtime would have
seen: a copy of a struct, ``Big b = x[i];``, is counted); Triton's atomics
(the interpreter does them outside its loads and stores); Triton kernels
compiled for a GPU (Nsight Compute measures those). Where two tensor
arguments overlap, an access counts for the first one named. The counter is
one per process: while a block is open, emulated calls from other Python
threads are counted too.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading

__all__ = ["BufferTraffic", "LaunchTraffic", "Traffic", "traffic"]

SECTOR = 32
WARP = 32

# csrc/simt/traffic.h's Record.
_FIELDS = [("address", "<u8"), ("pc", "<u8"), ("launch", "<u4"), ("block", "<u4"),
           ("thread", "<u2"), ("size", "<u2"), ("flags", "u1"), ("buffer", "u1"), ("unused", "<u2")]
_WRITE, _ATOMIC = 1, 2


@dataclasses.dataclass(frozen=True)
class BufferTraffic:
    """One tensor's traffic in one launch."""

    name: str
    nbytes: int  # the tensor's size: numel * element size
    bytes_read: int = 0
    bytes_written: int = 0
    sectors_read: int = 0
    sectors_written: int = 0


@dataclasses.dataclass(frozen=True)
class LaunchTraffic:
    """One launch: its kernel, geometry, and traffic per tensor."""

    kernel: str
    engine: str  # "CUDA (emulated)" or "Triton (interpreted)"
    grid: tuple
    block: tuple
    buffers: tuple  # of BufferTraffic, in the kernel's argument order
    # Loads and stores: warp-wide ones (CUDA; one per instruction and tensor it reaches) or
    # program-wide ones (Triton).
    requests_read: int = 0
    requests_written: int = 0

    @property
    def bytes_read(self) -> int:
        return sum(b.bytes_read for b in self.buffers)

    @property
    def bytes_written(self) -> int:
        return sum(b.bytes_written for b in self.buffers)

    @property
    def sectors_read(self) -> int:
        return sum(b.sectors_read for b in self.buffers)

    @property
    def sectors_written(self) -> int:
        return sum(b.sectors_written for b in self.buffers)

    @property
    def sectors(self) -> int:
        return self.sectors_read + self.sectors_written

    def buffer(self, name: str) -> BufferTraffic:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(f"{self.kernel} has no tensor argument {name!r}; it has "
                       f"{[b.name for b in self.buffers]}")


class _Totals:
    """Sums over launches (all of them, or one kernel's)."""

    def __init__(self, launches):
        self.launches = list(launches)

    bytes_read = property(lambda self: sum(x.bytes_read for x in self.launches))
    bytes_written = property(lambda self: sum(x.bytes_written for x in self.launches))
    sectors_read = property(lambda self: sum(x.sectors_read for x in self.launches))
    sectors_written = property(lambda self: sum(x.sectors_written for x in self.launches))
    sectors = property(lambda self: self.sectors_read + self.sectors_written)
    requests = property(lambda self: sum(x.requests_read + x.requests_written for x in self.launches))

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def buffer(self, name: str) -> BufferTraffic:
        """One tensor's traffic, summed over the launches that take it."""
        found = [x.buffer(name) for x in self.launches if any(b.name == name for b in x.buffers)]
        if not found:
            raise KeyError(f"no launch has a tensor argument {name!r}")
        return BufferTraffic(
            name, found[0].nbytes, sum(b.bytes_read for b in found), sum(b.bytes_written for b in found),
            sum(b.sectors_read for b in found), sum(b.sectors_written for b in found))


class Traffic(_Totals):
    """What ``traffic()`` counted: ``launches``, totals (``bytes_read``,
    ``bytes_written``, ``sectors``, ...) and ``kernels``, the same per kernel name."""

    def __init__(self):
        super().__init__([])

    @property
    def kernels(self) -> dict:
        names = dict.fromkeys(x.kernel for x in self.launches)
        return {name: _Totals(x for x in self.launches if x.kernel == name) for name in names}

    def rows(self, unit: int = 1) -> list[dict]:
        """One row per launch and tensor: bytes (divided by `unit`) and sectors per request."""
        rows = []
        for i, x in enumerate(self.launches):
            for b in x.buffers:
                if not (b.bytes_read or b.bytes_written):
                    continue
                rows.append({
                    "launch": i, "kernel": x.kernel, "tensor": b.name,
                    "read": b.bytes_read / unit, "written": b.bytes_written / unit,
                    "sectors": b.sectors_read + b.sectors_written,
                })
        return rows

    def __repr__(self):
        return (f"<Traffic: {len(self.launches)} launches, {self.bytes_read} bytes read, "
                f"{self.bytes_written} written, {self.sectors} sectors>")


# ---- The active counter -----------------------------------------------------------------

_active: list[Traffic] = []
_lock = threading.Lock()


def active() -> Traffic | None:
    return _active[-1] if _active else None


def add(launches) -> None:
    """Give the launches a counting call made to every active counter (nested blocks too)."""
    with _lock:
        for counter in _active:
            counter.launches.extend(launches)


@contextlib.contextmanager
def traffic():
    """Count the global-memory traffic of the emulated and interpreted launches inside.

    Example::

        with emulator.traffic() as t:
            emulator.triplet_forward(a, p, n, 0.0, 0.0, 1.0)
        t.bytes_read, t.kernels["triplet_forward_kernel"].buffer("anchor").bytes_read
    """
    counter = Traffic()
    triton_hook = _TritonHook.install()  # first: if it fails, nothing is left active
    with _lock:
        _active.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            _active.remove(counter)
        if triton_hook is not None:
            triton_hook.remove()


# ---- From records to counts (CUDA: in the worker) -------------------------------------------


def summarize(records, launches, names, sizes, engine="CUDA (emulated)") -> list[LaunchTraffic]:
    """LaunchTraffic per launch from traffic.h's records.

    `launches`: (kernel, grid, block) per launch index; `names`/`sizes`: the
    registered buffers, in registration order.
    """
    import numpy as np

    if len(records) == 0:
        return [LaunchTraffic(k, engine, tuple(g), tuple(b),
                              tuple(BufferTraffic(n, s) for n, s in zip(names, sizes)))
                for k, g, b in launches]
    r = records
    # The k-th access of a thread at an instruction: rank within (launch, block, thread, pc),
    # in the order the accesses happened.
    index = np.arange(len(r))
    order = np.lexsort((index, r["pc"], r["thread"], r["block"], r["launch"]))
    keys = np.stack([r["launch"][order].astype(np.uint64), r["block"][order].astype(np.uint64),
                     r["thread"][order].astype(np.uint64), r["pc"][order]], axis=1)
    new_run = np.ones(len(r), dtype=bool)
    new_run[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(r)), 0))
    occurrence = np.empty(len(r), dtype=np.uint64)
    occurrence[order] = np.arange(len(r)) - run_start
    read_mask = (r["flags"] & _WRITE) == 0
    write_mask = ((r["flags"] & _WRITE) != 0) | ((r["flags"] & _ATOMIC) != 0)
    kinds = [(read_mask, False), (write_mask, True)]
    counts = {}  # (launch, buffer, write) -> [bytes, sectors]
    requests = {}  # (launch, write) -> warp-wide accesses
    for mask, write in kinds:
        if not mask.any():
            continue
        sub = r[mask]
        occ = occurrence[mask]
        group_cols = np.stack([sub["launch"].astype(np.uint64), sub["block"].astype(np.uint64),
                               (sub["thread"] // WARP).astype(np.uint64), sub["pc"], occ,
                               sub["buffer"].astype(np.uint64)], axis=1)
        groups, group_id = np.unique(group_cols, axis=0, return_inverse=True)
        group_id = group_id.reshape(-1)
        first = sub["address"] // SECTOR
        last = (sub["address"] + np.maximum(sub["size"], 1) - 1) // SECTOR
        # Every sector an access touches (two where it straddles a boundary), with its group.
        spans = (last - first + 1).astype(np.int64)
        within = np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans)
        sector = np.repeat(first, spans) + within.astype(np.uint64)
        pair_group = np.repeat(group_id, spans)
        pairs = np.unique(np.stack([pair_group.astype(np.uint64), sector], axis=1), axis=0)
        sectors_per_group = np.bincount(pairs[:, 0].astype(np.int64), minlength=len(groups))
        for launch, buffer in set(zip(sub["launch"].tolist(), sub["buffer"].tolist())):
            sel = (sub["launch"] == launch) & (sub["buffer"] == buffer)
            gsel = (groups[:, 0] == launch) & (groups[:, 5] == buffer)
            counts[(launch, buffer, write)] = [int(sub["size"][sel].astype(np.int64).sum()),
                                               int(sectors_per_group[gsel].sum())]
        for launch in set(sub["launch"].tolist()):
            requests[(launch, write)] = int((groups[:, 0] == launch).sum())
    out = []
    for i, (kernel, grid, block) in enumerate(launches):
        buffers = []
        for j, (name, size) in enumerate(zip(names, sizes)):
            read = counts.get((i, j, False), [0, 0])
            written = counts.get((i, j, True), [0, 0])
            buffers.append(BufferTraffic(name, size, read[0], written[0], read[1], written[1]))
        out.append(LaunchTraffic(kernel, engine, tuple(grid), tuple(block), tuple(buffers),
                                 requests.get((i, False), 0), requests.get((i, True), 0)))
    return out


def extent(t) -> tuple[int, int]:
    """The addresses [begin, end) of a tensor's elements (a view's own, not its storage's:
    anchor, positive and negative may be three views of one storage)."""
    begin = t.data_ptr()
    if t.numel() == 0:
        return begin, begin
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return begin, begin + (last + 1) * t.element_size()


class NativeCounter:
    """The C side of a traffic build (a ctypes.CDLL with traffic.h's functions)."""

    def __init__(self, library):
        self.library = library
        self.library.simt_traffic_records.restype = ctypes.c_void_p
        self.library.simt_traffic_launch.restype = ctypes.c_char_p
        self.collected: list[LaunchTraffic] = []

    def run(self, buffers, call):
        """call() with [(name, tensor or None)] registered; keeps its launches' counts."""
        import numpy as np

        named = [(name, t) for name, t in buffers if t is not None]
        begins, ends = zip(*(extent(t) for _, t in named)) if named else ((), ())  # empty: [p, p)
        n = len(named)
        if self.library.simt_traffic_begin(ctypes.c_int(n), (ctypes.c_uint64 * max(n, 1))(*begins),
                                           (ctypes.c_uint64 * max(n, 1))(*ends)) != 0:
            raise ValueError(f"the traffic counter takes at most 64 tensors, got {n}")
        result = call()
        if self.library.simt_traffic_overflow():
            raise RuntimeError("the traffic counter ran out of memory (or launches): count a "
                               "smaller problem")
        count = ctypes.c_uint64(0)
        pointer = self.library.simt_traffic_records(ctypes.byref(count))
        dtype = np.dtype(_FIELDS)
        records = (np.frombuffer(ctypes.string_at(pointer, count.value * dtype.itemsize), dtype=dtype)
                   if count.value else np.zeros(0, dtype=dtype))
        launches = []
        for i in range(self.library.simt_traffic_launch_count()):
            grid, block = (ctypes.c_uint * 3)(), (ctypes.c_uint * 3)()
            kernel = self.library.simt_traffic_launch(ctypes.c_uint32(i), grid, block).decode()
            kernel = kernel.split("<")[0].strip()  # the launch's text: kernel<scalar_t>
            launches.append((kernel, tuple(grid), tuple(block)))
        self.collected += summarize(records, launches, [name for name, _ in named],
                                    [t.numel() * t.element_size() for _, t in named])
        return result

    def take(self) -> list[LaunchTraffic]:
        collected, self.collected = self.collected, []
        return collected


# ---- Triton's interpreter -------------------------------------------------------------------


class _TritonHook:
    """Counts the loads and stores of Triton's interpreter while installed."""

    _installed = None

    @classmethod
    def install(cls):
        if cls._installed is not None:  # nested traffic(): the outer hook counts for both
            cls._installed.depth += 1
            return cls._installed
        try:
            from triton.runtime import interpreter
        except ImportError:  # no Triton: nothing to count
            return None
        hook = cls(interpreter)
        cls._installed = hook
        return hook

    def __init__(self, interpreter):
        self.interpreter, self.depth = interpreter, 1
        builder = interpreter.interpreter_builder
        executor = interpreter.GridExecutor
        for owner, name in ((builder, "create_masked_load"), (builder, "create_masked_store"),
                            (executor, "__call__")):
            if not callable(getattr(owner, name, None)):
                raise RuntimeError(f"this Triton's interpreter has no {name}: the traffic counter "
                                   "cannot count Triton kernels here")
        self.launch = None  # while a launch runs: its tensors' ranges and what they counted
        self.original_load = builder.create_masked_load
        self.original_store = builder.create_masked_store
        self.original_call = executor.__call__
        hook = self

        def load(ptrs, mask, other, *args, **kwargs):
            hook.count(ptrs, mask, write=False)
            return hook.original_load(ptrs, mask, other, *args, **kwargs)

        def store(ptrs, value, mask, *args, **kwargs):
            hook.count(ptrs, mask, write=True)
            return hook.original_store(ptrs, value, mask, *args, **kwargs)

        def call(executor_self, *args, **kwargs):
            return hook.run(executor_self, args, kwargs)

        builder.create_masked_load = load
        builder.create_masked_store = store
        executor.__call__ = call

    def remove(self):
        self.depth -= 1
        if self.depth:
            return
        builder = self.interpreter.interpreter_builder
        del builder.create_masked_load
        del builder.create_masked_store
        self.interpreter.GridExecutor.__call__ = self.original_call
        type(self)._installed = None

    def run(self, executor, args, kwargs):
        import inspect

        import torch

        # The arguments as the kernel sees them: GridExecutor drops the launch options
        # (num_warps=..., an autotuner's config) that are not parameters of the kernel.
        parameters = inspect.signature(executor.fn).parameters
        bound = inspect.signature(executor.fn).bind_partial(
            *args, **{k: v for k, v in kwargs.items() if k in parameters})
        names, ranges, sizes = [], [], []
        for name, value in bound.arguments.items():
            if isinstance(value, torch.Tensor):
                names.append(name)
                ranges.append(extent(value))
                sizes.append(value.numel() * value.element_size())
        outer, self.launch = self.launch, {"ranges": ranges, "counts": {}, "requests": [0, 0]}
        try:
            result = self.original_call(executor, *args, **kwargs)
            launch = self.launch
            buffers = []
            for j, name in enumerate(names):
                read = launch["counts"].get((j, False), [0, 0])
                written = launch["counts"].get((j, True), [0, 0])
                buffers.append(BufferTraffic(name, sizes[j], read[0], written[0], read[1], written[1]))
            grid = tuple(self.interpreter.interpreter_builder.grid_dim)  # as the launch ran it
            add([LaunchTraffic(executor.fn.__name__, "Triton (interpreted)", grid, (),
                               tuple(buffers), *launch["requests"])])
            return result
        finally:
            self.launch = outer

    def count(self, ptrs, mask, write):
        import numpy as np

        launch = self.launch
        if launch is None:
            return
        addresses = np.asarray(ptrs.data).astype(np.uint64).reshape(-1)
        keep = np.asarray(mask.data).astype(bool).reshape(-1)
        if keep.size == 1 and addresses.size > 1:
            keep = np.broadcast_to(keep, addresses.shape)
        addresses = addresses[keep]
        if addresses.size == 0:
            return
        element = np.dtype(self.interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize
        counted = np.zeros(addresses.shape, dtype=bool)
        for j, (begin, end) in enumerate(launch["ranges"]):
            # The first tensor whose elements hold an address counts it (as on the CUDA side).
            inside = (addresses >= begin) & (addresses < end) & ~counted
            if not inside.any():
                continue
            counted |= inside
            chosen = addresses[inside]
            sectors = np.unique(np.concatenate([chosen // SECTOR, (chosen + element - 1) // SECTOR]))
            entry = launch["counts"].setdefault((j, write), [0, 0])
            entry[0] += int(chosen.size) * element
            entry[1] += int(sectors.size)
        if counted.any():
            launch["requests"][int(write)] += 1
