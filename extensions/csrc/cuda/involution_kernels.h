// The CUDA kernels of involution, as seen by their callers.
//
// Like triplet_kernels.h, this header and involution.cu include no torch
// header: plain pointers to dense arrays, the shape of the computation and a
// cudaStream_t. nvcc compiles them anywhere, also where only a CPU build of
// torch is installed; involution_cuda.cpp is the torch-facing layer on top.
#pragma once

#include <cuda_bf16.h>  // __nv_bfloat16: the kernels are instantiated for it
#include <cuda_fp16.h>  // __half, likewise
#include <cuda_runtime.h>

#include "../involution_math.h"

namespace extending_pytorch {
namespace cuda {

// out (B, C, Ho, Wo) from input (B, C, H, W) and weight (B, G, Kh, Kw, Ho, Wo).
template <typename scalar_t>
void launch_involution_forward(const InvolutionShape& shape, const scalar_t* input,
                               const scalar_t* weight, scalar_t* output,
                               cudaStream_t stream);

// dL/dinput (B, C, H, W) from grad_output (B, C, Ho, Wo) and the weight.
template <typename scalar_t>
void launch_involution_grad_input(const InvolutionShape& shape, const scalar_t* grad_output,
                                  const scalar_t* weight, scalar_t* grad_input,
                                  cudaStream_t stream);

// dL/dweight (B, G, Kh, Kw, Ho, Wo) from grad_output and the input.
template <typename scalar_t>
void launch_involution_grad_weight(const InvolutionShape& shape, const scalar_t* grad_output,
                                   const scalar_t* input, scalar_t* grad_weight,
                                   cudaStream_t stream);

}  // namespace cuda
}  // namespace extending_pytorch
