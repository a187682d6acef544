"""Chapter 5: the CUDA kernels of extending_pytorch::triplet_hinge_loss.

Without a GPU (CI, most laptops), nvcc still compiles every kernel file for
sm_80 and sm_90, and the CPU tests exercise the arithmetic the kernels share
(csrc/triplet_math.h). The tests below that need a GPU are skipped without one;
test_cpp_ops.py's `_cuda` twins run there too.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest
import torch
from torch.testing import assert_close

import extending_pytorch as ep
from conftest import REPO_ROOT, load_tool, requires_cuda
from extending_pytorch import build_flags, ops, testing

HYPER = dict(t1=-1.0, t2=0.5, beta=0.5)
DTYPES = ("float", "double", "__half", "__nv_bfloat16")


def nvcc() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME and (pathlib.Path(CUDA_HOME) / "bin" / "nvcc").exists():
        return str(pathlib.Path(CUDA_HOME) / "bin" / "nvcc")
    return shutil.which("nvcc")


def torch_cxx_standard() -> str:
    """The newest -std=c++NN that torch.utils.cpp_extension passes to compilers."""
    import inspect

    import torch.utils.cpp_extension as cpp_extension

    found = re.findall(r"-std=c\+\+(\d+)", inspect.getsource(cpp_extension))
    return f"c++{max(map(int, found))}"


def test_build_uses_the_cxx_standard_torch_uses():
    # torch's headers need its standard; nvcc refuses two -std flags, so the
    # one in build_flags replaces torch's own: they must agree.
    assert build_flags.CXX_STANDARD == torch_cxx_standard()
    assert f"-std={build_flags.CXX_STANDARD}" in build_flags.nvcc_flags()
    assert f"-std={build_flags.CXX_STANDARD}" in build_flags.cxx_flags()


# The kernels each kernel file must define, for every dtype.
KERNELS = {
    "csrc/cuda/triplet.cu": ("triplet_forward_kernel", "triplet_backward_kernel"),
}


def nvcc_command(kernel: str, obj: pathlib.Path, archs=("80", "90")) -> list[str]:
    """nvcc as torch.utils.cpp_extension runs it, for the given architectures."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    return [
        nvcc(),
        "-c",
        *COMMON_NVCC_FLAGS,
        *build_flags.nvcc_flags(),
        *(
            flag
            for arch in archs
            for flag in ("-gencode", f"arch=compute_{arch},code=sm_{arch}")
        ),
        "-I",
        str(build_flags.CSRC),
        str(build_flags.EXTENSIONS_DIR / kernel),
        "-o",
        str(obj),
    ]


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc (the CUDA toolkit)")
@pytest.mark.same_on_every_torch  # the kernel files include no torch header
@pytest.mark.parametrize("kernel", build_flags.CUDA_KERNELS)
def test_kernel_file_compiles_with_nvcc_for_sm80_and_sm90(kernel, tmp_path):
    obj = tmp_path / "kernels.o"
    result = subprocess.run(
        nvcc_command(kernel, obj), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    symbols = subprocess.run(
        ["nm", "-C", str(obj)], capture_output=True, text=True
    ).stdout
    for kernel_name in KERNELS.get(kernel, ()):
        for dtype in DTYPES:
            assert re.search(rf"{kernel_name}<{re.escape(dtype)}>", symbols), (
                kernel_name,
                dtype,
            )


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_grid_covers_every_row_once_for_any_batch(tmp_path):
    # Catches a grid size that overflows its unsigned int (a batch of more
    # than 2^34 rows), and a grid-stride loop that skips or repeats rows.
    # launch_config.h is plain C++: the CPU compiler checks the very code
    # the kernels use to find their rows.
    exe = tmp_path / "launch_config_test"
    source = pathlib.Path(__file__).parent / "native" / "launch_config_test.cpp"
    build = subprocess.run(
        ["g++", "-std=c++20", "-O1", f"-I{build_flags.CSRC}", str(source), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_default_cuda_architectures_without_a_gpu():
    # With a CUDA torch, no visible GPU and TORCH_CUDA_ARCH_LIST unset, torch's
    # own detection crashes (IndexError); the build uses the book's list then,
    # and leaves every other case to torch.
    assert build_flags.cuda_arch_list(None, 0) == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert build_flags.cuda_arch_list("", 0) == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert build_flags.cuda_arch_list("8.0", 0) is None
    assert build_flags.cuda_arch_list(None, 1) is None


def test_default_cuda_architectures_are_ones_torch_accepts(monkeypatch):
    from torch.utils.cpp_extension import _get_cuda_arch_flags

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", build_flags.DEFAULT_CUDA_ARCH_LIST)
    flags = _get_cuda_arch_flags()
    assert "-gencode=arch=compute_75,code=sm_75" in flags
    assert "-gencode=arch=compute_90,code=compute_90" in flags  # the PTX


def test_setting_the_default_is_announced(monkeypatch):
    messages = []
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert build_flags.use_default_cuda_arch_list(0, announce=messages.append)
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == build_flags.DEFAULT_CUDA_ARCH_LIST
    assert "no GPU is visible" in messages[0]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert build_flags.use_default_cuda_arch_list(0, announce=messages.append) is None
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_cuda_sources_are_listed_and_exist():
    for sources in build_flags.CUDA_SOURCES.values():
        for source in sources:
            assert (build_flags.EXTENSIONS_DIR / source).is_file(), source
    for kernel in build_flags.CUDA_KERNELS:
        text = (build_flags.EXTENSIONS_DIR / kernel).read_text()
        included = re.findall(r'#include [<"]([^>"]+)[>"]', text)
        assert not any(
            h.startswith(("torch/", "ATen/", "c10/")) for h in included
        ), included


def cuda_include_dir() -> pathlib.Path | None:
    """The CUDA toolkit's headers (cuda_runtime.h), if a toolkit is here."""
    from torch.utils.cpp_extension import CUDA_HOME

    # nvcc may be a wrapper script outside the toolkit: look where it is too.
    candidates = [CUDA_HOME, "/usr/local/cuda"]
    if nvcc() is not None:
        candidates.append(pathlib.Path(nvcc()).resolve().parents[1])
    for home in filter(None, candidates):
        include = pathlib.Path(home) / "include"
        if (include / "cuda_runtime.h").is_file():
            return include
    return None


BINDINGS = [
    source
    for sources in build_flags.CUDA_SOURCES.values()
    for source in sources
    if source.endswith(".cpp")
]


@pytest.mark.skipif(
    cuda_include_dir() is None, reason="needs the CUDA toolkit's headers"
)
@pytest.mark.parametrize("binding", BINDINGS)
def test_binding_compiles_against_torch_and_cuda_headers(binding, tmp_path):
    # The torch-facing layer (device guard, stream, dispatch) is compiled on a
    # GPU machine only; this checks it with the host compiler everywhere. A
    # CPU wheel of torch lacks one generated header of its CUDA API: a stand-in
    # is enough for a syntax check, and a CUDA wheel has the real one.
    from torch.utils.cpp_extension import include_paths

    torch_includes = include_paths()
    generated = pathlib.Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any(
        (pathlib.Path(d) / generated).is_file() for d in torch_includes
    ):
        (tmp_path / generated).parent.mkdir(parents=True)
        (tmp_path / generated).write_text(
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"
        )
    command = [
        shutil.which("c++") or "g++",
        "-std=c++20",
        "-fsyntax-only",
        f"-I{tmp_path}",
        *(f"-I{d}" for d in torch_includes),
        f"-I{cuda_include_dir()}",
        f"-I{build_flags.CSRC}",
        str(build_flags.EXTENSIONS_DIR / binding),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]


# ---- On a GPU ----

# Compared with the reference in float64. The losses are sums of D squares, so
# their rounding grows with D; the gradients are per element, so it does not,
# except an expanded input's: each of its elements sums B rows' gradients, each
# rounded to 16 bits, and the sum can cancel. check_against_reference holds
# such a sum to rtol times the sum of the rows' magnitudes (not the magnitude
# of the sum), which grows with B and with the gradients' size. 16-bit inputs
# are rounded once (their own precision) and then accumulated in float by the
# kernels: a kernel that returned zero or scaled gradients, or accumulated in
# half, is outside these bounds. (rtol is about 4 units in the last place of
# float16 and of bfloat16.)
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-9),
    torch.float16: dict(rtol=4e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=3e-2, atol=8e-3),
}
DIMS = [1, 3, 4, 8, 31, 512, 1027]


# Catches the CUDA twins of the CPU layout bugs, and those of the 16-byte
# path: a row read in packs that is not aligned (misaligned), not adjacent
# (column-strided, transposed) or not a whole number of packs (dim 1, 3, 31,
# 1027), for every dtype the kernels are compiled for. Views are passed as
# views and gradients compared with respect to their bases.
def _test_layouts_dims_and_dtypes(layout, dim, dtype, device):
    for position in range(3):
        layouts = ["contiguous"] * 3
        layouts[position] = layout
        for reduction in ep.REDUCTIONS:
            testing.check_against_reference(
                ops.triplet_hinge_loss,
                tuple(layouts),
                37,
                dim,
                reduction=reduction,
                dtype=dtype,
                device=device,
                seed=position,
                reference_dtype=torch.float64,
                **TOLERANCE[dtype],
            )


@requires_cuda
@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("layout", sorted(testing.LAYOUTS))
def test_layouts_dims_and_dtypes_cuda(layout, dim, dtype):
    _test_layouts_dims_and_dtypes(layout, dim, dtype, "cuda")


# The same 16-bit checks on the CPU operator, whose expanded gradients round
# and sum as the CUDA operator's do (on an H200, the same maximum errors to
# the four digits the first GPU run printed), so the rule is exercised
# without a GPU. Catches a tolerance
# rule that rejects a correct 16-bit expanded gradient (assert_close's,
# relative to the sum itself, failed 27 of these checks), and 16-bit CPU
# kernels that are wrong on any of these layouts.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("layout", ["contiguous", "expanded", "misaligned"])
def test_layouts_dims_and_16_bit_dtypes_cpu(layout, dim, dtype):
    _test_layouts_dims_and_dtypes(layout, dim, dtype, "cpu")


@requires_cuda
@pytest.mark.parametrize("layout", ["contiguous", "misaligned"])  # packed and scalar paths
def test_backward_output_mask_cuda(layout):
    # Catches a kernel that writes through a null gradient pointer (any of the
    # three, on either path) or skips one that was asked for.
    _, p = testing.make_view(layout, 40, 64, device="cuda")
    a, n = torch.randn(2, 40, 64, device="cuda").unbind(0)
    p = p.detach()
    grad = torch.tensor(0.5, device="cuda")
    full = ops.triplet_hinge_loss_backward_op(grad, a, p, n, -1.0, 0.5, 0.5, "mean", [True] * 3)
    for bits in range(8):
        mask = [bool(bits & 4), bool(bits & 2), bool(bits & 1)]
        partial = ops.triplet_hinge_loss_backward_op(grad, a, p, n, -1.0, 0.5, 0.5, "mean", mask)
        torch.cuda.synchronize()
        for needed, got, expected in zip(mask, partial, full):
            assert (got is None) != needed, mask
            if needed:
                assert torch.equal(got, expected), mask


def _test_half_precision_accumulates_in_float(device):
    # Each row: 32 columns of 8 (every 8th from 0 to 248: the first element
    # of each of a warp's 32 lanes' 16-byte packs of 8 halves) and 4064 of
    # 0.1 (0.0999755859375 in float16). d_ap = 32 * 64 + 4064 * 0.0099951
    # = 2048 + 40.62 = 2088.62, and the loss is 2 d_ap = 4177.2. Summed in
    # half precision, 64 + 0.01 rounds back to 64 (half's spacing there is
    # 1/16): each lane loses its 127 small terms, 1.27, and the row 40.6 of
    # 2088.6 (2 %). Summed in float, the float16 result is right to half a
    # unit in its last place (2 / 4177 = 5e-4): within rtol=2e-3, which half
    # accumulation misses.
    dim = 4096
    diff = torch.full((4, dim), 0.1, dtype=torch.float64)
    diff[:, :256:8] = 8.0
    a = torch.zeros(4, dim, dtype=torch.float16, device=device)
    p = diff.to(torch.float16).to(device)
    n = torch.zeros_like(a)
    # a = n, so d_an = 0 and d_ap - d_an = d_ap >= 0, far above t1; and
    # d_ap >= t2 = 0. loss = max(d_ap - d_an, t1) + beta max(d_ap, t2)
    # = d_ap + 1.0 * d_ap = 2 d_ap.
    hyper = dict(t1=-1e9, t2=0.0, beta=1.0)
    ours = ops.triplet_hinge_loss(a, p, n, **hyper, reduction="none").double().cpu()
    exact = 2 * p.double().pow(2).sum(1).cpu()
    assert_close(ours, exact, rtol=2e-3, atol=0)


# The CPU twin also checks that the settings are valid ones (the reference
# refuses t2 < 0, and an invalid setting once hid this test's purpose).
def test_half_precision_accumulates_in_float_cpu():
    _test_half_precision_accumulates_in_float("cpu")


@requires_cuda
def test_half_precision_accumulates_in_float_cuda():
    _test_half_precision_accumulates_in_float("cuda")


@requires_cuda
def test_empty_batch_backward_cuda():
    empty = torch.empty(0, 8, device="cuda", requires_grad=True)
    for reduction in ep.REDUCTIONS:
        loss = ops.triplet_hinge_loss(empty, empty, empty, **HYPER, reduction=reduction)
        (grad,) = torch.autograd.grad(loss.sum(), empty)
        torch.cuda.synchronize()
        assert grad.shape == (0, 8)


@requires_cuda
def test_batch_larger_than_the_grid_cuda():
    # More rows than kMaxBlocks (2^20) blocks of 8 warps take in one pass:
    # every warp loops. A kernel without the grid-stride loop leaves the rows
    # past 8 * 2^20 unwritten.
    batch = 8 * 2**20 + 37
    a, p, n = (torch.randn(batch, 4, device="cuda") for _ in range(3))
    ours = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    expected = ep.reference_triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    assert_close(ours, expected)
    grads = torch.autograd.grad(
        ops.triplet_hinge_loss(a.requires_grad_(), p, n, **HYPER, reduction="sum"), a
    )
    ref = torch.autograd.grad(
        ep.reference_triplet_hinge_loss(a, p, n, **HYPER, reduction="sum"), a
    )
    assert_close(grads[0][-100:], ref[0][-100:])


@requires_cuda
def test_kernels_launch_on_the_current_stream():
    # Work queued on a side stream must see the kernel's results without a
    # device-wide synchronisation: the binding launches on the current stream.
    a, p, n = torch.randn(3, 4096, 256, device="cuda").unbind(0)
    expected = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # Keep the default stream busy: a kernel wrongly launched there would run
    # only after these, long after the side stream's copy read its output.
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(20):
        x = x @ x / 64
    with torch.cuda.stream(side):
        out = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
        copy = out.clone()  # ordered after the kernel on the same stream
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(copy, expected)


# Catches a kernel launched on the default stream instead of the current one
# (the capture fails, or records nothing), and anything in the forward or
# backward that a capture forbids: a host synchronisation (.item(), .cpu()), a
# tensor made from host values, memory not from PyTorch's allocator. In a
# fresh process: a failed capture leaves the CUDA generator in capture state,
# and every later test that draws random numbers on the GPU would fail
# ("Offset increment outside graph capture encountered unexpectedly").
@requires_cuda
def test_cuda_graph_capture_replays_the_same_results():
    testing.check_cuda_graph_capture_in_fresh_process("ops", "triplet_hinge_loss")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_capture_that_fails_in_its_process_fails_the_test_with_the_childs_error():
    # Catches a wrapper that swallows the child's failure (the capture test
    # would then pass without a GPU, or with a broken capture).
    with pytest.raises(AssertionError, match=r"(?s)the capture of ops.triplet_hinge_loss, run in a "
                       r"process of its own, failed \(exit status 1\):.*CUDA"):
        testing.check_cuda_graph_capture_in_fresh_process("ops", "triplet_hinge_loss")


def test_a_fresh_process_loads_the_operators_and_reports_its_failure():
    # The isolation of the capture test, checked without a GPU: the child
    # imports the tests' modules and the operators as this process does, and
    # its failure reaches the test as an exit status and a message.
    result = testing.run_in_fresh_process(
        "import torch, test_cuda\n"
        "from extending_pytorch import ops\n"
        "ones = torch.ones(2, 3)\n"
        "print(ops.triplet_hinge_loss(ones, ones, ones, **test_cuda.HYPER).item())\n"
        "assert False, 'the child failed'\n",
        timeout=300,
    )
    # d_ap = d_an = 0: max(0, t1) + beta * max(0, t2) = 0 + 0.5 * 0.5.
    assert result.stdout.strip() == "0.25", result.stdout + result.stderr
    assert result.returncode != 0
    assert "AssertionError: the child failed" in result.stderr


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_cuda(dtype):
    a, p, n = (t.to("cuda", dtype) for t in torch.randn(3, 64, 1024).unbind(0))
    ours = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction="none")
    exact = ep.reference_triplet_hinge_loss(
        *(t.double() for t in (a, p, n)), **HYPER, reduction="none"
    )
    assert ours.dtype == dtype
    assert_close(ours.double(), exact, rtol=1e-2, atol=1e-2)


@requires_cuda
def test_large_batch_matches_cpu():
    a, p, n = torch.randn(3, 65536 + 3, 64).unbind(0)
    for reduction in ep.REDUCTIONS:
        cpu = ops.triplet_hinge_loss(a, p, n, **HYPER, reduction=reduction)
        gpu = ops.triplet_hinge_loss(
            a.cuda(), p.cuda(), n.cuda(), **HYPER, reduction=reduction
        )
        assert_close(gpu.cpu(), cpu, rtol=1e-4, atol=1e-4)


@requires_cuda
def test_empty_batch_cuda():
    empty = torch.empty(0, 8, device="cuda")
    assert ops.triplet_hinge_loss(
        empty, empty, empty, **HYPER, reduction="none"
    ).shape == (0,)
    assert (
        ops.triplet_hinge_loss(
            empty, empty, empty, **HYPER, reduction="sum"
        ).item()
        == 0
    )


# ---- The CUDA build check (tools/check_cuda.py, run by make check-cuda) ----

# These tests import the check's script; they need neither a GPU nor the
# check's environment (.venv-cuda), but they do need the repository: a copy of
# extensions/ and tests/ alone (as on a GPU machine without network) has no
# tools/, and serving the working tree needs git and the book's files.
CHECK_CUDA = REPO_ROOT / "tools" / "check_cuda.py"
requires_check_cuda = pytest.mark.skipif(
    not CHECK_CUDA.is_file(),
    reason=f"needs the CUDA build check's script ({CHECK_CUDA}), absent from this copy of the book",
)


def _git_work_tree() -> bool:
    if shutil.which("git") is None:
        return False
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    return inside.returncode == 0 and inside.stdout.strip() == "true"


@requires_check_cuda
def test_cuda_check_expects_the_default_architectures():
    check = load_tool("check_cuda")
    sass, ptx = check.expected_architectures()
    assert sass == {"sm_75", "sm_80", "sm_90"} and ptx == {"sm_90"}


@requires_check_cuda
def test_cuda_check_exempts_only_real_cpu_only_operators():
    # An exemption for an operator that no longer exists (or was renamed) would
    # hide nothing today but rot; every exempt operator must exist and really
    # have no CUDA kernel in its source.
    check = load_tool("check_cuda")
    names = set(torch._C._dispatch_get_all_op_names())
    for name in check.CPU_ONLY:
        assert name in names, name
        short = name.split("::")[1]
        for binding in BINDINGS:
            text = (build_flags.EXTENSIONS_DIR / binding).read_text()
            assert f'm.impl("{short}"' not in text, (name, binding)


@requires_check_cuda
@pytest.mark.skipif(
    not (_git_work_tree() and (REPO_ROOT / "_config.yml").is_file()),
    reason="needs git and the book's repository (a git work tree with _config.yml)",
)
def test_cuda_check_serves_the_working_tree_as_a_repository(tmp_path):
    check = load_tool("check_cuda")
    served = check.snapshot_repository(tmp_path / "served")
    log = subprocess.run(
        ["git", "log", "--oneline"], cwd=served, capture_output=True, text=True
    ).stdout
    assert len(log.splitlines()) == 1
    assert (served / "notebooks" / "05_cuda_kernel.ipynb").is_file()
    assert not (served / ".venv").exists()
    assert check.repository_slug().count("/") == 1


# ---- when a build includes the CUDA kernels (build_flags.CUDA_SWITCH) ----


@pytest.mark.parametrize(
    "switch, torch_cuda, cuda_home, gpus, expected",
    [
        # Unset: only where the kernels can run (CUDA torch, a toolkit, a GPU).
        (None, "13.2", "/usr/local/cuda", 1, True),
        (None, "13.2", "/usr/local/cuda", 0, False),  # a CPU runtime: no nvcc work
        (None, "13.2", None, 1, False),  # no toolkit: a CPU build, not a failed one
        (None, None, "/usr/local/cuda", 1, False),  # CPU-only torch
        ("0", "13.2", "/usr/local/cuda", 1, False),
        ("1", "13.2", "/usr/local/cuda", 0, True),  # the CUDA build check, without a GPU
    ],
)
def test_cuda_kernels_are_built_only_where_asked_or_runnable(
    monkeypatch, switch, torch_cuda, cuda_home, gpus, expected
):
    if switch is None:
        monkeypatch.delenv(build_flags.CUDA_SWITCH, raising=False)
    else:
        monkeypatch.setenv(build_flags.CUDA_SWITCH, switch)
    assert build_flags.build_cuda(torch_cuda, cuda_home, gpus) is expected


@pytest.mark.parametrize(
    "torch_cuda, cuda_home, missing",
    [(None, "/usr/local/cuda", "a CUDA build of torch"), ("13.2", None, "the CUDA toolkit")],
)
def test_asking_for_cuda_kernels_that_cannot_be_built_names_what_is_missing(
    monkeypatch, torch_cuda, cuda_home, missing
):
    monkeypatch.setenv(build_flags.CUDA_SWITCH, "1")
    with pytest.raises(RuntimeError, match=f"EXTENDING_PYTORCH_CUDA=1 .* lacks {missing}"):
        build_flags.build_cuda(torch_cuda, cuda_home, 1)


def test_a_misspelt_cuda_switch_is_an_error(monkeypatch):
    monkeypatch.setenv(build_flags.CUDA_SWITCH, "yes")
    with pytest.raises(ValueError, match='EXTENDING_PYTORCH_CUDA must be "0", "1" or unset, got \'yes\''):
        build_flags.build_cuda("13.2", "/usr/local/cuda", 1)
