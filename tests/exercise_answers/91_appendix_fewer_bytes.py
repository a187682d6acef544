"""Plausible wrong answers to the exercises of notebooks/91_appendix_fewer_bytes.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
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
        (
            "counts the scaling as one pass over the gradients (9), not a read and a write of each",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\":\n"
            "        return 9 if backward else 3\n"
            "    return 6 if grad_output_is_one or not backward else 9\n",
            AssertionError,
            r"numbers_moved\('grad_in_forward', True, grad_output_is_one=False\) returned 9, expected 12: scaling",
        ),
        (
            "grad_output_is_one defaults to False",
            "def numbers_moved(design, backward, grad_output_is_one=False):\n"
            "    if design == \"two-pass\":\n"
            "        return 9 if backward else 3\n"
            "    return 6 if grad_output_is_one or not backward else 12\n",
            AssertionError,
            r"numbers_moved\('grad_in_forward', True\) returned 12, expected 6: grad_output_is_one defaults to True",
        ),
        (
            "counts only the reads (the writes of the gradients are left out)",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\":\n"
            "        return 6 if backward else 3\n"
            "    return 3 if grad_output_is_one or not backward else 6\n",
            AssertionError,
            r"numbers_moved\('two-pass', True, grad_output_is_one=True\) returned 6, expected 9",
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
        (
            "the old official solution: counts the aligned rows even when a row is shorter than one register, "
            "whose numbers all go through the scalar loop (the old check expected 0.25 for dim=1 in float64)",
            "def streaming_rows(dim, element_size):\n"
            "    return 1 / (32 // math.gcd(dim * element_size, 32))\n",
            AssertionError,
            r"dim=1, element_size=4: 0\.125, expected 0\.0: a row of 4 bytes has no full 32-byte register",
        ),
        (
            "takes the allocator's 64-byte alignment for the register's 32",
            "def streaming_rows(dim, element_size):\n"
            "    if dim * element_size < 32:\n"
            "        return 0.0\n"
            "    return 1 / (64 // math.gcd(dim * element_size, 64))\n",
            AssertionError,
            r"dim=513, element_size=4: 0\.0625, expected 0\.125",
        ),
        (
            "every row when D fills whole registers, else one row per register's numbers",
            "def streaming_rows(dim, element_size):\n"
            "    per_register = 32 // element_size\n"
            "    if dim < per_register:\n"
            "        return 0.0\n"
            "    return 1.0 if dim % per_register == 0 else 1 / per_register\n",
            AssertionError,
            r"dim=516, element_size=4: 0\.125, expected 0\.5",
        ),
        (
            "the gcd of D and 32, leaving out the bytes per number",
            "def streaming_rows(dim, element_size):\n"
            "    if dim * element_size < 32:\n"
            "        return 0.0\n"
            "    return 1 / (32 // math.gcd(dim, 32))\n",
            AssertionError,
            r"dim=513, element_size=4: 0\.03125, expected 0\.125",
        ),
        (
            "rows shorter than 64 bytes (the allocator's alignment) stream nothing",
            "def streaming_rows(dim, element_size):\n"
            "    if dim * element_size < 64:\n"
            "        return 0.0\n"
            "    return 1 / (32 // math.gcd(dim * element_size, 32))\n",
            AssertionError,
            r"dim=9, element_size=4: 0\.0, expected 0\.125: a row of 36 bytes holds a full 32-byte register",
        ),
    ],
}

# Right answers other than the official solution, which each check must accept.
RIGHT_ANSWERS = {
    2: [
        (
            "returns the integer 0 for rows shorter than a register (the old check rejected it)",
            "def streaming_rows(dim, element_size):\n"
            "    if dim * element_size < 32:\n"
            "        return 0\n"
            "    return 1 / (32 // math.gcd(dim * element_size, 32))\n",
        ),
        (
            "counts the aligned starts among 32 rows, after ruling out rows without a full register",
            "def streaming_rows(dim, element_size):\n"
            "    if dim < 32 // element_size:\n"
            "        return 0.0\n"
            "    starts = [i * dim * element_size for i in range(32)]\n"
            "    return sum(start % 32 == 0 for start in starts) / 32\n",
        ),
        (
            "the gcd taken on numbers: a register's numbers over their gcd with D",
            "def streaming_rows(dim, element_size):\n"
            "    per_register = 32 // element_size\n"
            "    return 0.0 if dim < per_register else 1 / (per_register // math.gcd(dim, per_register))\n",
        ),
    ],
}
