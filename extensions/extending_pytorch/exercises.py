"""Exercise checks that an answer cannot change, and the official solutions' recorded outputs.

Every chapter's exercise is two cells: a folded solution cell, then a check cell that defines
`check_exercise_N` (and its helpers) and ends with `run_check(check_exercise_N, answer)`.

**The check's own namespace.** A notebook runs every cell in one namespace, so an answer that ran
before the check (or runs inside it, when the check calls it) could rebind the names the check looks
up there: its helpers, `assert_close`, the reference, `check_exercise_N` itself. `run_check` therefore
runs the check cell's source again, in a fresh namespace that only that source fills (the check cell
imports what it uses), and calls the `check_exercise_N` defined there, with the answer passed in as
an argument. The answer can no longer reach any name the check uses, before or during the check.
What it still can, since Python offers no sandbox: change a module everything shares (monkeypatch
`torch.testing.assert_close`, `extending_pytorch`, `builtins`, `linecache`), walk up the stack from
inside the check (`sys._getframe(1).f_globals` is the check's namespace) or find objects through
`gc`. Those are deliberate attacks, not slips; grading runs a student's code, so run it in a
container (book/instructors.md).

**Recorded outputs.** A check that compares with the official solution takes a second argument,
`solution`, and the check cell passes `solution=recorded("NN_topic", N)`: the official solution's
outputs on the check's own inputs, recorded in `exercise_records/NN_topic.json` beside this module.
So the check works where the solution's code is not there (a student copy, `make student-copy`),
and the check cell does not show the solution either. `record()` runs each such check on the
official solution to write the file, and `tests/test_exercises.py` fails when the file is stale.

This module imports only the standard library at import time (torch inside the functions that need
it): `tools/student_copy.py` reads notebooks with it where torch is not installed.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import inspect
import io
import json
import linecache
import pathlib
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

RECORDS_DIR = pathlib.Path(__file__).resolve().parent / "exercise_records"
RECORD_COMMAND = "python -m extending_pytorch.exercises record notebooks/NN_topic.ipynb"

CHECK_DEFINITION = re.compile(r"^def (check_exercise_(\d+))\(", re.MULTILINE)
SOLUTION_TITLE = "# @title Solution to exercise"
IMPORT_CELL_MARK = "import extending_pytorch as ep"


# ---- Notebooks: where the exercises are -------------------------------------------------------


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def exercise_cells(notebook: dict) -> list[tuple[int, int, int]]:
    """(number, index of the solution cell, index of the check cell) for each exercise of a notebook."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code" and (match := CHECK_DEFINITION.search(cell_source(cell))):
            found.append((int(match.group(2)), index - 1, index))
    return found


def import_cell(notebook: dict) -> str:
    """The source of the chapter's import cell (the first code cell that imports the book's package)."""
    return next(
        cell_source(c) for c in notebook["cells"]
        if c["cell_type"] == "code" and IMPORT_CELL_MARK in cell_source(c)
    )


# ---- A check, defined in a namespace of its own -----------------------------------------------


@dataclass
class Check:
    """A check cell's `check_exercise_N`, defined from the cell's source in a fresh namespace."""

    number: int
    function: Callable
    answer: str  # the expression the cell passes as the answer, e.g. "pages"
    solution: str | None  # the expression passed as solution=, e.g. 'recorded("90_x", 1)', or None
    namespace: dict

    def __call__(self, answer, solution=None):
        """Run the check on `answer`; a check that takes `solution` gets `solution`, else the cell's."""
        if answer is NotImplemented:
            raise NotImplementedError(
                f"Exercise {self.number}: {self.answer} is not written yet: replace the stub in the cell "
                "above with your answer, run it, then run this check"
            )
        if self.solution is None:
            return self.function(answer)
        if solution is None:
            solution = eval(self.solution, self.namespace)  # noqa: S307 (the check cell's own expression)
        return self.function(answer, solution)


def load_check(source: str, filename: str = "<exercise check>") -> Check:
    """Define a check cell's `check_exercise_N` in a fresh namespace, from the cell's `source`.

    The cell ends with `run_check(check_exercise_N, answer)` or `run_check(check_exercise_N, answer,
    solution=...)`; everything before that line runs in a namespace of its own (the cell imports
    what it uses), so nothing the answer bound elsewhere is seen.
    """
    module = ast.parse(source, filename)
    *definitions, call = module.body
    if not (
        isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
        and ast.unparse(call.value.func) == "run_check" and len(call.value.args) == 2
        and isinstance(call.value.args[0], ast.Name)
        and (match := re.fullmatch(r"check_exercise_(\d+)", call.value.args[0].id))
        and {k.arg for k in call.value.keywords} <= {"solution"}
    ):
        raise ValueError(
            f"{filename}: a check cell ends with run_check(check_exercise_N, answer) "
            "or run_check(check_exercise_N, answer, solution=recorded(...))"
        )
    namespace = {"__name__": "exercise_check", "__builtins__": builtins}
    exec(compile(ast.Module(definitions, type_ignores=[]), filename, "exec"), namespace)  # noqa: S102
    name = call.value.args[0].id
    if not callable(namespace.get(name)):
        raise ValueError(f"{filename}: the cell calls run_check on {name} but does not define it")
    solution = next((ast.unparse(k.value) for k in call.value.keywords), None)
    takes_solution = "solution" in inspect.signature(namespace[name]).parameters
    if takes_solution != (solution is not None):
        raise ValueError(
            f"{filename}: {name} takes a `solution` argument exactly when the cell passes solution=recorded(...)"
        )
    return Check(int(match.group(1)), namespace[name], ast.unparse(call.value.args[1]), solution, namespace)


def run_check(check: Callable, answer: Any, *, solution: Callable | None = None) -> None:
    """Run the check cell that calls this on `answer`: the cell's source, in a fresh namespace.

    `check` is the notebook's own `check_exercise_N`; it only says which cell to run (the one that
    defined it, whose source IPython keeps in `linecache`). The check that runs is the one defined
    again from that source, where the answer cannot have rebound anything.
    """
    filename = sys._getframe(1).f_code.co_filename
    if getattr(getattr(check, "__code__", None), "co_filename", None) != filename:
        raise RuntimeError("run_check(check_exercise_N, answer) belongs in the cell that defines check_exercise_N")
    source = "".join(linecache.getlines(filename))
    if not source:
        raise RuntimeError(
            "run_check needs the source of the cell that calls it, which Jupyter and IPython keep: "
            "run the check cell in a notebook"
        )
    fresh = load_check(source, filename)
    if fresh.function.__name__ != check.__name__:
        raise RuntimeError(f"run_check was given {check.__name__}, but its cell ends by checking {fresh.function.__name__}")
    fresh(answer, solution)


# ---- The answer on another device ------------------------------------------------------------


def run_on(
    device,
    run: Callable[[], Any],
    *,
    create_on: str = "the input's device (device=x.device, or torch.zeros_like(x))",
    what: str = "a result",
    reads_data: bool = False,
):
    """Run an answer on `device` (the GPU, or without one `meta`) and return `run()`'s results.

    `run` takes no arguments: it calls the answer on inputs already on `device` (and autograd on its
    output) and returns what it computed, a tensor or a tuple or list of them (nested, and other
    values, such as floats, are left alone). What it checks, with the check cell's words:

    - an error whose message mentions a device (a tensor the answer made on the CPU met the inputs)
      fails with "create every tensor on {create_on}";
    - any other error: on `meta`, whose tensors have a shape but no data (no `.item()`, no `nonzero`,
      no `.tolist()`), the answer could not run there, and `run_on` returns None; on any other device
      every operation runs, so the error is the answer's and is raised again;
    - on `meta`, a copy of a tensor's data to the CPU (`.cpu()`, `.to("cpu")`, `.tolist()`, an assignment
      into a tensor made on the CPU) fails with "keep every tensor on {create_on}": on a GPU it would bring
      the data back to the CPU. Where a right answer reads its data (`.tolist()` for numbers it returns),
      pass `reads_data=True`; `.numpy()` fails the same way, on every device;
    - every tensor returned must be on `device` ("{what} is on another device"). Devices compare by
      type (and by index only where `device` names one): `torch.device("cuda")` is `cuda:0`'s device.

    The check compares the values itself, where `device` is not `meta`: what they must equal differs
    from one exercise to the next.
    """
    import torch

    if isinstance(device, str):
        device = torch.device(device)
    if not isinstance(device, torch.device):
        raise TypeError(f"run_on: device must be a torch.device or a string such as 'meta', got {type(device).__name__}")
    if not callable(run):
        raise TypeError(f"run_on: run must be a function taking no arguments, got {type(run).__name__}")
    try:
        results = run()
    except TypeError as error:
        if "device type tensor to numpy" not in str(error):  # .numpy() of a tensor on a GPU, or on meta
            raise
        raise AssertionError(
            f"keep every tensor on {create_on}, and compute with torch: on {device.type} inputs, {error}"
        ) from error
    except (NotImplementedError, RuntimeError) as error:
        if "device" in str(error):  # raised, not asserted: python -O keeps it
            raise AssertionError(f"create every tensor on {create_on}: on {device.type} inputs, {error}") from error
        if device.type == "meta" and not reads_data and "Cannot copy out of meta tensor" in str(error):
            raise AssertionError(
                f"keep every tensor on {create_on}: on meta inputs your answer copies one to the CPU (.cpu(), "
                f".to('cpu'), .tolist(), or an assignment into a tensor made on the CPU), so on a GPU {what} "
                "would come back on the CPU, or its data would make a round trip"
            ) from error
        if device.type != "meta":
            raise
        return None

    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                yield from tensors(item)

    if not all(t.device.type == device.type and device.index in (None, t.device.index) for t in tensors(results)):
        raise AssertionError(f"on {device.type} inputs {what} is on another device: create every tensor on {create_on}")
    return results


# ---- Recorded outputs of the official solution ----------------------------------------------


def _tensor_type():
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else ()


def input_key(args: tuple, kwargs: dict) -> str:
    """A digest of a call's arguments: tensors by dtype, shape and values (not device or strides)."""
    digest = hashlib.sha256()

    def feed(value):
        if isinstance(value, _tensor_type()):
            import torch

            data = value.detach().cpu().contiguous()
            if data.is_complex():
                data = torch.view_as_real(data)
            digest.update(f"T{data.dtype}{tuple(value.shape)}".encode())
            digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, (list, tuple)):
            digest.update(f"{type(value).__name__}{len(value)}(".encode())
            for item in value:
                feed(item)
            digest.update(b")")
        elif isinstance(value, dict):
            digest.update(f"dict{len(value)}(".encode())
            for name in sorted(value):
                feed(name)
                feed(value[name])
            digest.update(b")")
        elif value is None or isinstance(value, (bool, int, float, str)):
            digest.update(f"{type(value).__name__}:{value!r};".encode())
        else:
            import torch

            if isinstance(value, torch.dtype):
                digest.update(f"dtype:{value};".encode())
            else:
                raise TypeError(f"cannot record a call with an argument of type {type(value).__name__}")

    feed(list(args))
    feed(kwargs)
    return digest.hexdigest()


def encode(value):
    """An output of the official solution as JSON: tensors by dtype, shape and values."""
    if isinstance(value, _tensor_type()):
        if value.is_complex():
            raise TypeError("complex tensors are not recorded")
        data = value.detach().cpu()
        return {"tensor": str(data.dtype).removeprefix("torch."), "shape": list(data.shape),
                "values": data.reshape(-1).tolist()}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot record an output of type {type(value).__name__}")


def decode(value):
    if isinstance(value, dict) and "tensor" in value:
        import torch

        dtype = getattr(torch, value["tensor"])
        return torch.tensor(value["values"], dtype=dtype).reshape(value["shape"])
    if isinstance(value, dict) and "tuple" in value:
        return tuple(decode(v) for v in value["tuple"])
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def records_path(chapter: str) -> pathlib.Path:
    return RECORDS_DIR / f"{chapter}.json"


class RecordedSolution:
    """The official solution of one exercise, as its recorded outputs on the check's own inputs."""

    def __init__(self, chapter: str, number: int, outputs: dict[str, Any]):
        self.chapter, self.number, self.outputs = chapter, number, outputs

    def __call__(self, *args, **kwargs):
        key = input_key(args, kwargs)
        if key not in self.outputs:
            raise LookupError(
                f"{self.chapter}, exercise {self.number}: no output of the official solution is recorded for "
                f"these inputs; the check's inputs changed since they were recorded ({RECORD_COMMAND})"
            )
        return decode(self.outputs[key])

    def __repr__(self):
        return f"recorded({self.chapter!r}, {self.number})"


def recorded(chapter: str, number: int) -> RecordedSolution:
    """The official solution of exercise `number` of notebooks/`chapter`.ipynb, as recorded outputs."""
    path = records_path(chapter)
    if not path.exists():
        raise FileNotFoundError(f"{path.name}: no recorded outputs for {chapter} ({RECORD_COMMAND})")
    outputs = json.loads(path.read_text()).get(str(number))
    if outputs is None:
        raise LookupError(f"{path.name} records nothing for exercise {number} ({RECORD_COMMAND})")
    return RecordedSolution(chapter, number, outputs)


class Recorder:
    """Calls the official solution and records each output, keyed by the call's inputs."""

    def __init__(self, function: Callable):
        self.function, self.outputs = function, {}

    def __call__(self, *args, **kwargs):
        output = self.function(*args, **kwargs)
        self.outputs[input_key(args, kwargs)] = encode(output)
        return output


def answer_namespace(notebook: dict) -> dict:
    """The chapter's import cell run in a fresh namespace: where an answer (the solution) is defined."""
    names = {"__name__": "exercise_answer"}
    with contextlib.redirect_stdout(io.StringIO()):  # the import cell prints the device
        exec(import_cell(notebook), names)  # noqa: S102
    return names


def record(notebook_path: pathlib.Path) -> dict[str, dict[str, Any]]:
    """Run each check that takes `solution` on the notebook's official solution; its outputs by exercise."""
    notebook = json.loads(pathlib.Path(notebook_path).read_text())
    records = {}
    for number, solution_index, check_index in exercise_cells(notebook):
        check = load_check(cell_source(notebook["cells"][check_index]), f"{notebook_path}: check {number}")
        if check.solution is None:
            continue
        names = answer_namespace(notebook)
        exec(cell_source(notebook["cells"][solution_index]), names)  # noqa: S102
        official = names[check.answer]
        recorder = Recorder(official)
        with contextlib.redirect_stdout(io.StringIO()):
            check(official, recorder)
        records[str(number)] = recorder.outputs
    return records


def write_records(notebook_path: pathlib.Path) -> pathlib.Path | None:
    chapter = pathlib.Path(notebook_path).stem
    records = record(notebook_path)
    path = records_path(chapter)
    if not records:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    return path


if __name__ == "__main__":
    if sys.argv[1:2] != ["record"] or len(sys.argv) < 3:
        sys.exit(f"usage: {RECORD_COMMAND} [...]")
    for notebook in sys.argv[2:]:
        written = write_records(pathlib.Path(notebook))
        print(f"{notebook}: " + (f"wrote {written}" if written else "no check takes a solution"))
