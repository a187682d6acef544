// The SIMT emulator's cuda_runtime.h: kernels that include <cuda_runtime.h>
// get the emulator (dim3, cudaStream_t, the built-in variables, warp
// functions, atomics) instead of CUDA's runtime, which needs a GPU.
#pragma once
#include "../simt.h"
