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
        (
            "the column size alone in block_sizes (the row tile forgotten)",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[16 * 32 * num_warps // dtype.itemsize], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"block_sizes lists one size per hl\.tile, rows per program then columns per step: two sizes, got \[256\]",
        ),
        (
            "a third block size, for a tile the kernel does not open",
            "def wide_config(dtype, num_warps):\n"
            "    columns = 16 * 32 * num_warps // dtype.itemsize\n"
            "    return helion.Config(block_sizes=[1, columns, 1], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"two sizes, got \[1, 256, 1\]",
        ),
        (
            "true division: a float number of columns",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 16 * 32 * num_warps / dtype.itemsize], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"Python ints \(// divides to one; Helion refuses floats and numpy integers\), got \[1, 256\.0\]",
        ),
        (
            "the column count a numpy integer (Helion refuses it as a block size)",
            "def wide_config(dtype, num_warps):\n"
            "    import numpy as np\n"
            "    columns = np.int64(16 * 32 * num_warps) // np.int64(dtype.itemsize)\n"
            "    return helion.Config(block_sizes=[1, columns], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"Python ints .*got \[1, np\.int64\(256\)\]",
        ),
        (
            "a persistent kernel: each program loops over row tiles",
            "def wide_config(dtype, num_warps):\n"
            "    columns = 16 * 32 * num_warps // dtype.itemsize\n"
            "    return helion.Config(block_sizes=[1, columns], num_warps=num_warps, num_stages=1,\n"
            "                         pid_type='persistent_blocked')\n",
            AssertionError,
            r"pid_type 'persistent_blocked' makes each program loop over several tiles",
        ),
        (
            "an element-size table that forgets bfloat16 (4 bytes by default)",
            "def wide_config(dtype, num_warps):\n"
            "    size = {torch.float16: 2, torch.float32: 4, torch.float64: 8}.get(dtype, 4)\n"
            "    return helion.Config(block_sizes=[1, 16 * 32 * num_warps // size], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"torch\.bfloat16, 1 warps: 128 columns give each of the 32 threads 8 bytes per step, not 16",
        ),
        (
            "64 threads a warp (an AMD wavefront, not an NVIDIA warp)",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=[1, 16 * 64 * num_warps // dtype.itemsize], num_warps=num_warps, num_stages=1)\n",
            AssertionError,
            r"512 columns give each of the 32 threads 32 bytes per step, not 16",
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
            r"9N is right, the numbers per row are not: you count 0 bytes a row, the kernels move 48",
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
        (
            "the gradients written in the accumulation dtype",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = dtype.itemsize\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 6 * batch * dim * size + 3 * batch * dim * acc + batch * (size + 11 * acc)\n",
            AssertionError,
            r"torch\.float16: .* your count grows by 72 bytes a column, the kernels' by 54",
        ),
        (
            "no upstream gradient read (the mean's is one number)",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = dtype.itemsize\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 9 * batch * dim * size + batch * (size + 10 * acc)\n",
            AssertionError,
            r"you count 44 bytes a row, the kernels move 48",
        ),
        (
            "bfloat16 taken for 4 bytes",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = 2 if dtype == torch.float16 else (8 if dtype == torch.float64 else 4)\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 9 * batch * dim * size + batch * (size + 11 * acc)\n",
            AssertionError,
            r"torch\.bfloat16: .* grows by 36 bytes a column, the kernels' by 18",
        ),
        (
            "the loss counted twice (written, then read back for the mean)",
            "def step_bytes(batch, dim, dtype):\n"
            "    size = dtype.itemsize\n"
            "    acc = 8 if dtype == torch.float64 else 4\n"
            "    return 9 * batch * dim * size + batch * (2 * size + 11 * acc)\n",
            AssertionError,
            r"you count 52 bytes a row, the kernels move 48",
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
        (
            "block_sizes as a tuple",
            "def wide_config(dtype, num_warps):\n"
            "    return helion.Config(block_sizes=(1, 16 * 32 * num_warps // dtype.itemsize), num_warps=num_warps,\n"
            "                         num_stages=1)\n",
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
