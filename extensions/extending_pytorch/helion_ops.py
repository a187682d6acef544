"""Chapter 9: the fused triplet hinge loss as Helion kernels.

Helion (pytorch/helion) is PyTorch's tile language: a kernel is a Python
function whose body outside its `hl.tile` loops runs on the host as ordinary
PyTorch, and whose loops are written with torch operations on tiles. Helion
compiles them to a Triton kernel and a host launcher, choosing what chapter 6
chose by hand (block sizes, masks, pointer arithmetic, reductions) from a
configuration: `helion.Config(block_sizes=[...], num_warps=...)`.

The two kernels keep chapter 6's contract: the forward writes each row's
loss and its two squared distances, (B, 2) in the accumulation dtype; the
backward reads the distances instead of recomputing them, so a training step
reads each row of the inputs once in each kernel (9 B D numbers, not 12).
They are registered as operators with `torch.library.custom_op`, with
autograd, and take chapter 6's checks and messages.

Where no CUDA device is present, triton_ops has set TRITON_INTERPRET=1 before
triton is imported (this module imports it first), so the Triton that Helion
generates runs on the CPU through Triton's interpreter, as chapter 6's
kernels do: the CPU tests run the generated code itself. A config is pinned
(`FORWARD_CONFIG`, `BACKWARD_CONFIG`): autotuning times configurations on a
GPU, and without one there is nothing to time.
"""

from __future__ import annotations

import torch
from torch import Tensor

# First: it sets TRITON_INTERPRET=1 when there is no GPU, before triton is imported.
from extending_pytorch import triton_ops  # isort: skip
from extending_pytorch.reference import TripletHingeLoss, check_hyperparameters

import helion  # noqa: E402
import helion.language as hl  # noqa: E402

INTERPRETED = triton_ops.INTERPRETED
DTYPES = triton_ops.DTYPES
distance_dtype = triton_ops.distance_dtype

# The configurations used wherever no GPU has tuned them. block_sizes lists one
# size per hl.tile, in the order the kernel opens them: rows per program, then
# columns per step. One row per program and 64 columns per step is chapter 6's
# launch under the interpreter (grid (B,), BLOCK_D at most 64).
FORWARD_CONFIG = helion.Config(block_sizes=[1, 64], num_warps=4, num_stages=1)
BACKWARD_CONFIG = helion.Config(block_sizes=[1, 64], num_warps=4, num_stages=1)

# Settings every kernel here is compiled with. static_shapes=False: one kernel
# for every B and D (sizes and strides are arguments, as in chapter 6), not
# one per shape. index_dtype=torch.int64: offsets in 64 bits, since
# row * row_stride can pass 2**31; Helion's automatic choice (int32 unless an argument has more
# than 2**31 - 1 elements) counts elements, not the memory a strided view reaches.
KERNEL_SETTINGS = dict(static_shapes=False, index_dtype=torch.int64)


def _forward_body(anchor: Tensor, positive: Tensor, negative: Tensor, hyper: Tensor):
    """The forward kernel's source: per-row loss and the two distances."""
    batch, dim = anchor.size()
    acc = torch.float64 if anchor.dtype == torch.float64 else torch.float32
    per_row = torch.empty([batch], dtype=anchor.dtype, device=anchor.device)
    distances = torch.empty([batch, 2], dtype=acc, device=anchor.device)
    for rows in hl.tile(batch):
        # t1, t2 and beta come from a tensor in the accumulation dtype: a
        # Python float argument reaches a compiled Triton kernel as a float32.
        t1 = hyper[0]
        t2 = hyper[1]
        beta = hyper[2]
        sum_p = hl.zeros([rows], dtype=acc)
        sum_n = hl.zeros([rows], dtype=acc)
        for cols in hl.tile(dim):
            a = anchor[rows, cols].to(acc)  # 16-bit inputs are summed in float32
            diff_p = a - positive[rows, cols].to(acc)
            diff_n = a - negative[rows, cols].to(acc)
            sum_p += (diff_p * diff_p).sum(-1)
            sum_n += (diff_n * diff_n).sum(-1)
        diff = sum_p - sum_n
        # max(x, t) as a comparison, as in chapter 6: a NaN distance gives a
        # NaN loss, as torch.clamp does.
        push = torch.where(diff < t1, t1, diff)
        pull = torch.where(sum_p < t2, t2, sum_p)
        per_row[rows] = (push + beta * pull).to(anchor.dtype)
        distances[rows, 0] = sum_p
        distances[rows, 1] = sum_n
    return per_row, distances


def _backward_body(
    scale: Tensor,
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    distances: Tensor,
    hyper: Tensor,
):
    """The backward kernel's source: the three gradients from the saved distances.

    `scale` is the upstream gradient per row, already divided by B for the
    mean and in the accumulation dtype (a stride-0 view for a scalar one).
    """
    batch, dim = anchor.size()
    acc = torch.float64 if anchor.dtype == torch.float64 else torch.float32
    grad_a = torch.empty([batch, dim], dtype=anchor.dtype, device=anchor.device)
    grad_p = torch.empty([batch, dim], dtype=anchor.dtype, device=anchor.device)
    grad_n = torch.empty([batch, dim], dtype=anchor.dtype, device=anchor.device)
    for rows in hl.tile(batch):
        t1 = hyper[0]
        t2 = hyper[1]
        beta = hyper[2]
        d_ap = distances[rows, 0]
        d_an = distances[rows, 1]
        g = scale[rows]
        # The weights of triplet_math.h: 1 strictly above the bound, 0 at it.
        # In the accumulation dtype: torch.where(..., 1.0, 0.0) would be
        # float32, and by torch's promotion rules a 1-D float32 tile times
        # beta (0-D, float64) stays float32, which rounds beta.
        push = (d_ap - d_an > t1).to(acc)
        pull = (d_ap > t2).to(acc)
        w_ap = 2.0 * g * (push + beta * pull)
        w_an = 2.0 * g * push
        for cols in hl.tile(dim):
            a = anchor[rows, cols].to(acc)
            gp = -w_ap[:, None] * (a - positive[rows, cols].to(acc))
            gn = w_an[:, None] * (a - negative[rows, cols].to(acc))
            grad_p[rows, cols] = gp.to(anchor.dtype)
            grad_n[rows, cols] = gn.to(anchor.dtype)
            grad_a[rows, cols] = (-(gp + gn)).to(anchor.dtype)
    return grad_a, grad_p, grad_n


def make_kernels(forward_config=FORWARD_CONFIG, backward_config=BACKWARD_CONFIG, **settings):
    """The forward and backward Helion kernels, compiled with the given configs.

    A config of None leaves it to Helion: on a GPU it autotunes on the first
    call (`autotune_effort` in `settings` caps the search: "none", "quick" or
    "full"). Other `settings` go to `helion.kernel` as they are.
    """
    settings = dict(KERNEL_SETTINGS, **settings)

    def kernel(body, config):
        return helion.kernel(body, **settings, **({} if config is None else dict(config=config)))

    return kernel(_forward_body, forward_config), kernel(_backward_body, backward_config)


forward_kernel, backward_kernel = make_kernels()


def use_configs(forward_config, backward_config) -> None:
    """Run the operator's kernels under these configs from now on (a GPU's tuned ones, say)."""
    global forward_kernel, backward_kernel
    forward_kernel, backward_kernel = make_kernels(forward_config, backward_config)


def mutated_kernel(body: str, old: str, new: str, directory):
    """One kernel with a mutation: `body` ("_forward_body" or "_backward_body") with its one `old`
    replaced by `new`, under the operator's config and settings, for showing that the reference
    checks catch it. Helion reads a kernel's source from its file, so the mutated body is written to
    `directory`/mutated_kernel.py and imported from there."""
    import importlib.util
    import inspect
    import pathlib

    configs = {"_forward_body": FORWARD_CONFIG, "_backward_body": BACKWARD_CONFIG}
    if body not in configs:
        raise ValueError(f"body must be one of {sorted(configs)}, got {body!r}")
    source = inspect.getsource(globals()[body])
    if source.count(old) != 1:
        raise ValueError(f"old must occur once in {body}; {old!r} occurs {source.count(old)} times")
    path = pathlib.Path(directory) / "mutated_kernel.py"
    header = "from __future__ import annotations\nimport torch\nfrom torch import Tensor\nimport helion.language as hl\n\n"
    path.write_text(header + source.replace(old, new))
    spec = importlib.util.spec_from_file_location("mutated_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return helion.kernel(getattr(module, body), config=configs[body], **KERNEL_SETTINGS)


def autotune(batch: int, dim: int, *, dtype=torch.float32, effort: str = "quick", configs=None, seed: int = 0,
             tuned_forward=None):
    """Autotune both kernels once, on a GPU, on random contiguous rows of B x D.

    Returns (forward config, backward config): what Helion's autotuner with
    `autotune_effort=effort` chose, timing candidates on this GPU; with
    `configs` (a list of helion.Config), it times those only. The backward
    is tuned on the distances the tuned forward saved, with the mean's
    per-row scale (a stride-0 view), as the operator calls it.
    `tuned_forward(config)`, if given, is called with the forward's config
    as soon as it is chosen (a caller that may be stopped keeps it).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("autotuning times configurations on a GPU; there is no CUDA device here")
    restricted = {} if configs is None else dict(configs=list(configs))
    forward, backward = make_kernels(None, None, autotune_effort=effort, autotune_random_seed=seed,
                                     autotune_progress_bar=False, **restricted)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    inputs = torch.randn(3, batch, dim, device="cuda", dtype=dtype, generator=generator).unbind(0)
    hyper = hyperparameter_tensor(-1.0, 0.5, 0.5, dtype, "cuda")
    forward_config = forward.autotune((*inputs, hyper))
    if tuned_forward is not None:
        tuned_forward(forward_config)
    _per_row, distances = forward(*inputs, hyper)
    scale = torch.ones((), dtype=distance_dtype(dtype), device="cuda").div(batch).expand(batch)
    backward_config = backward.autotune((scale, *inputs, distances, hyper))
    return forward_config, backward_config


def hyperparameter_tensor(t1: float, t2: float, beta: float, dtype: torch.dtype, device) -> Tensor:
    """t1, t2 and beta as the kernels take them: a tensor in the accumulation dtype.

    Rounded to float32 for 16- and 32-bit inputs, as torch rounds a Python
    float it compares with a float32 tensor; kept in float64 for float64.
    """
    return torch.tensor([t1, t2, beta], dtype=distance_dtype(dtype), device=device)


@torch.library.custom_op("extending_pytorch::triplet_hinge_loss_helion", mutates_args=())
def triplet_hinge_loss_op(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    t1: float,
    t2: float,
    beta: float,
    reduction: str,
) -> tuple[Tensor, Tensor]:
    """Loss (reduced) and each row's (d_ap, d_an), from the Helion forward kernel."""
    triton_ops._check_inputs(anchor, positive, negative, reduction)
    batch = anchor.shape[0]
    if batch == 0:  # a grid of zero programs is not a launch
        per_row = anchor.new_empty(0)
        distances = anchor.new_empty((0, 2), dtype=distance_dtype(anchor.dtype))
    else:
        hyper = hyperparameter_tensor(t1, t2, beta, anchor.dtype, anchor.device)
        per_row, distances = forward_kernel(anchor, positive, negative, hyper)
    # Reduced with torch, as chapters 4 and 6 do: the reference's summation.
    if reduction == "none":
        return per_row, distances
    return (per_row.sum() if reduction == "sum" else per_row.mean()), distances


@triplet_hinge_loss_op.register_fake
def _(anchor, positive, negative, t1, t2, beta, reduction):
    triton_ops._check_inputs(anchor, positive, negative, reduction)
    batch = anchor.shape[0]
    loss = anchor.new_empty(batch) if reduction == "none" else anchor.new_empty(())
    return loss, anchor.new_empty((batch, 2), dtype=distance_dtype(anchor.dtype))


@torch.library.custom_op("extending_pytorch::triplet_hinge_loss_helion_backward", mutates_args=())
def triplet_hinge_loss_backward_op(
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
    """The three gradients, from the Helion backward kernel and the saved distances."""
    triton_ops._check_inputs(anchor, positive, negative, reduction)
    triton_ops._check_grad_output(grad_output, anchor, reduction)
    triton_ops._check_distances(distances, anchor)
    batch, dim = anchor.shape
    if batch == 0:
        return tuple(anchor.new_empty((0, dim)) for _ in range(3))
    # The upstream gradient per row, in the accumulation dtype, the mean's 1 / B
    # applied there: in float16, grad / B underflows to 0 for a small gradient.
    scale = grad_output.to(distance_dtype(anchor.dtype))
    if reduction == "mean":
        scale = scale / batch
    scale = scale.expand(batch)  # a scalar: a stride-0 view, nothing copied
    hyper = hyperparameter_tensor(t1, t2, beta, anchor.dtype, anchor.device)
    return backward_kernel(scale, anchor, positive, negative, distances, hyper)


@triplet_hinge_loss_backward_op.register_fake
def _(grad_output, anchor, positive, negative, distances, t1, t2, beta, reduction):
    triton_ops._check_inputs(anchor, positive, negative, reduction)
    triton_ops._check_grad_output(grad_output, anchor, reduction)
    triton_ops._check_distances(distances, anchor)
    return tuple(anchor.new_empty(anchor.shape) for _ in range(3))


# Chapter 6's setup_context and backward: the inputs and the distances are
# saved (the distances carry no gradient), and the backward operator reads them.
triplet_hinge_loss_op.register_autograd(
    triton_ops.backward_through(triplet_hinge_loss_backward_op), setup_context=triton_ops._setup_context
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
    """The triplet hinge loss, computed by the Helion kernels.

    Same arguments, checks and results as `reference_triplet_hinge_loss`.
    """
    t1, t2, beta, reduction = check_hyperparameters(t1, t2, beta, reduction)
    loss, _distances = triplet_hinge_loss_op(anchor, positive, negative, t1, t2, beta, reduction)
    return loss


class HelionTripletHingeLoss(TripletHingeLoss):
    """Chapter 1's module, computing the loss with the Helion kernels."""

    loss_function = staticmethod(triplet_hinge_loss)


# ---- Reading what Helion generated ----------------------------------------


def triton_code(kernel, args, config) -> str:
    """The Triton module Helion generates for `kernel` on `args` under `config`.

    A Triton kernel (@triton.jit) and the host function that allocates the
    outputs and launches it; `bind` specialises on the arguments' dtypes and
    ranks, as a call would.
    """
    return kernel.bind(tuple(args)).to_triton_code(config)


def compile_generated_for_gpu(jobs, *, arch: int = 90, timeout: float = 300) -> list:
    """Compile the Triton kernels of Helion's generated code for a GPU, without one.

    `jobs` is a list of (code, host, args): a module `triton_code` returned,
    the name of its host function, and the arguments to call it with (tensors
    are sent as their dtype, shape and strides, and rebuilt on the CPU). In
    one fresh process with TRITON_INTERPRET=0, each host function runs with a
    launcher that compiles each launch for compute capability `arch`
    (chapter 6's `triton_ops.compile_for_gpu`, with the launch's num_warps and
    num_stages) instead of running it. Returns, per job, the PTX of each
    launch.
    """
    import json
    import os
    import subprocess
    import sys
    import tempfile
    import textwrap

    def sent(value):
        if isinstance(value, Tensor):
            return dict(dtype=str(value.dtype).removeprefix("torch."), shape=list(value.shape),
                        stride=list(value.stride()))
        return value

    driver = textwrap.dedent("""
        import importlib, json, sys, torch
        from extending_pytorch import triton_ops
        arch, jobs = json.loads(sys.argv[1])
        results = []
        for index, (host, spec) in enumerate(jobs):
            module = importlib.import_module(f"helion_generated_{index}")
            args = [torch.empty_strided(a["shape"], a["stride"], dtype=getattr(torch, a["dtype"]))
                    if isinstance(a, dict) else a for a in spec]
            ptx = []

            def compile_launch(kernel, grid, *launch_args, num_warps, num_stages, **options):
                compiled = triton_ops.compile_for_gpu(kernel, *launch_args, arch=arch, num_warps=num_warps,
                                                      num_stages=num_stages, **options)
                ptx.append(compiled.asm["ptx"])

            getattr(module, host)(*args, _launcher=compile_launch)
            results.append(ptx)
        print(json.dumps(results))
    """)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as scratch:
        for index, (code, _, _) in enumerate(jobs):
            with open(os.path.join(scratch, f"helion_generated_{index}.py"), "w") as f:
                f.write(code)
        spec = [[host, [sent(a) for a in args]] for _, host, args in jobs]
        env = dict(
            os.environ,
            TRITON_INTERPRET="0",
            TRITON_CACHE_DIR=os.path.join(scratch, "cache"),
            TRITON_DEFAULT_FP_FUSION="1",  # Triton 3.9's default, without its warning
            PYTHONPATH=os.pathsep.join([scratch, package, os.environ.get("PYTHONPATH", "")]),
        )
        result = subprocess.run(
            [sys.executable, "-c", driver, json.dumps([arch, spec])],
            capture_output=True, text=True, env=env, cwd=scratch, timeout=timeout,
        )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"the compiling process failed ({last})")
    return json.loads(result.stdout.strip().splitlines()[-1])
