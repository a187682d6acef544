// A PyTorch extension's CUDA file in the shape of pytorch/extension-cpp's muladd.cu (written
// for these tests): torch's headers, the current CUDA stream, a kernel launched with <<<>>>
// from a host function on at::Tensor, and a TORCH_LIBRARY_IMPL for the CUDA key. The
// emulator builds it unchanged; Python launches its kernel (the host function needs a GPU).
#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

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
  return out;
}

TORCH_LIBRARY_IMPL(scale_shift_ext, CUDA, m) {
  m.impl("scale_shift", &scale_shift_cuda);
}

}  // namespace scale_shift_ext
