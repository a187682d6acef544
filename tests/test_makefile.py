"""`make` fails with a clear message, not a traceback, when Python is too old or no C++ compiler is found."""

from __future__ import annotations

import os
import subprocess

from conftest import REPO_ROOT


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


def test_cuda_build_check_uses_the_cuda_build_of_torch_from_the_index():
    # pip's configuration on some machines prefers a local CPU wheel of torch; the CUDA
    # build check's environment must bypass it (--isolated) and be rebuilt only when
    # requirements.txt changes.
    result = run_make("-n", "-B", "check-cuda")
    assert result.returncode == 0, result.stderr
    assert "pip install --isolated" in result.stdout
    assert "-r requirements.txt" in result.stdout
    assert "tools/check_cuda.py" in result.stdout
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "$(CUDA_STAMP): requirements.txt" in makefile


def test_ci_runs_the_cuda_build_check():
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make check-cuda" in script and "make test" in script


def test_cuda_build_check_refuses_a_cpu_only_torch():
    import sys

    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "check_cuda.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "CPU-only torch" in result.stderr and "make check-cuda" in result.stderr
