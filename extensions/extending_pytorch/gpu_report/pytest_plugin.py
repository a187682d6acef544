"""pytest plugin of the report's test step: `-p extending_pytorch.gpu_report.pytest_plugin`.

It loads the operators with `load_jit` before any test imports
`extending_pytorch.ops` (which would otherwise look for the ahead-of-time
build), and keeps only the tests that run on a GPU:

- those marked with the tests' `requires_cuda` ("needs a CUDA device") or
  "needs a GPU";
- those parametrized on a CUDA device (`test_x[cuda]`, `test_x[float32-cuda]`);
- every test of tests/test_triton.py and tests/test_helion.py, whose kernels run on `DEVICE`: the GPU
  wherever one is (the interpreter's CPU twins and tests, marked so, skip
  there by themselves).

The rest run in `make test`, without a GPU; the compile-only tests (nvcc,
the CUDA headers) too.
"""

from __future__ import annotations

import re

GPU_REASONS = ("needs a CUDA device", "needs a GPU")
TESTS_ON_DEVICE = ("test_triton.py", "test_helion.py")
_CUDA_PARAMETER = re.compile(r"\[(.*-)?cuda(:\d+)?(-.*)?\]")


def needs_gpu(item) -> bool:
    for mark in item.iter_markers("skipif"):
        if str(mark.kwargs.get("reason", "")) in GPU_REASONS:
            return True
    if _CUDA_PARAMETER.search(item.name):
        return True
    return item.path.name in TESTS_ON_DEVICE


def pytest_configure(config):
    if not config.option.collectonly:  # listing the tests builds nothing
        from extending_pytorch.gpu_report.workloads import load_operators

        load_operators()


def pytest_collection_modifyitems(config, items):
    kept = [item for item in items if needs_gpu(item)]
    deselected = [item for item in items if not needs_gpu(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept
