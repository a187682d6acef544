// Stand-in for CUDA's crt/host_defines.h, for the SIMT emulator (../simt.h).
//
// The CUDA wheels of PyTorch ship cuda_fp16.h and cuda_bf16.h (and
// vector_types.h, which they include) but not the compiler's crt/ directory,
// whose host_defines.h those headers include. This file gives the
// declaration-specifier macros the meaning they have when a host compiler
// (g++) reads CUDA headers: attributes that mean nothing on the host are
// empty. Where the CUDA toolkit's own crt/host_defines.h is next to
// vector_types.h, the compiler finds that one first and this one is unused;
// ../simt.h redefines what the emulator needs either way.
#pragma once
#if !defined(__HOST_DEFINES_H__)
#define __HOST_DEFINES_H__

#define __no_return__ __attribute__((noreturn))
#define __noinline__ __attribute__((noinline))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __inline_hint__
#define __align__(n) __attribute__((aligned(n)))
#define __thread__ __thread
#define __import__
#define __export__
#define __cdecl
#define __annotate__(a) __attribute__((a))
#define __location__(a)
#define CUDARTAPI
#define CUDARTAPI_CDECL
#define __specialization_static
#define __builtin_align__(a) __align__(a)
#define __grid_constant__
#define __host__
#define __device__
#define __global__
#define __shared__
#define __constant__
#define __managed__
#define __nv_pure__
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __block_size__(...)
#define __device_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define __cudart_builtin__

#endif
