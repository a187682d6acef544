// Involution (Li et al., CVPR 2021) on the CPU, registered as the operators
// extending_pytorch::involution and extending_pytorch::involution_backward.
//
// Each kernel computes one output array element by element with the shared
// per-element sums of involution_math.h, which the CUDA kernels run too; the
// elements are spread over threads with at::parallel_for. Every element is
// written by exactly one thread (the weight gradient sums over the channels of
// a group inside the thread), so results never depend on the thread count.
//
// Layout: the kernels read dense (contiguous) tensors and call .contiguous()
// on their inputs, which copies only tensors that are not already dense. The
// sums read each input element up to Kh * Kw times in a sliding window, so
// one copy costs little next to the work, and the dense layout lets the CPU
// and the GPU share one index arithmetic, with neighbouring GPU threads reading
// neighbouring addresses (within one thread's loop, consecutive weight reads are
// a whole H_o * W_o plane apart).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <tuple>

#include "involution_common.h"
#include "involution_math.h"

namespace extending_pytorch {
namespace {

// Elements per task for at::parallel_for: about 32K multiply-adds per task,
// so scheduling costs little and both cores of a small machine get work.
int64_t grain_size(int64_t work_per_element) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(work_per_element, 1));
}

// Reads element k of a dense array as acc_t.
template <typename scalar_t, typename acc_t>
struct Load {
  const scalar_t* data;
  acc_t operator()(int64_t k) const { return static_cast<acc_t>(data[k]); }
};

}  // namespace

at::Tensor involution_forward_cpu(const at::Tensor& input_, const at::Tensor& weight_,
                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation) {
  const InvolutionShape s =
      check_involution_inputs("involution", input_, weight_, stride, padding, dilation);
  const at::Tensor input = input_.contiguous();
  const at::Tensor weight = weight_.contiguous();
  at::Tensor output = at::empty({s.batch, s.channels, s.out_h, s.out_w}, input.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "involution_forward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;  // float for half and bfloat16
        const Load<scalar_t, acc_t> in{input.const_data_ptr<scalar_t>()};
        const Load<scalar_t, acc_t> wt{weight.const_data_ptr<scalar_t>()};
        scalar_t* out = output.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, output.numel(), grain_size(s.kernel_h * s.kernel_w),
                         [&](int64_t begin, int64_t end) {
                           for (int64_t k = begin; k < end; ++k) {
                             const Index4 o = unravel4(k, s.channels, s.out_h, s.out_w);
                             out[k] = static_cast<scalar_t>(
                                 involution_forward_element<acc_t>(s, o.i0, o.i1, o.i2,
                                                                   o.i3, in, wt));
                           }
                         });
      });
  return output;
}

// The gradients that output_mask asks for: {input, weight}. A gradient that is
// not asked for is neither computed nor allocated (an undefined tensor, None
// in Python), as ctx.needs_input_grad decided in the original autograd.Function.
std::tuple<at::Tensor, at::Tensor> involution_backward_cpu(
    const at::Tensor& grad_output_, const at::Tensor& input_, const at::Tensor& weight_,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
    std::array<bool, 2> output_mask) {
  const InvolutionShape s = check_involution_inputs("involution_backward", input_, weight_,
                                                    stride, padding, dilation);
  check_involution_grad_output("involution_backward", grad_output_, input_, s);
  const at::Tensor grad_output = grad_output_.contiguous();
  at::Tensor grad_input, grad_weight;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input_.scalar_type(), "involution_backward_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const Load<scalar_t, acc_t> go{grad_output.const_data_ptr<scalar_t>()};
        if (output_mask[0]) {
          // Reads grad_output and weight: the input's values are not needed.
          const at::Tensor weight = weight_.contiguous();
          const Load<scalar_t, acc_t> wt{weight.const_data_ptr<scalar_t>()};
          grad_input = at::empty({s.batch, s.channels, s.height, s.width}, input_.options());
          scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
          at::parallel_for(0, grad_input.numel(), grain_size(s.kernel_h * s.kernel_w),
                           [&](int64_t begin, int64_t end) {
                             for (int64_t k = begin; k < end; ++k) {
                               const Index4 p = unravel4(k, s.channels, s.height, s.width);
                               gi[k] = static_cast<scalar_t>(
                                   involution_grad_input_element<acc_t>(s, p.i0, p.i1, p.i2,
                                                                        p.i3, go, wt));
                             }
                           });
        }
        if (output_mask[1]) {
          // Reads grad_output and input: the weight's values are not needed.
          const at::Tensor input = input_.contiguous();
          const Load<scalar_t, acc_t> in{input.const_data_ptr<scalar_t>()};
          grad_weight = at::empty(
              {s.batch, s.groups, s.kernel_h, s.kernel_w, s.out_h, s.out_w}, input_.options());
          scalar_t* gw = grad_weight.mutable_data_ptr<scalar_t>();
          const int64_t taps = s.kernel_h * s.kernel_w;
          const int64_t out_hw = s.out_h * s.out_w;
          at::parallel_for(
              0, grad_weight.numel(), grain_size(s.channels / s.groups),
              [&](int64_t begin, int64_t end) {
                for (int64_t k = begin; k < end; ++k) {
                  // k indexes (b, g, i, j, h, w): split it as (b, g, tap, hw).
                  const Index4 q = unravel4(k, s.groups, taps, out_hw);
                  gw[k] = static_cast<scalar_t>(involution_grad_weight_element<acc_t>(
                      s, q.i0, q.i1, q.i2 / s.kernel_w, q.i2 % s.kernel_w, q.i3 / s.out_w,
                      q.i3 % s.out_w, go, in));
                }
              });
        }
      });
  return {grad_input, grad_weight};
}

// ---- Registration ----------------------------------------------------------

// The schemas. triplet.cpp holds the one TORCH_LIBRARY block of the
// namespace; a FRAGMENT adds to it from another file. int[2] accepts an int
// (broadcast to both dimensions) or a pair from Python.
TORCH_LIBRARY_FRAGMENT(extending_pytorch, m) {
  m.def(
      "involution(Tensor input, Tensor weight, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1) -> Tensor");
  m.def(
      "involution_backward(Tensor grad_output, Tensor input, Tensor weight, "
      "int[2] stride, int[2] padding, int[2] dilation, bool[2] output_mask) "
      "-> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(extending_pytorch, CPU, m) {
  m.impl("involution", &involution_forward_cpu);
  m.impl("involution_backward", &involution_backward_cpu);
}

}  // namespace extending_pytorch
