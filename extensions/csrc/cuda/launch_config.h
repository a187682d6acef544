// How the triplet kernels spread rows over a grid: one warp per row, a fixed
// number of warps per block, and a grid-stride loop, so that a batch of any
// size is covered by one launch of at most kMaxBlocks blocks. Plain C++ (no
// CUDA or torch header), so the CPU tests compile and check it with g++.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EP_LAUNCH_HD __host__ __device__ __forceinline__
#else
#define EP_LAUNCH_HD inline
#endif

namespace extending_pytorch {
namespace cuda {

// More blocks than any GPU runs at once (an H100 SXM has 132 multiprocessors), and
// far below gridDim.x's limit of 2^31 - 1. A larger batch does not need more:
// each warp then takes every (blocks * rows_per_block)-th row.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// Blocks to launch for `rows` rows, `rows_per_block` rows per block at a time.
EP_LAUNCH_HD int64_t blocks_for_rows(int64_t rows, int64_t rows_per_block,
                                     int64_t max_blocks = kMaxBlocks) {
  const int64_t needed = (rows + rows_per_block - 1) / rows_per_block;
  return needed < max_blocks ? needed : max_blocks;
}

// The first row of warp `warp` of block `block`, and the step to its next row.
EP_LAUNCH_HD int64_t first_row(int64_t block, int64_t warp, int64_t rows_per_block) {
  return block * rows_per_block + warp;
}

EP_LAUNCH_HD int64_t row_step(int64_t blocks, int64_t rows_per_block) {
  return blocks * rows_per_block;
}

}  // namespace cuda
}  // namespace extending_pytorch
