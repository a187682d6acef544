"""Chapter 8: involution (Li et al., CVPR 2021) as a modern operator.

For an input (B, C, H, W) and a weight (B, G, Kh, Kw, Ho, Wo), with G
dividing C, channel c uses group g = c // (C // G) and

    out[b, c, h, w] = sum_{i, j} weight[b, g, i, j, h, w]
                      * input[b, c, h*sh - ph + i*dh, w*sw - pw + j*dw]

(zero outside the image), Ho = (H + 2 ph - dh (Kh - 1) - 1) // sh + 1, and
likewise Wo. Unlike a convolution, the kernel belongs to a pixel (and a
sample), not to a channel pair, and it is shared by the C // G channels of
a group.

This module holds:

- `loop_involution`, the definition written as loops (tiny sizes only), and
  `reference_involution`, the plain-torch formulation with `F.unfold`;
- the Python half of the C++ operator `extending_pytorch::involution`: fake
  implementations for torch.compile, the autograd formula, double backward;
- `involution(...)`, the public function, and `Involution`, the layer of the
  paper, a drop-in replacement for a K x K convolution.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from extending_pytorch.native import load_ops

# Defines torch.ops.extending_pytorch.*; if unbuilt, says how to build.
load_ops()

involution_op = torch.ops.extending_pytorch.involution.default
involution_backward_op = torch.ops.extending_pytorch.involution_backward.default


def pair(name: str, value, *, minimum: int) -> tuple[int, int]:
    """An int, or a pair of ints, as a pair; each at least `minimum`."""
    values = (value, value) if isinstance(value, numbers.Integral) else value
    try:
        values = tuple(values)
    except TypeError:
        values = None
    if (
        values is None
        or len(values) != 2
        or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool)
            for v in values
        )
        or isinstance(value, bool)
    ):
        raise TypeError(
            f"{name} must be an int or a pair of ints, got {value!r}"
        )
    if min(values) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(values[0]), int(values[1])


def settings(stride, padding, dilation):
    """stride, padding and dilation as pairs, checked."""
    return (
        pair("stride", stride, minimum=1),
        pair("padding", padding, minimum=0),
        pair("dilation", dilation, minimum=1),
    )


def output_size(size, kernel, stride, padding, dilation) -> int:
    """Output length along one dimension, as for a convolution."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


# ---- The definition, and the plain-torch reference -------------------------


def loop_involution(
    input: Tensor, weight: Tensor, stride=1, padding=0, dilation=1
) -> Tensor:
    """The definition, element by element, in Python loops.

    Slow (one Python iteration per product): for checking the reference on
    tiny sizes only.
    """
    (sh, sw), (ph, pw), (dh, dw) = settings(stride, padding, dilation)
    batch, channels, height, width = input.shape
    _, groups, kh, kw, out_h, out_w = weight.shape
    per_group = channels // groups
    out = input.new_zeros(batch, channels, out_h, out_w)
    for b in range(batch):
        for c in range(channels):
            g = c // per_group
            for h in range(out_h):
                for w in range(out_w):
                    total = input.new_zeros(())
                    for i in range(kh):
                        for j in range(kw):
                            y, x = h * sh - ph + i * dh, w * sw - pw + j * dw
                            if 0 <= y < height and 0 <= x < width:
                                total = (
                                    total
                                    + weight[b, g, i, j, h, w] * input[b, c, y, x]
                                )
                    out[b, c, h, w] = total
    return out


def reference_involution(
    input: Tensor, weight: Tensor, stride=1, padding=0, dilation=1
) -> Tensor:
    """Involution from tensor ops: `F.unfold`, a product and a sum.

    `F.unfold` copies every input window into a (B, C*Kh*Kw, Ho*Wo) tensor,
    Kh*Kw times the size of the output, before the product and the sum.
    Autograd differentiates it, and it runs on every device.
    """
    stride, padding, dilation = settings(stride, padding, dilation)
    batch, channels = input.shape[:2]
    _, groups, kh, kw, out_h, out_w = weight.shape
    windows = F.unfold(
        input, (kh, kw), dilation=dilation, padding=padding, stride=stride
    )
    windows = windows.view(
        batch, groups, channels // groups, kh * kw, out_h, out_w
    )
    kernels = weight.reshape(batch, groups, 1, kh * kw, out_h, out_w)
    return (kernels * windows).sum(dim=3).view(batch, channels, out_h, out_w)


# ---- The operator: fake implementations and autograd -----------------------


_DTYPE_NAMES = {  # as C++ prints them, for messages identical to the kernels'
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
}


def _check_ranks(op, input, weight):
    """The first checks of csrc/involution_common.h: the numbers of dims.

    They come before anything reads a size: every other check, and every
    kernel, indexes input's 4 dims and weight's 6. Same messages (and
    RuntimeError) as the C++ checks. A number of dims is never symbolic, so
    plain Python raises, which torch.compile traces without a graph break.
    """
    for name, tensor in (("input", input), ("weight", weight)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
    if input.dim() != 4:
        raise RuntimeError(
            f"{op}: input must be 4-D (batch, channels, height, width), got "
            f"{input.dim()}-D with shape {list(input.shape)}"
        )
    if weight.dim() != 6:
        raise RuntimeError(
            f"{op}: weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, "
            f"out_w), got {weight.dim()}-D with shape {list(weight.shape)}"
        )


def _check_shapes(op, input, weight, stride, padding, dilation):
    """The shape checks of csrc/involution_common.h, for fake tensors.

    Under torch.compile the kernels do not run while tracing, so a wrong
    shape must be refused here, with the message the C++ check gives. This
    is also the operator's kernel for the meta device.
    """

    def fail(message):
        return lambda: f"{op}: {message}"

    _check_ranks(op, input, weight)
    torch._check(
        input.dtype in _DTYPE_NAMES,
        fail(
            "input must have a floating-point dtype (float32, float64, float16 or "
            f"bfloat16), got {input.dtype}"
        ),
    )
    torch._check(
        weight.dtype == input.dtype,
        fail(
            f"weight must have the dtype of input ({_DTYPE_NAMES[input.dtype]}), "
            f"got {_DTYPE_NAMES.get(weight.dtype, weight.dtype)}"
        ),
    )
    batch, channels, height, width = input.shape
    _, groups, kh, kw = weight.shape[:4]
    torch._check(
        weight.shape[0] == batch,
        fail(
            f"weight must have the batch size of input ({batch}) in dim 0, "
            f"got {weight.shape[0]}"
        ),
    )
    torch._check(
        groups > 0 and channels % groups == 0,
        fail(
            f"the number of groups (weight dim 1, {groups}) must be positive and "
            f"divide the channels of input ({channels})"
        ),
    )
    torch._check(
        kh > 0 and kw > 0,
        fail(f"weight must have a kernel of at least 1x1 (dims 2 and 3), got {kh}x{kw}"),
    )
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    out_h = output_size(height, kh, sh, ph, dh)
    out_w = output_size(width, kw, sw, pw, dw)
    torch._check(
        out_h > 0 and out_w > 0,
        fail(
            f"the {kh}x{kw} kernel with dilation {list(dilation)} does not fit in the "
            f"{height}x{width} input with padding {list(padding)}: the output would be empty"
        ),
    )
    expected = [batch, groups, kh, kw, out_h, out_w]
    torch._check(
        weight.shape[4] == out_h and weight.shape[5] == out_w,
        fail(
            f"weight must have shape {expected} for this input, stride, padding and "
            f"dilation (output {out_h}x{out_w}), got {list(weight.shape)}"
        ),
    )
    return batch, channels, out_h, out_w


@torch.library.register_fake("extending_pytorch::involution")
def _(input, weight, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    # Shapes only, but checked as the kernels check them: a compiled call
    # with a wrong shape fails while tracing, with the same message.
    batch, channels, _, _ = _check_shapes(
        "involution", input, weight, stride, padding, dilation
    )
    return input.new_empty(batch, channels, weight.shape[4], weight.shape[5])


@torch.library.register_fake("extending_pytorch::involution_backward")
def _(grad_output, input, weight, stride, padding, dilation, output_mask):
    op = "involution_backward"
    batch, channels, out_h, out_w = _check_shapes(
        op, input, weight, stride, padding, dilation
    )
    expected = [batch, channels, out_h, out_w]
    torch._check(
        grad_output.dim() == 4
        and all(a == b for a, b in zip(grad_output.shape, expected)),
        lambda: f"{op}: grad_output must have the output's shape {expected}, "
        f"got {list(grad_output.shape)}",
    )
    return (
        input.new_empty(input.shape) if output_mask[0] else None,
        weight.new_empty(weight.shape) if output_mask[1] else None,
    )


def _setup_context(ctx, inputs, output):
    input, weight, stride, padding, dilation = inputs
    # The grad of the input needs the weight, and the grad of the weight needs
    # the input: save only what the needed gradients read.
    need_input, need_weight = ctx.needs_input_grad[:2]
    ctx.save_for_backward(
        input if need_weight else None, weight if need_input else None
    )
    ctx.input_shape = input.shape
    ctx.weight_shape = weight.shape
    ctx.settings = (stride, padding, dilation)


def _backward(ctx, grad_output):
    input, weight = ctx.saved_tensors
    need_input, need_weight = ctx.needs_input_grad[:2]
    # The backward operator reads only the shapes of the tensors whose values
    # it does not need: stand-ins of the right shape (one element, expanded) fill in.
    if input is None:
        input = grad_output.new_empty(()).expand(ctx.input_shape)
    if weight is None:
        weight = grad_output.new_empty(()).expand(ctx.weight_shape)
    grad_input, grad_weight = involution_backward_op(
        grad_output, input, weight, *ctx.settings, [need_input, need_weight]
    )
    return grad_input, grad_weight, None, None, None


torch.library.register_autograd(
    "extending_pytorch::involution", _backward, setup_context=_setup_context
)


# Double backward. The forward F(x, W) is linear in the input x for a fixed
# weight W and linear in W for a fixed x; its two gradients are the adjoints
# Gx(go, W) = dF/dx^T go and Gw(go, x) = dF/dW^T go, each linear in both of
# its arguments. For upstream gradients (u, V) of (Gx, Gw), that gives
#   d/dgo = F(u, W) + F(x, V),   d/dx = Gx(go, V),   d/dW = Gw(go, u),
# all of them calls of the two operators, which are differentiable in turn.
def _setup_backward_context(ctx, inputs, output):
    grad_output, input, weight, stride, padding, dilation, output_mask = inputs
    ctx.save_for_backward(grad_output, input, weight)
    ctx.settings = (stride, padding, dilation)
    ctx.output_mask = output_mask


def _backward_of_backward(ctx, grad_grad_input, grad_grad_weight):
    grad_output, input, weight = ctx.saved_tensors
    need_go, need_input, need_weight = ctx.needs_input_grad[:3]
    if not ctx.output_mask[0]:
        grad_grad_input = None
    if not ctx.output_mask[1]:
        grad_grad_weight = None
    result_go = result_input = result_weight = None
    if need_go:
        terms = []
        if grad_grad_input is not None:
            terms.append(involution_op(grad_grad_input, weight, *ctx.settings))
        if grad_grad_weight is not None:
            terms.append(involution_op(input, grad_grad_weight, *ctx.settings))
        result_go = sum(terms) if terms else torch.zeros_like(grad_output)
    if need_input and grad_grad_weight is not None:
        result_input, _ = involution_backward_op(
            grad_output, input, grad_grad_weight, *ctx.settings, [True, False]
        )
    if need_weight and grad_grad_input is not None:
        _, result_weight = involution_backward_op(
            grad_output, grad_grad_input, weight, *ctx.settings, [False, True]
        )
    return result_go, result_input, result_weight, None, None, None, None


torch.library.register_autograd(
    "extending_pytorch::involution_backward",
    _backward_of_backward,
    setup_context=_setup_backward_context,
)


def involution(
    input: Tensor, weight: Tensor, stride=1, padding=0, dilation=1
) -> Tensor:
    """Involution, computed by the C++ (or CUDA) operator.

    `stride`, `padding` and `dilation` are ints or (height, width) pairs.
    The settings and the tensors' numbers of dims are checked here, before
    the dispatcher or a kernel reads a size; the operator checks the rest.
    """
    checked = settings(stride, padding, dilation)
    _check_ranks("involution", input, weight)
    return involution_op(input, weight, *checked)


# ---- The layer of the paper ------------------------------------------------


class Involution(nn.Module):
    """The involution layer of the paper, a drop-in for a K x K convolution.

    Same interface as `nn.Conv2d(channels, channels, kernel_size, stride,
    padding=kernel_size // 2)`, and the same output shape. Its kernels are
    generated from the input itself: at each output pixel a 1x1 convolution
    reduces the C channels to C / reduction_ratio, then batch normalisation,
    ReLU, and a 1x1 convolution spans them to G * K * K numbers: one K x K
    kernel per group of `group_channels` channels. With a stride, the kernel
    generator sees the input average-pooled by the stride, so it produces one
    kernel per output pixel.
    """

    def __init__(
        self,
        channels: int,
        kernel_size: int,
        stride: int = 1,
        *,
        group_channels: int = 16,
        reduction_ratio: int = 4,
    ) -> None:
        super().__init__()
        for name, value in (
            ("channels", channels),
            ("kernel_size", kernel_size),
            ("stride", stride),
            ("group_channels", group_channels),
            ("reduction_ratio", reduction_ratio),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if kernel_size % 2 == 0:
            raise ValueError(
                "kernel_size must be odd (the output keeps the input's size "
                f"at stride 1), got {kernel_size}"
            )
        if channels % group_channels != 0:
            raise ValueError(
                f"channels ({channels}) must be a multiple of group_channels "
                f"({group_channels})"
            )
        self.channels = channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.groups = channels // group_channels
        reduced = max(1, channels // reduction_ratio)
        self.reduce = nn.Conv2d(channels, reduced, 1, bias=False)
        self.norm = nn.BatchNorm2d(reduced)
        self.span = nn.Conv2d(reduced, self.groups * kernel_size**2, 1)
        # ceil_mode: one pooled pixel per output pixel, as the convolution
        # it replaces has ceil(H / stride) rows, also for odd H.
        self.pool = (
            nn.AvgPool2d(stride, stride, ceil_mode=True)
            if stride > 1
            else nn.Identity()
        )

    def forward(self, x: Tensor) -> Tensor:
        kernels = self.span(torch.relu(self.norm(self.reduce(self.pool(x)))))
        batch, _, out_h, out_w = kernels.shape
        k = self.kernel_size
        weight = kernels.view(batch, self.groups, k, k, out_h, out_w)
        return involution(x, weight, self.stride, k // 2)

    def extra_repr(self) -> str:
        return (
            f"{self.channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, groups={self.groups}"
        )
