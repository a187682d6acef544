// simt.h: a SIMT emulator that runs CUDA kernels (.cu sources, unchanged) on
// the CPU. Header-only C++20; needs g++, glibc (ucontext) and CUDA's
// cuda_fp16.h / cuda_bf16.h (host implementations of the half types).
//
// How it works. A launch runs the blocks of its grid one after another. The
// threads of a block are fibers on the calling OS thread (a hand-written
// x86-64 switch and stacks reused from block to block; ucontext elsewhere and
// under the sanitizers). A thread runs until it reaches a collective
// (__syncthreads, __syncwarp, a shuffle, a vote); the collective completes
// when every thread it names has arrived, and those threads then go on.
// Because threads only switch at collectives, the emulator knows, at every
// moment, where each thread of the block is, and can say what is wrong instead
// of hanging:
//
//   - a thread exits (or reaches another collective) while others wait for it
//     at a collective whose mask names it;
//   - a shuffle reads a lane outside its mask, or a lane calls a collective
//     whose mask does not name itself;
//   - not every thread of the block reaches the same __syncthreads;
//   - an invalid launch (more than 1024 threads per block, a zero or too
//     large grid or block dimension, too much dynamic shared memory).
//
// Each report names the kernel, the file:line of the collective (the .cu line:
// the rewrite of <<<>>> keeps line numbers), blockIdx and threadIdx, and is
// thrown as simt::Error from the launch.
//
// Sanitizers. Compiled with -fsanitize=address,undefined the fibers announce
// their stacks to AddressSanitizer; with -fsanitize=thread every thread of a
// block is a ThreadSanitizer fiber, switches carry no synchronisation, and
// only what CUDA orders is ordered: the launch before every thread, the
// threads of a barrier (or __syncwarp) before the threads after it, every
// thread before the end of the launch. Blocks are not ordered with each other.
//
// Limits (see README.md): g++ is not nvcc (no FMA contraction, __CUDA_ARCH__
// is undefined so host branches are taken), no memory model, no timing,
// registers or occupancy, no tensor cores, cp.async or TMA. It proves logic
// and memory safety, never speed; with SIMT_TRAFFIC (traffic.h) it counts the
// bytes of global memory a kernel moves.
#pragma once

// <memory> before anything defines __noinline__ (CUDA's headers, and the
// specifiers below): libstdc++ spells the attribute __attribute__((__noinline__)),
// which that macro would break. Its include guard then makes a kernel's own
// #include <memory> a no-op. (The emulator's builds also pass -include memory,
// for sources that include CUDA's headers before this one.)
#include <memory>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <source_location>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
// SIMT_TRAFFIC (the traffic counter) compiles with ThreadSanitizer's instrumentation but
// without its runtime: traffic.h stands in for it.
#if defined(__SANITIZE_THREAD__) && !defined(SIMT_TRAFFIC)
#define SIMT_TSAN 1
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

// Fast context switches. Without a sanitizer (whose fiber annotations are made
// for ucontext), on x86-64, a thread switch saves and restores only what the
// calling convention says a callee keeps (rbx, rbp, r12-r15, the stack pointer,
// MXCSR and the x87 control word): glibc's swapcontext also saves the signal
// mask, a system call per switch, which made a launch's cost that of its
// switches. Elsewhere, and under the sanitizers, ucontext as before.
#if !defined(SIMT_ASAN) && !defined(SIMT_TSAN) && defined(__x86_64__) && defined(__linux__) && \
    !defined(SIMT_UCONTEXT)
#define SIMT_FAST_SWITCH 1
// simt_switch_context(&save, load): saves the running context on its own stack,
// stores that stack pointer in *save, and resumes the context whose stack
// pointer is `load`. simt_fiber_start: where a new thread's first switch lands:
// it calls r12(rbx) (the thread's entry, with its Thread*).
asm(R"(
  .pushsection .text
  .weak simt_switch_context
  .hidden simt_switch_context
  .type simt_switch_context, @function
simt_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size simt_switch_context, .-simt_switch_context
  .weak simt_fiber_start
  .hidden simt_fiber_start
  .type simt_fiber_start, @function
simt_fiber_start:
  movq %rbx, %rdi
  callq *%r12
  ud2
  .size simt_fiber_start, .-simt_fiber_start
  .popsection
)");
extern "C" void simt_switch_context(void** save, void* load);
extern "C" void simt_fiber_start();
#endif

// ---- Declaration specifiers: their meaning on the emulator -----------------
#undef __host__
#undef __device__
#undef __global__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __launch_bounds__
#undef __forceinline__
#undef __noinline__
#undef __grid_constant__
#define __host__
#define __device__
#define __global__
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
// Declarations of __shared__ variables are rewritten (simt_rewrite.py) into
// per-block storage; one that is left (at namespace scope) fails to compile.
#define __shared__ static_assert(false, "simt: __shared__ variables are supported inside functions only");

// ---- The runtime API: CUDA's own types (driver_types.h) -------------------
#include <cuda_runtime_api.h>

inline constexpr int warpSize = 32;

namespace simt {

// ---- Options and errors -----------------------------------------------------

// independent: forward order, and __activemask() returns only the calling lane, an
// outcome Volta's independent thread scheduling allows wherever a warp may have
// diverged (a mask read from it names no other lane, so a shuffle over it that reads
// another lane is reported).
enum class Schedule { forward, reverse, random, independent };

struct Options {
  Schedule schedule = Schedule::forward;  // order of blocks, and of threads within a block
  uint64_t seed = 0;                      // for Schedule::random
  unsigned max_grid_x = 0;                // 0: none; else gridDim.x is capped (tests grid-stride loops)
  bool fill_shared = true;                // fill __shared__ memory with 0xff bytes (NaN) per block
  // GPU-like rules instead of the strict default, where hardware tolerates what CUDA's
  // programming guide does not promise: threads that have exited count as arrived at
  // __syncthreads, and a warp collective's mask may name lanes a partial warp does not have
  // (they are left out of it; a shuffle that reads one gets the caller's own value, which
  // a GPU leaves undefined).
  bool gpu_like = false;
};

inline Options& options() {
  static Options value;
  return value;
}

// A report: the launch or a thread of it broke a rule of CUDA.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The dynamic shared memory a launch may ask for without an opt-in (48 KiB),
// and the most any GPU gives (227 KiB, Hopper) with cudaFuncSetAttribute.
inline constexpr size_t kDefaultDynamicShared = 48 * 1024;
inline constexpr size_t kMaxDynamicShared = 227 * 1024;

namespace detail {

// Runtime code that threads (fibers) run touches the emulator's own state,
// which ThreadSanitizer must not take for the kernel's memory: it is ignored.
// (Defined below, once Thread is: it counts the thread's open scopes, so that
// a thread stopped inside one (a report) can close them.)
struct Internal {
#if defined(SIMT_TSAN)
  Internal();
  ~Internal();
#endif
};

enum class Kind : int {
  none,
  syncthreads,
  syncwarp,
  shfl,
  shfl_up,
  shfl_down,
  shfl_xor,
  ballot,
  any,
  all,
  activemask,
};

inline const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::syncthreads: return "__syncthreads()";
    case Kind::syncwarp: return "__syncwarp()";
    case Kind::shfl: return "__shfl_sync()";
    case Kind::shfl_up: return "__shfl_up_sync()";
    case Kind::shfl_down: return "__shfl_down_sync()";
    case Kind::shfl_xor: return "__shfl_xor_sync()";
    case Kind::ballot: return "__ballot_sync()";
    case Kind::any: return "__any_sync()";
    case Kind::all: return "__all_sync()";
    case Kind::activemask: return "__activemask()";
    default: return "nothing";
  }
}

enum class State { runnable, waiting, done };

// What a thread brought to the collective it waits at.
struct Arrival {
  Kind kind = Kind::none;
  std::source_location site;
  unsigned mask = 0;
  int width = 32;
  int arg = 0;  // srcLane, delta or laneMask
  int predicate = 0;
  size_t size = 0;  // of the shuffled value
  alignas(16) unsigned char value[32];
};

struct Block;

struct Thread {
#if defined(SIMT_FAST_SWITCH)
  void* sp = nullptr;  // the saved stack pointer while it does not run
#else
  ucontext_t context;
#endif
  void* stack = nullptr;
  size_t stack_size = 0;
  uint3 idx{0, 0, 0};
  unsigned linear = 0;  // x + y * bx + z * bx * by
  unsigned warp = 0, lane = 0;
  State state = State::runnable;
  Arrival arrival;
  alignas(16) unsigned char result[32];
  unsigned result_bits = 0;
  bool started = false;
  int ignores = 0;  // open Internal scopes (ThreadSanitizer)
  Block* block = nullptr;
#if defined(SIMT_ASAN)
  void* fake_stack = nullptr;
#endif
#if defined(SIMT_TSAN)
  void* tsan_fiber = nullptr;
  std::string name;
#endif
};

struct Launch;

struct Block {
  Launch* launch = nullptr;
  uint3 idx{0, 0, 0};
  std::vector<Thread> threads;
  unsigned warps = 0;
  std::string error;  // set: the block stops and the launch reports it
  // Per-block shared memory: static __shared__ variables and the dynamic part.
  struct Slot {
    const void* key;
    void* memory;
  };
  std::vector<Slot> shared;
  void* dynamic_shared = nullptr;
  char barrier_sync = 0;           // ThreadSanitizer's handle of the block barrier
  std::vector<char> warp_sync;     // ... and of each warp's __syncwarp
  // Counts that spare a scan of every thread at each arrival and exit (a scan per
  // thread made a block's cost grow with the square of its size): threads that
  // have exited, threads waiting at the current __syncthreads, and the first of them.
  unsigned exited = 0;
  unsigned barrier_waiting = 0;
  unsigned barrier_first = 0;
  unsigned activemask_waiting = 0;  // threads waiting at an __activemask() (the rendezvous)
  // Per warp: the lanes waiting at a warp collective, and the lanes that have exited.
  std::vector<unsigned> warp_waiting, warp_exited;
};

struct Launch {
  const char* kernel = "";
  std::source_location site;
  dim3 grid, block;
  size_t dynamic_shared = 0;
  std::function<void()>* body = nullptr;
  char begin_sync = 0, end_sync = 0;  // ThreadSanitizer: launch -> threads -> end
};

// The thread running now (null outside kernels), and the launch's geometry.
inline Thread* current = nullptr;
inline Block* current_block = nullptr;
inline Launch* current_launch = nullptr;
#if defined(SIMT_FAST_SWITCH)
inline void* scheduler_sp = nullptr;
// Thread stacks, reused from block to block (allocating and touching a fresh
// 128 KiB stack for every thread cost more than most kernels' work).
inline std::vector<void*> free_stacks;
// The floating-point control state a block's threads start with: the scheduler's.
inline uint64_t start_control_word = 0x37f, start_mxcsr = 0x1f80;
#else
inline ucontext_t scheduler_context;
#endif
inline uint3 block_idx{0, 0, 0};
inline dim3 block_dim{1, 1, 1};
inline dim3 grid_dim{1, 1, 1};
#if defined(SIMT_ASAN)
inline const void* scheduler_stack_bottom = nullptr;
inline size_t scheduler_stack_size = 0;
inline void* scheduler_fake_stack = nullptr;
#endif
#if defined(SIMT_TSAN)
inline void* scheduler_fiber = nullptr;
#endif

#if defined(SIMT_TRAFFIC)
}  // namespace detail
}  // namespace simt
#include "traffic.h"
namespace simt {
namespace detail {
#endif

#if defined(SIMT_TSAN)
inline Internal::Internal() {
  __tsan_ignore_thread_begin();
  if (current) ++current->ignores;
}
inline Internal::~Internal() {
  if (current) --current->ignores;
  __tsan_ignore_thread_end();
}
#endif

inline Thread& self_or_die(const char* what) {
  if (current == nullptr) {
    std::fprintf(stderr, "simt: %s called outside a kernel\n", what);
    std::abort();
  }
  return *current;
}

// A thread of `self`'s warp by lane (null: the warp has no such lane).
inline Thread* lane_thread(Thread& self, unsigned lane) {
  const unsigned linear = self.warp * 32 + lane;
  return linear < self.block->threads.size() ? &self.block->threads[linear] : nullptr;
}

// The mask a warp collective waits for: as passed, or, under the GPU-like rules, without
// the lanes a partial warp does not have.
inline unsigned arrival_mask(const Thread& self, unsigned mask) {
  if (!options().gpu_like) return mask;
  const size_t in_warp = self.block->threads.size() - size_t{self.warp} * 32;
  return in_warp >= 32 ? mask : mask & ((1u << in_warp) - 1u);
}

// ---- The runtime: the scheduler, collectives, reports --------------------------
// Header-only by default (inline, as above). The emulator's builds compile these once
// per build mode into an object of their own (SIMT_SEPARATE_RUNTIME; runtime.cpp defines
// SIMT_RUNTIME_DEFINITIONS too) and link it into every module: a kernel's translation
// unit then holds only the kernel, its launch glue and the templates it instantiates.
#if defined(SIMT_SEPARATE_RUNTIME) && !defined(SIMT_RUNTIME_DEFINITIONS)
std::string format_dim(const uint3& v);
std::string format_dim(const dim3& v);
std::string format_site(const std::source_location& s);
std::string hex_mask(unsigned mask);
std::string where(const Thread& t);
[[noreturn]] void fail(Thread& self, const std::string& message);
void warp_collective(Thread& self);
void block_barrier(Thread& self);
unsigned activemask_rendezvous(Thread& self);
void run_launch(Launch& launch);
#else
#if defined(SIMT_SEPARATE_RUNTIME)
#define SIMT_RUNTIME_FN
#else
#define SIMT_RUNTIME_FN inline
#endif

SIMT_RUNTIME_FN std::string format_dim(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}
SIMT_RUNTIME_FN std::string format_dim(const dim3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}
SIMT_RUNTIME_FN std::string format_site(const std::source_location& s) {
  return std::string(s.file_name()) + ":" + std::to_string(s.line());
}
SIMT_RUNTIME_FN std::string hex_mask(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

SIMT_RUNTIME_FN std::string where(const Thread& t) {
  return "blockIdx " + format_dim(t.block->idx) + ", threadIdx " + format_dim(t.idx);
}

SIMT_RUNTIME_FN std::string kernel_context() {
  if (current_launch == nullptr) return "";
  return " [kernel " + std::string(current_launch->kernel) + " launched at " +
         format_site(current_launch->site) + "]";
}

// Switch from the running thread back to the scheduler.
SIMT_RUNTIME_FN void to_scheduler(Thread& self, bool finished) {
#if defined(SIMT_TSAN)
  // What this thread did so far happens before the end of the launch (also
  // when the launch stops with a report and the thread never resumes).
  __tsan_release(&self.block->launch->end_sync);
  void* target;
  {
    [[maybe_unused]] Internal internal;
    target = scheduler_fiber;
  }
  __tsan_switch_to_fiber(target, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(SIMT_ASAN)
  __sanitizer_start_switch_fiber(finished ? nullptr : &self.fake_stack, scheduler_stack_bottom,
                                 scheduler_stack_size);
#endif
#if defined(SIMT_FAST_SWITCH)
  simt_switch_context(&self.sp, scheduler_sp);
#else
  swapcontext(&self.context, &scheduler_context);
#endif
#if defined(SIMT_ASAN)
  __sanitizer_finish_switch_fiber(self.fake_stack, nullptr, nullptr);
#endif
  (void)finished;
}

// Stop the block with a report; the thread never resumes.
[[noreturn]] SIMT_RUNTIME_FN void fail(Thread& self, const std::string& message) {
  {
    [[maybe_unused]] Internal internal;
    if (self.block->error.empty()) {
      self.block->error = message + kernel_context();
    }
    self.state = State::waiting;
  }
#if defined(SIMT_TSAN)
  // The scopes this thread is in are never left: close them for ThreadSanitizer,
  // which refuses to destroy a fiber that ignores accesses.
  for (; self.ignores > 0; --self.ignores) __tsan_ignore_thread_end();
#endif
  to_scheduler(self, false);
  std::abort();  // not reached: a failed block is never resumed
}

SIMT_RUNTIME_FN void thread_main(Thread& self);

SIMT_RUNTIME_FN std::string arrival_text(const Arrival& a) {
  std::string text = std::string(kind_name(a.kind)) + " at " + format_site(a.site);
  if (a.kind != Kind::syncthreads) text += " (mask " + hex_mask(a.mask) + ")";
  return text;
}

SIMT_RUNTIME_FN bool same_collective(const Arrival& a, const Arrival& b) {
  return a.kind == b.kind && a.site.line() == b.site.line() &&
         a.site.column() == b.site.column() &&
         (a.site.file_name() == b.site.file_name() ||
          std::strcmp(a.site.file_name(), b.site.file_name()) == 0);
}

// The lane of a completed shuffle that `t` reads, or -1 for its own value.
SIMT_RUNTIME_FN int shuffle_source(const Thread& t) {
  const Arrival& a = t.arrival;
  const int lane = static_cast<int>(t.lane);
  const int width = a.width;
  const int base = lane & ~(width - 1);
  switch (a.kind) {
    case Kind::shfl:
      return base + (a.arg & (width - 1));
    case Kind::shfl_up:
      return (lane - base) >= a.arg ? lane - a.arg : -1;
    case Kind::shfl_down:
      return (lane - base) + a.arg < width ? lane + a.arg : -1;
    case Kind::shfl_xor: {
      const int source = lane ^ a.arg;
      return (source >= base + width || source < 0 || source >= 32) ? -1 : source;
    }
    default:
      return -1;
  }
}

// Completes the collective all lanes of `mask` in self's warp have reached.
SIMT_RUNTIME_FN void complete_warp_collective(Thread& self) {
  const Arrival& mine = self.arrival;
  unsigned ballot = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (mine.mask & (1u << lane)) {
      if (lane_thread(self, lane)->arrival.predicate) ballot |= 1u << lane;
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(mine.mask & (1u << lane))) continue;
    Thread& t = *lane_thread(self, lane);
    switch (mine.kind) {
      case Kind::ballot:
        t.result_bits = ballot;
        break;
      case Kind::any:
        t.result_bits = ballot != 0;
        break;
      case Kind::all:
        t.result_bits = ballot == mine.mask;
        break;
      case Kind::syncwarp:
        break;
      default: {  // shuffles
        int source = shuffle_source(t);
        // GPU-like rules: a lane the partial warp does not have gives the caller's own value.
        if (source >= 0 && options().gpu_like && lane_thread(self, source) == nullptr) source = -1;
        if (source >= 0 && !(mine.mask & (1u << source))) {
          fail(self, format_site(t.arrival.site) + ": " + kind_name(mine.kind) + " in lane " +
                         std::to_string(lane) + " (" + where(t) + ") reads lane " +
                         std::to_string(source) + ", which is not in its mask " +
                         hex_mask(mine.mask) + ": the value is undefined");
        }
        const Thread& from = source >= 0 ? *lane_thread(self, source) : t;
        std::memcpy(t.result, from.arrival.value, t.arrival.size);
      }
    }
    if (&t != &self) t.state = State::runnable;
  }
}

// The checks every collective of a warp makes on arrival.
SIMT_RUNTIME_FN void check_warp_arrival(Thread& self) {
  const Arrival& mine = self.arrival;
  // Built only for a report (an arrival is checked at every collective).
  const auto here = [&] {
    return format_site(mine.site) + ": " + kind_name(mine.kind) + " in " + where(self);
  };
  if (mine.width < 1 || mine.width > 32 || (mine.width & (mine.width - 1)) != 0) {
    fail(self, here() + ": width " + std::to_string(mine.width) +
                   " is not a power of two between 1 and 32");
  }
  if (!(mine.mask & (1u << self.lane))) {
    fail(self, here() + ": lane " + std::to_string(self.lane) + " is not in the mask " +
                   hex_mask(mine.mask) + " it passes (a lane must name itself)");
  }
  // Nothing to report, known without the scan below: every lane the mask names exists
  // and has not exited, nobody is at a barrier, every lane waiting at a warp collective
  // is named, and the first of them waits at this collective with this mask and size
  // (lanes that name each other wait at the same collective: each arrival is checked).
  {
    const Block& block = *self.block;
    const size_t in_warp = block.threads.size() - size_t{self.warp} * 32;
    const unsigned present = in_warp >= 32 ? 0xffffffffu : (1u << in_warp) - 1u;
    const unsigned waiting = block.warp_waiting[self.warp];
    if ((mine.mask & ~present) == 0 && (mine.mask & block.warp_exited[self.warp]) == 0 &&
        block.barrier_waiting == 0 && (waiting & ~mine.mask) == 0) {
      if (waiting == 0) return;
      const Arrival& first = block.threads[self.warp * 32 + __builtin_ctz(waiting)].arrival;
      if (same_collective(first, mine) && first.mask == mine.mask && first.size == mine.size) {
        return;
      }
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    Thread* other = lane_thread(self, lane);
    const bool named = mine.mask & (1u << lane);
    if (other == nullptr) {
      if (named) {
        fail(self, here() + ": the mask " + hex_mask(mine.mask) + " names lane " +
                       std::to_string(lane) + ", which does not exist: the block has " +
                       std::to_string(self.block->threads.size()) +
                       " threads, so this warp is partial");
      }
      continue;
    }
    if (other == &self) continue;
    if (named && other->state == State::done) {
      fail(self, here() + " waits for lane " + std::to_string(lane) + " (threadIdx " +
                     format_dim(other->idx) + "), which has exited the kernel: the collective " +
                     "would never complete");
    }
    // (A lane at an __activemask() goes on once this one waits, as a runnable lane would.)
    if (other->state != State::waiting || other->arrival.kind == Kind::activemask) continue;
    const bool names_me = other->arrival.kind != Kind::syncthreads &&
                          (other->arrival.mask & (1u << self.lane));
    if (!named && !names_me) continue;
    if (other->arrival.kind == Kind::syncthreads) {
      fail(self, here() + " waits for lane " + std::to_string(lane) + " (threadIdx " +
                     format_dim(other->idx) + "), which waits at __syncthreads() at " +
                     format_site(other->arrival.site) + ": the warp diverged between collectives");
    }
    if (!same_collective(other->arrival, mine)) {
      fail(self, here() + " diverged: lane " + std::to_string(lane) + " (threadIdx " +
                     format_dim(other->idx) + ") waits at " + arrival_text(other->arrival) +
                     " for this lane, which reached " + arrival_text(mine) + " instead");
    }
    if (other->arrival.mask != mine.mask) {
      fail(self, here() + ": lanes disagree on the mask: lane " + std::to_string(self.lane) +
                     " passes " + hex_mask(mine.mask) + ", lane " + std::to_string(lane) +
                     " passes " + hex_mask(other->arrival.mask));
    }
    if (other->arrival.size != mine.size) {
      fail(self, here() + ": lanes shuffle values of different sizes (" +
                     std::to_string(mine.size) + " and " + std::to_string(other->arrival.size) +
                     " bytes)");
    }
  }
}

SIMT_RUNTIME_FN void tsan_release(void* sync) {
#if defined(SIMT_TSAN)
  __tsan_release(sync);
#endif
  (void)sync;
}
SIMT_RUNTIME_FN void tsan_acquire(void* sync) {
#if defined(SIMT_TSAN)
  __tsan_acquire(sync);
#endif
  (void)sync;
}

// A warp collective: wait until every lane of the mask has arrived.
SIMT_RUNTIME_FN void warp_collective(Thread& self) {
  const bool orders_memory = self.arrival.kind == Kind::syncwarp;
  void* sync = &self.block->warp_sync[self.warp];
  if (orders_memory) tsan_release(sync);
  {
    [[maybe_unused]] Internal internal;
    check_warp_arrival(self);
    // The lanes of the mask waiting here (check_warp_arrival made sure that every
    // waiting lane the mask names waits at this very collective).
    unsigned& waiting = self.block->warp_waiting[self.warp];
    const unsigned arrived = (waiting & self.arrival.mask) | (1u << self.lane);
    if (arrived == self.arrival.mask) {
      complete_warp_collective(self);
      waiting &= ~self.arrival.mask;
      self.arrival.kind = Kind::none;
    } else {
      waiting |= 1u << self.lane;
      self.state = State::waiting;
    }
  }
  if (self.state == State::waiting) to_scheduler(self, false);
  if (orders_memory) tsan_acquire(sync);
}

// Every thread that has not exited is at the barrier: each goes on, with the barrier's
// count of true predicates (__syncthreads_count and friends).
SIMT_RUNTIME_FN void release_barrier(Block& block, Thread* self) {
  int count = 0;
  for (Thread& other : block.threads) {
    if (other.state != State::done) count += other.arrival.predicate != 0;
  }
  for (Thread& other : block.threads) {
    if (other.state == State::done) continue;
    other.result_bits = static_cast<unsigned>(count);
    other.arrival.kind = Kind::none;
    if (&other != self) other.state = State::runnable;
  }
  block.barrier_waiting = 0;
}

// __syncthreads: every thread of the block, at the same barrier.
SIMT_RUNTIME_FN void block_barrier(Thread& self) {
  tsan_release(&self.block->barrier_sync);
  {
    [[maybe_unused]] Internal internal;
    const auto here = [&] {  // built only for a report
      return format_site(self.arrival.site) + ": __syncthreads() in " + where(self);
    };
    Block& block = *self.block;
    // Something to report: an exited thread, a lane of this warp waiting for this one
    // at a warp collective, or waiters at another barrier. Only then the scan below,
    // which names the first culprit in thread order.
    const bool gpu_like = options().gpu_like;  // exited threads count as arrived
    bool report = (block.exited > 0 && !gpu_like) ||
                  (block.barrier_waiting > 0 &&
                   !same_collective(block.threads[block.barrier_first].arrival, self.arrival));
    for (unsigned lane = 0; lane < 32 && !report; ++lane) {
      const Thread* other = lane_thread(self, lane);
      report = other != nullptr && other != &self && other->state == State::waiting &&
               other->arrival.kind != Kind::syncthreads &&
               (other->arrival.mask & (1u << self.lane));
    }
    size_t arrived = 1 + block.barrier_waiting;
    for (Thread& other : block.threads) {
      if (!report) break;
      if (&other == &self) continue;
      if (other.state == State::done && !gpu_like) {
        fail(self, here() + " waits for threadIdx " + format_dim(other.idx) +
                       ", which has exited the kernel: not every thread of the block reaches "
                       "this barrier");
      }
      if (other.state != State::waiting) continue;
      if (other.arrival.kind != Kind::syncthreads) {
        if (other.warp == self.warp && (other.arrival.mask & (1u << self.lane))) {
          fail(self, here() + ": lane " + std::to_string(self.lane) + " diverged: lane " +
                         std::to_string(other.lane) + " (threadIdx " + format_dim(other.idx) +
                         ") waits for it at " + arrival_text(other.arrival));
        }
        continue;
      }
      if (!same_collective(other.arrival, self.arrival)) {
        fail(self, here() + ": threads of the block reach different barriers: threadIdx " +
                       format_dim(other.idx) + " waits at __syncthreads() at " +
                       format_site(other.arrival.site));
      }
    }
    if (arrived + (gpu_like ? block.exited : 0) == block.threads.size()) {
      release_barrier(block, &self);
    } else {
      if (block.barrier_waiting++ == 0) block.barrier_first = self.linear;
      self.state = State::waiting;
    }
  }
  if (self.state == State::waiting) to_scheduler(self, false);
  tsan_acquire(&self.block->barrier_sync);
}

// __activemask() outside the independent schedule: a rendezvous. The thread waits until
// no lane of its warp can run (each has exited, waits at a collective or at an
// __activemask()); the lanes waiting at this same __activemask() then go on together,
// each with their mask, as the lanes a GPU runs converged there would. Lanes that took
// another branch, wait elsewhere or have exited are not in it. (The scheduler completes
// rendezvous when no thread of the block can run: release_activemask.)
SIMT_RUNTIME_FN unsigned activemask_rendezvous(Thread& self) {
  {
    [[maybe_unused]] Internal internal;
    ++self.block->activemask_waiting;
    self.state = State::waiting;
  }
  to_scheduler(self, false);
  [[maybe_unused]] Internal internal;
  return self.result_bits;
}

// No thread of the block can run: each group of lanes of a warp waiting at the same
// __activemask() goes on with the group's mask. Whether any went on.
SIMT_RUNTIME_FN bool release_activemask(Block& block) {
  if (block.activemask_waiting == 0) return false;
  const auto waits_at = [](const Thread& t, const Arrival& site) {
    return t.state == State::waiting && t.arrival.kind == Kind::activemask &&
           same_collective(t.arrival, site);
  };
  for (unsigned warp = 0; warp < block.warps; ++warp) {
    Thread* lanes = block.threads.data() + size_t{warp} * 32;
    const size_t count = std::min<size_t>(32, block.threads.size() - size_t{warp} * 32);
    for (size_t lane = 0; lane < count; ++lane) {
      if (!waits_at(lanes[lane], lanes[lane].arrival)) continue;
      const Arrival site = lanes[lane].arrival;  // the group: lanes waiting at this call
      unsigned group = 0;
      for (size_t other = lane; other < count; ++other) {
        if (waits_at(lanes[other], site)) group |= 1u << other;
      }
      for (size_t other = lane; other < count; ++other) {
        if (!(group & (1u << other))) continue;
        lanes[other].result_bits = group;
        lanes[other].arrival.kind = Kind::none;
        lanes[other].state = State::runnable;
        --block.activemask_waiting;
      }
    }
  }
  return true;
}

// A thread leaves the kernel: nobody may be waiting for it.
SIMT_RUNTIME_FN void on_exit(Thread& self) {
  [[maybe_unused]] Internal internal;
  // With nobody at a barrier, only lanes of this warp can be waiting for this one; with
  // none of them waiting at a warp collective either, nobody is.
  const bool barrier = self.block->barrier_waiting > 0;
  if (barrier || self.block->warp_waiting[self.warp] != 0) {
    Thread* first = barrier ? self.block->threads.data() : lane_thread(self, 0);
    Thread* last = barrier ? first + self.block->threads.size()
                           : first + std::min<size_t>(32, self.block->threads.size() - self.warp * 32);
    for (Thread* t = first; t != last; ++t) {
      Thread& other = *t;
      if (other.state != State::waiting) continue;
      if (other.arrival.kind == Kind::syncthreads) {
        if (options().gpu_like) continue;  // this thread counts as arrived (below)
        fail(self, format_site(other.arrival.site) + ": __syncthreads() in " + where(other) +
                       " waits for threadIdx " + format_dim(self.idx) +
                       ", which exited the kernel: not every thread of the block reaches this "
                       "barrier");
      }
      if (other.warp == self.warp && (other.arrival.mask & (1u << self.lane))) {
        fail(self, format_site(other.arrival.site) + ": " + kind_name(other.arrival.kind) +
                       " in " + where(other) + " (mask " + hex_mask(other.arrival.mask) +
                       ") waits for lane " + std::to_string(self.lane) + " (threadIdx " +
                       format_dim(self.idx) + "), which exited the kernel instead");
      }
    }
  }
  self.state = State::done;
  ++self.block->exited;
  self.block->warp_exited[self.warp] |= 1u << self.lane;
  // GPU-like rules: the last thread the barrier waited for has left.
  Block& block = *self.block;
  if (options().gpu_like && block.barrier_waiting > 0 &&
      block.barrier_waiting + block.exited == block.threads.size()) {
    release_barrier(block, nullptr);
  }
}

SIMT_RUNTIME_FN void thread_main(Thread& self) {
#if defined(SIMT_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
  tsan_acquire(&self.block->launch->begin_sync);
  std::string error;
  try {
    (*self.block->launch->body)();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an exception";
  }
  if (!error.empty()) {
    fail(self, "threw " + error + " in " + where(self));
  }
  on_exit(self);
  to_scheduler(self, true);
  std::abort();  // a finished thread is never resumed
}

// Where a thread starts: ucontext passes ints, so its Thread* comes in halves.
SIMT_RUNTIME_FN void entry(unsigned high, unsigned low) {
  thread_main(*reinterpret_cast<Thread*>((static_cast<uintptr_t>(high) << 32) | low));
}
#if defined(SIMT_FAST_SWITCH)
SIMT_RUNTIME_FN void fiber_entry(Thread* self) { thread_main(*self); }
#endif

SIMT_RUNTIME_FN size_t stack_size() {
#if defined(SIMT_ASAN)
  return size_t{512} << 10;
#else
  return size_t{128} << 10;
#endif
}

SIMT_RUNTIME_FN void run_thread(Thread& t) {
  current = &t;
#if defined(SIMT_TSAN)
  __tsan_switch_to_fiber(t.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(SIMT_ASAN)
  __sanitizer_start_switch_fiber(&scheduler_fake_stack, t.stack, t.stack_size);
#endif
#if defined(SIMT_FAST_SWITCH)
  simt_switch_context(&scheduler_sp, t.sp);
#else
  swapcontext(&scheduler_context, &t.context);
#endif
#if defined(SIMT_ASAN)
  __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
  current = nullptr;
}

// A thread's stack: a fresh one under the sanitizers (their view of a stack
// starts with its allocation), else one from the pool when there is one.
SIMT_RUNTIME_FN void* new_stack() {
#if defined(SIMT_FAST_SWITCH)
  if (!free_stacks.empty()) {
    void* stack = free_stacks.back();
    free_stacks.pop_back();
    return stack;
  }
  // A page the thread may not touch below its stack: recursing past the stack's end
  // crashes there (the crash report names the thread) instead of corrupting the heap.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapping = mmap(nullptr, stack_size() + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return nullptr;
  mprotect(mapping, page, PROT_NONE);
  return static_cast<char*>(mapping) + page;
#else
  return std::malloc(stack_size());
#endif
}

SIMT_RUNTIME_FN void release_stack(void* stack) {
#if defined(SIMT_FAST_SWITCH)
  if (stack != nullptr) free_stacks.push_back(stack);
#else
  std::free(stack);
#endif
}

// Make t start at thread_main when it first runs.
SIMT_RUNTIME_FN void prepare_start(Thread& t) {
#if defined(SIMT_FAST_SWITCH)
  // The frame simt_switch_context pops: x87 control word and MXCSR (the
  // scheduler's), r15, r14, r13, r12 (fiber_entry), rbx (&t), rbp, and the
  // return address (simt_fiber_start); it leaves the stack pointer 16-byte
  // aligned at simt_fiber_start's call, as the ABI wants.
  auto top = (reinterpret_cast<uintptr_t>(t.stack) + t.stack_size) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 88);
  frame[0] = start_control_word;  // the scheduler's, read when the block started
  frame[1] = start_mxcsr;
  frame[2] = 0;                                          // r15
  frame[3] = 0;                                          // r14
  frame[4] = 0;                                          // r13
  frame[5] = reinterpret_cast<uint64_t>(&fiber_entry);   // r12
  frame[6] = reinterpret_cast<uint64_t>(&t);             // rbx
  frame[7] = 0;                                          // rbp
  frame[8] = reinterpret_cast<uint64_t>(&simt_fiber_start);
  t.sp = frame;
#else
  getcontext(&t.context);
  t.context.uc_stack.ss_sp = t.stack;
  t.context.uc_stack.ss_size = t.stack_size;
  t.context.uc_link = nullptr;
  const uintptr_t address = reinterpret_cast<uintptr_t>(&t);
  makecontext(&t.context, reinterpret_cast<void (*)()>(&entry), 2,
              static_cast<unsigned>(address >> 32), static_cast<unsigned>(address));
#endif
}

SIMT_RUNTIME_FN void free_block(Block& block) {
  for (Thread& t : block.threads) {
#if defined(SIMT_TSAN)
    if (t.tsan_fiber) __tsan_destroy_fiber(t.tsan_fiber);
#endif
    release_stack(t.stack);
    t.stack = nullptr;
  }
  for (auto& slot : block.shared) std::free(slot.memory);
  std::free(block.dynamic_shared);
  block.threads.clear();
  block.shared.clear();
  block.dynamic_shared = nullptr;
}

SIMT_RUNTIME_FN std::string describe_deadlock(Block& block) {
  std::string text = "deadlock in blockIdx " + format_dim(block.idx) +
                     ": no thread can go on, and these wait:";
  int listed = 0;
  for (Thread& t : block.threads) {
    if (t.state != State::waiting) continue;
    if (++listed > 8) {
      text += "\n  ...";
      break;
    }
    text += "\n  threadIdx " + format_dim(t.idx) + " at " + arrival_text(t.arrival);
  }
  return text;
}

SIMT_RUNTIME_FN void run_block(Launch& launch, Block& block, std::mt19937_64& rng) {
  const dim3 b = launch.block;
  const unsigned n = b.x * b.y * b.z;
  block.launch = &launch;
  block.threads.assign(n, Thread{});
  block.warps = (n + 31) / 32;
  block.warp_sync.assign(block.warps, 0);
  block.error.clear();
  block.exited = block.barrier_waiting = block.barrier_first = block.activemask_waiting = 0;
  block.warp_waiting.assign(block.warps, 0);
  block.warp_exited.assign(block.warps, 0);
#if defined(SIMT_FAST_SWITCH)
  {
    uint16_t word;
    asm volatile("fnstcw %0" : "=m"(word));
    start_control_word = word;
    start_mxcsr = __builtin_ia32_stmxcsr();
  }
#endif
  if (launch.dynamic_shared > 0) {
    block.dynamic_shared = std::aligned_alloc(16, (launch.dynamic_shared + 15) / 16 * 16);
    if (options().fill_shared) std::memset(block.dynamic_shared, 0xff, launch.dynamic_shared);
  }
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = block.threads[i];
    t.block = &block;
    t.linear = i;
    t.idx = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    t.warp = i / 32;
    t.lane = i % 32;
    t.stack_size = stack_size();
    t.stack = new_stack();
    if (t.stack == nullptr) throw Error("simt: out of memory for thread stacks");
    prepare_start(t);
#if defined(SIMT_TSAN)
    t.tsan_fiber = __tsan_create_fiber(0);
    t.name = "blockIdx " + format_dim(block.idx) + " threadIdx " + format_dim(t.idx);
    __tsan_set_fiber_name(t.tsan_fiber, t.name.c_str());
#endif
  }
  std::vector<unsigned> order(n);
  for (unsigned i = 0; i < n; ++i) order[i] = i;
  if (options().schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
  block_idx = block.idx;
  current_block = &block;
  bool progress = true;
  while (progress && block.error.empty()) {
    progress = false;
    if (options().schedule == Schedule::random) std::shuffle(order.begin(), order.end(), rng);
    for (unsigned i : order) {
      Thread& t = block.threads[i];
      if (t.state != State::runnable) continue;
      run_thread(t);
      progress = true;
      if (!block.error.empty()) break;
    }
    if (!progress && block.error.empty()) progress = release_activemask(block);
  }
  current_block = nullptr;
  std::string error = block.error;
  if (error.empty()) {
    for (Thread& t : block.threads) {
      if (t.state != State::done) {
        error = describe_deadlock(block) + kernel_context();
        break;
      }
    }
  }
  free_block(block);
  if (!error.empty()) throw Error("simt: " + error);
}

SIMT_RUNTIME_FN void check_launch(const Launch& launch) {
  const dim3 g = launch.grid, b = launch.block;
  std::string problem;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (g.x == 0 || g.y == 0 || g.z == 0) {
    problem = "the grid " + format_dim(g) + " has a zero dimension";
  } else if (b.x == 0 || b.y == 0 || b.z == 0) {
    problem = "the block " + format_dim(b) + " has a zero dimension";
  } else if (threads > 1024) {
    problem = "the block " + format_dim(b) + " has " + std::to_string(threads) +
              " threads; at most 1024 are allowed";
  } else if (b.x > 1024 || b.y > 1024 || b.z > 64) {
    problem = "the block " + format_dim(b) + " exceeds the limits (1024, 1024, 64)";
  } else if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    problem = "the grid " + format_dim(g) + " exceeds the limits (2^31 - 1, 65535, 65535)";
  } else if (launch.dynamic_shared > kMaxDynamicShared) {
    problem = std::to_string(launch.dynamic_shared) +
              " bytes of dynamic shared memory is more than any GPU has (" +
              std::to_string(kMaxDynamicShared) + ")";
  }
  if (!problem.empty()) {
    throw Error("simt: " + format_site(launch.site) + ": invalid launch of " + launch.kernel +
                ": " + problem + " (CUDA: cudaErrorInvalidConfiguration)");
  }
}

SIMT_RUNTIME_FN void install_crash_handler();

// Runs every block of a launch; throws Error with the first report.
SIMT_RUNTIME_FN void run_launch(Launch& launch) {
  check_launch(launch);
  install_crash_handler();
  if (current != nullptr) {
    throw Error("simt: " + format_site(launch.site) + ": a kernel launch from inside a kernel (" +
                "dynamic parallelism) is not supported by the emulator");
  }
  dim3 grid = launch.grid;
  if (options().max_grid_x != 0 && grid.x > options().max_grid_x) grid.x = options().max_grid_x;
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  std::vector<uint64_t> order;
  std::mt19937_64 rng(options().seed);
  const bool reorder = options().schedule == Schedule::reverse || options().schedule == Schedule::random;
  if (reorder) {
    order.resize(blocks);
    for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
    if (options().schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
    else std::shuffle(order.begin(), order.end(), rng);
  }
#if defined(SIMT_TSAN)
  // The scheduler's own accesses are not the kernel's: ignored from here on.
  __tsan_ignore_thread_begin();
  scheduler_fiber = __tsan_get_current_fiber();
  __tsan_release(&launch.begin_sync);
#endif
  current_launch = &launch;
  grid_dim = grid;
  block_dim = launch.block;
#if defined(SIMT_TRAFFIC)
  ::simt::traffic::on_launch(launch.kernel, grid, launch.block);
#endif
  struct Reset {
    Launch& launch;
    ~Reset() {
      current_launch = nullptr;
#if defined(SIMT_TSAN)
      __tsan_acquire(&launch.end_sync);  // every thread, before what follows the launch
      __tsan_ignore_thread_end();
#endif
      (void)launch;
    }
  } reset{launch};
  Block block;
  for (uint64_t k = 0; k < blocks; ++k) {
    const uint64_t i = reorder ? order[k] : k;
    block.idx = uint3{static_cast<unsigned>(i % grid.x),
                      static_cast<unsigned>((i / grid.x) % grid.y),
                      static_cast<unsigned>(i / (uint64_t{grid.x} * grid.y))};
    run_block(launch, block, rng);
  }
}

// Fast mode: a crash (an out-of-bounds access the hardware catches, a
// misaligned 16-byte load compiled to movaps) names the thread before dying.
SIMT_RUNTIME_FN void crash_handler(int signal_number) {
  char text[512];
  if (current != nullptr && current_launch != nullptr) {
    std::snprintf(text, sizeof text,
                  "simt: signal %d in kernel %s (launched at %s:%u), blockIdx (%u,%u,%u), "
                  "threadIdx (%u,%u,%u); build in memory mode for the exact line\n",
                  signal_number, current_launch->kernel, current_launch->site.file_name(),
                  current_launch->site.line(), current->block->idx.x, current->block->idx.y,
                  current->block->idx.z, current->idx.x, current->idx.y, current->idx.z);
    ssize_t ignored = write(2, text, std::strlen(text));
    (void)ignored;
  }
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

SIMT_RUNTIME_FN void death_callback() {
  if (current != nullptr && current_launch != nullptr) {
    std::fprintf(stderr,
                 "simt: the report above is from kernel %s (launched at %s:%u), blockIdx "
                 "(%u,%u,%u), threadIdx (%u,%u,%u)\n",
                 current_launch->kernel, current_launch->site.file_name(),
                 current_launch->site.line(), current->block->idx.x, current->block->idx.y,
                 current->block->idx.z, current->idx.x, current->idx.y, current->idx.z);
  }
}

SIMT_RUNTIME_FN void install_crash_handler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
#if defined(SIMT_ASAN) || defined(SIMT_TSAN)
  __sanitizer_set_death_callback(&death_callback);
#else
  // Signals on an alternate stack: a fiber's stack may be what overflowed.
  static std::vector<char> alternate(1 << 16);
  stack_t st{};
  st.ss_sp = alternate.data();
  st.ss_size = alternate.size();
  sigaltstack(&st, nullptr);
  struct sigaction action {};
  action.sa_handler = &crash_handler;
  action.sa_flags = SA_ONSTACK;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
#endif
}

#undef SIMT_RUNTIME_FN
#endif  // the runtime

// A 16-bit type from its bits (half-precision kernel arguments from Python).
template <typename T>
T from_bits(unsigned short bits) {
  static_assert(sizeof(T) == 2);
  T value;
  std::memcpy(static_cast<void*>(&value), &bits, 2);
  return value;
}

// A number from Python for a kernel parameter whose type only the compiler knows (a
// typedef such as `uint`, an enum, a template argument): the launch glue converts it to
// the parameter's type, and refuses a value that does not fit and a type that is not a
// number.
struct Number {
  double real;              // the value (rounded, if it came as a large int)
  unsigned long long bits;  // the value modulo 2^64, if it came as an int
  int is_real;              // it came as a float
  int negative;
};

template <typename T>
inline constexpr bool is_number_v =
    std::is_arithmetic_v<T> || std::is_enum_v<T> ||
    (std::is_constructible_v<T, float> && !std::is_aggregate_v<T>);  // __half, __nv_bfloat16

template <typename T>
T from_number(const Number& n, const char* kernel, const char* parameter, const char* type) {
  const auto refuse = [&](const std::string& why) {
    return Error(std::string("simt: ") + kernel + ": parameter " + parameter + " (" + type +
                 ") " + why);
  };
  if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    using I = std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>,
                                 std::type_identity<T>>::type;
    if (n.is_real) throw refuse("is an integer type; got a float from Python");
    const auto low = static_cast<long long>(std::numeric_limits<I>::min());
    const auto high = static_cast<unsigned long long>(std::numeric_limits<I>::max());
    const bool fits = n.negative ? static_cast<long long>(n.bits) >= low : n.bits <= high;
    if (!fits) {
      const std::string value = n.negative ? std::to_string(static_cast<long long>(n.bits))
                                           : std::to_string(n.bits);
      throw refuse("cannot hold " + value + " (it holds " + std::to_string(low) + " to " +
                   std::to_string(high) + ")");
    }
    return static_cast<T>(static_cast<I>(n.bits));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(n.real);
  } else if constexpr (is_number_v<T>) {
    return T(static_cast<float>(n.real));
  } else {
    throw refuse(
        "is not a number: from Python the emulator passes numbers and tensors (pointers); "
        "launch this kernel from a C++ host function of the source instead");
  }
}

template <typename T>
T* shared_memory(const void* key, size_t size, size_t alignment,
                 const std::source_location& site) {
  Thread* t = current;
  if (t == nullptr) {
    std::fprintf(stderr,
                 "simt: %s: a __shared__ variable used outside a kernel (at namespace scope?): "
                 "the emulator supports __shared__ variables declared inside functions\n",
                 format_site(site).c_str());
    std::abort();
  }
  [[maybe_unused]] Internal internal;
  for (auto& slot : t->block->shared) {
    if (slot.key == key) return static_cast<T*>(slot.memory);
  }
  const size_t a = alignment < 16 ? 16 : alignment;
  void* memory = std::aligned_alloc(a, (size + a - 1) / a * a);
  if (options().fill_shared) std::memset(memory, 0xff, size);
  t->block->shared.push_back({key, memory});
  return static_cast<T*>(memory);
}

}  // namespace detail

// ---- Launch: what kernel<<<grid, block, shared, stream>>>(args) becomes -----

template <typename Body>
struct Launcher {
  const char* kernel;
  std::source_location site;
  Body body;
  dim3 grid, block;
  size_t shared;

  template <typename... Args>
  void operator()(Args&&... args) {
    std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
    std::function<void()> run = [&] {
      // Each thread gets its own copies of the arguments, as in CUDA.
      std::apply([&](const auto&... v) { body(v...); }, values);
    };
    detail::Launch launch;
    launch.kernel = kernel;
    launch.site = site;
    launch.grid = grid;
    launch.block = block;
    launch.dynamic_shared = shared;
    launch.body = &run;
    detail::run_launch(launch);
  }
};

struct Site {
  const char* file;
  unsigned line;
};

template <typename Body>
Launcher<Body> launch(const char* kernel, Body body, dim3 grid, dim3 block, size_t shared = 0,
                      cudaStream_t stream = nullptr,
                      std::source_location site = std::source_location::current()) {
  (void)stream;  // one stream: launches run in order, to completion
  return Launcher<Body>{kernel, site, std::move(body), grid, block, shared};
}

// Storage of a __shared__ variable (the rewrite of `__shared__ T name[N];`).
template <typename T, size_t Alignment = alignof(T), typename Tag>
T& shared_variable(Tag, std::source_location site = std::source_location::current()) {
  static const char key = 0;
  return *detail::shared_memory<T>(&key, sizeof(T), Alignment, site);
}

// The block's dynamic shared memory (`extern __shared__ T name[];`).
template <typename T>
T* dynamic_shared(std::source_location site = std::source_location::current()) {
  detail::Thread* t = detail::current;
  if (t == nullptr) {
    std::fprintf(stderr, "simt: %s: extern __shared__ used outside a kernel\n",
                 detail::format_site(site).c_str());
    std::abort();
  }
  return static_cast<T*>(t->block->dynamic_shared);
}

// For readers and tests: a global setting that modes and tests change.
inline void configure(Schedule schedule, uint64_t seed, unsigned max_grid_x,
                      bool gpu_like = false) {
  options().schedule = schedule;
  options().seed = seed;
  options().max_grid_x = max_grid_x;
  options().gpu_like = gpu_like;
}

}  // namespace simt

// ---- Built-in variables ------------------------------------------------------
// blockIdx, blockDim and gridDim are variables of the global namespace, read-only as in
// CUDA, bound to the running launch's values: not macros, so a host function's own
// `dim3 blockDim(256)`, or a parameter named so in a header (torch's, cuSPARSE's), declares
// a name of its own. threadIdx depends on the running thread, so it stays a macro.
#define threadIdx (::simt::detail::self_or_die("threadIdx").idx)
inline const uint3& blockIdx = ::simt::detail::block_idx;
inline const dim3& blockDim = ::simt::detail::block_dim;
inline const dim3& gridDim = ::simt::detail::grid_dim;

// ---- Barriers, warp shuffles and votes ----------------------------------------

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  auto& self = ::simt::detail::self_or_die("__syncthreads");
  {
    [[maybe_unused]] ::simt::detail::Internal internal;
    self.arrival = {};
    self.arrival.kind = ::simt::detail::Kind::syncthreads;
    self.arrival.site = site;
  }
  ::simt::detail::block_barrier(self);
}

namespace simt::detail {
inline unsigned barrier_with_predicate(int predicate, const std::source_location& site) {
  auto& self = self_or_die("__syncthreads_count");
  {
    [[maybe_unused]] Internal internal;
    self.arrival = {};
    self.arrival.kind = Kind::syncthreads;
    self.arrival.site = site;
    self.arrival.predicate = predicate != 0;
  }
  block_barrier(self);
  [[maybe_unused]] Internal internal;
  return self.result_bits;
}

template <typename T>
T shuffle(Kind kind, unsigned mask, const T& value, int arg, int width,
          const std::source_location& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 32,
                "simt: shuffled values must be trivially copyable, at most 32 bytes");
  auto& self = self_or_die(kind_name(kind));
  {
    [[maybe_unused]] Internal internal;
    self.arrival = {};
    self.arrival.kind = kind;
    self.arrival.site = site;
    self.arrival.mask = arrival_mask(self, mask);
    self.arrival.width = width;
    self.arrival.arg = arg;
    self.arrival.size = sizeof(T);
    std::memcpy(self.arrival.value, static_cast<const void*>(&value), sizeof(T));
  }
  warp_collective(self);
  T result;
  [[maybe_unused]] Internal internal;
  std::memcpy(static_cast<void*>(&result), self.result, sizeof(T));
  return result;
}

inline unsigned vote(Kind kind, unsigned mask, int predicate, const std::source_location& site) {
  auto& self = self_or_die(kind_name(kind));
  {
    [[maybe_unused]] Internal internal;
    self.arrival = {};
    self.arrival.kind = kind;
    self.arrival.site = site;
    self.arrival.mask = arrival_mask(self, mask);
    self.arrival.predicate = predicate != 0;
  }
  warp_collective(self);
  [[maybe_unused]] Internal internal;
  return self.result_bits;
}
}  // namespace simt::detail

inline int __syncthreads_count(int predicate,
                               std::source_location site = std::source_location::current()) {
  return static_cast<int>(::simt::detail::barrier_with_predicate(predicate, site));
}
inline int __syncthreads_and(int predicate,
                             std::source_location site = std::source_location::current()) {
  return ::simt::detail::barrier_with_predicate(predicate, site) ==
         ::simt::detail::current_block->threads.size();
}
inline int __syncthreads_or(int predicate,
                            std::source_location site = std::source_location::current()) {
  return ::simt::detail::barrier_with_predicate(predicate, site) != 0;
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  ::simt::detail::vote(::simt::detail::Kind::syncwarp, mask, 0, site);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location site = std::source_location::current()) {
  return ::simt::detail::shuffle(::simt::detail::Kind::shfl, mask, var, src_lane, width, site);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location site = std::source_location::current()) {
  return ::simt::detail::shuffle(::simt::detail::Kind::shfl_up, mask, var,
                                 static_cast<int>(delta), width, site);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location site = std::source_location::current()) {
  return ::simt::detail::shuffle(::simt::detail::Kind::shfl_down, mask, var,
                                 static_cast<int>(delta), width, site);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location site = std::source_location::current()) {
  return ::simt::detail::shuffle(::simt::detail::Kind::shfl_xor, mask, var, lane_mask, width,
                                 site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return ::simt::detail::vote(::simt::detail::Kind::ballot, mask, predicate, site);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(::simt::detail::vote(::simt::detail::Kind::any, mask, predicate, site));
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(::simt::detail::vote(::simt::detail::Kind::all, mask, predicate, site));
}
// The lanes of the warp that reach this __activemask() together: a rendezvous of the
// lanes that can get there (activemask_rendezvous), as a warp that runs converged
// where it can; under Schedule::independent the calling lane alone, as a GPU since
// Volta may return wherever the warp diverged.
inline unsigned __activemask(std::source_location site = std::source_location::current()) {
  auto& self = ::simt::detail::self_or_die("__activemask");
  if (::simt::options().schedule == ::simt::Schedule::independent) return 1u << self.lane;
  {
    [[maybe_unused]] ::simt::detail::Internal internal;
    self.arrival = {};
    self.arrival.kind = ::simt::detail::Kind::activemask;
    self.arrival.site = site;
  }
  return ::simt::detail::activemask_rendezvous(self);
}

// ---- Atomics (real atomics: ThreadSanitizer sees them as such) -----------------
namespace simt::detail {
// The read before the compare-and-swap: part of one read-modify-write, which the
// traffic counter counts once, at the compare-and-swap (as a GPU's atomic
// moves the element once). Only the counting build leaves it uninstrumented.
template <typename Bits>
#if defined(SIMT_TRAFFIC)
__attribute__((no_sanitize_thread, noinline))
#endif
Bits first_read(Bits* bits) {
  return __atomic_load_n(bits, __ATOMIC_RELAXED);
}

template <typename T, typename Op>
T atomic_update(T* address, Op op) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "simt: atomic size");
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t,
                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits expected = first_read(bits);
  for (;;) {
    T old;
    std::memcpy(static_cast<void*>(&old), &expected, sizeof(T));
    const T updated = op(old);
    Bits desired;
    std::memcpy(&desired, static_cast<const void*>(&updated), sizeof(T));
    if (__atomic_compare_exchange_n(bits, &expected, desired, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      return old;
    }
  }
}
}  // namespace simt::detail

#define SIMT_INTEGER_ATOMICS(T)                                                           \
  inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }  \
  inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }  \
  inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }  \
  inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }    \
  inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }  \
  inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); } \
  inline T atomicMin(T* a, T v) {                                                         \
    return ::simt::detail::atomic_update(a, [v](T old) { return old < v ? old : v; });    \
  }                                                                                       \
  inline T atomicMax(T* a, T v) {                                                         \
    return ::simt::detail::atomic_update(a, [v](T old) { return old > v ? old : v; });    \
  }                                                                                       \
  inline T atomicCAS(T* a, T compare, T v) {                                              \
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return compare;                                                                       \
  }
SIMT_INTEGER_ATOMICS(int)
SIMT_INTEGER_ATOMICS(unsigned int)
SIMT_INTEGER_ATOMICS(unsigned long long int)
SIMT_INTEGER_ATOMICS(long long int)
#undef SIMT_INTEGER_ATOMICS

inline unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
  __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline unsigned atomicInc(unsigned* a, unsigned limit) {
  return ::simt::detail::atomic_update(a, [limit](unsigned old) { return old >= limit ? 0u : old + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned limit) {
  return ::simt::detail::atomic_update(
      a, [limit](unsigned old) { return (old == 0 || old > limit) ? limit : old - 1; });
}
inline float atomicAdd(float* a, float v) {
  return ::simt::detail::atomic_update(a, [v](float old) { return old + v; });
}
inline double atomicAdd(double* a, double v) {
  return ::simt::detail::atomic_update(a, [v](double old) { return old + v; });
}
inline __half atomicAdd(__half* a, __half v) {
  return ::simt::detail::atomic_update(
      a, [v](__half old) { return __float2half(__half2float(old) + __half2float(v)); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) {
  return ::simt::detail::atomic_update(a, [v](__nv_bfloat16 old) {
    return __float2bfloat16(__bfloat162float(old) + __bfloat162float(v));
  });
}
inline float atomicExch(float* a, float v) {
  return ::simt::detail::atomic_update(a, [v](float) { return v; });
}
inline float atomicMax(float* a, float v) = delete;  // CUDA has no float atomicMax either

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- Device functions that have a plain host meaning -----------------------------
template <typename T>
inline T __ldg(const T* p) { return *p; }
// Loads and stores with a cache hint: the hint means nothing on a CPU.
#define SIMT_HINTED_LOAD(name) \
  template <typename T>        \
  inline T name(const T* p) {  \
    return *p;                 \
  }
#define SIMT_HINTED_STORE(name)          \
  template <typename T>                  \
  inline void name(T* p, T value) {      \
    *p = value;                          \
  }
SIMT_HINTED_LOAD(__ldcg) SIMT_HINTED_LOAD(__ldca) SIMT_HINTED_LOAD(__ldcs)
SIMT_HINTED_LOAD(__ldlu) SIMT_HINTED_LOAD(__ldcv)
SIMT_HINTED_STORE(__stwb) SIMT_HINTED_STORE(__stcg) SIMT_HINTED_STORE(__stcs)
SIMT_HINTED_STORE(__stwt)
#undef SIMT_HINTED_LOAD
#undef SIMT_HINTED_STORE
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
// Mixed signedness, as CUDA's math_functions.hpp has them: compared as unsigned.
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline unsigned long min(long a, unsigned long b) { return min(static_cast<unsigned long>(a), b); }
inline unsigned long min(unsigned long a, long b) { return min(a, static_cast<unsigned long>(b)); }
inline unsigned long max(long a, unsigned long b) { return max(static_cast<unsigned long>(a), b); }
inline unsigned long max(unsigned long a, long b) { return max(a, static_cast<unsigned long>(b)); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned long long min(long long a, unsigned long long b) {
  return min(static_cast<unsigned long long>(a), b);
}
inline unsigned long long min(unsigned long long a, long long b) {
  return min(a, static_cast<unsigned long long>(b));
}
inline unsigned long long max(long long a, unsigned long long b) {
  return max(static_cast<unsigned long long>(a), b);
}
inline unsigned long long max(unsigned long long a, long long b) {
  return max(a, static_cast<unsigned long long>(b));
}
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min(float a, double b) { return std::fmin(static_cast<double>(a), b); }
inline double min(double a, float b) { return std::fmin(a, static_cast<double>(b)); }
inline double max(float a, double b) { return std::fmax(static_cast<double>(a), b); }
inline double max(double a, float b) { return std::fmax(a, static_cast<double>(b)); }

// ---- Runtime API functions (declared by cuda_runtime_api.h) -----------------------
// One device, one stream: every launch runs to completion before it returns.
extern "C" {
inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "error (simt emulator)";
}
inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** pointer, size_t size) {
  *pointer = std::aligned_alloc(256, (size + 255) / 256 * 256);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* to, const void* from, size_t size, cudaMemcpyKind) {
  std::memcpy(to, from, size);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t size, cudaMemcpyKind,
                                   cudaStream_t) {
  std::memcpy(to, from, size);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* to, int value, size_t size) {
  std::memset(to, value, size);
  return cudaSuccess;
}
}  // extern "C"
template <typename T>
inline cudaError_t cudaMalloc(T** pointer, size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(pointer), size);
}
template <typename T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* from, size_t size,
                                      size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
  if (offset + size > sizeof(T)) return cudaErrorInvalidValue;
  std::memcpy(reinterpret_cast<char*>(&symbol) + offset, from, size);
  return cudaSuccess;
}
template <typename R, typename... P>
inline cudaError_t cudaFuncSetAttribute(R (*)(P...), cudaFuncAttribute, int) {
  return cudaSuccess;
}
