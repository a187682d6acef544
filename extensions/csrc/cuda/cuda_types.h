// For the bindings (*_cuda.cpp): torch's 16-bit types and CUDA's have the same
// bits, so a pointer to one can be reinterpreted as a pointer to the other.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace extending_pytorch {

template <typename T>
struct CudaType {
  using type = T;
};
template <>
struct CudaType<at::Half> {
  using type = __half;
};
template <>
struct CudaType<at::BFloat16> {
  using type = __nv_bfloat16;
};

static_assert(sizeof(at::Half) == sizeof(__half) && sizeof(at::BFloat16) == sizeof(__nv_bfloat16),
              "torch's and CUDA's 16-bit types must have the same size");

}  // namespace extending_pytorch
