"""The __global__ functions of a CUDA source: their signatures (parse_kernels),
which of them Python can launch, and the extern "C" launch glue built for those."""

from __future__ import annotations

import ctypes
import re

from extending_pytorch.simt_rewrite import code_mask

# ---- Reader kernels: load_source ----------------------------------------------------------

# Scalar parameter types: C++ spelling -> (ctypes type, what the thunk reads).
_SCALARS = {
    "bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "signed char": ctypes.c_int8,
    "int8_t": ctypes.c_int8,
    "unsigned char": ctypes.c_uint8,
    "uint8_t": ctypes.c_uint8,
    "short": ctypes.c_int16,
    "int16_t": ctypes.c_int16,
    "unsigned short": ctypes.c_uint16,
    "uint16_t": ctypes.c_uint16,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32,
    "long": ctypes.c_long,
    "long long": ctypes.c_longlong,
    "int64_t": ctypes.c_int64,
    "unsigned long": ctypes.c_ulong,
    "unsigned long long": ctypes.c_ulonglong,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "__half": ctypes.c_uint16,
    "half": ctypes.c_uint16,
    "__nv_bfloat16": ctypes.c_uint16,
    "nv_bfloat16": ctypes.c_uint16,
}


def _pointer_dtypes():
    import torch

    return {
        "float": (torch.float32,),
        "float2": (torch.float32,),
        "float4": (torch.float32,),
        "double": (torch.float64,),
        "double2": (torch.float64,),
        "__half": (torch.float16,),
        "half": (torch.float16,),
        "__half2": (torch.float16,),
        "__nv_bfloat16": (torch.bfloat16,),
        "nv_bfloat16": (torch.bfloat16,),
        "__nv_bfloat162": (torch.bfloat16,),
        "int": (torch.int32,),
        "int32_t": (torch.int32,),
        "unsigned": (torch.int32, torch.uint32),
        "unsigned int": (torch.int32, torch.uint32),
        "uint32_t": (torch.int32, torch.uint32),
        "long": (torch.int64,),
        "long long": (torch.int64,),
        "int64_t": (torch.int64,),
        "unsigned long long": (torch.int64, torch.uint64),
        "uint64_t": (torch.int64, torch.uint64),
        "short": (torch.int16,),
        "int16_t": (torch.int16,),
        "char": (torch.int8, torch.uint8),
        "signed char": (torch.int8,),
        "int8_t": (torch.int8,),
        "unsigned char": (torch.uint8,),
        "uint8_t": (torch.uint8,),
        "bool": (torch.bool,),
    }


class Parameter:
    """A kernel parameter: its name, C++ type, and whether it is a pointer."""

    def __init__(self, declaration: str, index: int):
        text = " ".join(declaration.replace("__restrict__", " ").split())
        text = text.split("=")[0].strip()
        m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
        if not m or not m.group(1).strip():
            self.name, type_ = f"arg{index}", text
        else:
            self.name, type_ = m.group(2), m.group(1).strip()
        self.type = type_
        self.pointer = "*" in type_
        self.const = bool(re.match(r"^const\b", type_))
        base = re.sub(r"\b(const|volatile)\b|\*|&", " ", type_)
        self.base = " ".join(base.split())
        self.supported = self.pointer or self.base in _SCALARS

    def __repr__(self):
        return f"{self.type} {self.name}"


class KernelSignature:
    def __init__(self, name: str, parameters: list[Parameter], line: int, template: bool):
        self.name, self.parameters, self.line, self.template = name, parameters, line, template

    @property
    def bindable(self) -> bool:
        return not self.template and all(p.supported for p in self.parameters)

    def __repr__(self):
        return f"__global__ void {self.name}({', '.join(map(repr, self.parameters))})"


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in text:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and p.strip() != "void"]


def _matching_paren(mask: str, open_paren: int) -> int:
    """The index of the ")" that closes mask[open_paren], or -1 if none does."""
    depth = 0
    for i in range(open_paren, len(mask)):
        depth += {"(": 1, ")": -1}.get(mask[i], 0)
        if depth == 0:
            return i
    return -1


def parse_kernels(text: str) -> list[KernelSignature]:
    """The __global__ functions defined in CUDA source `text`."""
    mask = code_mask(text)
    kernels, seen = [], set()
    for m in re.finditer(r"\b__global__\b", mask):
        # Between __global__ and the name: the return type, and attributes with
        # arguments of their own (__launch_bounds__(256, 2)), skipped whole.
        start = m.end()
        while True:
            open_paren = mask.find("(", start)
            if open_paren < 0:
                break
            attribute = re.search(r"\b(__launch_bounds__|__maxnreg__|__cluster_dims__)\s*$",
                                  mask[start:open_paren])
            if attribute is None:
                break
            start = _matching_paren(mask, open_paren) + 1
            if start == 0:  # unbalanced: the source ends inside the attribute
                open_paren = -1
                break
        if open_paren < 0:
            continue
        name_match = re.search(r"([A-Za-z_]\w*)\s*$", mask[start:open_paren])
        if not name_match:
            continue
        i = _matching_paren(mask, open_paren)
        if i < 0:
            continue
        after = mask[i + 1 :].lstrip()
        if not after.startswith("{") and not after.startswith("__"):
            if not after.startswith("{"):
                continue  # a declaration without body
        statement_start = max(mask.rfind(c, 0, m.start()) for c in ";}") + 1
        template = re.search(r"\btemplate\b", mask[statement_start : m.start()]) is not None
        name = name_match.group(1)
        if name in seen:
            continue
        seen.add(name)
        params = [Parameter(p, k) for k, p in enumerate(_split_top_level(text[open_paren + 1 : i]))]
        kernels.append(KernelSignature(name, params, text.count("\n", 0, m.start()) + 1, template))
    return kernels


def _thunks(kernels: list[KernelSignature]) -> str:
    """extern "C" entry points that launch each kernel (appended to the source)."""
    lines = [
        '#line 1 "<simt launch glue>"',
        "#include <cstdio>",
        'extern "C" void simt_configure(int schedule, unsigned long long seed, unsigned max_grid_x) {',
        "  ::simt::configure(static_cast<::simt::Schedule>(schedule), seed, max_grid_x);",
        "}",
    ]
    for k in kernels:
        if not k.bindable:
            continue
        args = []
        for i, p in enumerate(k.parameters):
            if p.pointer:
                args.append(f"reinterpret_cast<{p.type}>(*static_cast<void**>(args[{i}]))")
            elif p.base in ("__half", "half", "__nv_bfloat16", "nv_bfloat16"):
                args.append(f"::simt::detail::from_bits<{p.base}>(*static_cast<unsigned short*>(args[{i}]))")
            else:
                args.append(f"*static_cast<{p.base}*>(args[{i}])")
        call_args = ", ".join(args)
        lines += [
            f'extern "C" int simt_launch_{k.name}(const unsigned* g, const unsigned* b,',
            "    unsigned long long shared, void** args, char* error, unsigned long long size) {",
            "  (void)args;",
            "  try {",
            f'    ::simt::launch("{k.name}", [&](auto&&... a) {{ {k.name}(a...); }},',
            "        dim3(g[0], g[1], g[2]), dim3(b[0], b[1], b[2]), shared)(" + call_args + ");",
            "    return 0;",
            "  } catch (const std::exception& e) {",
            '    std::snprintf(error, size, "%s", e.what());',
            "    return 1;",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"

