// CUDA kernels of the fused triplet hinge loss. No torch headers here: see
// triplet_kernels.h. triplet_cuda.cpp registers them for the CUDA device.
//
// Mapping: one warp (32 threads) per row of the batch, 8 warps per block.
// The 32 lanes of a warp read a row's elements side by side, so consecutive
// lanes touch consecutive addresses (coalesced loads), 4 floats at a time
// where the row is contiguous and aligned. Each lane sums squares over its
// elements in float (double for double inputs); a butterfly of warp shuffles
// then gives every lane the row's two squared distances.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "triplet_kernels.h"

namespace extending_pytorch {
namespace cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kThreadsPerBlock = kWarpSize * kWarpsPerBlock;

// The type sums are kept in: float for float, half and bfloat16.
template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

// Explicit conversions: torch builds with the implicit half conversions disabled.
__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_acc(float x);
template <>
__device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <typename T>
__device__ __forceinline__ T from_acc(double x) {
  return static_cast<T>(x);
}

// Sum over the 32 lanes of a warp; every lane receives the total.
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Can this row be read as float4? Needs float, unit column strides, and
// 16-byte aligned rows.
template <typename scalar_t>
__device__ __forceinline__ bool use_float4(const TripletInputs<scalar_t>& in, int64_t row) {
  if constexpr (!std::is_same_v<scalar_t, float>) {
    return false;
  } else {
    if (in.dim % 4 != 0 || in.anchor_layout.col != 1 || in.positive_layout.col != 1 ||
        in.negative_layout.col != 1) {
      return false;
    }
    const auto aligned = [&](const float* base, Layout layout) {
      return reinterpret_cast<std::uintptr_t>(base + row * layout.row) % 16 == 0;
    };
    return aligned(in.anchor, in.anchor_layout) && aligned(in.positive, in.positive_layout) &&
           aligned(in.negative, in.negative_layout);
  }
}

// Both squared distances of `row`, summed by the whole warp.
template <typename scalar_t, typename acc_t>
__device__ void row_distances(const TripletInputs<scalar_t>& in, int64_t row, int lane,
                              bool vectorised, acc_t& d_ap, acc_t& d_an) {
  const scalar_t* a = in.anchor + row * in.anchor_layout.row;
  const scalar_t* p = in.positive + row * in.positive_layout.row;
  const scalar_t* n = in.negative + row * in.negative_layout.row;
  acc_t sum_p = 0, sum_n = 0;
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (vectorised) {
      const float4* a4 = reinterpret_cast<const float4*>(a);
      const float4* p4 = reinterpret_cast<const float4*>(p);
      const float4* n4 = reinterpret_cast<const float4*>(n);
      for (int64_t k = lane; k < in.dim / 4; k += kWarpSize) {
        const float4 av = a4[k], pv = p4[k], nv = n4[k];
        const float dp[4] = {av.x - pv.x, av.y - pv.y, av.z - pv.z, av.w - pv.w};
        const float dn[4] = {av.x - nv.x, av.y - nv.y, av.z - nv.z, av.w - nv.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sum_p += dp[e] * dp[e];
          sum_n += dn[e] * dn[e];
        }
      }
      d_ap = warp_sum(sum_p);
      d_an = warp_sum(sum_n);
      return;
    }
  }
  for (int64_t j = lane; j < in.dim; j += kWarpSize) {
    const acc_t av = to_acc(a[j * in.anchor_layout.col]);
    const acc_t dp = av - to_acc(p[j * in.positive_layout.col]);
    const acc_t dn = av - to_acc(n[j * in.negative_layout.col]);
    sum_p += dp * dp;
    sum_n += dn * dn;
  }
  d_ap = warp_sum(sum_p);
  d_an = warp_sum(sum_n);
}

// Forward: the loss of each row, written by the row's first lane.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    triplet_forward_kernel(TripletInputs<scalar_t> in, scalar_t* out) {
  using acc_t = typename Acc<scalar_t>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= in.batch) {
    return;  // the whole warp leaves together: `row` is the same for its 32 lanes
  }
  acc_t d_ap, d_an;
  row_distances<scalar_t, acc_t>(in, row, lane, use_float4(in, row), d_ap, d_an);
  if (lane == 0) {
    out[row] = from_acc<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, in.params));
  }
}

// Backward: the three gradients of each row, recomputing its distances.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    triplet_backward_kernel(TripletInputs<scalar_t> in, const scalar_t* grad_output,
                            bool per_row, double scale, scalar_t* grad_a, scalar_t* grad_p,
                            scalar_t* grad_n) {
  using acc_t = typename Acc<scalar_t>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= in.batch) {
    return;
  }
  const bool vectorised = use_float4(in, row);
  acc_t d_ap, d_an;
  row_distances<scalar_t, acc_t>(in, row, lane, vectorised, d_ap, d_an);
  const acc_t g = to_acc(grad_output[per_row ? row : 0]) * static_cast<acc_t>(scale);
  const TripletWeights<acc_t> w = triplet_weights<acc_t>(d_ap, d_an, g, in.params);

  const scalar_t* a = in.anchor + row * in.anchor_layout.row;
  const scalar_t* p = in.positive + row * in.positive_layout.row;
  const scalar_t* n = in.negative + row * in.negative_layout.row;
  const int64_t out = row * in.dim;  // the gradients are contiguous
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (vectorised) {
      const float4* a4 = reinterpret_cast<const float4*>(a);
      const float4* p4 = reinterpret_cast<const float4*>(p);
      const float4* n4 = reinterpret_cast<const float4*>(n);
      float4* ga4 = reinterpret_cast<float4*>(grad_a + out);
      float4* gp4 = reinterpret_cast<float4*>(grad_p + out);
      float4* gn4 = reinterpret_cast<float4*>(grad_n + out);
      for (int64_t k = lane; k < in.dim / 4; k += kWarpSize) {
        const float4 av = a4[k], pv = p4[k], nv = n4[k];
        const float4 gp = {w.w_ap * (pv.x - av.x), w.w_ap * (pv.y - av.y),
                           w.w_ap * (pv.z - av.z), w.w_ap * (pv.w - av.w)};
        const float4 gn = {w.w_an * (av.x - nv.x), w.w_an * (av.y - nv.y),
                           w.w_an * (av.z - nv.z), w.w_an * (av.w - nv.w)};
        gp4[k] = gp;
        gn4[k] = gn;
        ga4[k] = {-(gp.x + gn.x), -(gp.y + gn.y), -(gp.z + gn.z), -(gp.w + gn.w)};
      }
      return;
    }
  }
  for (int64_t j = lane; j < in.dim; j += kWarpSize) {
    const acc_t av = to_acc(a[j * in.anchor_layout.col]);
    const acc_t grad_pj = -w.w_ap * (av - to_acc(p[j * in.positive_layout.col]));
    const acc_t grad_nj = w.w_an * (av - to_acc(n[j * in.negative_layout.col]));
    grad_p[out + j] = from_acc<scalar_t>(grad_pj);
    grad_n[out + j] = from_acc<scalar_t>(grad_nj);
    grad_a[out + j] = from_acc<scalar_t>(-(grad_pj + grad_nj));
  }
}

unsigned int blocks_for(int64_t batch) {
  return static_cast<unsigned int>((batch + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

template <typename scalar_t>
void launch_triplet_forward(const TripletInputs<scalar_t>& in, scalar_t* out,
                            cudaStream_t stream) {
  if (in.batch == 0) {
    return;  // a grid of zero blocks is an invalid launch
  }
  triplet_forward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(in, out);
}

template <typename scalar_t>
void launch_triplet_backward(const TripletInputs<scalar_t>& in, const scalar_t* grad_output,
                             bool per_row, double scale, scalar_t* grad_anchor,
                             scalar_t* grad_positive, scalar_t* grad_negative,
                             cudaStream_t stream) {
  if (in.batch == 0) {
    return;
  }
  triplet_backward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(
      in, grad_output, per_row, scale, grad_anchor, grad_positive, grad_negative);
}

// The dtypes the binding dispatches to.
#define EP_INSTANTIATE(T)                                                                  \
  template void launch_triplet_forward<T>(const TripletInputs<T>&, T*, cudaStream_t);       \
  template void launch_triplet_backward<T>(const TripletInputs<T>&, const T*, bool, double, \
                                           T*, T*, T*, cudaStream_t);
EP_INSTANTIATE(float)
EP_INSTANTIATE(double)
EP_INSTANTIATE(__half)
EP_INSTANTIATE(__nv_bfloat16)
#undef EP_INSTANTIATE

}  // namespace cuda
}  // namespace extending_pytorch
