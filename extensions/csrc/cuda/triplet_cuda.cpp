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

// The same schemas as the CPU kernels (triplet.cpp); the dispatcher picks
// these when the inputs are CUDA tensors.
TORCH_LIBRARY_IMPL(extending_pytorch, CUDA, m) {
  m.impl("triplet_hinge_loss", &triplet_forward_cuda);
  m.impl("triplet_hinge_loss_backward", &triplet_backward_cuda);
}

}  // namespace extending_pytorch
