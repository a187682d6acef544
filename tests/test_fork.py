"""Fork-ready: one command re-points the book, and the Colab setup cells act only on Colab."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import types

import pytest

from conftest import REPO_ROOT, cell_source, chapter_notebooks, load_notebook


# Chapters whose Colab setup cell builds the C++/CUDA extensions (no EXTENDING_PYTORCH_SKIP_NATIVE).
NATIVE_CHAPTERS = ("04_", "05_", "07_", "08_", "91_")


def copy_book(tmp_path):
    for name in ("_config.yml", "README.md", "book", "notebooks", ".github"):
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
    readme = (root / "README.md").read_text()
    assert "github.com/teacher/ml-course.git" in readme and "https://teacher.github.io/ml-course/" in readme
    assert "extending-pytorch/book" not in readme and "extending-pytorch.github.io" not in readme
    # The pages workflow publishes from the fork's branch (it listed only main).
    assert "branches: [spring]" in (root / ".github" / "workflows" / "pages.yml").read_text()


def test_repoint_refuses_a_malformed_name(tmp_path):
    root = copy_book(tmp_path)
    result = run_repoint(root, "not a repository")
    assert result.returncode != 0
    assert "repository must look like OWNER/NAME, got 'not a repository'" in result.stderr


def setup_cell(path):
    cells = load_notebook(path)["cells"]
    return next(cell_source(c) for c in cells if c["cell_type"] == "code" and "google.colab" in cell_source(c))


class FakeShell:
    """Stands in for IPython's get_ipython() when a setup cell uses !shell lines and %magics.

    It records each shell command and line magic, with {NAME} expanded from the cell's
    namespace as IPython does, and applies the effects the cell relies on (%env, %cd).
    """

    def __init__(self, namespace):
        self.namespace, self.commands, self.moved = namespace, [], []

    def expand(self, line):
        return line.format(**self.namespace)

    def system(self, command):
        self.commands.append(shlex.split(self.expand(command)))

    def run_line_magic(self, name, line):
        line = self.expand(line)
        if name == "env":
            key, value = line.split("=", 1)
            os.environ[key] = value
        elif name == "cd":
            self.moved.append(line)
        elif name == "pip":
            self.commands.append([sys.executable, "-m", "pip", *shlex.split(line)])
        elif name == "run":
            self.commands.append(["%run", *shlex.split(line)])
        else:
            raise AssertionError(f"unexpected magic %{name} {line}")


def run_setup_cell(path, monkeypatch, installed=False):
    """Run a chapter's setup cell; returns (commands run, folders changed to).

    Both forms are accepted while chapters move from one to the other: the old cell calls
    subprocess.run and os.chdir; the new one uses !git, %pip, %env and %cd, which IPython
    turns into get_ipython() calls (the same transformation Jupyter applies).
    """
    from IPython.core.inputtransformer2 import TransformerManager

    commands, moved = [], []

    def run(command, **kwargs):
        # An install whose env= asks to skip the C++ build counts as the cell setting it.
        if kwargs.get("env", {}).get("EXTENDING_PYTORCH_SKIP_NATIVE") == "1":
            os.environ["EXTENDING_PYTORCH_SKIP_NATIVE"] = "1"
        commands.append(command)

    monkeypatch.setattr(subprocess, "run", run)
    # A fresh runtime has neither the book's package nor (possibly) Triton; a runtime in
    # which an earlier chapter installed them must not reinstall or rebuild them.
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name.startswith(("extending_pytorch", "triton")):
            return real_find_spec(name, *args) if installed else None
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr("os.chdir", lambda p: moved.append(p))
    namespace = {}
    shell = FakeShell(namespace)
    namespace["get_ipython"] = lambda: shell
    exec(TransformerManager().transform_cell(setup_cell(path)), namespace)
    return commands + shell.commands, moved + shell.moved


@pytest.mark.parametrize("path", chapter_notebooks(), ids=[p.stem for p in chapter_notebooks()])
def test_setup_cell_does_nothing_outside_colab(path, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setenv("EXTENDING_PYTORCH_SKIP_NATIVE", "")
    monkeypatch.delenv("EXTENDING_PYTORCH_SKIP_NATIVE")
    assert run_setup_cell(path, monkeypatch) == ([], [])
    assert "EXTENDING_PYTORCH_SKIP_NATIVE" not in os.environ


@pytest.mark.parametrize("path", chapter_notebooks(), ids=[p.stem for p in chapter_notebooks()])
def test_setup_cell_on_colab_fetches_installs_and_changes_folder(path, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr("os.path.isdir", lambda p: False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    # setenv records the variable's state, so it is restored after the test.
    monkeypatch.setenv("EXTENDING_PYTORCH_SKIP_NATIVE", "")
    monkeypatch.delenv("EXTENDING_PYTORCH_SKIP_NATIVE")
    config = (REPO_ROOT / "_config.yml").read_text()
    repository = config.split("url: https://github.com/")[1].split()[0]
    branch = config.split("  branch: ")[1].split()[0]
    commands, moved = run_setup_cell(path, monkeypatch)
    clones = [c[c.index("git"):] for c in commands if "git" in c and "clone" in c]
    pip = [c for c in commands if c[1:4] == ["-m", "pip", "install"]]
    installs = [c for c in pip if "/content/extending-pytorch/extensions" in c]
    # The torch check: tools/colab_torch.py, run in the kernel, before the package is built
    # against the torch it leaves.
    runs = [c for c in commands if c[0] == "%run"]
    assert runs == [["%run", "/content/extending-pytorch/tools/colab_torch.py"]], commands
    assert commands.index(runs[0]) < commands.index(installs[0]), commands
    # One clone, one install of the book's package; other pip installs (ninja) are allowed.
    assert len(clones) == 1 and len(installs) == 1 and len(clones) + len(pip) + len(runs) == len(commands), commands
    (clone,), (install,) = clones, installs
    assert clone[:2] == ["git", "clone"] and f"https://github.com/{repository}.git" in clone
    assert clone[clone.index("--branch") + 1] == branch
    assert clone[-1] == "/content/extending-pytorch"
    assert "--no-build-isolation" in install and install[-1] == "/content/extending-pytorch/extensions"
    assert install[install.index("-e") + 1] == "/content/extending-pytorch/extensions"
    # The package declares its license as PEP 639 asks, which setuptools reads from 77.0.3 on;
    # --no-build-isolation builds with the runtime's own setuptools, which may be older.
    assert any(
        any("setuptools>=77.0.3" in part for part in c) for c in pip[: pip.index(install)]
    ), commands
    assert moved == ["/content/extending-pytorch/notebooks"]
    assert "/content/extending-pytorch/extensions" in sys.path
    # Chapters without C++ skip compiling it; the native chapters build it.
    native = path.name.startswith(NATIVE_CHAPTERS)
    assert (os.environ.get("EXTENDING_PYTORCH_SKIP_NATIVE") == "1") != native


@pytest.mark.parametrize("path", chapter_notebooks(), ids=[p.stem for p in chapter_notebooks()])
def test_setup_cell_reuses_what_an_earlier_chapter_installed(path, monkeypatch):
    # Chapter 4 builds the package (minutes, with CUDA); chapter 5 in the same runtime
    # must not build it again.
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr("os.path.isdir", lambda p: True)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("EXTENDING_PYTORCH_SKIP_NATIVE", "")
    monkeypatch.delenv("EXTENDING_PYTORCH_SKIP_NATIVE")
    commands, moved = run_setup_cell(path, monkeypatch, installed=True)
    assert not [c for c in commands if "pip" in c], commands
    assert moved == ["/content/extending-pytorch/notebooks"]


def test_fake_shell_records_what_a_new_style_setup_cell_asks_for(monkeypatch):
    # The harness itself: a !command is recorded with {NAME} expanded, %env sets the variable.
    monkeypatch.setenv("BOOK_TEST_VARIABLE", "")
    namespace = {"BRANCH": "spring"}
    shell = FakeShell(namespace)
    shell.system("git clone --branch {BRANCH} url dest")
    shell.run_line_magic("env", "BOOK_TEST_VARIABLE=1")
    assert shell.commands == [["git", "clone", "--branch", "spring", "url", "dest"]]
    assert os.environ["BOOK_TEST_VARIABLE"] == "1"
