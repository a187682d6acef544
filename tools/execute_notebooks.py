"""Execute notebooks in place, top to bottom in one fresh kernel, as `make execute` does.

    python tools/execute_notebooks.py notebooks            # every chapter
    python tools/execute_notebooks.py notebooks/01_*.ipynb # one chapter

Each notebook runs with its own folder as the working directory (as nbval and Jupyter do),
in a kernel of the Python running this script, and is saved with its new outputs and, in each
code cell's metadata (`execution`), when the cell started and finished. From these,
tools/chapter_times.py computes how long each chapter takes; the table of the instructors' page
(book/instructors.md) is rewritten after every run. A re-run therefore changes every code cell's
timing metadata, not only the outputs that changed.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

# As the Makefile does: without a GPU, torch.utils.cpp_extension logs "No CUDA runtime is found,
# using CUDA_HOME=..." with a time stamp, a fact about this machine, not about the book.
os.environ.setdefault("TORCH_LOGS", "-torch.utils.cpp_extension")
# torch.profiler's library (kineto) logs its start and stop, and, with the CUDA build of torch on a
# machine without a GPU, a failed device count, each line with a time stamp and the process id:
# level 6 keeps them out of the stored outputs (the site hides stderr anyway).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def chapter_notebooks(args: list[str]) -> list[pathlib.Path]:
    paths: list[pathlib.Path] = []
    for arg in args:
        path = pathlib.Path(arg)
        if path.is_dir():
            # Chapters are NN_topic.ipynb; files starting with "_" (templates) are not executed.
            paths.extend(sorted(p for p in path.glob("[0-9]*.ipynb")))
        elif path.suffix == ".ipynb" and path.is_file():
            paths.append(path)
        else:
            raise SystemExit(
                f"error: expected a notebook or a folder of notebooks, got {arg!r}"
            )
    return paths


def execute(path: pathlib.Path, timeout: int = 1800) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=True,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    start = time.perf_counter()
    client.execute()
    nbformat.write(notebook, path)
    print(f"executed {path} in {time.perf_counter() - start:.0f} s")


def main() -> None:
    paths = chapter_notebooks(sys.argv[1:] or ["notebooks"])
    if not paths:
        raise SystemExit("error: no notebooks found")
    for path in paths:
        execute(path)
    # The instructors' page shows how long each chapter took in its stored run.
    import chapter_times  # tools/, beside this script

    chapter_times.update(chapter_times.ROOT / "book" / "instructors.md")


if __name__ == "__main__":
    main()
