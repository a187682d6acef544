"""Plausible wrong answers to the exercises of notebooks/08_involution.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

# The start of two answers of exercise 2: the windows and the upstream gradient in float32, grouped.
_IN_FLOAT32 = (
    "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
    "    b, c = x.shape[:2]\n"
    "    out_h, out_w = grad_out.shape[2:]\n"
    "    windows = F.unfold(x.float(), kernel, padding=padding)\n"
    "    windows = windows.view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
    "    go = grad_out.float().view(b, groups, c // groups, 1, out_h, out_w)\n"
)
# The start of several answers of exercise 2, right up to the products: the windows and the upstream gradient, grouped.
_GROUPED = (
    "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
    "    b, c = x.shape[:2]\n"
    "    out_h, out_w = grad_out.shape[2:]\n"
    "    windows = F.unfold(x, kernel, padding=padding).view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
    "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
)

WRONG_ANSWERS = {
    1: [
        (
            "forgets the dilation",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + 2 * p - (k - 1) - 1) // s + 1\n"
            "                 for n, k, s, p in zip((height, width), kernel, stride, padding))\n",
            AssertionError,
            r"\(5, 3\) for \(9, 8, \(3, 2\), \(2, 3\), \(1, 0\), \(2, 1\)\): expected \(4, 3\)",
        ),
        (
            "rounds the division instead of flooring it",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple(round((n + 2 * p - d * (k - 1) - 1) / s) + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"\(4, 5\) for \(9, 8, \(3, 3\), \(3, 2\), \(1, 1\), \(1, 1\)\): expected \(3, 4\)",
        ),
        (
            "pads one side only (padding counted once)",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + p - d * (k - 1) - 1) // s + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"\(53, 53\) for \(56, 56, \(7, 7\), \(1, 1\), \(3, 3\), \(1, 1\)\): expected \(56, 56\)",
        ),
        (
            "forgets the stride (the stride-1 size for every stride)",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple(n + 2 * p - d * (k - 1)\n"
            "                 for n, k, p, d in zip((height, width), kernel, padding, dilation))\n",
            AssertionError,
            r"\(7, 7\) for \(9, 8, \(3, 2\), \(2, 3\), \(1, 0\), \(2, 1\)\): expected \(4, 3\)",
        ),
        (
            "forgets the dilation, and, when called, replaces the check's reference F.conv2d with one that "
            "agrees with it (passed the check while the check looked F up in the notebook's namespace)",
            "import types\n"
            "\n"
            "\n"
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    shape = tuple((n + 2 * p - (k - 1) - 1) // s + 1\n"
            "                  for n, k, s, p in zip((height, width), kernel, stride, padding))\n"
            "    globals()['F'] = types.SimpleNamespace(conv2d=lambda *args, **kwargs: torch.zeros(1, 1, *shape))\n"
            "    return shape\n",
            AssertionError,
            r"\(5, 3\) for \(9, 8, \(3, 2\), \(2, 3\), \(1, 0\), \(2, 1\)\): expected \(4, 3\)",
        ),
        (
            "floors a float division with numpy: the right sizes, as floats (passed the old check, which compared "
            "with == only)",
            "import numpy as np\n"
            "\n"
            "\n"
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple(np.floor((n + 2 * p - d * (k - 1) - 1) / s) + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"for \(56, 56, \(7, 7\), \(1, 1\), \(3, 3\), \(1, 1\)\): sizes are integers; floor with //",
        ),
        (
            "rounds up (ceil), as a pooling with ceil_mode=True does",
            "import math\n"
            "\n"
            "\n"
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple(math.ceil((n + 2 * p - d * (k - 1) - 1) / s) + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"\(5, 7\) for \(11, 7, \(5, 3\), \(3, 1\), \(2, 2\), \(1, 2\)\): expected \(4, 7\); the division rounds up",
        ),
        (
            "the dilated kernel taken as d*K pixels wide, not d*(K-1)+1",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + 2 * p - d * k) // s + 1\n"
            "                 for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation))\n",
            AssertionError,
            r"\(3, 3\) for \(9, 8, \(3, 2\), \(2, 3\), \(1, 0\), \(2, 1\)\): expected \(4, 3\)$",
        ),
        (
            "the height's settings for both axes",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1\n"
            "                 for n in (height, width))\n",
            AssertionError,
            r"\(4, 3\) for \(11, 7, \(5, 3\), \(3, 1\), \(2, 2\), \(1, 2\)\): expected \(4, 7\)",
        ),
    ],
    2: [
        (
            'returns the gradient .cpu(): on a GPU it comes back on the CPU',
            'def weight_gradient(x, grad_out, groups, kernel, padding):\n'
            '    b, c = x.shape[:2]\n'
            '    out_h, out_w = grad_out.shape[2:]\n'
            '    windows = F.unfold(x, kernel, padding=padding).view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n'
            '    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n'
            '    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w).cpu()\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
        (
            "accumulates the taps into torch.zeros(...) made on the CPU, whatever x's device",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    total = torch.zeros(b, groups, kernel[0] * kernel[1], out_h, out_w, dtype=x.dtype)\n"
            "    for k in range(c // groups):\n"
            "        total += windows[:, :, k] * go[:, :, k]\n"
            "    return total.view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            # on meta the CPU buffer's += runs, and the gradient comes back on the CPU; on a GPU += raises
            r"on (meta|cuda) inputs.*create every tensor on the input's device \(device=x\.device\)"
            r"|create every tensor on the input's device \(device=x\.device\): on cuda inputs",
        ),
        (
            "sums over every channel, not the channels of each group",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, c, kernel[0] * kernel[1], out_h, out_w)\n"
            "    total = (windows * grad_out.view(b, c, 1, out_h, out_w)).sum(dim=1)\n"
            "    return total[:, None].expand(b, groups, -1, -1, -1).reshape(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"it sums over every channel: sum over the channels of each group only",
        ),
        (
            "computes in float32 and returns float32 for float64 inputs",
            _IN_FLOAT32 + "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"dtype torch.float32, expected torch.float64",
        ),
        (
            "groups the channels interleaved (channel c in group c % G) instead of in consecutive blocks",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding)\n"
            "    windows = windows.view(b, c // groups, groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.view(b, c // groups, groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=1).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"channel c belongs to group c // \(C/G\), consecutive blocks, not c % G",
        ),
        (
            "leaves the taps flattened (K*K) instead of the weight's (Kh, Kw)",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding)\n"
            "    windows = windows.view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2)\n",
            AssertionError,
            r"shape \(3, 2, 9, 7, 6\), expected \(3, 2, 3, 3, 7, 6\)",
        ),
        (
            "pads both axes with padding[0] (passed the old check, whose padding was (1, 1))",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding[0])\n"
            "    windows = windows.view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"kernel \(1, 3\), padding \(0, 1\): your function raised .*kernel and padding are \(height, width\) pairs",
        ),
        (
            "swaps the kernel's and the padding's axes, and returns (Kw, Kh) (passed the old check's 3x3 kernel)",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    kh, kw = kernel\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel[::-1], padding=padding[::-1])\n"
            "    windows = windows.view(b, groups, c // groups, kh * kw, out_h, out_w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, kw, kh, out_h, out_w)\n",
            AssertionError,
            r"shape \(2, 3, 3, 1, 7, 6\), expected \(2, 3, 1, 3, 7, 6\), i\.e\. \(B, G, Kh, Kw, Ho, Wo\)",
        ),
        (
            "swaps the kernel's and the padding's axes in unfold, but returns the right shape "
            "(passed the old check's 3x3 kernel)",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    kh, kw = kernel\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, (kw, kh), padding=(padding[1], padding[0]))\n"
            "    windows = windows.view(b, groups, c // groups, kh * kw, out_h, out_w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, kh, kw, out_h, out_w)\n",
            AssertionError,
            r"wrong values for .*kernel \(1, 3\), padding \(0, 1\); what this case tests: kernel and padding are "
            r"\(height, width\) pairs.*the largest error is at",
        ),
        (
            "takes the output size from the input's, true only for 'same' padding (passed the old check's "
            "3x3 kernel with padding 1)",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c, h, w = x.shape\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, groups, c // groups, kernel[0] * kernel[1], h, w)\n"
            "    go = grad_out.view(b, groups, c // groups, 1, h, w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, *kernel, h, w)\n",
            AssertionError,
            r"kernel \(3, 5\), padding \(2, 1\): your function raised .*the output is not the input's size",
        ),
        (
            "computes in float32 and casts the result back to the input's dtype: float64 only to float32's precision "
            "(the old check rejected it, saying to sum over the channels of each group)",
            _IN_FLOAT32 + "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w).to(x.dtype)\n",
            AssertionError,
            r"close, but only to float32's precision: compute in the input's dtype",
        ),
        (
            "a mean over the channels of a group instead of their sum",
            _GROUPED + "    return (windows * go).mean(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"a mean over the group's channels: the gradient is their sum",
        ),
        (
            "flips the taps, as a convolution's kernel is flipped",
            _GROUPED + "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w).flip(2, 3)\n",
            AssertionError,
            r"the taps are flipped",
        ),
        (
            "sums over the batch too, as for a convolution's weight shared by the batch",
            _GROUPED + "    total = (windows * go).sum(dim=(0, 2))\n"
            "    return total.expand(b, -1, -1, -1, -1).reshape(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"it sums over the batch too: each sample has its own weight",
        ),
        (
            "einsum with the taps' axes swapped in the result ('...ij...->...ji...')",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    kh, kw = kernel\n"
            "    windows = F.unfold(x, kernel, padding=padding).reshape(b, groups, c // groups, kh, kw, out_h, out_w)\n"
            "    go = grad_out.reshape(b, groups, c // groups, out_h, out_w)\n"
            "    return torch.einsum('bgcijhw,bgchw->bgjihw', windows, go).reshape(b, groups, kh, kw, out_h, out_w)\n",
            AssertionError,
            r"the kernel's axes are swapped",
        ),
        (
            "views with -1 for the channels of a group: fails on an empty batch (passed the old check, which had none)",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b = x.shape[0]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, groups, -1, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.view(b, groups, -1, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"B=0, C=4, G=2.*your function raised .*an empty batch: write the sizes out rather than -1",
        ),
    ],
    3: [
        (
            "counts the output, not the K x K windows",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"that is the output's size: count the windows",
        ),
        (
            "ignores dtype_bytes (always 4 bytes an element)",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * kernel * size * size * 4 / 2**20\n",
            AssertionError,
            r"use dtype_bytes",
        ),
        (
            "megabytes of 10**6 bytes, not mebibytes",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * kernel * size * size * dtype_bytes / 1e6\n",
            AssertionError,
            r"expected 0\.057220458984375, the MiB \(2\*\*20 bytes\) of F\.unfold's result; that is megabytes of 10\*\*6",
        ),
        (
            "counts K values per window, not K*K",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"0\.011444091796875 for B=2, C=3, 10x10, K=5: expected 0\.057220458984375",
        ),
        (
            "KiB (2**10 bytes), not MiB",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * kernel * size * size * dtype_bytes / 2**10\n",
            AssertionError,
            r"that is KiB: a MiB is 2\*\*20 bytes",
        ),
        (
            "the peak of section 3, two buffers, not one",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return 2 * batch * channels * kernel * kernel * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"that is the peak of two buffers: the exercise asks for one",
        ),
        (
            "the positions of the padded image, (size + 2 * (K // 2))**2, not the output's size**2",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * kernel * (size + 2 * (kernel // 2))**2 * dtype_bytes / 2**20\n",
            AssertionError,
            r"0\.112152099609375 for B=2, C=3, 10x10, K=5: expected 0\.057220458984375",
        ),
        (
            "the kernel size written as a number, K*5: right only for K = 5, the old check's one case (passed it)",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * 5 * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"for B=1, C=1, 1x1, K=1, dtype_bytes=8: expected 7\.62939453125e-06",
        ),
    ],
}

# Right answers other than the official solution, which each check must accept.
RIGHT_ANSWERS = {
    1: [
        (
            "a list instead of a tuple, from a float division truncated with int() (the same as flooring for the "
            "sizes a convolution accepts, which are never negative)",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return [int((n + 2 * p - d * (k - 1) - 1) / s) + 1\n"
            "            for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation)]\n",
        ),
        (
            "numpy integers, from numpy arrays of the settings",
            "import numpy as np\n"
            "\n"
            "\n"
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    n, k, s, p, d = (np.array(v) for v in ((height, width), kernel, stride, padding, dilation))\n"
            "    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1)\n",
        ),
    ],
    2: [
        (
            "pads with F.pad first, then unfolds without padding, and sums with einsum",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    (kh, kw), (ph, pw) = kernel, padding\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(F.pad(x, (pw, pw, ph, ph)), (kh, kw))\n"
            "    windows = windows.reshape(b, groups, c // groups, kh, kw, out_h, out_w)\n"
            "    go = grad_out.reshape(b, groups, c // groups, out_h, out_w)\n"
            "    return torch.einsum('bgcijhw,bgchw->bgijhw', windows, go)\n",
        ),
        (
            "autograd of the unfold formulation of the forward, with respect to the weight",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    weight = x.new_zeros(x.shape[0], groups, *kernel, out_h, out_w, requires_grad=True)\n"
            "    out = inv.reference_involution(x, weight, 1, padding, 1)\n"
            "    return torch.autograd.grad(out, weight, grad_out)[0]\n",
        ),
    ],
    3: [
        (
            "MiB as 1024 * 1024, in an order that keeps the product an integer until the division",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return (batch * channels * size * size) * (kernel * kernel) * dtype_bytes / 1024 / 1024\n",
        ),
    ],
}
