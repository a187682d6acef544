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


def show_source(obj: object) -> SourceListing:
    """A listing of a function, class or module, or of a repository file.

    `obj` is a Python object, or a path relative to the repository root.
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
        return SourceListing(path.read_text(), language, title)
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
