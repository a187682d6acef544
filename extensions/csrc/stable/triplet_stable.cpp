// The fused triplet hinge loss against the LibTorch stable ABI: the operator
// extending_pytorch_stable::triplet_hinge_loss (and its backward), and the pair
// that autograd uses, which saves each row's squared distances for the
// backward (triplet_hinge_loss_with_distances and its backward), built once
// into an abi3 wheel meant to load on the torch releases from TORCH_TARGET_VERSION
// on (tests/test_stable_abi.py installs it beside torch 2.13 and 2.15).
//
// Same arithmetic as the ATen operator (csrc/triplet.cpp): both include
// triplet_math.h, which includes no torch header. What differs is only what
// surrounds it:
//
//   ATen (triplet.cpp)                 stable ABI (this file)
//   at::Tensor                         torch::stable::Tensor
//   TORCH_LIBRARY / m.impl(fn)         STABLE_TORCH_LIBRARY / m.impl(TORCH_BOX(fn))
//   TORCH_CHECK (c10::Error)           STD_TORCH_CHECK (std::runtime_error)
//   AT_DISPATCH_FLOATING_TYPES_AND2    THO_DISPATCH_SWITCH (header-only)
//   at::parallel_for                   torch::stable::parallel_for (torch >= 2.10)
//   at::vec::Vectorized, -mavx2        plain loops the compiler vectorises
//                                      (#pragma omp simd), one clone per ISA
//                                      picked when the library loads
//   at::opmath_type                    a three-line trait
//   per_triplet.mean() / .sum()        a loop: the stable ops have no mean
//
// The CUDA kernels (triplet_stable_cuda.cpp, in CUDA builds of the wheel) are
// registered on the same operators; both files check their inputs with
// triplet_stable_checks.h.
//
// Only torch/csrc/stable and torch/headeronly are included, and the build
// defines TORCH_TARGET_VERSION, so any use of an API newer than the target
// fails to compile instead of failing to load.
#include <Python.h>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "../triplet_math.h"
#include "triplet_stable_checks.h"

// Makes the shared library importable as extending_pytorch_stable._C. Like
// the ATen package's _C it is empty: importing it runs the registrations
// below. It uses only the limited Python API (Py_LIMITED_API is defined by
// the build), which is what lets one .abi3.so serve CPython 3.10 and later
// (not the free-threaded builds, which do not support the limited API).
extern "C" PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {
      PyModuleDef_HEAD_INIT,
      "_C",
      "Stable-ABI C++ operators of extending_pytorch_stable (registered on import).",
      -1,
      nullptr,
  };
  return PyModule_Create(&module);
}

// Clone the hot loops for AVX2+FMA and for the baseline x86-64 ISA; the
// dynamic loader picks one per CPU (an ifunc), as ATen's CPU_CAPABILITY does.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EP_CLONES
#endif

// AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...) from header-only
// parts: the body is compiled once per dtype with scalar_t set.
#define EP_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                                \
  THO_DISPATCH_SWITCH(TYPE, NAME,                                                 \
                      THO_DISPATCH_CASE(torch::headeronly::ScalarType::Float,    \
                                        __VA_ARGS__)                             \
                      THO_DISPATCH_CASE(torch::headeronly::ScalarType::Double,   \
                                        __VA_ARGS__)                             \
                      THO_DISPATCH_CASE(torch::headeronly::ScalarType::Half,     \
                                        __VA_ARGS__)                             \
                      THO_DISPATCH_CASE(torch::headeronly::ScalarType::BFloat16, \
                                        __VA_ARGS__))

namespace extending_pytorch_stable {
namespace {

using extending_pytorch::TripletParams;
using extending_pytorch::TripletWeights;

// float for half and bfloat16, the dtype itself otherwise (at::opmath_type).
template <typename scalar_t>
struct Acc {
  using type = scalar_t;
};
template <>
struct Acc<torch::headeronly::Half> {
  using type = float;
};
template <>
struct Acc<torch::headeronly::BFloat16> {
  using type = float;
};

// Rows per task: about 32K elements each, as in the ATen operator.
int64_t grain_size(int64_t dim) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1));
}

bool unit_inner_stride(const Tensor& t) { return t.size(1) <= 1 || t.stride(1) == 1; }

// ---- One row ----------------------------------------------------------------
// Without at::vec, a contiguous row is a plain loop; `omp simd reduction` (the
// build passes -fopenmp-simd, no OpenMP runtime) lets the compiler reorder the
// sums into SIMD lanes, which it may not do by itself for floating point.

template <typename scalar_t, typename acc_t>
EP_CLONES void distances_contiguous(const scalar_t* __restrict__ a,
                                    const scalar_t* __restrict__ p,
                                    const scalar_t* __restrict__ n, int64_t dim,
                                    acc_t& d_ap, acc_t& d_an) {
  acc_t sum_p = 0, sum_n = 0;
#pragma omp simd reduction(+ : sum_p, sum_n)
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

template <typename scalar_t, typename acc_t>
void distances_strided(const scalar_t* a, int64_t sa, const scalar_t* p, int64_t sp,
                       const scalar_t* n, int64_t sn, int64_t dim, acc_t& d_ap,
                       acc_t& d_an) {
  acc_t sum_p = 0, sum_n = 0;
  for (int64_t j = 0; j < dim; ++j) {
    const acc_t av = static_cast<acc_t>(a[j * sa]);
    const acc_t dp = av - static_cast<acc_t>(p[j * sp]);
    const acc_t dn = av - static_cast<acc_t>(n[j * sn]);
    sum_p += dp * dp;
    sum_n += dn * dn;
  }
  d_ap = sum_p;
  d_an = sum_n;
}

template <typename scalar_t, typename acc_t>
EP_CLONES void gradients_contiguous(const scalar_t* __restrict__ a,
                                    const scalar_t* __restrict__ p,
                                    const scalar_t* __restrict__ n, int64_t dim,
                                    acc_t w_ap, acc_t w_an, scalar_t* __restrict__ ga,
                                    scalar_t* __restrict__ gp, scalar_t* __restrict__ gn) {
#pragma omp simd
  for (int64_t j = 0; j < dim; ++j) {
    const acc_t av = static_cast<acc_t>(a[j]);
    const acc_t grad_pj = -w_ap * (av - static_cast<acc_t>(p[j]));
    const acc_t grad_nj = w_an * (av - static_cast<acc_t>(n[j]));
    gp[j] = static_cast<scalar_t>(grad_pj);
    gn[j] = static_cast<scalar_t>(grad_nj);
    ga[j] = static_cast<scalar_t>(-(grad_pj + grad_nj));
  }
}

template <typename scalar_t, typename acc_t>
void gradients_strided(const scalar_t* a, int64_t sa, const scalar_t* p, int64_t sp,
                       const scalar_t* n, int64_t sn, int64_t dim, acc_t w_ap, acc_t w_an,
                       scalar_t* ga, scalar_t* gp, scalar_t* gn) {
  for (int64_t j = 0; j < dim; ++j) {
    const acc_t av = static_cast<acc_t>(a[j * sa]);
    const acc_t grad_pj = -w_ap * (av - static_cast<acc_t>(p[j * sp]));
    const acc_t grad_nj = w_an * (av - static_cast<acc_t>(n[j * sn]));
    gp[j] = static_cast<scalar_t>(grad_pj);
    gn[j] = static_cast<scalar_t>(grad_nj);
    ga[j] = static_cast<scalar_t>(-(grad_pj + grad_nj));
  }
}

// One (batch, dim) input as the row loops see it: its data pointer and
// strides, read once per call. Each Tensor method is a call through the C shim
// into libtorch (an exported function, not an inline accessor), so the loops
// must not call them per row.
template <typename scalar_t>
struct Rows {
  const scalar_t* data;
  int64_t row_stride;
  int64_t col_stride;
  const scalar_t* row(int64_t i) const { return data + i * row_stride; }
};

template <typename scalar_t>
Rows<scalar_t> rows_of(const Tensor& t) {
  return {t.const_data_ptr<scalar_t>(), t.stride(0), t.stride(1)};
}

// Both squared distances of row i, any strides; no input is copied.
template <typename scalar_t, typename acc_t>
void row_distances(const Rows<scalar_t>& a, const Rows<scalar_t>& p, const Rows<scalar_t>& n,
                   int64_t i, int64_t dim, bool contiguous_rows, acc_t& d_ap, acc_t& d_an) {
  if (contiguous_rows) {
    distances_contiguous<scalar_t, acc_t>(a.row(i), p.row(i), n.row(i), dim, d_ap, d_an);
  } else {
    distances_strided<scalar_t, acc_t>(a.row(i), a.col_stride, p.row(i), p.col_stride,
                                       n.row(i), n.col_stride, dim, d_ap, d_an);
  }
}

}  // namespace

// ---- The kernels ------------------------------------------------------------
// Two operators and their backwards share two loops. The autograd path of the
// package (ops.py) takes triplet_hinge_loss_with_distances, whose forward also
// keeps each row's two squared distances, (batch, 2) in the accumulation type,
// and triplet_hinge_loss_backward_from_distances, which reads them instead of
// recomputing them: each input row is read once by the forward and once by
// the backward, not twice by the backward. The plain pair serves a forward
// that no backward follows, and callers of the plain operator itself.

namespace {

// The per-triplet losses, reduced; into `distances` (null: not kept) each
// row's (d_ap, d_an), at [2 * i] and [2 * i + 1].
Tensor forward_rows(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                    double t1, double t2, double beta, std::string_view reduction,
                    Tensor* distances) {
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows =
      unit_inner_stride(anchor) && unit_inner_stride(positive) && unit_inner_stride(negative);
  Tensor per_triplet = torch::stable::new_empty(anchor, {batch});
  const bool keep_rows = reduction == "none";
  Tensor result = keep_rows ? per_triplet : torch::stable::new_empty(anchor, {});
  EP_DISPATCH_FLOATING_TYPES(anchor.scalar_type(), "triplet_forward_cpu", [&] {
    using acc_t = typename Acc<scalar_t>::type;
    const Rows<scalar_t> a = rows_of<scalar_t>(anchor);
    const Rows<scalar_t> p = rows_of<scalar_t>(positive);
    const Rows<scalar_t> n = rows_of<scalar_t>(negative);
    scalar_t* out = per_triplet.mutable_data_ptr<scalar_t>();
    acc_t* d = distances != nullptr ? distances->mutable_data_ptr<acc_t>() : nullptr;
    torch::stable::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        acc_t d_ap, d_an;
        row_distances<scalar_t, acc_t>(a, p, n, i, dim, contiguous_rows, d_ap, d_an);
        out[i] = static_cast<scalar_t>(extending_pytorch::triplet_loss<acc_t>(d_ap, d_an, params));
        if (d != nullptr) {
          d[2 * i] = d_ap;
          d[2 * i + 1] = d_an;
        }
      }
    });
    if (!keep_rows) {
      // The stable ops have sum but no mean: reduce here, in double, in order.
      double total = 0;
      for (int64_t i = 0; i < batch; ++i) {
        total += static_cast<double>(static_cast<acc_t>(out[i]));
      }
      if (reduction == "mean") {
        total = batch > 0 ? total / static_cast<double>(batch) : NAN;
      }
      *result.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(total);
    }
  });
  return result;
}

// The three gradients. With `distances` (a contiguous (batch, 2) tensor in the
// accumulation type), each row's weights come from its saved distances and
// the row is read once, for its gradients; without, the row is read twice:
// once to recompute its distances, once for its gradients.
std::tuple<Tensor, Tensor, Tensor> backward_rows(const Tensor& grad_output,
                                                 const Tensor& anchor, const Tensor& positive,
                                                 const Tensor& negative, double t1, double t2,
                                                 double beta, std::string_view reduction,
                                                 const Tensor* distances) {
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  const bool per_row = reduction == "none";
  // Fresh contiguous (B, D) gradients, whatever the inputs' strides.
  Tensor grad_a = torch::stable::new_empty(anchor, {batch, dim});
  Tensor grad_p = torch::stable::new_empty(anchor, {batch, dim});
  Tensor grad_n = torch::stable::new_empty(anchor, {batch, dim});
  const Tensor g = torch::stable::contiguous(grad_output);
  const TripletParams params{t1, t2, beta};
  const bool contiguous_rows =
      unit_inner_stride(anchor) && unit_inner_stride(positive) && unit_inner_stride(negative);
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  EP_DISPATCH_FLOATING_TYPES(anchor.scalar_type(), "triplet_backward_cpu", [&] {
    using acc_t = typename Acc<scalar_t>::type;
    const Rows<scalar_t> a = rows_of<scalar_t>(anchor);
    const Rows<scalar_t> p = rows_of<scalar_t>(positive);
    const Rows<scalar_t> n = rows_of<scalar_t>(negative);
    const acc_t* d = distances != nullptr ? distances->const_data_ptr<acc_t>() : nullptr;
    const scalar_t* g_data = g.const_data_ptr<scalar_t>();
    scalar_t* ga = grad_a.mutable_data_ptr<scalar_t>();
    scalar_t* gp = grad_p.mutable_data_ptr<scalar_t>();
    scalar_t* gn = grad_n.mutable_data_ptr<scalar_t>();
    torch::stable::parallel_for(0, batch, grain_size(dim), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        acc_t d_ap, d_an;
        if (d != nullptr) {
          d_ap = d[2 * i];
          d_an = d[2 * i + 1];
        } else {
          row_distances<scalar_t, acc_t>(a, p, n, i, dim, contiguous_rows, d_ap, d_an);
        }
        const acc_t g_i =
            static_cast<acc_t>(g_data[per_row ? i : 0]) * static_cast<acc_t>(scale);
        const TripletWeights<acc_t> w =
            extending_pytorch::triplet_weights<acc_t>(d_ap, d_an, g_i, params);
        if (contiguous_rows) {
          gradients_contiguous<scalar_t, acc_t>(a.row(i), p.row(i), n.row(i), dim, w.w_ap,
                                                w.w_an, ga + i * dim, gp + i * dim,
                                                gn + i * dim);
        } else {
          gradients_strided<scalar_t, acc_t>(a.row(i), a.col_stride, p.row(i), p.col_stride,
                                             n.row(i), n.col_stride, dim, w.w_ap, w.w_an,
                                             ga + i * dim, gp + i * dim, gn + i * dim);
        }
      }
    });
  });
  return {grad_a, grad_p, grad_n};
}

}  // namespace

Tensor triplet_forward_cpu(const Tensor& anchor, const Tensor& positive,
                           const Tensor& negative, double t1, double t2, double beta,
                           std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CPU);
  return forward_rows(anchor, positive, negative, t1, t2, beta, reduction, nullptr);
}

std::tuple<Tensor, Tensor, Tensor> triplet_backward_cpu(
    const Tensor& grad_output, const Tensor& anchor, const Tensor& positive,
    const Tensor& negative, double t1, double t2, double beta, std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CPU, &grad_output);
  return backward_rows(grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                       nullptr);
}

// The loss and each row's squared distances (d_ap, d_an), (batch, 2) in the
// accumulation type: float32, and float64 for float64 inputs.
std::tuple<Tensor, Tensor> triplet_forward_with_distances_cpu(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative, double t1, double t2,
    double beta, std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CPU);
  Tensor distances = torch::stable::new_empty(anchor, {anchor.size(0), 2},
                                              distance_dtype(anchor.scalar_type()));
  Tensor loss = forward_rows(anchor, positive, negative, t1, t2, beta, reduction, &distances);
  return {loss, distances};
}

// The backward, reading the distances the forward saved: one pass over the rows.
std::tuple<Tensor, Tensor, Tensor> triplet_backward_from_distances_cpu(
    const Tensor& grad_output, const Tensor& anchor, const Tensor& positive,
    const Tensor& negative, const Tensor& distances, double t1, double t2, double beta,
    std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CPU, &grad_output,
               &distances);
  const Tensor d = torch::stable::contiguous(distances);
  return backward_rows(grad_output, anchor, positive, negative, t1, t2, beta, reduction, &d);
}

// ---- Registration -------------------------------------------------------------
// Same schemas as the ATen operator (without its output_mask), in another
// namespace so that both packages can be loaded in one process. TORCH_BOX
// turns each typed kernel into the boxed calling convention (a stack of
// StableIValues) that the stable ABI passes across the library boundary.
STABLE_TORCH_LIBRARY(extending_pytorch_stable, m) {
  m.def(
      "triplet_hinge_loss(Tensor anchor, Tensor positive, Tensor negative, "
      "float t1, float t2, float beta, str reduction=\"mean\") -> Tensor");
  m.def(
      "triplet_hinge_loss_backward(Tensor grad_output, Tensor anchor, "
      "Tensor positive, Tensor negative, float t1, float t2, float beta, "
      "str reduction) -> (Tensor, Tensor, Tensor)");
  // The autograd path: the loss and each row's two squared distances,
  // (batch, 2), and the backward that reads them instead of the rows.
  m.def(
      "triplet_hinge_loss_with_distances(Tensor anchor, Tensor positive, "
      "Tensor negative, float t1, float t2, float beta, str reduction) -> (Tensor, Tensor)");
  m.def(
      "triplet_hinge_loss_backward_from_distances(Tensor grad_output, Tensor anchor, "
      "Tensor positive, Tensor negative, Tensor distances, float t1, float t2, "
      "float beta, str reduction) -> (Tensor, Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(extending_pytorch_stable, CPU, m) {
  m.impl("triplet_hinge_loss", TORCH_BOX(&triplet_forward_cpu));
  m.impl("triplet_hinge_loss_backward", TORCH_BOX(&triplet_backward_cpu));
  m.impl("triplet_hinge_loss_with_distances", TORCH_BOX(&triplet_forward_with_distances_cpu));
  m.impl("triplet_hinge_loss_backward_from_distances",
         TORCH_BOX(&triplet_backward_from_distances_cpu));
}

}  // namespace extending_pytorch_stable
