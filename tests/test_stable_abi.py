"""Chapter 7: the stable-ABI operator, shipped as a wheel and installed elsewhere.

The wheel is built once per session from a copy of extensions/stable and
extensions/csrc with the torch of this environment (`pip wheel
--no-build-isolation`), or taken from extensions/stable/wheel_cache.py's
cache (extensions/stable/build/, ignored by git) when chapter 7 has just
built it from the same sources with the same tools, and the same file is installed
into a fresh virtual environment per torch of TORCH_ENVIRONMENTS: this
environment's torch, and the oldest torch the book supports (.venv-oldest,
`make .venv-oldest`). Each fresh environment must see the wheel and its torch,
and nothing of the repository:

- it is a new `python -m venv --without-pip`, made by that environment's
  Python, with the wheel pip-installed into its own site-packages;
- torch is not installed again: one line in a .pth file appends the torch
  environment's site-packages to its sys.path. A directory added that way is
  searched for modules, but its own .pth files are not run, so an editable
  install of extending_pytorch (a .pth import hook) stays invisible; a test
  checks that importing extending_pytorch fails there;
- the checks run from a temporary directory, so the repository is not on
  sys.path either.

The fresh environment computes losses and gradients and saves them; this
process compares them with chapter 1's reference.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pathlib
import re
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
CSRC = ROOT / "extensions" / "csrc"
# The torch environments the wheel is installed next to: this one (whose
# torch builds the wheel) and the oldest torch the book supports.
TORCH_ENVIRONMENTS = {
    "this": pathlib.Path(sys.executable),
    "oldest": ROOT / ".venv-oldest" / "bin" / "python",
}
# Random inputs: d_ap is about 2·D; t2 = 80 leaves both sides of the pull
# hinge populated for D = 37 and D = 65, t1 = -5 both sides of push.
SETTINGS = dict(t1=-5.0, t2=80.0, beta=0.3)
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Against the float64 reference: the kernel sums D = 37 squares in float32
# for all but float64, and rounds the results to the input's dtype.
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-2, atol=2e-2),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
}


def load_module(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_setup():
    """extensions/stable/setup.py as a module, without running setup()."""
    return load_module(STABLE / "setup.py", "stable_setup")


wheel_cache = load_module(STABLE / "wheel_cache.py", "stable_wheel_cache")


def copy_sources(target: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """extensions/stable and extensions/csrc copied under target, as chapter 7
    copies them: a clean build (no stale objects of an earlier one), and the
    cache key computed over exactly the files compiled."""
    stable = target / "stable"
    shutil.copytree(STABLE, stable, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    shutil.copytree(CSRC, target / "csrc")
    return stable, target / "csrc"


# ---- The wheel --------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    # `make test` runs chapter 7 first, which builds this wheel from the same
    # sources and stores it (wheel_cache.py): then there is nothing to build.
    # Otherwise: where torch has CUDA and nvcc is found, the wheel gets the
    # CUDA kernels for setup.py's default GPU list (one small .cu file: about
    # 20 s of CPU in all, 9 s without CUDA).
    stable, csrc = copy_sources(tmp_path_factory.mktemp("stable-sources"))
    key = wheel_cache.key(stable, csrc)
    found = wheel_cache.cached(key)
    if found is not None:
        return found
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-build-isolation",
         "--no-deps", "--wheel-dir", str(dist), str(stable)],
        check=True,
        cwd=ROOT,
    )
    (built,) = dist.glob("*.whl")
    return wheel_cache.store(built, key)


def expect_cuda_kernels() -> bool:
    """Whether setup.py builds the CUDA kernels here (the same decision)."""
    setup = load_setup()
    switch = os.environ.get(setup.CUDA_SWITCH, "")
    return setup.cuda_plan(torch.version.cuda, setup.toolkit_home(), switch)[0]


def test_wheel_is_abi3_and_one_per_platform(wheel):
    # Catches a build without py_limited_api: it would be tagged cp311-cp311
    # and refuse to install on any other Python.
    assert wheel.name.endswith("-cp310-abi3-linux_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "extending_pytorch_stable/_C.abi3.so" in names, names
    # Only the package and its metadata: not setup.py, not wheel_cache.py.
    assert all(n.startswith(("extending_pytorch_stable/", "extending_pytorch_stable-"))
               for n in names), names


@pytest.fixture(scope="module")
def library(wheel, tmp_path_factory) -> pathlib.Path:
    target = tmp_path_factory.mktemp("library")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("extending_pytorch_stable/_C.abi3.so", target)
    return target / "extending_pytorch_stable" / "_C.abi3.so"


def test_library_uses_only_the_stable_c_abi(library):
    # What the stable ABI buys: the library asks torch only for C functions
    # (aoti_torch_*, torch_*), never for a C++ symbol whose demangled text
    # names one of torch's namespaces (at::, c10::, c10d::, torch::, caffe2::;
    # chapter 7's rule): its mangled name changes between releases. Catches
    # an #include <ATen/...> or <torch/library.h> slipping into the source.
    undefined = subprocess.run(
        ["nm", "--dynamic", "--undefined-only", "--demangle", str(library)],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    cxx_torch = [s for s in undefined if re.search(r"\b(at|c10|c10d|torch|caffe2)::", s)]
    assert cxx_torch == [], cxx_torch[:5]
    assert any(s.split()[-1].startswith("torch_parallel_for") for s in undefined)
    # No Python symbol outside the limited API either (a sample that
    # pybind11 or a non-limited build would use).
    names = [s.split()[-1] for s in undefined]
    assert not any(n.startswith("_PyObject_") or n == "PyUnicode_AsUTF8" for n in names)


def test_library_loads_without_cuda_libraries(library):
    # Catches a CUDA build that links what CUDAExtension links by default
    # (libcudart.so, libc10_cuda.so, libtorch_cuda.so): a CPU-only torch has
    # none of them, so the wheel would fail to load there ("cannot open
    # shared object file"). setup.py links the CUDA runtime statically.
    dynamic = subprocess.run(
        ["readelf", "--dynamic", str(library)], check=True, capture_output=True, text=True
    ).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert "libc10.so" in needed, needed
    forbidden = [n for n in needed if re.match(r"lib(cudart|c10_cuda|torch_cuda|torch_python)", n)]
    assert forbidden == [], needed


# ---- The wheel cache: keyed by every input it lists ------------------------------


def test_wheel_cache_key_changes_with_every_input_of_the_build(tmp_path, monkeypatch):
    # Catches a key that misses an input of the build: then the test would
    # install a wheel built from other sources (or for another GPU list, or
    # without the CUDA kernels) and pass or fail for the wrong code. One byte
    # changed in each kind of source, a new header, each setting of the
    # build, each changes the key; the build's own outputs in the package
    # directory (build/, *.egg-info, bytecode) do not.
    stable, csrc = copy_sources(tmp_path)
    base = wheel_cache.key(stable, csrc)
    assert wheel_cache.key(*copy_sources(tmp_path / "again")) == base  # not the paths: the bytes
    edited = [
        csrc / "stable" / "triplet_stable.cpp",
        csrc / "stable" / "triplet_stable_checks.h",
        csrc / "cuda" / "triplet.cu",
        csrc / "triplet_math.h",
        stable / "setup.py",
        stable / "pyproject.toml",
        stable / "extending_pytorch_stable" / "ops.py",
    ]
    for path in edited:
        original = path.read_bytes()
        flipped = original[:100] + bytes([original[100] ^ 1]) + original[101:]
        path.write_bytes(flipped)
        assert wheel_cache.key(stable, csrc) != base, path.relative_to(tmp_path)
        path.write_bytes(original)
    assert wheel_cache.key(stable, csrc) == base
    (csrc / "new_header.h").write_text("// new\n")
    assert wheel_cache.key(stable, csrc) != base
    (csrc / "new_header.h").unlink()
    # The build's settings, GCC's search paths (headers, libraries such as another
    # libcudart_static.a, its own programs) and setuptools' extra configuration.
    for name, value in [("TORCH_CUDA_ARCH_LIST", "8.0"), ("EXTENDING_PYTORCH_STABLE_CUDA", "0"),
                        ("CXXFLAGS", "-O0"), ("LDCXXSHARED", "g++ -shared -s"),
                        ("CPATH", "/x"), ("CPLUS_INCLUDE_PATH", "/x"), ("C_INCLUDE_PATH", "/x"),
                        ("LIBRARY_PATH", "/x"), ("GCC_EXEC_PREFIX", "/x/"), ("COMPILER_PATH", "/x"),
                        ("DIST_EXTRA_CONFIG", str(tmp_path / "absent.cfg"))]:
        old = os.environ.get(name)
        monkeypatch.setenv(name, value)
        assert wheel_cache.key(stable, csrc) != base, name
        if old is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, old)
    for output in ("build/temp/x.o", "extending_pytorch_stable.egg-info/PKG-INFO",
                   "extending_pytorch_stable/__pycache__/ops.cpython-311.pyc"):
        (stable / output).parent.mkdir(parents=True, exist_ok=True)
        (stable / output).write_bytes(b"\0")
    assert wheel_cache.key(stable, csrc) == base


def fake_program(path: pathlib.Path, version: str, ld: pathlib.Path | None = None):
    """A shell script that prints a version (and, asked as GCC is, where its ld is)."""
    answer = f'[ "$1" = -print-prog-name=ld ] && {{ echo {ld}; exit 0; }}\n' if ld else ""
    path.write_text(f"#!/bin/sh\n{answer}echo {version}\n")
    path.chmod(0o755)


def test_wheel_cache_key_changes_with_the_tools_and_files_outside_the_sources(tmp_path, monkeypatch):
    # Catches a key that hashes the compiler but not what links (the driver
    # LDCXXSHARED names, the ld it runs: a binutils upgrade can change what
    # the library requires of glibc), nor setuptools' configuration files, nor
    # torch's own headers and libraries (a locally patched torch keeps its
    # version and git commit).
    stable, csrc = copy_sources(tmp_path / "sources")
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_program(tools / "ld", "ld 1")
    fake_program(tools / "linkxx", "linkxx 1", ld=tools / "ld")
    monkeypatch.setenv("LDCXXSHARED", f"{tools / 'linkxx'} -shared")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    base = wheel_cache.key(stable, csrc)
    fake_program(tools / "ld", "ld 2")
    assert wheel_cache.key(stable, csrc) != base, "ld"
    fake_program(tools / "ld", "ld 1")
    fake_program(tools / "linkxx", "linkxx 2", ld=tools / "ld")
    assert wheel_cache.key(stable, csrc) != base, "link driver"
    fake_program(tools / "linkxx", "linkxx 1", ld=tools / "ld")
    assert wheel_cache.key(stable, csrc) == base
    (home / ".pydistutils.cfg").write_text("[build_ext]\ndefine=X\n")
    assert wheel_cache.key(stable, csrc) != base, "~/.pydistutils.cfg"
    (home / ".pydistutils.cfg").unlink()
    extra = tmp_path / "extra.cfg"
    monkeypatch.setenv("DIST_EXTRA_CONFIG", str(extra))
    without = wheel_cache.key(stable, csrc)
    extra.write_text("[build_ext]\nlibraries=m\n")
    assert wheel_cache.key(stable, csrc) != without, "DIST_EXTRA_CONFIG's contents"
    monkeypatch.delenv("DIST_EXTRA_CONFIG")
    # torch's files: one header of a copy of the tree grows by a byte.
    fake_torch = tmp_path / "torch"
    (fake_torch / "include" / "c10").mkdir(parents=True)
    (fake_torch / "lib").mkdir()
    header = fake_torch / "include" / "c10" / "macros.h"
    header.write_text("#define X 1\n")
    (fake_torch / "lib" / "libc10.so").write_bytes(b"\0")
    patched = wheel_cache.torch_files(fake_torch)
    header.write_text("#define X 12\n")
    assert wheel_cache.torch_files(fake_torch) != patched
    monkeypatch.setattr(torch, "__file__", str(fake_torch / "__init__.py"))
    assert wheel_cache.key(stable, csrc) != base, "torch's files"


def test_wheel_cache_returns_what_was_stored_under_the_key(tmp_path):
    # Catches a cache that answers for a key it never stored, or stores a
    # wheel under another name.
    wheel_file = tmp_path / "extending_pytorch_stable-0.1.0-cp310-abi3-linux_x86_64.whl"
    wheel_file.write_bytes(b"wheel")
    cache = tmp_path / "cache"
    assert wheel_cache.cached("a" * 64, cache) is None
    stored = wheel_cache.store(wheel_file, "a" * 64, cache)
    assert stored.name == wheel_file.name and stored.read_bytes() == b"wheel"
    assert wheel_cache.cached("a" * 64, cache) == stored
    assert wheel_cache.cached("b" * 64, cache) is None


# ---- setup.py's choice: CUDA or CPU-only --------------------------------------


@pytest.mark.parametrize(
    "torch_cuda, home, switch, builds, words",
    [
        ("13.2", "/usr/local/cuda", "", True, "building the CUDA kernels too"),
        (None, "/usr/local/cuda", "", False, "CPU-only wheel: this torch has no CUDA"),
        ("13.2", None, "", False, "CPU-only wheel: no CUDA toolkit (nvcc) was found"),
        ("13.2", "/usr/local/cuda", "0", False, "CPU-only wheel: EXTENDING_PYTORCH_STABLE_CUDA=0"),
        ("13.2", "/usr/local/cuda", "1", True, "building the CUDA kernels too"),
    ],
)
def test_setup_builds_cuda_kernels_when_it_can_and_says_what_it_builds(
    torch_cuda, home, switch, builds, words
):
    # Catches a setup.py that requires a visible GPU (then no CPU machine
    # or CI runner would ever build the CUDA wheel), that builds CUDA with a
    # CPU-only torch, or that falls back to CPU-only silently.
    with_cuda, message = load_setup().cuda_plan(torch_cuda, home, switch)
    assert with_cuda is builds
    assert words in message


def test_setup_builds_for_the_books_gpus():
    # Catches the two default lists drifting apart: the wheel would then be
    # built for other GPUs than the ones chapter 5 names.
    from extending_pytorch import build_flags

    assert load_setup().DEFAULT_CUDA_ARCH_LIST == build_flags.DEFAULT_CUDA_ARCH_LIST


@pytest.mark.parametrize(
    "torch_cuda, home, switch, error",
    [
        (None, "/usr/local/cuda", "1", "this torch has no CUDA"),
        ("13.2", None, "1", "no CUDA toolkit (nvcc) was found"),
        ("13.2", "/usr/local/cuda", "yes", 'must be "0", "1" or unset'),
    ],
)
def test_setup_refuses_an_impossible_cuda_request(torch_cuda, home, switch, error):
    with pytest.raises((RuntimeError, ValueError), match=re.escape(error)):
        load_setup().cuda_plan(torch_cuda, home, switch)


# ---- Fresh environments, one per torch ------------------------------------------


@dataclasses.dataclass
class Fresh:
    name: str  # a key of TORCH_ENVIRONMENTS
    python: pathlib.Path  # the fresh environment's interpreter
    torch_version: str  # of the torch environment, asked there


def environment_python(name: str) -> pathlib.Path:
    python = TORCH_ENVIRONMENTS[name]
    this_torch = tuple(int(part) for part in torch.__version__.split(".")[:2])
    if name == "oldest" and not python.exists() and this_torch == load_setup().TARGET_TORCH[:2]:
        # `make test-oldest` runs these tests with the oldest torch itself,
        # from a copy of the tree without .venv-oldest: "this" covers it.
        pytest.skip(f"this torch ({torch.__version__}) is the oldest the wheel targets already")
    if not python.exists():
        message = (
            f"{python} does not exist: run `make .venv-oldest` to create the environment "
            "of the oldest torch the book supports"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="module", params=list(TORCH_ENVIRONMENTS))
def fresh(request, wheel, tmp_path_factory) -> Fresh:
    source = environment_python(request.param)
    found = subprocess.run(
        [str(source), "-c",
         "import json, pathlib, torch; print(json.dumps("
         "[str(pathlib.Path(torch.__file__).resolve().parents[1]), torch.__version__]))"],
        check=True, capture_output=True, text=True,
    ).stdout
    torch_site, torch_version = json.loads(found)
    env_dir = tmp_path_factory.mktemp(f"fresh-{request.param}") / "venv"
    subprocess.run([str(source), "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    (pathlib.Path(site) / "torch_from_parent.pth").write_text(f"{torch_site}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    return Fresh(request.param, python, torch_version)


def run_fresh(python: pathlib.Path, script: str, cwd: pathlib.Path, check: bool = True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run(
        [str(python), "-c", textwrap.dedent(script)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_fresh_environment_sees_only_the_wheel_and_its_torch(fresh, tmp_path):
    # Catches a test environment that leaks the repository (PYTHONPATH, the
    # working directory, the editable install) or another torch: then the
    # checks below would test the repository's files, or this environment's
    # torch, not the wheel on the torch they name.
    out = run_fresh(
        fresh.python,
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
    ).stdout
    info = json.loads(out)
    assert info["repo_package"] is False
    venv = str(fresh.python.parents[1])
    assert info["prefix"] == venv
    assert info["package"].startswith(venv)
    assert info["torch"] == fresh.torch_version
    if fresh.name == "this":
        assert info["torch"] == torch.__version__
    else:
        # An "oldest" environment with this torch would test nothing new.
        assert torch.torch_version.TorchVersion(info["torch"]) < torch.__version__.split("+")[0]


def test_package_imports_on_its_own(fresh, tmp_path):
    # Catches an __init__.py that loads _C before importing torch: setuptools
    # gives the library no rpath to libc10.so and libtorch_cpu.so, so in a
    # fresh interpreter the loader fails with "libc10.so: cannot open shared
    # object file" unless torch has loaded them already. Nothing but the
    # package is imported here.
    result = run_fresh(
        fresh.python,
        """
        import extending_pytorch_stable as eps
        import torch  # only now, to make the inputs
        a = torch.zeros(2, 3)
        print(float(eps.triplet_hinge_loss(a, a + 1, a - 2, t1=-1.0, t2=0.0, beta=1.0)))
        """,
        tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # d_ap = 3, d_an = 12: max(3 - 12, -1) + 1 * max(3, 0) = 2.
    assert float(result.stdout) == 2.0


# ---- What the fresh environments compute -----------------------------------------

PROBE = """
import torch, extending_pytorch_stable as eps

def view(base, kind):
    # A view is passed as the view itself: the operator reads its strides.
    return {"plain": base, "transposed": base.t(), "sliced": base[:, ::2]}[kind]

ops = torch.ops.extending_pytorch_stable
forward = ops.triplet_hinge_loss.default
backward = ops.triplet_hinge_loss_backward.default
forward_d = ops.triplet_hinge_loss_with_distances.default
backward_d = ops.triplet_hinge_loss_backward_from_distances.default
cases = torch.load("cases.pt")
results = []
for case in cases:
    base = [b.clone().requires_grad_(need) for b, need in zip(case["bases"], case["grad_mask"])]
    inputs = [view(b, kind) for b, kind in zip(base, case["layouts"])]
    # The package's function (the distances-saving pair), then the plain
    # operator called itself (its backward recomputes the distances).
    loss = eps.triplet_hinge_loss(*inputs, reduction=case["reduction"], **case["settings"])
    torch.autograd.backward(loss, case["grad_output"])
    grads = [b.grad for b in base]
    for b in base:
        b.grad = None
    s = case["settings"]
    plain = forward(*inputs, s["t1"], s["t2"], s["beta"], case["reduction"])
    torch.autograd.backward(plain, case["grad_output"])
    results.append({"loss": loss.detach(), "grads": grads, "plain_loss": plain.detach(),
                    "plain_grads": [b.grad for b in base]})

# Which operators a step calls (the Python dispatch key sees each one, in the
# forward and in the backward).
from torch.utils._python_dispatch import TorchDispatchMode

class Calls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "extending_pytorch_stable":
            self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))

def operators_called(step):
    with Calls() as calls:
        step()
    return calls.names

r = [torch.randn(5, 4) for _ in range(3)]
hyper = dict(t1=-1.0, t2=0.5, beta=0.3)
def trains():
    eps.triplet_hinge_loss(r[0].clone().requires_grad_(), r[1], r[2], **hyper).backward()
def without_grad():
    with torch.no_grad():
        eps.triplet_hinge_loss(*(t.clone().requires_grad_() for t in r), **hyper)
def plain_operator():
    forward(*(t.clone().requires_grad_() for t in r), -1.0, 0.5, 0.3, "mean").backward()
routes = {
    "trains": operators_called(trains),
    "no_input_requires_grad": operators_called(
        lambda: eps.triplet_hinge_loss(*r, **hyper)),
    "no_grad": operators_called(without_grad),
    "plain_operator": operators_called(plain_operator),
}

# The backward reads the distances it is given, not the rows: given distances
# other than the rows' own, its gradients follow the distances. With t1 = -5,
# t2 = 4: (0, 100) is past no hinge (d_ap - d_an = -100 <= t1, d_ap <= t2), so
# every gradient is 0; (100, 0) is past both. A backward that recomputed the
# distances would return the rows' own gradients both times.
told = []
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
generator = torch.Generator().manual_seed(1)
for device in devices:
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        rows = [torch.randn(6, 5, generator=generator).to(dtype) for _ in range(3)]
        on = [t.to(device) for t in rows]
        loss, distances = forward_d(*on, -5.0, 4.0, 0.5, "sum")
        g = torch.tensor(1.0, dtype=dtype, device=device)
        given = {"own": distances}
        for name, pair in {"none_past": (0.0, 100.0), "both_past": (100.0, 0.0)}.items():
            given[name] = torch.tensor([pair] * 6, dtype=distances.dtype, device=device)
        told.append({
            "device": device, "rows": rows, "distances": distances.cpu(),
            "grads": {name: [x.cpu() for x in backward_d(g, *on, d, -5.0, 4.0, 0.5, "sum")]
                      for name, d in given.items()},
        })

errors = {}
a = torch.randn(4, 3)
m = torch.randn(4, 3, device="meta")
one = torch.tensor(1.0)
cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
# The CUDA kernels, called with CPU tensors: possible without a GPU, since
# every check runs before any CUDA call, and only the device check refuses.
cuda = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
calls = {
    # The Python function, then the CPU kernels.
    "shape": lambda: eps.triplet_hinge_loss(a, torch.randn(4, 2), a, t1=0, t2=0, beta=1),
    "dtype": lambda: eps.triplet_hinge_loss(a.int(), a.int(), a.int(), t1=0, t2=0, beta=1),
    "same_dtype": lambda: eps.triplet_hinge_loss(a, a, a.double(), t1=0, t2=0, beta=1),
    "dim": lambda: eps.triplet_hinge_loss(a[0], a[0], a[0], t1=0, t2=0, beta=1),
    "finite": lambda: forward(a, a, a, float("nan"), 0.0, 1.0),
    "reduction": lambda: forward(a, a, a, 0.0, 0.0, 1.0, "max"),
    "margin": lambda: eps.triplet_hinge_loss(a, a, a, t1=0.5, t2=0, beta=1),
    "t2": lambda: eps.triplet_hinge_loss(a, a, a, t1=0, t2=-1, beta=1),
    "beta": lambda: eps.triplet_hinge_loss(a, a, a, t1=0, t2=0, beta=-1),
    "fake_dim": lambda: forward(m[0], m, m, 0.0, 0.0, 1.0, "mean"),
    # Meta tensors run the fake: every input is checked while tracing.
    "fake_shape": lambda: forward(m, m, m[:, :2], 0.0, 0.0, 1.0, "mean"),
    "fake_dtype": lambda: forward(m, m.double(), m, 0.0, 0.0, 1.0, "mean"),
    "fake_negative_dim": lambda: forward(m, m, m[0], 0.0, 0.0, 1.0, "mean"),
    "python_reduction": lambda: eps.triplet_hinge_loss(a, a, a, t1=0, t2=0, beta=1,
                                                       reduction="max"),
    "cpu_device": lambda: forward.redispatch(cpu, a, m, a, 0.0, 0.0, 1.0, "mean"),
    "cpu_anchor_device": lambda: forward.redispatch(cpu, m, a, a, 0.0, 0.0, 1.0, "mean"),
    "grad_rows": lambda: backward(torch.ones(3), a, a, a, 0.0, 0.0, 1.0, "none"),
    "grad_scalar": lambda: backward(torch.ones(4), a, a, a, 0.0, 0.0, 1.0, "mean"),
    "grad_dtype": lambda: backward(one.double(), a, a, a, 0.0, 0.0, 1.0, "sum"),
    "grad_device": lambda: backward.redispatch(cpu, one.to("meta"), a, a, a, 0.0, 0.0, 1.0,
                                               "sum"),
    "double_backward": lambda: torch.autograd.grad(
        torch.autograd.grad(
            eps.triplet_hinge_loss(x := a.clone().requires_grad_(), a + 1, a - 1,
                                   t1=-1.0, t2=0.0, beta=1.0),
            x, create_graph=True)[0].sum(), x),
    # The CUDA kernels.
    "cuda_shape": lambda: forward.redispatch(cuda, a, a[:, :2], a, 0.0, 0.0, 1.0, "mean"),
    "cuda_dtype": lambda: forward.redispatch(cuda, a.int(), a, a, 0.0, 0.0, 1.0, "mean"),
    "cuda_same_dtype": lambda: forward.redispatch(cuda, a, a.half(), a, 0.0, 0.0, 1.0, "mean"),
    "cuda_dim": lambda: forward.redispatch(cuda, a, a, a[0], 0.0, 0.0, 1.0, "mean"),
    "cuda_reduction": lambda: forward.redispatch(cuda, a, a, a, 0.0, 0.0, 1.0, "max"),
    "cuda_finite": lambda: forward.redispatch(cuda, a, a, a, 0.0, float("inf"), 1.0, "mean"),
    "cuda_device": lambda: forward.redispatch(cuda, a, a, a, 0.0, 0.0, 1.0, "mean"),
    "cuda_backward_shape": lambda: backward.redispatch(cuda, one, a, a[:3], a, 0.0, 0.0, 1.0,
                                                       "sum"),
    "cuda_backward_finite": lambda: backward.redispatch(cuda, one, a, a, a, float("nan"), 0.0,
                                                        1.0, "sum"),
    "cuda_grad_rows": lambda: backward.redispatch(cuda, torch.ones(3), a, a, a, 0.0, 0.0, 1.0,
                                                  "none"),
    "cuda_grad_scalar": lambda: backward.redispatch(cuda, torch.ones(2), a, a, a, 0.0, 0.0,
                                                    1.0, "mean"),
    "cuda_grad_dtype": lambda: backward.redispatch(cuda, one.half(), a, a, a, 0.0, 0.0, 1.0,
                                                   "sum"),
    "cuda_backward_device": lambda: backward.redispatch(cuda, one, a, a, a, 0.0, 0.0, 1.0,
                                                        "sum"),
    # The pair that saves the distances, CPU kernels then CUDA kernels.
    "with_distances_shape": lambda: forward_d(a, a, a[:, :2], 0.0, 0.0, 1.0, "sum"),
    "distances_shape": lambda: backward_d(one, a, a, a, torch.zeros(4, 3), 0.0, 0.0, 1.0, "sum"),
    "distances_dtype": lambda: backward_d(one, a, a, a, torch.zeros(4, 2).double(), 0.0, 0.0,
                                          1.0, "sum"),
    "distances_half": lambda: backward_d(one.half(), a.half(), a.half(), a.half(),
                                         torch.zeros(4, 2).half(), 0.0, 0.0, 1.0, "sum"),
    "distances_device": lambda: backward_d.redispatch(cpu, one, a, a, a,
                                                      torch.zeros(4, 2, device="meta"),
                                                      0.0, 0.0, 1.0, "sum"),
    "distances_grad_rows": lambda: backward_d(torch.ones(3), a, a, a, torch.zeros(4, 2), 0.0,
                                              0.0, 1.0, "none"),
    "double_backward_plain": lambda: torch.autograd.grad(
        torch.autograd.grad(
            forward(x := a.clone().requires_grad_(), a + 1, a - 1, -1.0, 0.0, 1.0, "mean"),
            x, create_graph=True)[0].sum(), x),
    "cuda_with_distances_dim": lambda: forward_d.redispatch(cuda, a, a[0], a, 0.0, 0.0, 1.0,
                                                            "sum"),
    "cuda_with_distances_device": lambda: forward_d.redispatch(cuda, a, a, a, 0.0, 0.0, 1.0,
                                                               "sum"),
    "cuda_distances_shape": lambda: backward_d.redispatch(cuda, one, a, a, a,
                                                          torch.zeros(3, 2), 0.0, 0.0, 1.0,
                                                          "sum"),
    "cuda_distances_dtype": lambda: backward_d.redispatch(cuda, one, a, a, a,
                                                          torch.zeros(4, 2).half(), 0.0, 0.0,
                                                          1.0, "sum"),
    "cuda_from_distances_device": lambda: backward_d.redispatch(cuda, one, a, a, a,
                                                                torch.zeros(4, 2), 0.0, 0.0,
                                                                1.0, "sum"),
}
for name, call in calls.items():
    try:
        call()
        errors[name] = None
    except Exception as error:
        errors[name] = str(error)

low = [x.bfloat16().requires_grad_() for x in (a, a + 1, a - 1)]
with torch.autocast("cpu", dtype=torch.bfloat16):
    autocast_loss = eps.triplet_hinge_loss(*low, t1=-1.0, t2=0.0, beta=1.0)
autocast = {"loss": autocast_loss.dtype,
            "grad": torch.autograd.grad(autocast_loss, low[0])[0].dtype}

# The fake implementations (what torch.compile and export trace with), on
# meta tensors, and torch.library.opcheck: schema, autograd registration,
# fake tensors and an AOT-compiled run against eager, for both fakes.
empty = torch.empty((), device="meta")
def shapes(tensors):
    return [(tuple(t.shape), str(t.dtype)) for t in tensors]

md = m.double()
fake = {
    "mean": tuple(forward(m, m, m, 0.0, 0.0, 1.0, "mean").shape),
    "none": tuple(forward(m, m, m, 0.0, 0.0, 1.0, "none").shape),
    "backward": [tuple(g.shape) for g in backward(empty, m, m, m, 0.0, 0.0, 1.0, "mean")],
    "with_distances_mean": shapes(forward_d(m, m, m, 0.0, 0.0, 1.0, "mean")),
    "with_distances_none_float64": shapes(forward_d(md, md, md, 0.0, 0.0, 1.0, "none")),
    "from_distances": shapes(backward_d(empty, m, m, m, m[:, :2], 0.0, 0.0, 1.0, "mean")),
}
x = [torch.randn(5, 4).requires_grad_(need) for need in (True, True, False)]
opcheck = {}
plain_x = [t.detach() for t in x]
for reduction in ("mean", "none"):
    saved = forward_d(*plain_x, -1.0, 0.5, 0.3, reduction)[1]
    g = torch.ones(5) if reduction == "none" else torch.tensor(1.0)
    for name, op, args in (("plain", forward, x), ("with_distances", forward_d, x),
                           ("from_distances", backward_d, [g, *plain_x, saved])):
        try:
            opcheck[name, reduction] = torch.library.opcheck(op, (*args, -1.0, 0.5, 0.3, reduction))
        except Exception as error:
            opcheck[name, reduction] = str(error)

has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
kernels = {
    f"{op}/{key}": has_kernel(f"extending_pytorch_stable::{op}", key)
    for op in ("triplet_hinge_loss", "triplet_hinge_loss_backward",
               "triplet_hinge_loss_with_distances", "triplet_hinge_loss_backward_from_distances")
    for key in ("CPU", "CUDA", "AutocastCPU", "AutocastCUDA")
}
torch.save({"results": results, "errors": errors, "autocast": autocast, "kernels": kernels,
            "fake": fake, "opcheck": opcheck, "routes": routes, "told": told}, "results.pt")
"""


def make_cases():
    generator = torch.Generator().manual_seed(0)
    cases = []

    def add(dtype, reduction, layouts, grad_mask=(True, True, True), batch=65, dim=37):
        # A base has the shape its view needs to come out (batch, dim).
        shapes = {"plain": (batch, dim), "transposed": (dim, batch), "sliced": (batch, 2 * dim)}
        bases = [torch.randn(shapes[kind], generator=generator, dtype=dtype) for kind in layouts]
        grad_output = (
            torch.randn(batch, generator=generator, dtype=dtype)
            if reduction == "none"
            else torch.tensor(1.7, dtype=dtype)
        )
        cases.append({
            "bases": bases, "layouts": list(layouts), "grad_mask": list(grad_mask),
            "reduction": reduction, "grad_output": grad_output, "settings": SETTINGS,
        })

    plain = ("plain",) * 3
    for dtype in DTYPES:
        add(dtype, "mean", plain)
    add(torch.float64, "sum", plain)
    add(torch.float64, "none", plain)
    add(torch.float64, "mean", ("transposed",) * 3, batch=37, dim=65)
    add(torch.float64, "none", ("sliced",) * 3)
    # One input at a time with a layout of its own, and one at a time
    # without a gradient.
    add(torch.float64, "sum", ("transposed", "plain", "sliced"), batch=37, dim=37)
    add(torch.float32, "none", ("sliced", "transposed", "plain"), batch=37, dim=37)
    add(torch.float64, "mean", ("plain", "sliced", "transposed"), batch=37, dim=37)
    add(torch.float64, "sum", plain, grad_mask=(False, True, True))
    add(torch.float32, "mean", ("transposed", "plain", "plain"), grad_mask=(True, False, True),
        batch=37, dim=37)
    add(torch.float64, "none", ("plain", "plain", "sliced"), grad_mask=(True, True, False))
    # The kinks, exactly, in every dtype: row 0 has d_ap == t2 and
    # d_ap - d_an == t1 (4 and 4 - 9 = -5, all exact even in bfloat16), where
    # the subgradient is 0; row 1 is past both kinks, row 2 before both.
    for dtype in DTYPES:
        anchor = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=dtype)
        positive = torch.tensor([[1, 1, 1, 1], [-1, 1, 1, 1], [1, 0, 0, 0]], dtype=dtype)
        negative = torch.tensor([[3, 0, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0]], dtype=dtype)
        cases.append({
            "bases": [anchor, positive, negative], "layouts": list(plain),
            "grad_mask": [True] * 3, "reduction": "none",
            "grad_output": torch.tensor([1.0, 1.0, 1.0], dtype=dtype),
            "settings": dict(t1=-5.0, t2=4.0, beta=0.5), "kink": True,
        })
    return cases


def expected(case):
    views = {"plain": lambda b: b, "transposed": lambda b: b.t(), "sliced": lambda b: b[:, ::2]}
    base = [b.clone().double().requires_grad_(need)
            for b, need in zip(case["bases"], case["grad_mask"])]
    inputs = [views[kind](b) for b, kind in zip(base, case["layouts"])]
    loss = reference_triplet_hinge_loss(*inputs, reduction=case["reduction"], **case["settings"])
    torch.autograd.backward(loss, case["grad_output"].double())
    return loss.detach(), [b.grad for b in base]


@pytest.fixture(scope="module")
def probe(fresh, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"probe-{fresh.name}")
    cases = make_cases()
    torch.save(cases, work / "cases.pt")
    run_fresh(fresh.python, PROBE, work)
    return cases, torch.load(work / "results.pt")


def test_wheel_matches_the_reference_in_a_fresh_environment(probe):
    # Catches a wrong kernel (loss or gradients) in the stable build, a wrong
    # reduction (mean vs sum), a stride bug on views (transposed rows, every
    # other column, one input at a time), a lost grad_output scale, a
    # gradient for an input that does not want one, and a wrong dtype path
    # (all four dtypes).
    cases, out = probe
    assert len(out["results"]) == len(cases)
    for index, (case, got) in enumerate(zip(cases, out["results"])):
        loss, grads = expected(case)
        dtype = case["bases"][0].dtype
        tol = TOLERANCE.get(dtype, {})
        where = f"case {index}: {dtype}, {case['reduction']}, {case['layouts']}"
        assert got["loss"].dtype == dtype, where
        torch.testing.assert_close(got["loss"].double(), loss, **tol, check_dtype=False,
                                   msg=lambda m: f"{where}: loss: {m}")
        # The package's function (saved distances), then the plain operator
        # (its backward recomputes them).
        for path in ("", "plain_"):
            torch.testing.assert_close(got[f"{path}loss"].double(), loss, **tol,
                                       check_dtype=False,
                                       msg=lambda m: f"{where}: {path}loss: {m}")
            for name, g, e in zip(("anchor", "positive", "negative"), got[f"{path}grads"], grads):
                if e is None:
                    assert g is None, f"{where}: {name} wants no gradient, got one"
                    continue
                assert g is not None, f"{where}: no gradient for {name}"
                torch.testing.assert_close(g.double(), e, **tol, check_dtype=False,
                                           msg=lambda m: f"{where}: {path}grad {name}: {m}")


def test_wheel_gives_subgradient_zero_at_the_kinks(probe):
    # Catches a kernel with >= instead of > (the subgradient 1 that
    # torch.clamp gave at its boundary before torch 2.14): row 0 sits on both
    # kinks and must get no gradient, exactly, in every dtype; rows 1 and 2
    # check that the rest of the batch is untouched by the rule.
    cases, out = probe
    kinks = [(case, got) for case, got in zip(cases, out["results"]) if case.get("kink")]
    assert {case["bases"][0].dtype for case, _ in kinks} == set(DTYPES)
    for case, got in kinks:
        for g in [*got["grads"], *got["plain_grads"]]:
            assert torch.equal(g[0], torch.zeros_like(g[0])), (case["bases"][0].dtype, g)
            assert g[1].abs().sum() > 0, g
            assert torch.equal(g[2], torch.zeros_like(g[2])), g
        # On the kinks the loss is t1 + beta * t2 = -5 + 0.5 * 4 exactly.
        assert got["loss"][0].item() == -3.0


@pytest.mark.parametrize(
    "name, message",
    [
        # CPU kernels and the Python function.
        ("shape", "positive must have the same shape as anchor [4, 3], got [4, 2]"),
        ("dtype", "anchor must have a floating-point dtype (float32, float64, float16 or "
                  "bfloat16), got Int"),
        ("same_dtype", "negative must have the same dtype as anchor (Float), got Double"),
        ("dim", "anchor must be 2-D (batch, dim), got 1-D with shape [3]"),
        ("finite", "t1, t2 and beta must be finite, got t1=nan"),
        ("reduction", "reduction must be 'mean', 'sum' or 'none', got 'max'"),
        ("margin", "t1 must be <= 0 (minus the margin), got 0.5"),
        ("t2", "t2 must be >= 0 (a squared distance), got -1.0"),
        ("beta", "beta must be >= 0, got -1.0"),
        ("fake_dim", "anchor must be 2-D (batch, dim)"),
        # The fake checks every input, not only the anchor (a mismatched positive or
        # negative would otherwise surface under compile/export only when a kernel runs).
        ("fake_shape", "negative must have the same shape as anchor (4, 3), got (4, 2)"),
        ("fake_dtype", "positive must have the same dtype as anchor (torch.float32), got "
                       "torch.float64"),
        ("fake_negative_dim", "negative must be 2-D (batch, dim), got 1-D"),
        ("python_reduction", "reduction must be one of ('mean', 'sum', 'none'), got 'max'"),
        ("cpu_device", "positive must be on the CPU (this is the CPU kernel), got a device "
                       "other than CPU and CUDA"),
        ("cpu_anchor_device", "anchor must be on the CPU (this is the CPU kernel), got a "
                              "device other than CPU and CUDA"),
        ("grad_rows", "grad_output must have shape (4,) for reduction='none', got [3]"),
        ("grad_scalar", "grad_output must be a scalar for reduction='mean', got shape [4]"),
        ("grad_dtype", "grad_output must have the dtype of anchor (Float), got Double"),
        ("grad_device", "grad_output must be on the CPU (this is the CPU kernel), got a device "
                        "other than CPU and CUDA"),
        ("double_backward", "supports first derivatives only"),
        # CUDA kernels.
        ("cuda_shape", "positive must have the same shape as anchor [4, 3], got [4, 2]"),
        ("cuda_dtype", "anchor must have a floating-point dtype"),
        ("cuda_same_dtype", "positive must have the same dtype as anchor (Float), got Half"),
        ("cuda_dim", "negative must be 2-D (batch, dim), got 1-D with shape [3]"),
        ("cuda_reduction", "reduction must be 'mean', 'sum' or 'none', got 'max'"),
        ("cuda_finite", "t1, t2 and beta must be finite, got t1=0, t2=inf"),
        ("cuda_device", "anchor must be a CUDA tensor (this is the CUDA kernel), got cpu"),
        ("cuda_backward_shape", "positive must have the same shape as anchor [4, 3], got [3, 3]"),
        ("cuda_backward_finite", "t1, t2 and beta must be finite, got t1=nan"),
        ("cuda_grad_rows", "grad_output must have shape (4,) for reduction='none', got [3]"),
        ("cuda_grad_scalar", "grad_output must be a scalar for reduction='mean', got shape [2]"),
        ("cuda_grad_dtype", "grad_output must have the dtype of anchor (Float), got Half"),
        ("cuda_backward_device", "anchor must be a CUDA tensor (this is the CUDA kernel), got cpu"),
        # The pair that saves the distances: the same checks, and the distances'.
        ("with_distances_shape", "negative must have the same shape as anchor [4, 3], got [4, 2]"),
        ("distances_shape", "triplet_hinge_loss_backward_from_distances: distances must have "
                            "shape (4, 2), got [4, 3]"),
        ("distances_dtype", "distances must have dtype Float for Float inputs, got Double"),
        ("distances_half", "distances must have dtype Float for Half inputs, got Half"),
        ("distances_device", "distances must be on the CPU (this is the CPU kernel), got a "
                             "device other than CPU and CUDA"),
        ("distances_grad_rows", "triplet_hinge_loss_backward_from_distances: grad_output must "
                                "have shape (4,) for reduction='none', got [3]"),
        ("double_backward_plain", "supports first derivatives only"),
        ("cuda_with_distances_dim", "positive must be 2-D (batch, dim), got 1-D with shape [3]"),
        ("cuda_with_distances_device", "anchor must be a CUDA tensor (this is the CUDA kernel), "
                                       "got cpu"),
        ("cuda_distances_shape", "distances must have shape (4, 2), got [3, 2]"),
        ("cuda_distances_dtype", "distances must have dtype Float for Float inputs, got Half"),
        ("cuda_from_distances_device", "anchor must be a CUDA tensor (this is the CUDA kernel), "
                                       "got cpu"),
    ],
)
def test_wheel_refuses_bad_input_clearly(probe, name, message):
    # Each check of each entry point, by its message. The CUDA kernels are
    # reached without a GPU by redispatching to their key with CPU tensors;
    # their checks that need a CUDA anchor (positive, negative or
    # grad_output on another device) cannot be reached that way.
    cases, out = probe
    if name.startswith("cuda") and not out["kernels"]["triplet_hinge_loss/CUDA"]:
        pytest.skip("this wheel was built without the CUDA kernels")
    assert out["errors"][name] is not None, f"{name} was accepted"
    assert message in out["errors"][name]


def test_wheel_trains_through_the_operator_that_saves_distances(probe):
    # Catches the package's function still training through the plain pair
    # (its backward reads every row a second time, 12N on a GPU instead of
    # 9N), and a function that saves distances where no backward can follow
    # (memory and a write for nothing). The plain operator, called itself,
    # keeps its own backward.
    _, out = probe
    assert out["routes"] == {
        "trains": ["triplet_hinge_loss_with_distances.default",
                   "triplet_hinge_loss_backward_from_distances.default"],
        "no_input_requires_grad": ["triplet_hinge_loss.default"],
        "no_grad": ["triplet_hinge_loss.default"],
        "plain_operator": ["triplet_hinge_loss.default", "triplet_hinge_loss_backward.default"],
    }


def _test_backward_follows_the_given_distances(told):
    for entry in told:
        a, p, n = (t.double() for t in entry["rows"])
        dtype = entry["rows"][0].dtype
        where = f"{entry['device']}, {dtype}"
        tol = TOLERANCE.get(dtype, {})
        # The forward's distances: the rows' own, in float32 (float64 for float64).
        assert entry["distances"].dtype == (torch.float64 if dtype == torch.float64
                                            else torch.float32), where
        own = torch.stack([((a - p) ** 2).sum(1), ((a - n) ** 2).sum(1)], dim=1)
        torch.testing.assert_close(entry["distances"].double(), own, **tol, check_dtype=False)
        grads = entry["grads"]
        # With its own distances, the rows' gradients (beta = 0.5, sum) ...
        rows = [x.detach().clone().requires_grad_() for x in (a, p, n)]
        reference_triplet_hinge_loss(*rows, t1=-5.0, t2=4.0, beta=0.5, reduction="sum").backward()
        for got, row in zip(grads["own"], rows):
            torch.testing.assert_close(got.double(), row.grad, **tol, check_dtype=False,
                                       msg=lambda m: f"{where}: own distances: {m}")
        assert any(g.abs().sum() > 0 for g in grads["own"]), where
        # ... with distances past no hinge, none at all, exactly ...
        for got in grads["none_past"]:
            assert torch.equal(got, torch.zeros_like(got)), where
        # ... and with distances past both, the gradients of
        # (d_ap - d_an) + beta * d_ap, whatever the rows' own distances.
        grad_p = -2 * (1 + 0.5) * (a - p)
        grad_n = 2 * (a - n)
        for got, e in zip(grads["both_past"], (-(grad_p + grad_n), grad_p, grad_n)):
            torch.testing.assert_close(got.double(), e, **tol, check_dtype=False,
                                       msg=lambda m: f"{where}: distances past both: {m}")


def test_wheel_backward_reads_the_saved_distances_cpu(probe):
    # Catches a backward from distances that recomputes them from the rows
    # (it would return the rows' own gradients for every given pair): the
    # proof, on the CPU, that the backward reads each row once. The CUDA
    # kernels it calls are the ATen operator's (launch_triplet_backward_from_
    # distances), whose bytes tests/test_traffic.py counts in the emulator.
    _, out = probe
    told = [entry for entry in out["told"] if entry["device"] == "cpu"]
    assert {entry["rows"][0].dtype for entry in told} == set(DTYPES)
    _test_backward_follows_the_given_distances(told)


def test_wheel_backward_reads_the_saved_distances_cuda(probe):
    _, out = probe
    told = [entry for entry in out["told"] if entry["device"] == "cuda"]
    if not told:
        pytest.skip("no GPU: the CUDA kernels cannot run here")
    _test_backward_follows_the_given_distances(told)


def test_wheel_fakes_give_the_shapes_of_the_kernels(probe):
    # Catches a fake implementation with the wrong output shape (a (B,)
    # loss for a mean, a scalar for reduction='none', gradients not shaped
    # like the inputs): torch.compile and export would then trace a graph
    # that does not match what the kernels return. opcheck compares fake and
    # real outputs, checks the autograd registration, and runs the operator
    # through AOT compilation.
    _, out = probe
    assert out["fake"] == {
        "mean": (), "none": (4,), "backward": [(4, 3)] * 3,
        "with_distances_mean": [((), "torch.float32"), ((4, 2), "torch.float32")],
        "with_distances_none_float64": [((4,), "torch.float64"), ((4, 2), "torch.float64")],
        "from_distances": [((4, 3), "torch.float32")] * 3,
    }
    for op in ("plain", "with_distances", "from_distances"):
        for reduction in ("mean", "none"):
            assert out["opcheck"][op, reduction] == {
                "test_schema": "SUCCESS",
                "test_autograd_registration": "SUCCESS",
                "test_faketensor": "SUCCESS",
                "test_aot_dispatch_dynamic": "SUCCESS",
            }, (op, reduction, out["opcheck"][op, reduction])


def test_wheel_registers_cpu_and_cuda_kernels(probe):
    # Catches a setup.py that drops the CUDA sources where they can be built
    # (torch with CUDA and nvcc: here, and in CI), and a CUDA registration
    # that a torch without a GPU, or a CPU-only torch, refuses. The kernels
    # are registered in both environments, used where a GPU is.
    _, out = probe
    cuda = expect_cuda_kernels()
    for op in ("triplet_hinge_loss", "triplet_hinge_loss_backward",
               "triplet_hinge_loss_with_distances", "triplet_hinge_loss_backward_from_distances"):
        assert out["kernels"][f"{op}/CPU"] is True
        assert out["kernels"][f"{op}/CUDA"] is cuda, (op, cuda)


def test_wheel_has_autocast_rules_for_cpu_and_cuda(probe):
    # Catches the stable package without its autocast rules: under
    # torch.autocast("cpu", bfloat16) it would compute the loss in bfloat16
    # (checked by running it); under torch.autocast("cuda", float16) in
    # float16 (checked by the registration only: no GPU runs here).
    _, out = probe
    assert out["autocast"] == {"loss": torch.float32, "grad": torch.bfloat16}
    # The loss above trains through the operator saving distances; a forward
    # without gradients takes the plain one: both have the rules.
    for op in ("triplet_hinge_loss", "triplet_hinge_loss_with_distances"):
        assert out["kernels"][f"{op}/AutocastCPU"] is True
        assert out["kernels"][f"{op}/AutocastCUDA"] is True


# ---- TORCH_TARGET_VERSION ---------------------------------------------------------


def syntax_check(target, *defines):
    from torch.utils.cpp_extension import include_paths

    probe_source = ROOT / "extensions/csrc/stable/target_version_probe.cpp"
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


def test_cuda_stream_handle_needs_target_2_13_and_setup_targets_it():
    # Why the wheel targets torch 2.13 and not older: the CUDA stream
    # (Stream::nativeHandle) is hidden below 2.13. Catches setup.py lowering
    # TORCH_TARGET_VERSION below what its CUDA kernels call (the build would
    # fail), or raising it above (the wheel would refuse torch 2.13 for
    # nothing).
    below = syntax_check((2, 12), "-DPROBE_STREAM_HANDLE")
    assert below.returncode != 0 and "nativeHandle" in below.stderr
    assert syntax_check((2, 13), "-DPROBE_STREAM_HANDLE").returncode == 0
    assert load_setup().TARGET_TORCH == (2, 13, 0)
