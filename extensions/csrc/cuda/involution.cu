// CUDA kernels of involution. No torch headers here: see involution_kernels.h;
// involution_cuda.cpp registers them for the CUDA device.
//
// Mapping: one thread per element of the array a kernel writes, as in the
// paper's kernels, with the per-element sums of involution_math.h (the code
// the CPU kernels run). Consecutive threads take consecutive elements, so
// they differ in the last index w (or x): their reads of the weight planes
// and of grad_output are coalesced, and their reads of the input too at
// stride 1. A grid-stride loop with 64-bit indices covers arrays of any size.
//
// The weight gradient sums over the C / G channels of a group. One thread per
// weight element makes that sum a loop in registers: no atomics, no shared
// memory, and the same result on every run. The alternative, a thread per
// (channel, weight element) pair adding into the weight gradient with
// atomicAdd, would give C / G times more threads but a result that depends
// on the order the additions land in, and contention on every element.
#include <cstdint>

#include "accumulate.h"
#include "launch_config.h"
#include "involution_kernels.h"

namespace extending_pytorch {
namespace cuda {
namespace {

constexpr int kThreadsPerBlock = 256;

// Reads element k of a dense array as the accumulation type; passed to the
// shared sums, which know nothing about half types.
template <typename scalar_t>
struct Load {
  const scalar_t* __restrict__ data;
  __device__ __forceinline__ typename Acc<scalar_t>::type operator()(int64_t k) const {
    return to_acc(data[k]);
  }
};

// One thread per element, in the grid-stride loop of launch_config.h (shared
// with the triplet kernels, which take a row per warp where these take an
// element per thread): the first element of each thread, and the step to its next.
__device__ __forceinline__ int64_t first_index() {
  return first_row(blockIdx.x, threadIdx.x, kThreadsPerBlock);
}
__device__ __forceinline__ int64_t grid_stride() {
  return row_step(gridDim.x, kThreadsPerBlock);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    involution_forward_kernel(InvolutionShape s, const scalar_t* __restrict__ input,
                              const scalar_t* __restrict__ weight,
                              scalar_t* __restrict__ output, int64_t n) {
  using acc_t = typename Acc<scalar_t>::type;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const Index4 o = unravel4(k, s.channels, s.out_h, s.out_w);
    output[k] = from_acc<scalar_t>(involution_forward_element<acc_t>(
        s, o.i0, o.i1, o.i2, o.i3, Load<scalar_t>{input}, Load<scalar_t>{weight}));
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    involution_grad_input_kernel(InvolutionShape s, const scalar_t* __restrict__ grad_output,
                                 const scalar_t* __restrict__ weight,
                                 scalar_t* __restrict__ grad_input, int64_t n) {
  using acc_t = typename Acc<scalar_t>::type;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const Index4 p = unravel4(k, s.channels, s.height, s.width);
    grad_input[k] = from_acc<scalar_t>(involution_grad_input_element<acc_t>(
        s, p.i0, p.i1, p.i2, p.i3, Load<scalar_t>{grad_output}, Load<scalar_t>{weight}));
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    involution_grad_weight_kernel(InvolutionShape s, const scalar_t* __restrict__ grad_output,
                                  const scalar_t* __restrict__ input,
                                  scalar_t* __restrict__ grad_weight, int64_t n) {
  using acc_t = typename Acc<scalar_t>::type;
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t out_hw = s.out_h * s.out_w;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    // k indexes (b, g, i, j, h, w): split it as (b, g, tap, hw).
    const Index4 q = unravel4(k, s.groups, taps, out_hw);
    grad_weight[k] = from_acc<scalar_t>(involution_grad_weight_element<acc_t>(
        s, q.i0, q.i1, q.i2 / s.kernel_w, q.i2 % s.kernel_w, q.i3 / s.out_w, q.i3 % s.out_w,
        Load<scalar_t>{grad_output}, Load<scalar_t>{input}));
  }
}

unsigned int blocks_for(int64_t n) {
  // At most kMaxBlocks (launch_config.h): the cast cannot overflow.
  return static_cast<unsigned int>(blocks_for_rows(n, kThreadsPerBlock));
}

}  // namespace

// Each launcher skips an empty array: a grid of zero blocks is an invalid launch.
template <typename scalar_t>
void launch_involution_forward(const InvolutionShape& s, const scalar_t* input,
                               const scalar_t* weight, scalar_t* output,
                               cudaStream_t stream) {
  const int64_t n = s.batch * s.channels * s.out_h * s.out_w;
  if (n == 0) {
    return;
  }
  involution_forward_kernel<scalar_t>
      <<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(s, input, weight, output, n);
}

template <typename scalar_t>
void launch_involution_grad_input(const InvolutionShape& s, const scalar_t* grad_output,
                                  const scalar_t* weight, scalar_t* grad_input,
                                  cudaStream_t stream) {
  const int64_t n = s.batch * s.channels * s.height * s.width;
  if (n == 0) {
    return;
  }
  involution_grad_input_kernel<scalar_t>
      <<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(s, grad_output, weight, grad_input, n);
}

template <typename scalar_t>
void launch_involution_grad_weight(const InvolutionShape& s, const scalar_t* grad_output,
                                   const scalar_t* input, scalar_t* grad_weight,
                                   cudaStream_t stream) {
  const int64_t n = s.batch * s.groups * s.kernel_h * s.kernel_w * s.out_h * s.out_w;
  if (n == 0) {
    return;
  }
  involution_grad_weight_kernel<scalar_t>
      <<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(s, grad_output, input, grad_weight, n);
}

// The dtypes the binding dispatches to.
#define EP_INSTANTIATE(T)                                                                 \
  template void launch_involution_forward<T>(const InvolutionShape&, const T*, const T*,  \
                                             T*, cudaStream_t);                           \
  template void launch_involution_grad_input<T>(const InvolutionShape&, const T*,         \
                                                const T*, T*, cudaStream_t);              \
  template void launch_involution_grad_weight<T>(const InvolutionShape&, const T*,        \
                                                 const T*, T*, cudaStream_t);
EP_INSTANTIATE(float)
EP_INSTANTIATE(double)
EP_INSTANTIATE(__half)
EP_INSTANTIATE(__nv_bfloat16)
#undef EP_INSTANTIATE

}  // namespace cuda
}  // namespace extending_pytorch
