"""The book's kernels (csrc/cuda/triplet.cu, involution.cu) in the emulator:
built with csrc/simt/book_launch.cpp, called in the worker with the checks,
allocation and reduction of triplet_cuda.cpp and involution_cuda.cpp, and
the public functions (triplet_hinge_loss, involution, ...) that call them."""

from __future__ import annotations

import ctypes
import os
import pathlib

from extending_pytorch import build_flags
from extending_pytorch.emulator.poison import check_written as _check_written
from extending_pytorch.emulator.poison import poisoned_empty as _poisoned_empty
from extending_pytorch.emulator.traffic import NativeCounter
from extending_pytorch.emulator.toolchain import (
    BUILD_ROOT,
    CSRC_ENV,
    DEFAULT_TIMEOUT,
    SCHEDULES,
    SIMT_DIR,
    _digest,
    _load_extension,
    _mode_flags,
    _simt_files,
    _torch_variant,
    _write_if_changed,
    cuda_include_dir,
)
from extending_pytorch.emulator.worker import _call
from extending_pytorch.simt_rewrite import rewrite

def _book_module(mode: str, csrc: str | None):
    """Build (if needed) and load the book's kernels for `mode`."""
    csrc_dir = pathlib.Path(csrc or os.environ.get(CSRC_ENV) or build_flags.CSRC).resolve()
    include = cuda_include_dir()
    kernels = {k: csrc_dir / "cuda" / f"{k}.cu" for k in ("triplet", "involution")}
    rewritten = {k: rewrite(p.read_text(), str(p)) for k, p in kernels.items()}
    headers = sorted(csrc_dir.rglob("*.h"))
    key = _digest(
        mode,
        _mode_flags(mode),
        include,
        _torch_variant(),
        *(rewritten[k] for k in sorted(rewritten)),
        *(f"{h}\n{h.read_text()}" for h in headers),
        *(f"{p}\n{p.read_text()}" for p in _simt_files()),
    )[:16]
    directory = BUILD_ROOT / f"{mode}-{_torch_variant()}" / f"book-{key}"
    directory.mkdir(parents=True, exist_ok=True)
    sources = []
    for k, text in rewritten.items():
        path = directory / f"{k}_cu.cpp"
        _write_if_changed(path, text)
        sources.append(path)
    sources.append(SIMT_DIR / "book_launch.cpp")
    name = f"ep_simt_book_{mode}_{key}"
    _load_extension(
        name,
        sources,
        mode,
        # The kernels' own directory too: their quoted #includes are
        # relative to it, and the rewritten copies live elsewhere.
        [SIMT_DIR / "include", SIMT_DIR, csrc_dir / "cuda", csrc_dir, include],
        directory,
        python_module=False,
    )
    return _BookLibrary(directory / f"{name}.so", mode)


def _pointer(t):
    """A tensor's address for a launch function; null for a gradient not asked for."""
    return ctypes.c_void_p(t.data_ptr() if t is not None else None)


def _new_gradients(batch, dim, like, output_mask):
    """The (batch, dim) gradients output_mask asks for, poisoned; None for the others."""
    return [_poisoned_empty(batch, dim, like=like) if needed else None for needed in output_mask]


def _dtype_code(dtype) -> int:
    import torch

    codes = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
    return codes[dtype]


class _BookLibrary:
    """The book's kernels in the worker: the torch side of triplet_cuda.cpp
    and involution_cuda.cpp (checks, allocation, reduction), in Python, around
    the launches of csrc/simt/book_launch.cpp."""

    def __init__(self, path: pathlib.Path, mode: str):
        self.library = ctypes.CDLL(str(path))
        # In the counting build: counts each call's launches (emulator.traffic()).
        self.counter = NativeCounter(self.library) if mode == "traffic" else None

    def configure(self, schedule, seed, max_blocks, gpu_like):
        self.library.simt_configure(
            ctypes.c_int(SCHEDULES.index(schedule)), ctypes.c_ulonglong(seed), ctypes.c_uint(max_blocks),
            ctypes.c_int(gpu_like),
        )

    def _run(self, function, *args, buffers=()):
        """Call a launch function of book_launch.cpp; `buffers` names its tensors (for the counter)."""
        error = ctypes.create_string_buffer(16384)
        fn = getattr(self.library, function)
        fn.restype = ctypes.c_int

        def call():
            if fn(*args, error, ctypes.c_uint64(len(error))) != 0:
                raise RuntimeError(error.value.decode(errors="replace"))

        if self.counter is None:
            call()
        else:
            self.counter.run(buffers, call)

    @staticmethod
    def _check_triplet(anchor, positive, negative, t1, t2, beta, reduction):
        import torch

        from extending_pytorch.reference import check_hyperparameters, check_triplet_inputs

        check_triplet_inputs(anchor, positive, negative)
        if anchor.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise TypeError(
                "anchor must have a floating-point dtype (float32, float64, float16 or "
                f"bfloat16), got {anchor.dtype}"
            )
        if anchor.device.type != "cpu":
            raise ValueError(f"the emulator runs on CPU tensors; anchor is on {anchor.device}")
        return check_hyperparameters(t1, t2, beta, reduction)

    def _triplet_args(self, anchor, positive, negative, t1, t2, beta):
        strides = (ctypes.c_int64 * 6)(*anchor.stride(), *positive.stride(), *negative.stride())
        return (
            ctypes.c_int(_dtype_code(anchor.dtype)),
            ctypes.c_void_p(anchor.data_ptr()),
            ctypes.c_void_p(positive.data_ptr()),
            ctypes.c_void_p(negative.data_ptr()),
            strides,
            ctypes.c_int64(anchor.size(0)),
            ctypes.c_int64(anchor.size(1)),
            ctypes.c_double(t1),
            ctypes.c_double(t2),
            ctypes.c_double(beta),
        )

    def triplet_forward(self, anchor, positive, negative, t1, t2, beta, reduction):
        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        per_triplet = _poisoned_empty(anchor.size(0), like=anchor)
        self._run("simt_triplet_forward", *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(per_triplet.data_ptr()),
                  buffers=[("anchor", anchor), ("positive", positive), ("negative", negative),
                           ("loss", per_triplet)])
        _check_written(per_triplet, "triplet_forward_kernel", "the per-triplet losses")
        if reduction == "none":
            return per_triplet
        return per_triplet.sum() if reduction == "sum" else per_triplet.mean()

    def triplet_backward(self, grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                         output_mask):
        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        self._check_grad_output(grad_output, anchor, reduction)
        batch, dim = anchor.shape
        grads = _new_gradients(batch, dim, anchor, output_mask)
        if not any(output_mask):
            return tuple(grads)
        g = grad_output.contiguous()
        scale = 1.0 / batch if reduction == "mean" and batch > 0 else 1.0
        self._run("simt_triplet_backward", *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(g.data_ptr()), ctypes.c_int(reduction == "none"),
                  ctypes.c_double(scale), *(_pointer(t) for t in grads),
                  buffers=[("grad_output", g), ("anchor", anchor), ("positive", positive),
                           ("negative", negative), ("grad_anchor", grads[0]),
                           ("grad_positive", grads[1]), ("grad_negative", grads[2])])
        for t, name in zip(grads, ("grad_anchor", "grad_positive", "grad_negative")):
            if t is not None:
                _check_written(t, "triplet_backward_kernel", name)
        return tuple(grads)

    # ---- Fewer bytes (chapter 5, section 9): triplet_cuda.cpp's other functions ----

    def triplet_forward_with_distances(self, anchor, positive, negative, t1, t2, beta, reduction):
        import torch

        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        batch = anchor.size(0)
        per_triplet = _poisoned_empty(batch, like=anchor)
        d_type = torch.float64 if anchor.dtype == torch.float64 else torch.float32
        distances = _poisoned_empty(batch, 2, like=torch.empty(0, dtype=d_type))
        self._run("simt_triplet_forward_saving_distances",
                  *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(per_triplet.data_ptr()), ctypes.c_void_p(distances.data_ptr()),
                  buffers=[("anchor", anchor), ("positive", positive), ("negative", negative),
                           ("loss", per_triplet), ("distances", distances)])
        _check_written(per_triplet, "triplet_forward_kernel", "the per-triplet losses")
        _check_written(distances, "triplet_forward_kernel", "the distances")
        if reduction != "none":
            per_triplet = per_triplet.sum() if reduction == "sum" else per_triplet.mean()
        return per_triplet, distances

    def _check_grad_output(self, grad_output, anchor, reduction):
        batch = anchor.size(0)
        expected = (batch,) if reduction == "none" else ()
        if grad_output.numel() != (batch if reduction == "none" else 1) or (
            reduction == "none" and tuple(grad_output.shape) != expected
        ):
            raise ValueError(
                f"grad_output must have shape {expected} for reduction={reduction!r}, got "
                f"{tuple(grad_output.shape)}"
            )
        if grad_output.dtype != anchor.dtype:
            raise TypeError(f"grad_output must have the dtype of anchor ({anchor.dtype}), got {grad_output.dtype}")

    def triplet_backward_from_distances(self, grad_output, anchor, positive, negative, distances,
                                        t1, t2, beta, reduction, output_mask):
        import torch

        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        self._check_grad_output(grad_output, anchor, reduction)
        batch, dim = anchor.shape
        d_type = torch.float64 if anchor.dtype == torch.float64 else torch.float32
        if tuple(distances.shape) != (batch, 2) or distances.dtype != d_type or not distances.is_contiguous():
            raise ValueError(f"distances must be a contiguous ({batch}, 2) tensor of {d_type}, got "
                             f"{tuple(distances.shape)} {distances.dtype}")
        grads = _new_gradients(batch, dim, anchor, output_mask)
        if not any(output_mask):
            return tuple(grads)
        g = grad_output.contiguous()
        scale = 1.0 / batch if reduction == "mean" and batch > 0 else 1.0
        self._run("simt_triplet_backward_from_distances",
                  *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                  ctypes.c_void_p(distances.data_ptr()), ctypes.c_void_p(g.data_ptr()),
                  ctypes.c_int(reduction == "none"), ctypes.c_double(scale), *(_pointer(t) for t in grads),
                  buffers=[("distances", distances), ("grad_output", g), ("anchor", anchor),
                           ("positive", positive), ("negative", negative), ("grad_anchor", grads[0]),
                           ("grad_positive", grads[1]), ("grad_negative", grads[2])])
        for t, name in zip(grads, ("grad_anchor", "grad_positive", "grad_negative")):
            if t is not None:
                _check_written(t, "triplet_backward_kernel", name)
        return tuple(grads)

    def triplet_takes_one_pass(self, anchor, positive, negative):
        result = ctypes.c_int(0)
        args = self._triplet_args(anchor, positive, negative, 0.0, 0.0, 0.0)[:7]
        self._run("simt_triplet_takes_one_pass", *args, ctypes.byref(result))
        return bool(result.value)

    def triplet_forward_with_grads(self, anchor, positive, negative, t1, t2, beta, reduction,
                                   output_mask):
        """triplet_forward_with_grads_cuda: one pass where the rows fit, else distances + backward."""
        import torch

        t1, t2, beta, reduction = self._check_triplet(anchor, positive, negative, t1, t2, beta, reduction)
        batch, dim = anchor.shape
        scale = 1.0 / batch if reduction == "mean" and batch > 0 else 1.0
        if batch and not self.triplet_takes_one_pass(anchor, positive, negative):
            loss, distances = self.triplet_forward_with_distances(anchor, positive, negative, t1, t2,
                                                                  beta, "none")
            # As the binding: grad_output one scalar 1, scaled by 1 / B for "mean".
            one = torch.ones((), dtype=anchor.dtype)
            grads = self.triplet_backward_from_distances(
                one, anchor, positive, negative, distances, t1, t2, beta,
                "mean" if reduction == "mean" else "sum", output_mask)
        else:
            loss = _poisoned_empty(batch, like=anchor)
            grads = _new_gradients(batch, dim, anchor, output_mask)
            if batch:
                self._run("simt_triplet_forward_with_grads",
                          *self._triplet_args(anchor, positive, negative, t1, t2, beta),
                          ctypes.c_double(scale), ctypes.c_void_p(loss.data_ptr()),
                          *(_pointer(t) for t in grads),
                          buffers=[("anchor", anchor), ("positive", positive), ("negative", negative),
                                   ("loss", loss), ("grad_anchor", grads[0]),
                                   ("grad_positive", grads[1]), ("grad_negative", grads[2])])
            _check_written(loss, "triplet_forward_with_grads_kernel", "the per-triplet losses")
            for t, name in zip(grads, ("grad_anchor", "grad_positive", "grad_negative")):
                if t is not None:
                    _check_written(t, "triplet_forward_with_grads_kernel", name)
        if reduction != "none":
            loss = loss.sum() if reduction == "sum" else loss.mean()
        return (loss, *grads)

    def triplet_scale_gradients(self, grad_output, grad_anchor, grad_positive, grad_negative,
                                reduction):
        grads = (grad_anchor, grad_positive, grad_negative)
        present = [t for t in grads if t is not None]
        if not present:
            return grads
        batch, dim = present[0].shape
        for t in present:
            if t.shape != present[0].shape or not t.is_contiguous() or t.dtype != grad_output.dtype:
                raise ValueError("the gradients must be contiguous, of one shape, with grad_output's dtype")
        self._check_grad_output(grad_output, present[0], reduction)
        g = grad_output.contiguous()
        self._run("simt_triplet_scale_gradients", ctypes.c_int(_dtype_code(g.dtype)),
                  ctypes.c_void_p(g.data_ptr()), ctypes.c_int(reduction == "none"),
                  ctypes.c_int64(batch), ctypes.c_int64(dim), *(_pointer(t) for t in grads),
                  buffers=[("grad_output", g), ("grad_anchor", grad_anchor),
                           ("grad_positive", grad_positive), ("grad_negative", grad_negative)])
        return grads

    @staticmethod
    def _involution_shape(op, input, weight, stride, padding, dilation):
        import torch

        if input.dim() != 4:
            raise ValueError(f"{op}: input must be 4-D (batch, channels, height, width), got "
                             f"{input.dim()}-D with shape {list(input.shape)}")
        if weight.dim() != 6:
            raise ValueError(f"{op}: weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, "
                             f"out_w), got {weight.dim()}-D with shape {list(weight.shape)}")
        if input.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise TypeError(f"{op}: input must have a floating-point dtype (float32, float64, "
                            f"float16 or bfloat16), got {input.dtype}")
        if weight.dtype != input.dtype:
            raise TypeError(f"{op}: weight must have the dtype of input ({input.dtype}), got {weight.dtype}")
        if input.device.type != "cpu" or weight.device.type != "cpu":
            raise ValueError(f"{op}: the emulator runs on CPU tensors")
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
            raise ValueError(f"{op}: stride and dilation must be positive and padding non-negative, "
                             f"got {stride}, {padding}, {dilation}")
        b, c, h, w = input.shape
        _, g, kh, kw, oh, ow = weight.shape
        if weight.shape[0] != b or g <= 0 or c % g or kh <= 0 or kw <= 0:
            raise ValueError(f"{op}: weight {list(weight.shape)} does not fit input {list(input.shape)}")
        out = lambda n, k, s_, p_, d_: max(n + 2 * p_ - d_ * (k - 1) - 1, -1) // s_ + 1  # noqa: E731
        expected = (out(h, kh, sh, ph, dh), out(w, kw, sw, pw, dw))
        if min(expected) <= 0 or (oh, ow) != expected:
            raise ValueError(f"{op}: weight must have shape {[b, g, kh, kw, *expected]} for this "
                             f"input, stride, padding and dilation, got {list(weight.shape)}")
        return (ctypes.c_int64 * 15)(b, c, g, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw)

    def involution_forward(self, input, weight, stride, padding, dilation):
        s = self._involution_shape("involution", input, weight, stride, padding, dilation)
        input, weight = input.contiguous(), weight.contiguous()
        output = _poisoned_empty(s[0], s[1], s[7], s[8], like=input)
        if output.numel():
            self._run("simt_involution_forward", ctypes.c_int(_dtype_code(input.dtype)), s,
                      ctypes.c_void_p(input.data_ptr()), ctypes.c_void_p(weight.data_ptr()),
                      ctypes.c_void_p(output.data_ptr()),
                      buffers=[("input", input), ("weight", weight), ("output", output)])
        _check_written(output, "involution_forward_kernel", "the output")
        return output

    def involution_backward(self, grad_output, input, weight, stride, padding, dilation, output_mask):
        s = self._involution_shape("involution_backward", input, weight, stride, padding, dilation)
        if tuple(grad_output.shape) != (s[0], s[1], s[7], s[8]) or grad_output.dtype != input.dtype:
            raise ValueError(
                f"involution_backward: grad_output must have the output's shape "
                f"{[s[0], s[1], s[7], s[8]]} and dtype {input.dtype}, got "
                f"{list(grad_output.shape)} and {grad_output.dtype}")
        code = ctypes.c_int(_dtype_code(input.dtype))
        grad_output = grad_output.contiguous()
        grad_input = grad_weight = None
        if output_mask[0]:
            weight_c = weight.contiguous()
            grad_input = _poisoned_empty(*input.shape, like=input)
            self._run("simt_involution_grad_input", code, s, ctypes.c_void_p(grad_output.data_ptr()),
                      ctypes.c_void_p(weight_c.data_ptr()), ctypes.c_void_p(grad_input.data_ptr()),
                      buffers=[("grad_output", grad_output), ("weight", weight_c),
                               ("grad_input", grad_input)])
            _check_written(grad_input, "involution_grad_input_kernel", "grad_input")
        if output_mask[1]:
            input_c = input.contiguous()
            grad_weight = _poisoned_empty(*weight.shape, like=input)
            self._run("simt_involution_grad_weight", code, s, ctypes.c_void_p(grad_output.data_ptr()),
                      ctypes.c_void_p(input_c.data_ptr()), ctypes.c_void_p(grad_weight.data_ptr()),
                      buffers=[("grad_output", grad_output), ("input", input_c),
                               ("grad_weight", grad_weight)])
            _check_written(grad_weight, "involution_grad_weight_kernel", "grad_weight")
        return grad_input, grad_weight


# ---- The book's kernels ------------------------------------------------------------------------


def _book(csrc):
    return ("book", None if csrc is None else str(pathlib.Path(csrc).resolve()))


def triplet_forward(anchor, positive, negative, t1, t2, beta, reduction="mean", *, mode="fast",
                    schedule="forward", seed=0, max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """triplet.cu's forward kernel on CPU tensors: the loss, reduced.

    `max_blocks` caps gridDim.x (0: no cap), as a smaller kMaxBlocks would:
    with 1 or 2 blocks every warp loops over many rows. `csrc` reads the
    kernels from another copy of extensions/csrc (default: this one, or
    $EXTENDING_PYTORCH_EMULATOR_CSRC).
    """
    return _call(_book(csrc), "triplet_forward",
                 (anchor, positive, negative, float(t1), float(t2), float(beta), reduction),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_backward(grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                     output_mask=(True, True, True), *, mode="fast", schedule="forward", seed=0,
                     max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """triplet.cu's backward kernel: (grad_anchor, grad_positive, grad_negative),
    None for a gradient output_mask does not ask for."""
    return _call(_book(csrc), "triplet_backward",
                 (grad_output, anchor, positive, negative, float(t1), float(t2), float(beta),
                  reduction, list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_forward_with_distances(anchor, positive, negative, t1, t2, beta, reduction="mean", *,
                                   mode="fast", schedule="forward", seed=0, max_blocks=0, csrc=None,
                                   timeout=DEFAULT_TIMEOUT):
    """triplet.cu's forward kernel, also saving each row's squared distances:
    (loss, distances), distances (B, 2) in float32 (float64 for float64 inputs)."""
    return _call(_book(csrc), "triplet_forward_with_distances",
                 (anchor, positive, negative, float(t1), float(t2), float(beta), reduction),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_backward_from_distances(grad_output, anchor, positive, negative, distances, t1, t2, beta,
                                    reduction, output_mask=(True, True, True), *, mode="fast",
                                    schedule="forward", seed=0, max_blocks=0, csrc=None,
                                    timeout=DEFAULT_TIMEOUT):
    """triplet.cu's backward kernel reading the saved distances: each row read once."""
    return _call(_book(csrc), "triplet_backward_from_distances",
                 (grad_output, anchor, positive, negative, distances, float(t1), float(t2),
                  float(beta), reduction, list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_forward_with_grads(anchor, positive, negative, t1, t2, beta, reduction="mean",
                               output_mask=(True, True, True), *, mode="fast", schedule="forward",
                               seed=0, max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """triplet_cuda.cpp's triplet_hinge_loss_with_grads: (loss, grad_anchor, grad_positive,
    grad_negative) for grad_output = 1, in one pass where the rows fit (triplet_takes_one_pass)."""
    return _call(_book(csrc), "triplet_forward_with_grads",
                 (anchor, positive, negative, float(t1), float(t2), float(beta), reduction,
                  list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def triplet_takes_one_pass(anchor, positive, negative, *, csrc=None, timeout=DEFAULT_TIMEOUT):
    """Whether triplet_forward_with_grads takes these inputs in one pass (cuda::takes_one_pass)."""
    return _call(_book(csrc), "triplet_takes_one_pass", (anchor, positive, negative),
                 mode="fast", schedule="forward", seed=0, max_blocks=0, timeout=timeout)


def triplet_scale_gradients(grad_output, grad_anchor, grad_positive, grad_negative, reduction, *,
                            mode="fast", schedule="forward", seed=0, max_blocks=0, csrc=None,
                            timeout=DEFAULT_TIMEOUT):
    """triplet.cu's in-place scaling of saved gradients by grad_output (rows whose value is 1
    untouched). Returns the three gradients as the kernel left them (the worker changes its
    copies in place; the tensors passed in are not changed)."""
    return _call(_book(csrc), "triplet_scale_gradients",
                 (grad_output, grad_anchor, grad_positive, grad_negative, reduction),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def _autograd_function():
    import torch

    class EmulatedTriplet(torch.autograd.Function):
        # As the CUDA operator does (ops.triplet_hinge_loss): when a gradient will be
        # needed, the forward saves the distances and the backward reads each row once.
        @staticmethod
        def forward(ctx, anchor, positive, negative, t1, t2, beta, reduction, options):
            ctx.hyper = (t1, t2, beta, reduction)
            ctx.options = options
            if not any(ctx.needs_input_grad[:3]):
                return triplet_forward(anchor, positive, negative, t1, t2, beta, reduction, **options)
            loss, distances = triplet_forward_with_distances(anchor, positive, negative, t1, t2, beta,
                                                             reduction, **options)
            ctx.save_for_backward(anchor, positive, negative, distances)
            return loss

        @staticmethod
        def backward(ctx, grad):
            anchor, positive, negative, distances = ctx.saved_tensors
            grads = triplet_backward_from_distances(grad, anchor, positive, negative, distances,
                                                    *ctx.hyper, ctx.needs_input_grad[:3], **ctx.options)
            return (*grads, None, None, None, None, None)

    class EmulatedTripletWithGrads(torch.autograd.Function):
        # ops.triplet_hinge_loss(..., grad_in_forward=True) on CUDA: the gradients in the
        # forward; the backward scales them in place, deciding on the "device".
        @staticmethod
        def forward(ctx, anchor, positive, negative, t1, t2, beta, reduction, options):
            loss, *grads = triplet_forward_with_grads(anchor, positive, negative, t1, t2, beta,
                                                      reduction, ctx.needs_input_grad[:3], **options)
            ctx.present = [g is not None for g in grads]
            ctx.save_for_backward(*(g for g in grads if g is not None))
            ctx.reduction = reduction
            ctx.options = options
            return loss

        @staticmethod
        def backward(ctx, grad):
            saved = iter(ctx.saved_tensors)
            grads = [next(saved) if present else None for present in ctx.present]
            scaled = triplet_scale_gradients(grad, *grads, ctx.reduction, **ctx.options)
            # As on the GPU, in place: a second backward through the graph then raises
            # autograd's "modified by an inplace operation" error.
            for g, new in zip(grads, scaled):
                if g is not None:
                    g.copy_(new)
            return (*grads, None, None, None, None, None)

    class EmulatedInvolution(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, stride, padding, dilation, options):
            ctx.save_for_backward(input, weight)
            ctx.settings = (stride, padding, dilation)
            ctx.options = options
            return involution_forward(input, weight, stride, padding, dilation, **options)

        @staticmethod
        def backward(ctx, grad):
            input, weight = ctx.saved_tensors
            grads = involution_backward(grad, input, weight, *ctx.settings,
                                        ctx.needs_input_grad[:2], **ctx.options)
            return (*grads, None, None, None, None)

    return EmulatedTriplet, EmulatedInvolution, EmulatedTripletWithGrads


_functions = None


def _autograd():
    global _functions
    if _functions is None:
        _functions = _autograd_function()
    return _functions


def triplet_hinge_loss(anchor, positive, negative, *, t1, t2, beta, reduction="mean",
                       grad_in_forward=False, **options):
    """The triplet loss computed by triplet.cu's kernels, differentiable.

    The signature of chapter 1's reference (so testing.check_against_reference
    takes it), plus the emulator's options: mode, schedule, seed, max_blocks,
    csrc, timeout. As the CUDA operator: with a gradient to come, the forward
    saves the distances; grad_in_forward=True computes the gradients in the
    forward (one pass where the rows fit).
    """
    import torch

    function = _autograd()[0]
    if grad_in_forward and torch.is_grad_enabled() and any(
            t.requires_grad for t in (anchor, positive, negative)):
        function = _autograd()[2]
    return function.apply(anchor, positive, negative, t1, t2, beta, reduction, options)


def _pairs(stride, padding, dilation):
    def pair(v):
        return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]

    return pair(stride), pair(padding), pair(dilation)


def involution_forward(input, weight, stride=1, padding=0, dilation=1, *, mode="fast",
                       schedule="forward", seed=0, max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """involution.cu's forward kernel: output (B, C, Ho, Wo)."""
    return _call(_book(csrc), "involution_forward", (input, weight, *_pairs(stride, padding, dilation)),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def involution_backward(grad_output, input, weight, stride=1, padding=0, dilation=1,
                        output_mask=(True, True), *, mode="fast", schedule="forward", seed=0,
                        max_blocks=0, csrc=None, timeout=DEFAULT_TIMEOUT):
    """involution.cu's gradient kernels: (grad_input, grad_weight), None where not asked for."""
    return _call(_book(csrc), "involution_backward",
                 (grad_output, input, weight, *_pairs(stride, padding, dilation),
                  list(map(bool, output_mask))),
                 mode=mode, schedule=schedule, seed=seed, max_blocks=max_blocks, timeout=timeout)


def involution(input, weight, stride=1, padding=0, dilation=1, **options):
    """Involution computed by involution.cu's kernels, differentiable."""
    return _autograd()[1].apply(input, weight, stride, padding, dilation, options)


