"""What the notebooks display: source code, tables of results, and outputs
that other pages of the book show again."""

from __future__ import annotations

import html
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


class Table:
    """A table of results: HTML in Jupyter and on the site, text elsewhere.

    `columns` are the headings, `rows` the lines; every cell is shown as
    `str(cell)`, so format numbers before passing them. The first column is
    left-aligned (it names the row), the others right-aligned (numbers),
    except the indices in `text_columns`: words, left-aligned, which may wrap.
    """

    def __init__(self, columns, rows, *, caption: str = "", text_columns=()) -> None:
        self.columns = [str(c) for c in columns]
        self.text_columns = {0, *text_columns}
        self.rows = [[str(cell) for cell in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, expected "
                    f"{len(self.columns)} (one per column)"
                )
        self.caption = caption

    def __str__(self) -> str:
        lines = [self.columns, *self.rows]
        widths = [
            max(len(line[i]) for line in lines)
            for i in range(len(self.columns))
        ]

        def fmt(line):
            cells = [
                cell.ljust(w) if i in self.text_columns else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths))
            ]
            return "  ".join(cells).rstrip()

        text = [fmt(self.columns), "  ".join("-" * w for w in widths)]
        text += [fmt(row) for row in self.rows]
        if self.caption:
            text.append(self.caption)
        return "\n".join(text)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        # Inline styles, so the table looks the same in Jupyter, Colab and on
        # the site; the wrapper scrolls sideways on a narrow screen.
        # The first column (labels) may wrap; numbers never do.
        first = "text-align:left; padding:0.2em 0.7em"
        other = "text-align:right; padding:0.2em 0.7em; white-space:nowrap"

        def cells(line, tag):
            return "".join(
                f'<{tag} style="{first if i in self.text_columns else other}">'
                f"{html.escape(cell)}</{tag}>"
                for i, cell in enumerate(line)
            )

        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in self.rows)
        caption = (
            '<caption style="caption-side:bottom; text-align:left">'
            f"{html.escape(self.caption)}</caption>"
            if self.caption
            else ""
        )
        return (
            '<div style="overflow-x:auto"><table class="ep-results" '
            'style="font-variant-numeric:tabular-nums; margin:0">'
            f"{caption}<thead><tr>{cells(self.columns, 'th')}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
        )


class Text:
    """Plain text shown as is (no quotes), in Jupyter and on the site."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return "".join(
            f"<p>{html.escape(line)}</p>" for line in self.text.splitlines()
        )


# The mimebundle metadata by which the book's Markdown pages find an output
# (myst-nb's "glue": {glue} with :doc: pastes it on another page).
_GLUE_METADATA = "scrapbook"


def show(value, *, name: str) -> None:
    """Display `value` as an output of this cell, recorded under `name`.

    The output is the ordinary one (a table, a figure, text), so Jupyter and
    Colab show it as usual; the site's benchmarks page pastes the same stored
    output by its name, so its numbers are the ones this chapter measured.
    A matplotlib figure is closed after it is shown, so it appears once.
    Outside Jupyter (a plain script) the value is printed, or the figure
    shown by matplotlib.
    """
    import IPython
    from IPython.display import display

    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(
            f"name must be an identifier such as 'timings', got {name!r}"
        )
    is_figure = type(value).__module__.startswith("matplotlib")
    shell = IPython.get_ipython()
    if shell is None:
        if is_figure:
            import matplotlib.pyplot as plt

            plt.show()
        else:
            print(value)
    else:
        bundle, metadata = shell.display_formatter.format(value)
        metadata[_GLUE_METADATA] = {"name": name, "mime_prefix": ""}
        display(bundle, raw=True, metadata=metadata)
    if is_figure:
        import matplotlib.pyplot as plt

        plt.close(value)
