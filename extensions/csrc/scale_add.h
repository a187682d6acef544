// z = 2x + y: the smallest layer with a forward and a backward, from chapter 4.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace extending_pytorch {

// z = 2x + y for two tensors of one shape, dtype and device.
at::Tensor scale_add_forward(const at::Tensor& x, const at::Tensor& y);

// The gradients (dL/dx, dL/dy) = (2 g, g) for g = dL/dz.
std::vector<at::Tensor> scale_add_backward(const at::Tensor& grad_z);

}  // namespace extending_pytorch
