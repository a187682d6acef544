// Index arithmetic and per-element sums of involution, shared by the C++ (CPU)
// and CUDA kernels. Nothing here includes torch: the CPU tests run exactly the
// code the GPU threads run.
//
// Shapes (all tensors dense, row-major):
//   input  (B, C, H, W)       weight (B, G, Kh, Kw, Ho, Wo)       out (B, C, Ho, Wo)
// Channel c belongs to group g = c / (C / G), and
//   out[b, c, h, w] = sum_{i, j} weight[b, g, i, j, h, w] * input[b, c, y, x],
//   y = h * sh - ph + i * dh,  x = w * sw - pw + j * dw   (zero outside the image).
// The two gradients, for an upstream gradient go = dL/dout:
//   dL/dinput[b, c, y, x]        = sum over (i, j, h, w) with y = h sh - ph + i dh and
//                                  x = w sw - pw + j dw of weight[b, g, i, j, h, w] go[b, c, h, w]
//   dL/dweight[b, g, i, j, h, w] = sum over the channels c of group g of
//                                  input[b, c, y, x] go[b, c, h, w]
// Each function computes ONE element of out, dL/dinput or dL/dweight, reading
// its operands through `load` callables that convert to the accumulation type
// acc_t (float for half and bfloat16), so each dtype keeps its own conversions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EP_INVOLUTION_HD __host__ __device__ __forceinline__
#else
#define EP_INVOLUTION_HD inline
#endif

namespace extending_pytorch {

struct InvolutionShape {
  int64_t batch, channels, groups;
  int64_t height, width;      // of the input
  int64_t kernel_h, kernel_w;
  int64_t out_h, out_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
};

// (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, or 0 where the
// dilated kernel does not fit in the padded input (C++ division truncates
// towards zero, which would turn a negative numerator into a positive size).
EP_INVOLUTION_HD int64_t involution_output_size(int64_t in, int64_t kernel, int64_t stride,
                                                int64_t pad, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

// The group whose weights channel c uses.
EP_INVOLUTION_HD int64_t involution_group(const InvolutionShape& s, int64_t c) {
  return c / (s.channels / s.groups);
}

// Flat offsets of the first element of a plane.
EP_INVOLUTION_HD int64_t input_plane(const InvolutionShape& s, int64_t b, int64_t c) {
  return (b * s.channels + c) * s.height * s.width;
}
EP_INVOLUTION_HD int64_t output_plane(const InvolutionShape& s, int64_t b, int64_t c) {
  return (b * s.channels + c) * s.out_h * s.out_w;
}
// weight[b, g, i, j] is an (Ho, Wo) plane.
EP_INVOLUTION_HD int64_t weight_plane(const InvolutionShape& s, int64_t b, int64_t g,
                                      int64_t i, int64_t j) {
  return (((b * s.groups + g) * s.kernel_h + i) * s.kernel_w + j) * s.out_h * s.out_w;
}

// Four indices of a flat index into a dense (n0, n1, n2, n3) array.
struct Index4 {
  int64_t i0, i1, i2, i3;
};
EP_INVOLUTION_HD Index4 unravel4(int64_t index, int64_t n1, int64_t n2, int64_t n3) {
  Index4 r;
  r.i3 = index % n3;
  index /= n3;
  r.i2 = index % n2;
  index /= n2;
  r.i1 = index % n1;
  r.i0 = index / n1;
  return r;
}

// The taps t in [0, kernel) whose input position pos * stride - pad +
// t * dilation lies inside [0, size): the half-open range [lo, hi). Loops over
// the range then need no bounds test per tap.
struct TapRange {
  int64_t lo, hi;
};
EP_INVOLUTION_HD int64_t ceil_div_positive(int64_t a, int64_t b) { return (a + b - 1) / b; }
EP_INVOLUTION_HD TapRange involution_taps(int64_t pos, int64_t kernel, int64_t stride,
                                          int64_t pad, int64_t dilation, int64_t size) {
  const int64_t first = pos * stride - pad;  // input position of tap 0
  TapRange r;
  r.lo = first >= 0 ? 0 : ceil_div_positive(-first, dilation);
  const int64_t past = size - first;  // positions first .. size - 1 are inside
  r.hi = past <= 0 ? 0 : ceil_div_positive(past, dilation);
  if (r.hi > kernel) r.hi = kernel;
  if (r.lo > r.hi) r.lo = r.hi;
  return r;
}

// out[b, c, h, w]: Kh * Kw products of one weight plane and one input window
// (fewer near the border, where taps read padding).
template <typename acc_t, typename LoadInput, typename LoadWeight>
EP_INVOLUTION_HD acc_t involution_forward_element(const InvolutionShape& s, int64_t b,
                                                  int64_t c, int64_t h, int64_t w,
                                                  LoadInput input, LoadWeight weight) {
  const int64_t g = involution_group(s, c);
  const TapRange rows = involution_taps(h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h, s.height);
  const TapRange cols = involution_taps(w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w, s.width);
  const int64_t plane = s.out_h * s.out_w;  // distance between two taps' weights
  const int64_t weight_base = weight_plane(s, b, g, 0, 0) + h * s.out_w + w;
  const int64_t input_base = input_plane(s, b, c) + (h * s.stride_h - s.pad_h) * s.width +
                             (w * s.stride_w - s.pad_w);
  acc_t sum = acc_t(0);
  for (int64_t i = rows.lo; i < rows.hi; ++i) {
    const int64_t weight_row = weight_base + i * s.kernel_w * plane;
    const int64_t input_row = input_base + i * s.dilation_h * s.width;
    for (int64_t j = cols.lo; j < cols.hi; ++j) {
      sum += weight(weight_row + j * plane) * input(input_row + j * s.dilation_w);
    }
  }
  return sum;
}

// The taps t, and output positions o in [0, out), with o * stride - pad +
// t * dilation == pos: the taps that read input position pos. The taps with
// o * stride in [0, (out - 1) * stride] form the range [lo, hi); within it,
// a tap counts when stride divides o * stride (always, for stride 1).
EP_INVOLUTION_HD int64_t floor_div_positive_divisor(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
EP_INVOLUTION_HD TapRange involution_source_taps(int64_t pos, int64_t kernel, int64_t stride,
                                                 int64_t pad, int64_t dilation, int64_t out) {
  // o * stride = pos + pad - t * dilation must lie in [0, (out - 1) * stride].
  const int64_t top = pos + pad;
  TapRange r;
  r.hi = floor_div_positive_divisor(top, dilation) + 1;
  r.lo = -floor_div_positive_divisor((out - 1) * stride - top, dilation);
  if (r.lo < 0) r.lo = 0;
  if (r.hi > kernel) r.hi = kernel;
  if (r.lo > r.hi) r.lo = r.hi;
  return r;
}

// dL/dinput[b, c, y, x]: every (tap, output position) that read input[b, c, y, x].
template <typename acc_t, typename LoadGrad, typename LoadWeight>
EP_INVOLUTION_HD acc_t involution_grad_input_element(const InvolutionShape& s, int64_t b,
                                                     int64_t c, int64_t y, int64_t x,
                                                     LoadGrad grad_output,
                                                     LoadWeight weight) {
  const int64_t g = involution_group(s, c);
  const TapRange rows =
      involution_source_taps(y, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h, s.out_h);
  const TapRange cols =
      involution_source_taps(x, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w, s.out_w);
  const int64_t out_base = output_plane(s, b, c);
  acc_t sum = acc_t(0);
  for (int64_t i = rows.lo; i < rows.hi; ++i) {
    const int64_t hs = y + s.pad_h - i * s.dilation_h;  // h * stride_h
    if (s.stride_h != 1 && hs % s.stride_h != 0) {
      continue;  // no output row has this tap on input row y
    }
    const int64_t h = hs / s.stride_h;
    for (int64_t j = cols.lo; j < cols.hi; ++j) {
      const int64_t ws = x + s.pad_w - j * s.dilation_w;
      if (s.stride_w != 1 && ws % s.stride_w != 0) {
        continue;
      }
      const int64_t hw = h * s.out_w + ws / s.stride_w;
      sum += weight(weight_plane(s, b, g, i, j) + hw) * grad_output(out_base + hw);
    }
  }
  return sum;
}

// dL/dweight[b, g, i, j, h, w]: a sum over the C / G channels of group g.
template <typename acc_t, typename LoadGrad, typename LoadInput>
EP_INVOLUTION_HD acc_t involution_grad_weight_element(const InvolutionShape& s, int64_t b,
                                                      int64_t g, int64_t i, int64_t j,
                                                      int64_t h, int64_t w,
                                                      LoadGrad grad_output, LoadInput input) {
  const int64_t y = h * s.stride_h - s.pad_h + i * s.dilation_h;
  const int64_t x = w * s.stride_w - s.pad_w + j * s.dilation_w;
  if (y < 0 || y >= s.height || x < 0 || x >= s.width) {
    return acc_t(0);  // the tap reads padding: no input depends on this weight
  }
  const int64_t per_group = s.channels / s.groups;
  const int64_t hw = h * s.out_w + w;
  const int64_t yx = y * s.width + x;
  acc_t sum = acc_t(0);
  for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c) {
    sum += grad_output(output_plane(s, b, c) + hw) * input(input_plane(s, b, c) + yx);
  }
  return sum;
}

}  // namespace extending_pytorch
