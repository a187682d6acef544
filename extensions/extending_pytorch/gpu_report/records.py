"""The report's records: written as JSON and Markdown, read and rendered by the pages.

A record is one run of the report on one machine. The pages show every
record of `REPORT_DIR` that ran on a GPU, each in tables of its own with its
provenance in the caption: GPU figures are never mixed with CPU or emulated
ones. A record whose `kind` is "transcribed" holds figures copied by hand
from a GPU run made outside the report (its `source` says which); the pages
label it so.
"""

from __future__ import annotations

import json
import pathlib
import re

from extending_pytorch.bench import MINIMUM_TRAFFIC_ELEMENTS
from extending_pytorch.display import REPO_ROOT, Table

SCHEMA = "extending_pytorch.gpu_report/1"
REPORT_DIR = REPO_ROOT / "notebooks" / "data" / "gpu"
# Where a run without a GPU writes, unless told otherwise: a build product.
NO_GPU_DIR = REPO_ROOT / "_build" / "gpu-report"
COLUMNS = {"eager": "eager", "compile": "torch.compile", "cpp": "CUDA operator",
           "cpp grad_in_forward": "CUDA operator, grad_in_forward", "triton": "Triton",
           "helion": "Helion"}
ELEMENT_SIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def file_stem(report: dict) -> str:
    """date, time, GPU, torch: 2026-11-26-1432-nvidia-h200-torch-2.11.0-cu130.

    A transcribed record has a date without a time: 2026-11-26-...-transcribed.
    """
    p = report["provenance"]
    gpu = p["gpus"][0]["name"] if p["gpus"] else "no-gpu"
    when = p["date"][:10]
    if len(p["date"]) > 10:
        when += f"-{p['date'][11:13]}{p['date'][14:16]}"
    kind = "-transcribed" if report.get("kind") == "transcribed" else ""
    return f"{when}-{_slug(gpu)}-torch-{_slug(p['torch'])}{kind}"


def where(report: dict) -> str:
    """One line of provenance, for a caption."""
    p = report["provenance"]
    if p["gpus"]:
        g = p["gpus"][0]
        gpu = f"{g['name']} (driver {g.get('driver') or 'unknown'})"
    else:
        gpu = "no GPU"
    commit = p.get("commit") or "unknown"
    if p.get("dirty"):
        commit += " with uncommitted changes"
    line = (f"{gpu}, torch {p['torch']} (CUDA {p.get('torch_cuda')}), "
            f"triton {p.get('triton') or 'not installed'}, commit {commit}, {p['date'][:10]}")
    if report.get("kind") == "transcribed":
        line += f"; transcribed by hand from {report['source']}"
    else:
        line += f"; `{p['command']}`"
    return line


def write(report: dict, directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The record as STEM.json and STEM.md in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = file_stem(report)  # has dots (torch's version): no with_suffix
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path


def load_reports(directory: pathlib.Path = REPORT_DIR, *, gpu_only: bool = True) -> list[dict]:
    """Every record in `directory`, oldest first; by default those made on a GPU."""
    reports = []
    for path in sorted(pathlib.Path(directory).glob("*.json")):
        report = json.loads(path.read_text())
        if report.get("schema") != SCHEMA:
            raise ValueError(f"{path.name}: not a GPU report record (schema {report.get('schema')!r})")
        if gpu_only and not report["provenance"]["gpus"]:
            continue
        report["file"] = path.name
        reports.append(report)
    return sorted(reports, key=lambda r: r["provenance"]["date"])


def _benchmark_records(report, dtype=None, task=None):
    bench = report.get("benchmark") or {}
    return [r for r in bench.get("records", [])
            if (dtype is None or r.get("dtype", "float32") == dtype)
            and (task is None or r["task"] == task)]


def dtypes(report: dict) -> list[str]:
    return list(dict.fromkeys(r.get("dtype", "float32") for r in _benchmark_records(report)))


def report_table(report: dict, dtype: str = "float32", task: str = "forward+backward",
                 implementations=tuple(COLUMNS)) -> Table:
    """Median microseconds per implementation and size, with the fraction of copy.

    The fraction is the task's minimum traffic (bench.MINIMUM_TRAFFIC_ELEMENTS
    elements of B x D) over the time, divided by the copy bandwidth measured in
    the same run; records without a copy bandwidth show the time alone.
    """
    records = [r for r in _benchmark_records(report, dtype, task) if r["implementation"] in implementations]
    names = [n for n in COLUMNS if any(r["implementation"] == n for r in records)]
    sizes = list(dict.fromkeys((r["batch"], r["dim"]) for r in records))
    at = {(r["implementation"], r["batch"], r["dim"]): r for r in records}
    rows = []
    for batch, dim in sizes:
        row = [batch, dim]
        for name in names:
            r = at.get((name, batch, dim))
            if r is None:
                row.append("—")
                continue
            text = f"{r['seconds'] * 1e6:,.0f}"
            if r.get("fraction_of_copy") is not None:
                text += f" ({r['fraction_of_copy']:.2f})"
            row.append(text)
        copy = next((at[n, batch, dim].get("copy_gbps") for n in names if (n, batch, dim) in at), None)
        row.append(f"{copy:,.0f}" if copy else "—")
        rows.append(row)
    caption = f"{task}, {dtype}: median µs"
    if any(r.get("fraction_of_copy") is not None for r in records):
        minimum = MINIMUM_TRAFFIC_ELEMENTS[task]
        caption += (f" (in brackets: {minimum} B·D elements of minimum traffic / time / the copy "
                    "bandwidth measured in the same run)")
    caption += f". {where(report)}"
    return Table(["B", "D", *(COLUMNS[n] + " µs" for n in names), "copy GB/s"], rows, caption=caption)


def dram_table(report: dict) -> Table | None:
    """Nsight Compute's DRAM bytes per kernel, in units of N = B·D·element size."""
    profiles = report.get("dram") or []
    if not profiles:
        return None
    rows = []

    def in_n(value, n):  # "—" where a count was not recorded
        return "—" if value is None else f"{value / n:.2f}"

    for profile in profiles:
        n = profile["batch"] * profile["dim"] * profile["element_size"]
        name = COLUMNS.get(profile["implementation"], profile["implementation"])
        for k in profile["kernels"]:
            seconds = k.get("seconds")
            rows.append([name, k["kernel"], in_n(k.get("bytes_read"), n),
                         in_n(k.get("bytes_written"), n),
                         "—" if seconds is None else f"{seconds * 1e6:,.0f}"])
        read = sum(k.get("bytes_read") or 0 for k in profile["kernels"])
        written = sum(k.get("bytes_written") or 0 for k in profile["kernels"])
        rows.append([name, "total", in_n(read, n), in_n(written, n), ""])
    first = profiles[0]
    caption = (f"DRAM bytes of one forward + backward at B x D = {first['batch']} x {first['dim']}, "
               f"{first.get('dtype', 'float32')}, in N = B·D·element size; Nsight Compute. {where(report)}")
    return Table(["implementation", "kernel", "read (N)", "written (N)", "µs"], rows, caption=caption,
                 text_columns=(1,))


def steps_table(report: dict) -> Table:
    """Each step: what it checks, its status, and what it said."""
    rows = []
    for step in report["steps"]:
        said = step.get("summary") or step.get("reason") or ""
        seconds = step.get("seconds")
        rows.append([step["name"], step["status"], "—" if seconds is None else f"{seconds:.0f}", said])
    return Table(["step", "status", "s", "result"], rows, caption=where(report), text_columns=(1, 3))


def plot_fraction_of_copy(report: dict, task: str = "forward+backward"):
    """A figure: fraction of the copy bandwidth against the data's size, per dtype.

    One line per implementation; x is the bytes of the three inputs.
    """
    import matplotlib.pyplot as plt

    kinds = [d for d in dtypes(report)
             if any(r.get("fraction_of_copy") is not None for r in _benchmark_records(report, d, task))]
    if not kinds:
        raise ValueError("this record has no fraction of the copy bandwidth to plot")
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds) + 1, 3.4),
                             constrained_layout=True, squeeze=False, sharey=True)
    for axis, dtype in zip(axes[0], kinds):
        records = _benchmark_records(report, dtype, task)
        for name in COLUMNS:
            mine = sorted((r for r in records if r["implementation"] == name),
                          key=lambda r: r["batch"] * r["dim"])
            if mine:
                size = [3 * r["batch"] * r["dim"] * ELEMENT_SIZE[dtype] / 1e6 for r in mine]
                axis.plot(size, [r["fraction_of_copy"] for r in mine], marker="o", label=COLUMNS[name])
        axis.axhline(1.0, color="gray", linestyle="--", linewidth=1)
        axis.set(xscale="log", xlabel="inputs (MB)", title=f"{task}, {dtype}")
    axes[0][0].set_ylabel("minimum traffic / time\n/ copy bandwidth")
    axes[0][-1].legend(fontsize=8)
    gpu = report["provenance"]["gpus"][0]["name"]
    fig.suptitle(f"{gpu}, torch {report['provenance']['torch']}, {report['provenance']['date'][:10]}",
                 fontsize=9)
    return fig


def _markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in table.rows]
    return "\n".join(lines) + f"\n\n{table.caption}\n"


def markdown(report: dict) -> str:
    """The record as a page a person reads (the JSON is for the book's pages)."""
    p = report["provenance"]
    gpu = p["gpus"][0]["name"] if p["gpus"] else "no GPU"
    out = [f"# GPU report: {gpu}, {p['date'][:10]}", ""]
    for key in ("date", "command", "torch", "torch_cuda", "nvcc", "triton", "helion", "python",
                "platform", "processor", "cpu_count", "commit", "dirty"):
        if p.get(key) is not None:
            out.append(f"- {key}: {p[key]}")
    for g in p["gpus"]:
        memory = f", {g['memory_gib']} GiB" if g.get("memory_gib") is not None else ""
        out.append(f"- GPU: {g['name']}, compute capability {g['capability']}{memory}, "
                   f"driver {g.get('driver')}")
    if not p["gpus"]:
        out += ["", "**No CUDA device was found: nothing was measured.** Every step below says why it was skipped."]
    out += ["", "## Steps", "", _markdown_table(steps_table(report))]
    for dtype in dtypes(report):
        for task in ("forward+backward", "forward"):
            if _benchmark_records(report, dtype, task):
                out += [f"## Benchmark: {task}, {dtype}", "", _markdown_table(report_table(report, dtype, task))]
    table = dram_table(report)
    if table is not None:
        out += ["## DRAM bytes (Nsight Compute)", "", _markdown_table(table)]
    out += helion_lines(report)
    if report.get("notes"):
        out += ["## Notes", ""] + [f"- {note}" for note in report["notes"]] + [""]
    return "\n".join(out)


def helion_lines(report: dict) -> list[str]:
    """What Helion's autotuner chose, and which configs the sweep ran: Markdown lines."""
    tuned = report.get("helion_configs")
    swept = (report.get("benchmark") or {}).get("helion_configs")
    if not tuned and not swept:
        return []
    out = ["## Helion's configs", ""]
    if tuned:
        out.append(f"- autotuned once (effort {tuned['effort']!r}) at {tuned['batch']} x {tuned['dim']} "
                   f"{tuned['dtype']}, in {tuned['seconds']:.0f} s")
        for kernel in ("forward", "backward"):
            chosen = tuned.get(kernel)
            out.append(f"- {kernel}: " + (f"`{json.dumps(chosen, sort_keys=True)}`" if chosen else "not tuned (stopped)"))
    if swept:
        out.append(f"- the sweep's Helion kernels: {swept}")
    return out + [""]


class RecordsView:
    """Every GPU record, each under a heading with its tables and notes: what the pages show.

    `parts` picks the tables: "steps", "benchmark" (one per dtype, forward +
    backward) and "dram". HTML in Jupyter and on the site, text elsewhere.
    """

    def __init__(self, reports: list[dict], parts=("steps", "benchmark", "dram"),
                 implementations=tuple(COLUMNS)) -> None:
        self.reports = reports
        self.parts = parts
        self.implementations = implementations

    def sections(self) -> list[tuple[str, list[Table]]]:
        found = []
        for report in self.reports:
            p = report["provenance"]
            title = f"{p['gpus'][0]['name']}, torch {p['torch']}, {p['date'][:10]}"
            if report.get("kind") == "transcribed":
                title += " (transcribed from a run outside the report)"
            tables = []
            if "steps" in self.parts:
                tables.append(steps_table(report))
            if "benchmark" in self.parts:
                for dtype in dtypes(report):
                    tables.append(report_table(report, dtype, implementations=self.implementations))
            if "dram" in self.parts and dram_table(report) is not None:
                tables.append(dram_table(report))
            found.append((title, tables))
        return found

    def __str__(self) -> str:
        if not self.reports:
            return "No GPU record in notebooks/data/gpu/ yet: run make gpu-report on a machine with a GPU."
        out = []
        for report, (title, tables) in zip(self.reports, self.sections()):
            out += [title, "=" * len(title)] + [str(t) + "\n" for t in tables]
            out += [f"- {note}" for note in report.get("notes", [])]
        return "\n".join(out)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html

        if not self.reports:
            return f"<p>{html.escape(str(self))}</p>"
        out = []
        for report, (title, tables) in zip(self.reports, self.sections()):
            out.append(f"<p><strong>{html.escape(title)}</strong></p>")
            out += [t._repr_html_() for t in tables]
            if report.get("notes"):
                items = "".join(f"<li>{html.escape(note)}</li>" for note in report["notes"])
                out.append(f"<p>Notes of this record:</p><ul>{items}</ul>")
        return "\n".join(out)


def has_fractions(report: dict) -> bool:
    """Whether the record has the fraction of the copy bandwidth (a plot to draw)."""
    return any(r.get("fraction_of_copy") is not None for r in _benchmark_records(report))
