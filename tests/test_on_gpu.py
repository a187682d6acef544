"""extending_pytorch.on_gpu: a reader's CUDA source compiled by nvcc and launched with the emulator's syntax."""

from __future__ import annotations

import pytest
import torch

from conftest import requires_cuda
from extending_pytorch import on_gpu

pytestmark = [
    pytest.mark.same_on_every_torch,
    pytest.mark.skipif(on_gpu.nvcc() is None, reason="needs nvcc, the CUDA toolkit's compiler"),
]

# Writes 2 x[i] + k for i < n: an element at or past n stays unwritten.
AFFINE = r"""
__global__ void affine(const float* x, float* out, int n, float k) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * x[i] + k;
}
"""


def test_what_nvcc_rejects_is_said_with_its_line_and_without_this_machines_paths():
    # Catches: a source compiled by g++ rather than nvcc (it accepts a host function in a kernel), and
    # messages that name the build directory.
    source = "float twice(float v) { return 2 * v; }\n" + AFFINE.replace("2 * x[i]", "twice(x[i])")
    with pytest.raises(RuntimeError, match=r"(?s)nvcc rejected affine_host\.cu:\naffine_host\.cu\(5\): error: "
                       r"calling a __host__ function\(\"twice\(float\)\"\) from a __global__ function") as caught:
        on_gpu.load_source(source, name="affine_host")
    assert str(on_gpu.BUILD_ROOT) not in str(caught.value)


def test_bad_sources_and_launches_name_what_is_wrong():
    with pytest.raises(ValueError, match="source: no __global__ kernel found"):
        on_gpu.load_source("__device__ float f(float v) { return v; }\n", name="nothing")
    with pytest.raises(ValueError, match=r"source: kernels that are templates .*\['scaled'\]"):
        on_gpu.load_source("template <typename T> __global__ void scaled(T* x) { x[0] *= 2; }\n", name="tpl")
    with pytest.raises(ValueError, match="name must be an identifier"):
        on_gpu.load_source(AFFINE, name="not a name")
    module = on_gpu.load_source(AFFINE, name="affine")
    x, out = torch.ones(4), torch.empty(4)
    with pytest.raises(TypeError, match=r"affine takes 4 arguments .*, got 3"):
        module.affine[1, 32](x, out, 4)
    with pytest.raises(TypeError, match="affine: x is a pointer; pass a tensor, got list"):
        module.affine[1, 32]([1.0], out, 4, 0.5)
    with pytest.raises(TypeError, match=r"affine: x \(const float\*\) needs a tensor of dtype torch.float32, got torch.float64"):
        module.affine[1, 32](x.double(), out, 4, 0.5)
    with pytest.raises(ValueError, match=r"outputs must name pointer parameters of affine; \['n'\]"):
        module.affine[1, 32](x, out, 4, 0.5, outputs=["n"])
    with pytest.raises(ValueError, match="grid must be a positive int or a tuple of 1 to 3"):
        module.affine[0, 32](x, out, 4, 0.5)
    with pytest.raises(AttributeError, match="no __global__ kernel named 'affinity'"):
        module.affinity


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the launch runs")
def test_without_a_gpu_a_launch_says_so():
    module = on_gpu.load_source(AFFINE, name="affine")
    with pytest.raises(RuntimeError, match="affine: compiled by nvcc, but there is no GPU here to launch it on"):
        module.affine[1, 32](torch.ones(4), torch.empty(4), 4, 0.5, outputs=["out"])


@requires_cuda
def test_a_launch_on_the_gpu_computes_and_copies_the_outputs_back():
    # Catches: arguments passed in the wrong order or type (k as an int), outputs not copied back to a CPU
    # tensor, an unwritten element that keeps the CPU tensor's old value instead of showing as NaN, a grid
    # of blocks taken as threads.
    module = on_gpu.load_source(AFFINE, name="affine")
    x = torch.arange(70, dtype=torch.float32)
    out = torch.zeros(70)
    module.affine[3, 32](x, out, 65, 0.5, outputs=["out"])  # 96 threads for 65 elements
    torch.testing.assert_close(out[:65], 2 * x[:65] + 0.5)
    assert out[65:].isnan().all()  # elements 65..69 were never written
    on_device = torch.zeros(70, device="cuda")
    module.affine[(3, 1), (32, 1, 1)](x.cuda(), on_device, 70, -1.0)  # CUDA tensors: passed as they are
    torch.testing.assert_close(on_device.cpu(), 2 * x - 1)


@requires_cuda
@pytest.mark.parametrize("number", [4, 5])
def test_chapter_5_checks_run_the_solution_on_the_gpu(number, capsys):
    # Catches: a check whose GPU part does not run where a GPU is (the solution then passes in the
    # emulator alone), or launches the kernel with the emulator's arguments in another order.
    from conftest import cell_source
    from test_exercises import exercises, load_check, namespace, path_of

    path = path_of("05_cuda_kernel")
    names = namespace(path)
    check = load_check(path, number)
    exec(cell_source(next(s for n, s, _ in exercises(path) if n == number)), names)
    check(names[check.answer])
    assert "on this GPU it computes the same" in capsys.readouterr().out
