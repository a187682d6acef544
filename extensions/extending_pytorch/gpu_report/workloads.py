"""What the report's steps run on the GPU, each in a process of its own.

    python -m extending_pytorch.gpu_report.workloads build
    python -m extending_pytorch.gpu_report.workloads sanitize
    python -m extending_pytorch.gpu_report.workloads wrong-rank
    python -m extending_pytorch.gpu_report.workloads helion-autotune OUTPUT.json
    python -m extending_pytorch.gpu_report.workloads profile IMPLEMENTATION [--helion-configs FILE]
    python -m extending_pytorch.gpu_report.workloads sweep OUTPUT.json [--quick] [--helion-configs FILE]
    python -m extending_pytorch.gpu_report.workloads emulator

Every command loads the operators first (`load_operators`): built with
`native.load_jit`, against whatever torch runs, so the report needs no
`make build` and no virtual environment of the book's.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import torch

SETTINGS = dict(t1=-1.0, t2=0.5, beta=0.5)
# The benchmark sweep, each shape in float32 and bfloat16, in the order they
# are measured (a sweep cut by its time limit keeps the first): the sizes of
# the first GPU run first, 32768 x 8192 among them, where torch.compile beat
# the CUDA operator.
SWEEP_SIZES = [(4096, 512), (32768, 8192), (32768, 1024), (16384, 1024), (32768, 4096)]
SWEEP_QUICK_SIZES = [(4096, 512), (32768, 8192)]
SWEEP_IMPLEMENTATIONS = ["eager", "compile", "cpp", "cpp grad_in_forward", "triton", "helion"]
PROFILE_SIZE = (32768, 8192)  # where the bytes decide the time
PROFILE_IMPLEMENTATIONS = ("cpp", "compile", "triton", "cpp grad_in_forward", "helion")
# Chapter 9's kernels are autotuned once, at this size (float32), with this
# effort; the sweep and the profile then run every size under those configs.
HELION_TUNE_SIZE = PROFILE_SIZE
HELION_EFFORT = "quick"


def load_operators() -> None:
    """Build (once; later calls only load) and load the C++/CUDA operators.

    Uses the ahead-of-time build when it is there, built for this torch and
    with the CUDA kernels, else `native.load_jit("_C")`.
    """
    from extending_pytorch import native

    if native.operators_registered():
        return
    info = native.build_info()
    if info is not None and info.get("torch") == torch.__version__:
        native.load_ops()
        if torch._C._dispatch_has_kernel_for_dispatch_key(native.MARKER_OP, "CUDA"):
            return
        raise RuntimeError(
            "extending_pytorch._C was built without the CUDA kernels; rebuild it "
            "on this machine (make build) or remove it so the report builds its own"
        )
    native.load_jit("_C")
    if not torch._C._dispatch_has_kernel_for_dispatch_key(native.MARKER_OP, "CUDA"):
        raise RuntimeError("load_jit('_C') built the operators without their CUDA kernels")


def build() -> None:
    load_operators()
    print("operators loaded, CUDA kernels registered")


def sanitize() -> None:
    """The book's kernels at small shapes, for compute-sanitizer's tools.

    Every path once: the packed and the scalar (misaligned) loads, every
    dtype, a batch that is not a whole number of warps, the backward with a
    gradient not asked for, the empty batch, and the involution kernels.
    """
    from extending_pytorch import involution, ops

    generator = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for dim in (515, 8):
            base = torch.randn(3, 37, dim + 1, device="cuda", dtype=dtype, generator=generator)
            a, p, n = base[0, :, :dim], base[1, :, 1:], base[2, :, :dim].contiguous()
            leaves = [t.detach().requires_grad_() for t in (a, p, n)]
            loss = ops.triplet_hinge_loss(*leaves, **SETTINGS)
            torch.autograd.grad(loss, leaves)
            torch.autograd.grad(ops.triplet_hinge_loss(leaves[0], p, n, **SETTINGS), leaves[0])
            # grad_in_forward: these views (rows dim + 1 apart, one offset by an
            # element) take the two kernels; the contiguous copies below, one pass
            # (dim 8: one pack per thread; dim 515: the two kernels again, not
            # whole packs). The in-place scaling with grad_output 1, 3 and per row.
            for grad_output in (1.0, 3.0):
                loss = ops.triplet_hinge_loss(*leaves, **SETTINGS, grad_in_forward=True)
                torch.autograd.grad(loss * grad_output, leaves)
            inputs = [t.detach().contiguous().requires_grad_() for t in (a, p, n)]
            loss = ops.triplet_hinge_loss(*inputs, **SETTINGS, reduction="none", grad_in_forward=True)
            torch.autograd.grad(loss, inputs, torch.linspace(0, 2, 37, device="cuda", dtype=dtype))
    # The one-pass kernel with 8 packs per thread, 3 rows (each block's barriers used).
    rows = [torch.randn(3, 8192, device="cuda", generator=generator).requires_grad_() for _ in range(3)]
    torch.autograd.grad(ops.triplet_hinge_loss(*rows, **SETTINGS, grad_in_forward=True), rows)
    empty = torch.empty(0, 8, device="cuda", requires_grad=True)
    torch.autograd.grad(ops.triplet_hinge_loss(empty, empty, empty, **SETTINGS), empty)
    x = torch.randn(2, 8, 13, 11, device="cuda", requires_grad=True)
    w = torch.randn(2, 2, 3, 3, 13, 11, device="cuda", requires_grad=True)
    out = involution.involution(x, w, 1, 1, 1)
    torch.autograd.grad(out.sum(), (x, w))
    torch.cuda.synchronize()
    print("kernels ran: triplet forward and backward (4 dtypes, packed and scalar), the one-pass kernel and "
          "its in-place scaling, involution")


def wrong_rank() -> None:
    """Tensors of the wrong rank given to the involution operators on CUDA.

    torch 2.11 once killed the process here (SIGSEGV in the dispatcher),
    where the CPU raises "weight must be 6-D". The operators are called
    directly, as `torch.ops` users call them (the Python function checks the
    ranks before they are reached): forward, forward with gradients, backward.
    The step fails unless each call raises an error that names the argument;
    a crash ends the process, and the step records the signal.
    """
    from extending_pytorch.involution import involution_backward_op, involution_op

    x = torch.randn(2, 8, 13, 11, device="cuda")
    w = torch.randn(2, 2, 3, 3, 13, 11, device="cuda")
    grad = torch.randn(2, 8, 13, 11, device="cuda")
    cases = {
        "a 5-D weight": (x, torch.randn(2, 2, 9, 13, 11, device="cuda"), "weight"),
        "a 7-D weight": (x, torch.randn(1, 2, 2, 3, 3, 13, 11, device="cuda"), "weight"),
        "a 3-D input": (x[0], w, "input"),
    }
    settings = ([1, 1], [1, 1], [1, 1])  # stride, padding, dilation
    for what, (input, weight, name) in cases.items():
        calls = {
            "forward": lambda: involution_op(input, weight, *settings),
            "forward with gradients": lambda: involution_op(
                input.requires_grad_(), weight.requires_grad_(), *settings
            ),
            "backward": lambda: involution_backward_op(grad, input, weight, *settings, [True, True]),
        }
        for call_name, call in calls.items():
            try:
                call()
            except (RuntimeError, ValueError, TypeError) as error:
                message = str(error).splitlines()[0]
                if name not in message:
                    sys.exit(f"{what}, {call_name}: the error does not name the {name}: {message}")
                print(f"{what}, {call_name}: {type(error).__name__}: {message}")
            else:
                sys.exit(f"{what}, {call_name}: accepted on CUDA")
        input.requires_grad_(False)
        weight.requires_grad_(False)


def emulator_check() -> None:
    """The SIMT emulator on this machine: which CUDA headers it found, and one check.

    The same kernels, emulated on the CPU and run on the GPU, must agree with
    each other as both agree with the reference.
    """
    from extending_pytorch import emulator, ops

    print("the emulator's CUDA headers:", emulator.cuda_include_description())
    a, p, n = (t.requires_grad_() for t in torch.randn(3, 37, 36, dtype=torch.float64).unbind(0))
    emulated = emulator.triplet_hinge_loss(a, p, n, **SETTINGS, reduction="none")
    on_gpu = ops.triplet_hinge_loss(a.cuda(), p.cuda(), n.cuda(), **SETTINGS, reduction="none")
    torch.testing.assert_close(emulated, on_gpu.cpu())
    print("emulated on the CPU and run on the GPU: the same losses (float64, B = 37, D = 36)")


def helion_autotune(output: pathlib.Path) -> None:
    """Autotune chapter 9's two Helion kernels once; their configs written to `output`."""
    import time

    from extending_pytorch import helion_ops

    batch, dim = HELION_TUNE_SIZE
    started = time.monotonic()
    record = dict(batch=batch, dim=dim, dtype="float32", effort=HELION_EFFORT, forward=None, backward=None)

    def write(**configs):
        # After each kernel: a step stopped while the backward tunes keeps the forward's config.
        record.update(configs, seconds=round(time.monotonic() - started, 1))
        output.write_text(json.dumps(record, indent=1))

    forward, backward = helion_ops.autotune(
        batch, dim, effort=HELION_EFFORT, tuned_forward=lambda config: write(forward=dict(config))
    )
    write(forward=dict(forward), backward=dict(backward))
    print(f"autotuned in {record['seconds']:.0f} s at {batch} x {dim}: forward {dict(forward)}; "
          f"backward {dict(backward)}")


def use_helion_configs(path: pathlib.Path | None) -> dict | None:
    """Run chapter 9's operator under the configs in `path`, if it exists: that record.

    Without it (the autotune step failed or did not run) the operator keeps
    its pinned configs, and the records say so (None); a kernel the step
    did not finish tuning (the backward, if it was stopped) keeps its own.
    """
    if path is None or not path.is_file():
        return None
    import helion

    from extending_pytorch import helion_ops

    record = json.loads(path.read_text())
    tuned = [helion.Config(**record[kernel]) if record.get(kernel) else pinned
             for kernel, pinned in (("forward", helion_ops.FORWARD_CONFIG), ("backward", helion_ops.BACKWARD_CONFIG))]
    helion_ops.use_configs(*tuned)
    return record


def _implementation(name):
    from extending_pytorch import bench

    return bench.implementations()[name]()


def profile(name: str, helion_configs: pathlib.Path | None = None) -> None:
    """One training step of `name` inside cudaProfilerStart/Stop, for ncu.

    Run under `ncu --profile-from-start off`: the warm-up steps (compilation,
    autotuning, the caching allocator's first allocations) are not profiled.
    """
    load_operators()
    import torch.cuda

    if name not in PROFILE_IMPLEMENTATIONS:
        sys.exit(f"implementation must be one of {PROFILE_IMPLEMENTATIONS}, got {name!r}")
    if name == "helion":
        use_helion_configs(helion_configs)
    loss_fn = _implementation(name)
    batch, dim = PROFILE_SIZE
    inputs = [t.requires_grad_() for t in torch.randn(3, batch, dim, device="cuda").unbind(0)]
    for _ in range(3):
        torch.autograd.grad(loss_fn(*inputs, **SETTINGS), inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    torch.autograd.grad(loss_fn(*inputs, **SETTINGS), inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled one forward + backward of {name} at B x D = {batch} x {dim}, float32")


def sweep(output: pathlib.Path, quick: bool = False, helion_configs: pathlib.Path | None = None) -> None:
    """The benchmark sweep, written to `output` after every size.

    A step stopped at its time limit still leaves the sizes it finished.
    Helion's kernels run under the tuned configs in `helion_configs` where
    that file exists, else under their pinned ones; the record says which.
    """
    from extending_pytorch import bench

    load_operators()
    names, helion = list(SWEEP_IMPLEMENTATIONS), None
    try:  # a Helion that fails here (not installed, or this torch) must not cost the rest
        tuned = use_helion_configs(helion_configs)
        small = [t.requires_grad_() for t in torch.randn(3, 8, 40, device="cuda").unbind(0)]
        torch.autograd.grad(_implementation("helion")(*small, **SETTINGS), small)
        helion = "pinned" if not tuned else ("tuned" if tuned.get("backward") else "forward tuned, backward pinned")
    except Exception as error:  # noqa: BLE001 - recorded, and the sweep goes on
        names.remove("helion")
        helion = f"left out: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        print(f"Helion {helion}", flush=True)
    sizes = SWEEP_QUICK_SIZES if quick else SWEEP_SIZES
    result = None
    for size in sizes:
        for dtype in (torch.float32, torch.bfloat16):
            part = bench.run(
                [size],
                rounds=3,
                min_run_time=0.1,
                names=names,
                device="cuda",
                dtype=dtype,
            )
            if result is None:
                result = dict(part, dtype=None, records=[], helion_configs=helion)
            result["records"] += part["records"]
            output.write_text(json.dumps(result, indent=1))
            print(f"measured {dtype} {size[0]} x {size[1]}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build")
    commands.add_parser("sanitize")
    commands.add_parser("wrong-rank")
    commands.add_parser("emulator")
    profiled = commands.add_parser("profile")
    profiled.add_argument("implementation", choices=PROFILE_IMPLEMENTATIONS)
    profiled.add_argument("--helion-configs", type=pathlib.Path)
    swept = commands.add_parser("sweep")
    swept.add_argument("output", type=pathlib.Path)
    swept.add_argument("--quick", action="store_true")
    swept.add_argument("--helion-configs", type=pathlib.Path)
    tuned = commands.add_parser("helion-autotune")
    tuned.add_argument("output", type=pathlib.Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: these workloads run on a GPU only")
    if args.command == "build":
        build()
    elif args.command == "profile":
        profile(args.implementation, args.helion_configs)
    elif args.command == "sweep":
        sweep(args.output, args.quick, args.helion_configs)
    elif args.command == "helion-autotune":
        helion_autotune(args.output)
    else:
        load_operators()
        {"sanitize": sanitize, "wrong-rank": wrong_rank, "emulator": emulator_check}[args.command]()


if __name__ == "__main__":
    main()
