"""Reader profiles: stored outputs hold only what every profile prints (book/setup.md, "Where the book runs").

A cell whose output is a fact of the machine that stored it carries a tag conftest honours
(output-pinned-torch, output-cuda-toolkit); strict nbval compares it only where that fact holds.
make test-oldest runs profile (a) (a CPU torch, no CUDA toolkit) strictly; these tests check, in
seconds, the rules that run relies on.
"""

from __future__ import annotations

import re

import pytest

from conftest import (
    PROFILE_TAGS,
    cell_source,
    chapter_notebooks,
    load_notebook,
    output_compared,
    pinned_torch,
)

# The book's files: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch

CHAPTERS = chapter_notebooks()


@pytest.mark.parametrize(
    "tags, torch_version, toolkit, compared",
    [
        (set(), "2.13.0+cpu", False, True),  # untagged: compared everywhere
        ({"output-pinned-torch"}, f"{pinned_torch()}+cu132", False, True),
        ({"output-pinned-torch"}, f"{pinned_torch()}+cpu", True, True),  # the build's label is not the version
        ({"output-pinned-torch"}, "2.13.0+cpu", True, False),
        ({"output-cuda-toolkit"}, "2.13.0+cpu", True, True),
        ({"output-cuda-toolkit"}, f"{pinned_torch()}", False, False),
        ({"output-pinned-torch", "output-cuda-toolkit"}, f"{pinned_torch()}", False, False),
        ({"output-pinned-torch", "output-cuda-toolkit"}, "2.14.1", True, False),
        ({"output-pinned-torch", "output-cuda-toolkit"}, f"{pinned_torch()}+cu132", True, True),
    ],
)
def test_output_compared(tags, torch_version, toolkit, compared):
    # Catches a tag that switches comparison off everywhere (the checks of profile (b) lost) or nowhere.
    assert output_compared(tags, torch_version=torch_version, has_cuda_toolkit=toolkit) == compared


def code_cells():
    for path in CHAPTERS:
        for index, cell in enumerate(load_notebook(path)["cells"]):
            if cell["cell_type"] == "code":
                yield path.name, index, cell


def stored_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        for mime, data in output.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append("".join(data))
    return "\n".join(parts)


def test_tagged_cells_say_they_show_this_machines_facts():
    # A reader must see that such an output is the machine's, not the book's.
    for name, index, cell in code_cells():
        tags = set(cell["metadata"].get("tags", [])) & set(PROFILE_TAGS)
        if tags:
            assert cell_source(cell).startswith("# This machine's facts:"), (
                f"{name} cell {index} is tagged {sorted(tags)} but does not open with "
                "'# This machine's facts: ...'"
            )


# Outputs that only a machine with the CUDA toolkit prints, and that only the pinned torch prints.
TOOLKIT_FACTS = re.compile(
    r"nvcc compiled|CUDA kernels?, emulated on the CPU|Emulated on the CPU \(|CUDA kernel registered: True"
)
TORCH_FACTS = re.compile(rf"\btorch {re.escape(pinned_torch())}\b")


def test_machine_facts_in_stored_outputs_are_in_tagged_cells():
    # Catches a machine fact stored untagged (chapter 5's "nvcc compiled ... for sm_80, sm_90",
    # the pinned torch's version line): strict nbval fails on a laptop without nvcc or on another torch.
    untagged = []
    for name, index, cell in code_cells():
        text, tags = stored_text(cell), set(cell["metadata"].get("tags", []))
        if "nbval-ignore-output" in tags:
            continue
        if TOOLKIT_FACTS.search(text) and "output-cuda-toolkit" not in tags:
            untagged.append(f"{name} cell {index}: {TOOLKIT_FACTS.search(text)[0]!r}")
        if TORCH_FACTS.search(text) and "output-pinned-torch" not in tags:
            untagged.append(f"{name} cell {index}: {TORCH_FACTS.search(text)[0]!r}")
    assert not untagged, "machine facts stored in cells without a profile tag:\n" + "\n".join(untagged)
