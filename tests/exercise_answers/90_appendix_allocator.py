"""Plausible wrong answers to the exercises of notebooks/90_appendix_allocator.ipynb, each with the error its check must raise,
and right answers other than the solution, which its check must accept.

WRONG_ANSWERS: exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "counts elements instead of bytes",
            "def pages(tensor):\n    return -(-tensor.numel() // 4096)\n",
            AssertionError,
            r"1025 torch\.float32 \(4100 B\): pages\(\) returned 1, the solution 2",
        ),
        (
            "rounds down: a partly filled last page is not counted",
            "def pages(tensor):\n    return tensor.numel() * tensor.element_size() // 4096\n",
            AssertionError,
            r"1 torch\.uint8 \(1 B\): pages\(\) returned 0, the solution 1",
        ),
        (
            "assumes 4 bytes an element, whatever the dtype",
            "def pages(tensor):\n    return -(-tensor.numel() * 4 // 4096)\n",
            AssertionError,
            r"4096 torch\.uint8 \(4096 B\): pages\(\) returned 4, the solution 1",
        ),
        (
            "rounds up by adding one page, even when the bytes fill the pages exactly",
            "def pages(tensor):\n    return tensor.nbytes // 4096 + 1\n",
            AssertionError,
            r"4096 torch\.uint8 \(4096 B\): pages\(\) returned 2, the solution 1",
        ),
        (
            "rounds to the nearest page, at least one (passed the old check: 5,000 bytes gave 1 page)",
            "def pages(tensor):\n    return max(1, round(tensor.nbytes / 4096))\n",
            AssertionError,
            r"4097 torch\.uint8 \(4097 B\): pages\(\) returned 1, the solution 2",
        ),
        (
            "counts at least one page, even for an empty tensor",
            "import math\n\n\ndef pages(tensor):\n    return max(1, math.ceil(tensor.nbytes / 4096))\n",
            AssertionError,
            r"0 torch\.float32 \(0 B\): pages\(\) returned 1, the solution 0",
        ),
        (
            "returns a 0-d tensor, not an int (passed the old check: a tensor compares equal)",
            "import torch\n\n\ndef pages(tensor):\n    return (torch.tensor(tensor.nbytes) + 4095) // 4096\n",
            AssertionError,
            r"1 torch\.uint8 \(1 B\): pages\(\) returned tensor\(1\), a Tensor: return an int",
        ),
        (
            "returns a float, not an int (passed the old check: 1.0 == 1)",
            "def pages(tensor):\n    return -(-tensor.nbytes / 4096 // 1)\n",
            AssertionError,
            r"1 torch\.uint8 \(1 B\): pages\(\) returned 1\.0, a float: return an int",
        ),
        (
            "rounds bytes / 4096 + 0.5 to the nearest int: Python rounds halves to even, so a whole odd number of pages "
            "gets one more",
            "def pages(tensor):\n    return round(tensor.nbytes / 4096 + 0.5)\n",
            AssertionError,
            r"4096 torch\.uint8 \(4096 B\): pages\(\) returned 2, the solution 1",
        ),
        (
            "adds a page for the remainder whenever there are bytes, even when none remain",
            "def pages(tensor):\n    return tensor.nbytes // 4096 + (1 if tensor.nbytes else 0)\n",
            AssertionError,
            r"4096 torch\.uint8 \(4096 B\): pages\(\) returned 2, the solution 1",
        ),
        (
            "takes a page for 4,000 bytes (4 kB), not 4,096 (4 KiB)",
            "import math\n\n\ndef pages(tensor):\n    return math.ceil(tensor.nbytes / 4000)\n",
            AssertionError,
            r"4096 torch\.uint8 \(4096 B\): pages\(\) returned 2, the solution 1",
        ),
    ],
}

RIGHT_ANSWERS = {
    1: [
        (
            "math.ceil of the bytes over the page size",
            "import math\n\n\ndef pages(tensor):\n    return math.ceil(tensor.nbytes / 4096)\n",
        ),
        (
            "adds a page less one byte, then divides",
            "def pages(tensor):\n    return (tensor.nbytes + 4095) // 4096\n",
        ),
    ],
}
