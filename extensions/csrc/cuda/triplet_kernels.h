// The CUDA kernels of the triplet hinge loss, as seen by their callers.
//
// This header and triplet.cu include no torch header: only the CUDA runtime
// and the shared arithmetic. They deal in plain pointers, sizes, strides and a
// cudaStream_t, so nvcc compiles them anywhere, also where only a CPU build of
// torch is installed. triplet_cuda.cpp is the thin torch-facing layer on top.
#pragma once

#include <cuda_bf16.h>  // __nv_bfloat16: the kernels are instantiated for it
#include <cuda_fp16.h>  // __half, likewise
#include <cuda_runtime.h>

#include <cstdint>

#include "../triplet_math.h"

namespace extending_pytorch {
namespace cuda {

// Where element (i, j) of a (batch, dim) input lives: data[i * row + j * col].
struct Layout {
  int64_t row;
  int64_t col;
};

template <typename scalar_t>
struct TripletInputs {
  const scalar_t* anchor;
  const scalar_t* positive;
  const scalar_t* negative;
  Layout anchor_layout, positive_layout, negative_layout;
  int64_t batch;
  int64_t dim;
  TripletParams params;
};

// Per-triplet losses into out[0..batch), on `stream`.
template <typename scalar_t>
void launch_triplet_forward(const TripletInputs<scalar_t>& in, scalar_t* out,
                            cudaStream_t stream);

// The three gradients, each a contiguous (batch, dim) array, or null for a
// gradient that is not needed (it is then not written). grad_output holds one
// value per row (per_row) or a single value; every value is multiplied by
// `scale` (1 / batch for a mean).
template <typename scalar_t>
void launch_triplet_backward(const TripletInputs<scalar_t>& in, const scalar_t* grad_output,
                             bool per_row, double scale, scalar_t* grad_anchor,
                             scalar_t* grad_positive, scalar_t* grad_negative,
                             cudaStream_t stream);

}  // namespace cuda
}  // namespace extending_pytorch
