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

// ---- Fewer bytes (chapter 5, section 9; appendix 91) ----

// The type of the saved squared distances: the kernels' accumulation type
// (float, and double for double inputs).
template <typename scalar_t>
struct DistanceType {
  using type = float;
};
template <>
struct DistanceType<double> {
  using type = double;
};

// The forward above, also writing each row's (d_ap, d_an) into
// distances[2 * row], distances[2 * row + 1]: 2 * batch values.
template <typename scalar_t>
void launch_triplet_forward_saving_distances(const TripletInputs<scalar_t>& in, scalar_t* out,
                                             typename DistanceType<scalar_t>::type* distances,
                                             cudaStream_t stream);

// The backward above, reading the saved distances instead of recomputing
// them: each input row is read once.
template <typename scalar_t>
void launch_triplet_backward_from_distances(
    const TripletInputs<scalar_t>& in, const typename DistanceType<scalar_t>::type* distances,
    const scalar_t* grad_output, bool per_row, double scale, scalar_t* grad_anchor,
    scalar_t* grad_positive, scalar_t* grad_negative, cudaStream_t stream);

// Whether the one-pass kernel can take these inputs: unit column strides,
// 16-byte aligned rows, dim a whole number of 16-byte packs and at most
// one_pass_max_dim<scalar_t>() (the rows are held in registers).
template <typename scalar_t>
bool takes_one_pass(const TripletInputs<scalar_t>& in);
template <typename scalar_t>
int64_t one_pass_max_dim();

// Per-triplet losses into out and, in the same pass, the gradients for
// grad_output = 1 (each multiplied by `scale`), contiguous, null where not
// needed. Only for inputs takes_one_pass accepts.
template <typename scalar_t>
void launch_triplet_forward_with_grads(const TripletInputs<scalar_t>& in, double scale,
                                       scalar_t* out, scalar_t* grad_anchor,
                                       scalar_t* grad_positive, scalar_t* grad_negative,
                                       cudaStream_t stream);

// Multiplies contiguous (batch, dim) gradients in place by grad_output (one
// value per row, or one for all); rows whose value is exactly 1 are neither
// read nor written.
template <typename scalar_t>
void launch_triplet_scale_gradients(const scalar_t* grad_output, bool per_row, int64_t batch,
                                    int64_t dim, scalar_t* grad_anchor, scalar_t* grad_positive,
                                    scalar_t* grad_negative, cudaStream_t stream);

}  // namespace cuda
}  // namespace extending_pytorch
