// Stand-in for CUDA's <cooperative_groups.h>, for the SIMT emulator (../simt.h).
//
// CUDA's header needs the compiler's own type traits (cuda/std/...), which a host
// compiler lacks. This subset is what tuned kernels use, built on the emulator's
// collectives (so its rules and reports apply to a tile as to a warp):
//   - thread_block: this_thread_block(), sync(), thread_rank(), size() /
//     num_threads(), group_index(), thread_index(), group_dim() / dim_threads();
//   - thread_block_tile<N> for N = 1, 2, 4, 8, 16, 32 (tiled_partition<N>(parent), the
//     parent a block or a larger tile):
//     sync(), thread_rank(), size() / num_threads(), meta_group_rank(),
//     meta_group_size(), shfl, shfl_up, shfl_down, shfl_xor, any, all, ballot;
//   - reduce(tile, value, op) with plus, less (the minimum), greater (the maximum),
//     bit_and, bit_or, bit_xor (<cooperative_groups/reduce.h> includes this file);
//   - sync(group) for both.
// this_grid() (grid-wide synchronisation) is refused at run time with a report: the
// emulator runs a grid's blocks one after another, so a grid barrier would wait
// for blocks that have not started. The mask of a tile in a partial last warp
// names only the lanes the block has: a shuffle or reduce that reads a missing
// lane is reported. coalesced_threads() is not provided (the emulator does not
// know which lanes a GPU would run converged).
#pragma once

#include "simt.h"

namespace cooperative_groups {

namespace details {
inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
inline unsigned block_rank() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
}  // namespace details

class thread_block {
 public:
  void sync(std::source_location site = std::source_location::current()) const {
    __syncthreads(site);
  }
  unsigned int thread_rank() const { return details::block_rank(); }
  unsigned int num_threads() const { return details::block_threads(); }
  unsigned int size() const { return num_threads(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

// thread_block_tile<N> (ParentT void) is the tile; thread_block_tile<N, ParentT>, what
// tiled_partition returns, converts to it, as in CUDA.
template <unsigned Size, typename ParentT = void>
class thread_block_tile;

template <unsigned Size>
class thread_block_tile<Size, void> {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "simt: thread_block_tile<N>: N must be a power of two up to 32");

 public:
  // This thread's rank in the group partitioned, and that group's size.
  thread_block_tile(unsigned int parent_rank, unsigned int parent_size)
      : parent_rank_(parent_rank), parent_size_(parent_size) {}

  // The lanes of this tile that the block has.
  unsigned mask() const {
    const unsigned rank = details::block_rank();
    const unsigned warp_first = rank / 32 * 32;
    const unsigned first_lane = rank % 32 / Size * Size;
    unsigned lanes = Size == 32 ? 0xffffffffu : ((1u << Size) - 1u) << first_lane;
    const unsigned present = details::block_threads() - warp_first;  // lanes of this warp
    if (present < 32) lanes &= (1u << present) - 1u;
    return lanes;
  }
  void sync(std::source_location site = std::source_location::current()) const {
    __syncwarp(mask(), site);
  }
  unsigned int thread_rank() const { return parent_rank_ % Size; }
  unsigned int num_threads() const { return Size; }
  unsigned int size() const { return Size; }
  unsigned int meta_group_rank() const { return parent_rank_ / Size; }
  unsigned int meta_group_size() const { return (parent_size_ + Size - 1) / Size; }

  template <typename T>
  T shfl(T var, int src_rank, std::source_location site = std::source_location::current()) const {
    return __shfl_sync(mask(), var, src_rank, Size, site);
  }
  template <typename T>
  T shfl_down(T var, unsigned delta,
              std::source_location site = std::source_location::current()) const {
    return __shfl_down_sync(mask(), var, delta, Size, site);
  }
  template <typename T>
  T shfl_up(T var, unsigned delta,
            std::source_location site = std::source_location::current()) const {
    return __shfl_up_sync(mask(), var, delta, Size, site);
  }
  template <typename T>
  T shfl_xor(T var, unsigned lane_mask,
             std::source_location site = std::source_location::current()) const {
    return __shfl_xor_sync(mask(), var, static_cast<int>(lane_mask), Size, site);
  }
  int any(int predicate, std::source_location site = std::source_location::current()) const {
    return __any_sync(mask(), predicate, site);
  }
  int all(int predicate, std::source_location site = std::source_location::current()) const {
    return __all_sync(mask(), predicate, site);
  }
  // Bit i: the tile's lane i (CUDA's tile ballot counts from the tile's first lane).
  unsigned ballot(int predicate,
                  std::source_location site = std::source_location::current()) const {
    const unsigned bits = __ballot_sync(mask(), predicate, site);
    return Size == 32 ? bits : (bits >> (details::block_rank() % 32 / Size * Size)) & ((1u << Size) - 1u);
  }

 private:
  unsigned int parent_rank_, parent_size_;
};

template <unsigned Size, typename ParentT>
class thread_block_tile : public thread_block_tile<Size, void> {
 public:
  using thread_block_tile<Size, void>::thread_block_tile;
};

// A tile of a block, or of a larger tile: its meta group rank and size count the tiles
// of that parent.
template <unsigned Size, typename Parent>
thread_block_tile<Size, Parent> tiled_partition(const Parent& parent) {
  return thread_block_tile<Size, Parent>(parent.thread_rank(), parent.num_threads());
}

inline void sync(const thread_block& g,
                 std::source_location site = std::source_location::current()) {
  g.sync(site);
}
template <unsigned Size, typename ParentT>
void sync(const thread_block_tile<Size, ParentT>& g,
          std::source_location site = std::source_location::current()) {
  g.sync(site);
}

class grid_group {
 public:
  void sync() const {}
};

inline grid_group this_grid(std::source_location site = std::source_location::current()) {
  auto& self = ::simt::detail::self_or_die("cooperative_groups::this_grid()");
  ::simt::detail::fail(
      self, ::simt::detail::format_site(site) +
                ": cooperative_groups::this_grid() in " + ::simt::detail::where(self) +
                ": grid-wide synchronisation is not supported by the emulator (it runs a grid's "
                "blocks one after another, so a grid barrier would wait for blocks that have "
                "not started); split the kernel in two launches");
}

template <typename T>
struct plus {
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {  // reduce(tile, v, less<T>()) is the minimum
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {  // the maximum
  T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct bit_and {
  T operator()(T a, T b) const { return a & b; }
};
template <typename T>
struct bit_or {
  T operator()(T a, T b) const { return a | b; }
};
template <typename T>
struct bit_xor {
  T operator()(T a, T b) const { return a ^ b; }
};

// Every lane of the tile receives op over the tile's values (a butterfly of shfl_xor).
template <unsigned Size, typename ParentT, typename T, typename Op>
T reduce(const thread_block_tile<Size, ParentT>& tile, T value, Op op,
         std::source_location site = std::source_location::current()) {
  for (unsigned offset = Size / 2; offset > 0; offset /= 2) {
    value = op(value, tile.shfl_xor(value, offset, site));
  }
  return value;
}

}  // namespace cooperative_groups
