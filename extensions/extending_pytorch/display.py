"""Show source code in a notebook: a Python object, or a repository file."""

from __future__ import annotations

import inspect
import pathlib

# extensions/extending_pytorch/display.py -> the repository root.
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

_LANGUAGES = {
    ".py": "python",
    ".cpp": "cpp",
    ".h": "cpp",
    ".cu": "cuda",
    ".cuh": "cuda",
    ".toml": "toml",
}


class SourceListing:
    """Source code that Jupyter and the book show with syntax highlighting.

    Its plain-text form is the code itself, so the stored output is stable
    and readable anywhere.
    """

    def __init__(self, code: str, language: str, title: str) -> None:
        self.code = code.rstrip("\n")
        self.language = language
        self.title = title

    def _repr_markdown_(self) -> str:
        return f"`{self.title}`\n\n```{self.language}\n{self.code}\n```\n"

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.code}"


def _excerpt(text: str, start: str | None, stop: str | None) -> str:
    """The lines from the first containing `start` to before `stop`."""
    lines = text.splitlines()
    first = 0
    if start is not None:
        matches = [i for i, line in enumerate(lines) if start in line]
        if not matches:
            raise ValueError(f"start marker {start!r} not found")
        first = matches[0]
    last = len(lines)
    if stop is not None:
        matches = [i for i in range(first + 1, last) if stop in lines[i]]
        if not matches:
            raise ValueError(f"stop marker {stop!r} not found after start")
        last = matches[0]
    return "\n".join(lines[first:last]).rstrip() + "\n"


def show_source(
    obj: object, *, start: str | None = None, stop: str | None = None
) -> SourceListing:
    """A listing of a function, class or module, or of a repository file.

    `obj` is a Python object, or a path relative to the repository root.
    For a file, `start` and `stop` select the lines from the first one
    containing `start` up to (not including) the next containing `stop`.
    Titles name files relative to the repository, never a path of the
    machine that runs the notebook.
    """
    if isinstance(obj, (str, pathlib.PurePath)):
        path = (REPO_ROOT / obj).resolve()
        if not path.is_file():
            raise FileNotFoundError(
                "obj must name a file relative to the repository root, "
                f"got {str(obj)!r}"
            )
        language = _LANGUAGES.get(path.suffix, "")
        title = path.relative_to(REPO_ROOT).as_posix()
        code = _excerpt(path.read_text(), start, stop)
        return SourceListing(code, language, title)
    if start is not None or stop is not None:
        raise TypeError("start and stop select lines of files only")
    try:
        code = inspect.getsource(obj)
        path = pathlib.Path(inspect.getsourcefile(obj)).resolve()
    except TypeError as error:
        raise TypeError(
            "obj must be a function, class, module or a file path, "
            f"got {type(obj).__name__}"
        ) from error
    try:
        title = path.relative_to(REPO_ROOT).as_posix()
    except ValueError:  # installed outside the repository
        title = getattr(obj, "__qualname__", getattr(obj, "__name__", ""))
    return SourceListing(code, "python", title)
