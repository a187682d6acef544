"""Chapter 7, shipping chapter 4's operator: autocast, and the flags of a wheel build.

(The stable-ABI wheel, export + AOTInductor and DDP have their own files:
test_stable_abi.py, test_export_aoti.py, test_ddp.py.)
"""

from __future__ import annotations

import pathlib
import platform

import pytest
import torch
import setuptools  # noqa: F401  (patches distutils, as pip's build does)
from distutils.core import run_setup

from extending_pytorch import build_flags
from extending_pytorch.ops import triplet_hinge_loss
from extending_pytorch.reference import reference_triplet_hinge_loss

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = dict(t1=-0.5, t2=0.5, beta=0.3)


def bf16_embeddings(seed=0):
    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(32, 64)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(64, 32, generator=generator) / 6)
    raw = [torch.randn(48, 32, generator=generator) for _ in range(3)]
    return layer, raw


# ---- Autocast ----------------------------------------------------------------


def test_autocast_computes_the_loss_in_float32():
    # Catches a missing register_autocast (the operator would run in
    # bfloat16 and return bfloat16) and a registration casting to bfloat16.
    layer, raw = bf16_embeddings()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embeddings = [layer(x) for x in raw]
        loss = triplet_hinge_loss(*embeddings, **SETTINGS)
    assert all(e.dtype == torch.bfloat16 for e in embeddings)
    assert loss.dtype == torch.float32
    expected = reference_triplet_hinge_loss(
        *(e.float() for e in embeddings), **SETTINGS
    )
    torch.testing.assert_close(loss, expected)
    # The same embeddings in bfloat16 give a visibly different loss: the
    # float32 result is not a coincidence of rounding.
    in_bf16 = triplet_hinge_loss(*(e.detach() for e in embeddings), **SETTINGS)
    assert not torch.allclose(in_bf16.float(), expected, rtol=1e-4, atol=0)


def test_autocast_gradients_reach_the_bfloat16_embeddings():
    # Catches casts that cut the graph (no gradient for the embeddings or
    # the layer) or gradients of the wrong dtype.
    layer, raw = bf16_embeddings(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embeddings = [layer(x) for x in raw]
        for e in embeddings:
            e.retain_grad()
        triplet_hinge_loss(*embeddings, **SETTINGS).backward()
    reference = [e.detach().float().requires_grad_() for e in embeddings]
    reference_triplet_hinge_loss(*reference, **SETTINGS).backward()
    for e, r in zip(embeddings, reference):
        assert e.grad.dtype == torch.bfloat16
        torch.testing.assert_close(e.grad, r.grad.bfloat16())
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32


def test_autocast_leaves_float64_and_other_regions_alone():
    # Catches a cast applied outside autocast regions, or to float64 inputs
    # (autocast never lowers float64).
    generator = torch.Generator().manual_seed(2)
    x = [torch.randn(8, 5, generator=generator, dtype=torch.float64) for _ in range(3)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert triplet_hinge_loss(*x, **SETTINGS).dtype == torch.float64
    h = [t.bfloat16() for t in x]
    assert triplet_hinge_loss(*h, **SETTINGS).dtype == torch.bfloat16


# ---- The flags of a wheel build ------------------------------------------------


def build_ext_command(monkeypatch, *, editable: bool):
    """setup.py's build_ext, as pip would configure it, without compiling."""
    monkeypatch.delenv("EXTENDING_PYTORCH_SKIP_NATIVE", raising=False)
    distribution = run_setup(str(ROOT / "extensions" / "setup.py"), stop_after="init")
    command = distribution.get_command_obj("build_ext")
    command.editable_mode = editable
    return distribution, command


def native_only(flags):
    return [f for f in flags if f in build_flags.NATIVE_ONLY_FLAGS or f.startswith("-march")]


def test_wheel_build_uses_portable_flags(monkeypatch):
    # Catches the old build, which compiled this CPU's -mavx2 -mfma into
    # every wheel: installed on a CPU without AVX2, it dies with SIGILL.
    monkeypatch.delenv("EXTENDING_PYTORCH_PORTABLE", raising=False)
    distribution, command = build_ext_command(monkeypatch, editable=False)
    assert command.choose_cpu_flags() is True
    assert distribution.ext_modules
    for ext in distribution.ext_modules:
        assert native_only(ext.extra_compile_args["cxx"]) == [], ext.name
        assert "-fopenmp" in ext.extra_compile_args["cxx"] or not platform.system() == "Linux"


@pytest.mark.skipif(
    not (platform.machine() == "x86_64" and {"avx2", "fma", "f16c"} <= build_flags._cpu_flags()),
    reason="needs an AVX2 CPU",
)
def test_editable_build_uses_this_cpu(monkeypatch):
    # Catches the opposite mistake: local builds losing AVX2 (chapter 4's
    # benchmarks would silently measure the portable code).
    monkeypatch.delenv("EXTENDING_PYTORCH_PORTABLE", raising=False)
    distribution, command = build_ext_command(monkeypatch, editable=True)
    assert command.choose_cpu_flags() is False
    for ext in distribution.ext_modules:
        assert "-mavx2" in ext.extra_compile_args["cxx"], ext.name


def test_portable_override_for_shared_environments(monkeypatch):
    # An editable install in an environment that other machines use.
    monkeypatch.setenv("EXTENDING_PYTORCH_PORTABLE", "1")
    distribution, command = build_ext_command(monkeypatch, editable=True)
    assert command.choose_cpu_flags() is True
    for ext in distribution.ext_modules:
        assert native_only(ext.extra_compile_args["cxx"]) == [], ext.name


def test_stable_wheel_flags_are_portable():
    # The stable-ABI wheel is distributable by design: no CPU-specific flag;
    # its hot loops are cloned per instruction set instead.
    distribution = run_setup(str(ROOT / "extensions" / "stable" / "setup.py"), stop_after="init")
    (ext,) = distribution.ext_modules
    flags = ext.extra_compile_args["cxx"]
    assert native_only(flags) == []
    # torch 2.13.0, the oldest the book supports and the first whose stable API gives the
    # current CUDA stream: major << 56 | minor << 48 (torch/csrc/stable/version.h).
    assert f"-DTORCH_TARGET_VERSION=0x{2 << 56 | 13 << 48:016x}" in flags
    assert ext.py_limited_api
    source = (ROOT / "extensions" / "csrc" / "stable" / "triplet_stable.cpp").read_text()
    assert 'target_clones("arch=x86-64-v3", "default")' in source


@pytest.mark.parametrize("name", ["triplet_hinge_loss", "triplet_hinge_loss_with_grads"])
@pytest.mark.parametrize("key", ["AutocastCPU", "AutocastCUDA"])
def test_autocast_rule_is_registered_for_cpu_and_cuda(name, key):
    # Catches a rule for the CPU only: under torch.autocast("cuda", torch.float16) the
    # operator would then run in float16 (its squared distances overflow at 65504) and
    # refuse float16 activations beside a float32 bank of negatives.
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"extending_pytorch::{name}", key)


@pytest.mark.parametrize(
    "op", ["forward", "with_grads"]
)
@pytest.mark.parametrize(
    "make, message",
    [
        # The unusual input moves: the positive's shape, the negative's dtype, the anchor's rank.
        (lambda: (torch.empty(4, 3), torch.empty(4, 2), torch.empty(4, 3)),
         r"positive must have the same shape as anchor \(4, 3\), got \(4, 2\)"),
        (lambda: (torch.empty(4, 3), torch.empty(4, 3), torch.empty(4, 3, dtype=torch.float64)),
         r"negative must have the same dtype as anchor \(torch.float32\), got torch.float64"),
        (lambda: (torch.empty(12), torch.empty(4, 3), torch.empty(4, 3)),
         r"anchor must be 2-D \(batch, dim\), got 1-D"),
    ],
)
def test_fake_implementation_checks_every_input_while_tracing(op, make, message):
    # Meta tensors run the operator's fake implementation, as torch.compile and export do
    # when they trace. Catches a fake that checks only the anchor's rank: a mismatched
    # positive or negative would then surface only when the kernel runs.
    tensors = [t.to("meta") for t in make()]
    with pytest.raises((ValueError, TypeError), match=message):
        if op == "with_grads":
            torch.ops.extending_pytorch.triplet_hinge_loss_with_grads.default(
                *tensors, -1.0, 0.5, 0.5, "mean", [True, True, True]
            )
        else:
            torch.ops.extending_pytorch.triplet_hinge_loss.default(*tensors, -1.0, 0.5, 0.5, "mean")
