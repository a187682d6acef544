"""Chapter 4's stable-ABI operator, shipped as a wheel and installed elsewhere.

The wheel is built once per session from extensions/stable with the torch of
this environment (`pip wheel --no-build-isolation`), into
extensions/stable/build/ (ignored by git), and installed into a fresh virtual
environment. That environment must see the wheel and torch, and nothing of
the repository:

- it is a new `python -m venv --without-pip` with the wheel pip-installed
  into its own site-packages;
- torch is not downloaded again: one line in a .pth file appends this
  environment's site-packages to its sys.path. A directory added that way is
  searched for modules, but its own .pth files are not run, so the editable
  install of extending_pytorch (a .pth import hook) stays invisible; a test
  checks that importing extending_pytorch fails there;
- the check runs from a temporary directory, so the repository is not on
  sys.path either.

The fresh environment computes losses and gradients and saves them; this
process compares them with chapter 1's reference.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

from extending_pytorch.reference import reference_triplet_hinge_loss

ROOT = pathlib.Path(__file__).resolve().parents[1]
STABLE = ROOT / "extensions" / "stable"
DIST = STABLE / "build" / "dist"
# d_ap is about 2·D for these random inputs: t2 = 80 leaves both sides of
# the pull hinge populated for D = 37 and D = 65, t1 = -5 both sides of push.
SETTINGS = dict(t1=-5.0, t2=80.0, beta=0.3)


@pytest.fixture(scope="module")
def wheel() -> pathlib.Path:
    # A clean build: stale objects in build/ would hide a change of flags.
    shutil.rmtree(STABLE / "build", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-build-isolation",
         "--no-deps", "--wheel-dir", str(DIST), str(STABLE)],
        check=True,
        cwd=ROOT,
    )
    (built,) = DIST.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_python(wheel, tmp_path_factory) -> pathlib.Path:
    env_dir = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    torch_site = pathlib.Path(torch.__file__).resolve().parents[1]
    (pathlib.Path(site) / "torch_from_parent.pth").write_text(f"{torch_site}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    return python


def run_fresh(python: pathlib.Path, script: str, cwd: pathlib.Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run(
        [str(python), "-c", textwrap.dedent(script)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_wheel_is_abi3_and_one_per_platform(wheel):
    # Catches a build without py_limited_api: it would be tagged cp311-cp311
    # and refuse to install on any other Python.
    assert wheel.name.endswith("-cp310-abi3-linux_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "extending_pytorch_stable/_C.abi3.so" in names, names


def test_library_uses_only_the_stable_c_abi(wheel, tmp_path):
    # What the stable ABI buys: the library asks torch only for C functions
    # (aoti_torch_*, torch_*), never for a C++ symbol of at::, c10:: or
    # torch:: whose mangled name changes between releases. Catches an
    # #include <ATen/...> or <torch/library.h> slipping into the source.
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("extending_pytorch_stable/_C.abi3.so", tmp_path)
    library = tmp_path / "extending_pytorch_stable" / "_C.abi3.so"
    undefined = subprocess.run(
        ["nm", "--dynamic", "--undefined-only", str(library)],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    cxx_torch = [s for s in undefined if s.startswith(("_ZN2at", "_ZN3c10", "_ZN5torch"))]
    assert cxx_torch == [], cxx_torch[:5]
    assert any(s.startswith("torch_parallel_for") for s in undefined)
    # No Python symbol outside the limited API either (a sample that
    # pybind11 or a non-limited build would use).
    assert not any(s.startswith("_PyObject_") or s == "PyUnicode_AsUTF8" for s in undefined)


def test_fresh_environment_sees_only_the_wheel(fresh_python, tmp_path):
    # Catches a test environment that leaks the repository (PYTHONPATH, the
    # working directory, the editable install): then the checks below would
    # test the repository's files, not the wheel's.
    out = run_fresh(
        fresh_python,
        """
        import importlib.util, json, sys
        import torch, extending_pytorch_stable
        print(json.dumps({
            "prefix": sys.prefix,
            "package": extending_pytorch_stable.__file__,
            "repo_package": importlib.util.find_spec("extending_pytorch") is not None,
            "torch": torch.__version__,
        }))
        """,
        tmp_path,
    )
    info = json.loads(out)
    assert info["repo_package"] is False
    venv = str(fresh_python.parents[1])
    assert info["prefix"] == venv
    assert info["package"].startswith(venv)
    assert info["torch"] == torch.__version__


PROBE = """
import torch, extending_pytorch_stable as eps
cases = torch.load("cases.pt")
results = []
for case in cases:
    base = [b.clone().requires_grad_() for b in case["bases"]]
    # A view is passed as the view itself: the operator reads its strides.
    inputs = [b.t() if case["transposed"] else b[:, ::2] if case["sliced"] else b
              for b in base]
    loss = eps.triplet_hinge_loss(*inputs, reduction=case["reduction"], **case["settings"])
    torch.autograd.backward(loss, case["grad_output"])
    results.append({"loss": loss.detach(), "grads": [b.grad for b in base]})
errors = {}
a = torch.randn(4, 3)
for name, call in {
    "shape": lambda: eps.triplet_hinge_loss(a, torch.randn(4, 2), a, t1=0, t2=0, beta=1),
    "dtype": lambda: eps.triplet_hinge_loss(a.int(), a.int(), a.int(), t1=0, t2=0, beta=1),
    "dim": lambda: eps.triplet_hinge_loss(a[0], a[0], a[0], t1=0, t2=0, beta=1),
    "finite": lambda: torch.ops.extending_pytorch_stable.triplet_hinge_loss(
        a, a, a, float("nan"), 0.0, 1.0),
    "margin": lambda: eps.triplet_hinge_loss(a, a, a, t1=0.5, t2=0, beta=1),
    "double_backward": lambda: torch.autograd.grad(
        torch.autograd.grad(
            eps.triplet_hinge_loss(x := a.clone().requires_grad_(), a + 1, a - 1,
                                   t1=-1.0, t2=0.0, beta=1.0),
            x, create_graph=True)[0].sum(), x),
}.items():
    try:
        call()
        errors[name] = None
    except Exception as error:
        errors[name] = str(error)
low = [a.bfloat16().requires_grad_() for a in (a, a + 1, a - 1)]
with torch.autocast("cpu", dtype=torch.bfloat16):
    autocast_loss = eps.triplet_hinge_loss(*low, t1=-1.0, t2=0.0, beta=1.0)
autocast = {"loss": autocast_loss.dtype, "grad": torch.autograd.grad(autocast_loss, low[0])[0].dtype}
torch.save({"results": results, "errors": errors, "autocast": autocast}, "results.pt")
"""


def make_cases():
    generator = torch.Generator().manual_seed(0)
    cases = []
    for dtype, reduction, layout in [
        (torch.float32, "mean", "plain"),
        (torch.float64, "sum", "plain"),
        (torch.float64, "none", "plain"),
        (torch.float64, "mean", "transposed"),
        (torch.float64, "none", "sliced"),
        (torch.bfloat16, "mean", "plain"),
    ]:
        shape = (37, 65) if layout == "transposed" else (65, 37)
        bases = [torch.randn(shape, generator=generator, dtype=dtype) for _ in range(3)]
        batch = 37 if layout == "transposed" else 65
        grad_output = (
            torch.randn(batch, generator=generator, dtype=dtype)
            if reduction == "none"
            else torch.tensor(1.7, dtype=dtype)
        )
        cases.append({
            "bases": bases, "transposed": layout == "transposed",
            "sliced": layout == "sliced", "reduction": reduction,
            "grad_output": grad_output, "settings": SETTINGS,
        })
    return cases


def expected(case):
    base = [b.clone().double().requires_grad_() for b in case["bases"]]
    inputs = [b.t() if case["transposed"] else b[:, ::2] if case["sliced"] else b
              for b in base]
    loss = reference_triplet_hinge_loss(*inputs, reduction=case["reduction"], **SETTINGS)
    torch.autograd.backward(loss, case["grad_output"].double())
    return loss.detach(), [b.grad for b in base]


@pytest.fixture(scope="module")
def probe(fresh_python, tmp_path_factory):
    work = tmp_path_factory.mktemp("probe")
    cases = make_cases()
    torch.save(cases, work / "cases.pt")
    run_fresh(fresh_python, PROBE, work)
    return cases, torch.load(work / "results.pt")


def test_wheel_matches_the_reference_in_a_fresh_environment(probe):
    # Catches a wrong kernel (loss or gradients) in the stable build, a wrong
    # reduction (mean vs sum), a stride bug on views (transposed rows, every
    # other column), and a lost grad_output scale.
    cases, out = probe
    for case, got in zip(cases, out["results"]):
        loss, grads = expected(case)
        dtype = case["bases"][0].dtype
        tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
        assert got["loss"].dtype == dtype
        torch.testing.assert_close(got["loss"].double(), loss, **tol, check_dtype=False)
        for g, e in zip(got["grads"], grads):
            torch.testing.assert_close(g.double(), e, **tol, check_dtype=False)


@pytest.mark.parametrize(
    "name, message",
    [
        ("shape", "positive must have the same shape as anchor [4, 3], got [4, 2]"),
        ("dtype", "anchor must have a floating-point dtype"),
        ("dim", "anchor must be 2-D (batch, dim), got 1-D"),
        ("finite", "t1, t2 and beta must be finite"),
        ("double_backward", "supports first derivatives only"),
        ("margin", "t1 must be <= 0"),
    ],
)
def test_wheel_refuses_bad_input_clearly(probe, name, message):
    _, out = probe
    assert out["errors"][name] is not None, f"{name} was accepted"
    assert message in out["errors"][name]


def test_wheel_computes_in_float32_under_autocast(probe):
    # Catches the stable package without its autocast rule: under
    # torch.autocast(bfloat16) it would compute the loss in bfloat16.
    _, out = probe
    assert out["autocast"] == {"loss": torch.float32, "grad": torch.bfloat16}


def syntax_check(target, *defines):
    from torch.utils.cpp_extension import include_paths

    probe_source = pathlib.Path(__file__).parents[1] / "extensions/csrc/stable/target_version_probe.cpp"
    major, minor = target
    version = f"0x{major << 56 | minor << 48:016x}"
    command = ["c++", "-fsyntax-only", "-std=c++17", f"-DTORCH_TARGET_VERSION={version}",
               *defines, *(f"-I{p}" for p in include_paths()), str(probe_source)]
    return subprocess.run(command, capture_output=True, text=True)


def test_target_version_hides_newer_apis_and_aten():
    # Catches a TORCH_TARGET_VERSION that does not gate anything (then a
    # wheel could call a 2.13 function and fail to load on 2.10): the probe
    # compiles for its own target, an API added in 2.13 is a compile error
    # below a 2.13 target and compiles at 2.13, and ATen is refused outright.
    assert syntax_check((2, 10)).returncode == 0
    newer_at_2_10 = syntax_check((2, 10), "-DPROBE_NEWER_API")
    assert newer_at_2_10.returncode != 0 and "set_python_module" in newer_at_2_10.stderr
    assert syntax_check((2, 13), "-DPROBE_NEWER_API").returncode == 0
    aten = syntax_check((2, 10), "-DPROBE_ATEN")
    assert aten.returncode != 0 and "should not be included" in aten.stderr
