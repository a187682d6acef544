"""Exercises a learner can trust: each check accepts the solution and rejects a named wrong answer.

The checks are taken from the notebooks themselves (the cell that defines `check_exercise_N`), run in
a namespace prepared by the chapter's import cell, against the chapter's folded solution and against
the plausible wrong answers below. A check that let one of them through would make a learner believe
a wrong answer.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re

import pytest
from torch.autograd.gradcheck import GradcheckError

from conftest import cell_source, chapter_notebooks, load_notebook

# The checks and the answers are the same code on every torch; each chapter's own solution runs
# through its check in the notebook, on the oldest torch too (make test-oldest).
pytestmark = pytest.mark.same_on_every_torch

# Chapters whose exercises must each name a wrong answer here (the others are added as they adopt the form).
COVERED = ("01_", "02_", "03_", "04_", "05_", "06_", "07_", "08_", "90_", "91_")

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


CHECK = re.compile(r"^def (check_exercise_(\d+))\(", re.MULTILINE)


def covered_chapters():
    return [p for p in chapter_notebooks() if p.name.startswith(COVERED)]


def exercises(path):
    """(number, solution cell, check cell) for each exercise of a notebook."""
    cells = load_notebook(path)["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and (match := CHECK.search(cell_source(cell))):
            found.append((int(match.group(2)), cells[index - 1], cell))
    return found


def namespace(path):
    """The chapter's imports (the cell that imports the book's package), run in a fresh namespace."""
    cells = load_notebook(checks_source(path))["cells"]
    imports = next(
        cell_source(c) for c in cells
        if c["cell_type"] == "code" and "import extending_pytorch as ep" in cell_source(c)
    )
    names = {"__name__": "exercise_check"}
    exec(imports, names)
    # Wrong answers below also use these.
    exec(
        "from torch.autograd import Function\n"
        "from torch.autograd.function import once_differentiable\n"
        "from torch.autograd.gradcheck import GradcheckError\n",
        names,
    )
    return names


def load_check(path, number, names):
    """Define check_exercise_<number> (and its helpers) from the notebook; returns (check, answer name)."""
    check_cell = next(c for n, _, c in exercises(checks_source(path)) if n == number)
    module = ast.parse(cell_source(check_cell))
    *definitions, call = module.body
    assert isinstance(call, ast.Expr) and ast.unparse(call.value.func) == f"check_exercise_{number}", (
        "a check cell ends by calling its check on the solution"
    )
    exec(compile(ast.Module(definitions, type_ignores=[]), str(path), "exec"), names)
    return names[f"check_exercise_{number}"], ast.unparse(call.value.args[0])


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
    check, answer = load_check(path, number, names)
    solution = next(s for n, s, _ in exercises(path) if n == number)
    exec(cell_source(solution), names)
    check(names[answer])
    assert f"Exercise {number} passed" in capsys.readouterr().out


def check_and_answer(stem, number, source):
    """The chapter's check of exercise `number`, and the answer `source` defines (skips where the
    check needs the emulator and there is none)."""
    if needs_missing_emulator(stem, number):
        pytest.skip("needs the SIMT emulator (g++ and CUDA's headers)")
    path = path_of(stem)
    names = namespace(path)
    check, answer = load_check(path, number, names)
    exec(source, names)
    return check, names[answer]


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
