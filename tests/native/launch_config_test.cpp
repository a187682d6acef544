// Checks the grid of the triplet kernels (csrc/cuda/launch_config.h) on the
// CPU: for a batch larger than the grid, the grid-stride loop of every warp
// must visit each row exactly once, and the block count must fit gridDim.x.
// Built and run by tests/test_cuda.py with g++; prints "ok" on success.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/launch_config.h"

using namespace extending_pytorch::cuda;

static int check(int64_t rows, int64_t rows_per_block, int64_t max_blocks) {
  const int64_t blocks = blocks_for_rows(rows, rows_per_block, max_blocks);
  if (blocks < 1 || blocks > max_blocks) {
    std::printf("rows=%lld: %lld blocks, limit %lld\n", (long long)rows, (long long)blocks,
                (long long)max_blocks);
    return 1;
  }
  std::vector<int> visits(rows, 0);
  const int64_t step = row_step(blocks, rows_per_block);
  for (int64_t block = 0; block < blocks; ++block) {
    for (int64_t warp = 0; warp < rows_per_block; ++warp) {
      for (int64_t row = first_row(block, warp, rows_per_block); row < rows; row += step) {
        ++visits[row];
      }
    }
  }
  for (int64_t row = 0; row < rows; ++row) {
    if (visits[row] != 1) {
      std::printf("rows=%lld blocks=%lld: row %lld visited %d times\n", (long long)rows,
                  (long long)blocks, (long long)row, visits[row]);
      return 1;
    }
  }
  return 0;
}

int main() {
  int failures = 0;
  // Small grids stand in for kMaxBlocks, so that batches many times the grid
  // are checked row by row.
  for (int64_t rows : {1, 7, 8, 9, 64, 1000, 4099}) {
    for (int64_t max_blocks : {int64_t{1}, int64_t{3}, int64_t{64}, kMaxBlocks}) {
      failures += check(rows, 8, max_blocks);
    }
  }
  // The real limit: a batch of 2^40 rows needs no more than kMaxBlocks blocks,
  // a number that fits gridDim.x (at most 2^31 - 1).
  const int64_t huge = blocks_for_rows(int64_t{1} << 40, 8);
  if (huge != kMaxBlocks || kMaxBlocks > 2147483647) {
    std::printf("2^40 rows: %lld blocks\n", (long long)huge);
    ++failures;
  }
  if (failures == 0) std::printf("ok\n");
  return failures == 0 ? 0 : 1;
}
