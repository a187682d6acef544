// Kernels for the traffic counter's tests (tests/test_traffic.py): each moves
// a number of bytes, in a number of 32-byte sectors, that the test works out.

// y[i] = x[i]: one read and one write of 4 bytes per element.
__global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

// Sums of a (rows, cols) row-major matrix. by_rows: lane j reads column j of a
// row, neighbours read neighbouring addresses; by_columns: lane i reads row i of
// a column, neighbours are a row apart.
__global__ void sum_by_rows(const float* m, float* out, int rows, int cols) {
  int r = blockIdx.x;
  float s = 0;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += m[r * cols + j];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (threadIdx.x == 0) out[r] = s;
}

__global__ void sum_by_columns(const float* m, float* out, int rows, int cols) {
  int c = blockIdx.x;
  float s = 0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) s += m[i * cols + c];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (threadIdx.x == 0) out[c] = s;
}

// 16-byte loads and stores: n4 float4s.
__global__ void copy4(const float4* x, float4* y, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
}

// Registers, a local array and shared memory are not global memory: only x's
// reads and y's writes count. One atomicAdd per thread on total[0]: a read
// and a write of 4 bytes each.
__global__ void staged(const float* x, float* y, float* total, int n) {
  __shared__ float tile[64];
  float local[4];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < 4; ++k) local[k] = k;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  float v = tile[(threadIdx.x + 1) % blockDim.x] + local[threadIdx.x % 4];
  if (i < n) y[i] = v;
  atomicAdd(total, 1.0f);
}
