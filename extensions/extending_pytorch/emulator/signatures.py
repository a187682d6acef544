"""The __global__ functions of a CUDA source: their signatures (parse_kernels),
the namespaces they live in and the template parameters they take, and the
extern "C" launch glue built for the ones Python launches (Binding)."""

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
        # A scalar whose type the emulator knows (int, float, ...) is passed as that C++
        # type; any other (a typedef such as `uint`, an enum, a template parameter's
        # argument) as a number the launch glue converts to the parameter's type, which
        # fails at launch, naming the parameter, where the type is not a number.
        self.known = self.pointer or self.base in _SCALARS

    def substituted(self, arguments: dict[str, str], index: int) -> "Parameter":
        """This parameter with template parameters' names replaced by their arguments."""
        type_ = self.type
        for name, argument in arguments.items():
            type_ = re.sub(rf"\b{re.escape(name)}\b", argument, type_)
        return Parameter(f"{type_} {self.name}", index)

    def __repr__(self):
        return f"{self.type} {self.name}"


class KernelSignature:
    """A __global__ function: its name, the named namespaces around it ("a::b", or ""),
    its parameters, the line of its __global__, and its template parameters' names
    (empty for a kernel that is not a template)."""

    def __init__(self, name: str, parameters: list[Parameter], line: int,
                 template_parameters: list[str] | None = None, namespace: str = "",
                 template_kinds: list[str] | None = None, template_required: int | None = None):
        self.name, self.parameters, self.line = name, parameters, line
        self.template_parameters = list(template_parameters or [])
        # "type" (typename, class) or "value" for each; how many have no default.
        self.template_kinds = list(template_kinds or ["type"] * len(self.template_parameters))
        self.template_required = (len(self.template_parameters) if template_required is None
                                  else template_required)
        self.namespace = namespace

    @property
    def template(self) -> bool:
        return bool(self.template_parameters)

    @property
    def qualified(self) -> str:
        """The name C++ code outside every namespace calls it by."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    def __repr__(self):
        template = f"template <{', '.join(self.template_parameters)}> " if self.template else ""
        return f"{template}__global__ void {self.qualified}({', '.join(map(repr, self.parameters))})"


def template_arguments(arguments) -> tuple[str, ...]:
    """C++ spellings of template arguments given from Python: strings ("float",
    "4 * 64"), ints, bools and torch dtypes (torch.float32 -> "float")."""
    import torch

    dtypes = {torch.float32: "float", torch.float64: "double", torch.float16: "__half",
              torch.bfloat16: "__nv_bfloat16", torch.int32: "int", torch.int64: "long long",
              torch.int16: "short", torch.int8: "signed char", torch.uint8: "unsigned char",
              torch.bool: "bool"}
    if not isinstance(arguments, tuple):
        arguments = (arguments,)
    spelled = []
    for argument in arguments:
        if isinstance(argument, bool):
            spelled.append("true" if argument else "false")
        elif isinstance(argument, int):
            spelled.append(str(argument))
        elif isinstance(argument, torch.dtype) and argument in dtypes:
            spelled.append(dtypes[argument])
        elif isinstance(argument, str) and argument.strip():
            spelled.append(" ".join(argument.split()))
        else:
            raise TypeError(
                "template arguments are C++ spellings (\"float\", \"float4\"), ints, bools or "
                f"torch dtypes, got {argument!r}")
    return tuple(spelled)


def parse_instantiation(text: str) -> tuple[str, tuple[str, ...]]:
    """"ns::kernel<float, 256>" -> ("ns::kernel", ("float", "256"))."""
    m = re.fullmatch(r"\s*([A-Za-z_][\w:]*)\s*<(.*)>\s*", text, re.S)
    if not m:
        raise ValueError(f"instantiate: expected 'kernel<arguments>', got {text!r}")
    return m.group(1), template_arguments(tuple(_split_top_level(m.group(2))))


class Binding:
    """One entry Python launches: a kernel, or one instantiation of a template kernel,
    with its parameters' types as the instantiation makes them."""

    def __init__(self, kernel: KernelSignature, arguments: tuple[str, ...] = ()):
        if not kernel.template_required <= len(arguments) <= len(kernel.template_parameters):
            count = (f"{len(kernel.template_parameters)}" if kernel.template_required ==
                     len(kernel.template_parameters) else
                     f"{kernel.template_required} to {len(kernel.template_parameters)}")
            raise TypeError(f"{kernel.qualified} takes {count} template arguments "
                            f"({', '.join(kernel.template_parameters) or 'none'}), got "
                            f"{len(arguments)}: <{', '.join(arguments)}>")
        self.kernel, self.arguments = kernel, tuple(arguments)
        given = dict(zip(kernel.template_parameters, arguments))
        self.parameters = [p.substituted(given, i) for i, p in enumerate(kernel.parameters)]
        missing = [name for name in kernel.template_parameters[len(arguments):]
                   if any(re.search(rf"\b{re.escape(name)}\b", p.type) for p in self.parameters)]
        if missing:
            raise TypeError(f"{kernel.qualified}<{', '.join(arguments)}>: give the template "
                            f"arguments the parameters use too ({', '.join(missing)})")

    @property
    def key(self) -> str:
        """How Python names it: "kernel", or "kernel<float, 256>"."""
        name = self.kernel.qualified
        return f"{name}<{', '.join(self.arguments)}>" if self.kernel.template else name

    def __repr__(self):
        return f"__global__ void {self.key}({', '.join(map(repr, self.parameters))})"


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
        statement_start = max(mask.rfind(c, 0, m.start()) for c in ";{}") + 1
        namespace = _namespace_at(mask, m.start())
        name = name_match.group(1)
        qualified = f"{namespace}::{name}" if namespace else name
        if qualified in seen:
            continue
        seen.add(qualified)
        params = [Parameter(p, k) for k, p in enumerate(_split_top_level(text[open_paren + 1 : i]))]
        names, kinds, required = _template_parameters(text, mask, statement_start, m.start())
        kernels.append(KernelSignature(name, params, text.count("\n", 0, m.start()) + 1,
                                       names, namespace, kinds, required))
    return kernels


def _template_parameters(text: str, mask: str, start: int, end: int):
    """The `template <...>` between start and end: its parameters' names, their kinds
    ("type" or "value") and how many have no default (none: [], [], 0)."""
    m = re.search(r"\btemplate\s*<", mask[start:end])
    if m is None:
        return [], [], 0
    open_angle = start + m.end() - 1
    depth, close = 0, end
    for j in range(open_angle, end):
        depth += {"<": 1, ">": -1}.get(mask[j], 0)
        if depth == 0:
            close = j
            break
    names, kinds, required = [], [], 0
    for k, declaration in enumerate(_split_top_level(text[open_angle + 1 : close])):
        head, _, default = declaration.partition("=")
        found = re.search(r"([A-Za-z_]\w*)\s*(\.\.\.)?\s*$", head.replace("...", " "))
        names.append(found.group(1) if found else f"_T{k}")
        kinds.append("type" if re.match(r"\s*(typename|class)\b", head) else "value")
        if not default.strip() and "..." not in head:
            required = k + 1
    return names, kinds, required


def parse_host_functions(text: str) -> list[str]:
    """The qualified names of the host functions defined in `text` at namespace scope
    that return at::Tensor (torch::Tensor), or void and take one: an extension's entry
    points. A name
    defined more than once (overloads, or in two namespaces) is left out."""
    mask = code_mask(text)
    tensor = r"(?:at|torch)::Tensor"
    found = []
    for m in re.finditer(rf"(?:\b{tensor}|\bvoid)\s+([A-Za-z_]\w*)\s*\(", mask):
        close = _matching_paren(mask, m.end() - 1)
        if close < 0 or not mask[close + 1 :].lstrip().startswith("{"):
            continue  # a declaration, or a call
        if not m.group(0).startswith(("at::", "torch::")) and not re.search(
                tensor, mask[m.end() : close]):
            continue  # void, without a tensor parameter
        statement = mask[max(mask.rfind(c, 0, m.start()) for c in ";{}") + 1 : m.start()]
        if re.search(r"\b(__global__|__device__|template)\b", statement):
            continue
        namespace = _namespace_at(mask, m.start(), functions_too=True)
        if namespace is None:
            continue  # inside a function or a class
        found.append(f"{namespace}::{m.group(1)}" if namespace else m.group(1))
    short = [name.split("::")[-1] for name in found]  # Python calls them by these
    return [name for name, own in zip(found, short) if short.count(own) == 1]


def _namespace_at(mask: str, position: int, functions_too: bool = False) -> str | None:
    """The named namespaces enclosing `position` ("a::b"; unnamed ones add nothing: what
    they hold is reachable from the namespace around them); with `functions_too`, None
    where a block that is not a namespace (a function's, a class's) encloses it."""
    stack = []
    for m in re.finditer(r"\b(?:inline\s+)?namespace\s*([A-Za-z_][\w:]*)?\s*\{|[{}]", mask[:position]):
        if m.group(0) == "}":
            if stack:
                stack.pop()
        elif m.group(0) == "{":
            stack.append(None)
        else:
            stack.append(m.group(1) or "")
    if functions_too and None in stack:
        return None  # (asked by parse_host_functions): inside a block that is no namespace
    return "::".join(name for name in stack if name)


def _thunks(bindings: list[Binding]) -> str:
    """extern "C" entry points that launch each binding (appended to the source):
    simt_launch_<i> launches bindings[i]."""
    lines = [
        '#line 1 "<simt launch glue>"',
        "#include <cstdio>",
        "#include <string>",
        'extern "C" void simt_configure(int schedule, unsigned long long seed, unsigned max_grid_x,',
        "                               int gpu_like) {",
        "  ::simt::configure(static_cast<::simt::Schedule>(schedule), seed, max_grid_x, gpu_like != 0);",
        "}",
    ]
    for number, binding in enumerate(bindings):
        args = []
        for i, p in enumerate(binding.parameters):
            if p.pointer:
                args.append(f"reinterpret_cast<{p.type}>(*static_cast<void**>(args[{i}]))")
            elif p.base in ("__half", "half", "__nv_bfloat16", "nv_bfloat16"):
                args.append(f"::simt::detail::from_bits<{p.base}>(*static_cast<unsigned short*>(args[{i}]))")
            elif p.known:
                args.append(f"*static_cast<{p.base}*>(args[{i}])")
            else:
                args.append(f"::simt::detail::from_number<{p.base}>("
                            f"*static_cast<const ::simt::detail::Number*>(args[{i}]), "
                            f'"{binding.key}", "{p.name}", "{p.base}")')
        call_args = ", ".join(args)
        # Which parameters take a struct (for module.unbound): names the compiler decides.
        checks = " + ".join(
            f'(::simt::detail::is_number_v<{p.base}> ? "" : "{p.name},")'
            for p in binding.parameters if not p.pointer and not p.known) or '""'
        lines += [
            f'extern "C" const char* simt_structs_{number}() {{',
            f"  static const std::string names = std::string() + {checks};",
            "  return names.c_str();",
            "}",
        ]
        callee = "::" + binding.kernel.qualified
        if binding.kernel.template:
            callee += f"<{', '.join(binding.arguments)}>"
        lines += [
            f'extern "C" int simt_launch_{number}(const unsigned* g, const unsigned* b,',
            "    unsigned long long shared, void** args, char* error, unsigned long long size) {",
            "  (void)args;",
            "  try {",
            f'    ::simt::launch("{binding.key}", [&](auto&&... a) {{ {callee}(a...); }},',
            "        dim3(g[0], g[1], g[2]), dim3(b[0], b[1], b[2]), shared)(" + call_args + ");",
            "    return 0;",
            "  } catch (const std::exception& e) {",
            '    std::snprintf(error, size, "%s", e.what());',
            "    return 1;",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"
