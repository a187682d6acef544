"""`make` fails with a clear message, not a traceback, when Python is too old or no C++ compiler is found."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

# The Makefile: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch


def run_make(
    target: str, *args: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-s", target, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_old_python_gets_a_clear_message(tmp_path):
    # A stand-in interpreter that reports Python 3.9.18 to the two questions the Makefile asks.
    fake = tmp_path / "python3.9"
    fake.write_text(
        '#!/bin/sh\ncase "$*" in *platform*) echo 3.9.18 ;; *) exit 1 ;; esac\n'
    )
    fake.chmod(0o755)
    result = run_make("check-python", f"PYTHON={fake}")
    assert result.returncode != 0
    assert (
        "Python 3.11 or newer is needed" in result.stderr
        and "3.9.18" in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_missing_python_gets_a_clear_message():
    result = run_make("check-python", "PYTHON=/nonexistent/python3")
    assert result.returncode != 0
    assert (
        "'/nonexistent/python3' was not found" in result.stderr
    ), result.stderr


def test_current_python_passes_the_check():
    assert run_make("check-python").returncode == 0


def test_missing_compiler_gets_a_clear_message():
    result = run_make("check-compiler", env={"CXX": "/nonexistent/c++"})
    assert result.returncode != 0
    assert (
        "no C++ compiler found ('/nonexistent/c++')" in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_cuda_build_check_environment_sees_dot_venv_and_adds_only_its_tools():
    # One CUDA build of torch (several GB) serves the tests and the CUDA build check:
    # .venv-cuda reaches .venv's packages through a .pth line, is marked as the check's
    # own environment, and is rebuilt when .venv is.
    result = run_make("-n", "-B", "check-cuda")
    assert result.returncode == 0, result.stderr
    assert "_book_venv.pth" in result.stdout
    assert ".check-cuda-environment" in result.stdout
    assert "tools/check_cuda.py" in result.stdout
    assert "-r requirements.txt" not in result.stdout.split("tools/check_cuda.py")[0].split("-m venv .venv-cuda")[-1]
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "$(CUDA_STAMP): $(STAMP)" in makefile


def test_ci_runs_the_cuda_build_check():
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make check-cuda" in script and "make test" in script


def stand_in_environment(tmp_path, *, cuda: str | None, marked: bool):
    """A throwaway venv (no pip) with a stand-in torch, so that a check that wrongly went
    ahead could not touch any real environment."""
    import sys

    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    if marked:
        (env_dir / ".check-cuda-environment").write_text("")
    fake = tmp_path / "fake"
    (fake / "torch" / "utils").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        f"__version__ = '0.0+fake'\nclass version:\n    cuda = {cuda!r}\n"
    )
    (fake / "torch" / "utils" / "__init__.py").write_text("")
    (fake / "torch" / "utils" / "cpp_extension.py").write_text("CUDA_HOME = '/usr/local/cuda'\n")
    return env_dir / "bin" / "python", {**os.environ, "PYTHONPATH": str(fake)}


def test_cuda_build_check_refuses_a_cpu_only_torch(tmp_path):
    python, env = stand_in_environment(tmp_path, cuda=None, marked=True)
    result = subprocess.run(
        [str(python), str(REPO_ROOT / "tools" / "check_cuda.py")],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "CPU-only torch" in result.stderr and "make check-cuda" in result.stderr


def test_cuda_build_check_refuses_to_run_outside_its_environment(tmp_path):
    # It uninstalls and reinstalls the book's package where it runs: run with .venv's
    # Python, it once replaced .venv's editable install with one in a deleted directory.
    python, env = stand_in_environment(tmp_path, cuda="13.2", marked=False)
    result = subprocess.run(
        [str(python), str(REPO_ROOT / "tools" / "check_cuda.py")],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not the CUDA build check's environment" in result.stderr
    assert "make check-cuda" in result.stderr


def test_ci_tests_the_oldest_supported_torch_and_the_pages_state_the_range():
    import re

    makefile = (REPO_ROOT / "Makefile").read_text()
    oldest = re.search(r"^OLDEST_TORCH := (\S+)$", makefile, re.M).group(1)
    pinned = re.search(r"^torch==(\S+)$", (REPO_ROOT / "requirements.txt").read_text(), re.M).group(1)
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make test-oldest" in script
    result = run_make("-n", "-B", "test-oldest")
    assert result.returncode == 0, result.stderr
    assert "--nbval " in result.stdout and "notebooks tests" in result.stdout
    assert f"torch=={oldest}" in result.stdout
    low, high = (".".join(v.split(".")[:2]) for v in (oldest, pinned))
    stated = f"torch {low} to {high}"
    for page in ("README.md", "book/setup.md"):
        text = " ".join((REPO_ROOT / page).read_text().split())
        assert stated in text, f"{page} does not say '{stated}'"
        assert f"pins torch {pinned}" in text, f"{page} does not say 'pins torch {pinned}'"


def test_repoint_needs_no_virtual_environment():
    # Editing text must not install the book's environment (torch, several gigabytes) first.
    result = run_make("-n", "-B", "repoint", "REPO=teacher/course")
    assert result.returncode == 0, result.stderr
    assert "tools/repoint.py teacher/course --branch main" in result.stdout
    assert ".venv" not in result.stdout and "pip install" not in result.stdout, result.stdout
    # ... and the script imports nothing but the standard library.
    source = (REPO_ROOT / "tools" / "repoint.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines()
               if line.startswith(("import ", "from ")) and "__future__" not in line}
    assert imports <= {"argparse", "json", "pathlib", "re"}, imports


def test_oldest_torch_run_is_profile_a_strict_without_the_cuda_toolkit():
    # make test-oldest is reader profile (a): strict nbval (stored outputs compared, not only
    # errors), on torch's CPU build, each command of the copy run with the toolkit hidden.
    result = run_make("-n", "-B", "test-oldest")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("cd .oldest && ")
    pytest_line = next(line for line in lines if "-m pytest" in line)
    assert "--nbval " in pytest_line and "--nbval-lax" not in pytest_line, pytest_line
    assert "--nbval-sanitize-with tests/nbval_sanitize.cfg" in pytest_line
    for line in lines:
        if ".venv-oldest/bin/python" in line and line.startswith(("..", "EXTENDING")):
            assert "../tools/without_cuda_toolkit.sh ../.venv-oldest/bin/python" in line, line
    assert "torch==2.13.0+cpu" in result.stdout and "download.pytorch.org/whl/cpu" in result.stdout


def run_without_toolkit(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO_ROOT / "tools" / "without_cuda_toolkit.sh"), *command],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )


def has_cuda_toolkit() -> bool:
    import shutil

    return shutil.which("nvcc") is not None or any(
        p.is_dir() for p in pathlib.Path("/usr/local").glob("cuda*")
    )


@pytest.mark.skipif(not has_cuda_toolkit(), reason="no CUDA toolkit on this machine: nothing to hide")
def test_without_cuda_toolkit_hides_nvcc_and_the_toolkit_from_torch_and_the_emulator():
    # Catches hiding nvcc from PATH only: torch falls back to /usr/local/cuda, and the emulator
    # looks for CUDA's headers there.
    probe = (
        "import os, shutil, sys\n"
        "print(shutil.which('nvcc'), os.path.exists('/usr/local/cuda'), os.environ.get('CUDA_HOME'))\n"
        "from torch.utils import cpp_extension\n"
        "print(cpp_extension._find_cuda_home())\n"
    )
    inside = run_without_toolkit(sys.executable, "-c", probe)
    if "not permitted here" in inside.stderr:
        pytest.skip("no private mount namespace here: " + inside.stderr.strip())
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == ["None", "False", "None", "None"], inside.stdout + inside.stderr
    # Beside it, the rest of the machine keeps the toolkit (make test and make check-cuda).
    outside = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert outside.stdout.split()[3] != "None", outside.stdout
