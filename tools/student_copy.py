"""Write the chapters without their solutions, for a course repository.

    python3 tools/student_copy.py DEST    (or: make student-copy DEST=dir)

Writes DEST/NN_topic.ipynb for every chapter of notebooks/. In each one:

- every exercise's solution cell becomes a stub the reader fills in, shown unfolded: each function
  and method of the solution keeps its name and arguments, and raises NotImplementedError with a
  message naming the exercise (a class keeps its attributes set to a constant, which the exercise
  states); a value the check is given (a C++ or CUDA source, say) is `NotImplemented`, which the
  check reports as not written yet;
- every code cell's outputs, execution count and timing are cleared;
- the sentences that say where the folded solution is (`FOLDED_SOLUTION`) say where the stub is;
- everything else, the check cells included, is the book's, unchanged.

The checks need no solution code: each defines itself from its own cell (run_check); a check that
compares with the official solution reads its outputs recorded on the check's inputs, in
extensions/extending_pytorch/exercise_records/, which the course repository carries with the package.
Needs only Python's standard library: no torch, no Jupyter.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _exercises_module():
    """extending_pytorch/exercises.py, loaded on its own: importing the package would import torch."""
    path = ROOT / "extensions" / "extending_pytorch" / "exercises.py"
    spec = importlib.util.spec_from_file_location("_book_exercises", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


exercises = _exercises_module()


def _stub_function(node: ast.FunctionDef | ast.AsyncFunctionDef, message: str, indent: str) -> list[str]:
    lines = [f"{indent}@{ast.unparse(decorator)}" for decorator in node.decorator_list]
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    lines.append(f"{indent}def {node.name}({ast.unparse(node.args)}){returns}:")
    lines.append(f"{indent}    raise NotImplementedError({json.dumps(message)})")
    return lines


def stub(solution: str, number: int) -> str:
    """The stub that replaces an exercise's solution cell: its names, and no line of its code."""
    message = f"Exercise {number}: write your answer in this cell, then run the check below"
    lines = [f"# @title Exercise {number}: your answer", "# Replace the stub below with your answer."]
    for node in ast.parse(solution).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines += ["", ""] + _stub_function(node, message, "")
        elif isinstance(node, ast.ClassDef):
            lines += ["", ""] + [f"@{ast.unparse(d)}" for d in node.decorator_list]
            bases = ", ".join(ast.unparse(b) for b in [*node.bases, *node.keywords])
            lines.append(f"class {node.name}({bases}):" if bases else f"class {node.name}:")
            # Class attributes set to a constant are declarations the exercise states (generate_vmap_rule
            # = True): without them the stub would fail its check for another reason than being a stub.
            constants = [a for a in node.body if isinstance(a, ast.Assign) and isinstance(a.value, ast.Constant)]
            lines += [f"    {ast.unparse(a)}" for a in constants] + ([""] if constants else [])
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for index, method in enumerate(methods):
                lines += ([""] if index else []) + _stub_function(method, message, "    ")
            if not methods and not constants:
                lines.append("    pass")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                lines += ["", f"{ast.unparse(target)} = NotImplemented  # your answer here"]
    return "\n".join(lines) + "\n"


def clear_outputs(cell: dict) -> None:
    if cell["cell_type"] == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
        cell["metadata"].pop("execution", None)  # when the book's run started and ended the cell


def unfold(cell: dict) -> None:
    """Show the stub: the book folds its solution cells on the site, in Jupyter and on Colab."""
    metadata = cell["metadata"]
    tags = [tag for tag in metadata.get("tags", []) if tag != "hide-input"]
    if tags:
        metadata["tags"] = tags
    else:
        metadata.pop("tags", None)
    metadata.get("jupyter", {}).pop("source_hidden", None)
    if not metadata.get("jupyter", True):
        metadata.pop("jupyter")
    metadata.pop("cellView", None)


# The chapters' sentences that tell the reader where the official solution is folded, and
# what the copy says instead, where each stub stands in for it.
def _words(sentence: str) -> str:
    # A sentence as a pattern that matches it across the cell's line breaks.
    return r"\s+".join(re.escape(word) for word in sentence.split())


FOLDED_SOLUTION = re.compile(
    _words("The solution sits in a folded cell just above its check") + r"[^.]*\."
    + r"(?:\s+" + _words("Write your answer in a new cell below it, run it, then run the check.") + ")?"
    + "|" + _words("The solutions are folded: try first, then compare.")
)
STUB_SENTENCE = ("In this copy, the cell just above each check holds a stub that raises NotImplementedError: "
                 "replace it with your answer, run it, then run the check.")


def reword(cell: dict) -> None:
    """A markdown cell's sentences about the folded solutions, said of the stubs instead."""
    if cell["cell_type"] == "markdown":
        text = "".join(cell["source"])
        reworded = FOLDED_SOLUTION.sub(STUB_SENTENCE, text)
        if reworded != text:
            cell["source"] = reworded.splitlines(keepends=True)


def student_notebook(notebook: dict) -> dict:
    """A copy of `notebook` without solutions and without outputs."""
    notebook = json.loads(json.dumps(notebook))
    for number, solution, _ in exercises.exercise_cells(notebook):
        cell = notebook["cells"][solution]
        source = exercises.cell_source(cell)
        if not source.startswith(exercises.SOLUTION_TITLE):
            raise SystemExit(f"error: exercise {number}'s solution cell does not start with {exercises.SOLUTION_TITLE!r}")
        cell["source"] = stub(source, number).splitlines(keepends=True)
        unfold(cell)
    for cell in notebook["cells"]:
        clear_outputs(cell)
        reword(cell)
    return notebook


def chapters(source: pathlib.Path = NOTEBOOKS) -> list[pathlib.Path]:
    """The chapters: NN_topic.ipynb (a name starting with '_', the template, is not one)."""
    return sorted(p for p in source.glob("*.ipynb") if not p.name.startswith("_"))


def write_copy(destination: pathlib.Path, source: pathlib.Path = NOTEBOOKS) -> list[pathlib.Path]:
    if destination.resolve() == source.resolve():
        raise SystemExit(f"error: DEST is {source} itself, whose solutions the copy would overwrite: name another folder")
    destination.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapters(source):
        notebook = student_notebook(json.loads(path.read_text()))
        target = destination / path.name
        target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        written.append(target)
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("destination", type=pathlib.Path, help="the folder to write the notebooks to")
    args = parser.parse_args(argv)
    written = write_copy(args.destination)
    count = sum(len(exercises.exercise_cells(json.loads(p.read_text()))) for p in written)
    print(f"wrote {len(written)} notebooks with {count} exercises to answer to {args.destination}")


if __name__ == "__main__":
    main()
