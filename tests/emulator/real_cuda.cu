// Kernels as CUDA programmers write them, each using something the emulator once
// refused or left unbound: namespaces, a typedef'd scalar, an enum, templates, a struct
// taken by value, cache-hint loads and stores, mixed-sign min, and <memory>.
#include <cstdint>
#include <memory>

typedef unsigned int uint;
typedef unsigned char u8;
enum class Op { add = 0, mul = 1 };
struct Affine {
  float a, b;
};

namespace ops {
namespace detail {
__device__ float times(float x, float factor) { return factor * x; }
}  // namespace detail

__global__ void scale(const float* x, float* y, uint n, float factor) {
  const uint i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = detail::times(x[i], factor);
}
}  // namespace ops

namespace v2 {
__global__ void scale(const float* x, float* y, int n, double factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(factor * x[i]) + 1.0f;
}
}  // namespace v2

namespace {
__global__ void apply(const float* x, float* y, int n, Op op, float value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = op == Op::add ? x[i] + value : x[i] * value;
}
}  // namespace

// kPerThread consecutive elements per thread, read and written with streaming hints.
template <typename T, int kPerThread = 4>
__global__ void __launch_bounds__(256) copy_chunks(const T* __restrict__ x, T* __restrict__ y,
                                                   int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * kPerThread;
  for (int k = 0; k < kPerThread; ++k) {
    const int i = base + k;
    if (i < n) __stcs(&y[i], __ldcs(&x[i]));
  }
}

// min(int, unsigned) compares as unsigned, as CUDA's overload does: a negative
// index becomes huge and is clamped to `limit`.
__global__ void clamp_index(const int* index, unsigned limit, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) __stcg(&out[i], static_cast<int>(min(__ldcg(&index[i]), limit)));
}

__global__ void affine(const float* x, float* y, int n, Affine f) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f.a * x[i] + f.b;
}

__global__ void add4(float* y, float4 v) { y[threadIdx.x] += v.x + v.y + v.z + v.w; }

__global__ void fill_bytes(unsigned char* y, u8 value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = value;
}

// Named like a setting of the module: reachable as module["seed"].
__global__ void seed(float* y) { y[threadIdx.x] = 7.0f; }

// T needs a member `scale`: requires_scale<float> does not compile.
template <typename T>
__global__ void requires_scale(float* y) { y[threadIdx.x] = T::scale; }

// Host code beside the kernels, using <memory>.
inline std::unique_ptr<float[]> host_buffer(int n) { return std::make_unique<float[]>(n); }
