"""make student-copy: the chapters without their solutions, whose checks still work.

The copy is written once per module (tools/student_copy.py, which needs no torch). Its check cells are
the book's, so the book's own tests (test_exercises.py) cover their verdicts on every answer; here the
copy's checks run without the solution code on the official solutions and on a wrong answer, for the
exercises whose checks compare with the official solution's recorded outputs and for a few of the
others, and every exercise's stub fails its check with NotImplementedError.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, cell_source, chapter_notebooks, load_notebook, load_tool
from extending_pytorch import exercises
from test_exercises import WRONG_ANSWERS

# What the copy is made of does not depend on torch's version (the checks' verdicts run in
# test_exercises.py on every torch).
pytestmark = pytest.mark.same_on_every_torch

student_copy = load_tool("student_copy")


@pytest.fixture(scope="module")
def copy_dir(tmp_path_factory):
    destination = tmp_path_factory.mktemp("student")
    student_copy.write_copy(destination)
    return destination


def exercise_ids():
    return [
        (path.stem, number)
        for path in chapter_notebooks()
        for number, _, _ in exercises.exercise_cells(load_notebook(path))
    ]


EXERCISES = exercise_ids()


def cells(notebook, number):
    """(solution cell, check cell) of exercise `number`."""
    (solution, check), = [(s, c) for n, s, c in exercises.exercise_cells(notebook) if n == number]
    return notebook["cells"][solution], notebook["cells"][check]


def test_the_copy_needs_no_torch(tmp_path):
    # -I -S: Python's standard library only; torch and every installed package out of reach.
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(REPO_ROOT / "tools" / "student_copy.py"), str(tmp_path)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == [p.name for p in chapter_notebooks()]
    assert f"with {len(EXERCISES)} exercises to answer" in result.stdout


def test_the_copy_refuses_to_overwrite_the_book(tmp_path):
    with pytest.raises(SystemExit, match="DEST is .* itself"):
        student_copy.write_copy(REPO_ROOT / "notebooks")


@pytest.mark.parametrize("stem", [p.stem for p in chapter_notebooks()])
def test_only_the_solutions_change_and_every_output_is_cleared(copy_dir, stem):
    book = load_notebook(REPO_ROOT / "notebooks" / f"{stem}.ipynb")
    copy = load_notebook(copy_dir / f"{stem}.ipynb")
    solutions = {s for _, s, _ in exercises.exercise_cells(book)}
    assert len(copy["cells"]) == len(book["cells"])
    for index, (ours, theirs) in enumerate(zip(book["cells"], copy["cells"])):
        if theirs["cell_type"] == "code":
            assert theirs["outputs"] == [] and theirs["execution_count"] is None, f"cell {index} keeps its outputs"
            assert "execution" not in theirs["metadata"], f"cell {index} keeps the book's run times"
        if index in solutions:
            assert cell_source(theirs).startswith("# @title Exercise"), f"cell {index}: a stub"
            assert "hide-input" not in theirs["metadata"].get("tags", []) and "cellView" not in theirs["metadata"], (
                f"cell {index}: the stub is shown, not folded"
            )
        elif cell_source(theirs) != cell_source(ours):
            # Only the sentences that say where the folded solution is.
            assert theirs["cell_type"] == "markdown", f"cell {index} changed"
            assert student_copy.FOLDED_SOLUTION.sub(student_copy.STUB_SENTENCE, cell_source(ours)) == cell_source(theirs), (
                f"cell {index} changed beyond its sentences about the folded solutions"
            )


def test_the_copy_says_where_the_stubs_are_not_where_the_solutions_were_folded(copy_dir):
    # Catches a copy whose prose sends the student to a folded solution it no longer has.
    said = 0
    for path in sorted(copy_dir.glob("*.ipynb")):
        for cell in load_notebook(path)["cells"]:
            text = " ".join(cell_source(cell).split())
            assert "folded cell just above its check" not in text and "solutions are folded" not in text, path.name
            said += student_copy.STUB_SENTENCE in text
    book = [cell_source(c) for p in sorted((REPO_ROOT / "notebooks").glob("[0-9]*.ipynb"))
            for c in load_notebook(p)["cells"]]
    assert said == sum(len(student_copy.FOLDED_SOLUTION.findall(text)) for text in book) > 0


# Lines a solution shares with its check, which gives nothing away.
SHARED_LINES = {
    # The check computes the distances too, to place t1 and t2 between them.
    ("04_cpp_extension", 2): {"d_an = ep.squared_distance(anchor, negative)"},
}


def test_a_stub_holds_only_names_and_declarations(copy_dir):
    allowed = re.compile(
        r"\s*($|#|@|def |class |raise NotImplementedError\(|\w+ = NotImplemented  # your answer here$|"
        r"\w+ = (True|False|None|-?\d+)$|pass$)"
    )
    for path in chapter_notebooks():
        copy = load_notebook(copy_dir / path.name)
        for number, solution, _ in exercises.exercise_cells(copy):
            for line in cell_source(copy["cells"][solution]).splitlines():
                assert allowed.match(line), f"{path.stem}, exercise {number}: the stub holds {line!r}"


def code_lines(source):
    """Lines of code without their trailing comments, stripped."""
    return {re.sub(r"\s+#.*$", "", line).strip() for line in source.splitlines()}


def solution_lines_left(book, copy, number):
    """The lines of exercise `number`'s solution (20 characters or more, not a def, class or decorator line)
    found in a cell of the copy, other than the lines its chapter shows before the exercise."""
    (index,) = [s for n, s, _ in exercises.exercise_cells(book) if n == number]
    given = set().union(*(code_lines(cell_source(cell)) for cell in book["cells"][:index]))
    secret = {
        line for line in code_lines(cell_source(book["cells"][index]))
        if len(line) >= 20 and not re.match(r"(def|class|@|#)", line)
    } - given
    return {index: found for index, cell in enumerate(copy["cells"]) if (found := secret & code_lines(cell_source(cell)))}


@pytest.mark.parametrize("stem, number", EXERCISES, ids=[f"{s}-ex{n}" for s, n in EXERCISES])
def test_the_copy_holds_no_line_of_a_solution(copy_dir, stem, number):
    """No line of a solution's code is left anywhere in the copy, the checks included (a check that
    compares with the solution reads its recorded outputs instead of carrying a copy of its code), except
    lines the chapter gives before the exercise (chapter 3's BuggySoftplus, say)."""
    book = load_notebook(REPO_ROOT / "notebooks" / f"{stem}.ipynb")
    left = solution_lines_left(book, load_notebook(copy_dir / f"{stem}.ipynb"), number)
    for index, found in left.items():
        found -= SHARED_LINES.get((stem, number), set())
        assert not found, f"cell {index} of the copy holds the solution's line {sorted(found)[0]!r}"


def check_in_copy(copy_dir, stem, number):
    """Exercise `number`'s check as the copy defines it, and the namespace a reader's answer runs in."""
    copy = load_notebook(copy_dir / f"{stem}.ipynb")
    solution, check = cells(copy, number)
    return exercises.load_check(cell_source(check), f"{stem}: check {number}"), exercises.answer_namespace(copy), solution


@pytest.mark.parametrize("stem, number", EXERCISES, ids=[f"{s}-ex{n}" for s, n in EXERCISES])
def test_each_stub_fails_its_check_saying_it_is_not_written(copy_dir, stem, number):
    check, names, stub = check_in_copy(copy_dir, stem, number)
    exec(cell_source(stub), names)
    with pytest.raises(NotImplementedError, match=f"Exercise {number}: "):
        check(names[check.answer])


# The exercises whose checks compare with the official solution, and a few others: a function, a class
# (autograd.Function) and a C++ source as answers.
RECORDED = [(s, n) for s, n in EXERCISES if "solution=recorded(" in cell_source(
    cells(load_notebook(REPO_ROOT / "notebooks" / f"{s}.ipynb"), n)[1])]
SAMPLE = RECORDED + [("03_handwritten_backward", 3), ("08_involution", 1), ("91_appendix_fewer_bytes", 2)]


def test_some_checks_compare_with_recorded_outputs():
    assert ("90_appendix_allocator", 1) in RECORDED and ("05_cuda_kernel", 3) in RECORDED


@pytest.mark.parametrize("stem, number", SAMPLE, ids=[f"{s}-ex{n}" for s, n in SAMPLE])
def test_the_copys_check_accepts_the_official_solution_and_rejects_a_wrong_answer(copy_dir, stem, number, capsys):
    check, names, _ = check_in_copy(copy_dir, stem, number)
    book_solution, _ = cells(load_notebook(REPO_ROOT / "notebooks" / f"{stem}.ipynb"), number)
    assert book_solution["source"] and check.answer not in names
    official = dict(names)
    exec(cell_source(book_solution), official)
    check(official[check.answer])
    assert f"Exercise {number} passed" in capsys.readouterr().out
    _, source, error, message = WRONG_ANSWERS[(stem, number)][0]
    wrong = dict(names)
    exec(source, wrong)
    with pytest.raises(error, match=message):
        check(wrong[check.answer])


def test_a_recorded_check_refuses_inputs_it_has_no_record_of():
    solution = exercises.recorded("90_appendix_allocator", 1)
    import torch

    with pytest.raises(LookupError, match="no output of the official solution is recorded for these inputs"):
        solution(torch.zeros(3, 5, 7, dtype=torch.float64))
    assert json.loads(exercises.records_path("90_appendix_allocator").read_text())["1"]


def test_make_student_copy_needs_no_virtual_environment(tmp_path):
    result = subprocess.run(["make", "-n", "-B", "student-copy", f"DEST={tmp_path}"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"tools/student_copy.py {tmp_path}" in result.stdout
    assert ".venv" not in result.stdout and "pip install" not in result.stdout, result.stdout
    usage = subprocess.run(["make", "student-copy"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert usage.returncode != 0 and "usage: make student-copy DEST=dir" in usage.stderr
