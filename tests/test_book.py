"""Tests of the book itself: table of contents, notebook hygiene, chapter structure, legacy APIs, strict nbval,
licenses and citation, and the instructors' page."""

from __future__ import annotations

import ast
import copy
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

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

# The book's files: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch

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


def colab_setup_cell(notebook: dict) -> str:
    return next(cell_source(c) for c in notebook["cells"]
                if c["cell_type"] == "code" and "REPOSITORY, BRANCH =" in cell_source(c))


# The one line in which chapters' Colab setup cells differ: whether the chapter builds C++.
SETUP_NATIVE_LINES = (
    "NATIVE = True  # this chapter builds the package's C++ (and CUDA, where the runtime has a GPU and nvcc)",
    "NATIVE = False  # this chapter needs no C++: the package's Python part only, no compile",
)


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_colab_setup_cell_is_the_templates_but_for_its_native_line(path):
    # One shared text: a fix to the setup cell (the torch check, the install) reaches every
    # chapter, or this test names the chapter it missed.
    template = colab_setup_cell(load_notebook(NOTEBOOK_DIR / "_template.ipynb")).splitlines()
    cell = colab_setup_cell(load_notebook(path)).splitlines()
    native = [line for line in cell if line.startswith("NATIVE = ")]
    assert len(native) == 1 and native[0] in SETUP_NATIVE_LINES, (
        f"{path.name}: the setup cell's NATIVE line must be one of {SETUP_NATIVE_LINES}, got {native}"
    )
    same = [SETUP_NATIVE_LINES[0] if line.startswith("NATIVE = ") else line for line in cell]
    shared = [SETUP_NATIVE_LINES[0] if line.startswith("NATIVE = ") else line for line in template]
    assert same == shared, f"{path.name}: the Colab setup cell differs from notebooks/_template.ipynb's"
    # The torch check runs before the package is built against torch.
    assert cell.index("    %run /content/extending-pytorch/tools/colab_torch.py") < next(
        i for i, line in enumerate(cell) if "-e /content/extending-pytorch/extensions" in line
    )


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
        ignored = {"nbval-ignore-output", "nbval-skip"} & set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] != "code" or ignored:
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


# ---- Licenses, citation, and the instructors' page ----

CC_BY_4_0_SHA256 = "fd3a263fe19ed8faa9068b43abaebafc02c77897b0c6fc09abc04bb592e5f16e"
BSD_URL = "https://opensource.org/license/bsd-3-clause"
CC_BY_URL = "https://creativecommons.org/licenses/by/4.0/"
INSTRUCTORS_PAGE = "book/instructors"
# The packages built from this repository, each with its own copy of LICENSE.
PACKAGES = ["extensions", "extensions/stable"]


def book_config() -> dict:
    return yaml.safe_load((REPO_ROOT / "_config.yml").read_text())


def toc_chapters() -> list[str]:
    """The chapters as _toc.yml lists them: notebooks/NN_topic, without extension."""
    return [entry for entry in toc_files() if entry.startswith("notebooks/")]


def test_code_license_is_bsd_3_clause_with_the_books_copyright():
    text = (REPO_ROOT / "LICENSE").read_text()
    config = book_config()
    assert text.startswith("BSD 3-Clause License\n"), "LICENSE names the license on its first line"
    assert f"Copyright (c) {config['copyright']}, {config['author']}\n" in text, (
        "LICENSE's copyright line agrees with `author` and `copyright` in _config.yml"
    )
    clauses = re.findall(r"^\* (Redistributions of source code|Redistributions in binary form|Neither the name)",
                         text, re.MULTILINE)
    assert len(clauses) == 3, f"the three clauses, got {clauses}"
    assert 'THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"' in text
    assert text.rstrip().endswith("EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.")


def test_content_license_is_the_complete_cc_by_4_0_legal_code():
    path = REPO_ROOT / "LICENSES" / "CC-BY-4.0.txt"
    text = path.read_text()
    assert text.startswith("Attribution 4.0 International\n")
    assert "Creative Commons Attribution 4.0 International Public License" in text
    sections = re.findall(r"^Section (\d) -- ", text, re.MULTILINE)
    assert sections == [str(n) for n in range(1, 9)], f"sections 1 to 8 of the legal code, got {sections}"
    assert text.rstrip().endswith("Creative Commons may be contacted at creativecommons.org.")
    # Creative Commons' plain-text legal code, byte for byte: a license is never paraphrased.
    assert hashlib.sha256(path.read_bytes()).hexdigest() == CC_BY_4_0_SHA256


def test_readme_states_both_licenses():
    readme = (REPO_ROOT / "README.md").read_text()
    assert "\n## License\n" in readme
    section = readme.split("\n## License\n", 1)[1].split("\n## ", 1)[0]
    for words in ("BSD-3-Clause", "`LICENSE`", BSD_URL, "CC BY 4.0", "`LICENSES/CC-BY-4.0.txt`", CC_BY_URL):
        assert words in section, f"README's License section does not mention {words}"


def test_site_footer_states_both_licenses():
    footer = book_config().get("html", {}).get("extra_footer", "")
    for words in ("BSD-3-Clause", f'href="{BSD_URL}"', "CC BY 4.0", f'href="{CC_BY_URL}"'):
        assert words in footer, f"the footer of every page (html.extra_footer in _config.yml) lacks {words}"


@pytest.mark.parametrize("package", PACKAGES)
def test_package_declares_bsd_3_clause_and_holds_the_license(package):
    source = REPO_ROOT / package
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    assert project.get("license") == "BSD-3-Clause", "an SPDX expression (PEP 639)"
    assert project.get("license-files") == ["LICENSE"]
    # A package may only name files inside its own folder: it holds a copy.
    assert (source / "LICENSE").read_bytes() == (REPO_ROOT / "LICENSE").read_bytes(), (
        f"{package}/LICENSE must be a copy of the repository's LICENSE"
    )


def test_built_package_metadata_states_the_license_and_ships_it(tmp_path):
    # Build the metadata as pip would, from a copy (no compiler: the Python part only).
    build = tmp_path / "package"
    shutil.copytree(REPO_ROOT / "extensions", build, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "*.so", "__pycache__", "csrc", "stable"))
    out = tmp_path / "metadata"
    out.mkdir()
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys; from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))",
         str(out)],
        cwd=build, capture_output=True, text=True, timeout=120,
        env={**os.environ, "EXTENDING_PYTORCH_SKIP_NATIVE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dist_info = out / result.stdout.strip().splitlines()[-1]
    metadata = (dist_info / "METADATA").read_text()
    assert "\nLicense-Expression: BSD-3-Clause\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata
    assert (dist_info / "licenses" / "LICENSE").read_bytes() == (REPO_ROOT / "LICENSE").read_bytes()


def test_citation_file_is_cff_1_2_0_and_names_both_licenses():
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by the CFF 1.2.0 schema
        assert citation.get(key), f"CITATION.cff needs {key!r}"
    assert all(author.get("name") or author.get("family-names") for author in citation["authors"])
    assert citation["title"] == book_config()["title"]
    assert citation["license"] == ["BSD-3-Clause", "CC-BY-4.0"]
    package = tomllib.loads((REPO_ROOT / "extensions" / "pyproject.toml").read_text())["project"]
    assert str(citation["version"]) == package["version"], "CITATION.cff's version is the package's"


def test_instructors_page_is_in_the_toc():
    assert INSTRUCTORS_PAGE in toc_files()


def instructors_section(heading: str) -> str:
    page = (REPO_ROOT / f"{INSTRUCTORS_PAGE}.md").read_text()
    assert f"\n## {heading}\n" in page, f"the instructors' page has no section {heading!r}"
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_instructors_page_states_both_licenses():
    section = instructors_section("What you may do: the licenses")
    for words in ("BSD-3-Clause", "`LICENSE`", "CC BY 4.0", "`LICENSES/CC-BY-4.0.txt`", "`CITATION.cff`"):
        assert words in section, f"the licenses section does not mention {words}"


def table_rows(section: str) -> dict[str, list[str]]:
    """{chapter: its cells} for the rows of a table that start with a {doc} link to a chapter."""
    rows = {}
    for line in section.splitlines():
        if match := re.match(r"^\| \{doc\}`\.\./(notebooks/\w+)` \|(.*)\|\s*$", line):
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_instructors_page_tables_name_every_chapter():
    chapters = toc_chapters()
    assert chapters
    for heading in ("How long each chapter takes to run", "What each chapter needs"):
        rows = table_rows(instructors_section(heading))
        assert list(rows) == chapters, f"{heading!r}: rows {list(rows)}, _toc.yml lists {chapters}"


def setup_builds_native_code(notebook: dict) -> bool:
    return "\nNATIVE = True " in colab_setup_cell(notebook)


def test_instructors_page_needs_agree_with_the_chapters():
    # A chapter whose Colab setup builds the C++ extensions needs a compiler; one that runs
    # nvcc itself needs the CUDA toolkit; the others need nothing more.
    rows = table_rows(instructors_section("What each chapter needs"))
    for chapter, cells in rows.items():
        notebook = load_notebook(REPO_ROOT / f"{chapter}.ipynb")
        code = "\n".join(cell_source(c) for c in notebook["cells"] if c["cell_type"] == "code")
        needs, native, runs_nvcc = cells[0], setup_builds_native_code(notebook), 'shutil.which("nvcc")' in code
        assert ("C++20 compiler" in needs) == native, (
            f"{chapter}: 'also needs' says {needs!r}, but its setup cell "
            f"{'builds' if native else 'does not build'} the C++ extensions"
        )
        assert ("`nvcc`" in needs) == runs_nvcc, (
            f"{chapter}: 'also needs' says {needs!r}, but the chapter {'runs' if runs_nvcc else 'does not run'} nvcc"
        )


def test_instructors_page_shows_the_chapter_times_the_notebooks_recorded():
    tool = load_tool("chapter_times")
    page = REPO_ROOT / f"{INSTRUCTORS_PAGE}.md"
    assert tool.block(page) == tool.render(page).strip(), (
        "the table of chapter times is stale: run `python tools/chapter_times.py --update book/instructors.md`"
    )


def timed_copy(tmp_path, durations, gap=10.0):
    """A one-chapter book whose code cells recorded the given durations, started `gap` s apart."""
    (tmp_path / "notebooks").mkdir(parents=True)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: notebooks/00_demo\n")
    notebook = load_notebook(NOTEBOOK_DIR / "_template.ipynb")
    code = [c for c in notebook["cells"] if c["cell_type"] == "code" and cell_source(c).strip()]
    assert len(code) == len(durations)
    start = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
    for index, (cell, seconds) in enumerate(zip(code, durations)):
        began = start + datetime.timedelta(seconds=gap * index)
        ended = began + datetime.timedelta(seconds=seconds)
        cell["metadata"]["execution"] = {  # as nbclient writes them with record_timing=True
            "iopub.status.busy": began.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "iopub.execute_input": began.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "shell.execute_reply": ended.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "iopub.status.idle": ended.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
    path = tmp_path / "notebooks" / "00_demo.ipynb"
    path.write_text(json.dumps(notebook))
    return path, notebook, code


def test_chapter_times_span_the_stored_run_and_name_its_longest_cell(tmp_path):
    tool = load_tool("chapter_times")
    path, _, _ = timed_copy(tmp_path, [1.0, 5.0, 2.0, 0.5])
    timing = tool.chapter_timing(path)
    # From the first cell's start (t=0) to the last one's reply (t=30.5), not the sum of the cells (8.5).
    assert timing["seconds"] == pytest.approx(30.5)
    assert timing["longest"] == pytest.approx(5.0)
    assert timing["section"] == "0. Setup"
    table = tool.render(tmp_path / "book" / "instructors.md", tmp_path)
    assert "| {doc}`../notebooks/00_demo` | 30 s | 5 s, in *0. Setup* | 5 min |" in table
    assert "All chapters together: 30 s." in table


def test_chapter_times_are_not_recorded_for_a_partial_or_overlapping_run(tmp_path):
    tool = load_tool("chapter_times")
    path, notebook, code = timed_copy(tmp_path, [1.0, 5.0, 2.0, 0.5])
    del code[2]["metadata"]["execution"]  # that cell was run without timing (or never)
    path.write_text(json.dumps(notebook))
    assert tool.chapter_timing(path)["seconds"] is None
    table = tool.render(tmp_path / "book" / "instructors.md", tmp_path)
    assert "| not recorded | not recorded |" in table and "All chapters together" not in table
    # Cells that overlap in time were not run one after another in one kernel.
    path, _, _ = timed_copy(tmp_path / "overlap", [1.0, 15.0, 2.0, 0.5])
    assert tool.chapter_timing(path)["seconds"] is None


def test_readme_points_instructors_to_their_page():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Teach with this book\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{INSTRUCTORS_PAGE}.md`" in section


def _listing_cells(path):
    """(index, source, stored markdown) of each code cell that is one `ep.show_source(...)` call."""
    found = []
    for index, cell in enumerate(load_notebook(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = cell_source(cell)
        try:
            body = ast.parse(source).body
        except SyntaxError:
            continue
        if not (len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Call)
                and ast.unparse(body[0].value.func) == "ep.show_source"):
            continue
        stored = [o["data"]["text/markdown"] for o in cell.get("outputs", [])
                  if "text/markdown" in o.get("data", {})]
        found.append((index, source, "".join(stored[0]) if stored else None))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_stored_source_listings_show_the_sources_as_they_are(path):
    # Bug: a source changed (a docstring, a kernel) after its chapter was executed, so the
    # page shows code the repository no longer has; strict nbval finds it only when the
    # whole chapter runs (CI once failed so). This compares every listing cell's stored
    # output with a listing made now, without running the chapter: each `ep.show_source`
    # call is evaluated with the names of the chapter's import cells.
    cells = load_notebook(path)["cells"]
    names = {"__name__": "listings"}
    for cell in cells:
        source = cell_source(cell)
        if cell["cell_type"] == "code" and "import extending_pytorch as ep" in source:
            exec("\n".join(line for line in source.splitlines()
                           if line.startswith(("import ", "from "))), names)
            break
    stale, unevaluated = [], []
    for index, source, stored in _listing_cells(path):
        try:
            listing = eval(source, names)
        except NameError as error:
            unevaluated.append(f"cell {index}: {error}")
            continue
        if stored != listing._repr_markdown_():
            stale.append(f"cell {index}: {source.strip()[:120]}")
    assert not unevaluated, f"{path.name}: listings whose names the import cell lacks: {unevaluated}"
    assert not stale, (
        f"{path.name}: stored listings differ from the sources (re-execute the chapter: "
        f"python tools/execute_notebooks.py {path.relative_to(REPO_ROOT)}): {stale}"
    )


# Prose a reader meets on the page, outside folded asides: chapters 2 and 5 keep theirs under
# this many words (issue 29); the rest folds into dropdowns (toolchain and emulator internals,
# history, long caveats) that the site renders closed.
PROSE_WORD_LIMIT = 5000
PROSE_LIMITED_CHAPTERS = ["02_numpy_scipy_function", "05_cuda_kernel"]
_FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(\{[\w:-]+\})?\s*(.*?)\s*$")


def visible_prose_words(markdown: str) -> int:
    """Words of prose a markdown cell shows unfolded.

    Not counted: fenced code (a fence with a language or none, and ```{code-cell} or
    ```{math}), display math ($$ ... $$), and everything inside a folded directive: a
    {dropdown}, or a directive with a `:class:` option naming dropdown (an admonition the
    site renders closed), either fence style (``` or :::), nested or not. A dropdown's title
    stays visible, and counts. Other directives ({note}, {admonition}, ...) are prose.
    """
    markdown = re.sub(r"\$\$.*?\$\$", " ", markdown, flags=re.S)
    lines = markdown.splitlines()
    words, stack, i = 0, [], 0  # stack: (fence, kind) with kind "code", "folded" or "prose"
    while i < len(lines):
        line = lines[i]
        match = _FENCE.match(line)
        top = stack[-1] if stack else None
        if match and top and top[1] == "code":
            fence = match.group(1)
            if fence[0] == top[0][0] and len(fence) >= len(top[0]) and not match.group(2) and not match.group(3):
                stack.pop()
            i += 1
            continue
        if match and top and match.group(1)[0] == top[0][0] and len(match.group(1)) >= len(top[0]) \
                and not match.group(2) and not match.group(3):
            stack.pop()  # the end of a directive
            i += 1
            continue
        if top and top[1] == "code":
            i += 1
            continue
        if match and (match.group(2) or match.group(1)[0] == "`"):
            fence, name, title = match.groups()
            if not name or name in ("{code-cell}", "{code-block}", "{code}", "{math}"):
                kind = "code"
                if fence[0] == ":":  # ::: without a directive is not a fence in MyST
                    kind = "prose"
            else:
                # The directive's options (":key: value" lines) open its body.
                options, j = [], i + 1
                while j < len(lines) and re.match(r"^\s*:[\w-]+:", lines[j]):
                    options.append(lines[j])
                    j += 1
                folded = name == "{dropdown}" or any(
                    re.match(r"^\s*:class:.*\bdropdown\b", option) for option in options
                )
                kind = "folded" if folded or any(k == "folded" for _, k in stack) else "prose"
                if not any(k == "folded" for _, k in stack):
                    words += len(title.split())  # a dropdown's title is shown closed
                stack.append((fence, kind))
                i = j
                continue
            stack.append((fence, kind))
            i += 1
            continue
        if not any(kind in ("folded", "code") for _, kind in stack):
            words += len(line.split())
        i += 1
    return words


def chapter_prose_words(path) -> int:
    return sum(
        visible_prose_words(cell_source(cell))
        for cell in load_notebook(path)["cells"]
        if cell["cell_type"] == "markdown"
    )


def test_visible_prose_words_leave_out_code_math_and_folded_asides():
    # Bug: the count takes a dropdown's body, code or display math for prose (the limit
    # then pushes out prose a reader needs), or skips an unfolded note (the limit is evaded).
    assert visible_prose_words("one two three") == 3
    assert visible_prose_words("a\n```python\nx = 1 + 2\n```\nb") == 2
    assert visible_prose_words("a\n$$\nx + y = z\n$$\nb") == 2
    assert visible_prose_words(":::{dropdown} Three word title\nhidden words here\n:::\nafter") == 4
    assert visible_prose_words("````{dropdown} Title\nhidden\n```python\nx = 1\n```\n````\nafter") == 2
    assert visible_prose_words("```{admonition} Note title\n:class: dropdown\nhidden body\n```") == 2
    assert visible_prose_words("```{admonition} Note title\n:class: important\nshown body\n```") == 4
    assert visible_prose_words(":::{note}\nshown body words\n:::") == 3
    assert visible_prose_words(":::{dropdown} T\n```{note}\nhidden\n```\n:::\nend") == 2


@pytest.mark.parametrize("name", PROSE_LIMITED_CHAPTERS)
def test_chapter_prose_outside_folded_asides_stays_under_the_limit(name):
    # Bug: a chapter grows past what a learner reads in one sitting (issue 29: chapters 2 and 5
    # at most ~5,000 words), where material for the curious belongs in a folded aside.
    words = chapter_prose_words(NOTEBOOK_DIR / f"{name}.ipynb")
    assert words <= PROSE_WORD_LIMIT, (
        f"{name}.ipynb shows {words} words of prose outside folded asides, more than "
        f"{PROSE_WORD_LIMIT}: fold material for the curious into a ```{{dropdown}} (or tighten the prose)"
    )
