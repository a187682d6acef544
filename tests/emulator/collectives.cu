// Tiny kernels for the SIMT emulator's own tests (tests/test_emulator.py).
// Each "BROKEN:" kernel breaks one rule of CUDA's collectives or memory; the
// tests check that the emulator reports it with this file's line (the line
// marked "LINE <name>"), blockIdx and threadIdx, instead of hanging. The
// others check that correct code computes what CUDA defines.

// Lane 31 leaves before the shuffle its warp waits at.  BROKEN
__global__ void exit_while_waited(float* out) {
  float v = threadIdx.x;
  if (threadIdx.x == 31) return;
  v += __shfl_xor_sync(0xffffffffu, v, 1);  // LINE exit_while_waited
  out[threadIdx.x] = v;
}

// The two halves of the warp call different shuffles, each naming all lanes.  BROKEN
__global__ void diverged_shuffles(float* out) {
  float v = threadIdx.x;
  if (threadIdx.x < 16) {
    v = __shfl_down_sync(0xffffffffu, v, 1);  // LINE diverged_low
  } else {
    v = __shfl_down_sync(0xffffffffu, v, 1);  // LINE diverged_high
  }
  out[threadIdx.x] = v;
}

// Lanes 0-15 shuffle among themselves but read lanes 16-31.  BROKEN
__global__ void reads_outside_mask(float* out) {
  float v = threadIdx.x;
  if (threadIdx.x < 16) {
    v = __shfl_sync(0x0000ffffu, v, threadIdx.x + 16);  // LINE reads_outside_mask
  }
  out[threadIdx.x] = v;
}

// A lane passes a mask without itself.  BROKEN
__global__ void lane_not_in_mask(float* out) {
  out[threadIdx.x] = __shfl_sync(0xfffffffeu, 1.0f, 1);  // LINE lane_not_in_mask
}

// Only the first warp of the block reaches the barrier.  BROKEN
__global__ void barrier_not_reached(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();  // LINE barrier_not_reached
  }
  out[threadIdx.x] = 1;
}

// Two warps wait at two different barriers.  BROKEN
__global__ void different_barriers(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();  // LINE barrier_low
  } else {
    __syncthreads();  // LINE barrier_high
  }
  out[threadIdx.x] = 1;
}

// A full mask in a block of 48 threads: the second warp has 16 lanes.  BROKEN
__global__ void partial_warp_full_mask(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);  // LINE partial_warp
}

// No bound check: threads past n read and write outside the arrays.  BROKEN
__global__ void out_of_bounds(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2 * x[i];  // LINE out_of_bounds
}

// Threads exchange values through shared memory without a barrier.  BROKEN
__global__ void missing_syncthreads(const float* x, float* y) {
  __shared__ float tile[64];
  tile[threadIdx.x] = x[threadIdx.x];
  y[threadIdx.x] = tile[threadIdx.x ^ 1];  // LINE missing_syncthreads
}

// Two blocks write the same elements.  BROKEN
__global__ void blocks_collide(float* y) {
  y[threadIdx.x] = blockIdx.x;  // LINE blocks_collide
}

// Leaves the second half of y unwritten.  BROKEN
__global__ void half_written(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 2) y[i] = 1;
}

// ---- Correct kernels ----

// The same exchange as missing_syncthreads, with the barrier.
__global__ void with_syncthreads(const float* x, float* y) {
  __shared__ float tile[64];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = tile[threadIdx.x ^ 1];
}

// Every warp primitive once; out has 10 ints per thread.
__global__ void warp_primitives(int* out, int width) {
  const int lane = threadIdx.x % 32;
  int* o = out + 10 * (blockIdx.x * blockDim.x + threadIdx.x);
  o[0] = __shfl_sync(0xffffffffu, 100 + lane, 3, width);
  o[1] = __shfl_up_sync(0xffffffffu, 100 + lane, 2, width);
  o[2] = __shfl_down_sync(0xffffffffu, 100 + lane, 2, width);
  o[3] = __shfl_xor_sync(0xffffffffu, 100 + lane, 5, width);
  o[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[5] = __any_sync(0xffffffffu, lane == 7);
  o[6] = __all_sync(0xffffffffu, lane < 31);
  o[7] = threadIdx.x + 1000 * blockIdx.x;
  __syncwarp();
  o[8] = __syncthreads_count(lane < 4);
  o[9] = lane < 16 ? __shfl_down_sync(0x0000ffffu, 100 + lane, 1, 16) : 0;
}

// A block sum in shared memory (dynamic size) and shuffles, added atomically.
__global__ void block_sum(const float* x, float* total, int n) {
  extern __shared__ float partial[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int w = 0; w < blockDim.x / 32; ++w) sum += partial[w];
    atomicAdd(total, sum);
  }
}

// Built-in variables in 3-D.
__global__ void indices(int* out) {
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int i = block * blockDim.x * blockDim.y * blockDim.z + thread;
  out[4 * i + 0] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
  out[4 * i + 1] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
  out[4 * i + 2] = blockDim.x + 10 * blockDim.y + 100 * blockDim.z;
  out[4 * i + 3] = gridDim.x + 10 * gridDim.y + 100 * gridDim.z;
}

// Half-precision data through a kernel (cuda_fp16.h's host implementation).
__global__ void half_scale(const __half* x, __half* y, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half(__half2float(x[i]) * factor);
}
