"""Reading what the steps' tools print: pytest, compute-sanitizer, Nsight Compute.

Pure functions of text, so they are tested without a GPU on samples of each
tool's output.
"""

from __future__ import annotations

import csv
import io
import re

# Nsight Compute's metrics for the bytes each kernel moves to and from DRAM,
# and its duration.
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")

_BYTE_UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
               "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30}
# Nsight Compute 2025 prints "ns" (seen on an H200); earlier releases, "nsecond".
_TIME_UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
               "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def pytest_summary(output: str) -> str:
    """pytest's closing line ("12 passed, 3 skipped in 4.2s"), or ''."""
    for line in reversed(output.splitlines()):
        line = line.strip().strip("=").strip()
        if re.search(r"\b\d+ (passed|failed|error|errors|skipped|deselected)\b", line):
            return line
    return ""


def sanitizer_summary(output: str) -> str:
    """compute-sanitizer's closing line ("ERROR SUMMARY: 0 errors"), or ''.

    racecheck also prints "RACECHECK SUMMARY: N hazards displayed (...)";
    both are kept when present.
    """
    found = re.findall(r"=+\s*((?:RACECHECK |ERROR )SUMMARY: [^\n]*)", output)
    return "; ".join(dict.fromkeys(s.strip() for s in found))


def sanitizer_errors(output: str) -> int | None:
    """The error count of compute-sanitizer's summary, None without one."""
    match = re.search(r"ERROR SUMMARY: (\d+) error", output)
    return int(match.group(1)) if match else None


def _to_base(value: str, unit: str) -> float:
    number = float(value.replace(",", ""))
    unit = unit.strip().lower()
    if unit in _BYTE_UNITS:
        return number * _BYTE_UNITS[unit]
    if unit in _TIME_UNITS:
        return number * _TIME_UNITS[unit]
    if unit in ("", "n/a"):
        return number
    raise ValueError(f"unknown Nsight Compute unit {unit!r}")


def ncu_kernels(output: str) -> list[dict]:
    """Per profiled kernel: name, bytes read and written in DRAM, seconds.

    `output` is what `ncu --csv --metrics ...` prints: the program's own
    lines, ncu's "==PROF==" lines, then a CSV table with one row per kernel
    and metric ("ID", ..., "Kernel Name", ..., "Metric Name", "Metric Unit",
    "Metric Value"). Kernels come in launch order.
    """
    lines = output.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(table))):
        kernel = kernels.setdefault(
            row["ID"], dict(id=int(row["ID"]), kernel=row["Kernel Name"])
        )
        value = _to_base(row["Metric Value"], row.get("Metric Unit", ""))
        key = {
            "dram__bytes_read.sum": "bytes_read",
            "dram__bytes_write.sum": "bytes_written",
            "gpu__time_duration.sum": "seconds",
        }.get(row["Metric Name"])
        if key:
            kernel[key] = value
    return sorted(kernels.values(), key=lambda k: k["id"])


def short_kernel_name(name: str) -> str:
    """A kernel's name without its template arguments and parameter list."""
    name = re.sub(r"^void ", "", name)
    depth, kept = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    return "".join(kept).split("::")[-1].strip() or name
