// Syntax-only probes of TORCH_TARGET_VERSION (chapter 7, section 1;
// tests/test_stable_abi.py). Compiled with -fsyntax-only, never linked.
//
//   -DPROBE_ATEN:          include ATen, which a stable-ABI build must not use.
//   -DPROBE_NEWER_API:     call StableLibrary::set_python_module, an API that
//                          torch 2.13 added (hidden below a 2.13 target).
//   -DPROBE_STREAM_HANDLE: the call the stable package's CUDA kernels make for
//                          torch's current CUDA stream, Stream::nativeHandle
//                          (torch 2.13): why its TORCH_TARGET_VERSION is 2.13.
//   none of them:          the same call's file, with nothing newer used.
#if defined(PROBE_ATEN)
#include <ATen/ATen.h>
#elif defined(PROBE_STREAM_HANDLE)
#include <torch/csrc/stable/accelerator.h>

void* probe() { return torch::stable::accelerator::getCurrentStream(0).nativeHandle(); }
#else
#include <torch/csrc/stable/library.h>

void probe(torch::stable::detail::StableLibrary& library) {
#if defined(PROBE_NEWER_API)
  library.set_python_module("probe");
#else
  library.def("probe(Tensor x) -> Tensor");
#endif
}
#endif
