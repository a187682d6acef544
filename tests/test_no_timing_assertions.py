"""No assertion compares timings, in a notebook or a test.

A loaded machine (CI runs two test suites on two cores) flips any comparison of
two timings, or of a timing with a bound: timings are shown in tables and plots,
never asserted (README, "Working on a chapter"). This test reads every code cell
of every chapter and every test file, and fails on an `assert` whose comparison
(<, <=, >, >=) involves a name, attribute or key that says it is a time.
"""

from __future__ import annotations

import ast
import re

import pytest

from conftest import REPO_ROOT, cell_source, chapter_notebooks, load_notebook

# The book's files: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch

# Words that name a time or a rate measured from one, as whole words of an
# identifier (per_program_seconds, kernel.median, result["elapsed"]).
TIMING_WORDS = {
    "time", "times", "timing", "timings", "elapsed", "seconds", "secs", "ms", "us", "ns",
    "median", "medians", "mean_time", "per_program", "speed", "speedup", "faster", "slower",
    "duration", "latency", "throughput", "gbps", "bandwidth", "timed", "timer", "perf_counter",
    "monotonic",
}


def _words(node: ast.AST) -> set[str]:
    """The identifier words and string keys a node mentions."""
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            text = child.id
        elif isinstance(child, ast.Attribute):
            text = child.attr
        elif isinstance(child, ast.Constant) and isinstance(child.value, str) and isinstance(
            getattr(child, "parent", None), ast.Subscript
        ):
            text = child.value
        else:
            continue
        found.add(text.lower())
        found.update(w for w in re.split(r"_+", text.lower()) if w)
    return found


def timing_assertions(source: str) -> list[str]:
    """The lines of `source` whose assert compares something named like a timing."""
    # IPython's magics and shell lines are not Python.
    lines = [re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in source.splitlines()]
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            # Each ordering of two operands (a < b < c is two), except against
            # 0: a timing's sign is no measurement a load can flip.
            ordered = [
                (a, b) for a, op, b in zip(operands, compare.ops, operands[1:])
                if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                and not any(isinstance(x, ast.Constant) and x.value == 0 for x in (a, b))
            ]
            if any((_words(a) | _words(b)) & TIMING_WORDS for a, b in ordered):
                hits.append(lines[node.lineno - 1].strip())
                break
    return hits


def test_the_detector_finds_the_assertion_that_failed_ci():
    # Chapter 6's cell that failed CI on a loaded machine, and other shapes of
    # the same mistake; comparisons of sizes, counts and errors are fine.
    caught = [
        "assert per_program[batch, 512] > per_program[batch, 64], per_program",
        "assert per_program[64, dim] * 64 > per_program[4, dim] * 4",
        "assert kernel.median < reference.median",
        "assert result['seconds'] < 20",
        "assert timings['cpp'] <= 1.1 * timings['compile']",
        "assert speedup > 1.5",
        "assert elapsed < limit",
        "assert time.perf_counter() - start < 5",
        "assert all(gbps > 100 for gbps in rates)",
        "assert 0 < elapsed < 5",
    ]
    for line in caught:
        assert timing_assertions(line) == [line], line
    fine = [
        "assert error < 1e-5",
        "assert len(rows) > 3",
        "assert peak_bytes < 2 * expected_bytes",
        "assert result['status'] == 'timed out'",
        "assert counts['passed'] >= 1",
        "print(kernel.median < reference.median)",
        "assert record['seconds'] > 0",
    ]
    for line in fine:
        assert timing_assertions(line) == [], line


@pytest.mark.parametrize("notebook", chapter_notebooks(), ids=lambda p: p.stem)
def test_no_notebook_asserts_on_timings(notebook):
    hits = []
    for index, cell in enumerate(load_notebook(notebook)["cells"]):
        if cell["cell_type"] == "code":
            hits += [f"cell {index}: {line}" for line in timing_assertions(cell_source(cell))]
    assert not hits, f"{notebook.name} asserts on timings (show them in a table instead):\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "test_file", sorted((REPO_ROOT / "tests").rglob("*.py")), ids=lambda p: str(p.relative_to(REPO_ROOT))
)
def test_no_test_asserts_on_timings(test_file):
    hits = timing_assertions(test_file.read_text())
    assert not hits, f"{test_file.name} asserts on timings:\n" + "\n".join(hits)
