// The CUDA backend of extending_pytorch::involution: checks, device guard,
// current stream and dtype dispatch around the kernels of involution.cu.
// Compiled only when torch has CUDA (setup.py and native.load_jit decide).
//
// What replaced the original autograd.Function's plumbing:
//   load_kernel(name, source string, ...)  -> kernels compiled by nvcc at build time
//   assert input.is_cuda                   -> TORCH_CHECKs (involution_common.h) and
//                                             the dispatcher, which only calls this
//                                             file's functions for CUDA tensors
//   input.new(...)                         -> at::empty(..., input.options())
//   Stream(ptr=current_stream().cuda_stream) -> c10::cuda::getCurrentCUDAStream()
//   with torch.cuda.device_of(input)       -> c10::cuda::CUDAGuard
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "cuda_types.h"
#include "../involution_common.h"
#include "involution_kernels.h"

namespace extending_pytorch {
namespace {


template <typename scalar_t>
const typename CudaType<scalar_t>::type* in_ptr(const at::Tensor& t) {
  return reinterpret_cast<const typename CudaType<scalar_t>::type*>(
      t.const_data_ptr<scalar_t>());
}
template <typename scalar_t>
typename CudaType<scalar_t>::type* out_ptr(at::Tensor& t) {
  return reinterpret_cast<typename CudaType<scalar_t>::type*>(t.mutable_data_ptr<scalar_t>());
}

}  // namespace

at::Tensor involution_forward_cuda(const at::Tensor& input_, const at::Tensor& weight_,
                                   at::IntArrayRef stride, at::IntArrayRef padding,
                                   at::IntArrayRef dilation) {
  const InvolutionShape s =
      check_involution_inputs("involution", input_, weight_, stride, padding, dilation);
  // Launch on input's GPU, on the stream PyTorch is using there.
  const c10::cuda::CUDAGuard guard(input_.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // The kernels index dense arrays (see involution.cpp for why).
  const at::Tensor input = input_.contiguous();
  const at::Tensor weight = weight_.contiguous();
  at::Tensor output = at::empty({s.batch, s.channels, s.out_h, s.out_w}, input.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "involution_forward_cuda", [&] {
        cuda::launch_involution_forward(s, in_ptr<scalar_t>(input), in_ptr<scalar_t>(weight),
                                        out_ptr<scalar_t>(output), stream);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return output;
}

std::tuple<at::Tensor, at::Tensor> involution_backward_cuda(
    const at::Tensor& grad_output_, const at::Tensor& input_, const at::Tensor& weight_,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
    std::array<bool, 2> output_mask) {
  const InvolutionShape s = check_involution_inputs("involution_backward", input_, weight_,
                                                    stride, padding, dilation);
  check_involution_grad_output("involution_backward", grad_output_, input_, s);
  const c10::cuda::CUDAGuard guard(input_.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor grad_output = grad_output_.contiguous();
  at::Tensor grad_input, grad_weight;  // undefined (None) unless asked for
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input_.scalar_type(), "involution_backward_cuda", [&] {
        if (output_mask[0]) {
          const at::Tensor weight = weight_.contiguous();
          grad_input = at::empty({s.batch, s.channels, s.height, s.width}, input_.options());
          cuda::launch_involution_grad_input(s, in_ptr<scalar_t>(grad_output),
                                             in_ptr<scalar_t>(weight),
                                             out_ptr<scalar_t>(grad_input), stream);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        if (output_mask[1]) {
          const at::Tensor input = input_.contiguous();
          grad_weight = at::empty({s.batch, s.groups, s.kernel_h, s.kernel_w, s.out_h, s.out_w},
                                  input_.options());
          cuda::launch_involution_grad_weight(s, in_ptr<scalar_t>(grad_output),
                                              in_ptr<scalar_t>(input),
                                              out_ptr<scalar_t>(grad_weight), stream);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
      });
  return {grad_input, grad_weight};
}

// The same schemas as the CPU kernels (involution.cpp); the dispatcher picks
// these when the inputs are CUDA tensors.
TORCH_LIBRARY_IMPL(extending_pytorch, CUDA, m) {
  m.impl("involution", &involution_forward_cuda);
  m.impl("involution_backward", &involution_backward_cuda);
}

}  // namespace extending_pytorch
