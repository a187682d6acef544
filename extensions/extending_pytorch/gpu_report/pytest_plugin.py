"""pytest plugin of the report's test step: `-p extending_pytorch.gpu_report.pytest_plugin`.

It loads the operators with `load_jit` before any test imports
`extending_pytorch.ops` (which would otherwise look for the ahead-of-time
build), and keeps only the tests that need a CUDA device: those marked with
the tests' `requires_cuda` (a skipif whose reason names CUDA or a GPU) or
parametrized on a CUDA device. The rest run in `make test`, without a GPU.
"""

from __future__ import annotations

import re

from extending_pytorch.gpu_report.workloads import load_operators

_GPU_REASON = re.compile(r"\b(CUDA|GPU)\b")
_CUDA_PARAMETER = re.compile(r"\[(.*-)?cuda(:\d+)?(-.*)?\]")


def needs_gpu(item) -> bool:
    for mark in item.iter_markers("skipif"):
        if _GPU_REASON.search(str(mark.kwargs.get("reason", ""))):
            return True
    return bool(_CUDA_PARAMETER.search(item.name))


def pytest_configure(config):
    load_operators()


def pytest_collection_modifyitems(config, items):
    kept = [item for item in items if needs_gpu(item)]
    deselected = [item for item in items if not needs_gpu(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept
