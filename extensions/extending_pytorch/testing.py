"""Checking an implementation of the triplet loss against chapter 1's reference.

Used by the tests and by the chapters that build a new rung. The important
part is *how* inputs with unusual memory layouts are passed: a view must reach
the implementation as the view itself. `view.detach().clone()` would hand it a
fresh contiguous tensor, and the strided, misaligned or stride-0 code path
would never run. So each case starts from a base tensor (the leaf that
requires gradients), takes the view, checks that the view really has the
layout its name claims, passes the view, and compares gradients with respect
to the base: for an expanded input, that is the sum over the rows that share
one row of memory.

That sum needs its own tolerance. In 16 bits each row's gradient is rounded
(half a unit in its last place), and the B rounded rows are then added: the
error grows with B and with the rows' magnitudes, while the sum itself can
nearly cancel. A tolerance relative to the sum (assert_close's) rejects a
correct kernel; one relative to the sum of the rows' magnitudes does not,
and still rejects zero or scaled gradients. It is looser than assert_close
by design: one row left out of many can hide in 16-bit rounding, which the
same check in float32 and float64 catches. `check_against_reference` uses
it for every base element whose gradient sums several view elements.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.testing import assert_close

from extending_pytorch.reference import reference_triplet_hinge_loss


@dataclass(frozen=True)
class Layout:
    """A way to lay out a (batch, dim) input: base shape, view, and its claim."""

    describe: str
    base_shape: Callable[[int, int], tuple[int, ...]]
    view: Callable[[Tensor, int, int], Tensor]  # (base, batch, dim) -> view
    # Whether a (batch, dim) view has the layout described (checked on every use).
    holds: Callable[[Tensor], bool]


def _aligned16(t: Tensor) -> bool:
    return t.data_ptr() % 16 == 0


LAYOUTS: dict[str, Layout] = {
    "contiguous": Layout(
        "rows one after another, elements adjacent",
        lambda b, d: (b, d),
        lambda base, b, d: base,
        lambda v: v.is_contiguous(),
    ),
    "misaligned": Layout(
        "x[:, 1:] of a (B, D + 1) tensor: unit element stride, but the first "
        "row starts one element past a 16-byte boundary",
        lambda b, d: (b, d + 1),
        lambda base, b, d: base[:, 1:],
        lambda v: v.stride(1) == 1 and v.storage_offset() == 1 and not _aligned16(v),
    ),
    "row-padded": Layout(
        "x[:, :D] of a (B, D + 1) tensor: the first row starts aligned, later "
        "rows one element further each",
        lambda b, d: (b, d + 1),
        lambda base, b, d: base[:, :d],
        lambda v: v.size(0) <= 1 or (v.stride() == (v.size(1) + 1, 1) and v.storage_offset() == 0),
    ),
    "offset": Layout(
        "a (B, D) view one element into its storage: rows adjacent (row "
        "stride D), but no row start on a 16-byte boundary when D is a "
        "multiple of 4 floats",
        lambda b, d: (b * d + 1,),
        lambda base, b, d: base[1:].view(b, d),
        lambda v: v.stride() == (v.size(1), 1) and v.storage_offset() == 1 and not _aligned16(v),
    ),
    "column-strided": Layout(
        "x[:, ::2] of a (B, 2D) tensor: every other element",
        lambda b, d: (b, 2 * d),
        lambda base, b, d: base[:, ::2],
        lambda v: v.size(1) <= 1 or v.stride(1) == 2,
    ),
    "transposed": Layout(
        "x.T of a (D, B) tensor: rows are columns of memory",
        lambda b, d: (d, b),
        lambda base, b, d: base.T,
        lambda v: v.size(0) <= 1 or v.size(1) <= 1 or (v.stride(0) == 1 and v.stride(1) == v.size(0)),
    ),
    "expanded": Layout(
        "x.expand(B, D) of a (1, D) tensor: every row is the same memory (row stride 0)",
        lambda b, d: (1, d),
        lambda base, b, d: base.expand(b, d),
        lambda v: v.size(0) <= 1 or v.stride(0) == 0,
    ),
}


def make_view(
    layout: str,
    batch: int,
    dim: int,
    *,
    dtype=torch.float32,
    device="cpu",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """A base tensor (a leaf that requires grad) and a (batch, dim) view of it.

    Raises AssertionError if the view does not have the layout its name says.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    spec = LAYOUTS[layout]
    base = torch.randn(spec.base_shape(batch, dim), generator=generator, dtype=torch.float64)
    base = base.to(device=device, dtype=dtype).requires_grad_()
    view = spec.view(base, batch, dim)
    assert view.shape == (batch, dim), (layout, view.shape)
    # (An empty view has no layout to speak of.)
    assert view.numel() == 0 or spec.holds(view), (
        f"the {layout!r} view of shape {tuple(view.shape)} has strides {view.stride()} "
        f"and offset {view.storage_offset()}: not {spec.describe}"
    )
    return base, view


def aliasing(layout: str, base: Tensor, batch: int, dim: int) -> Tensor:
    """For each element of `base`, how many elements of its (batch, dim) view share its memory.

    1 for every element a plain view reads, 0 for one it skips (the padding
    of "row-padded"), and `batch` for every element of an "expanded" input:
    the number of rows its gradient sums. Found by the view's own backward,
    so it holds for any view, whatever its strides.
    """
    ones = torch.ones(batch, dim, dtype=base.dtype, device=base.device)
    return summed_magnitude(layout, base, ones)


def summed_magnitude(layout: str, base: Tensor, view_grad: Tensor) -> Tensor:
    """For each element of `base`, the sum of |view_grad| over the view elements sharing it.

    The gradient of the base is the sum of the view's gradient over those
    elements; this is the sum of their magnitudes, the scale of the rounding
    error that adding them in a low precision can make. It equals
    |gradient of the base| wherever no two view elements share memory.
    """
    probe = torch.zeros(base.shape, dtype=view_grad.dtype, device=view_grad.device)
    probe.requires_grad_()
    view = LAYOUTS[layout].view(probe, *view_grad.shape)
    (scale,) = torch.autograd.grad(view, probe, view_grad.abs())
    return scale


# torch.testing.assert_close's documented defaults (rtol, atol), for the
# summed-gradient rule when no tolerance is given.
DEFAULT_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def assert_close_summed(
    actual: Tensor, expected: Tensor, scale: Tensor, *, rtol: float, atol: float, what: str
) -> None:
    """|actual - expected| <= atol + rtol * scale, element by element (NaN fails).

    `scale` is `summed_magnitude`: for a base element whose gradient sums
    several rows, the sum of the rows' magnitudes, not |expected|.
    """
    error = (actual - expected).abs()
    allowed = atol + rtol * scale
    bad = ~(error <= allowed)
    if bad.any():
        excess = torch.where(bad, error - allowed, torch.zeros_like(error))
        excess = torch.where(excess.isnan(), torch.full_like(excess, float("inf")), excess)
        worst = int(excess.flatten().argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), actual.shape))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} elements differ by more than "
            f"atol + rtol * (sum of the magnitudes of the gradients they add up) "
            f"(rtol={rtol}, atol={atol}). The worst, at index {index}: got "
            f"{actual[index].item()!r}, expected {expected[index].item()!r}, |error| "
            f"{error[index].item():.3g} > allowed {allowed[index].item():.3g} "
            f"(sum of magnitudes {scale[index].item():.3g})"
        )


def check_against_reference(
    loss_fn,
    layouts: tuple[str, str, str],
    batch: int,
    dim: int,
    *,
    reduction: str = "mean",
    dtype=torch.float32,
    device="cpu",
    seed: int = 0,
    hyper: dict | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    reference_dtype=None,
) -> None:
    """Values and gradients of `loss_fn` on views of the given layouts.

    `loss_fn(anchor, positive, negative, *, t1, t2, beta, reduction)` receives
    the views themselves; gradients are taken with respect to the bases and
    compared with the reference's, computed on the same views of copies of the
    bases, with a random upstream gradient. `reference_dtype` (e.g. float64)
    computes the reference in a wider type than the inputs, as the truth for
    half-precision implementations; `rtol`/`atol` then apply to the values
    and gradients converted to it.

    Gradients are compared with assert_close, except for a base whose
    elements each receive the gradients of several view elements (an
    expanded input: B rows): there `rtol` is relative to the sum of those
    gradients' magnitudes (`summed_magnitude`), because rounding each row
    and adding them errs in proportion to that, however much the sum cancels.
    """
    hyper = hyper or dict(t1=-1.0, t2=0.5, beta=0.5)
    generator = torch.Generator().manual_seed(seed)
    cases = [
        make_view(layout, batch, dim, dtype=dtype, device=device, generator=generator)
        for layout in layouts
    ]
    bases = [base for base, _ in cases]
    views = [view for _, view in cases]
    ref_dtype = reference_dtype or dtype
    ref_bases = [base.detach().to(ref_dtype).requires_grad_() for base in bases]
    ref_views = [
        LAYOUTS[layout].view(base, batch, dim) for layout, base in zip(layouts, ref_bases)
    ]
    actual = loss_fn(*views, **hyper, reduction=reduction)
    expected = reference_triplet_hinge_loss(*ref_views, **hyper, reduction=reduction)
    close = {} if rtol is None else dict(rtol=rtol, atol=atol)
    assert actual.dtype == dtype and actual.device == views[0].device
    assert_close(actual.to(ref_dtype), expected, equal_nan=True, **close)
    weights = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    weights = weights.to(device=device, dtype=dtype)
    grads = torch.autograd.grad(actual, bases, weights)
    # The reference's gradients with respect to the views too: the rows that
    # an expanded base's gradient sums.
    ref_all = torch.autograd.grad(expected, [*ref_bases, *ref_views], weights.to(ref_dtype))
    ref_grads, ref_view_grads = ref_all[:3], ref_all[3:]
    for layout, base, grad, ref_grad, view_grad in zip(
        layouts, ref_bases, grads, ref_grads, ref_view_grads
    ):
        assert grad.dtype == dtype
        what = f"gradient of the {layout} input"
        rows = aliasing(layout, base, batch, dim)
        rows = int(rows.max()) if rows.numel() else 0
        if rows <= 1:
            assert_close(grad.to(ref_dtype), ref_grad, **close, msg=lambda m: f"{what}: {m}")
        else:
            summed_rtol, summed_atol = (
                (rtol, atol) if rtol is not None else DEFAULT_TOLERANCES[ref_dtype]
            )
            assert_close_summed(
                grad.to(ref_dtype),
                ref_grad,
                summed_magnitude(layout, base, view_grad),
                rtol=summed_rtol,
                atol=summed_atol,
                what=f"{what} (an element sums up to {rows} view elements)",
            )


def run_in_fresh_process(code: str, *, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run Python `code` in a new interpreter that imports what this one imports.

    For a test whose failure can leave process-wide state broken (a failed
    CUDA graph capture leaves the CUDA generator in capture state, and every
    later test that draws random numbers on the GPU fails): the child takes
    the damage, and the caller asserts on its exit status and shows its
    stderr. The child gets this process's import path (the tests' directory
    included) and loads the operators the way this process did: the
    ahead-of-time library, or the just-in-time build of `native.load_jit`.
    """
    from extending_pytorch import native

    preamble = ""
    if native.operators_registered() and "extending_pytorch._C" not in sys.modules:
        preamble = "from extending_pytorch import native; native.load_jit('_C')\n"
    path = [p for p in sys.path if p and os.path.exists(p)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", preamble + code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def check_cuda_graph_capture_in_fresh_process(
    module: str, function: str, *, timeout: float = 300, keywords: dict | None = None
) -> None:
    """`check_cuda_graph_capture` of extending_pytorch.<module>.<function>, in a process of its own.

    `keywords` (plain values) are passed to the function on every call, e.g.
    {"grad_in_forward": True}. Raises AssertionError with the child's stderr
    when the capture fails there.
    """
    result = run_in_fresh_process(
        f"import functools\n"
        f"from extending_pytorch import testing, {module}\n"
        f"testing.check_cuda_graph_capture(functools.partial({module}.{function}, **{keywords or {}!r}))\n",
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"the capture of {module}.{function}, run in a process of its own, failed "
            f"(exit status {result.returncode}):\n{result.stderr[-8000:]}"
        )


def check_cuda_graph_capture(
    loss_fn, *, batch: int = 512, dim: int = 128, hyper: dict | None = None
) -> None:
    """Capture a forward and backward of `loss_fn` in a CUDA graph; replays must equal eager runs.

    As PyTorch's notes on CUDA graphs describe whole-network capture (warm-up
    on a side stream, then capture), and with no autograd graph made before
    the capture still alive. An eager result kept with its graph (the loss) keeps
    the inputs' AccumulateGrad nodes, which remember the stream they were made
    on; a backward in the capture then makes that stream wait for the capturing
    one, and CUDA refuses (cudaErrorStreamCaptureImplicit). So only detached
    results are kept. Replays are compared bit for bit: the same kernels on the
    same numbers. Run it with `run_in_fresh_process`: a failed capture leaves
    the process's CUDA generator in capture state, and every later random
    draw on the GPU fails.
    """
    hyper = hyper or dict(t1=-1.0, t2=0.5, beta=0.5)
    generator = torch.Generator(device="cuda").manual_seed(0)
    inputs = [
        torch.randn(batch, dim, device="cuda", generator=generator).requires_grad_()
        for _ in range(3)
    ]

    def step():
        loss = loss_fn(*inputs, **hyper)
        return (loss, *torch.autograd.grad(loss, inputs))

    def detached(results):
        return [t.detach().clone() for t in results]

    eager = detached(step())  # the step's graph dies here
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up (Triton's autotuner times its configurations here)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    names = ("loss", "anchor's gradient", "positive's gradient", "negative's gradient")
    for t in static:
        t.detach().fill_(float("nan"))  # only a replay that runs the kernels overwrites these
    graph.replay()
    torch.cuda.synchronize()
    for name, got, want in zip(names, static, eager):
        assert torch.equal(got, want), f"first replay, {name}: {got} != {want}"
    # New numbers in the same memory: a replay reads them, as a training loop's would.
    with torch.no_grad():
        for t in inputs:
            t.copy_(torch.randn(t.shape, device="cuda", generator=generator))
    copies = [t.detach().clone().requires_grad_() for t in inputs]
    loss = loss_fn(*copies, **hyper)
    expected = [loss.detach(), *torch.autograd.grad(loss, copies)]
    graph.replay()
    torch.cuda.synchronize()
    for name, got, want in zip(names, static, expected):
        assert torch.equal(got, want), f"replay with new inputs, {name}: {got} != {want}"
    assert not torch.equal(static[0], eager[0]), "the replay ignored the new inputs"
