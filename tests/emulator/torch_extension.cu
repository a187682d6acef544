// A PyTorch extension's CUDA file in the shape of pytorch/extension-cpp's muladd.cu (written
// for these tests): torch's headers, the current CUDA stream, a kernel launched with <<<>>>
// from host functions on at::Tensor (one returns its result, one writes an out tensor),
// launch checks, and a TORCH_LIBRARY_IMPL for the CUDA key. The emulator builds it
// unchanged; Python launches its kernel, and calls its host functions through the CPU shim
// (module.host).
#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace scale_shift_ext {

__global__ void scale_shift_kernel(int numel, const float* x, float scale, float shift, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < numel) out[i] = x[i] * scale + shift;
}

at::Tensor scale_shift_cuda(const at::Tensor& x, double scale, double shift) {
  TORCH_CHECK(x.dtype() == at::kFloat, "x must be float32, got ", x.dtype());
  TORCH_INTERNAL_ASSERT(x.device().type() == at::DeviceType::CUDA);
  const at::Tensor x_contig = x.contiguous();
  at::Tensor out = at::empty(x_contig.sizes(), x_contig.options());
  const int numel = static_cast<int>(x_contig.numel());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  scale_shift_kernel<<<(numel + 255) / 256, 256, 0, stream>>>(
      numel, x_contig.data_ptr<float>(), static_cast<float>(scale), static_cast<float>(shift),
      out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void scale_shift_out_cuda(const at::Tensor& x, double scale, double shift, at::Tensor& out) {
  TORCH_CHECK(out.sizes() == x.sizes() && out.is_contiguous(), "out must be contiguous, of x's shape");
  TORCH_INTERNAL_ASSERT(x.is_cuda() && out.device().is_cuda());
  const at::Tensor x_contig = x.contiguous();
  const int numel = static_cast<int>(x_contig.numel());
  scale_shift_kernel<<<(numel + 127) / 128, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      numel, x_contig.data_ptr<float>(), static_cast<float>(scale), static_cast<float>(shift),
      out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

TORCH_LIBRARY_IMPL(scale_shift_ext, CUDA, m) {
  m.impl("scale_shift", &scale_shift_cuda);
  m.impl("scale_shift_out", &scale_shift_out_cuda);
}

}  // namespace scale_shift_ext
