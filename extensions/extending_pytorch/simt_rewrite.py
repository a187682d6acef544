"""Turn a CUDA source (.cu) into C++ that g++ compiles against the SIMT emulator.

Two constructs of CUDA C++ are not C++, and are rewritten; everything else is
left as it is, and line numbers are kept, so that compiler messages, sanitizer
reports and the emulator's own reports point at lines of the .cu file:

- a launch ``kernel<<<grid, block, shared, stream>>>(args)`` becomes the call
  ``::simt::launch("kernel", [&](auto&&... a) { kernel(a...); }, grid, block,
  shared, stream)(args)``. The lambda lets C++ deduce a kernel template's
  arguments from the call, as nvcc does.
- a declaration ``__shared__ T name[N];`` inside a function becomes
  ``T (&name)[N] = ::simt::shared_variable<T[N], alignment>([]{});``: storage
  per block (a fresh allocation for every block, so that AddressSanitizer sees
  its bounds), and ``extern __shared__ T name[];`` becomes a pointer to the
  block's dynamic shared memory.

The output starts with ``#include "simt.h"`` and a ``#line 1 "<path>"``
directive; no rewrite adds or removes a line break.
"""

from __future__ import annotations

import re

__all__ = ["rewrite", "RewriteError", "code_mask"]


class RewriteError(ValueError):
    """A construct the rewrite does not handle, with its file:line."""


def code_mask(text: str) -> str:
    """`text` with comments, string and character literals blanked out.

    Same length, line breaks kept: offsets into the mask are offsets into
    `text`. Searching the mask finds only code.
    """
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if text[k] != "\n":
                    out[k] = " "
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            for k in range(i + 1, end):
                if text[k] != "\n":
                    out[k] = " "
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _kernel_start(mask: str, end: int) -> int:
    """Start of the kernel expression that ends just before offset `end`."""
    i = end
    while i > 0 and mask[i - 1].isspace():
        i -= 1
    while True:
        if i > 0 and mask[i - 1] == ">":  # template arguments
            depth = 0
            while i > 0:
                i -= 1
                if mask[i] == ">":
                    depth += 1
                elif mask[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            while i > 0 and mask[i - 1].isspace():
                i -= 1
        j = i
        while j > 0 and (mask[j - 1].isalnum() or mask[j - 1] == "_"):
            j -= 1
        if j == i:
            raise ValueError("no kernel name before <<<")
        i = j
        k = i
        while k > 0 and mask[k - 1].isspace():
            k -= 1
        if k >= 2 and mask[k - 2 : k] == "::":
            i = k - 2
            while i > 0 and mask[i - 1].isspace():
                i -= 1
            if i == 0 or not (mask[i - 1].isalnum() or mask[i - 1] in "_>"):
                return i  # a leading ::
            continue
        return i


def _launch_end(mask: str, start: int) -> int:
    """Offset of the >>> that closes the <<< at `start`."""
    depth = 0
    i = start + 3
    while i < len(mask):
        c = mask[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and mask.startswith(">>>", i):
            return i
        i += 1
    raise ValueError("<<< without >>>")


def _rewrite_launches(text: str, filename: str) -> str:
    mask = code_mask(text)
    pieces = []
    last = 0
    for m in re.finditer(r"<<<", mask):
        if m.start() < last:
            continue
        try:
            begin = _kernel_start(mask, m.start())
            close = _launch_end(mask, m.start())
        except ValueError as error:
            raise RewriteError(
                f"{filename}:{_line_of(text, m.start())}: cannot rewrite this launch: {error}"
            ) from None
        kernel = text[begin : m.start()]
        config = text[m.start() + 3 : close]
        name = " ".join(kernel.split())
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        replacement = (
            f'::simt::launch("{quoted}", [&](auto&&... simt_args_) {{ {name}(simt_args_...); }}, '
            f"{config})" + "\n" * kernel.count("\n")
        )
        pieces.append(text[last:begin])
        pieces.append(replacement)
        last = close + 3
    pieces.append(text[last:])
    return "".join(pieces)


_ALIGN = re.compile(
    r"\b(?:alignas\s*\(\s*(\w+)\s*\)|__align__\s*\(\s*(\w+)\s*\)|"
    r"__attribute__\s*\(\(\s*aligned\s*\(\s*(\w+)\s*\)\s*\)\))"
)
_DECLARATOR = re.compile(r"^(?P<type>.*?[\w>*&\s])\s*\b(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)*)$", re.S)


def _rewrite_shared(text: str, filename: str) -> str:
    mask = code_mask(text)
    pieces = []
    last = 0
    for m in re.finditer(r"\b__shared__\b", mask):
        if m.start() < last:
            continue
        # The declaration: from the end of the previous statement to its ';'.
        # (It starts on the line of __shared__: a line before it may be a
        # preprocessor directive.)
        begin = max(mask.rfind(c, 0, m.start()) for c in ";{}") + 1
        begin = max(begin, mask.rfind("\n", 0, m.start()) + 1)
        while begin < m.start() and mask[begin].isspace():
            begin += 1
        end = mask.find(";", m.end())
        if end < 0:
            raise RewriteError(f"{filename}:{_line_of(text, m.start())}: __shared__ without ';'")
        declaration = mask[begin:end]
        where = f"{filename}:{_line_of(text, m.start())}"
        if "=" in declaration or "," in re.sub(r"<[^<>]*>|\([^()]*\)", "", declaration):
            raise RewriteError(
                f"{where}: the emulator handles one __shared__ variable per declaration, "
                "without initializer (as CUDA requires): split it"
            )
        alignment = "0"
        found = _ALIGN.search(declaration)
        if found:
            alignment = next(g for g in found.groups() if g)
        words = _ALIGN.sub(" ", declaration)
        is_extern = re.search(r"\bextern\b", words) is not None
        words = re.sub(r"\b(?:__shared__|extern|static)\b", " ", words).strip()
        d = _DECLARATOR.match(words)
        if not d or not d.group("type").strip():
            raise RewriteError(f"{where}: cannot read this __shared__ declaration: {declaration.strip()}")
        type_, name, dims = d.group("type").strip(), d.group("name"), d.group("dims").strip()
        newlines = "\n" * text.count("\n", begin, end)
        if is_extern:
            if not re.fullmatch(r"\[\s*\]", dims):
                raise RewriteError(f"{where}: extern __shared__ must be an array of unknown size: T name[];")
            replacement = f"{type_}* {name} = ::simt::dynamic_shared<{type_}>(){newlines}"
        else:
            align = f"alignof({type_}{dims})" if alignment == "0" else alignment
            replacement = (
                f"auto& {name} = ::simt::shared_variable<{type_}{dims}, {align}>([] {{}})"
                f"{newlines}"
            )
        pieces.append(text[last:begin])
        pieces.append(replacement)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def rewrite(text: str, filename: str) -> str:
    """The C++ for the emulator of CUDA source `text`, read from `filename`.

    `filename` goes into the #line directive: reports name it.
    """
    body = _rewrite_shared(_rewrite_launches(text, filename), filename)
    assert body.count("\n") == text.count("\n"), "the rewrite must keep line numbers"
    escaped = str(filename).replace("\\", "\\\\").replace('"', '\\"')
    return f'#include "simt.h"\n#line 1 "{escaped}"\n{body}'
