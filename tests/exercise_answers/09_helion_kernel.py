"""Plausible wrong answers to the exercises of notebooks/09_helion_kernel.ipynb, each with the error its check must raise,
and right answers other than the solution, which its check must accept.

WRONG_ANSWERS: exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "the block counted in bytes, not elements (16 * 32 * num_warps columns)",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 16 * 32 * num_warps], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"bytes per step, not 16 \(columns are elements",
        ),
        (
            "the warps forgotten: 16 bytes for one warp's 32 threads, whatever num_warps",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 16 * 32 // dtype.itemsize], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"2 warps: .* bytes per step, not 16",
        ),
        (
            "two rows per program",
            "def wide_config(dtype, num_warps):\n"
            "    columns = 16 * 32 * num_warps // dtype.itemsize\n"
            "    return helion.Config(block_sizes=[2, columns], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"one row per program: block_sizes\[0\] must be 1, got 2",
        ),
        (
            "num_warps left out of the config (Helion's default then)",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 16 * 32 * num_warps // dtype.itemsize], num_stages=1)\n",
            AssertionError,
            r"1 warps asked, the config has None",
        ),
        (
            "a dict in place of a helion.Config",
            "def wide_config(dtype, num_warps):\n"
            "    return dict(block_sizes=[1, 16 * 32 * num_warps // dtype.itemsize], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"return a helion\.Config, got dict",
        ),
    ],
    2: [
        (
            "12N: a backward that recomputes the distances (reads the inputs twice)",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = torch.tensor([], dtype=dtype).element_size()\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 12 * batch * dim * size + batch * (size + 11 * acc)\n",
            AssertionError,
            r"the counter says",
        ),
        (
            "9N alone, without the numbers per row",
            "def step_bytes(batch, dim, dtype):\n"
            "    return 9 * batch * dim * torch.tensor([], dtype=dtype).element_size()\n",
            AssertionError,
            r"the rest, \d+ bytes, is the numbers per row",
        ),
        (
            "the distances, hyper and the upstream gradient in the input's dtype",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = torch.tensor([], dtype=dtype).element_size()\n"
            "    return 9 * batch * dim * size + batch * 12 * size\n",
            AssertionError,
            r"float16: \d+ bytes, the counter says",
        ),
        (
            "hyper counted once per kernel, not once per program",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = torch.tensor([], dtype=dtype).element_size()\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 9 * batch * dim * size + batch * (size + 5 * acc) + 2 * 3 * acc\n",
            AssertionError,
            r"the counter says",
        ),
    ],
}

RIGHT_ANSWERS = {
    1: [
        (
            "the element size from torch.finfo's bits, the block as 512 bytes per warp",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 512 * num_warps // (torch.finfo(dtype).bits // 8)],\n"
            "                         num_warps=num_warps, num_stages=1)\n",
        ),
    ],
    2: [
        (
            "the closed form: 9N plus the loss and eleven accumulation-dtype numbers per row",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = torch.finfo(dtype).bits // 8\n"
            "    acc = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).bits // 8\n"
            "    return 9 * batch * dim * size + batch * (size + 11 * acc)\n",
        ),
    ],
}
