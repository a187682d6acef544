"""Show source code in a notebook: a Python object, or a file of the repository."""

from __future__ import annotations

import inspect
import pathlib

# The repository root: extensions/extending_pytorch/display.py -> two levels up from the package.
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

_LANGUAGES = {".py": "python", ".cpp": "cpp", ".h": "cpp", ".cuh": "cuda", ".cu": "cuda", ".toml": "toml"}


class SourceListing:
    """A block of source code that Jupyter and the book render with syntax highlighting.

    Its plain-text form is the code itself, so the stored output is stable and readable anywhere.
    """

    def __init__(self, code: str, language: str, title: str) -> None:
        self.code = code.rstrip("\n")
        self.language = language
        self.title = title

    def _repr_markdown_(self) -> str:
        return f"`{self.title}`\n\n```{self.language}\n{self.code}\n```\n"

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.code}"


def show_source(obj: object) -> SourceListing:
    """Return a listing of a function, class or module, or of a file path relative to the repository root.

    Titles name the file relative to the repository, never a path of the machine running the notebook.
    """
    if isinstance(obj, (str, pathlib.PurePath)):
        path = (REPO_ROOT / obj).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"obj must name a file relative to the repository root, got {str(obj)!r}")
        return SourceListing(path.read_text(), _LANGUAGES.get(path.suffix, ""), path.relative_to(REPO_ROOT).as_posix())
    try:
        code = inspect.getsource(obj)
        path = pathlib.Path(inspect.getsourcefile(obj)).resolve()
    except TypeError as error:
        raise TypeError(f"obj must be a function, class, module or a file path, got {type(obj).__name__}") from error
    try:
        title = path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        title = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}".strip(".")
    return SourceListing(code, "python", title)
