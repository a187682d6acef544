"""The CUDA build check: everything short of running a kernel, on a machine without a GPU.

Run by `make check-cuda` with the Python of .venv-cuda: an environment that sees the CUDA
build of torch in .venv (the one a reader's pip installs on Linux, and Colab's) and into
which this check installs the book's package, so that .venv's own install is never
touched. It refuses to run in any other environment. It needs nvcc, but no GPU. Steps,
each timed:

1. **Colab's CPU runtime, set up.** A copy of the working tree is served as if it were the
   book's GitHub repository (git's `url.<base>.insteadOf`), a stand-in `google.colab`
   module is importable, and chapter 4's setup cell runs: it clones the "repository" to
   /content/extending-pytorch and builds the package there with
   `pip install --no-build-isolation -e`, with TORCH_CUDA_ARCH_LIST unset and no GPU.
   That is the build that crashed with IndexError in torch's architecture detection.
   Without a GPU the build leaves the CUDA kernels out unless asked
   (build_flags.CUDA_SWITCH); this check asks, to build them as a GPU runtime would.
2. **The library.** It imports; every operator of the namespace `extending_pytorch` has
   a CPU and a CUDA kernel registered; `cuobjdump` lists the machine code (SASS) and PTX
   embedded for each architecture of `build_flags.DEFAULT_CUDA_ARCH_LIST`.
3. **The CUDA chapter.** Chapter 5 runs top to bottom in that runtime (its setup cell finds
   the checkout and reuses the build) and must list the cells it skipped. The CPU chapters
   run under `make test` already; with the CUDA kernels compiled in, only the CUDA chapter
   takes other paths.
4. **The just-in-time build.** `native.load_jit("_C")` in a fresh process, CUDA sources
   included, for one architecture, then the operator runs on CPU tensors.

Usage: python tools/check_cuda.py [--skip-notebooks] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
CONTENT = pathlib.Path("/content")
CHECKOUT = CONTENT / "extending-pytorch"
# Beside CHECKOUT while this check owns it, so that a later run knows it may delete it.
MARKER = CONTENT / ".extending-pytorch-made-by-check-cuda"
GITHUB_URL = "https://github.com/{}.git"
CHAPTERS = ["05_cuda_kernel.ipynb"]
# Operators that have no CUDA kernel on purpose, and why (none today: grad_in_forward's
# one-pass operator got its CUDA kernel with chapter 5's section on bytes). Every other
# operator of the namespace must have one.
CPU_ONLY: dict[str, str] = {}



def _load_build_flags():
    # By path, as setup.py does: importing the package would import torch.
    import importlib.util

    path = REPO / "extensions" / "extending_pytorch" / "build_flags.py"
    spec = importlib.util.spec_from_file_location("build_flags", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_flags = _load_build_flags()


# Written by the Makefile into .venv-cuda: the one environment this check may install into.
ENVIRONMENT_MARKER = ".check-cuda-environment"


class CheckFailed(RuntimeError):
    pass


def check_environment() -> None:
    """Refuse to run outside .venv-cuda: step 1 uninstalls and reinstalls the book's package
    in the running environment, which would break any other (.venv, a reader's)."""
    if not (pathlib.Path(sys.prefix) / ENVIRONMENT_MARKER).is_file():
        raise CheckFailed(
            f"this Python ({sys.executable}) is not the CUDA build check's environment; it "
            "would uninstall the book's package from it. Run `make check-cuda`."
        )


def step(title: str):
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def done(start: float, timings: dict, name: str) -> None:
    timings[name] = time.perf_counter() - start
    print(f"   ({timings[name]:.0f} s)", flush=True)


def run(command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        print(result.stdout[-6000:])
        print(result.stderr[-6000:], file=sys.stderr)
        raise CheckFailed(f"command failed ({result.returncode}): {' '.join(map(str, command))}")
    return result


def repository_slug() -> str:
    """owner/name of the book's repository, as the setup cells spell it."""
    config = (REPO / "_config.yml").read_text()
    match = re.search(r"url:\s*https://github.com/([\w.-]+/[\w.-]+)", config)
    if not match:
        raise CheckFailed("no repository url in _config.yml")
    return match.group(1)


def snapshot_repository(directory: pathlib.Path) -> pathlib.Path:
    """A git repository holding the working tree's files (tracked, and untracked but
    not ignored), committed on `main`: what a push of this tree would publish."""
    files = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO
    ).stdout.split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            target = directory / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git = ["git", "-c", "user.name=check", "-c", "user.email=check@localhost"]
    run(git + ["init", "--quiet", "--initial-branch=main"], cwd=directory)
    run(git + ["add", "--all"], cwd=directory)
    run(git + ["commit", "--quiet", "-m", "snapshot"], cwd=directory)
    return directory


def colab_environment(work: pathlib.Path, served: pathlib.Path) -> dict:
    """Environment of a simulated Colab CPU runtime."""
    stand_in = work / "colab_stand_in"
    (stand_in / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (stand_in / "google" / "__init__.py").write_text("")
    (stand_in / "google" / "colab" / "__init__.py").write_text(
        '"""Stand-in for Colab\'s module: its presence is what the setup cells test."""\n'
    )
    # Colab imports google.colab when the kernel starts; sitecustomize does the same here.
    (stand_in / "sitecustomize.py").write_text("import google.colab  # noqa: F401\n")
    env = dict(os.environ)
    env.pop("TORCH_CUDA_ARCH_LIST", None)  # as on Colab: unset
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, even on a machine that has one
    # Build the CUDA kernels although no GPU is visible (a reader's CPU runtime leaves them out).
    env[build_flags.CUDA_SWITCH] = "1"
    env["PYTHONPATH"] = str(stand_in)
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # git clone https://github.com/<slug>.git fetches the snapshot instead.
    env["GIT_CONFIG_COUNT"] = "1"
    env["GIT_CONFIG_KEY_0"] = f"url.{served}.insteadOf"
    env["GIT_CONFIG_VALUE_0"] = GITHUB_URL.format(repository_slug())
    env["PYTHONUNBUFFERED"] = "1"
    return env


def setup_cell(chapter: str) -> str:
    notebook = json.loads((REPO / "notebooks" / chapter).read_text())
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "google.colab" in source:
            return source
    raise CheckFailed(f"{chapter} has no Colab setup cell")


def run_setup_cell(env: dict, work: pathlib.Path) -> None:
    """Chapter 4's setup cell, run by IPython (which understands its !shell lines and
    %magics) as a script, in the simulated runtime's environment."""
    script = work / "setup_cell.ipy"
    script.write_text(setup_cell(CHAPTERS[0]))
    result = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--quick", str(script)],
        env=env,
        cwd=work,
        text=True,
        capture_output=True,
    )
    print(result.stdout[-4000:])
    if result.returncode != 0 or "Traceback" in result.stdout + result.stderr:
        print(result.stderr[-8000:], file=sys.stderr)
        raise CheckFailed("chapter 4's setup cell failed in the simulated Colab CPU runtime")
    # (%pip install --quiet hides the build's own message about the architectures it
    # chose; step 2 reads them from the build record instead.)


def expected_architectures() -> tuple[set[str], set[str]]:
    sass, ptx = set(), set()
    for entry in build_flags.DEFAULT_CUDA_ARCH_LIST.split(";"):
        number = entry.replace("+PTX", "").replace(".", "")
        sass.add(f"sm_{number}")
        if entry.endswith("+PTX"):
            ptx.add(f"sm_{number}")
    return sass, ptx


LIBRARY_CHECK = r"""
import json, sys
import torch
import extending_pytorch
from extending_pytorch import native, ops
names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("extending_pytorch::"))
report = {
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "gpus": torch.cuda.device_count(),
    "package": extending_pytorch.__file__,
    "build_info": native.build_info(),
    "ops": {
        n: {key: torch._C._dispatch_has_kernel_for_dispatch_key(n, key) for key in ("CPU", "CUDA")}
        for n in names
    },
}
a, p, n = torch.randn(3, 5, 7, dtype=torch.float64).unbind(0)
ours = ops.triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5)
ref = extending_pytorch.reference_triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5)
torch.testing.assert_close(ours, ref)
print(json.dumps(report))
"""


def check_library(env: dict) -> pathlib.Path:
    result = run([sys.executable, "-c", LIBRARY_CHECK], env=env, cwd=CHECKOUT / "notebooks")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"   torch {report['torch']} (CUDA {report['cuda']}), visible GPUs: {report['gpus']}")
    if not str(report["package"]).startswith(str(CHECKOUT)):
        raise CheckFailed(f"imported extending_pytorch from {report['package']}, not the checkout")
    info = report["build_info"] or {}
    print(f"   built for TORCH_CUDA_ARCH_LIST={info.get('cuda_arch_list')!r} against torch {info.get('torch')}")
    if info.get("cuda_arch_list") != build_flags.DEFAULT_CUDA_ARCH_LIST:
        raise CheckFailed("the build did not use the default architectures")
    if not report["ops"]:
        raise CheckFailed("no extending_pytorch operators registered")
    for name, keys in report["ops"].items():
        note = f" (CPU only: {CPU_ONLY[name]})" if name in CPU_ONLY else ""
        print(f"   {name}: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in keys.items()) + note)
        if not keys["CPU"] or not (keys["CUDA"] or name in CPU_ONLY):
            raise CheckFailed(f"{name} lacks a kernel: {keys}")
    libraries = list((CHECKOUT / "extensions" / "extending_pytorch").glob("_C*.so"))
    if len(libraries) != 1:
        raise CheckFailed(f"expected one _C library, found {libraries}")
    return libraries[0]


def cuobjdump() -> str:
    candidates = [
        shutil.which("cuobjdump"),
        *(str(p) for p in pathlib.Path(sys.prefix).glob("lib/python*/site-packages/nvidia/cu*/bin/cuobjdump")),
    ]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK):
            return candidate
    raise CheckFailed("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")


def check_embedded_code(library: pathlib.Path) -> None:
    tool = cuobjdump()
    elf = run([tool, "--list-elf", str(library)]).stdout
    ptx = run([tool, "--list-ptx", str(library)]).stdout
    found_sass = set(re.findall(r"\.(sm_\d+)\.cubin", elf))
    found_ptx = set(re.findall(r"\.(sm_\d+)\.ptx", ptx))
    want_sass, want_ptx = expected_architectures()
    for arch in sorted(found_sass | want_sass, key=lambda a: int(a[3:])):
        cubins = len(re.findall(rf"\.{arch}\.cubin", elf))
        print(f"   {arch}: {cubins} cubin(s)" + (", PTX" if arch in found_ptx else ""))
    if found_sass != want_sass or found_ptx != want_ptx:
        raise CheckFailed(
            f"embedded SASS {sorted(found_sass)} and PTX {sorted(found_ptx)}, expected "
            f"{sorted(want_sass)} and {sorted(want_ptx)}"
        )


def run_chapters(env: dict, work: pathlib.Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    os.environ.update(
        {k: env[k] for k in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "PATH", build_flags.CUDA_SWITCH)}
    )
    os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    for key in ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"):
        os.environ[key] = env[key]
    for chapter in CHAPTERS:
        start = time.perf_counter()
        path = CHECKOUT / "notebooks" / chapter
        notebook = nbformat.read(path, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=1200,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute()
        nbformat.write(notebook, work / chapter)
        outputs = "\n".join(
            "".join(o.get("text", "")) if "text" in o else "".join(o.get("data", {}).get("text/plain", ""))
            for cell in notebook.cells
            if cell.cell_type == "code"
            for o in cell.outputs
        )
        print(f"   {chapter}: ran top to bottom ({time.perf_counter() - start:.0f} s)")
        if chapter.startswith("05"):
            listing = outputs[outputs.find("Skipped on this machine") :]
            if not listing.startswith("Skipped on this machine"):
                raise CheckFailed("chapter 5 did not list the cells it skipped")
            lines = listing.splitlines()
            shown = [lines[0]] + [line for line in lines[1:] if line.startswith("  - ")]
            print("   " + "\n   ".join(shown))


JIT_CHECK = r"""
import sys
import torch
from extending_pytorch import native
module = native.load_jit("_C")
from extending_pytorch import ops
import extending_pytorch as ep
a, p, n = torch.randn(3, 4, 6, dtype=torch.float64).unbind(0)
torch.testing.assert_close(
    ops.triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5),
    ep.reference_triplet_hinge_loss(a, p, n, t1=-1.0, t2=0.5, beta=0.5),
)
names = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("extending_pytorch::")]
cpu_only = set(sys.argv[1:])
missing = [
    n for n in names
    if n not in cpu_only and not torch._C._dispatch_has_kernel_for_dispatch_key(n, "CUDA")
]
assert names and not missing, (names, missing)
but = f" but {sorted(cpu_only)}" if cpu_only else ""
print(f"JIT module {module.__name__}: {len(names)} operators, CUDA kernels for all{but}")
"""


def check_jit(env: dict) -> None:
    jit_env = dict(env)
    jit_env.pop("PYTHONPATH")  # no stand-in needed; the package comes from the checkout
    jit_env["PYTHONPATH"] = str(CHECKOUT / "extensions")
    jit_env["TORCH_CUDA_ARCH_LIST"] = "9.0"  # one architecture: the build is the point
    result = run([sys.executable, "-c", JIT_CHECK, *CPU_ONLY], env=jit_env, cwd=CHECKOUT)
    print("   " + result.stdout.strip().splitlines()[-1])


def prepare_checkout() -> None:
    if CHECKOUT.exists():
        if not MARKER.exists():
            raise CheckFailed(f"{CHECKOUT} exists and was not made by this check: not touching it")
        shutil.rmtree(CHECKOUT)
    CONTENT.mkdir(exist_ok=True)
    MARKER.write_text("tools/check_cuda.py owns /content/extending-pytorch\n")


def remove_checkout() -> None:
    if CHECKOUT.exists():
        shutil.rmtree(CHECKOUT)
    MARKER.unlink(missing_ok=True)


def find_toolkit() -> None:
    """Point CUDA_HOME at a real toolkit. torch takes the parent of the `nvcc` on PATH,
    which is wrong where that nvcc is a wrapper script (as on some images:
    /usr/local/bin/nvcc, making CUDA_HOME /usr/local, without CUDA's headers)."""
    if os.environ.get("CUDA_HOME"):
        return
    nvcc = shutil.which("nvcc")
    candidates = [pathlib.Path(nvcc).resolve().parents[1]] if nvcc else []
    candidates.append(pathlib.Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").is_file() and (home / "include" / "cuda_runtime.h").is_file():
            os.environ["CUDA_HOME"] = str(home)
            return


def main() -> int:
    find_toolkit()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-notebooks", action="store_true", help="skip step 3")
    parser.add_argument("--keep", action="store_true", help=f"keep {CHECKOUT} afterwards")
    args = parser.parse_args()
    check_environment()
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        raise CheckFailed(f"this Python ({sys.executable}) has a CPU-only torch; run `make check-cuda`")
    if CUDA_HOME is None:
        raise CheckFailed("no CUDA toolkit found (nvcc): set CUDA_HOME or install the toolkit")
    print(f"torch {torch.__version__}, CUDA toolkit at {CUDA_HOME}")
    timings: dict[str, float] = {}
    prepare_checkout()
    # A fresh runtime: no book package from an earlier run of this check.
    run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "extending-pytorch"])
    with tempfile.TemporaryDirectory(prefix="check-cuda-") as tmp:
        work = pathlib.Path(tmp)
        start = step("1. Colab CPU runtime: chapter 4's setup cell clones and builds")
        served = snapshot_repository(work / "served")
        env = colab_environment(work, served)
        try:
            run_setup_cell(env, work)
            done(start, timings, "clone and CUDA build")
            start = step("2. The library: import, kernels registered, embedded code")
            library = check_library(env)
            check_embedded_code(library)
            done(start, timings, "library checks")
            if not args.skip_notebooks:
                start = step("3. Chapters 4 and 5, top to bottom, in the simulated runtime")
                run_chapters(env, work)
                done(start, timings, "chapters")
            start = step("4. The just-in-time build, CUDA sources included")
            check_jit(env)
            done(start, timings, "JIT build")
        finally:
            if not args.keep:
                remove_checkout()
    print("\nCUDA build check passed: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as error:
        print(f"\nCUDA build check FAILED: {error}", file=sys.stderr)
        sys.exit(1)
