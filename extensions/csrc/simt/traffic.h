// traffic.h: the emulator's memory-traffic counter (included by simt.h when
// SIMT_TRAFFIC is defined; extending_pytorch.emulator.traffic() builds so).
//
// How. The kernel's translation unit is compiled with -fsanitize=thread, which
// makes g++ call __tsan_read4(address), __tsan_write16(address), ... before
// every load and store, and linked WITHOUT ThreadSanitizer's runtime: the
// functions below take its place. They keep an access only while a GPU thread
// runs (simt::detail::current) and only if its address lies in one of the
// buffers the Python side registered (the launch's tensors): the kernel's own
// global-memory loads and stores, not its registers (the fiber's stack), its
// shared memory or the emulator's bookkeeping. Each kept access becomes a
// Record; Python reads them (simt_traffic_records) and counts bytes, and the
// 32-byte sectors each warp-wide access touches (extending_pytorch/emulator/
// traffic.py). Atomics count as a read and a write.
//
// The functions are weak: every translation unit of a build defines them (the
// book's build has three), the linker keeps one. They are not instrumented
// (no_sanitize_thread), so they do not call themselves.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace simt::traffic {

struct Record {
  uint64_t address;
  uint64_t pc;        // the instruction that made the access (its return address)
  uint32_t launch;    // index of the launch since simt_traffic_begin
  uint32_t block;     // linear block index
  uint16_t thread;    // linear thread index in the block
  uint16_t size;      // bytes
  uint8_t flags;      // 1: write, 2: atomic (read and write)
  uint8_t buffer;     // index of the registered buffer
  uint16_t unused;
};
static_assert(sizeof(Record) == 32);

inline constexpr int kMaxBuffers = 64;
inline constexpr int kMaxLaunches = 4096;

struct LaunchInfo {
  const char* kernel;
  unsigned grid[3], block[3];
};

struct State {
  uint64_t begin[kMaxBuffers], end[kMaxBuffers];
  int buffers = 0;
  Record* records = nullptr;
  uint64_t count = 0, capacity = 0;
  bool overflow = false;  // out of memory for records: the counts are incomplete
  LaunchInfo launches[kMaxLaunches];
  uint32_t launch_count = 0;
};

inline State state;

__attribute__((no_sanitize_thread)) inline void record(const void* pointer, uint64_t size,
                                                       uint8_t flags, void* pc) {
  const detail::Thread* t = detail::current;
  if (t == nullptr || state.launch_count == 0) return;
  const uint64_t address = reinterpret_cast<uint64_t>(pointer);
  int buffer = -1;
  for (int i = 0; i < state.buffers; ++i) {
    if (address >= state.begin[i] && address < state.end[i]) {
      buffer = i;
      break;
    }
  }
  if (buffer < 0) return;
  if (state.count == state.capacity) {
    const uint64_t capacity = state.capacity ? 2 * state.capacity : (1u << 16);
    void* grown = std::realloc(state.records, capacity * sizeof(Record));
    if (grown == nullptr) {
      state.overflow = true;
      return;
    }
    state.records = static_cast<Record*>(grown);
    state.capacity = capacity;
  }
  const dim3 grid = detail::grid_dim;  // as launched (max_grid_x applied)
  const uint3 b = t->block->idx;
  Record& r = state.records[state.count++];
  r.address = address;
  r.pc = reinterpret_cast<uint64_t>(pc);
  r.launch = state.launch_count - 1;
  r.block = static_cast<uint32_t>(b.x + uint64_t{b.y} * grid.x + uint64_t{b.z} * grid.x * grid.y);
  r.thread = static_cast<uint16_t>(t->linear);
  r.size = static_cast<uint16_t>(size > 0xffff ? 0xffff : size);
  r.flags = flags;
  r.buffer = static_cast<uint8_t>(buffer);
  r.unused = 0;
}

// Called by run_launch before its first block (grid: after max_grid_x).
inline void on_launch(const char* kernel, dim3 grid, dim3 block) {
  if (state.launch_count == kMaxLaunches) {
    state.overflow = true;
    return;
  }
  state.launches[state.launch_count++] = {kernel, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}};
}

}  // namespace simt::traffic

#define SIMT_TRAFFIC_HOOK extern "C" __attribute__((weak, used, no_sanitize_thread, noinline))

#define SIMT_TRAFFIC_ACCESS(N)                                                                      \
  SIMT_TRAFFIC_HOOK void __tsan_read##N(void* p) {                                                  \
    ::simt::traffic::record(p, N, 0, __builtin_return_address(0));                                  \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_write##N(void* p) {                                                 \
    ::simt::traffic::record(p, N, 1, __builtin_return_address(0));                                  \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_unaligned_read##N(void* p) {                                        \
    ::simt::traffic::record(p, N, 0, __builtin_return_address(0));                                  \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_unaligned_write##N(void* p) {                                       \
    ::simt::traffic::record(p, N, 1, __builtin_return_address(0));                                  \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_volatile_read##N(void* p) {                                         \
    ::simt::traffic::record(p, N, 0, __builtin_return_address(0));                                  \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_volatile_write##N(void* p) {                                        \
    ::simt::traffic::record(p, N, 1, __builtin_return_address(0));                                  \
  }
SIMT_TRAFFIC_ACCESS(1)
SIMT_TRAFFIC_ACCESS(2)
SIMT_TRAFFIC_ACCESS(4)
SIMT_TRAFFIC_ACCESS(8)
SIMT_TRAFFIC_ACCESS(16)
#undef SIMT_TRAFFIC_ACCESS

SIMT_TRAFFIC_HOOK void __tsan_read_range(void* p, unsigned long size) {
  ::simt::traffic::record(p, size, 0, __builtin_return_address(0));
}
SIMT_TRAFFIC_HOOK void __tsan_write_range(void* p, unsigned long size) {
  ::simt::traffic::record(p, size, 1, __builtin_return_address(0));
}
SIMT_TRAFFIC_HOOK void __tsan_init() {}
SIMT_TRAFFIC_HOOK void __tsan_func_entry(void*) {}
SIMT_TRAFFIC_HOOK void __tsan_func_exit() {}
SIMT_TRAFFIC_HOOK void __tsan_vptr_update(void**, void*) {}
SIMT_TRAFFIC_HOOK void __tsan_vptr_read(void**) {}
SIMT_TRAFFIC_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
SIMT_TRAFFIC_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// Atomics: done (sequentially consistent: one OS thread runs every fiber) and counted as a
// read and a write. A weak compare-and-swap is done as a strong one (allowed: weak may fail
// spuriously, it need not).
#define SIMT_TRAFFIC_ATOMIC_RMW(N, T, op, builtin)                                                  \
  SIMT_TRAFFIC_HOOK T __tsan_atomic##N##_##op(volatile T* a, T v, int) {                            \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 2, __builtin_return_address(0));        \
    return builtin(a, v, __ATOMIC_SEQ_CST);                                                         \
  }
#define SIMT_TRAFFIC_ATOMIC(N, T)                                                                   \
  SIMT_TRAFFIC_HOOK T __tsan_atomic##N##_load(const volatile T* a, int) {                           \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 0, __builtin_return_address(0));        \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK void __tsan_atomic##N##_store(volatile T* a, T v, int) {                        \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 1, __builtin_return_address(0));        \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                 \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, exchange, __atomic_exchange_n)                                      \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_add, __atomic_fetch_add)                                      \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_sub, __atomic_fetch_sub)                                      \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_and, __atomic_fetch_and)                                      \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_or, __atomic_fetch_or)                                        \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_xor, __atomic_fetch_xor)                                      \
  SIMT_TRAFFIC_ATOMIC_RMW(N, T, fetch_nand, __atomic_fetch_nand)                                    \
  SIMT_TRAFFIC_HOOK int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int,   \
                                                                   int) {                           \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 2, __builtin_return_address(0));        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int,     \
                                                                 int) {                             \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 2, __builtin_return_address(0));        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                 \
  SIMT_TRAFFIC_HOOK T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {  \
    ::simt::traffic::record(const_cast<const T*>(a), N / 8, 2, __builtin_return_address(0));        \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
    return c;                                                                                       \
  }
SIMT_TRAFFIC_ATOMIC(8, int8_t)
SIMT_TRAFFIC_ATOMIC(16, int16_t)
SIMT_TRAFFIC_ATOMIC(32, int32_t)
SIMT_TRAFFIC_ATOMIC(64, int64_t)
#undef SIMT_TRAFFIC_ATOMIC
#undef SIMT_TRAFFIC_ATOMIC_RMW

// ---- The Python side's entry points ------------------------------------------

// Start counting: forget earlier records and launches; count accesses to the
// `n` buffers [begin[i], end[i]).
SIMT_TRAFFIC_HOOK int simt_traffic_begin(int n, const uint64_t* begin, const uint64_t* end) {
  auto& s = ::simt::traffic::state;
  if (n < 0 || n > ::simt::traffic::kMaxBuffers) return 1;
  for (int i = 0; i < n; ++i) {
    s.begin[i] = begin[i];
    s.end[i] = end[i];
  }
  s.buffers = n;
  s.count = 0;
  s.launch_count = 0;
  s.overflow = false;
  return 0;
}

// The records since simt_traffic_begin (valid until the next begin).
SIMT_TRAFFIC_HOOK const ::simt::traffic::Record* simt_traffic_records(uint64_t* count) {
  *count = ::simt::traffic::state.count;
  return ::simt::traffic::state.records;
}

// The launches since simt_traffic_begin: how many, and the i-th one's kernel and geometry.
SIMT_TRAFFIC_HOOK uint32_t simt_traffic_launch_count() { return ::simt::traffic::state.launch_count; }
SIMT_TRAFFIC_HOOK const char* simt_traffic_launch(uint32_t i, unsigned* grid, unsigned* block) {
  const auto& l = ::simt::traffic::state.launches[i];
  for (int k = 0; k < 3; ++k) {
    grid[k] = l.grid[k];
    block[k] = l.block[k];
  }
  return l.kernel;
}
SIMT_TRAFFIC_HOOK int simt_traffic_overflow() { return ::simt::traffic::state.overflow; }
