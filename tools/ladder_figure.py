"""Draw the ladder of chapters for the landing page: book/images/ladder.svg.

    python tools/ladder_figure.py [OUTPUT]

Reading times are computed from the notebooks, for a reader who runs the cells:
the words of prose at 200 a minute, the lines of code a reader meets (code cells
not folded away, and the source files the chapter displays) at 20 a minute, and
the time the chapter's stored run took (tools/chapter_times.py). The figure
changes when a chapter does; tests/test_book.py checks that the committed figure
is up to date.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20
RUNGS = [
    (
        "01_custom_loss",
        "tensor ops in an nn.Module",
        "autograd gives the backward",
        "CPU · Colab · GPU",
    ),
    (
        "02_numpy_scipy_function",
        "numpy / scipy in a Function",
        "custom_op keeps torch.compile",
        "CPU · Colab",
    ),
    ("03_handwritten_backward", "a hand-written backward", "gradcheck · torch.func", "CPU · Colab"),
    (
        "04_cpp_extension",
        "a C++ operator",
        "TORCH_LIBRARY · opcheck · torch.compile",
        "CPU + compiler · Colab",
    ),
    ("05_cuda_kernel", "a CUDA kernel", "same operator on the GPU", "GPU · Colab GPU"),
]
# Beyond the ladder: the same kernel in Triton, the operator shipped, and a paper's operator ported.
BEYOND = [
    ("06_triton_kernel", "6. the kernel in Triton", "interpreter on CPU · GPU"),
    ("07_shipping_operator", "7. shipping the operator", "CPU + compiler"),
    ("08_involution", "8. a paper's op, ported", "CPU + compiler · GPU"),
]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def reading_counts(notebook: str) -> dict:
    """What the reading time is made of: prose words, code lines read, seconds to run."""
    path = ROOT / "notebooks" / f"{notebook}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    words = code = 0
    for cell in cells:
        if cell["cell_type"] == "markdown":
            words += len(_text(cell["source"]).split())
        elif cell["cell_type"] == "code":
            if "hide-input" not in cell.get("metadata", {}).get("tags", []):
                code += _lines(_text(cell["source"]))
            if "show_source" in _text(cell["source"]):  # a listing of a file the reader reads
                for output in cell.get("outputs", []):
                    code += _lines(_text(output.get("data", {}).get("text/markdown", "")))
    spec = importlib.util.spec_from_file_location("chapter_times", pathlib.Path(__file__).with_name("chapter_times.py"))
    chapter_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chapter_times)
    seconds = chapter_times.chapter_timing(path)["seconds"] or 0.0
    return {"words": words, "code_lines": code, "run_seconds": seconds}


def reading_minutes(notebook: str) -> int:
    counts = reading_counts(notebook)
    minutes = (
        counts["words"] / WORDS_PER_MINUTE
        + counts["code_lines"] / CODE_LINES_PER_MINUTE
        + counts["run_seconds"] / 60
    )
    return max(5, 5 * math.ceil(minutes / 5))  # rounded up to 5 minutes


def draw(output: pathlib.Path) -> None:
    plt.rcParams["svg.hashsalt"] = "ladder"  # stable ids: the same figure gives the same file
    fig, axis = plt.subplots(figsize=(9, 5.4))
    axis.set(xlim=(0, 10), ylim=(0, 8.2))
    axis.axis("off")
    colors = plt.cm.viridis([0.15, 0.35, 0.55, 0.72, 0.88])
    for rung, ((name, what, adds, runs), color) in enumerate(zip(RUNGS, colors)):
        y = 0.3 + rung * 1.15
        x = 0.2 + rung * 0.55
        axis.add_patch(
            FancyBboxPatch(
                (x, y),
                6.4,
                0.9,
                boxstyle="round,pad=0.02",
                facecolor=color,
                edgecolor="none",
                alpha=0.9,
            )
        )
        text_color = "white" if rung < 3 else "black"
        axis.text(
            x + 0.2,
            y + 0.58,
            f"{rung + 1}. {what}",
            color=text_color,
            fontsize=11,
            fontweight="bold",
            va="center",
        )
        axis.text(x + 0.2, y + 0.25, adds, color=text_color, fontsize=9, va="center")
        axis.text(x + 6.6, y + 0.58, f"~{reading_minutes(name)} min", fontsize=9, va="center")
        axis.text(x + 6.6, y + 0.25, runs, fontsize=8, va="center", color="dimgray")
    axis.text(0.2, 7.85, "Beyond the ladder", fontsize=10, fontweight="bold", color="dimgray")
    for i, (name, what, runs) in enumerate(BEYOND):
        x, y = 0.2 + i * 3.27, 6.6
        axis.add_patch(
            FancyBboxPatch(
                (x, y),
                3.07,
                0.9,
                boxstyle="round,pad=0.02",
                facecolor="white",
                edgecolor=plt.cm.viridis(0.5),
                linewidth=1.5,
            )
        )
        axis.text(x + 0.15, y + 0.58, what, fontsize=9, fontweight="bold", va="center")
        axis.text(
            x + 0.15,
            y + 0.25,
            f"~{reading_minutes(name)} min · {runs}",
            fontsize=7,
            va="center",
            color="dimgray",
        )
    axis.set_title("One operator, five rungs: each checked against the one before", fontsize=12)
    fig.savefig(output, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(
        pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "book" / "images" / "ladder.svg"
    )
