// CUDA kernels of the fused triplet hinge loss. No torch headers here: see
// triplet_kernels.h. triplet_cuda.cpp registers them for the CUDA device.
//
// Mapping: one warp (32 threads) per row of the batch, 8 warps per block.
// The 32 lanes of a warp read a row's elements side by side, so consecutive
// lanes touch consecutive addresses (coalesced loads), 16 bytes per lane per
// load (4 floats, 8 halfs) where the row is contiguous and aligned. Each lane
// sums squares over its elements in float (double for double inputs); a
// butterfly of warp shuffles then gives every lane the row's two squared
// distances. The grid has at most kMaxBlocks blocks (launch_config.h); each
// warp loops over rows a grid apart, so any batch size fits one launch.
#include <cstdint>
#include <type_traits>

#include "accumulate.h"
#include "launch_config.h"
#include "triplet_kernels.h"

namespace extending_pytorch {
namespace cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kThreadsPerBlock = kWarpSize * kWarpsPerBlock;


// Sum over the 32 lanes of a warp; every lane receives the total.
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// 16 bytes of scalar_t: what one lane loads or stores with one instruction
// (4 floats, 2 doubles, 8 halfs or bfloat16s).
template <typename scalar_t>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(scalar_t);
  scalar_t v[kSize];
};

__device__ __forceinline__ bool aligned16(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

// The three input rows of one triplet.
template <typename scalar_t>
struct RowPointers {
  const scalar_t* a;
  const scalar_t* p;
  const scalar_t* n;
};

template <typename scalar_t>
__device__ __forceinline__ RowPointers<scalar_t> row_pointers(const TripletInputs<scalar_t>& in,
                                                              int64_t row) {
  return {in.anchor + row * in.anchor_layout.row, in.positive + row * in.positive_layout.row,
          in.negative + row * in.negative_layout.row};
}

// Can this row be read in 16-byte packs? Every input needs unit column strides
// and a 16-byte aligned row start, and dim must be a whole number of packs.
// (Views such as x[:, 1:] start rows at odd addresses: they take the
// element-by-element loop.)
template <typename scalar_t>
__device__ __forceinline__ bool use_packs(const TripletInputs<scalar_t>& in,
                                          const RowPointers<scalar_t>& r) {
  return in.dim % Pack<scalar_t>::kSize == 0 && in.anchor_layout.col == 1 &&
         in.positive_layout.col == 1 && in.negative_layout.col == 1 && aligned16(r.a) &&
         aligned16(r.p) && aligned16(r.n);
}

// The same for the gradient rows the backward writes (null: not written).
template <typename scalar_t>
__device__ __forceinline__ bool aligned_or_null(const scalar_t* pointer) {
  return pointer == nullptr || aligned16(pointer);
}

// Both squared distances of one row, summed by the whole warp.
template <typename scalar_t, typename acc_t>
__device__ void row_distances(const TripletInputs<scalar_t>& in, const RowPointers<scalar_t>& r,
                              int lane, bool packed, acc_t& d_ap, acc_t& d_an) {
  acc_t sum_p = 0, sum_n = 0;
  if (packed) {
    using P = Pack<scalar_t>;
    const P* a = reinterpret_cast<const P*>(r.a);
    const P* p = reinterpret_cast<const P*>(r.p);
    const P* n = reinterpret_cast<const P*>(r.n);
    for (int64_t k = lane; k < in.dim / P::kSize; k += kWarpSize) {
      const P av = a[k], pv = p[k], nv = n[k];
#pragma unroll
      for (int e = 0; e < P::kSize; ++e) {
        const acc_t x = to_acc(av.v[e]);
        const acc_t dp = x - to_acc(pv.v[e]);
        const acc_t dn = x - to_acc(nv.v[e]);
        sum_p += dp * dp;
        sum_n += dn * dn;
      }
    }
  } else {
    for (int64_t j = lane; j < in.dim; j += kWarpSize) {
      const acc_t x = to_acc(r.a[j * in.anchor_layout.col]);
      const acc_t dp = x - to_acc(r.p[j * in.positive_layout.col]);
      const acc_t dn = x - to_acc(r.n[j * in.negative_layout.col]);
      sum_p += dp * dp;
      sum_n += dn * dn;
    }
  }
  d_ap = warp_sum(sum_p);
  d_an = warp_sum(sum_n);
}

// Forward: the loss of each row, written by the row's first lane. Each warp
// takes rows first_row, first_row + step, ... (a grid-stride loop), so a batch
// larger than the grid is still covered. `row` is the same for the 32 lanes
// of a warp, which therefore enter and leave the loop together, as the
// shuffles in row_distances require.
// `distances`, when not null, receives the row's two squared distances
// (d_ap, d_an) for a backward that will not recompute them (9N, below).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    triplet_forward_kernel(TripletInputs<scalar_t> in, scalar_t* out,
                           typename Acc<scalar_t>::type* distances) {
  using acc_t = typename Acc<scalar_t>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t step = row_step(gridDim.x, kWarpsPerBlock);
  for (int64_t row = first_row(blockIdx.x, threadIdx.x / kWarpSize, kWarpsPerBlock);
       row < in.batch; row += step) {
    const RowPointers<scalar_t> r = row_pointers(in, row);
    acc_t d_ap, d_an;
    row_distances<scalar_t, acc_t>(in, r, lane, use_packs(in, r), d_ap, d_an);
    if (lane == 0) {
      out[row] = from_acc<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, in.params));
      if (distances) {
        distances[2 * row] = d_ap;
        distances[2 * row + 1] = d_an;
      }
    }
  }
}

// Backward: the gradients of each row, recomputing its distances (a second
// read of the row), or taking them from `distances` where the forward saved
// them (one read). A null gradient pointer is a gradient nobody asked for; it
// is not written.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    triplet_backward_kernel(TripletInputs<scalar_t> in, const scalar_t* grad_output,
                            bool per_row, double scale,
                            const typename Acc<scalar_t>::type* distances, scalar_t* grad_a,
                            scalar_t* grad_p, scalar_t* grad_n) {
  using acc_t = typename Acc<scalar_t>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t step = row_step(gridDim.x, kWarpsPerBlock);
  for (int64_t row = first_row(blockIdx.x, threadIdx.x / kWarpSize, kWarpsPerBlock);
       row < in.batch; row += step) {
    const RowPointers<scalar_t> r = row_pointers(in, row);
    const int64_t out = row * in.dim;  // the gradients are contiguous
    scalar_t* ga = grad_a ? grad_a + out : nullptr;
    scalar_t* gp = grad_p ? grad_p + out : nullptr;
    scalar_t* gn = grad_n ? grad_n + out : nullptr;
    const bool packed_in = use_packs(in, r);
    acc_t d_ap = 0, d_an = 0;
    if (distances) {
      // One lane reads the pair; the shuffle hands it to the others.
      if (lane == 0) {
        d_ap = distances[2 * row];
        d_an = distances[2 * row + 1];
      }
      d_ap = __shfl_sync(0xffffffffu, d_ap, 0);
      d_an = __shfl_sync(0xffffffffu, d_an, 0);
    } else {
      row_distances<scalar_t, acc_t>(in, r, lane, packed_in, d_ap, d_an);
    }
    const acc_t g = to_acc(grad_output[per_row ? row : 0]) * static_cast<acc_t>(scale);
    const TripletWeights<acc_t> w = triplet_weights<acc_t>(d_ap, d_an, g, in.params);
    // Packed stores need 16-byte aligned gradient rows too: fresh tensors
    // start aligned, and with dim a whole number of packs every row does.
    if (packed_in && aligned_or_null(ga) && aligned_or_null(gp) && aligned_or_null(gn)) {
      using P = Pack<scalar_t>;
      const P* a = reinterpret_cast<const P*>(r.a);
      const P* p = reinterpret_cast<const P*>(r.p);
      const P* n = reinterpret_cast<const P*>(r.n);
      for (int64_t k = lane; k < in.dim / P::kSize; k += kWarpSize) {
        const P av = a[k], pv = p[k], nv = n[k];
        P pack_a, pack_p, pack_n;
#pragma unroll
        for (int e = 0; e < P::kSize; ++e) {
          const acc_t x = to_acc(av.v[e]);
          const acc_t grad_pe = -w.w_ap * (x - to_acc(pv.v[e]));
          const acc_t grad_ne = w.w_an * (x - to_acc(nv.v[e]));
          pack_p.v[e] = from_acc<scalar_t>(grad_pe);
          pack_n.v[e] = from_acc<scalar_t>(grad_ne);
          pack_a.v[e] = from_acc<scalar_t>(-(grad_pe + grad_ne));
        }
        if (gp) reinterpret_cast<P*>(gp)[k] = pack_p;
        if (gn) reinterpret_cast<P*>(gn)[k] = pack_n;
        if (ga) reinterpret_cast<P*>(ga)[k] = pack_a;
      }
    } else {
      for (int64_t j = lane; j < in.dim; j += kWarpSize) {
        const acc_t x = to_acc(r.a[j * in.anchor_layout.col]);
        const acc_t grad_pj = -w.w_ap * (x - to_acc(r.p[j * in.positive_layout.col]));
        const acc_t grad_nj = w.w_an * (x - to_acc(r.n[j * in.negative_layout.col]));
        if (gp) gp[j] = from_acc<scalar_t>(grad_pj);
        if (gn) gn[j] = from_acc<scalar_t>(grad_nj);
        if (ga) ga[j] = from_acc<scalar_t>(-(grad_pj + grad_nj));
      }
    }
  }
}

unsigned int blocks_for(int64_t batch) {
  // At most kMaxBlocks (2^20): the cast cannot overflow.
  return static_cast<unsigned int>(blocks_for_rows(batch, kWarpsPerBlock));
}

}  // namespace

template <typename scalar_t>
void launch_triplet_forward(const TripletInputs<scalar_t>& in, scalar_t* out,
                            cudaStream_t stream) {
  if (in.batch == 0) {
    return;  // a grid of zero blocks is an invalid launch
  }
  triplet_forward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(
      in, out, nullptr);
}

template <typename scalar_t>
void launch_triplet_backward(const TripletInputs<scalar_t>& in, const scalar_t* grad_output,
                             bool per_row, double scale, scalar_t* grad_anchor,
                             scalar_t* grad_positive, scalar_t* grad_negative,
                             cudaStream_t stream) {
  if (in.batch == 0) {
    return;
  }
  triplet_backward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(
      in, grad_output, per_row, scale, nullptr, grad_anchor, grad_positive, grad_negative);
}

// ---- Fewer bytes: the forward saves the distances; a training step in one pass ----
//
// Counted in N = batch * dim * element size (the emulator's traffic counter,
// chapter 5 section 9): the forward reads 3N. The backward above reads 6N and
// writes 3N when it recomputes the distances (every row read twice), 3N + 3N
// when the forward saved them: 9N for a training step, where 12N before.
// The one-pass kernel below computes the loss and the gradients for
// grad_output = 1 together: 3N read, 3N written, the minimum.

namespace {

// One block per row: its threads hold the row's three inputs in registers
// from the read that sums the distances to the writes of the gradients, so
// each element is read once. kPacks 16-byte packs per thread and input: at
// most kMaxFusedPacks (8 packs x 3 inputs x 16 bytes = 96 registers of data
// per thread), so a row of at most 256 * 8 * 16 bytes = 32 KiB per input
// (8192 floats, 16384 halfs or bfloat16s, 4096 doubles).
constexpr int kFusedThreads = 256;
constexpr int kFusedWarps = kFusedThreads / kWarpSize;
constexpr int kMaxFusedPacks = 8;

template <typename scalar_t, int kPacks>
__global__ void __launch_bounds__(kFusedThreads)
    triplet_forward_with_grads_kernel(TripletInputs<scalar_t> in, double scale, scalar_t* out,
                                      scalar_t* grad_a, scalar_t* grad_p, scalar_t* grad_n) {
  using acc_t = typename Acc<scalar_t>::type;
  using P = Pack<scalar_t>;
  __shared__ acc_t partial[2][kFusedWarps];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t packs = in.dim / P::kSize;
  for (int64_t row = blockIdx.x; row < in.batch; row += gridDim.x) {
    const RowPointers<scalar_t> r = row_pointers(in, row);
    const P* a = reinterpret_cast<const P*>(r.a);
    const P* p = reinterpret_cast<const P*>(r.p);
    const P* n = reinterpret_cast<const P*>(r.n);
    P av[kPacks], pv[kPacks], nv[kPacks];
    acc_t sum_p = 0, sum_n = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t index = threadIdx.x + int64_t{k} * kFusedThreads;
      if (index < packs) {
        av[k] = a[index];
        pv[k] = p[index];
        nv[k] = n[index];
#pragma unroll
        for (int e = 0; e < P::kSize; ++e) {
          const acc_t x = to_acc(av[k].v[e]);
          const acc_t dp = x - to_acc(pv[k].v[e]);
          const acc_t dn = x - to_acc(nv[k].v[e]);
          sum_p += dp * dp;
          sum_n += dn * dn;
        }
      }
    }
    // The block's sum: each warp's, then the kFusedWarps partial sums, added
    // in the same order by every thread.
    sum_p = warp_sum(sum_p);
    sum_n = warp_sum(sum_n);
    if (lane == 0) {
      partial[0][warp] = sum_p;
      partial[1][warp] = sum_n;
    }
    __syncthreads();
    acc_t d_ap = 0, d_an = 0;
#pragma unroll
    for (int w = 0; w < kFusedWarps; ++w) {
      d_ap += partial[0][w];
      d_an += partial[1][w];
    }
    __syncthreads();  // partial is written again for the next row
    if (threadIdx.x == 0) {
      out[row] = from_acc<scalar_t>(triplet_loss<acc_t>(d_ap, d_an, in.params));
    }
    const TripletWeights<acc_t> w =
        triplet_weights<acc_t>(d_ap, d_an, static_cast<acc_t>(scale), in.params);
    const int64_t start = row * packs;  // the gradients are contiguous
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t index = threadIdx.x + int64_t{k} * kFusedThreads;
      if (index < packs) {
        P pack_a, pack_p, pack_n;
#pragma unroll
        for (int e = 0; e < P::kSize; ++e) {
          const acc_t x = to_acc(av[k].v[e]);
          const acc_t grad_pe = -w.w_ap * (x - to_acc(pv[k].v[e]));
          const acc_t grad_ne = w.w_an * (x - to_acc(nv[k].v[e]));
          pack_p.v[e] = from_acc<scalar_t>(grad_pe);
          pack_n.v[e] = from_acc<scalar_t>(grad_ne);
          pack_a.v[e] = from_acc<scalar_t>(-(grad_pe + grad_ne));
        }
        if (grad_p) reinterpret_cast<P*>(grad_p)[start + index] = pack_p;
        if (grad_n) reinterpret_cast<P*>(grad_n)[start + index] = pack_n;
        if (grad_a) reinterpret_cast<P*>(grad_a)[start + index] = pack_a;
      }
    }
  }
}

// The one-pass kernel's gradients are those of grad_output = 1. Backward
// scales them in place by the grad_output it receives, which only the GPU
// knows without a synchronisation: each warp reads its row's value (the same
// scalar for "mean" and "sum") and leaves the row untouched where it is
// exactly 1, as it is for loss.backward(). Reads c*B bytes then; 3N + 3N more
// for any other grad_output.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreadsPerBlock)
    triplet_scale_gradients_kernel(const scalar_t* grad_output, bool per_row, int64_t batch,
                                   int64_t dim, scalar_t* grad_a, scalar_t* grad_p,
                                   scalar_t* grad_n) {
  using acc_t = typename Acc<scalar_t>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t step = row_step(gridDim.x, kWarpsPerBlock);
  for (int64_t row = first_row(blockIdx.x, threadIdx.x / kWarpSize, kWarpsPerBlock);
       row < batch; row += step) {
    acc_t g = 0;
    if (lane == 0) {
      g = to_acc(grad_output[per_row ? row : 0]);
    }
    g = __shfl_sync(0xffffffffu, g, 0);
    if (g == acc_t(1)) {
      continue;  // the whole warp: g is the same in every lane
    }
    scalar_t* rows[3] = {grad_a, grad_p, grad_n};
    for (scalar_t* base : rows) {
      if (base == nullptr) continue;
      scalar_t* x = base + row * dim;
      for (int64_t j = lane; j < dim; j += kWarpSize) {
        x[j] = from_acc<scalar_t>(to_acc(x[j]) * g);
      }
    }
  }
}

template <typename T>
bool aligned_rows(const T* base, int64_t row_stride, int64_t batch) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 &&
         (batch <= 1 || (row_stride * static_cast<int64_t>(sizeof(T))) % 16 == 0);
}

template <typename scalar_t, int kPacks>
void launch_one_pass(const TripletInputs<scalar_t>& in, double scale, scalar_t* out,
                     scalar_t* grad_a, scalar_t* grad_p, scalar_t* grad_n, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned int>(blocks_for_rows(in.batch, 1));
  triplet_forward_with_grads_kernel<scalar_t, kPacks><<<blocks, kFusedThreads, 0, stream>>>(
      in, scale, out, grad_a, grad_p, grad_n);
}

}  // namespace

template <typename scalar_t>
int64_t one_pass_max_dim() {
  return int64_t{kFusedThreads} * kMaxFusedPacks * Pack<scalar_t>::kSize;
}

template <typename scalar_t>
bool takes_one_pass(const TripletInputs<scalar_t>& in) {
  using P = Pack<scalar_t>;
  const auto unit = [&](const Layout& l) { return in.dim <= 1 || l.col == 1; };
  return in.dim > 0 && in.dim % P::kSize == 0 && in.dim <= one_pass_max_dim<scalar_t>() &&
         unit(in.anchor_layout) && unit(in.positive_layout) && unit(in.negative_layout) &&
         aligned_rows(in.anchor, in.anchor_layout.row, in.batch) &&
         aligned_rows(in.positive, in.positive_layout.row, in.batch) &&
         aligned_rows(in.negative, in.negative_layout.row, in.batch);
}

template <typename scalar_t>
void launch_triplet_forward_saving_distances(const TripletInputs<scalar_t>& in, scalar_t* out,
                                             typename DistanceType<scalar_t>::type* distances,
                                             cudaStream_t stream) {
  static_assert(std::is_same_v<typename DistanceType<scalar_t>::type,
                               typename Acc<scalar_t>::type>,
                "the saved distances are the kernels' accumulation type");
  if (in.batch == 0) {
    return;
  }
  triplet_forward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(
      in, out, distances);
}

template <typename scalar_t>
void launch_triplet_backward_from_distances(
    const TripletInputs<scalar_t>& in, const typename DistanceType<scalar_t>::type* distances,
    const scalar_t* grad_output, bool per_row, double scale, scalar_t* grad_anchor,
    scalar_t* grad_positive, scalar_t* grad_negative, cudaStream_t stream) {
  if (in.batch == 0) {
    return;
  }
  triplet_backward_kernel<scalar_t><<<blocks_for(in.batch), kThreadsPerBlock, 0, stream>>>(
      in, grad_output, per_row, scale, distances, grad_anchor, grad_positive, grad_negative);
}

template <typename scalar_t>
void launch_triplet_forward_with_grads(const TripletInputs<scalar_t>& in, double scale,
                                       scalar_t* out, scalar_t* grad_anchor,
                                       scalar_t* grad_positive, scalar_t* grad_negative,
                                       cudaStream_t stream) {
  if (in.batch == 0) {
    return;
  }
  // The smallest number of packs per thread that holds the row.
  const int64_t per_thread =
      (in.dim / Pack<scalar_t>::kSize + kFusedThreads - 1) / kFusedThreads;
  if (per_thread <= 1) {
    launch_one_pass<scalar_t, 1>(in, scale, out, grad_anchor, grad_positive, grad_negative, stream);
  } else if (per_thread <= 2) {
    launch_one_pass<scalar_t, 2>(in, scale, out, grad_anchor, grad_positive, grad_negative, stream);
  } else if (per_thread <= 4) {
    launch_one_pass<scalar_t, 4>(in, scale, out, grad_anchor, grad_positive, grad_negative, stream);
  } else {
    launch_one_pass<scalar_t, kMaxFusedPacks>(in, scale, out, grad_anchor, grad_positive,
                                              grad_negative, stream);
  }
}

template <typename scalar_t>
void launch_triplet_scale_gradients(const scalar_t* grad_output, bool per_row, int64_t batch,
                                    int64_t dim, scalar_t* grad_anchor, scalar_t* grad_positive,
                                    scalar_t* grad_negative, cudaStream_t stream) {
  if (batch == 0 || dim == 0) {
    return;
  }
  triplet_scale_gradients_kernel<scalar_t><<<blocks_for(batch), kThreadsPerBlock, 0, stream>>>(
      grad_output, per_row, batch, dim, grad_anchor, grad_positive, grad_negative);
}

// The dtypes the binding dispatches to.
#define EP_INSTANTIATE(T)                                                                  \
  template void launch_triplet_forward<T>(const TripletInputs<T>&, T*, cudaStream_t);       \
  template void launch_triplet_backward<T>(const TripletInputs<T>&, const T*, bool, double, \
                                           T*, T*, T*, cudaStream_t);
EP_INSTANTIATE(float)
EP_INSTANTIATE(double)
EP_INSTANTIATE(__half)
EP_INSTANTIATE(__nv_bfloat16)
#undef EP_INSTANTIATE
#define EP_INSTANTIATE_FEWER_BYTES(T)                                                         \
  template int64_t one_pass_max_dim<T>();                                                     \
  template bool takes_one_pass<T>(const TripletInputs<T>&);                                   \
  template void launch_triplet_forward_saving_distances<T>(                                   \
      const TripletInputs<T>&, T*, DistanceType<T>::type*, cudaStream_t);                     \
  template void launch_triplet_backward_from_distances<T>(                                    \
      const TripletInputs<T>&, const DistanceType<T>::type*, const T*, bool, double, T*, T*,  \
      T*, cudaStream_t);                                                                      \
  template void launch_triplet_forward_with_grads<T>(const TripletInputs<T>&, double, T*, T*, \
                                                     T*, T*, cudaStream_t);                   \
  template void launch_triplet_scale_gradients<T>(const T*, bool, int64_t, int64_t, T*, T*,   \
                                                  T*, cudaStream_t);
EP_INSTANTIATE_FEWER_BYTES(float)
EP_INSTANTIATE_FEWER_BYTES(double)
EP_INSTANTIATE_FEWER_BYTES(__half)
EP_INSTANTIATE_FEWER_BYTES(__nv_bfloat16)
#undef EP_INSTANTIATE_FEWER_BYTES

}  // namespace cuda
}  // namespace extending_pytorch
