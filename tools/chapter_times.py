"""How long each chapter takes to run, read from the timings its stored run recorded.

    python tools/chapter_times.py                              # print the table
    python tools/chapter_times.py --update book/instructors.md # rewrite the page's table

A notebook executed with timing on stores, in each code cell's metadata, when the kernel
began the cell (`execution` / `iopub.execute_input`) and when it replied
(`shell.execute_reply`): nbclient does so with `record_timing=True` (as `make execute` runs
it), and JupyterLab when its *Record timing* setting is on. A chapter's time is the span from
its first cell's start to its last cell's reply, in the run whose outputs are stored; starting
the kernel is not counted. A chapter whose stored run has no such timings, or timings of only
some cells, is reported as not recorded, never estimated.

The chapters are the notebooks listed in _toc.yml, in its order. The table goes into the page
between the lines `<!-- chapter-times -->` and `<!-- /chapter-times -->`;
tests/test_book.py checks that the page's table is the one this script writes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
START, END = "<!-- chapter-times -->", "<!-- /chapter-times -->"
DEVICE = re.compile(r"^Running on (\w+)", re.MULTILINE)


def toc_chapters(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The notebooks that _toc.yml lists, in its order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[str] = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [
        root / f"{name}.ipynb"
        for name in files
        if name.startswith("notebooks/") and (root / f"{name}.ipynb").is_file()
    ]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def reading_minutes(path: pathlib.Path) -> int:
    """The landing page's reading time, computed by tools/ladder_figure.py's rule."""
    spec = importlib.util.spec_from_file_location("ladder_figure", ROOT / "tools" / "ladder_figure.py")
    ladder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ladder)
    ladder.ROOT = path.parents[1]
    return ladder.reading_minutes(path.stem)


def chapter_timing(path: pathlib.Path) -> dict:
    """The stored run's time: total seconds, the longest cell and its section, the device it printed.

    `seconds` is None when the stored run did not record when each code cell began and ended,
    or when the recorded cells overlap (they were not run one after another, top to bottom).
    """
    cells = json.loads(path.read_text())["cells"]
    section = "(before the first section)"
    spans = []  # (start, end, section) of every code cell that ran
    missing = 0
    device = None
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("## "):
                    section = line[3:].strip()
            continue
        if cell["cell_type"] != "code" or not _source(cell).strip():
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            if device is None and (match := DEVICE.search(text)):
                device = match.group(1)
        execution = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in execution and "shell.execute_reply" in execution:
            start = _time(execution["iopub.execute_input"])
            end = _time(execution["shell.execute_reply"])
            spans.append((start, end, section))
        else:
            missing += 1
    timing = {"seconds": None, "longest": None, "section": None, "device": device}
    one_run = all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    if spans and not missing and one_run:
        timing["seconds"] = (spans[-1][1] - spans[0][0]).total_seconds()
        longest = max(spans, key=lambda span: span[1] - span[0])
        timing["longest"] = (longest[1] - longest[0]).total_seconds()
        timing["section"] = longest[2]
    return timing


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


def render(page: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    """The table of chapter times, with links relative to `page`."""
    rows = [
        "| chapter | time to run | its longest cell | reading time |",
        "| --- | --- | --- | --- |",
    ]
    total, devices, unrecorded = 0.0, set(), []
    for path in toc_chapters(root):
        timing = chapter_timing(path)
        link = os.path.relpath(path.with_suffix(""), page.parent).replace(os.sep, "/")
        if timing["seconds"] is None:
            unrecorded.append(path.stem)
            run = longest = "not recorded"
        else:
            total += timing["seconds"]
            run = duration(timing["seconds"])
            longest = f"{duration(timing['longest'])}, in *{timing['section']}*"
        if timing["device"]:
            devices.add(timing["device"])
        rows.append(f"| {{doc}}`{link}` | {run} | {longest} | {reading_minutes(path)} min |")
    notes = []
    if not unrecorded:
        notes.append(f"All chapters together: {duration(total)}.")
    else:
        notes.append(
            "*Not recorded*: that chapter's stored run kept no cell timings; "
            "`make execute` records them."
        )
    if devices:
        shown = ", ".join(f"`Running on {d}`" for d in sorted(devices))
        notes.append(f"In the stored runs, the chapters that print their device printed {shown}.")
    return "\n".join(rows) + "\n\n" + " ".join(notes) + "\n"


def update(page: pathlib.Path, root: pathlib.Path = ROOT) -> bool:
    """Rewrite the table between the markers of `page`; returns whether it changed."""
    text = page.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"error: {page} has no {START} ... {END} block for the table")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n\n{render(page, root)}\n{END}{tail}"
    page.write_text(new)
    return new != text


def block(page: pathlib.Path) -> str:
    """The table as the page has it now (between the markers)."""
    text = page.read_text()
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", type=pathlib.Path, metavar="PAGE",
                        help="rewrite the table between the markers of PAGE")
    args = parser.parse_args(argv)
    if args.update:
        changed = update(args.update.resolve())
        print(f"{'updated' if changed else 'unchanged'} {args.update}")
        return
    print(render(ROOT / "book" / "instructors.md"), end="")


if __name__ == "__main__":
    main()
