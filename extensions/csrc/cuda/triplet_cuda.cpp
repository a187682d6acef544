// The CUDA backend of extending_pytorch::triplet_hinge_loss: checks, device
// guard, current stream and dtype dispatch around the kernels of triplet.cu.
// Compiled only when torch has CUDA (setup.py and native.load_jit decide).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <string_view>
#include <tuple>

#include "cuda_types.h"
#include "../triplet_common.h"
#include "triplet_kernels.h"

namespace extending_pytorch {
namespace {


cuda::Layout layout(const at::Tensor& t) { return {t.stride(0), t.stride(1)}; }

template <typename scalar_t>
cuda::TripletInputs<typename CudaType<scalar_t>::type> kernel_inputs(
    const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative,
    TripletParams params) {
  using cuda_t = typename CudaType<scalar_t>::type;
  const auto pointer = [](const at::Tensor& t) {
    return reinterpret_cast<const cuda_t*>(t.const_data_ptr<scalar_t>());
  };
  return {pointer(anchor),   pointer(positive),    pointer(negative),
          layout(anchor),    layout(positive),     layout(negative),
          anchor.size(0),    anchor.size(1),       params};
}

}  // namespace

at::Tensor triplet_forward_cuda(const at::Tensor& anchor, const at::Tensor& positive,
                                const at::Tensor& negative, double t1, double t2,
                                double beta, c10::string_view reduction) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  // Launch on anchor's GPU, on the stream PyTorch is using there.
  const c10::cuda::CUDAGuard guard(anchor.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor per_triplet = at::empty({anchor.size(0)}, anchor.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_cuda", [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        cuda::launch_triplet_forward<cuda_t>(
            kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
            reinterpret_cast<cuda_t*>(per_triplet.mutable_data_ptr<scalar_t>()), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return reduce_losses(per_triplet, reduction);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> triplet_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& anchor, const at::Tensor& positive,
    const at::Tensor& negative, double t1, double t2, double beta,
    c10::string_view reduction, std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  check_grad_output(grad_output, anchor, reduction);
  const c10::cuda::CUDAGuard guard(anchor.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t batch = anchor.size(0);
  // Only the gradients output_mask asks for are allocated and written; the
  // others stay undefined (None in Python). Fresh tensors from PyTorch's CUDA
  // allocator start 512-byte aligned, which the kernels' 16-byte stores need
  // (the kernels check it and fall back to element stores otherwise).
  const auto gradient = [&](bool needed) {
    return needed ? at::empty({batch, anchor.size(1)}, anchor.options()) : at::Tensor();
  };
  at::Tensor grad_a = gradient(output_mask[0]);
  at::Tensor grad_p = gradient(output_mask[1]);
  at::Tensor grad_n = gradient(output_mask[2]);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) {
    return {grad_a, grad_p, grad_n};
  }
  const at::Tensor g = grad_output.contiguous();
  const bool per_row = reduction == "none";
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_backward_cuda", [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        const auto out = [](at::Tensor& t) {
          return t.defined() ? reinterpret_cast<cuda_t*>(t.mutable_data_ptr<scalar_t>())
                             : nullptr;
        };
        cuda::launch_triplet_backward<cuda_t>(
            kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
            reinterpret_cast<const cuda_t*>(g.const_data_ptr<scalar_t>()), per_row, scale,
            out(grad_a), out(grad_p), out(grad_n), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {grad_a, grad_p, grad_n};
}

// ---- Fewer bytes (chapter 5, section 9; appendix 91) ----

// The loss and each row's two squared distances, (batch, 2) in the
// accumulation type, for a backward that reads each row once.
std::tuple<at::Tensor, at::Tensor> triplet_forward_with_distances_cuda(
    const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative,
    double t1, double t2, double beta, c10::string_view reduction) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  const c10::cuda::CUDAGuard guard(anchor.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor per_triplet = at::empty({anchor.size(0)}, anchor.options());
  at::Tensor distances = at::empty({anchor.size(0), 2},
                                   anchor.options().dtype(distance_dtype(anchor.scalar_type())));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_with_distances_cuda", [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        using distance_t = typename cuda::DistanceType<cuda_t>::type;
        cuda::launch_triplet_forward_saving_distances<cuda_t>(
            kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
            reinterpret_cast<cuda_t*>(per_triplet.mutable_data_ptr<scalar_t>()),
            distances.mutable_data_ptr<distance_t>(), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {reduce_losses(per_triplet, reduction), distances};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> triplet_backward_from_distances_cuda(
    const at::Tensor& grad_output, const at::Tensor& anchor, const at::Tensor& positive,
    const at::Tensor& negative, const at::Tensor& distances, double t1, double t2, double beta,
    c10::string_view reduction, std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  check_grad_output(grad_output, anchor, reduction);
  check_distances(distances, anchor);
  const c10::cuda::CUDAGuard guard(anchor.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t batch = anchor.size(0);
  const auto gradient = [&](bool needed) {
    return needed ? at::empty({batch, anchor.size(1)}, anchor.options()) : at::Tensor();
  };
  at::Tensor grad_a = gradient(output_mask[0]);
  at::Tensor grad_p = gradient(output_mask[1]);
  at::Tensor grad_n = gradient(output_mask[2]);
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) {
    return {grad_a, grad_p, grad_n};
  }
  const at::Tensor g = grad_output.contiguous();
  const bool per_row = reduction == "none";
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_backward_from_distances_cuda",
      [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        using distance_t = typename cuda::DistanceType<cuda_t>::type;
        const auto out = [](at::Tensor& t) {
          return t.defined() ? reinterpret_cast<cuda_t*>(t.mutable_data_ptr<scalar_t>())
                             : nullptr;
        };
        cuda::launch_triplet_backward_from_distances<cuda_t>(
            kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta}),
            distances.const_data_ptr<distance_t>(),
            reinterpret_cast<const cuda_t*>(g.const_data_ptr<scalar_t>()), per_row, scale,
            out(grad_a), out(grad_p), out(grad_n), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {grad_a, grad_p, grad_n};
}

// The loss and its gradients for grad_output = 1 (those in output_mask), for
// a backward known to follow: one pass, 3N read and 3N written, where the
// rows fit the one-pass kernel (cuda::takes_one_pass); otherwise the forward
// saving the distances and the backward reading them, 9N.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> triplet_forward_with_grads_cuda(
    const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative,
    double t1, double t2, double beta, c10::string_view reduction,
    std::array<bool, 3> output_mask) {
  check_triplet_inputs(anchor, positive, negative, t1, t2, beta, reduction);
  const c10::cuda::CUDAGuard guard(anchor.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t batch = anchor.size(0);
  const auto gradient = [&](bool needed) {
    return needed ? at::empty({batch, anchor.size(1)}, anchor.options()) : at::Tensor();
  };
  at::Tensor grad_a = gradient(output_mask[0]);
  at::Tensor grad_p = gradient(output_mask[1]);
  at::Tensor grad_n = gradient(output_mask[2]);
  at::Tensor per_triplet = at::empty({batch}, anchor.options());
  const double scale = reduction == "mean" && batch > 0 ? 1.0 / batch : 1.0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, anchor.scalar_type(), "triplet_forward_with_grads_cuda", [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        using distance_t = typename cuda::DistanceType<cuda_t>::type;
        const auto out = [](at::Tensor& t) {
          return t.defined() ? reinterpret_cast<cuda_t*>(t.mutable_data_ptr<scalar_t>())
                             : nullptr;
        };
        const auto in = kernel_inputs<scalar_t>(anchor, positive, negative, {t1, t2, beta});
        cuda_t* losses = reinterpret_cast<cuda_t*>(per_triplet.mutable_data_ptr<scalar_t>());
        if (cuda::takes_one_pass<cuda_t>(in)) {
          cuda::launch_triplet_forward_with_grads<cuda_t>(in, scale, losses, out(grad_a),
                                                          out(grad_p), out(grad_n), stream);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
        at::Tensor distances = at::empty(
            {batch, 2}, anchor.options().dtype(distance_dtype(anchor.scalar_type())));
        cuda::launch_triplet_forward_saving_distances<cuda_t>(
            in, losses, distances.mutable_data_ptr<distance_t>(), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        const at::Tensor one = at::ones({}, anchor.options());
        cuda::launch_triplet_backward_from_distances<cuda_t>(
            in, distances.const_data_ptr<distance_t>(),
            reinterpret_cast<const cuda_t*>(one.const_data_ptr<scalar_t>()), false, scale,
            out(grad_a), out(grad_p), out(grad_n), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {reduce_losses(per_triplet, reduction), grad_a, grad_p, grad_n};
}

// grad_in_forward's backward on the GPU: the saved gradients times
// grad_output, in place, decided on the device (no synchronisation, so CUDA
// graphs can capture it): rows whose grad_output is exactly 1 are not touched.
void triplet_scale_gradients_cuda(const at::Tensor& grad_output,
                                  const std::optional<at::Tensor>& grad_anchor,
                                  const std::optional<at::Tensor>& grad_positive,
                                  const std::optional<at::Tensor>& grad_negative,
                                  c10::string_view reduction) {
  const std::optional<at::Tensor> gradients[] = {grad_anchor, grad_positive, grad_negative};
  check_saved_gradients(grad_output, gradients, reduction);
  const at::Tensor* first = nullptr;
  for (const auto& g : gradients) {
    if (g.has_value() && g->defined()) {
      first = &*g;
      break;
    }
  }
  if (first == nullptr) {
    return;
  }
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor g = grad_output.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, g.scalar_type(), "triplet_scale_gradients_cuda", [&] {
        using cuda_t = typename CudaType<scalar_t>::type;
        const auto data = [](const std::optional<at::Tensor>& t) {
          return t.has_value() && t->defined()
                     ? reinterpret_cast<cuda_t*>(t->mutable_data_ptr<scalar_t>())
                     : nullptr;
        };
        cuda::launch_triplet_scale_gradients<cuda_t>(
            reinterpret_cast<const cuda_t*>(g.const_data_ptr<scalar_t>()), reduction == "none",
            first->size(0), first->size(1), data(grad_anchor), data(grad_positive),
            data(grad_negative), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

// The same schemas as the CPU kernels (triplet.cpp); the dispatcher picks
// these when the inputs are CUDA tensors.
TORCH_LIBRARY_IMPL(extending_pytorch, CUDA, m) {
  m.impl("triplet_hinge_loss", &triplet_forward_cuda);
  m.impl("triplet_hinge_loss_backward", &triplet_backward_cuda);
  m.impl("triplet_hinge_loss_with_distances", &triplet_forward_with_distances_cuda);
  m.impl("triplet_hinge_loss_backward_from_distances", &triplet_backward_from_distances_cuda);
  m.impl("triplet_hinge_loss_with_grads", &triplet_forward_with_grads_cuda);
  m.impl("triplet_scale_gradients_", &triplet_scale_gradients_cuda);
}

}  // namespace extending_pytorch
