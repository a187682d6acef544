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
