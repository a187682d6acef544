"""Fork-ready: one command re-points the book, and the Colab setup cells act only on Colab."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from conftest import REPO_ROOT, cell_source, chapter_notebooks, load_notebook


def copy_book(tmp_path):
    for name in ("_config.yml", "book", "notebooks"):
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("*.png"))
        else:
            shutil.copy(source, tmp_path / name)
    return tmp_path


def run_repoint(root, *args):
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "repoint.py"), *args, "--root", str(root)],
        capture_output=True, text=True, timeout=120,
    )


def test_repoint_rewrites_config_badges_setup_cells_and_intro(tmp_path):
    root = copy_book(tmp_path)
    old = (root / "_config.yml").read_text()
    result = run_repoint(root, "teacher/ml-course", "--branch", "spring")
    assert result.returncode == 0, result.stderr
    config = (root / "_config.yml").read_text()
    assert "url: https://github.com/teacher/ml-course\n" in config and "  branch: spring\n" in config
    assert 'baseurl: "https://teacher.github.io/ml-course/"' in config
    assert "extending-pytorch/book" not in config and "extending-pytorch/book" in old
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        if path.name.startswith("_"):
            continue
        cells = json.loads(path.read_text())["cells"]
        first = cell_source(cells[0])
        assert f"colab.research.google.com/github/teacher/ml-course/blob/spring/notebooks/{path.name})" in first
        code = "\n".join(cell_source(c) for c in cells if c["cell_type"] == "code")
        assert 'REPOSITORY, BRANCH = "teacher/ml-course", "spring"' in code
        assert "extending-pytorch/book" not in first + code
        original = load_notebook(REPO_ROOT / "notebooks" / path.name)
        assert [c.get("outputs") for c in cells] == [c.get("outputs") for c in original["cells"]]
    assert "github.com/teacher/ml-course.git" in (root / "book" / "intro.md").read_text()


def test_repoint_refuses_a_malformed_name(tmp_path):
    root = copy_book(tmp_path)
    result = run_repoint(root, "not a repository")
    assert result.returncode != 0
    assert "repository must look like OWNER/NAME, got 'not a repository'" in result.stderr


def setup_cell(path):
    cells = load_notebook(path)["cells"]
    return next(cell_source(c) for c in cells if c["cell_type"] == "code" and "google.colab" in cell_source(c))


@pytest.mark.parametrize("path", chapter_notebooks(), ids=[p.stem for p in chapter_notebooks()])
def test_setup_cell_does_nothing_outside_colab(path, monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(setup_cell(path), {})
    assert calls == []


@pytest.mark.parametrize("path", chapter_notebooks(), ids=[p.stem for p in chapter_notebooks()])
def test_setup_cell_on_colab_fetches_installs_and_changes_folder(path, monkeypatch, tmp_path):
    calls, moved = [], []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda command, **kwargs: calls.append(command))
    monkeypatch.setattr("os.path.isdir", lambda p: False)
    monkeypatch.setattr("os.chdir", lambda p: moved.append(p))
    monkeypatch.setattr(sys, "path", list(sys.path))
    # setenv records the variable's state, so it is restored after the test.
    monkeypatch.setenv("EXTENDING_PYTORCH_SKIP_NATIVE", "")
    monkeypatch.delenv("EXTENDING_PYTORCH_SKIP_NATIVE")
    config = (REPO_ROOT / "_config.yml").read_text()
    repository = config.split("url: https://github.com/")[1].split()[0]
    branch = config.split("  branch: ")[1].split()[0]
    exec(setup_cell(path), {})
    clone, install = calls
    assert clone[:2] == ["git", "clone"] and f"https://github.com/{repository}.git" in clone
    assert clone[clone.index("--branch") + 1] == branch
    assert install[1:4] == ["-m", "pip", "install"] and "--no-build-isolation" in install
    assert moved == ["/content/extending-pytorch/notebooks"]
    assert "/content/extending-pytorch/extensions" in sys.path
    # Chapters without C++ skip compiling it; chapters 4 and 5 build it.
    native = path.name.startswith(("04_", "05_"))
    assert (os.environ.get("EXTENDING_PYTORCH_SKIP_NATIVE") == "1") != native
