// What every backend of extending_pytorch::involution shares: the input checks.
// Each TORCH_CHECK names the argument, what was expected and what was given,
// and returns the sizes the kernels need (involution_math.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "involution_math.h"

namespace extending_pytorch {

inline void check_pair(const char* op, const char* name, c10::IntArrayRef values,
                       int64_t minimum, const char* requirement) {
  TORCH_CHECK(values.size() == 2, op, ": ", name,
              " must have 2 values (height, width), got ", values);
  TORCH_CHECK(values[0] >= minimum && values[1] >= minimum, op, ": ", name, " must be ",
              requirement, ", got ", values);
}

// Checks input (B, C, H, W), weight (B, G, Kh, Kw, Ho, Wo) and the settings;
// returns the shape of the computation. `op` starts every message.
inline InvolutionShape check_involution_inputs(const char* op, const at::Tensor& input,
                                               const at::Tensor& weight,
                                               c10::IntArrayRef stride,
                                               c10::IntArrayRef padding,
                                               c10::IntArrayRef dilation) {
  TORCH_CHECK(input.dim() == 4, op,
              ": input must be 4-D (batch, channels, height, width), got ", input.dim(),
              "-D with shape ", input.sizes());
  TORCH_CHECK(weight.dim() == 6, op,
              ": weight must be 6-D (batch, groups, kernel_h, kernel_w, out_h, out_w), got ",
              weight.dim(), "-D with shape ", weight.sizes());
  // An allowlist, not at::isFloatingType: that also accepts the float8 types,
  // which the kernels are not instantiated for.
  const at::ScalarType dtype = input.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
                  dtype == at::kBFloat16,
              op,
              ": input must have a floating-point dtype (float32, float64, float16 or "
              "bfloat16), got ",
              dtype);
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), op,
              ": weight must have the dtype of input (", input.scalar_type(), "), got ",
              weight.scalar_type());
  TORCH_CHECK(weight.device() == input.device(), op,
              ": weight must be on the device of input (", input.device(), "), got ",
              weight.device());
  check_pair(op, "stride", stride, 1, "positive");
  check_pair(op, "padding", padding, 0, "non-negative");
  check_pair(op, "dilation", dilation, 1, "positive");
  // Bounds that keep the index arithmetic of involution_math.h, such as
  // in + 2 pad - dilation (kernel - 1) - 1, far from int64 overflow.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (const auto& [name, values] : {std::pair{"stride", stride}, std::pair{"padding", padding},
                                     std::pair{"dilation", dilation}}) {
    TORCH_CHECK(values[0] <= kMax && values[1] <= kMax, op, ": ", name,
                " must be at most ", kMax, ", got ", values);
  }
  for (int64_t d = 2; d < 4; ++d) {
    TORCH_CHECK(weight.size(d) <= kMax && input.size(d) <= kMax, op,
                ": kernel and image sizes must be at most ", kMax, ", got weight ",
                weight.sizes(), " and input ", input.sizes());
  }

  InvolutionShape s{};
  s.batch = input.size(0);
  s.channels = input.size(1);
  s.height = input.size(2);
  s.width = input.size(3);
  s.groups = weight.size(1);
  s.kernel_h = weight.size(2);
  s.kernel_w = weight.size(3);
  s.stride_h = stride[0];
  s.stride_w = stride[1];
  s.pad_h = padding[0];
  s.pad_w = padding[1];
  s.dilation_h = dilation[0];
  s.dilation_w = dilation[1];

  TORCH_CHECK(weight.size(0) == s.batch, op, ": weight must have the batch size of input (",
              s.batch, ") in dim 0, got ", weight.size(0));
  TORCH_CHECK(s.groups > 0 && s.channels % s.groups == 0, op,
              ": the number of groups (weight dim 1, ", s.groups,
              ") must be positive and divide the channels of input (", s.channels, ")");
  TORCH_CHECK(s.kernel_h > 0 && s.kernel_w > 0, op,
              ": weight must have a kernel of at least 1x1 (dims 2 and 3), got ", s.kernel_h,
              "x", s.kernel_w);
  s.out_h = involution_output_size(s.height, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h);
  s.out_w = involution_output_size(s.width, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
  TORCH_CHECK(s.out_h > 0 && s.out_w > 0, op, ": the ", s.kernel_h, "x", s.kernel_w,
              " kernel with dilation ", dilation, " does not fit in the ", s.height, "x",
              s.width, " input with padding ", padding, ": the output would be empty");
  TORCH_CHECK(weight.size(4) == s.out_h && weight.size(5) == s.out_w, op,
              ": weight must have shape ",
              c10::IntArrayRef({s.batch, s.groups, s.kernel_h, s.kernel_w, s.out_h, s.out_w}),
              " for this input, stride, padding and dilation (output ", s.out_h, "x",
              s.out_w, "), got ", weight.sizes());
  return s;
}

inline void check_involution_grad_output(const char* op, const at::Tensor& grad_output,
                                         const at::Tensor& input, const InvolutionShape& s) {
  TORCH_CHECK(grad_output.dim() == 4 && grad_output.size(0) == s.batch &&
                  grad_output.size(1) == s.channels && grad_output.size(2) == s.out_h &&
                  grad_output.size(3) == s.out_w,
              op, ": grad_output must have the output's shape ",
              c10::IntArrayRef({s.batch, s.channels, s.out_h, s.out_w}), ", got ",
              grad_output.sizes());
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), op,
              ": grad_output must have the dtype of input (", input.scalar_type(), "), got ",
              grad_output.scalar_type());
  TORCH_CHECK(grad_output.device() == input.device(), op,
              ": grad_output must be on the device of input (", input.device(), "), got ",
              grad_output.device());
}

}  // namespace extending_pytorch
