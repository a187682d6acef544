"""Tests of the book itself: table of contents, notebook hygiene, chapter structure, legacy APIs, strict nbval."""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from conftest import (
    NOTEBOOK_DIR,
    REPO_ROOT,
    cell_source,
    chapter_notebooks,
    load_notebook,
    load_tool,
)

CHAPTERS = chapter_notebooks()
CHAPTER_IDS = [p.stem for p in CHAPTERS]


def toc_files() -> list[str]:
    """Every `file:` entry of _toc.yml, the root included, without extension."""
    return load_tool("check_site").toc_pages()


def test_there_is_at_least_one_chapter():
    assert CHAPTERS, "no notebooks found in notebooks/"


def test_every_notebook_is_in_the_toc():
    listed = set(toc_files())
    missing = [p.name for p in CHAPTERS if f"notebooks/{p.stem}" not in listed]
    assert not missing, f"notebooks missing from _toc.yml: {missing}"


def test_every_toc_entry_exists():
    missing = [
        entry
        for entry in toc_files()
        if not any(
            (REPO_ROOT / f"{entry}{suffix}").is_file()
            for suffix in (".md", ".ipynb")
        )
    ]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"


def test_chapter_names_follow_the_convention():
    bad = [
        p.name
        for p in CHAPTERS
        if not re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name)
    ]
    assert not bad, f"chapters must be named NN_topic.ipynb: {bad}"


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_notebook_was_executed_top_to_bottom_in_one_run(path):
    cells = load_notebook(path)["cells"]
    counts = [
        c.get("execution_count")
        for c in cells
        if c["cell_type"] == "code" and cell_source(c).strip()
    ]
    assert (
        None not in counts
    ), f"{path.name}: {counts.count(None)} code cell(s) never executed; run `make execute`"
    assert counts == list(
        range(1, len(counts) + 1)
    ), f"{path.name}: execution counts {counts} are not 1..N"
    errors = [
        o
        for c in cells
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if o["output_type"] == "error"
    ]
    assert (
        not errors
    ), f"{path.name}: stored outputs contain an error: {errors[0].get('ename')}"


def headings(cells: list[dict], level: int) -> list[str]:
    marker = "#" * level + " "
    found = []
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        in_fence = False
        for line in cell_source(cell).splitlines():
            if line.startswith("```"):
                in_fence = not in_fence
            elif not in_fence and line.startswith(marker):
                found.append(line[len(marker) :].strip())
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_chapter_opens_and_closes_like_every_chapter(path):
    cells = load_notebook(path)["cells"]
    first = cell_source(cells[0])
    assert cells[0]["cell_type"] == "markdown" and first.startswith(
        "# "
    ), "a chapter starts with its title"
    assert len(headings(cells, 1)) == 1, "a chapter has exactly one title"
    assert (
        f"colab.research.google.com/github/" in first
        and f"notebooks/{path.name})" in first
    ), "the first cell holds an Open-in-Colab badge pointing at this notebook"
    assert (
        "**What you'll learn**" in first
    ), "the first cell lists what you'll learn"
    assert (
        "**Prerequisites" in first
    ), "the first cell states the prerequisites"
    sections = headings(cells, 2)
    assert (
        "Summary" in sections and "Exercises" in sections
    ), f"missing Summary or Exercises in {sections}"
    closing = sections[sections.index("Summary") :]
    assert closing[:2] == [
        "Summary",
        "Exercises",
    ], f"a chapter closes with Summary then Exercises, got {closing}"
    assert set(closing) <= {
        "Summary",
        "Exercises",
        "Further reading",
    }, f"nothing but reading after them: {closing}"


def colab_badge_target(path):
    first = cell_source(load_notebook(path)["cells"][0])
    match = re.search(
        r"\(https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/([^)]+)\)",
        first,
    )
    assert match, f"{path.name}: no Colab badge link found"
    return match.groups()


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_colab_badge_and_setup_cell_agree_with_config(path):
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())
    repository = config["repository"]["url"].removeprefix(
        "https://github.com/"
    )
    branch = config["repository"]["branch"]
    assert colab_badge_target(path) == (
        repository,
        branch,
        f"notebooks/{path.name}",
    )
    setup = "\n".join(
        cell_source(c)
        for c in load_notebook(path)["cells"]
        if c["cell_type"] == "code"
    )
    assert (
        f'REPOSITORY, BRANCH = "{repository}", "{branch}"' in setup
    ), "the Colab setup cell must fetch the repository and branch named in _config.yml"


MACHINE_PATH = re.compile(
    r"(/root/|/work/|/tmp/|/home/[a-z]|/Users/|[A-Z]:\\\\Users)"
)
MEMORY_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")


def output_text(output: dict) -> str:
    parts = [
        output.get("text", ""),
        output.get("traceback", ""),
        output.get("evalue", ""),
    ]
    for mime, data in output.get("data", {}).items():
        if mime.startswith("text/") or mime.endswith("json"):
            parts.append(data)
    return json.dumps(parts)


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_outputs_show_no_machine_paths_or_memory_addresses(path):
    problems = []
    for index, cell in enumerate(load_notebook(path)["cells"]):
        for output in cell.get("outputs", []):
            text = output_text(output)
            for pattern in (MACHINE_PATH, MEMORY_ADDRESS):
                if match := pattern.search(text):
                    problems.append(f"cell {index}: {match.group(0)!r}")
    assert (
        not problems
    ), f"{path.name}: outputs reveal the build machine: {problems}"


# ---- Legacy APIs: the left column of book/migration.md must not appear in code ----

LEGACY_PYTHON = {
    r"\btorch\.utils\.ffi\b": "torch.utils.ffi (use torch.utils.cpp_extension)",
    r"\bVariable\s*\(|\bimport\s+Variable\b|\bautograd\.Variable\b": "Variable (use tensors)",
    r"\bsaved_variables\b": "ctx.saved_variables (use ctx.saved_tensors)",
    r"\bvolatile\s*=": "volatile= (use torch.no_grad())",
    r"setup\.py\s+install": "setup.py install (use pip install --no-build-isolation)",
}
LEGACY_CPP = {
    r"#\s*include\s*[<\"]THC?/": "TH/THC headers (use ATen)",
    r"\bAT_CHECK\b": "AT_CHECK (use TORCH_CHECK)",
    r"\bAT_ASSERTM?\b": "AT_ASSERT/AT_ASSERTM (use TORCH_CHECK or TORCH_INTERNAL_ASSERT)",
}
AUTOGRAD_METHODS = {"forward", "backward", "setup_context", "jvp", "vmap"}


def non_static_function_methods(code: str) -> list[str]:
    """Methods of autograd.Function subclasses that are not @staticmethod (legacy, non-static style)."""
    # IPython magics and shell escapes are not Python: replace each by `pass` (not
    # dropped: one may be the only statement of a block) before parsing.
    lines = [
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in code.splitlines()
    ]
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
        if not bases & {"Function", "InplaceFunction"}:
            continue
        for item in node.body:
            if (
                isinstance(item, ast.FunctionDef)
                and item.name in AUTOGRAD_METHODS
            ):
                decorators = {ast.unparse(d) for d in item.decorator_list}
                if "staticmethod" not in decorators:
                    found.append(
                        f"{node.name}.{item.name} is not a @staticmethod"
                    )
    return found


def legacy_api_uses(
    code: str, patterns: dict[str, str], python: bool
) -> list[str]:
    found = [
        label
        for pattern, label in patterns.items()
        if re.search(pattern, code)
    ]
    if python:
        found += non_static_function_methods(code)
    return found


def code_sources():
    for path in CHAPTERS:
        code = "\n".join(
            cell_source(c)
            for c in load_notebook(path)["cells"]
            if c["cell_type"] == "code"
        )
        yield path.relative_to(REPO_ROOT), code, True
    for path in sorted((REPO_ROOT / "extensions").rglob("*")):
        if "build" in path.relative_to(REPO_ROOT).parts or not path.is_file():
            continue
        if path.suffix == ".py":
            yield path.relative_to(REPO_ROOT), path.read_text(), True
        elif path.suffix in {".cpp", ".h", ".cu", ".cuh", ".hpp"}:
            yield path.relative_to(REPO_ROOT), path.read_text(), False


def test_no_legacy_api_in_notebook_code_or_extensions():
    problems = []
    for path, code, python in code_sources():
        for use in legacy_api_uses(
            code, LEGACY_PYTHON if python else LEGACY_CPP, python
        ):
            problems.append(f"{path}: {use}")
    assert not problems, "legacy APIs in code:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "snippet, python",
    [
        ("from torch.utils.ffi import create_extension", True),
        ("from torch.autograd import Variable", True),
        ("x = torch.autograd.Variable(t)", True),
        ("a, = ctx.saved_variables", True),
        ("y = Variable(x, volatile=True)", True),
        ("# then run: python setup.py install", True),
        (
            "class F(Function):\n    def forward(self, x):\n        return x",
            True,
        ),
        (
            "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return x\n"
            "    def backward(self, g):\n        return g",
            True,
        ),
        ("#include <THC/THC.h>", False),
        ("#include <TH/TH.h>", False),
        ('AT_CHECK(x.dim() == 2, "x must be 2-D");', False),
        ('AT_ASSERTM(x.defined(), "x undefined");', False),
    ],
)
def test_legacy_api_check_catches_each_legacy_api(snippet, python):
    assert legacy_api_uses(
        snippet, LEGACY_PYTHON if python else LEGACY_CPP, python
    ), snippet


def test_legacy_api_check_accepts_current_code():
    current = (
        "class F(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x\n"
        "    @staticmethod\n    def backward(ctx, g):\n        x, = ctx.saved_tensors\n        return g\n"
        "with torch.no_grad():\n    y = F.apply(torch.ones(2))\n"
    )
    assert legacy_api_uses(current, LEGACY_PYTHON, True) == []
    assert (
        legacy_api_uses(
            'TORCH_CHECK(x.dim() == 2, "x must be 2-D");', LEGACY_CPP, False
        )
        == []
    )


# ---- Strict nbval is real ----


def nbval_flags() -> list[str]:
    """The nbval flags `make test` uses, read from the Makefile so the two cannot drift apart."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    match = re.search(r"^NBVAL_FLAGS\s*:=\s*(.+)$", makefile, re.MULTILINE)
    assert match, "Makefile defines NBVAL_FLAGS"
    return shlex.split(match.group(1))


def first_compared_stream_output(notebook: dict) -> tuple[int, dict]:
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or "NBVAL_IGNORE_OUTPUT" in cell_source(
            cell
        ):
            continue
        for output in cell.get("outputs", []):
            if (
                output["output_type"] == "stream"
                and output["name"] == "stdout"
            ):
                return index, output
    raise AssertionError("no compared stdout output in the notebook")


def test_strict_nbval_fails_when_a_stored_output_changes(tmp_path):
    source = CHAPTERS[0]
    notebook = load_notebook(source)
    altered = copy.deepcopy(notebook)
    index, output = first_compared_stream_output(altered)
    text = (
        "".join(output["text"])
        if isinstance(output["text"], list)
        else output["text"]
    )
    output["text"] = text.replace(text.strip(), text.strip() + " (changed)")
    target = tmp_path / source.name
    target.write_text(json.dumps(altered))
    flags = [
        f if not f.startswith("tests/") else str(REPO_ROOT / f)
        for f in nbval_flags()
    ]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *flags,
            "-x",
            "-p",
            "no:cacheprovider",
            str(target),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    report = result.stdout + result.stderr
    assert (
        result.returncode == 1
    ), f"nbval should have failed on the changed output of cell {index}:\n{report[-3000:]}"
    assert "(changed)" in report and "mismatch" in report.lower(), report[
        -3000:
    ]


def test_landing_page_figure_is_up_to_date(tmp_path):
    # The ladder figure's reading times come from the notebooks: redraw it and compare.
    fresh = tmp_path / "ladder.svg"
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "ladder_figure.py"), str(fresh)],
                   check=True, timeout=120)
    committed = REPO_ROOT / "book" / "images" / "ladder.svg"
    assert fresh.read_bytes() == committed.read_bytes(), (
        "book/images/ladder.svg is stale: run `python tools/ladder_figure.py`"
    )
    assert "images/ladder.svg" in (REPO_ROOT / "book" / "intro.md").read_text()


# ---- The benchmarks page: every chapter's measurements, pasted from its outputs ----

BENCHMARKS_PAGE = "book/benchmarks"
# Code that times something: such a chapter's results belong on the benchmarks page.
MEASURES = re.compile(r"\bep\.(timed|compare)\(|\bbench\.run\(|\bbenchmark\.Timer\(")
SHOW_NAME = re.compile(r"\bep\.show\([^#]*?name=\"(\w+)\"", re.S)


def recorded_names(notebook: dict) -> list[str]:
    """Names under which a notebook's stored outputs were recorded by `ep.show`."""
    return [
        output["metadata"]["scrapbook"]["name"]
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if "scrapbook" in output.get("metadata", {})
    ]


def test_benchmarks_page_is_in_the_toc():
    assert BENCHMARKS_PAGE in toc_files()


def test_benchmarks_page_pastes_only_recorded_outputs():
    # pasted_outputs fails unless each pasted name is recorded exactly once in its chapter.
    pasted = load_tool("check_site").pasted_outputs(BENCHMARKS_PAGE)
    assert len(pasted) >= 5
    assert any("image/png" in output["data"] for _, output in pasted)


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_chapter_that_measures_is_on_the_benchmarks_page_with_a_link(path):
    code = "\n".join(
        cell_source(c) for c in load_notebook(path)["cells"] if c["cell_type"] == "code"
    )
    if not MEASURES.search(code):
        pytest.skip(f"{path.name} times nothing")
    page = (REPO_ROOT / f"{BENCHMARKS_PAGE}.md").read_text()
    assert f":doc: ../notebooks/{path.name}" in page, f"{path.name}'s results are not pasted"
    assert f"](../notebooks/{path.name}#" in page, f"no link to the section of {path.name}"


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_each_recorded_output_is_stored_once_under_its_name(path):
    notebook = load_notebook(path)
    code = "\n".join(cell_source(c) for c in notebook["cells"] if c["cell_type"] == "code")
    names = recorded_names(notebook)
    assert len(names) == len(set(names)), f"a name is recorded twice: {sorted(names)}"
    assert set(names) == set(SHOW_NAME.findall(code)), "stored outputs differ from the ep.show calls"
