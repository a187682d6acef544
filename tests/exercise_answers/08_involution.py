"""Plausible wrong answers to the exercises of notebooks/08_involution.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

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
    ],
    2: [
        (
            "sums over every channel, not the channels of each group",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, c, kernel[0] * kernel[1], out_h, out_w)\n"
            "    total = (windows * grad_out.view(b, c, 1, out_h, out_w)).sum(dim=1)\n"
            "    return total[:, None].expand(b, groups, -1, -1, -1).reshape(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"sum over the channels of each group only",
        ),
        (
            "computes in float32 and returns float32 for float64 inputs",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x.float(), kernel, padding=padding)\n"
            "    windows = windows.view(b, groups, c // groups, kernel[0] * kernel[1], out_h, out_w)\n"
            "    go = grad_out.float().view(b, groups, c // groups, 1, out_h, out_w)\n"
            "    return (windows * go).sum(dim=2).view(b, groups, *kernel, out_h, out_w)\n",
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
            r"sum over the channels of each group only",
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
            r"wrong values for .*kernel \(1, 3\), padding \(0, 1\); kernel and padding are \(height, width\) pairs",
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
            r"expected 0\.057220458984375, the MiB \(2\*\*20 bytes\)",
        ),
        (
            "counts K values per window, not K*K",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * kernel * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"0\.011444091796875 for B=2, C=3, 10x10, K=5: expected 0\.057220458984375",
        ),
    ],
}

# Right answers other than the official solution, which each check must accept.
RIGHT_ANSWERS = {
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
}
