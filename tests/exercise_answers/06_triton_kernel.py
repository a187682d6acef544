"""Plausible wrong answers to the exercises of notebooks/06_triton_kernel.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
"""

from __future__ import annotations

# The official solution's kernel and launcher as an answer writes them, for answers that change one line.
_SOLUTION_KERNEL = (
    "@triton.jit\n"
    "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
    "    row = tl.program_id(0).to(tl.int64)\n"
    "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
    "    for start in range(0, dim, BLOCK):\n"
    "        cols = start + tl.arange(0, BLOCK)\n"
    "        mask = cols < dim\n"
    "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
    "        total += x.to(tl.float32) * x.to(tl.float32)\n"
    "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
    "\n"
)
_LAUNCHER = (
    "def squared_norms(x):\n"
    "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
    "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
    "    return out\n"
)


WRONG_ANSWERS = {
    1: [
        (
            "the kernel stores zeros; the function returns torch's sums (review turn 6, C1)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    tl.store(out_ptr + row, 0.0)\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return x.float().pow(2).sum(1)\n",
            AssertionError,
            r"the sums returned are not the tensor the kernel wrote",
        ),
        (
            "the kernel reads nothing and stores zeros into the tensor it returns (review turn 6, C1)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    tl.store(out_ptr + row, 0.0)\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"programs \[0, 1, 2, 3\] read nothing of their row",
        ),
        (
            "no mask on the last block (reads past the end of each row)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"read outside the rows' 100 columns \(a missing mask\?",
        ),
        (
            "one block as wide as the row (next_power_of_2(dim)), no loop",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, BLOCK)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](\n"
            "        x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(x.shape[1])\n"
            "    )\n"
            "    return out\n",
            AssertionError,
            r"launched with BLOCK=128: loop over the row 16 columns at a time",
        ),
        (
            "a single hard-coded block, tl.arange(0, 64) with a mask, launched with BLOCK=16 (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, 64)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"squared_norms_kernel loads 64 columns at a time: loop over the row BLOCK = 16 columns at a time",
        ),
        (
            "one program loops over every row, given their number (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, n_rows, BLOCK: tl.constexpr):\n"
            "    for row in range(0, n_rows):\n"
            "        total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "        for start in range(0, dim, BLOCK):\n"
            "            cols = start + tl.arange(0, BLOCK)\n"
            "            mask = cols < dim\n"
            "            cols = cols.to(tl.int64)\n"
            "            x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "            total += x * x\n"
            "        tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(1,)](x, out, x.shape[1], x.stride(0), x.stride(1), x.shape[0], BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"takes \['n_rows'\] besides the exercise's arguments: .* launch one program per row",
        ),
        (
            "32-bit offsets: row * row_stride and col * col_stride in int32 (passed the old check)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong where row \* row_stride passes 2\*\*31: compute offsets in 64 bits",
        ),
        (
            "64-bit rows, but col * col_stride still in int32",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong where col \* col_stride passes 2\*\*31: compute offsets in 64 bits",
        ),
        (
            "returns the sums in the input's dtype (float16 for float16 rows)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "        total += x.to(tl.float32) * x.to(tl.float32)\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"return the sums in float32, got torch\.float16",
        ),
        (
            "row * dim instead of row * row_stride (assumes contiguous rows)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * dim + cols * col_stride, mask=mask, other=0.0)\n"
            "        x = x.to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"read outside the rows' 100 columns .* row \* dim in place of row \* row_stride\?",
        ),
        (
            "mask cols <= dim: one lane too many (reads the element after each row)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols <= dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "        x = x.to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"read outside the rows' 100 columns \(a missing mask\?",
        ),
        (
            "plain torch, no kernel",
            "def squared_norms(x):\n    return x.pow(2).sum(1)\n",
            AssertionError,
            r"no Triton kernel was launched",
        ),
        (
            "copies the view with .contiguous() and ignores col_stride",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < dim, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    x = x.contiguous()\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"not of a copy such as x.contiguous\(\)",
        ),
        (
            "32-bit offsets behind a .float() copy (float32 rows pass through uncopied; float16 views are copied)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=cols < dim, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    x = x.float()\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"the kernel received a copy of the float16 (view|rows) \(x\.float\(\)\? x\.contiguous\(\)\?\)",
        ),
        (
            "squares float16 values in float16 (no .to(tl.float32) before x * x)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"an infinity: a square, or the row's sum, went through float16",
        ),
        (
            "ignores col_stride, as section 7's sum_of_squares does (x_ptr + row * row_stride + cols)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong on a column-strided view: is col_stride used\?",
        ),
        (
            "stores each block's sum inside the loop (the last block overwrites the others)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        cols = cols.to(tl.int64)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong on rows of 100 columns: every sum falls short: does the loop cover the whole row\?",
        ),
        (
            "program 0 loops over every row, counting them with tl.num_programs (review turn 4, finding 7)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    if tl.program_id(0) == 0:\n"
            "        for r in range(0, tl.num_programs(0)):\n"
            "            row = tl.full([], r, tl.int64)\n"
            "            total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "            for start in range(0, dim, BLOCK):\n"
            "                cols = start + tl.arange(0, BLOCK)\n"
            "                mask = cols < dim\n"
            "                cols = cols.to(tl.int64)\n"
            "                x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "                x = x.to(tl.float32)\n"
            "                total += x * x\n"
            "            tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"squared_norms_kernel calls tl\.num_programs: each program sums its own row",
        ),
        (
            "every program sums every row (B-fold redundant work, the same stores) (review turn 4, finding 7)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    for r in range(0, tl.num_programs(0)):\n"
            "        row = tl.full([], r, tl.int64)\n"
            "        total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "        for start in range(0, dim, BLOCK):\n"
            "            cols = start + tl.arange(0, BLOCK)\n"
            "            mask = cols < dim\n"
            "            cols = cols.to(tl.int64)\n"
            "            x = tl.load(x_ptr + row * row_stride + cols * col_stride, mask=mask, other=0.0)\n"
            "            total += x.to(tl.float32) * x.to(tl.float32)\n"
            "        tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"squared_norms_kernel calls tl\.num_programs",
        ),
        (
            "a 2-D grid (B, cdiv(D, 16)), one block per program, tl.atomic_add into zeros (review turn 4, finding 7)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    x = x.to(tl.float32)\n"
            "    tl.atomic_add(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    grid = (x.shape[0], triton.cdiv(x.shape[1], 16))\n"
            "    squared_norms_kernel[grid](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"launched on a grid of \(4, 7, 1\) programs for 4 rows: launch one program per row",
        ),
        (
            "the loop stops a column short, range(0, dim - 1, BLOCK) (review turn 5, finding 3)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim - 1, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"wrong on rows of 17 columns: every sum falls short: does the loop cover the whole row\?",
        ),
        (
            "program 0 loops over every row, tl.num_programs in a @triton.jit helper (review turn 5, finding 2)",
            "@triton.jit\n"
            "def _row_sum(x_ptr, row, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    return tl.sum(total, axis=0)\n"
            "\n"
            "@triton.jit\n"
            "def _all_rows(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    for r in range(0, tl.num_programs(0)):\n"
            "        row = tl.full([], r, tl.int64)\n"
            "        tl.store(out_ptr + row, _row_sum(x_ptr, row, dim, row_stride, col_stride, BLOCK))\n"
            "\n"
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    if tl.program_id(0) == 0:\n"
            "        _all_rows(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK)\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"program 0 read rows \[0, 1, 2, 3\]: each program sums its own row",
        ),
        (
            "no mask on the load, tl.where on the loaded value; the old check crashed the process (review turn 5, finding 4)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride).to(tl.float32)\n"
            "        x = tl.where(cols < dim, x, 0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"the kernel read outside the rows' 100 columns \(a missing mask\?",
        ),
        (
            "a masked load without other=, whose masked lanes are undefined, summed (review turn 5, finding 9)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask)\n"
            "        x = x.to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"a NaN: the kernel summed masked lanes of a tl\.load without other=, which are undefined",
        ),
        (
            "loops 64 columns at a time, ignoring BLOCK (review turn 5, finding 8)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([64], dtype=tl.float32)\n"
            "    for start in range(0, dim, 64):\n"
            "        cols = start + tl.arange(0, 64)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"squared_norms_kernel loads 64 columns at a time",
        ),
        (
            "stores every row's sum at out_ptr, without + row (the rows overwrite out[0]; the old check blamed the loop)",
            _SOLUTION_KERNEL.replace("tl.store(out_ptr + row,", "tl.store(out_ptr,") + _LAUNCHER,
            AssertionError,
            r"program 1 stored into out\[0\], not into out\[1\]: store each row's sum at out_ptr \+ row",
        ),
        (
            "stores at out_ptr + row * row_stride, as the loads are offset (the old check blamed a read)",
            _SOLUTION_KERNEL.replace("tl.store(out_ptr + row,", "tl.store(out_ptr + row * row_stride,") + _LAUNCHER,
            AssertionError,
            r"program 1 stored nothing into out, not into out\[1\]: .*its stride is 1, not row_stride",
        ),
        (
            "a grid of max(B, 1) programs, so that the grid is never empty (passed the old check: no empty batch)",
            _SOLUTION_KERNEL + _LAUNCHER.replace("[(x.shape[0],)]", "[(max(x.shape[0], 1),)]"),
            AssertionError,
            r"on an empty batch the kernel read or wrote memory that is not there",
        ),
        (
            "the row offset widened after the product, (row * row_stride).to(tl.int64), which has wrapped by then",
            _SOLUTION_KERNEL.replace("row = tl.program_id(0).to(tl.int64)", "row = tl.program_id(0)").replace(
                "x_ptr + row * row_stride +", "x_ptr + (row * row_stride).to(tl.int64) +"
            ) + _LAUNCHER,
            AssertionError,
            r"wrong where row \* row_stride passes 2\*\*31: compute offsets in 64 bits",
        ),
        (
            "the rows' norms, tl.sqrt of the sum (the old check asked whether the loop covers the row)",
            _SOLUTION_KERNEL.replace("tl.sum(total, axis=0))", "tl.sqrt(tl.sum(total, axis=0)))") + _LAUNCHER,
            AssertionError,
            r"on rows of 100 columns these are the rows' norms: return the sums of squares, without tl\.sqrt",
        ),
        (
            "each block's sum added to every lane of total, then total summed: BLOCK times too much "
            "(the old check asked whether the loop covers the row)",
            _SOLUTION_KERNEL.replace(
                "total += x.to(tl.float32) * x.to(tl.float32)", "total += tl.sum(x.to(tl.float32) * x.to(tl.float32), axis=0)"
            ) + _LAUNCHER,
            AssertionError,
            r"wrong on rows of 100 columns: every sum is too large: is a block, or a lane, counted more than once\?",
        ),
        (
            "float64 sums for float32 rows (out made as float64; the old check asked whether the loop covers the row)",
            _SOLUTION_KERNEL + _LAUNCHER.replace("dtype=torch.float32", "dtype=torch.float64"),
            AssertionError,
            r"return the sums in float32, got torch\.float64",
        ),
    ],
    2: [
        (
            "block - dim % block (a full last block is not idle)",
            "def idle_lanes(dim, block):\n    return block - dim % block\n",
            AssertionError,
            r"64 columns in blocks of 64: .* got 64 \(a full last block has no idle lanes",
        ),
        (
            "dim % block: the lanes in use in the last block, not the idle ones",
            "def idle_lanes(dim, block):\n    return dim % block\n",
            AssertionError,
            r"37 columns in blocks of 16: the last block holds 5 column\(s\), so 11 lanes are idle, got 5",
        ),
        (
            "block - dim: as if the row fit in one block",
            "def idle_lanes(dim, block):\n    return max(block - dim, 0)\n",
            AssertionError,
            r"37 columns in blocks of 16: .* 11 lanes are idle, got 0",
        ),
        (
            "counts the idle lanes of every block but the last (dim // block * block - dim)",
            "def idle_lanes(dim, block):\n    return abs(dim // block * block - dim)\n",
            AssertionError,
            r"37 columns in blocks of 16: .* 11 lanes are idle, got 5",
        ),
        (
            "block - dim % block, except for a row within one block (block - dim)",
            "def idle_lanes(dim, block):\n    return block - dim % block if dim > block else block - dim\n",
            AssertionError,
            r"128 columns in blocks of 64: .* got 64 \(a full last block has no idle lanes",
        ),
        (
            "a numpy float, np.ceil(dim / block) * block - dim: 11.0 lanes (passed the old check)",
            "import numpy as np\n\ndef idle_lanes(dim, block):\n    return np.ceil(dim / block) * block - dim\n",
            AssertionError,
            r"idle_lanes\(37, 16\) returned np\.float64\(11\.0\), a float64: count the lanes in integers",
        ),
        (
            "the fraction of a block left over, times the block: a float (passed the old check)",
            "import math\n\ndef idle_lanes(dim, block):\n    return (math.ceil(dim / block) - dim / block) * block\n",
            AssertionError,
            r"idle_lanes\(37, 16\) returned 11\.0, a float: count the lanes in integers",
        ),
        (
            "block - dim for a row shorter than a block, an empty row included (passed the old check)",
            "def idle_lanes(dim, block):\n    return block - dim if dim < block else -dim % block\n",
            AssertionError,
            r"0 columns in blocks of 16: no block, so no idle lane, got 16",
        ),
    ],
}


# Right answers that use what a kernel's module gives it: the check compiles them for a GPU in a
# fresh process, which must rebuild those globals (review turn 5, finding 5). tests/test_triton.py
# runs them with their source registered, as a notebook cell's is; RIGHT_ANSWERS includes them too.
RIGHT_ANSWERS_FOR_THE_COMPILER = {
    1: [
        (
            "a module-level constant, ACC_DTYPE = tl.constexpr(tl.float32)",
            "ACC_DTYPE = tl.constexpr(tl.float32)\n"
            "\n"
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=ACC_DTYPE)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(ACC_DTYPE)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
        (
            "from triton import jit, and @jit",
            "from triton import jit\n"
            "\n"
            "@jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
    ],
}
# Right answers the check must accept besides the official solution: the grid written as a
# function of the launch's arguments, as Triton's tutorials write it, and as (B, 1).
RIGHT_ANSWERS = {
    1: [
        (
            "the grid as a function of the launch's arguments (lambda meta: (B,))",
            _SOLUTION_KERNEL
            + "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[lambda meta: (x.shape[0],)](\n"
            "        x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16\n"
            "    )\n"
            "    return out\n",
        ),
        (
            "the grid as (B, 1)",
            _SOLUTION_KERNEL
            + "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0], 1)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
        (
            "launched with num_warps=1, a launch option, not an argument of the kernel (review turn 5, finding 1)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16, num_warps=1)\n"
            "    return out\n",
        ),
        (
            "BLOCK: tl.constexpr = 16, launched without BLOCK (review turn 5, finding 7)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr = 16):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1))\n"
            "    return out\n",
        ),
        (
            "the block's sum in a @triton.jit helper",
            "@triton.jit\n"
            "def block_sum_of_squares(ptrs, mask):\n"
            "    x = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)\n"
            "    return tl.sum(x * x, axis=0)\n"
            "\n"
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        total += block_sum_of_squares(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, cols < dim)\n"
            "    tl.store(out_ptr + row, total)\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
        (
            "a masked load without other=, its masked lanes dropped with tl.where before the sum",
            _SOLUTION_KERNEL.replace(
                "mask=mask, other=0.0)\n",
                "mask=mask)\n        x = tl.where(mask, x, 0.0)\n",
            )
            + "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
        (
            "a tl.atomic_add of each block's sum into zeros, in place of one store (no store for the check to place)",
            _SOLUTION_KERNEL.replace("        total += x.to(tl.float32) * x.to(tl.float32)\n", (
                "        tl.atomic_add(out_ptr + row, tl.sum(x.to(tl.float32) * x.to(tl.float32), axis=0))\n"
            )).replace("    tl.store(out_ptr + row, tl.sum(total, axis=0))\n", "")
            + "def squared_norms(x):\n"
            "    out = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
        ),
        *RIGHT_ANSWERS_FOR_THE_COMPILER[1],
    ],
    2: [
        ("math.ceil(dim / block) * block - dim: an int",
         "import math\n\ndef idle_lanes(dim, block):\n    return math.ceil(dim / block) * block - dim\n"),
        ("-dim & (block - 1): right for a power of 2, which the exercise says block is",
         "def idle_lanes(dim, block):\n    return -dim & (block - 1)\n"),
        ("a numpy integer, np.int64(-dim % block)",
         "import numpy as np\n\ndef idle_lanes(dim, block):\n    return np.int64(-dim % block)\n"),
    ],
}

# Wrong answers that Triton's interpreter runs correctly and only its compiler rejects: the
# check compiles the kernel for a GPU, which needs the kernel's source. tests/test_exercises.py
# runs answers with exec() of a string, which keeps none (the check then says so and skips the
# compile), so tests/test_triton.py runs these with their source registered, as a notebook cell's is.
WRONG_ANSWERS_FOR_THE_COMPILER = {
    1: [
        (
            "the sum started in the input's dtype, re-assigned in float32 (review turn 4, findings 3 and 6)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=cols < dim,\n"
            "                    other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"Triton's compiler rejects it for float16 rows: .*Loop-carried variable total",
        ),
        (
            "tl.static_range(0, dim, BLOCK) with dim known only at run time (review turn 4, finding 3)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in tl.static_range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=cols < dim,\n"
            "                    other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"Triton's compiler rejects it for float16 rows: .*static_range",
        ),
        (
            "col_stride.to(tl.int64): a col_stride of 1 is compiled in as the int 1 (review turn 5, finding 5)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride.to(tl.int64), mask=mask, other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"rejects it for float16 rows: .*has no attribute 'to'.*compiled in as the constant 1",
        ),
        (
            "row_stride.to(tl.int64): a row stride of 1 (a transposed view) is compiled in as the int 1 "
            "(review turn 6, C2)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        mask = cols < dim\n"
            "        x = tl.load(x_ptr + row * row_stride.to(tl.int64) + cols.to(tl.int64) * col_stride, mask=mask,\n"
            "                    other=0.0).to(tl.float32)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"rejects it for a transposed view \(row stride 1\): .*has no attribute 'to'.*a stride, or dim",
        ),
    ],
}
