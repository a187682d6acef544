"""Benchmark the triplet hinge loss implementations, as `make bench` does.

    python -m extending_pytorch.bench [--output FILE] [--quick]

For each size (B, D) it times, in float32 on all of torch's CPU threads:

- eager: the chapter-1 reference, autograd's composite of tensor ops;
- compile: `torch.compile` of that same function (one compiled copy per size);
- function: the chapter-3 `TripletHingeLossFunction`;
- cpp: the chapter-4 C++ operator (chapter 5's CUDA kernels on a GPU);
- cpp grad_in_forward: the same with grad_in_forward=True: the gradients
  are computed in the forward pass and kept for backward, so forward +
  backward moves 6 B D numbers (on a GPU for rows that fit chapter 5's
  one-pass kernel); for the forward task (inputs that need no gradient) it
  is the plain operator;
- triton: the chapter-6 Triton kernels, on a GPU only,

each for the forward pass alone and for forward + backward (gradients of all
three inputs, by `torch.autograd.grad`, so nothing accumulates into `.grad`).
In the same run it measures the copy bandwidth at the size of the data. Each
time is set against the minimum traffic of its task: a forward reads 3 B D
numbers, and a separate forward and backward must move at least 9 B D (read
the inputs twice, write 3 gradients); the GB/s reported are that minimum
traffic divided by the time, next to the copy bandwidth.

Machines are noisy, so every implementation is timed once per round, rounds
are interleaved, and each result is the median over rounds; the rounds'
spread is kept, and `speed_words` calls a ratio within it "no measurable
difference".
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib

import torch

from extending_pytorch.benchmarking import (
    Timing,
    describe_machine,
    keep_freed_memory,
    machine,
    timed,
)
from extending_pytorch.display import Table
from extending_pytorch.reference import reference_triplet_hinge_loss

SETTINGS = dict(t1=-1.0, t2=0.5, beta=0.5)
TASKS = ("forward", "forward+backward")
# The minimum traffic of each task, in B x D elements (see the docstring).
MINIMUM_TRAFFIC_ELEMENTS = {"forward": 3, "forward+backward": 9}
FLOOR_ELEMENTS = MINIMUM_TRAFFIC_ELEMENTS  # the earlier name, kept for callers
DEFAULT_SIZES = [(b, d) for d in (128, 512) for b in (256, 1024, 4096, 16384)]
# Timed on a GPU only: on a CPU, Triton's interpreter would run them in numpy.
GPU_ONLY = ("triton", "helion")
QUICK_SIZES = [(1024, 512), (4096, 512)]
GPU_SIZES = [(b, d) for d in (512, 1024) for b in (4096, 16384, 65536)]


def implementations() -> dict:
    """Name -> a function that, given a size, returns the loss function.

    Each factory imports its implementation when it is called, so that
    timing some of them needs only what those need: chapter 6 on Colab,
    installed without the C++ build, times "eager", "compile" and "triton"
    without importing `extending_pytorch.ops` (which refuses to load unbuilt).
    """
    return {
        "eager": lambda: reference_triplet_hinge_loss,
        # A fresh compiled copy per size, with dynamo's caches emptied first
        # (`measure_size` does that): dynamo keeps its compiled graphs on the
        # function's code object, shared by every torch.compile of it, so
        # sizes and dtypes would pile up until the recompile limit, after
        # which dynamo silently runs eager. dynamic=False keeps each size's
        # kernels specialised to it, as a fixed-shape training loop gets.
        "compile": lambda: torch.compile(reference_triplet_hinge_loss, dynamic=False),
        "function": _function_loss,
        "cpp": _cpp_loss,
        "cpp grad_in_forward": lambda: functools.partial(_cpp_loss(), grad_in_forward=True),
        # Chapter 6's Triton kernels, timed on the GPU only (`run` leaves
        # them out on a CPU, where Triton's interpreter runs them in numpy).
        "triton": _triton_loss,
        # Chapter 9's Helion kernels, likewise on the GPU only, under the configs
        # `helion_ops.use_configs` last set (the GPU report's tuned ones).
        "helion": _helion_loss,
    }


def _function_loss():
    from extending_pytorch.functions import triplet_hinge_loss_function

    return triplet_hinge_loss_function


def _cpp_loss():
    from extending_pytorch.ops import triplet_hinge_loss

    return triplet_hinge_loss


def _helion_loss():
    from extending_pytorch.helion_ops import triplet_hinge_loss

    return triplet_hinge_loss


def _triton_loss():
    from extending_pytorch.triton_ops import triplet_hinge_loss

    return triplet_hinge_loss


def _forward(loss_fn, inputs):
    loss_fn(*inputs, **SETTINGS)


def _forward_backward(loss_fn, inputs):
    torch.autograd.grad(loss_fn(*inputs, **SETTINGS), inputs)


def measure_size(
    batch,
    dim,
    *,
    rounds=3,
    min_run_time=0.2,
    names=None,
    device="cpu",
    dtype=torch.float32,
):
    """Median seconds per (implementation, task), and the copy bandwidth.

    Each record also has `spread`: (slowest round - fastest) / median, the
    run-to-run noise of that median (0 with one round). `floor_bytes` is the
    task's minimum traffic in bytes (the key keeps its earlier name), for
    elements of `dtype`; the copy bandwidth is measured in the same dtype.
    """
    generator = torch.Generator().manual_seed(0)
    data = torch.randn(3, batch, dim, generator=generator).to(device, dtype)
    data = data.unbind(0)
    inputs = {
        "forward": list(data),
        "forward+backward": [t.clone().requires_grad_() for t in data],
    }
    factories = implementations()
    if "compile" in (names or factories):
        torch.compiler.reset()  # see "compile" in `implementations`
    functions = {name: factories[name]() for name in names or factories}
    threads = torch.get_num_threads()
    source = torch.randn(3 * batch * dim, generator=generator).to(device, dtype)
    target = torch.empty_like(source)
    times = {(name, task): [] for name in functions for task in TASKS}
    copies = []
    for _ in range(rounds):
        for name, loss_fn in functions.items():
            for task, run in zip(TASKS, (_forward, _forward_backward)):
                names_ = dict(run=run, loss_fn=loss_fn, inputs=inputs[task])
                m = timed(
                    "run(loss_fn, inputs)",
                    names_,
                    min_run_time=min_run_time,
                    num_threads=threads,
                )
                times[name, task].append(m.median)
        m = timed(
            "target.copy_(source)",
            dict(target=target, source=source),
            min_run_time=min_run_time,
            num_threads=threads,
        )
        copies.append(m.median)
    copy_seconds = Timing(copies)
    copy_gbps = 2 * source.numel() * source.element_size() / copy_seconds / 1e9
    records = []
    for (name, task), samples in times.items():
        seconds = Timing(samples)
        floor_bytes = (
            MINIMUM_TRAFFIC_ELEMENTS[task]
            * batch
            * dim
            * source.element_size()
        )
        gbps = floor_bytes / seconds / 1e9
        records.append(
            dict(
                implementation=name,
                task=task,
                batch=batch,
                dim=dim,
                dtype=str(dtype).removeprefix("torch."),
                seconds=float(seconds),
                spread=seconds.spread,
                floor_bytes=floor_bytes,
                gbps=gbps,
                copy_gbps=copy_gbps,
                fraction_of_copy=gbps / copy_gbps,
            )
        )
    return records


def run(
    sizes=DEFAULT_SIZES,
    *,
    rounds=3,
    min_run_time=0.2,
    names=None,
    device="cpu",
    dtype=torch.float32,
) -> dict:
    """Benchmark every size: a JSON-ready dict, with the machine's details."""
    keep_freed_memory()
    if names is None:
        # Triton and Helion run on the GPU only.
        names = [n for n in implementations() if n not in GPU_ONLY or device == "cuda"]
    records = []
    for batch, dim in sizes:
        records += measure_size(
            batch,
            dim,
            rounds=rounds,
            min_run_time=min_run_time,
            names=names,
            device=device,
            dtype=dtype,
        )
    return dict(
        machine=machine(torch.get_num_threads(), device),
        dtype=str(dtype).removeprefix("torch."),
        settings=SETTINGS,
        records=records,
    )


class Ratio(float):
    """A time ratio (other's time / mine) that carries its noise.

    `noise` is the sum of the two timings' spreads (see `Timing`): a ratio
    r with max(r, 1/r) - 1 at most `noise` is within run-to-run noise.
    None when a timing's spread is unknown (records from an older run).
    """

    noise: float | None

    def __new__(cls, value, noise=None):
        ratio = super().__new__(cls, value)
        ratio.noise = noise
        return ratio

    def __reduce__(self):
        return (Ratio, (float(self), self.noise))


def time_ratio(other, mine) -> Ratio:
    """other / mine, two timings of `benchmarking.compare` (or `Timing`s).

    Above 1 mine is faster. The ratio's noise is the sum of their spreads.
    """
    spreads = [getattr(t, "spread", None) for t in (other, mine)]
    noise = None if None in spreads else sum(spreads)
    return Ratio(float(other) / float(mine), noise)


def ratios(records, batch, dim, task="forward+backward", of="cpp") -> dict:
    """Time ratios (each implementation's time / `of`'s time) at one size.

    A ratio above 1 means `of` is faster; `speed_words` turns one into words.
    Each is a `Ratio` (a float with the noise of the two medians).
    """
    at = {
        r["implementation"]: r
        for r in records
        if r["batch"] == batch and r["dim"] == dim and r["task"] == task
    }
    mine = at[of]
    def noise(r):
        if "spread" not in r or "spread" not in mine:
            return None
        return r["spread"] + mine["spread"]

    result = {
        name: Ratio(r["seconds"] / mine["seconds"], noise(r))
        for name, r in at.items()
        if name != of
    }
    result["fraction_of_copy"] = mine["fraction_of_copy"]
    return result


def speed_words(time_ratio: float, noise: float | None = None) -> str:
    """Words for a time ratio (other's time / mine), computed from its value.

    Above 1 mine is faster ("2.00x faster"), below 1 slower ("4.00x slower",
    never "0.25x faster"). A ratio within `noise` of 1 (max(r, 1/r) - 1 at
    most `noise`, a fraction such as 0.08) is "no measurable difference", and
    so is one that equals its noise at the precision printed (1.13 with noise
    13%): two digits cannot tell it from the noise, and another run of the same
    rounds would as likely land on either side.
    `noise` defaults to the ratio's own (`Ratio.noise`, from the spread the
    benchmark measured); a plain number without one is refused, since a
    difference cannot be told from noise without knowing the noise.
    """
    if noise is None:
        noise = getattr(time_ratio, "noise", None)
    if noise is None:
        raise ValueError(
            "speed_words needs the measurement's noise: pass noise=, or a ratio "
            "from bench.ratios or bench.time_ratio, which carry it"
        )
    if not time_ratio > 0:
        raise ValueError(f"time_ratio must be positive, got {time_ratio}")
    if round(max(time_ratio, 1 / time_ratio) - 1, 2) <= round(noise, 2):
        return "no measurable difference"
    if time_ratio >= 1:
        return f"{time_ratio:.2f}x faster"
    return f"{1 / time_ratio:.2f}x slower"


def table(records, machine: dict | None = None) -> Table:
    """Median milliseconds (and GB/s of minimum traffic), one row per size.

    With `machine` (as `run` returns it) the caption says where it was
    measured. `str()` of the result is a text table, for a terminal.
    """
    names = list(dict.fromkeys(r["implementation"] for r in records))
    keys = list(
        dict.fromkeys((r["task"], r["batch"], r["dim"]) for r in records)
    )
    rows = []
    for task, batch, dim in keys:
        row = {
            r["implementation"]: r
            for r in records
            if (r["task"], r["batch"], r["dim"]) == (task, batch, dim)
        }
        rows.append(
            [task, batch, dim]
            + [
                f"{row[n]['seconds'] * 1e3:.3f} ({row[n]['gbps']:.0f})"
                for n in names
            ]
            + [f"{row[names[0]]['copy_gbps']:.0f}"]
        )
    caption = describe_machine(machine) if machine else ""
    return Table(
        [
            "task",
            "B",
            "D",
            *(f"{n} ms (GB/s)" for n in names),
            "copy bandwidth GB/s",
        ],
        rows,
        caption=caption,
    )


def plot_bandwidth(records, dim, task="forward+backward"):
    """A figure: GB/s of minimum traffic against B, with the copy bandwidth.

    One line per implementation, for the records of one `dim` and `task`.
    """
    import matplotlib.pyplot as plt

    records = [r for r in records if r["task"] == task and r["dim"] == dim]
    if not records:
        raise ValueError(f"no records for dim={dim} and task={task!r}")
    batches = sorted({r["batch"] for r in records})
    at = {(r["implementation"], r["batch"]): r for r in records}
    fig, axis = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    for name in dict.fromkeys(r["implementation"] for r in records):
        axis.plot(
            batches,
            [at[name, b]["gbps"] for b in batches],
            marker="o",
            label=name,
        )
    first = records[0]["implementation"]
    axis.plot(
        batches,
        [at[first, b]["copy_gbps"] for b in batches],
        linestyle="--",
        color="gray",
        label="copy bandwidth",
    )
    axis.set(
        xscale="log",
        xlabel=f"batch size B (D = {dim})",
        ylabel=(
            f"minimum traffic / time (GB/s)\n"
            f"({MINIMUM_TRAFFIC_ELEMENTS[task]} B D x 4 bytes)"
        ),
        title=f"{task}: minimum traffic / time, and the copy bandwidth",
    )
    axis.legend(fontsize=8)
    return fig


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", type=pathlib.Path, help="write the results as JSON"
    )
    parser.add_argument(
        "--quick", action="store_true", help="two sizes, two rounds"
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu (default) or cuda"
    )
    args = parser.parse_args(argv)
    if args.device == "cuda":
        sizes = GPU_SIZES
    else:
        sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    results = run(sizes, rounds=2 if args.quick else 3, device=args.device)
    print(table(results["records"], results["machine"]))
    r = ratios(results["records"], 4096, 512)
    print(
        "\nB=4096, D=512, forward+backward: the C++ operator is "
        f"{r['eager']:.2f}x eager, {r['compile']:.2f}x torch.compile, "
        f"{r['function']:.2f}x the chapter-3 Function, "
        f"its minimum traffic / time at {r['fraction_of_copy']:.2f} of the "
        "copy bandwidth"
    )
    if args.device == "cpu":
        g = ratios(results["records"], 4096, 512, of="cpp grad_in_forward")
        print(
            "with grad_in_forward=True: "
            f"{g['compile']:.2f}x torch.compile, {g['cpp']:.2f}x the plain operator"
        )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
