"""Plausible wrong answers to the exercises of notebooks/90_appendix_allocator.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "counts elements instead of bytes",
            "def pages(tensor):\n    return -(-tensor.numel() // 4096)\n",
            AssertionError,
            r"expected 2048 pages, got 512",
        ),
        (
            "rounds down: a partly filled last page is not counted",
            "def pages(tensor):\n    return tensor.numel() * tensor.element_size() // 4096\n",
            AssertionError,
            r"1000x3 torch.float32: expected 3 pages, got 2",
        ),
        (
            "assumes 4 bytes an element, whatever the dtype",
            "def pages(tensor):\n    return -(-tensor.numel() * 4 // 4096)\n",
            AssertionError,
            r"4096x512 torch.float64: expected 4096 pages, got 2048",
        ),
        (
            "rounds up by adding one page, even when the bytes fill the pages exactly",
            "def pages(tensor):\n    return tensor.nbytes // 4096 + 1\n",
            AssertionError,
            r"4096x512 torch.float32: expected 2048 pages, got 2049",
        ),
    ],
}
