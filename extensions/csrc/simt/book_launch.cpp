// The launches of the book's CUDA kernels (triplet.cu, involution.cu), as
// plain C functions the emulator's Python side (extending_pytorch.emulator)
// calls on CPU tensors' memory.
//
// They make the calls triplet_cuda.cpp and involution_cuda.cpp make (same
// TripletInputs / InvolutionShape, same launchers, the dtype dispatched to the
// same CUDA types), with nullptr for the stream. The torch-facing part of
// those bindings (checks, allocation, reduction) is done in Python, before
// and after: it needs no GPU, and this file then needs no torch header,
// which keeps the three builds (fast, memory, races) quick.
//
// Each returns 0, or 1 with the emulator's report (simt::Error) in `error`.
#include <cstdint>
#include <cstdio>
#include <exception>

#include "cuda/involution_kernels.h"
#include "cuda/triplet_kernels.h"

namespace {

using extending_pytorch::InvolutionShape;
using extending_pytorch::TripletParams;
namespace cuda = extending_pytorch::cuda;

// The dtype codes of the Python side: float32, float64, float16, bfloat16.
template <typename F>
int dispatch(int dtype, char* error, uint64_t size, F&& f) {
  try {
    switch (dtype) {
      case 0: f(float{}); break;
      case 1: f(double{}); break;
      case 2: f(__half{}); break;
      case 3: f(__nv_bfloat16{}); break;
      default:
        std::snprintf(error, size, "simt: unknown dtype code %d", dtype);
        return 1;
    }
  } catch (const std::exception& e) {
    std::snprintf(error, size, "%s", e.what());
    return 1;
  }
  return 0;
}

template <typename T>
cuda::TripletInputs<T> inputs(const void* a, const void* p, const void* n, const int64_t* strides,
                              int64_t batch, int64_t dim, double t1, double t2, double beta) {
  return {static_cast<const T*>(a),
          static_cast<const T*>(p),
          static_cast<const T*>(n),
          {strides[0], strides[1]},
          {strides[2], strides[3]},
          {strides[4], strides[5]},
          batch,
          dim,
          TripletParams{t1, t2, beta}};
}

InvolutionShape shape(const int64_t* v) {
  InvolutionShape s{};
  s.batch = v[0];
  s.channels = v[1];
  s.groups = v[2];
  s.height = v[3];
  s.width = v[4];
  s.kernel_h = v[5];
  s.kernel_w = v[6];
  s.out_h = v[7];
  s.out_w = v[8];
  s.stride_h = v[9];
  s.stride_w = v[10];
  s.pad_h = v[11];
  s.pad_w = v[12];
  s.dilation_h = v[13];
  s.dilation_w = v[14];
  return s;
}

}  // namespace

extern "C" {

void simt_configure(int schedule, unsigned long long seed, unsigned max_grid_x, int gpu_like) {
  simt::configure(static_cast<simt::Schedule>(schedule), seed, max_grid_x, gpu_like != 0);
}

int simt_triplet_forward(int dtype, const void* a, const void* p, const void* n,
                         const int64_t* strides, int64_t batch, int64_t dim, double t1, double t2,
                         double beta, void* out, char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_triplet_forward<T>(inputs<T>(a, p, n, strides, batch, dim, t1, t2, beta),
                                    static_cast<T*>(out), nullptr);
  });
}

int simt_triplet_backward(int dtype, const void* a, const void* p, const void* n,
                          const int64_t* strides, int64_t batch, int64_t dim, double t1,
                          double t2, double beta, const void* grad_output, int per_row,
                          double scale, void* grad_a, void* grad_p, void* grad_n, char* error,
                          uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_triplet_backward<T>(inputs<T>(a, p, n, strides, batch, dim, t1, t2, beta),
                                     static_cast<const T*>(grad_output), per_row != 0, scale,
                                     static_cast<T*>(grad_a), static_cast<T*>(grad_p),
                                     static_cast<T*>(grad_n), nullptr);
  });
}

// Fewer bytes (chapter 5, section 9): triplet_cuda.cpp's other launches.
int simt_triplet_forward_saving_distances(int dtype, const void* a, const void* p, const void* n,
                                          const int64_t* strides, int64_t batch, int64_t dim,
                                          double t1, double t2, double beta, void* out,
                                          void* distances, char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    using D = typename cuda::DistanceType<T>::type;
    cuda::launch_triplet_forward_saving_distances<T>(
        inputs<T>(a, p, n, strides, batch, dim, t1, t2, beta), static_cast<T*>(out),
        static_cast<D*>(distances), nullptr);
  });
}

int simt_triplet_backward_from_distances(int dtype, const void* a, const void* p, const void* n,
                                         const int64_t* strides, int64_t batch, int64_t dim,
                                         double t1, double t2, double beta, const void* distances,
                                         const void* grad_output, int per_row, double scale,
                                         void* grad_a, void* grad_p, void* grad_n, char* error,
                                         uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    using D = typename cuda::DistanceType<T>::type;
    cuda::launch_triplet_backward_from_distances<T>(
        inputs<T>(a, p, n, strides, batch, dim, t1, t2, beta), static_cast<const D*>(distances),
        static_cast<const T*>(grad_output), per_row != 0, scale, static_cast<T*>(grad_a),
        static_cast<T*>(grad_p), static_cast<T*>(grad_n), nullptr);
  });
}

// *result: 1 if the one-pass kernel takes these inputs, else 0.
int simt_triplet_takes_one_pass(int dtype, const void* a, const void* p, const void* n,
                                const int64_t* strides, int64_t batch, int64_t dim, int* result,
                                char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    *result = cuda::takes_one_pass<T>(inputs<T>(a, p, n, strides, batch, dim, 0, 0, 0)) ? 1 : 0;
  });
}

int simt_triplet_forward_with_grads(int dtype, const void* a, const void* p, const void* n,
                                    const int64_t* strides, int64_t batch, int64_t dim, double t1,
                                    double t2, double beta, double scale, void* out, void* grad_a,
                                    void* grad_p, void* grad_n, char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_triplet_forward_with_grads<T>(
        inputs<T>(a, p, n, strides, batch, dim, t1, t2, beta), scale, static_cast<T*>(out),
        static_cast<T*>(grad_a), static_cast<T*>(grad_p), static_cast<T*>(grad_n), nullptr);
  });
}

int simt_triplet_scale_gradients(int dtype, const void* grad_output, int per_row, int64_t batch,
                                 int64_t dim, void* grad_a, void* grad_p, void* grad_n,
                                 char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_triplet_scale_gradients<T>(static_cast<const T*>(grad_output), per_row != 0,
                                            batch, dim, static_cast<T*>(grad_a),
                                            static_cast<T*>(grad_p), static_cast<T*>(grad_n),
                                            nullptr);
  });
}

int simt_involution_forward(int dtype, const int64_t* s, const void* input, const void* weight,
                            void* output, char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_involution_forward<T>(shape(s), static_cast<const T*>(input),
                                       static_cast<const T*>(weight), static_cast<T*>(output),
                                       nullptr);
  });
}

int simt_involution_grad_input(int dtype, const int64_t* s, const void* grad_output,
                               const void* weight, void* grad_input, char* error, uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_involution_grad_input<T>(shape(s), static_cast<const T*>(grad_output),
                                          static_cast<const T*>(weight),
                                          static_cast<T*>(grad_input), nullptr);
  });
}

int simt_involution_grad_weight(int dtype, const int64_t* s, const void* grad_output,
                                const void* input, void* grad_weight, char* error,
                                uint64_t size) {
  return dispatch(dtype, error, size, [&](auto zero) {
    using T = decltype(zero);
    cuda::launch_involution_grad_weight<T>(shape(s), static_cast<const T*>(grad_output),
                                           static_cast<const T*>(input),
                                           static_cast<T*>(grad_weight), nullptr);
  });
}

}  // extern "C"
