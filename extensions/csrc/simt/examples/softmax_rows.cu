// Row softmax, one warp per row: the emulator's speed benchmark (tools/emulator_speed.py)
// and a check that it computes what torch.softmax does (tests/test_emulator_readers_cuda.py).
#include <cmath>

__global__ void empty_kernel() {}

__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  const float* in = x + static_cast<long long>(row) * cols;
  float* out = y + static_cast<long long>(row) * cols;
  float m = -INFINITY;
  for (int j = lane; j < cols; j += 32) m = fmaxf(m, in[j]);
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  float sum = 0.f;
  for (int j = lane; j < cols; j += 32) sum += expf(in[j] - m);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  for (int j = lane; j < cols; j += 32) out[j] = expf(in[j] - m) / sum;
}
