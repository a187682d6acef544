// Cooperative groups as tuned kernels use them: a block of warps reducing with
// cg::reduce, tiles smaller than a warp, votes and shuffles on tiles.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

// One block per row: each warp reduces its part, warp 0 adds the warps' sums.
__global__ void row_sums(const float* x, float* out, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ float partial[32];
  const float* row = x + static_cast<long long>(blockIdx.x) * cols;
  float sum = 0.f;
  for (int j = block.thread_rank(); j < cols; j += block.size()) sum += row[j];
  sum = cg::reduce(warp, sum, cg::plus<float>());
  if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = sum;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    const int warps = warp.meta_group_size();
    float total = warp.thread_rank() < warps ? partial[warp.thread_rank()] : 0.f;
    total = cg::reduce(warp, total, cg::plus<float>());
    if (warp.thread_rank() == 0) out[blockIdx.x] = total;
  }
}

// Tiles of 8: the minimum and maximum of each group of 8 consecutive values, the
// tile's ballot of positive values (bit i: the tile's lane i), and a shfl_down sum.
__global__ void tiles_of_8(const int* x, int* minimum, int* maximum, unsigned* positive,
                           int* sum_down, int n) {
  auto tile = cg::tiled_partition<8>(cg::this_thread_block());
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = i < n ? x[i] : 0;
  const int lo = cg::reduce(tile, v, cg::less<int>());
  const int hi = cg::reduce(tile, v, cg::greater<int>());
  const unsigned bits = tile.ballot(v > 0);
  int s = v;
  for (int offset = 4; offset > 0; offset /= 2) s += tile.shfl_down(s, offset);
  tile.sync();
  const int group = i / 8;
  if (tile.thread_rank() == 0 && i < n) {
    minimum[group] = lo;
    maximum[group] = hi;
    positive[group] = bits;
    sum_down[group] = s;
  }
}

// Each thread's rank in its tile of 32 and of 8, the tiles' meta group rank and size,
// and the same for tiles of 4 cut from the warp's tile (they count tiles of the warp).
__global__ void group_shape(int* out) {
  auto block = cg::this_thread_block();
  cg::thread_block_tile<32, cg::thread_block> warp = cg::tiled_partition<32>(block);
  auto tile = cg::tiled_partition<8>(block);
  auto quarter = cg::tiled_partition<4>(warp);
  int* mine = out + 9 * block.thread_rank();
  mine[0] = min(warp.thread_rank(), 1000u);  // unsigned int, as in CUDA
  mine[1] = warp.meta_group_rank();
  mine[2] = warp.meta_group_size();
  mine[3] = tile.thread_rank();
  mine[4] = tile.meta_group_rank();
  mine[5] = tile.meta_group_size();
  mine[6] = quarter.thread_rank();
  mine[7] = quarter.meta_group_rank();
  mine[8] = quarter.meta_group_size();
}

// Tiles of 16: shuffles by rank, up and xor; votes; bitwise reductions; cg::sync.
__global__ void tile_ops(const int* x, int* out) {
  auto block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  const int v = x[block.thread_rank()];
  int* mine = out + 8 * block.thread_rank();
  mine[0] = tile.shfl(v, 3);                       // rank 3's value
  mine[1] = tile.shfl_up(v, 1);                    // the previous rank's (rank 0: its own)
  mine[2] = tile.shfl_xor(v, 5);
  mine[3] = tile.any(v > 40);
  mine[4] = tile.all(v >= 0);
  mine[5] = cg::reduce(tile, v, cg::bit_and<int>());
  mine[6] = cg::reduce(tile, v, cg::bit_or<int>());
  cg::sync(tile);
  mine[7] = cg::reduce(tile, v, cg::bit_xor<int>());
  cg::sync(block);
}

__global__ void grid_barrier(float* x) {
  cg::grid_group grid = cg::this_grid();
  x[threadIdx.x] = 1.f;
  grid.sync();
}
