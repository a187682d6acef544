// The CUDA kernels of extending_pytorch_stable::triplet_hinge_loss, through
// the stable ABI. The kernels themselves are chapter 5's (csrc/cuda/triplet.cu,
// compiled into this wheel from the same file); this is the stable-ABI
// counterpart of csrc/cuda/triplet_cuda.cpp, the ATen binding:
//
//   ATen (cuda/triplet_cuda.cpp)          stable ABI (this file)
//   c10::cuda::CUDAGuard                  torch::stable::accelerator::DeviceGuard
//   c10::cuda::getCurrentCUDAStream()     torch::stable::accelerator::getCurrentStream(i)
//                                         .nativeHandle()   (torch >= 2.13)
//   at::empty(..., anchor.options())      torch::stable::new_empty(anchor, ...)
//   C10_CUDA_KERNEL_LAUNCH_CHECK()        cudaGetLastError() + STD_TORCH_CHECK
//   per_triplet.mean() / .sum()           aten::mean / aten::sum through the
//                                         stable dispatcher call
//
// Compiled by the C++ compiler, not nvcc: it launches nothing itself, it calls
// the launch functions of triplet_kernels.h, which take plain pointers and a
// cudaStream_t. It needs the CUDA runtime's headers, not torch's CUDA headers,
// and the library links the CUDA runtime statically (setup.py): it then needs
// neither libtorch_cuda nor libcudart at load time, so the same wheel loads
// into a CPU-only torch, where these kernels are registered but never called.
#include <cuda_runtime_api.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/stableivalue_conversions.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "../cuda/triplet_kernels.h"
#include "triplet_stable_checks.h"

namespace extending_pytorch_stable {
namespace {

namespace kernels = extending_pytorch::cuda;

// torch's 16-bit types and CUDA's have the same bits (cuda/cuda_types.h does
// the same for at::Half): a pointer to one is read as a pointer to the other.
template <typename T>
struct CudaType {
  using type = T;
};
template <>
struct CudaType<torch::headeronly::Half> {
  using type = __half;
};
template <>
struct CudaType<torch::headeronly::BFloat16> {
  using type = __nv_bfloat16;
};
static_assert(sizeof(torch::headeronly::Half) == sizeof(__half) &&
                  sizeof(torch::headeronly::BFloat16) == sizeof(__nv_bfloat16),
              "torch's and CUDA's 16-bit types must have the same size");

template <typename scalar_t>
kernels::TripletInputs<typename CudaType<scalar_t>::type> kernel_inputs(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative,
    extending_pytorch::TripletParams params) {
  using cuda_t = typename CudaType<scalar_t>::type;
  const auto pointer = [](const Tensor& t) {
    return reinterpret_cast<const cuda_t*>(t.const_data_ptr<scalar_t>());
  };
  const auto layout = [](const Tensor& t) { return kernels::Layout{t.stride(0), t.stride(1)}; };
  return {pointer(anchor), pointer(positive), pointer(negative), layout(anchor),
          layout(positive), layout(negative), anchor.size(0), anchor.size(1), params};
}

// The stream PyTorch is using on anchor's GPU (the caller holds a guard for
// that GPU). getCurrentStream is the device-generic stable API; the CUDA
// stream is its native handle.
cudaStream_t current_stream(const Tensor& anchor) {
  return static_cast<cudaStream_t>(
      torch::stable::accelerator::getCurrentStream(anchor.get_device_index()).nativeHandle());
}

// An error of the launch itself (bad configuration, no kernel image for this
// GPU); errors inside the kernel surface at the next synchronising call.
void check_launch(const char* op) {
  const cudaError_t error = cudaGetLastError();
  STD_TORCH_CHECK(error == cudaSuccess, op, ": CUDA kernel launch failed: ",
                  cudaGetErrorString(error));
}

// aten::mean has no function in torch/csrc/stable/ops.h: call it through the
// dispatcher, as ops.h does for the operators it wraps.
Tensor mean(const Tensor& values) {
  std::array<StableIValue, 2> stack{
      torch::stable::detail::from(values),
      torch::stable::detail::from(std::optional<torch::headeronly::ScalarType>())};
  STABLE_TORCH_ERROR_CODE_CHECK(
      torch_call_dispatcher("aten::mean", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

// The forward's result: the per-triplet losses, or their sum or mean.
Tensor reduce(const Tensor& per_triplet, std::string_view reduction) {
  if (reduction == "none") {
    return per_triplet;
  }
  return reduction == "sum" ? torch::stable::sum(per_triplet) : mean(per_triplet);
}

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

// The three gradients, in one launch. With `distances` (the forward's
// contiguous (batch, 2) tensor in the accumulation type), each row's weights
// come from its saved distances and the row is read once; without, the kernel
// reads the row twice: once to recompute its distances, once for its
// gradients. Fresh contiguous gradients from PyTorch's CUDA allocator start
// 512-byte aligned, which the kernels' 16-byte stores need (they check it and
// fall back to element stores otherwise).
std::tuple<Tensor, Tensor, Tensor> backward_rows(const Tensor& grad_output,
                                                 const Tensor& anchor, const Tensor& positive,
                                                 const Tensor& negative, double t1, double t2,
                                                 double beta, std::string_view reduction,
                                                 const Tensor* distances) {
  const torch::stable::accelerator::DeviceGuard guard(anchor.get_device_index());
  const cudaStream_t stream = current_stream(anchor);
  const int64_t batch = anchor.size(0);
  const int64_t dim = anchor.size(1);
  Tensor grad_a = torch::stable::new_empty(anchor, {batch, dim});
  Tensor grad_p = torch::stable::new_empty(anchor, {batch, dim});
  Tensor grad_n = torch::stable::new_empty(anchor, {batch, dim});
  const Tensor g = torch::stable::contiguous(grad_output);
  const bool per_row = reduction == "none";
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  EP_DISPATCH_FLOATING_TYPES(anchor.scalar_type(), "triplet_backward_cuda", [&] {
    using cuda_t = typename CudaType<scalar_t>::type;
    using distance_t = typename kernels::DistanceType<cuda_t>::type;
    const auto inputs = kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta});
    const auto* g_data = reinterpret_cast<const cuda_t*>(g.const_data_ptr<scalar_t>());
    const auto out = [](Tensor& t) {
      return reinterpret_cast<cuda_t*>(t.mutable_data_ptr<scalar_t>());
    };
    if (distances != nullptr) {
      kernels::launch_triplet_backward_from_distances<cuda_t>(
          inputs, distances->const_data_ptr<distance_t>(), g_data, per_row, scale,
          out(grad_a), out(grad_p), out(grad_n), stream);
      check_launch("triplet_hinge_loss_backward_from_distances");
    } else {
      kernels::launch_triplet_backward<cuda_t>(inputs, g_data, per_row, scale, out(grad_a),
                                               out(grad_p), out(grad_n), stream);
      check_launch("triplet_hinge_loss_backward");
    }
  });
  return {grad_a, grad_p, grad_n};
}

}  // namespace

Tensor triplet_forward_cuda(const Tensor& anchor, const Tensor& positive,
                            const Tensor& negative, double t1, double t2, double beta,
                            std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CUDA);
  const torch::stable::accelerator::DeviceGuard guard(anchor.get_device_index());
  const cudaStream_t stream = current_stream(anchor);
  Tensor per_triplet = torch::stable::new_empty(anchor, {anchor.size(0)});
  EP_DISPATCH_FLOATING_TYPES(anchor.scalar_type(), "triplet_forward_cuda", [&] {
    using cuda_t = typename CudaType<scalar_t>::type;
    kernels::launch_triplet_forward<cuda_t>(
        kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
        reinterpret_cast<cuda_t*>(per_triplet.mutable_data_ptr<scalar_t>()), stream);
    check_launch("triplet_hinge_loss");
  });
  return reduce(per_triplet, reduction);
}

std::tuple<Tensor, Tensor, Tensor> triplet_backward_cuda(
    const Tensor& grad_output, const Tensor& anchor, const Tensor& positive,
    const Tensor& negative, double t1, double t2, double beta, std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CUDA, &grad_output);
  return backward_rows(grad_output, anchor, positive, negative, t1, t2, beta, reduction,
                       nullptr);
}

// The autograd path (ops.py): the forward also writes each row's two squared
// distances, (batch, 2) in the accumulation type, and the backward reads them
// instead of the rows: a training step reads 3N bytes in the forward and 3N in
// the backward, and writes 3N (N = batch * dim * element size), not 12N. The
// same launch functions as the ATen operator's (cuda/triplet_cuda.cpp), whose
// bytes tests/test_traffic.py counts in the SIMT emulator.
std::tuple<Tensor, Tensor> triplet_forward_with_distances_cuda(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative, double t1, double t2,
    double beta, std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CUDA);
  const torch::stable::accelerator::DeviceGuard guard(anchor.get_device_index());
  const cudaStream_t stream = current_stream(anchor);
  Tensor per_triplet = torch::stable::new_empty(anchor, {anchor.size(0)});
  Tensor distances = torch::stable::new_empty(anchor, {anchor.size(0), 2},
                                              distance_dtype(anchor.scalar_type()));
  EP_DISPATCH_FLOATING_TYPES(anchor.scalar_type(), "triplet_forward_with_distances_cuda", [&] {
    using cuda_t = typename CudaType<scalar_t>::type;
    using distance_t = typename kernels::DistanceType<cuda_t>::type;
    kernels::launch_triplet_forward_saving_distances<cuda_t>(
        kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
        reinterpret_cast<cuda_t*>(per_triplet.mutable_data_ptr<scalar_t>()),
        distances.mutable_data_ptr<distance_t>(), stream);
    check_launch("triplet_hinge_loss_with_distances");
  });
  return {reduce(per_triplet, reduction), distances};
}

// The backward, reading the distances the forward saved: one pass over the rows.
std::tuple<Tensor, Tensor, Tensor> triplet_backward_from_distances_cuda(
    const Tensor& grad_output, const Tensor& anchor, const Tensor& positive,
    const Tensor& negative, const Tensor& distances, double t1, double t2, double beta,
    std::string_view reduction) {
  check_inputs(anchor, positive, negative, t1, t2, beta, reduction, Backend::CUDA, &grad_output,
               &distances);
  const Tensor d = torch::stable::contiguous(distances);  // the forward's own: no copy
  return backward_rows(grad_output, anchor, positive, negative, t1, t2, beta, reduction, &d);
}

// The schemas are defined once, in triplet_stable.cpp; the dispatcher picks
// these kernels when the inputs are CUDA tensors.
STABLE_TORCH_LIBRARY_IMPL(extending_pytorch_stable, CUDA, m) {
  m.impl("triplet_hinge_loss", TORCH_BOX(&triplet_forward_cuda));
  m.impl("triplet_hinge_loss_backward", TORCH_BOX(&triplet_backward_cuda));
  m.impl("triplet_hinge_loss_with_distances", TORCH_BOX(&triplet_forward_with_distances_cuda));
  m.impl("triplet_hinge_loss_backward_from_distances",
         TORCH_BOX(&triplet_backward_from_distances_cuda));
}

}  // namespace extending_pytorch_stable
