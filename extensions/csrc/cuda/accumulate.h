// Accumulation types and explicit conversions for the kernels (.cu files), shared by
// triplet.cu and involution.cu. Torch-free: only CUDA's half types.
//
// Sums are kept in float for float, half and bfloat16, and in double for double.
// The conversions are explicit because torch compiles CUDA code with the implicit
// half conversions disabled (-D__CUDA_NO_HALF_CONVERSIONS__ and friends).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace extending_pytorch {
namespace cuda {

template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

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

}  // namespace cuda
}  // namespace extending_pytorch
