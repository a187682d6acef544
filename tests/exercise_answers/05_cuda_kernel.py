"""Plausible wrong answers to the exercises of notebooks/05_cuda_kernel.ipynb, each with the error its check must raise,
and right answers other than the solution, which its check must accept.

WRONG_ANSWERS: exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "no cap on the grid (2^37 blocks for 2^40 rows, past gridDim.x's limit)",
            "def launch_shape(batch):\n    return (batch + 7) // 8, 256\n",
            AssertionError,
            r"capped at 2\^20 blocks",
        ),
        (
            "rounds the block count down: the last rows of a batch that is not a multiple of 8 are left out",
            "def launch_shape(batch):\n    return min(batch // 8, 2**20), 256\n",
            AssertionError,
            r"batch=1: 0 blocks; it takes ceil\(1 / 8\) = 1",
        ),
        (
            "returns the warps per block (8), not the threads (256)",
            "def launch_shape(batch):\n    return min((batch + 7) // 8, 2**20), 8\n",
            AssertionError,
            r"8 warps of 32 threads make 256, got 8",
        ),
        (
            "one block per row: 8 times the blocks needed, 7 of every 8 warps idle",
            "def launch_shape(batch):\n    return min(batch, 2**20), 256\n",
            AssertionError,
            r"batch=7: 7 blocks; it takes ceil\(7 / 8\) = 1",
        ),
        (
            "true division: a float block count (1.75 blocks for 7 rows)",
            "def launch_shape(batch):\n"
            "    return min((batch + 7) / 8, 2**20), 256\n",
            AssertionError,
            r"blocks: 1\.0 is a float, not an integer",
        ),
        (
            "the cap compared with the rows, not the blocks: 2^20 blocks for any batch over 2^20 rows",
            "def launch_shape(batch):\n"
            "    if batch > 2**20:\n"
            "        return 2**20, 256\n"
            "    return (batch + 7) // 8, 256\n",
            AssertionError,
            r"batch=1048577: 1048576 blocks; it takes ceil\(1048577 / 8\) = 131073",
        ),
        (
            "capped at gridDim.x's limit (2^31 - 1), not the book's 2^20",
            "def launch_shape(batch):\n"
            "    return min((batch + 7) // 8, 2**31 - 1), 256\n",
            AssertionError,
            r"the grid is capped at 2\^20 blocks: 1048577 blocks for 8388609 rows",
        ),
        (
            "one block too many whenever the batch is a multiple of 8 (batch // 8 + 1)",
            "def launch_shape(batch):\n"
            "    return min(batch // 8 + 1, 2**20), 256\n",
            AssertionError,
            r"batch=8: 2 blocks; it takes ceil\(8 / 8\) = 1",
        ),
        (
            "threads per block as a float (8 * 32.0)",
            "def launch_shape(batch):\n"
            "    return min((batch + 7) // 8, 2**20), 8 * 32.0\n",
            AssertionError,
            r"threads per block: 256\.0 is a float, not an integer",
        ),
    ],
    2: [
        (
            "stops one exchange early (offsets 16, 8, 4, 2)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[i ^ offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum",
        ),
        (
            "rotates (lane i + offset) instead of exchanging (lane i XOR offset)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[(i + offset) % 32] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
        (
            "skips the exchanges and hands every lane the total",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    return [sum(values)] * 32\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
        (
            "exchanges in place: a lane reads its partner's value after the partner already added to it",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        for i in range(32):\n"
            "            lanes[i] += lanes[i ^ offset]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum after the 5 exchanges; .* not in place",
        ),
        (
            "shifts down instead of exchanging: lane i adds lane i + offset's value, 0 past lane 31",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + (lanes[i + offset] if i + offset < 32 else 0) for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum after the 5 exchanges; in each, lane i adds the value that lane i \^ offset",
        ),
        (
            "OR instead of XOR: lanes with the offset's bit set add their own value",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[i | offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum after the 5 exchanges; in each, lane i adds the value that lane i \^ offset",
        ),
        (
            "each exchange starts again from the original values (the last exchange alone counts)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [values[i] + values[i ^ offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum after the 5 exchanges; in each, lane i adds the value that lane i \^ offset",
        ),
        (
            "ignores the offsets given and always runs warp_sum's five exchanges",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in (16, 8, 4, 2, 1):\n"
            "        lanes = [lanes[i] + lanes[i ^ offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"after the exchange at offset 1, lane i holds values\[i\] \+ values\[i \^ 1\]",
        ),
    ],
    3: [
        (
            "counts only the inputs (3 B D numbers, not 9 B D)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 3 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"count 9 B D numbers",
        ),
        (
            "returns seconds, not milliseconds",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9)\n",
            AssertionError,
            r"that is seconds: return milliseconds",
        ),
        (
            "takes a GB as 2^30 bytes",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * dim * element_size / (bandwidth_gb_per_s * 2**30) * 1e3\n",
            AssertionError,
            r"a GB/s is 10\^9 bytes per second, not 2\^30",
        ),
        (
            "ignores element_size (always 4 bytes)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * dim * 4 / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"floor_milliseconds\(10, 7, 1\.0, element_size=8\) is .*use batch, dim and element_size each once",
        ),
        (
            "batch squared where batch times dim is meant (the old check only tried batch == dim)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * batch * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"floor_milliseconds\(3, 1000, 2\.0, element_size=4\) is .*not 9·B·D·element_size bytes",
        ),
        (
            "counts the first kernels' 12 B D numbers",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 12 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"12 B D numbers is what the first kernels moved",
        ),
        (
            "counts the one-pass floor, 6 B D numbers",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 6 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"6 B D numbers is the floor of one pass",
        ),
        (
            "counts bits (8 per byte)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * dim * element_size * 8 / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"that counts bits",
        ),
        (
            "floor division: whole milliseconds only",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 9 * batch * dim * element_size // (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"9e6 numbers of 4 bytes at 36 GB/s take 1 ms, got 0\.0",
        ),
    ],
    4: [
        (
            "no broadcast: lane 0 holds the sum, the other lanes their partial sums",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"only lane 0 holds the sum: broadcast it with __shfl_sync",
        ),
        (
            "the shuffle inside divergent code (if (lane < 16)): lanes 16-31 never reach it",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) {\n"
            "    if (lane < 16) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  }\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            RuntimeError,
            r"exercise_4\.cu:11: __shfl_sync\(\) .* diverged: lane 0 .* waits at __shfl_down_sync\(\) at exercise_4\.cu:9",
        ),
        (
            "stops one exchange early (offset > 1): lane 0 misses the other half of the sums",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 1; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"lane 0 does not hold the row's sum",
        ),
        (
            "the row bound only on the write: the two warps without a row read past the input",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  if (row < rows) out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:6: the warp of row 10 has no row \(rows = 10\); "
            r"a warp with row >= rows must not read or write",
        ),
        (
            "no row bound: the two warps without a row read and write past the tensors",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:6: the warp of row 10 has no row \(rows = 10\); "
            r"a warp with row >= rows must not read or write",
        ),
        (
            "only lane 0 writes: the other 31 copies of each row stay unwritten",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  if (lane == 0) out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"row_sums left 310 of the 320 elements of out unwritten, the first out\[0\]\[1\]",
        ),
        (
            "the mask from __activemask() after the row bound (right on the emulator's other schedules, "
            "wrong on a GPU since Volta)",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  const unsigned mask = __activemask();\n"
            "  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(mask, v, o);\n"
            "  v = __shfl_sync(mask, v, 0);\n"
            "  out[row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"a shuffle at exercise_4\.cu:9 reads a lane its mask does not name\. A mask from __activemask\(\)",
        ),
        (
            "the warps per block written as 4 (the check's first launch), not taken from blockDim.x",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * 4 + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[(long long)row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"row_sums left 96 of the 224 elements of out unwritten, the first out\[2\]\[0\]: each row needs a warp",
        ),
        (
            "every lane sums the whole row itself, no shuffles: right values, 32 times the reads",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = 0; j < cols; ++j) v += x[(long long)row * cols + j];\n"
            "  out[(long long)row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"byte budget: the kernel reads 122880 bytes of x, 32 times its 3840",
        ),
        (
            "lane 0 sums the row alone, then broadcasts: each element read once, uncoalesced",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  if (lane == 0) for (int j = 0; j < cols; ++j) v += x[(long long)row * cols + j];\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[(long long)row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"coalescing: the reads of x touch 960 32-byte sectors, more than the 120",
        ),
        (
            "the columns written as 96 (the check's first launch), not cols",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < 96; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[(long long)row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:7: the warp of row 5 went past its row",
        ),
        (
            "j <= cols: one column too many, the next row's first (the last row's reads past x)",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j <= cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[(long long)row * 32 + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:7: the warp of row 9 went past its row",
        ),
        (
            "out indexed like x (row * cols + lane): writes past out",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  v = __shfl_sync(0xffffffffu, v, 0);\n"
            "  out[(long long)row * cols + lane] = v;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_4\.cu:10: the warp of row 4 went past its row",
        ),
        (
            "the total handed over through shared memory by lane 0, with no __syncwarp (a race on a GPU)",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  __shared__ float total[32];\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  if (lane == 0) total[threadIdx.x / 32] = v;\n"
            "  out[(long long)row * 32 + lane] = total[threadIdx.x / 32];\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"only lane 0 holds the sum: broadcast it with __shfl_sync",
        ),
        (
            "std::min in the kernel: g++ (the emulator) accepts it, nvcc does not (a host function in device code)",
            'row_sums_source = r"""\n'
            "#include <algorithm>\n"
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = std::min(16, cols); offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  out[(long long)row * 32 + lane] = __shfl_sync(0xffffffffu, v, 0);\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"(?s)the emulator ran your kernel, but nvcc rejects it:\nnvcc rejected exercise_4\.cu:\n"
            r"exercise_4\.cu\(9\): error: calling a constexpr __host__ function\(\"min\"\)",
        ),
    ],
    5: [
        (
            "no row bound: the warp past the last row reads past the inputs",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_5\.cu:7: the warp of row 5 accessed memory past the last row",
        ),
        (
            "no column bound: the lanes read whole chunks of 32 columns, past the end of the last row",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int k = 0; k < (dim + 31) / 32; ++k) {\n"
            "    const int j = 32 * k + lane;\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_5\.cu:9: row 4 read past its last column",
        ),
        (
            "no warp reduction: lane 0 writes its own partial sum",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"not torch's distances \(does each lane add the columns .* lane 0 write the sum of all 32 lanes\?\)",
        ),
        (
            "every lane writes its row's distance: right values, 32 unordered stores to one element (a race) where one will do",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"a data race at exercise_5\.cu:12: two lanes of a warp touch the same element, one of them writing",
        ),
        (
            "lanes without a column leave before the shuffles (right at dim = 37, not at dim = 20)",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows || lane >= dim) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"dim = 20: a lane left the kernel .* while a shuffle of its warp waits for it",
        ),
        (
            "the mask from __activemask() after the divergent column loop (wrong on a GPU since Volta)",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  const unsigned mask = __activemask();\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(mask, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"a shuffle at exercise_5\.cu:12 reads a lane its mask does not name",
        ),
        (
            "every lane sums the whole row and lane 0 writes: right values, 32 times the reads",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = 0; j < dim; ++j) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"byte budget: the kernel reads 23680 bytes of a, 32 times its 740",
        ),
        (
            "one thread per row (its lane 0), looping over the row: each element read once, uncoalesced",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows || lane != 0) return;\n"
            "  float sum = 0;\n"
            "  for (int j = 0; j < dim; ++j) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"coalescing: the reads of a touch 185 32-byte sectors, more than the 32",
        ),
        (
            "each lane takes a contiguous chunk of columns: each element read once, neighbours a chunk apart",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  const int chunk = (dim + 31) / 32;\n"
            "  float sum = 0;\n"
            "  for (int j = lane * chunk; j < (lane + 1) * chunk && j < dim; ++j) {\n"
            "    const float d = a[row * dim + j] - p[row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"coalescing: the reads of a touch \d+ 32-byte sectors, more than the 32",
        ),
        (
            "the warps per block written as 2 (the check's launch), not taken from blockDim.x",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * 2 + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"squared_distance left 2 of the 5 distances unwritten: each row needs a warp",
        ),
        (
            "row > rows instead of row >= rows: the warp of row `rows` reads past the inputs",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row > rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"out of bounds at exercise_5\.cu:8: the warp of row 5 accessed memory past the last row",
        ),
        (
            "the column loop steps by blockDim.x, not by the warp's 32 lanes",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += blockDim.x) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"dim = 37: not torch's distances \(does each lane add the columns lane, lane \+ 32",
        ),
        (
            "atomicAdd of each lane's partial sum into out, never set to 0 first",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  atomicAdd(&out[row], sum);\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"some distances are NaN: out starts uninitialised",
        ),
        (
            "shared memory summed by the warp's last lane, with no __syncwarp (a race on a GPU)",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  __shared__ float partial[64];\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  partial[threadIdx.x] = sum;\n"
            "  if (lane == 31) {\n"
            "    float total = 0;\n"
            "    for (int k = 0; k < 32; ++k) total += partial[threadIdx.x - 31 + k];\n"
            "    out[row] = total;\n"
            "  }\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"a data race at exercise_5\.cu:15: two lanes of a warp touch the same element",
        ),
        (
            "a helper without __device__, called from the kernel: g++ (the emulator) accepts it, nvcc does not",
            'squared_distance_source = r"""\n'
            "float square(float v) { return v * v; }\n"
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) sum += square(a[(long long)row * dim + j] - p[(long long)row * dim + j]);\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
            AssertionError,
            r"(?s)the emulator ran your kernel, but nvcc rejects it:\nnvcc rejected exercise_5\.cu:\n"
            r"exercise_5\.cu\(8\): error: calling a __host__ function\(\"square\(float\)\"\) from a __global__ function",
        ),
    ],
}

# Right answers the checks must accept: other integer roundings, float32 arithmetic, a broadcast through
# shared memory ordered by __syncwarp(), __shfl_down_sync where lane 0 writes.
RIGHT_ANSWERS = {
    1: [
        (
            "math.ceil of a true division (an int)",
            "import math\n"
            "\n"
            "def launch_shape(batch):\n"
            "    return min(math.ceil(batch / 8), 2**20), 256\n",
        ),
    ],
    2: [
        (
            "a torch float32 tensor per exchange, indexed with arange ^ offset",
            "import torch\n"
            "\n"
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = torch.tensor(values, dtype=torch.float32)\n"
            "    index = torch.arange(32)\n"
            "    for offset in offsets:\n"
            "        lanes = lanes + lanes[index ^ offset]\n"
            "    return lanes.tolist()\n",
        ),
    ],
    4: [
        (
            "the total handed over through shared memory, with __syncwarp() between the write and the reads",
            'row_sums_source = r"""\n'
            "__global__ void row_sums(const float* x, float* out, int rows, int cols) {\n"
            "  __shared__ float total[32];\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float v = 0;\n"
            "  for (int j = lane; j < cols; j += 32) v += x[(long long)row * cols + j];\n"
            "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);\n"
            "  if (lane == 0) total[threadIdx.x / 32] = v;\n"
            "  __syncwarp();\n"
            "  out[(long long)row * 32 + lane] = total[threadIdx.x / 32];\n"
            "}\n"
            '"""\n',
        ),
    ],
    5: [
        (
            "__shfl_down_sync, which leaves the sum in lane 0, the lane that writes",
            'squared_distance_source = r"""\n'
            "__global__ void squared_distance(const float* a, const float* p, float* out, int rows, int dim) {\n"
            "  const int lane = threadIdx.x % 32;\n"
            "  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (row >= rows) return;\n"
            "  float sum = 0;\n"
            "  for (int j = lane; j < dim; j += 32) {\n"
            "    const float d = a[(long long)row * dim + j] - p[(long long)row * dim + j];\n"
            "    sum += d * d;\n"
            "  }\n"
            "  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);\n"
            "  if (lane == 0) out[row] = sum;\n"
            "}\n"
            '"""\n',
        ),
    ],
}
