// The fused triplet hinge loss on the CPU, registered as the operator
// extending_pytorch::triplet_hinge_loss (and its backward) with TORCH_LIBRARY.
//
// One pass over each row computes both squared distances; the backward makes
// one more pass that recomputes them and writes all three gradients. Rows are
// spread over threads with at::parallel_for. Rows with a unit inner stride
// (any row stride, 0 included) take a vectorised path; other layouts a strided
// scalar path, so no input is copied. A third kernel computes the loss and its
// gradients in one pass, for a backward known to follow (grad_in_forward).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "triplet_common.h"
#include "triplet_math.h"

namespace extending_pytorch {
namespace {

// ---- Rows of a (B, D) tensor ----------------------------------------------

// One row of a (B, D) tensor: its first element and the stride between elements.
template <typename scalar_t>
struct Row {
  const scalar_t* data;
  int64_t stride;
  const scalar_t& operator[](int64_t j) const { return data[j * stride]; }
};

template <typename scalar_t>
Row<scalar_t> row(const at::Tensor& t, const scalar_t* base, int64_t i) {
  return {base + i * t.stride(0), t.stride(1)};
}

// A row whose elements are adjacent: the stride is 1 at compile time.
template <typename scalar_t>
struct Row1 {
  const scalar_t* data;
  const scalar_t& operator[](int64_t j) const { return data[j]; }
};

bool unit_inner_stride(const at::Tensor& t) {
  return t.size(1) <= 1 || t.stride(1) == 1;
}

// Rows per task for at::parallel_for: enough work (~32K elements) that
// scheduling costs little, few enough that both cores get work.
int64_t grain_size(int64_t dim) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1));
}

// ---- Squared distances of one row -----------------------------------------

// Squared distances of one row, any element stride, accumulated in acc_t.
template <typename scalar_t, typename acc_t>
void distances_strided(Row<scalar_t> a, Row<scalar_t> p, Row<scalar_t> n,
                       int64_t dim, acc_t& d_ap, acc_t& d_an) {
  acc_t sum_p = 0, sum_n = 0;
  for (int64_t j = 0; j < dim; ++j) {
    const acc_t av = static_cast<acc_t>(a[j]);
    const acc_t dp = av - static_cast<acc_t>(p[j]);
    const acc_t dn = av - static_cast<acc_t>(n[j]);
    sum_p += dp * dp;
    sum_n += dn * dn;
  }
  d_ap = sum_p;
  d_an = sum_n;
}

// Squared distances of one contiguous row, with SIMD registers (float, double).
template <typename scalar_t>
void distances_contiguous(const scalar_t* a, const scalar_t* p, const scalar_t* n,
                          int64_t dim, scalar_t& d_ap, scalar_t& d_an) {
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t width = Vec::size();
  // Two accumulators per distance hide the latency of the fused multiply-adds.
  Vec acc_p0(0), acc_p1(0), acc_n0(0), acc_n1(0);
  int64_t j = 0;
  for (; j + 2 * width <= dim; j += 2 * width) {
    const Vec a0 = Vec::loadu(a + j), a1 = Vec::loadu(a + j + width);
    const Vec dp0 = a0 - Vec::loadu(p + j), dp1 = a1 - Vec::loadu(p + j + width);
    const Vec dn0 = a0 - Vec::loadu(n + j), dn1 = a1 - Vec::loadu(n + j + width);
    acc_p0 = at::vec::fmadd(dp0, dp0, acc_p0);
    acc_p1 = at::vec::fmadd(dp1, dp1, acc_p1);
    acc_n0 = at::vec::fmadd(dn0, dn0, acc_n0);
    acc_n1 = at::vec::fmadd(dn1, dn1, acc_n1);
  }
  scalar_t sum_p = at::vec::vec_reduce_all<scalar_t>(
      [](Vec x, Vec y) { return x + y; }, acc_p0 + acc_p1);
  scalar_t sum_n = at::vec::vec_reduce_all<scalar_t>(
      [](Vec x, Vec y) { return x + y; }, acc_n0 + acc_n1);
  for (; j < dim; ++j) {
    const scalar_t dp = a[j] - p[j];
    const scalar_t dn = a[j] - n[j];
    sum_p += dp * dp;
    sum_n += dn * dn;
  }
  d_ap = sum_p;
  d_an = sum_n;
}


// The dtypes with a SIMD path; half and bfloat16 take the scalar loops.
template <typename scalar_t>
constexpr bool is_vectorised() {
  return std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>;
}

// Both squared distances of row i, taking the vectorised path when it can.
template <typename scalar_t, typename acc_t>
void row_distances(const at::Tensor& anchor, const at::Tensor& positive,
                   const at::Tensor& negative, const scalar_t* a, const scalar_t* p,
                   const scalar_t* n, int64_t i, bool contiguous_rows,
                   acc_t& d_ap, acc_t& d_an) {
  const int64_t dim = anchor.size(1);
  if constexpr (is_vectorised<scalar_t>()) {
    if (contiguous_rows) {
      distances_contiguous<scalar_t>(a + i * anchor.stride(0), p + i * positive.stride(0),
                                     n + i * negative.stride(0), dim, d_ap, d_an);
      return;
    }
  }
  distances_strided<scalar_t, acc_t>(row(anchor, a, i), row(positive, p, i),
                                     row(negative, n, i), dim, d_ap, d_an);
}

// ---- Gradients of one row -------------------------------------------------

// Gradients larger than this (in bytes, all three together) are written with
// streaming stores: about the size of a laptop's last-level cache.
constexpr std::size_t kStreamingThresholdBytes = std::size_t{8} << 20;

// dL/da, dL/dp, dL/dn of one row, from the row's two gradient weights. A null
// output pointer is a gradient nobody asked for: it is not written.
template <typename scalar_t, typename acc_t, typename RowT>
void write_row_gradients(RowT a, RowT p, RowT n, int64_t begin, int64_t dim,
                         TripletWeights<acc_t> w, scalar_t* __restrict__ grad_a,
                         scalar_t* __restrict__ grad_p, scalar_t* __restrict__ grad_n) {
  for (int64_t j = begin; j < dim; ++j) {
    const acc_t av = static_cast<acc_t>(a[j]);
    const acc_t grad_pj = -w.w_ap * (av - static_cast<acc_t>(p[j]));
    const acc_t grad_nj = w.w_an * (av - static_cast<acc_t>(n[j]));
    if (grad_p) grad_p[j] = static_cast<scalar_t>(grad_pj);
    if (grad_n) grad_n[j] = static_cast<scalar_t>(grad_nj);
    if (grad_a) grad_a[j] = static_cast<scalar_t>(-(grad_pj + grad_nj));
  }
}

// Stores one register. A streaming (non-temporal) store writes to memory
// without first reading the destination's cache line, which an ordinary store
// must do: for outputs too large to stay in cache that saves a third of the
// memory traffic. It needs an aligned address and AVX2.
template <typename scalar_t>
void store(const at::vec::Vectorized<scalar_t>& value, scalar_t* ptr, bool streaming) {
#if defined(CPU_CAPABILITY_AVX2)
  if (streaming && reinterpret_cast<std::uintptr_t>(ptr) % 32 == 0) {
    if constexpr (std::is_same_v<scalar_t, float>) {
      _mm256_stream_ps(ptr, value);
      return;
    } else if constexpr (std::is_same_v<scalar_t, double>) {
      _mm256_stream_pd(ptr, value);
      return;
    }
  }
#endif
  (void)streaming;
  value.store(ptr);
}

// Makes streaming stores visible to other threads before the kernel returns.
void finish_streaming_stores() {
#if defined(CPU_CAPABILITY_AVX2)
  _mm_sfence();
#endif
}

// The same for a contiguous float or double row, one SIMD register at a time.
template <typename scalar_t>
void write_row_gradients_contiguous(const scalar_t* a, const scalar_t* p, const scalar_t* n,
                                    int64_t dim, TripletWeights<scalar_t> w,
                                    scalar_t* grad_a, scalar_t* grad_p, scalar_t* grad_n,
                                    bool streaming) {
  using Vec = at::vec::Vectorized<scalar_t>;
  const Vec w_ap(w.w_ap), w_an(w.w_an);
  int64_t j = 0;
  for (; j + Vec::size() <= dim; j += Vec::size()) {
    const Vec av = Vec::loadu(a + j);
    const Vec gp = (Vec::loadu(p + j) - av) * w_ap;  // -w_ap (a - p)
    const Vec gn = (av - Vec::loadu(n + j)) * w_an;  //  w_an (a - n)
    if (grad_p) store(gp, grad_p + j, streaming);
    if (grad_n) store(gn, grad_n + j, streaming);
    if (grad_a) store(Vec(0) - (gp + gn), grad_a + j, streaming);
  }
  write_row_gradients<scalar_t, scalar_t>(Row1<scalar_t>{a}, Row1<scalar_t>{p},
                                          Row1<scalar_t>{n}, j, dim, w, grad_a, grad_p,
                                          grad_n);
}

// All three gradients of row i, taking the vectorised path when it can.
template <typename scalar_t, typename acc_t>
void row_gradients(Row<scalar_t> a, Row<scalar_t> p, Row<scalar_t> n, int64_t dim,
                   TripletWeights<acc_t> w, scalar_t* grad_a, scalar_t* grad_p,
                   scalar_t* grad_n, bool contiguous_rows, bool streaming) {
  if constexpr (is_vectorised<scalar_t>()) {
    if (contiguous_rows) {
      write_row_gradients_contiguous<scalar_t>(a.data, p.data, n.data, dim, w, grad_a,
                                               grad_p, grad_n, streaming);
      return;
    }
  }
  write_row_gradients<scalar_t, acc_t>(a, p, n, 0, dim, w, grad_a, grad_p, grad_n);
}

// A gradient output: a fresh contiguous (B, D) tensor, or undefined if unneeded.
at::Tensor new_gradient(const at::Tensor& anchor, bool needed) {
  return needed ? at::empty({anchor.size(0), anchor.size(1)}, anchor.options()) : at::Tensor();
}

std::size_t gradient_bytes(const at::Tensor& anchor, std::array<bool, 3> output_mask) {
  const std::size_t outputs = output_mask[0] + output_mask[1] + output_mask[2];
  return outputs * anchor.numel() * anchor.element_size();
}

template <typename scalar_t>
scalar_t* output_or_null(at::Tensor& t) {
  return t.defined() ? t.mutable_data_ptr<scalar_t>() : nullptr;
}

template <typename scalar_t>
scalar_t* row_or_null(scalar_t* base, int64_t i, int64_t dim) {
  return base ? base + i * dim : nullptr;
}

}  // namespace

// ---- The kernels -----------------------------------------------------------

at::Tensor triplet_forward_cpu(const at::Tensor& anchor, const at::Tensor& positive,
                               const at::Tensor& negative, double t1, double t2,
                               double beta, c10::string_view reduction) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  const int64_t batch = anchor.size(0);
  at::Tensor per_triplet = at::empty({batch}, anchor.options());
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows = unit_inner_stride(anchor) && unit_inner_stride(positive) &&
                               unit_inner_stride(negative);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;  // float for half and bfloat16
        const scalar_t* a = anchor.const_data_ptr<scalar_t>();
        const scalar_t* p = positive.const_data_ptr<scalar_t>();
        const scalar_t* n = negative.const_data_ptr<scalar_t>();
        scalar_t* out = per_triplet.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, batch, grain_size(anchor.size(1)), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            acc_t d_ap, d_an;
            row_distances<scalar_t, acc_t>(anchor, positive, negative, a, p, n, i,
                                           contiguous_rows, d_ap, d_an);
            out[i] = static_cast<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, params));
          }
        });
      });
  return reduce_losses(per_triplet, reduction);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> triplet_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& anchor, const at::Tensor& positive,
    const at::Tensor& negative, double t1, double t2, double beta,
    c10::string_view reduction, std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  check_grad_output(grad_output, anchor, reduction);
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  // Gradients are fresh contiguous (B, D) tensors, whatever the inputs' strides;
  // one that output_mask says nobody needs stays undefined (None in Python) and
  // is never written: detached negatives, say, save a third of the writes.
  at::Tensor grad_a = new_gradient(anchor, output_mask[0]);
  at::Tensor grad_p = new_gradient(anchor, output_mask[1]);
  at::Tensor grad_n = new_gradient(anchor, output_mask[2]);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) {
    return {grad_a, grad_p, grad_n};
  }
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows = unit_inner_stride(anchor) && unit_inner_stride(positive) &&
                               unit_inner_stride(negative);
  // dL/dloss_i: one value per row for "none"; a scalar, divided by B for "mean".
  const at::Tensor g = grad_output.contiguous();
  const bool per_row = reduction == "none";
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  // Stream the gradients past the caches when they could not stay there anyway.
  const bool streaming = gradient_bytes(anchor, output_mask) > kStreamingThresholdBytes;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_backward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* a = anchor.const_data_ptr<scalar_t>();
        const scalar_t* p = positive.const_data_ptr<scalar_t>();
        const scalar_t* n = negative.const_data_ptr<scalar_t>();
        const scalar_t* g_data = g.const_data_ptr<scalar_t>();
        scalar_t* ga = output_or_null<scalar_t>(grad_a);
        scalar_t* gp = output_or_null<scalar_t>(grad_p);
        scalar_t* gn = output_or_null<scalar_t>(grad_n);
        at::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            acc_t d_ap, d_an;
            row_distances<scalar_t, acc_t>(anchor, positive, negative, a, p, n, i,
                                           contiguous_rows, d_ap, d_an);
            const acc_t g_i = static_cast<acc_t>(g_data[per_row ? i : 0]) *
                              static_cast<acc_t>(scale);
            const TripletWeights<acc_t> w = triplet_weights<acc_t>(d_ap, d_an, g_i, params);
            // A second pass over the row: still in the L1 cache while the three rows
            // fit there (3 D sizeof(scalar_t) bytes).
            const Row<scalar_t> ar = row(anchor, a, i), pr = row(positive, p, i),
                                nr = row(negative, n, i);
            row_gradients<scalar_t, acc_t>(ar, pr, nr, dim, w, row_or_null(ga, i, dim),
                                           row_or_null(gp, i, dim), row_or_null(gn, i, dim),
                                           contiguous_rows, streaming);
          }
          finish_streaming_stores();
        });
      });
  return {grad_a, grad_p, grad_n};
}

// The loss and the gradients in one pass, for a backward that will follow
// (ops.triplet_hinge_loss(..., grad_in_forward=True)). The gradients are
// those of the returned loss, i.e. for grad_output = 1: autograd saves them
// instead of the inputs, and backward returns them as they are when
// grad_output is 1 (scaled otherwise). Traffic: read 3 B D, write 3 B D,
// where a forward and a separate backward move 9 B D. As in the backward,
// output_mask says which gradients to compute; the others are undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> triplet_forward_with_grads_cpu(
    const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative,
    double t1, double t2, double beta, c10::string_view reduction,
    std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  at::Tensor per_triplet = at::empty({batch}, anchor.options());
  at::Tensor grad_a = new_gradient(anchor, output_mask[0]);
  at::Tensor grad_p = new_gradient(anchor, output_mask[1]);
  at::Tensor grad_n = new_gradient(anchor, output_mask[2]);
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows = unit_inner_stride(anchor) && unit_inner_stride(positive) &&
                               unit_inner_stride(negative);
  // dL/dloss_i for grad_output = 1: 1/B for "mean", 1 for "sum" and "none".
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  const bool streaming = gradient_bytes(anchor, output_mask) > kStreamingThresholdBytes;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_with_grads_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* a = anchor.const_data_ptr<scalar_t>();
        const scalar_t* p = positive.const_data_ptr<scalar_t>();
        const scalar_t* n = negative.const_data_ptr<scalar_t>();
        scalar_t* out = per_triplet.mutable_data_ptr<scalar_t>();
        scalar_t* ga = output_or_null<scalar_t>(grad_a);
        scalar_t* gp = output_or_null<scalar_t>(grad_p);
        scalar_t* gn = output_or_null<scalar_t>(grad_n);
        at::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            acc_t d_ap, d_an;
            row_distances<scalar_t, acc_t>(anchor, positive, negative, a, p, n, i,
                                           contiguous_rows, d_ap, d_an);
            out[i] = static_cast<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, params));
            const TripletWeights<acc_t> w =
                triplet_weights<acc_t>(d_ap, d_an, static_cast<acc_t>(scale), params);
            // The row was just read: this second pass finds it in a cache while the
            // three rows fit in one (appendix 91 measures where they stop fitting).
            const Row<scalar_t> ar = row(anchor, a, i), pr = row(positive, p, i),
                                nr = row(negative, n, i);
            row_gradients<scalar_t, acc_t>(ar, pr, nr, dim, w, row_or_null(ga, i, dim),
                                           row_or_null(gp, i, dim), row_or_null(gn, i, dim),
                                           contiguous_rows, streaming);
          }
          finish_streaming_stores();
        });
      });
  return {reduce_losses(per_triplet, reduction), grad_a, grad_p, grad_n};
}

// ---- Fewer bytes on the GPU: saved distances, in-place scaling -------------
// Chapter 5 (section 9) and appendix 91 route CUDA inputs through these; the
// CPU kernels make the operators complete (and their Python side testable
// without a GPU).

// The loss and each row's squared distances (d_ap, d_an), (B, 2) in the
// accumulation type (float; double for double inputs).
std::tuple<at::Tensor, at::Tensor> triplet_forward_with_distances_cpu(
    const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative,
    double t1, double t2, double beta, c10::string_view reduction) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  const int64_t batch = anchor.size(0);
  at::Tensor per_triplet = at::empty({batch}, anchor.options());
  at::Tensor distances =
      at::empty({batch, 2}, anchor.options().dtype(distance_dtype(anchor.scalar_type())));
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows = unit_inner_stride(anchor) && unit_inner_stride(positive) &&
                               unit_inner_stride(negative);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_with_distances_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* a = anchor.const_data_ptr<scalar_t>();
        const scalar_t* p = positive.const_data_ptr<scalar_t>();
        const scalar_t* n = negative.const_data_ptr<scalar_t>();
        scalar_t* out = per_triplet.mutable_data_ptr<scalar_t>();
        acc_t* d = distances.mutable_data_ptr<acc_t>();
        at::parallel_for(0, batch, grain_size(anchor.size(1)), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            acc_t d_ap, d_an;
            row_distances<scalar_t, acc_t>(anchor, positive, negative, a, p, n, i,
                                           contiguous_rows, d_ap, d_an);
            out[i] = static_cast<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, params));
            d[2 * i] = d_ap;
            d[2 * i + 1] = d_an;
          }
        });
      });
  return {reduce_losses(per_triplet, reduction), distances};
}

// triplet_backward_cpu with the distances the forward saved: one pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor> triplet_backward_from_distances_cpu(
    const at::Tensor& grad_output, const at::Tensor& anchor, const at::Tensor& positive,
    const at::Tensor& negative, const at::Tensor& distances, double t1, double t2, double beta,
    c10::string_view reduction, std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  check_grad_output(grad_output, anchor, reduction);
  check_distances(distances, anchor);
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  at::Tensor grad_a = new_gradient(anchor, output_mask[0]);
  at::Tensor grad_p = new_gradient(anchor, output_mask[1]);
  at::Tensor grad_n = new_gradient(anchor, output_mask[2]);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) {
    return {grad_a, grad_p, grad_n};
  }
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows = unit_inner_stride(anchor) && unit_inner_stride(positive) &&
                               unit_inner_stride(negative);
  const at::Tensor g = grad_output.contiguous();
  const bool per_row = reduction == "none";
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  const bool streaming = gradient_bytes(anchor, output_mask) > kStreamingThresholdBytes;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_backward_from_distances_cpu",
      [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* a = anchor.const_data_ptr<scalar_t>();
        const scalar_t* p = positive.const_data_ptr<scalar_t>();
        const scalar_t* n = negative.const_data_ptr<scalar_t>();
        const acc_t* d = distances.const_data_ptr<acc_t>();
        const scalar_t* g_data = g.const_data_ptr<scalar_t>();
        scalar_t* ga = output_or_null<scalar_t>(grad_a);
        scalar_t* gp = output_or_null<scalar_t>(grad_p);
        scalar_t* gn = output_or_null<scalar_t>(grad_n);
        at::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const acc_t g_i = static_cast<acc_t>(g_data[per_row ? i : 0]) *
                              static_cast<acc_t>(scale);
            const TripletWeights<acc_t> w =
                triplet_weights<acc_t>(d[2 * i], d[2 * i + 1], g_i, params);
            row_gradients<scalar_t, acc_t>(row(anchor, a, i), row(positive, p, i),
                                           row(negative, n, i), dim, w,
                                           row_or_null(ga, i, dim), row_or_null(gp, i, dim),
                                           row_or_null(gn, i, dim), contiguous_rows, streaming);
          }
          finish_streaming_stores();
        });
      });
  return {grad_a, grad_p, grad_n};
}

// The saved gradients times grad_output, in place; rows whose grad_output is
// exactly 1 are left as they are (the CUDA kernel decides the same per row).
void triplet_scale_gradients_cpu(const at::Tensor& grad_output,
                                 const std::optional<at::Tensor>& grad_anchor,
                                 const std::optional<at::Tensor>& grad_positive,
                                 const std::optional<at::Tensor>& grad_negative,
                                 c10::string_view reduction) {
  const std::optional<at::Tensor> gradients[] = {grad_anchor, grad_positive, grad_negative};
  check_saved_gradients(grad_output, gradients, reduction);
  const at::Tensor g = grad_output.contiguous();
  for (const auto& gradient : gradients) {
    if (!gradient.has_value() || !gradient->defined()) continue;
    at::Tensor t = *gradient;
    const int64_t batch = t.size(0);
    const int64_t dim = t.size(1);
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, t.scalar_type(), "triplet_scale_gradients_cpu", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          const scalar_t* g_data = g.const_data_ptr<scalar_t>();
          scalar_t* x = t.mutable_data_ptr<scalar_t>();
          const bool per_row = reduction == "none";
          at::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
              const acc_t g_i = static_cast<acc_t>(g_data[per_row ? i : 0]);
              if (g_i == acc_t(1)) continue;
              for (int64_t j = 0; j < dim; ++j) {
                x[i * dim + j] = static_cast<scalar_t>(static_cast<acc_t>(x[i * dim + j]) * g_i);
              }
            }
          });
        });
  }
}

// ---- Registration ----------------------------------------------------------

// The schemas: what Python, autograd and torch.compile see. float is a C++
// double, str a c10::string_view (an alias of std::string_view).
TORCH_LIBRARY(extending_pytorch, m) {
  m.def(
      "triplet_hinge_loss(Tensor anchor, Tensor positive, Tensor negative, "
      "float t1, float t2, float beta, str reduction=\"mean\") -> Tensor");
  // output_mask says which of the three gradients to compute, as in ATen's own
  // backward operators; the others are returned undefined (None in Python).
  m.def(
      "triplet_hinge_loss_backward(Tensor grad_output, Tensor anchor, "
      "Tensor positive, Tensor negative, float t1, float t2, float beta, "
      "str reduction, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // The loss and, in the same pass, its gradients for grad_output = 1 (those
  // in output_mask; the others undefined): ops.py's grad_in_forward=True.
  m.def(
      "triplet_hinge_loss_with_grads(Tensor anchor, Tensor positive, "
      "Tensor negative, float t1, float t2, float beta, str reduction, "
      "bool[3] output_mask) -> (Tensor, Tensor, Tensor, Tensor)");
  // Fewer bytes on the GPU (chapter 5, section 9; appendix 91): the loss and
  // each row's two squared distances, (B, 2), for the backward that reads
  // them instead of recomputing them; and grad_in_forward's backward, which
  // scales the saved gradients in place (rows whose grad_output is 1 are not
  // touched), decided on the device.
  m.def(
      "triplet_hinge_loss_with_distances(Tensor anchor, Tensor positive, "
      "Tensor negative, float t1, float t2, float beta, str reduction) -> (Tensor, Tensor)");
  m.def(
      "triplet_hinge_loss_backward_from_distances(Tensor grad_output, Tensor anchor, "
      "Tensor positive, Tensor negative, Tensor distances, float t1, float t2, "
      "float beta, str reduction, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def(
      "triplet_scale_gradients_(Tensor grad_output, Tensor(a!)? grad_anchor, "
      "Tensor(b!)? grad_positive, Tensor(c!)? grad_negative, str reduction) -> ()");
}

// The CPU kernels; chapter 5 registers CUDA ones for every schema.
TORCH_LIBRARY_IMPL(extending_pytorch, CPU, m) {
  m.impl("triplet_hinge_loss", &triplet_forward_cpu);
  m.impl("triplet_hinge_loss_backward", &triplet_backward_cpu);
  m.impl("triplet_hinge_loss_with_grads", &triplet_forward_with_grads_cpu);
  m.impl("triplet_hinge_loss_with_distances", &triplet_forward_with_distances_cpu);
  m.impl("triplet_hinge_loss_backward_from_distances", &triplet_backward_from_distances_cpu);
  m.impl("triplet_scale_gradients_", &triplet_scale_gradients_cpu);
}

}  // namespace extending_pytorch
