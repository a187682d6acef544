"""Chapter 6: the fused triplet hinge loss as Triton kernels.

Two kernels, forward and backward, each a program per row of the batch. The
forward also writes each row's two squared distances, which the backward
reads instead of recomputing them: a training step reads each row of the
inputs once in each kernel (9 B D numbers moved, not 12 B D), as chapter 5's
operator does with its saved distances. They are registered as operators with `torch.library.triton_op`, so that on a GPU
`torch.compile` sees the kernels themselves and launches them without a
graph break (by default it does not fuse the surrounding operations into them). The public `triplet_hinge_loss` has the arguments, checks
and messages of the chapter-4 operator's wrapper.

Where no CUDA device is present, the kernels run on the CPU through Triton's
interpreter (TRITON_INTERPRET=1): every `tl.*` call is executed by numpy, one
program after another. It is slow, but it runs the kernels' indexing, masks,
strides and reductions, so the CPU tests check the code the GPU compiles.
What the GPU would run can still be read without one: `compile_for_gpu`
compiles a kernel for a chosen GPU (in a process where TRITON_INTERPRET=0)
and returns its PTX.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import struct
import textwrap

import torch
from torch import Tensor

from extending_pytorch.reference import (
    REDUCTIONS,
    TripletHingeLoss,
    check_hyperparameters,
    check_triplet_inputs,
)

# Triton reads TRITON_INTERPRET when it is first imported: its own library
# functions (tl.sum, tl.zeros, ...) are Triton functions too, built for the
# interpreter or for the compiler at that moment. So the variable must be set
# before anything imports triton (torch.compile does, for one).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ---- The kernels -----------------------------------------------------------


@triton.jit
def _from_bits(bits, dtype: tl.constexpr):
    """The float64 whose 64 bits are the integer `bits`, converted to `dtype`.

    An unannotated Python float reaches a compiled kernel as a float32, and
    torch.compile types it from its value whatever the annotation (fp32 in
    torch 2.15), so t1, t2
    and beta travel as the bits of their float64 value instead (see
    `_hyperparameters`). Launchers differ in how they pass that integer (int64
    here, thanks to the annotation; torch.compile's may pass an int32, or
    compile in a 1), so it is first made an int64 of the same value.
    """
    as_int64 = tl.full([], bits, tl.int64)
    return as_int64.to(tl.float64, bitcast=True).to(dtype)


@triton.jit
def _row_distances(
    a_row,  # pointer to the anchor row's first element
    p_row,  # ... the positive row's
    n_row,  # ... the negative row's
    a_col_stride,  # elements between neighbouring columns of each input
    p_col_stride,
    n_col_stride,
    dim,  # D, the length of a row
    BLOCK_D: tl.constexpr,  # columns handled at once (a power of 2)
    FP64: tl.constexpr,  # accumulate in float64 (for float64 inputs)
):
    """Both squared distances of one row: sums over the row, BLOCK_D at a time."""
    acc_dtype = tl.float64 if FP64 else tl.float32
    sum_p = tl.zeros([BLOCK_D], dtype=acc_dtype)
    sum_n = tl.zeros([BLOCK_D], dtype=acc_dtype)
    for start in range(0, dim, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        # The last block may stick out past the row: the mask keeps those
        # lanes from reading memory that belongs to something else.
        mask = cols < dim
        cols = cols.to(tl.int64)  # col * stride can pass 2**31
        a = tl.load(a_row + cols * a_col_stride, mask=mask, other=0.0)
        p = tl.load(p_row + cols * p_col_stride, mask=mask, other=0.0)
        n = tl.load(n_row + cols * n_col_stride, mask=mask, other=0.0)
        a = a.to(acc_dtype)  # float16 and bfloat16 are summed in float32
        diff_p = a - p.to(acc_dtype)
        diff_n = a - n.to(acc_dtype)
        sum_p += diff_p * diff_p
        sum_n += diff_n * diff_n
    return tl.sum(sum_p, axis=0), tl.sum(sum_n, axis=0)


# The hyper-parameters' bits and the autotuner's batch key are values, not
# shapes: Triton specialises an integer argument by its class of value (1 is
# compiled in as a constant, one divisible by 16 gets a kernel of its own), so
# without do_not_specialize new hyper-parameters could only cost compilations.
_SCALARS = ["t1_bits", "t2_bits", "beta_bits", "batch_bucket"]


@triton.jit(do_not_specialize=_SCALARS)
def _forward_kernel(
    a_ptr,  # anchor, (B, D), any strides
    p_ptr,  # positive
    n_ptr,  # negative
    out_ptr,  # (B,) contiguous: the loss of each row
    dist_ptr,  # (B, 2) contiguous, the accumulation dtype: d_ap, d_an of each row
    dim,
    a_row_stride,
    a_col_stride,
    p_row_stride,
    p_col_stride,
    n_row_stride,
    n_col_stride,
    t1_bits: tl.int64,  # t1, t2 and beta: the bits of their float64 values
    t2_bits: tl.int64,
    beta_bits: tl.int64,
    batch_bucket,  # not read: B rounded up to a power of 2, the autotuner's key
    BLOCK_D: tl.constexpr,
    FP64: tl.constexpr,
):
    # One program per row; 64-bit, so that row * stride cannot overflow.
    row = tl.program_id(0).to(tl.int64)
    acc_dtype = tl.float64 if FP64 else tl.float32
    t1 = _from_bits(t1_bits, acc_dtype)
    t2 = _from_bits(t2_bits, acc_dtype)
    beta = _from_bits(beta_bits, acc_dtype)
    d_ap, d_an = _row_distances(
        a_ptr + row * a_row_stride,
        p_ptr + row * p_row_stride,
        n_ptr + row * n_row_stride,
        a_col_stride,
        p_col_stride,
        n_col_stride,
        dim,
        BLOCK_D,
        FP64,
    )
    diff = d_ap - d_an
    # max(x, t) written as a comparison, as in triplet_math.h: diff < t1 is
    # False for a NaN, so a NaN distance gives a NaN loss, as torch.clamp
    # does. tl.maximum's default (propagate_nan=NONE) returns the other
    # operand when one is NaN.
    push = tl.where(diff < t1, t1, diff)
    pull = tl.where(d_ap < t2, t2, d_ap)
    tl.store(out_ptr + row, push + beta * pull)
    # Kept for the backward, unrounded: 2 numbers per row against 3 D read.
    tl.store(dist_ptr + 2 * row, d_ap)
    tl.store(dist_ptr + 2 * row + 1, d_an)


@triton.jit(do_not_specialize=_SCALARS + ["grad_divisor"])
def _backward_kernel(
    grad_out_ptr,  # the upstream gradient: one per row, or one for all
    grad_out_stride,  # its stride for one per row; 0 for a scalar
    grad_divisor: tl.int64,  # B for reduction="mean", else 1
    a_ptr,
    p_ptr,
    n_ptr,
    dist_ptr,  # (B, 2): the distances the forward kernel wrote
    grad_a_ptr,  # (B, D) contiguous outputs
    grad_p_ptr,
    grad_n_ptr,
    dim,
    a_row_stride,
    a_col_stride,
    p_row_stride,
    p_col_stride,
    n_row_stride,
    n_col_stride,
    t1_bits: tl.int64,  # as in the forward kernel
    t2_bits: tl.int64,
    beta_bits: tl.int64,
    batch_bucket,
    BLOCK_D: tl.constexpr,
    FP64: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    acc_dtype = tl.float64 if FP64 else tl.float32
    t1 = _from_bits(t1_bits, acc_dtype)
    t2 = _from_bits(t2_bits, acc_dtype)
    beta = _from_bits(beta_bits, acc_dtype)
    a_row = a_ptr + row * a_row_stride
    p_row = p_ptr + row * p_row_stride
    n_row = n_ptr + row * n_row_stride
    # The forward's distances, read back: recomputing them here would read
    # the row's three inputs a second time (6 B D numbers, not 3 B D).
    d_ap = tl.load(dist_ptr + 2 * row)
    d_an = tl.load(dist_ptr + 2 * row + 1)
    # The mean's 1 / B is applied here, in the accumulation dtype: in float16,
    # grad / B underflows to 0 for a small gradient or a large batch.
    g = tl.load(grad_out_ptr + row * grad_out_stride).to(acc_dtype) / grad_divisor
    # The weights of triplet_math.h: 1 strictly above the bound, 0 at it.
    push = tl.where(d_ap - d_an > t1, 1.0, 0.0)
    pull = tl.where(d_ap > t2, 1.0, 0.0)
    w_ap = 2.0 * g * (push + beta * pull)
    w_an = 2.0 * g * push
    out_row = row * dim  # the gradients are contiguous
    for start in range(0, dim, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < dim
        cols = cols.to(tl.int64)
        a = tl.load(a_row + cols * a_col_stride, mask=mask, other=0.0)
        p = tl.load(p_row + cols * p_col_stride, mask=mask, other=0.0)
        n = tl.load(n_row + cols * n_col_stride, mask=mask, other=0.0)
        a = a.to(acc_dtype)
        grad_p = -w_ap * (a - p.to(acc_dtype))
        grad_n = w_an * (a - n.to(acc_dtype))
        # tl.store converts to the output's dtype.
        tl.store(grad_p_ptr + out_row + cols, grad_p, mask=mask)
        tl.store(grad_n_ptr + out_row + cols, grad_n, mask=mask)
        tl.store(grad_a_ptr + out_row + cols, -(grad_p + grad_n), mask=mask)


# Is Triton interpreting? Then @triton.jit made interpreted functions.
INTERPRETED = isinstance(_forward_kernel, InterpretedFunction)

if INTERPRETED and not isinstance(tl.sum, InterpretedFunction):
    raise ImportError(
        "Triton's interpreter could not be enabled: triton was imported before "
        "TRITON_INTERPRET=1 was set (torch.compile, for one, imports it), so its "
        "library functions were built for the GPU compiler. Set the variable "
        "before Python starts (TRITON_INTERPRET=1 python ...), or import "
        "extending_pytorch.triton_ops before anything that imports triton."
    )

# ---- Autotuning ------------------------------------------------------------

# On a GPU, triton.autotune times each configuration the first time it sees a
# new key, and keeps the fastest: how many columns a program takes at once
# (BLOCK_D) and how many warps (32 threads each) share them. The compiler
# spreads a block's BLOCK_D elements over the num_warps * 32 threads, so each
# thread loads BLOCK_D * itemsize / (32 * num_warps) bytes of each input per
# step. A 128-bit load (ld.global.v4.b32, chapter 5's 16-byte Pack) needs 16
# of them: fewer, and the loads are narrower however aligned the rows are. At
# most 64 (four 128-bit loads per input): there the heavier kernel, the
# forward (it keeps both distances' sums), needs at most 128 registers per
# thread (56 to 127 on sm_90a with Triton 3.9, over every configuration at
# that bound; it spills 16 bytes or fewer in three configurations, the backward
# nothing); at 128 bytes more than 128 (164 to 232, float16's 2048 columns on
# one warp the most), so fewer warps fit on a multiprocessor, and
# at 256 (float64, 1024 columns on one warp) it runs out of its 255 and spills
# hundreds of bytes to memory. Those two bounds, per dtype, choose the
# configurations tried from the candidates below, and so does the row: no
# block longer than the row rounded up to a power of 2 (lanes past it would
# only be masked off). tests/test_triton_ptx.py compiles the configurations
# and reads the loads; for the registers and the spills, it compiles the
# widest configuration at each bound per dtype (every one at 64 bytes for
# float64).
VECTOR_BYTES = 16
MAX_BYTES_PER_THREAD = 64
_CONFIGS = [
    triton.Config({"BLOCK_D": block}, num_warps=warps)
    for block in (64, 128, 256, 512, 1024, 2048, 4096)
    for warps in (1, 2, 4, 8)
]


def bytes_per_thread(config: triton.Config, dtype: torch.dtype) -> int:
    """Bytes of one input each thread loads per block step under `config`."""
    return config.kwargs["BLOCK_D"] * dtype.itemsize // (32 * config.num_warps)


def configs_for(dtype: torch.dtype, dim: int, configs=None) -> list:
    """The configurations the autotuner tries for rows of `dim` elements."""
    configs = _CONFIGS if configs is None else configs
    vectorised = [
        c
        for c in configs
        if VECTOR_BYTES <= bytes_per_thread(c, dtype) <= MAX_BYTES_PER_THREAD
    ]
    smallest = min(c.kwargs["BLOCK_D"] for c in vectorised)
    longest = max(triton.next_power_of_2(max(dim, 1)), smallest)
    return [c for c in vectorised if c.kwargs["BLOCK_D"] <= longest]


def _prune(configs, named_args, **kwargs):
    # triton.autotune's early_config_prune: called once per new key.
    return configs_for(named_args["a_ptr"].dtype, named_args["dim"], configs)


def batch_bucket(batch: int) -> int:
    """B rounded up to a power of 2: the autotuner's batch key.

    How many programs fill the GPU changes which configuration is fastest
    (a few rows want more warps each), but tuning for every batch size (the
    short last batch of an epoch, say) would time every configuration again.
    """
    return triton.next_power_of_2(max(batch, 1))


# The key: these arguments, plus (Triton adds them) the dtype of every tensor
# argument. Triton 3.9 rejects a key name that is not an argument of the
# kernel; earlier releases dropped it without a word (triton-lang/triton#11602),
# so a typo such as "dimm" would tune once and reuse that choice for every dim.
AUTOTUNE_KEY = ["dim", "batch_bucket"]
_forward_tuned = triton.autotune(
    configs=_CONFIGS, key=AUTOTUNE_KEY, prune_configs_by={"early_config_prune": _prune}
)(_forward_kernel)
_backward_tuned = triton.autotune(
    configs=_CONFIGS, key=AUTOTUNE_KEY, prune_configs_by={"early_config_prune": _prune}
)(_backward_kernel)

# The interpreter's block: a power of 2, at most 64, so rows longer than 64
# take several blocks and the last one is masked (tests use such rows).
INTERPRETER_MAX_BLOCK = 64


def interpreter_block(dim: int) -> int:
    """BLOCK_D used by the interpreter for rows of `dim` elements."""
    return min(triton.next_power_of_2(max(dim, 1)), INTERPRETER_MAX_BLOCK)


def wrap_triton(kernel):
    """`torch.library.wrap_triton`, letting interpreted kernels through.

    torch 2.13 and later return an interpreted kernel unchanged (eager code
    can launch it as it is; pytorch/pytorch#185597); releases without that
    fix reject it (pytorch/pytorch#152868).
    """
    if INTERPRETED:
        return kernel
    return torch.library.wrap_triton(kernel)


class Launch(tuple):
    """One launch recorded by `record_launches`.

    Unpacks as (kernel name, {argument: value}); `.grid` is the launch's grid
    as three program counts (a callable grid resolved, missing axes 1), and
    `.kernel` the launched kernel (its Python function is `.kernel.fn`).
    With `record_launches(accesses=True)` under the interpreter, `.loads` and
    `.stores` list what each program read and wrote, and `.outside` counts
    the lanes that pointed outside every tensor argument's memory (None
    elsewhere).
    """

    def __new__(cls, name, arguments, grid, kernel):
        launch = super().__new__(cls, (name, arguments))
        launch.grid = grid
        launch.kernel = kernel
        launch.loads = launch.stores = launch.outside = None
        return launch


def _kernel_arguments(kernel, args, kwargs) -> dict:
    # The arguments as the kernel receives them, bound to its parameters, those not passed
    # at their defaults. The launch options (num_warps=..., num_stages=..., an autotuner's
    # config) are not parameters of the kernel: Triton's launcher takes them, and they are
    # left out here as its interpreter leaves them out.
    bound = inspect.signature(kernel.fn).bind_partial(*args, **{
        k: v for k, v in kwargs.items() if k in kernel.arg_names
    })
    bound.apply_defaults()
    return dict(bound.arguments)


def _grid_of(grid, arguments, kwargs) -> tuple:
    # A grid is a tuple, or a function of the launch's arguments ("meta"),
    # constexpr defaults included, as Triton calls it.
    if callable(grid):
        grid = grid(dict(arguments, **kwargs))
    grid = tuple(int(g) for g in grid)
    return grid + (1,) * (3 - len(grid))


@contextlib.contextmanager
def record_launches(*, accesses: bool = False):
    """Record every Triton kernel launch made inside the `with` block.

    Yields a list that fills with one `Launch` per launch: it unpacks as a
    (kernel name, {argument: value}) pair, with the tensors themselves (so a
    test can see that a view reached the kernel as the view, not a copy),
    the scalars and the constexprs (defaults included; launch options such as
    num_warps are not the kernel's arguments), and it has the grid (`.grid`)
    and the kernel (`.kernel`). A spy for tests and exercise checks: it wraps
    the `run` method that every launch goes through (InterpretedFunction's
    under the interpreter, JITFunction's on a GPU, where the autotuner's
    trial runs are recorded too).

    `accesses=True`, under the interpreter only, also records each program's
    loads and stores (see `Launch`) and keeps them inside the memory of the
    launch's tensors; on a GPU it records nothing more.
    """
    launches = []
    kind = InterpretedFunction if INTERPRETED else triton.JITFunction
    original = kind.run
    hook = _AccessHook() if accesses and INTERPRETED else None

    def run(self, *args, grid, warmup, **kwargs):
        if warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        arguments = _kernel_arguments(self, args, kwargs)
        launch = Launch(self.fn.__name__, arguments, _grid_of(grid, arguments, kwargs), self)
        launches.append(launch)
        if hook is not None:
            hook.start(launch)
        try:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            if hook is not None:
                hook.launch = None

    kind.run = run
    try:
        yield launches
    finally:
        kind.run = original
        if hook is not None:
            hook.remove()


class Access(tuple):
    """One load or store of a program: `.program` its grid index (x, y, z),
    `.addresses` the byte addresses of the lanes its mask let through (a
    numpy array), `.lanes` how many lanes it had, masked ones included."""

    def __new__(cls, program, addresses, lanes):
        access = super().__new__(cls, (program, addresses, lanes))
        access.program, access.addresses, access.lanes = program, addresses, lanes
        return access


class _AccessHook:
    """Records, under Triton's interpreter, the loads and stores of the launch being
    recorded, and performs none outside the memory of the launch's tensor arguments:
    such lanes are masked off and counted (`Launch.outside`), so that a kernel that
    reads far past a row gives a wrong answer instead of killing the process. A load
    with a mask and no `other` gets NaN in its masked lanes, which tl.load leaves
    undefined."""

    def __init__(self):
        import numpy as np
        from triton.runtime import interpreter

        self.np, self.interpreter = np, interpreter
        self.builder = interpreter.interpreter_builder
        self.launch, self.ranges = None, []
        self.saved = {name: vars(self.builder).get(name) for name in ("create_masked_load", "create_masked_store")}
        load, store = self.builder.create_masked_load, self.builder.create_masked_store
        hook = self

        def masked_load(ptrs, mask, other, *args, **kwargs):
            mask, other = hook.record(ptrs, mask, other, write=False)
            return load(ptrs, mask, other, *args, **kwargs)

        def masked_store(ptrs, value, mask, *args, **kwargs):
            mask, _ = hook.record(ptrs, mask, None, write=True)
            return store(ptrs, value, mask, *args, **kwargs)

        self.builder.create_masked_load = masked_load
        self.builder.create_masked_store = masked_store

    def remove(self):
        for name, value in self.saved.items():
            if value is None:
                delattr(self.builder, name)
            else:
                setattr(self.builder, name, value)

    def start(self, launch):
        launch.loads, launch.stores, launch.outside = [], [], 0
        self.launch = launch
        self.ranges = []
        for value in launch[1].values():
            if isinstance(value, Tensor) and value.device.type == "cpu":
                storage = value.untyped_storage()
                self.ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))

    def record(self, ptrs, mask, other, *, write):
        np, launch = self.np, self.launch
        if launch is None:
            return mask, other
        TensorHandle = self.interpreter.TensorHandle
        addresses = ptrs.data.astype(np.uint64)
        lanes = np.broadcast_to(mask.data, addresses.shape).astype(bool)
        size = np.uint64(max(ptrs.get_element_ty().primitive_bitwidth // 8, 1))
        inside = np.zeros(addresses.shape, dtype=bool)
        for low, high in self.ranges:
            inside |= (addresses >= np.uint64(low)) & (addresses + size <= np.uint64(high))
        launch.outside += int((lanes & ~inside).sum())
        program = tuple(self.builder.grid_idx)
        (launch.stores if write else launch.loads).append(Access(program, addresses[lanes & inside], lanes.size))
        if not write and other is None and ptrs.get_element_ty().is_floating() and not lanes.all():
            dtype = self.interpreter._get_np_dtype(ptrs.get_element_ty())
            other = TensorHandle(np.full(addresses.shape, np.nan, dtype=dtype), ptrs.get_element_ty())
        return TensorHandle(lanes & inside, mask.dtype), other


def compile_for_gpu(kernel, *args, arch: int = 90, num_warps: int = 4, **constexprs):
    """Compile `kernel` for an NVIDIA GPU of compute capability `arch`, without one.

    `args` are the launch's arguments, tensors included (on any device: only
    their dtype and whether their address is a multiple of 16 bytes matter),
    and Triton specialises them exactly as a launch would (an integer 1
    compiled in, "divisible by 16" hints). Returns Triton's CompiledKernel:
    `.asm["ptx"]` is the GPU assembly, `.asm["cubin"]` the binary. `arch` is
    80 for an A100, 90 for an H100.

    Needs the compiler, not the interpreter: run it in a process started with
    TRITON_INTERPRET=0. It uses the launcher's internals
    (`create_function_from_signature`, `JITFunction._pack_args`), as
    Triton's own compile-only tests do; they may change between releases.
    """
    if INTERPRETED:
        raise RuntimeError(
            "compile_for_gpu needs Triton's compiler, but this process runs the "
            "interpreter (TRITON_INTERPRET=1): call it in a process started with "
            "TRITON_INTERPRET=0"
        )
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    kwargs = dict(constexprs, num_warps=num_warps)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constants, attrs = kernel._pack_args(
        backend, kwargs, bound, specialization, options
    )
    source = ASTSource(kernel, signature, constants, attrs)
    return triton.compile(source, target=target, options=options.__dict__)


def _global_names(function) -> list:
    # The global names a function reads (LOAD_GLOBAL: not attribute names such as
    # x.dtype), and those its decorators use (@jit after `from triton import jit`).
    import ast
    import dis

    names, codes = [], [function.__code__]
    while codes:
        code = codes.pop()
        names += [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        codes += [c for c in code.co_consts if inspect.iscode(c)]
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for decorator in tree.body[0].decorator_list:
        names += [n.id for n in ast.walk(decorator) if isinstance(n, ast.Name)]
    return [n for n in dict.fromkeys(names) if n in function.__globals__]  # not builtins


def _importable(value):
    # "module.attribute" for a value that an imported module (not __main__, not a
    # notebook's or an exec()'s namespace) holds under its own name, else None.
    import sys

    fn = getattr(value, "fn", value)
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module in (None, "__main__") or module not in sys.modules or not name.isidentifier():
        return None
    return f"{module}.{name}" if getattr(sys.modules[module], name, None) is value else None


def _literal(value):
    # Python source for a constant a kernel may read from its module, else None.
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return f"float({str(value)!r})"
    if isinstance(value, tl.dtype) and not isinstance(value, tl.pointer_type):
        return f"tl.dtype({value.name!r})"
    return None


def kernel_source(kernel) -> str:
    """Python source of a module that defines a @triton.jit kernel as its own module sees it.

    The source of the kernel and of the @triton.jit functions it calls, after
    the globals they read, each rebuilt: modules imported, constants
    (`tl.constexpr`, numbers, dtypes) assigned, functions of an importable
    module imported from it. Raises OSError where Python kept no source (a
    function made by `exec` of a string; a notebook cell's or a file's source
    is kept), and RuntimeError for a global it cannot rebuild.
    """
    definitions, sources, seen, todo = {}, [], set(), [kernel]
    while todo:
        function = todo.pop()
        fn = function.fn
        if fn in seen:
            continue
        seen.add(fn)
        sources.append(textwrap.dedent(inspect.getsource(fn)))
        for name in _global_names(fn):
            value = fn.__globals__[name]
            where = _importable(value)
            if isinstance(value, (InterpretedFunction, triton.JITFunction)) and where is None:
                todo.append(value)
                continue
            if inspect.ismodule(value):
                line = f"import {value.__name__} as {name}"
            elif where is not None:
                line = f"import {where.rsplit('.', 1)[0]}\n{name} = {where}"
            elif isinstance(value, tl.constexpr) and _literal(value.value) is not None:
                line = f"{name} = tl.constexpr({_literal(value.value)})"
            elif _literal(value) is not None:
                line = f"{name} = {_literal(value)}"
            else:
                raise RuntimeError(
                    f"{fn.__name__} uses the global {name} (a {type(value).__name__}), "
                    "which cannot be rebuilt outside this notebook"
                )
            definitions.setdefault(name, line)
    header = "import torch\nimport triton\nimport triton.language as tl\n"
    return "\n".join([header, *definitions.values(), "", *reversed(sources)])


def unmasked_block_loads(ttir: str) -> list[str]:
    """The loads of a block without a mask in a kernel's Triton IR (`compiled.asm["ttir"]`).

    A `tt.load` of a tensor of pointers with one operand (no mask, no
    `other`) reads every lane's address on a GPU: a `tl.where` after it
    discards the value but not the read, past a row's end. Scalar loads and
    block pointers with a boundary check are not listed.
    """
    found = []
    for line in ttir.splitlines():
        text = line.split(" loc(")[0].strip()
        if " tt.load " not in f" {text} " or " : " not in text:
            continue
        operands, result = text.split("tt.load", 1)[1].split(" : ", 1)
        if result.strip().startswith("tensor<") and "," not in operands and "boundaryCheck" not in text:
            found.append(text)
    return found


def gpu_compile(kernel, launches, *, arch: int = 90, num_warps: int = 4, timeout: float = 300) -> list:
    """Compile `kernel` for a GPU, once per launch, in one fresh process.

    `launches` is a list of (args, constexprs) pairs, as `compile_for_gpu`
    takes them (tensors are sent as their dtype, shape and strides). Returns
    one dict per launch: `error`, None where it compiled, else the
    compiler's error; and `unmasked_loads`, the compiled kernel's loads of a
    block without a mask (`unmasked_block_loads`), which the interpreter
    runs without complaint where they stay inside the launch's tensors.
    The process runs with TRITON_INTERPRET=0, so this works where this one
    runs the interpreter, and needs no GPU. The interpreter runs code the
    compiler rejects (a loop-carried variable whose type changes, a
    `tl.static_range` whose bounds are known only at run time): this is how
    a check finds out. The kernel is rebuilt there by `kernel_source`, whose
    OSError and RuntimeError pass through; a process that fails before it
    compiles raises RuntimeError.
    """
    import json
    import subprocess
    import sys
    import tempfile

    source = kernel_source(kernel)

    def sent(value):
        if isinstance(value, Tensor):
            return dict(dtype=str(value.dtype).removeprefix("torch."), shape=list(value.shape),
                        stride=list(value.stride()))
        return value

    spec = [[[sent(a) for a in args], dict(constexprs, arch=arch, num_warps=num_warps)]
            for args, constexprs in launches]
    driver = textwrap.dedent("""
        import json, sys, torch, triton
        from extending_pytorch import triton_ops
        import reader_kernel
        name, launches = json.loads(sys.argv[1])
        kernel = getattr(reader_kernel, name)
        while not isinstance(kernel, triton.JITFunction):  # an autotuner or a heuristic around it
            kernel = kernel.fn
        reports = []
        for spec, options in launches:
            args = [
                torch.empty_strided(a["shape"], a["stride"], dtype=getattr(torch, a["dtype"]))
                if isinstance(a, dict) else a
                for a in spec
            ]
            try:
                compiled = triton_ops.compile_for_gpu(kernel, *args, **options)
            except Exception as error:
                reports.append(dict(error=f"{type(error).__name__}: {error}".strip().splitlines()[-1],
                                    unmasked_loads=[]))
            else:
                reports.append(dict(error=None, unmasked_loads=triton_ops.unmasked_block_loads(compiled.asm["ttir"])))
        print(json.dumps(reports))
    """)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "reader_kernel.py"), "w") as f:
            f.write(source)
        env = dict(
            os.environ,
            TRITON_INTERPRET="0",
            TRITON_CACHE_DIR=os.path.join(scratch, "cache"),
            TRITON_DEFAULT_FP_FUSION="1",  # Triton 3.9's default, without its warning
            PYTHONPATH=os.pathsep.join([scratch, package, os.environ.get("PYTHONPATH", "")]),
        )
        result = subprocess.run(
            [sys.executable, "-c", driver, json.dumps([kernel.fn.__name__, spec])],
            capture_output=True, text=True, env=env, cwd=scratch, timeout=timeout,
        )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"the compiling process failed ({last})")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---- Checks ----------------------------------------------------------------

COMPILE_NEEDS_GPU = (
    "triplet_hinge_loss (Triton): torch.compile traces into this operator's "
    "kernels with fake tensors, which hold no data, but Triton's interpreter "
    "needs real data. Compiling it needs a GPU; eager calls work without one"
)


def _is_fake(tensor: Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(tensor)


def _check_inputs(anchor, positive, negative, reduction) -> None:
    # The chapter-1 checks: 2-D, floating point, same shape, dtype and device.
    check_triplet_inputs(anchor, positive, negative)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {REDUCTIONS}, got {reduction!r}"
        )
    if anchor.dtype not in DTYPES:
        # float8, say: floating point, but not one the kernels are checked for.
        raise TypeError(
            "anchor must be float16, bfloat16, float32 or float64 for the "
            f"Triton kernels, got {anchor.dtype}"
        )
    if not INTERPRETED and anchor.device.type != "cuda":
        raise ValueError(
            "anchor must be on a CUDA device: Triton compiles these kernels for "
            f"the GPU, got {anchor.device}. Without a GPU, set TRITON_INTERPRET=1 "
            "before importing triton to run them through Triton's interpreter"
        )


def _check_grad_output(grad_output, anchor, reduction) -> None:
    # The checks of the C++ backward (triplet_common.h, check_grad_output).
    batch = anchor.shape[0]
    if reduction == "none":
        if grad_output.dim() != 1 or grad_output.shape[0] != batch:
            raise ValueError(
                f"grad_output must have shape ({batch},) for reduction='none', "
                f"got {tuple(grad_output.shape)}"
            )
    elif grad_output.numel() != 1:
        raise ValueError(
            f"grad_output must be a scalar for reduction={reduction!r}, got "
            f"shape {tuple(grad_output.shape)}"
        )
    if grad_output.dtype != anchor.dtype:
        raise TypeError(
            f"grad_output must have the dtype of anchor ({anchor.dtype}), got "
            f"{grad_output.dtype}"
        )
    if grad_output.device != anchor.device:
        raise ValueError(
            f"grad_output must be on the device of anchor ({anchor.device}), "
            f"got {grad_output.device}"
        )


def distance_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels sum in, and keep the distances in."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_distances(distances, anchor) -> None:
    # The backward's distances: those the forward returned, which the kernel
    # reads as two numbers per row, one row after another.
    batch, expected = anchor.shape[0], distance_dtype(anchor.dtype)
    if tuple(distances.shape) != (batch, 2):
        raise ValueError(
            f"distances must have shape ({batch}, 2), one (d_ap, d_an) pair per "
            f"row, got {tuple(distances.shape)}"
        )
    if distances.dtype != expected:
        raise TypeError(
            f"distances must be {expected} for {anchor.dtype} inputs (the "
            f"accumulation dtype), got {distances.dtype}"
        )
    if distances.device != anchor.device:
        raise ValueError(
            f"distances must be on the device of anchor ({anchor.device}), "
            f"got {distances.device}"
        )
    if not distances.is_contiguous():
        raise ValueError(
            f"distances must be contiguous, got strides {distances.stride()}"
        )


def _layout(anchor, positive, negative) -> tuple[int, ...]:
    # Row and column strides of each input, in elements: views are read in
    # place (stride 0 for an expanded input), never copied.
    return (
        anchor.stride(0),
        anchor.stride(1),
        positive.stride(0),
        positive.stride(1),
        negative.stride(0),
        negative.stride(1),
    )


def _block(dim: int) -> dict:
    # The autotuner picks BLOCK_D on a GPU; the interpreter takes a fixed one.
    return dict(BLOCK_D=interpreter_block(dim)) if INTERPRETED else {}


def _float64_bits(value: float) -> int:
    # The 64 bits of a float64, read as a signed integer. No tensor: nothing
    # is copied to the device per call, and CUDA graphs can capture the call.
    return struct.unpack("<q", struct.pack("<d", float(value)))[0]


def _hyperparameters(t1: float, t2: float, beta: float) -> dict:
    """t1, t2 and beta as the kernels take them: the bits of their float64 values.

    An unannotated Python float reaches a compiled kernel as a float32, and
    torch.compile types it from its value whatever the annotation (fp32 in
    torch 2.15): t2 =
    0.5 + 2**-40 would reach a float64 kernel as 0.5. The bits keep every
    one, and the kernels round them to float32 themselves for 16- and
    32-bit inputs (as torch does when it compares a float32 tensor with a
    Python float).
    """
    return dict(
        t1_bits=_float64_bits(t1),
        t2_bits=_float64_bits(t2),
        beta_bits=_float64_bits(beta),
    )


# ---- The operators ---------------------------------------------------------


def _triplet_forward(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    t1: float,
    t2: float,
    beta: float,
    reduction: str,
) -> tuple[Tensor, Tensor]:
    _check_inputs(anchor, positive, negative, reduction)
    if INTERPRETED and _is_fake(anchor):
        raise RuntimeError(COMPILE_NEEDS_GPU)
    batch, dim = anchor.shape
    per_row = torch.empty(batch, dtype=anchor.dtype, device=anchor.device)
    # Each row's (d_ap, d_an), for the backward: 2 numbers per row.
    distances = torch.empty(
        (batch, 2), dtype=distance_dtype(anchor.dtype), device=anchor.device
    )
    if batch > 0:  # a grid of zero programs is not a launch
        kernel = _forward_kernel if INTERPRETED else _forward_tuned
        wrap_triton(kernel)[(batch,)](
            anchor,
            positive,
            negative,
            per_row,
            distances,
            dim,
            *_layout(anchor, positive, negative),
            **_hyperparameters(t1, t2, beta),
            batch_bucket=batch_bucket(batch),
            FP64=anchor.dtype == torch.float64,
            **_block(dim),
        )
    # Reduced with torch, as the C++ operator does: deterministic, and the
    # same summation as the reference's.
    if reduction == "none":
        loss = per_row
    else:
        loss = per_row.sum() if reduction == "sum" else per_row.mean()
    return loss, distances


def _triplet_backward(
    grad_output: Tensor,
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    distances: Tensor,
    t1: float,
    t2: float,
    beta: float,
    reduction: str,
) -> tuple[Tensor, Tensor, Tensor]:
    _check_inputs(anchor, positive, negative, reduction)
    _check_grad_output(grad_output, anchor, reduction)
    _check_distances(distances, anchor)
    if INTERPRETED and _is_fake(anchor):
        raise RuntimeError(COMPILE_NEEDS_GPU)
    batch, dim = anchor.shape
    grads = [
        torch.empty((batch, dim), dtype=anchor.dtype, device=anchor.device)
        for _ in range(3)
    ]
    if batch > 0:
        kernel = _backward_kernel if INTERPRETED else _backward_tuned
        wrap_triton(kernel)[(batch,)](
            grad_output,
            grad_output.stride(0) if reduction == "none" else 0,
            # The mean's 1 / B, applied by the kernel in the accumulation
            # dtype (grad_output / batch here would divide in float16).
            batch if reduction == "mean" else 1,
            anchor,
            positive,
            negative,
            distances,
            *grads,
            dim,
            *_layout(anchor, positive, negative),
            **_hyperparameters(t1, t2, beta),
            batch_bucket=batch_bucket(batch),
            FP64=anchor.dtype == torch.float64,
            **_block(dim),
        )
    return grads[0], grads[1], grads[2]


# The operators: the two functions above, registered with triton_op (which
# reads their schema from the annotations). Called directly, the functions
# launch the kernels as plain Python; through the operators, torch.compile
# on a GPU traces into them.
_triplet_op = torch.library.triton_op(
    "extending_pytorch::triplet_hinge_loss_triton", mutates_args=()
)(_triplet_forward)
_triplet_backward_op = torch.library.triton_op(
    "extending_pytorch::triplet_hinge_loss_triton_backward", mutates_args=()
)(_triplet_backward)


# Interpreter only: fake implementations that compute shapes.
if INTERPRETED:
    # triton_op registers the function itself as its fake implementation:
    # under fake tensors, wrap_triton records the launch instead of running
    # it. An interpreted kernel cannot be recorded, so shapes are given here.
    @_triplet_op.register_fake
    def _(anchor, positive, negative, t1, t2, beta, reduction):
        _check_inputs(anchor, positive, negative, reduction)
        batch = anchor.shape[0]
        loss = anchor.new_empty(batch) if reduction == "none" else anchor.new_empty(())
        return loss, anchor.new_empty((batch, 2), dtype=distance_dtype(anchor.dtype))

    @_triplet_backward_op.register_fake
    def _(grad_output, anchor, positive, negative, distances, t1, t2, beta, reduction):
        _check_inputs(anchor, positive, negative, reduction)
        _check_grad_output(grad_output, anchor, reduction)
        _check_distances(distances, anchor)
        return tuple(anchor.new_empty(anchor.shape) for _ in range(3))


def _setup_context(ctx, inputs, output):
    anchor, positive, negative, t1, t2, beta, reduction = inputs
    _, distances = output
    # The distances are a by-product, not a function to differentiate; and
    # without materialised gradients autograd passes None for theirs instead
    # of a (B, 2) tensor of zeros.
    ctx.mark_non_differentiable(distances)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(anchor, positive, negative, distances)
    ctx.settings = (t1, t2, beta, reduction)


def backward_through(backward_op):
    """The autograd backward that calls `backward_op` on what `_setup_context` saved.

    Chapter 9's Helion operator keeps this contract and reuses it.
    """

    def backward(ctx, grad_output, _grad_distances):
        if grad_output is None:  # the loss itself was not used (see above)
            return (None,) * 7
        grads = backward_op(grad_output, *ctx.saved_tensors, *ctx.settings)
        needed = ctx.needs_input_grad
        return (
            *(grad if need else None for grad, need in zip(grads, needed)),
            None,  # t1
            None,  # t2
            None,  # beta
            None,  # reduction
        )

    return backward


_backward = backward_through(_triplet_backward_op)


_triplet_op.register_autograd(_backward, setup_context=_setup_context)

triplet_hinge_loss_op = torch.ops.extending_pytorch.triplet_hinge_loss_triton.default
triplet_hinge_loss_backward_op = (
    torch.ops.extending_pytorch.triplet_hinge_loss_triton_backward.default
)


def triplet_hinge_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    t1: float,
    t2: float,
    beta: float,
    reduction: str = "mean",
) -> Tensor:
    """The triplet hinge loss, computed by the Triton kernels.

    Same arguments and results as `reference_triplet_hinge_loss`; the
    hyper-parameters are checked here, the tensors by the operator. The
    operator returns the loss and each row's two squared distances, (B, 2)
    in the accumulation dtype, which it saves for its backward; this
    function returns the loss.
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    loss, _distances = triplet_hinge_loss_op(
        anchor, positive, negative, t1, t2, beta, reduction
    )
    return loss


class TritonTripletHingeLoss(TripletHingeLoss):
    """Chapter 1's module, computing the loss with the Triton kernels."""

    loss_function = staticmethod(triplet_hinge_loss)
