"""Plausible wrong answers to the exercises of notebooks/91_appendix_fewer_bytes.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "says grad_in_forward always moves 6 B D (ignores the scaling)",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\":\n"
            "        return 9 if backward else 3\n"
            "    return 6\n",
            AssertionError,
            r"scaling reads and writes the three saved gradients",
        ),
        (
            "says a forward without backward costs 3 B D under grad_in_forward",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\" or not backward:\n"
            "        return 9 if backward else 3\n"
            "    return 6 if grad_output_is_one else 12\n",
            AssertionError,
            r"the forward still writes three gradients",
        ),
        (
            "12 for both designs when grad_output is not 1 (passed the old check, which tried only the default)",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if not backward:\n"
            "        return 3 if design == \"two-pass\" else 6\n"
            "    if grad_output_is_one:\n"
            "        return 9 if design == \"two-pass\" else 6\n"
            "    return 12\n",
            AssertionError,
            r"the two-pass backward multiplies by grad_output while it writes the gradients: 9 whatever",
        ),
    ],
    2: [
        (
            "all or nothing: every row when D is a multiple of 8, none otherwise",
            "def streaming_rows(dim, element_size):\n"
            "    return 1.0 if dim % 8 == 0 else 0.0\n",
            AssertionError,
            r"dim=513, element_size=4: 0\.0, expected 0\.125",
        ),
        (
            "part of every row: the numbers that fill whole registers",
            "def streaming_rows(dim, element_size):\n"
            "    per_register = 32 // element_size\n"
            "    return (dim // per_register) * per_register / dim\n",
            AssertionError,
            r"dim=513, element_size=4: 0\.99\d*, expected 0\.125",
        ),
        (
            "counts 8 numbers per register for float64 too",
            "def streaming_rows(dim, element_size):\n"
            "    return 1 / (8 // math.gcd(dim, 8))\n",
            AssertionError,
            r"dim=513, element_size=8: 0\.125, expected 0\.25",
        ),
    ],
}
