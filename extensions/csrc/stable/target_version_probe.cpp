// Syntax-only probes of TORCH_TARGET_VERSION (chapter 4, section 14;
// tests/test_stable_abi.py). Compiled with -fsyntax-only, never linked.
//
//   -DPROBE_ATEN:         include ATen, which a stable-ABI build must not use.
//   -DPROBE_NEWER_API:    call StableLibrary::set_python_module, an API that
//                         torch 2.13 added (hidden below a 2.13 target).
//   neither:              the same call's file, with nothing newer used.
#if defined(PROBE_ATEN)
#include <ATen/ATen.h>
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
