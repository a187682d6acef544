"""Exercises a learner can trust: each check accepts the solution and rejects a named wrong answer.

The checks are taken from the notebooks themselves (the cell that defines `check_exercise_N`), each
defined in a namespace of its own from its cell's source, as `run_check` does in the notebook
(extending_pytorch.exercises), and called on the chapter's folded solution and on the plausible wrong
answers below, which are defined in a namespace prepared by the chapter's import cell, as a reader's
answer is. A check that let one of them through would make a learner believe a wrong answer.
"""

from __future__ import annotations

import json
import os
import pathlib
import re

import pytest
from torch.autograd.gradcheck import GradcheckError

from conftest import cell_source, chapter_notebooks, load_notebook
from extending_pytorch import exercises as exercise_checks

# The checks and the answers are the same code on every torch; each chapter's own solution runs
# through its check in the notebook, on the oldest torch too (make test-oldest).
pytestmark = pytest.mark.same_on_every_torch

# Chapters whose exercises must each name a wrong answer here (the others are added as they adopt the form).
COVERED = ("01_", "02_", "03_", "04_", "05_", "06_", "07_", "08_", "09_", "90_", "91_")

# (notebook stem, exercise) -> [(what is wrong, source defining the answer's name, exception, message regex)],
# one file per chapter in tests/exercise_answers/ (so a chapter's wrong answers sit in one place).
ANSWERS_DIR = pathlib.Path(__file__).parent / "exercise_answers"


def _answers(kind):
    """(notebook stem, exercise) -> the answers of `kind` ("WRONG_ANSWERS" or "RIGHT_ANSWERS")."""
    import importlib.util

    found = {}
    for file in sorted(ANSWERS_DIR.glob("[0-9]*.py")):
        spec = importlib.util.spec_from_file_location(f"exercise_answers_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for number, answers in getattr(module, kind, {}).items():
            found[(file.stem, number)] = answers
    return found


WRONG_ANSWERS = _answers("WRONG_ANSWERS")
# Right answers other than the official solution that the text recommends or allows
# (exercise number -> [(what it does differently, source defining the answer's name)]):
# a check must accept each of them.
RIGHT_ANSWERS = _answers("RIGHT_ANSWERS")

# Grading a student's fork: EXERCISE_CHECKS_FROM=/path/to/your/notebooks takes each check (and the
# chapter's import cell) from your copy of the chapter; only the answers come from this checkout.
CHECKS_FROM = os.environ.get("EXERCISE_CHECKS_FROM")


def checks_source(path):
    """The notebook the checks are read from: this one, or its namesake in EXERCISE_CHECKS_FROM."""
    return pathlib.Path(CHECKS_FROM) / path.name if CHECKS_FROM else path


def covered_chapters():
    return [p for p in chapter_notebooks() if p.name.startswith(COVERED)]


def exercises(path):
    """(number, solution cell, check cell) for each exercise of a notebook."""
    cells = load_notebook(path)["cells"]
    return [
        (number, cells[solution], cells[check])
        for number, solution, check in exercise_checks.exercise_cells({"cells": cells})
    ]


def namespace(path):
    """Where answers are defined: the chapter's imports (the cell that imports the book's package), run in a
    fresh namespace, as in the notebook."""
    names = exercise_checks.answer_namespace(load_notebook(checks_source(path)))
    # Wrong answers below also use these.
    exec(
        "from torch.autograd import Function\n"
        "from torch.autograd.function import once_differentiable\n"
        "from torch.autograd.gradcheck import GradcheckError\n",
        names,
    )
    return names


def load_check(path, number):
    """check_exercise_<number> (and its helpers) defined from the notebook's check cell in a namespace of
    its own, as run_check defines it in the notebook (an exercise_checks.Check: call it on an answer)."""
    check_cell = next(c for n, _, c in exercises(checks_source(path)) if n == number)
    check = exercise_checks.load_check(cell_source(check_cell), f"{path.name}: check {number}")
    assert check.number == number, f"the check cell of exercise {number} checks exercise {check.number}"
    return check


def exercise_ids():
    return [
        (path, number)
        for path in covered_chapters()
        for number, _, _ in exercises(path)
    ]


WRONG = [
    pytest.param(stem, number, wrong, id=f"{stem}-ex{number}-{wrong[0]}")
    for (stem, number), answers in WRONG_ANSWERS.items()
    for wrong in answers
]


def path_of(stem):
    (path,) = [p for p in chapter_notebooks() if p.stem == stem]
    return path


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_every_exercise_names_a_wrong_answer_its_check_rejects(path, number):
    assert WRONG_ANSWERS.get((path.stem, number)), (
        f"{path.name}, exercise {number}: name a plausible wrong answer in tests/test_exercises.py"
    )


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_solution_is_folded_on_the_site_in_jupyter_and_on_colab(path, number):
    solution = next(s for n, s, _ in exercises(path) if n == number)
    metadata = solution["metadata"]
    assert "hide-input" in metadata.get("tags", []), "the site folds cells tagged hide-input"
    assert metadata.get("jupyter", {}).get("source_hidden") is True, "Jupyter folds source_hidden cells"
    assert metadata.get("cellView") == "form", "Colab shows a form instead of the code"
    assert cell_source(solution).startswith("# @title "), "Colab's form view needs a # @title line"


def needs_missing_emulator(stem: str, number: int) -> bool:
    """Chapter 5's exercises 4 and 5 build the reader's CUDA in the SIMT emulator, which needs
    g++ and CUDA's headers; where they are missing the check says so and skips."""
    if (stem, number) not in {("05_cuda_kernel", 4), ("05_cuda_kernel", 5)}:
        return False
    from extending_pytorch import emulator

    return not emulator.available()


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_check_accepts_the_solution(path, number, capsys):
    if needs_missing_emulator(path.stem, number):
        pytest.skip("needs the SIMT emulator (g++ and CUDA's headers)")
    names = namespace(path)
    check = load_check(path, number)
    solution = next(s for n, s, _ in exercises(path) if n == number)
    exec(cell_source(solution), names)
    check(names[check.answer])
    assert f"Exercise {number} passed" in capsys.readouterr().out


def check_and_answer(stem, number, source):
    """The chapter's check of exercise `number`, and the answer `source` defines (skips where the
    check needs the emulator and there is none)."""
    if needs_missing_emulator(stem, number):
        pytest.skip("needs the SIMT emulator (g++ and CUDA's headers)")
    path = path_of(stem)
    names = namespace(path)
    check = load_check(path, number)
    exec(source, names)
    return check, names[check.answer]


@pytest.mark.parametrize("stem, number, wrong", WRONG)
def test_check_rejects_the_named_wrong_answer(stem, number, wrong):
    what, source, error, message = wrong
    check, answer = check_and_answer(stem, number, source)
    with pytest.raises(error, match=message):
        check(answer)


RIGHT = [
    pytest.param(stem, number, right, id=f"{stem}-ex{number}-{right[0]}")
    for (stem, number), answers in RIGHT_ANSWERS.items()
    for right in answers
]


@pytest.mark.parametrize("stem, number, right", RIGHT)
def test_check_accepts_the_named_right_answer(stem, number, right, capsys):
    what, source = right
    check, answer = check_and_answer(stem, number, source)
    check(answer)
    assert f"Exercise {number} passed" in capsys.readouterr().out


# Checks that compare with the official solution replay its outputs, recorded on the check's own inputs
# (extending_pytorch/exercise_records/): test_check_accepts_the_solution above runs them on those records.
RECORDED = [
    (path, number)
    for path in covered_chapters()
    for number, _, check in exercises(path)
    if "solution=recorded(" in cell_source(check)
]


@pytest.mark.parametrize("path, number", RECORDED, ids=[f"{p.stem}-ex{n}" for p, n in RECORDED])
def test_recorded_outputs_are_the_official_solutions_today(path, number):
    stored = json.loads(exercise_checks.records_path(path.stem).read_text())[str(number)]
    current = exercise_checks.record(path)[str(number)]
    changed = sorted(key for key in stored.keys() | current.keys() if stored.get(key) != current.get(key))
    assert not changed, (
        f"{len(changed)} of the {len(current)} recorded outputs are not the official solution's on the check's "
        f"inputs today: run {exercise_checks.RECORD_COMMAND}"
    )


@pytest.fixture
def ipython(tmp_path, monkeypatch):
    """IPython's own shell, as a notebook's kernel runs cells (each cell's source kept in linecache)."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()


def run_cells(shell, *sources):
    """Run cells one after the other, as a reader does; returns the last one's error (None if it passed)."""
    for source in sources:
        result = shell.run_cell(source, store_history=True)
    return result.error_in_exec


@pytest.mark.parametrize("number, wrong", [(1, "rebinds assert_close"), (2, "replaces the check's helper")])
def test_run_check_in_ipython_keeps_the_answer_out_of_the_check(ipython, number, wrong, capsys):
    """The notebook's path: run_check defines the check again from its cell's source, in a namespace of its
    own, so an answer that rebinds the check's names (in its cell, or when the check calls it) fails."""
    path = path_of("01_custom_loss")
    notebook = load_notebook(path)
    _, solution, check = next(e for e in exercises(path) if e[0] == number)
    (what, source, error, message), = [w for w in WRONG_ANSWERS[("01_custom_loss", number)] if wrong in w[0]]
    imports = exercise_checks.import_cell(notebook)
    assert run_cells(ipython, imports, cell_source(solution), cell_source(check)) is None
    assert f"Exercise {number} passed" in capsys.readouterr().out
    failure = run_cells(ipython, source, cell_source(check))
    assert isinstance(failure, error) and re.search(message, str(failure)), failure
