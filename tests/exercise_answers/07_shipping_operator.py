"""Plausible wrong answers to the exercises of notebooks/07_shipping_operator.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            "a prefix test on the mangled names: misses const methods (_ZNK...)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    return {n for n in names if n.startswith(('_ZN2at', '_ZN3c10', '_ZN5torch'))}\n",
            AssertionError,
            r"missed _ZNK2at.*const method",
        ),
        (
            "a prefix test that knows const methods but not typeinfo and vtables (_ZTI..., _ZTV...)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    prefixes = ('_ZN2at', '_ZN3c10', '_ZN5torch', '_ZNK2at', '_ZNK3c10', '_ZNK5torch')\n"
            "    return {n for n in names if n.startswith(prefixes)}\n",
            AssertionError,
            r"missed _ZTIN3c105ErrorE.*typeinfo",
        ),
        (
            "demangles, but counts every C++ namespace, std:: included",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, r in zip(names, readable) if re.search(r'\\b(at|c10|c10d|torch|caffe2|std)::', r)}\n",
            AssertionError,
            r"flagged .*standard library, which is not torch's",
        ),
        (
            "demangles, but tests the start of the name: 'typeinfo for c10::...' and "
            "'float const* at::...' do not start with a namespace",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, r in zip(names, readable) if r.startswith(('at::', 'c10::', 'torch::'))}\n",
            AssertionError,
            r"missed _ZNK2at.*const method",
        ),
        (
            "demangles and tests right, but returns the demangled text instead of the names as nm prints them",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {r for r in readable if re.search(r'\\b(at|c10|c10d|torch|caffe2)::', r)}\n",
            AssertionError,
            r"returned names that are not in the lines.*not their demangled text",
        ),
        (
            "demangles, but tests for 'at::' without a word boundary: flags cv::Mat::create and flat::foo "
            "(passed the old check, which had no such names)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable) if any(ns in text for ns in ('at::', 'c10::', 'c10d::', 'torch::', 'caffe2::'))}\n",
            AssertionError,
            r"flagged _ZN2cv3Mat6createEiPKii: cv::Mat::create.*match whole namespace names",
        ),
        (
            "searches the mangled names for the length-prefixed namespaces (2at, 3c10, 5torch): flags "
            "std::string::at, whose method at mangles as 2at (passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    return {n for n in names if re.search(r'(?<![0-9])(2at|3c10|4c10d|5torch|6caffe2)', n)}\n",
            AssertionError,
            r"flagged _ZNSt7__cxx1112basic_string.*2atEm.*std::string::at.*not the namespace",
        ),
        (
            "the rule before the namespaces were listed: at::, c10:: and torch:: only, which misses caffe2::TypeMeta "
            "(in libc10) and c10d:: (the chapter's own solution before; passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable) if re.search(r'\\b(at|c10|torch)::', text)}\n",
            AssertionError,
            r"missed _ZN6caffe28TypeMeta13typeMetaDatasEv.*caffe2:: is in the rule",
        ),
        (
            "a thorough prefix test on the mangled names (_ZN, _ZNK, _ZNR, _ZNO, _ZTIN, _ZTVN, _ZTSN for each "
            "namespace): misses thunks (_ZThn...), TLS wrappers (_ZTH...) and names whose torch type is an argument "
            "(the three-namespace version passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    heads = ('_ZN', '_ZNK', '_ZNR', '_ZNO', '_ZNKR', '_ZNKO', '_ZTIN', '_ZTVN', '_ZTSN')\n"
            "    spaces = ('2at', '3c10', '4c10d', '5torch', '6caffe2')\n"
            "    return {n for n in names if n.startswith(tuple(h + s for h in heads for s in spaces))}\n",
            AssertionError,
            r"missed _ZThn16_N3c105ErrorD1Ev.*thunk",
        ),
        (
            "demangles, but takes a namespace only at the start or after a space: misses at:: after '<' or '(' "
            "(the three-namespace version passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'(?:^|\\s)(at|c10|c10d|torch|caffe2)::', text)}\n",
            AssertionError,
            r"missed _ZNSt6vectorIN2at6TensorESaIS1_EED1Ev.*template argument",
        ),
        (
            "demangles, but tests only the qualified name (the text before the first '('): misses a torch type "
            "in the arguments (the three-namespace version passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'\\b(at|c10|c10d|torch|caffe2)::', text.split('(')[0])}\n",
            AssertionError,
            r"missed _Z16THPVariable_WrapN2at10TensorBaseE.*in an argument",
        ),
        (
            "demangles, but tests the first '::' component of the text: std::vector<at::Tensor> starts with std "
            "(the three-namespace version passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    first = [text.split('::')[0].split()[-1:] for text in readable]\n"
            "    return {n for n, head in zip(names, first)\n"
            "            if head and head[0] in ('at', 'c10', 'c10d', 'torch', 'caffe2')}\n",
            AssertionError,
            r"missed _ZNSt6vectorIN2at6TensorESaIS1_EED1Ev",
        ),
        (
            "demangles, but also counts fbgemm:: and gloo::, libraries torch bundles, which the exercise says are "
            "not torch's (passed the old check: no library it reads asks for them)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'\\b(at|c10|c10d|torch|caffe2|fbgemm|gloo)::', text)}\n",
            AssertionError,
            r"flagged _ZN6fbgemm18fbgemmSupportedCPUEv: fbgemm::fbgemmSupportedCPU\(\), of FBGEMM, a library torch "
            r"bundles, which is not torch's",
        ),
        (
            "demangles, but also counts oneDNN's C++ API (dnnl::, ideep::), which torch bundles (passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'\\b(at|c10|c10d|torch|caffe2|dnnl|ideep)::', text)}\n",
            AssertionError,
            r"flagged _ZN5ideep6engine10cpu_engineEv: ideep::engine::cpu_engine\(\).*a library torch bundles",
        ),
        (
            "demangles, but also counts pybind11::, whose headers torch ships (passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'\\b(at|c10|c10d|torch|caffe2|pybind11)::', text)}\n",
            AssertionError,
            r"flagged _ZN8pybind116detail13get_internalsEv: pybind11::detail::get_internals\(\), of pybind11",
        ),
        (
            "demangles, but matches namespaces that start with torch or c10 (torch\\w*::): flags torchvision:: "
            "(passed the old check)",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'\\b(at|c10\\w*|torch\\w*|caffe2)::', text)}\n",
            AssertionError,
            r"flagged _ZN11torchvision3ops3nmsEv: torchvision::ops::nms\(\) \('torchvision::' is not 'torch::'",
        ),
    ],
    2: [
        (
            "the minor version one byte too low (minor << 40): every 2.x target reads as older than 2.10",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major << 56 | minor << 40:016x}'\n",
            AssertionError,
            r"a 2\.13 target must see Stream::nativeHandle",
        ),
        (
            "the version as a dotted decimal, which the preprocessor cannot compare",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION={major}.{minor}'\n",
            AssertionError,
            r"not a number the preprocessor can compare",
        ),
        (
            "major and minor swapped: 13.2 is newer than any torch",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{minor << 56 | major << 48:016x}'\n",
            AssertionError,
            # torch 2.15's headers refuse a target newer than themselves; 2.13's do not, and
            # the check then finds that a "2.12" target sees a 2.13 API.
            r"newer than this torch|a 2\.12 target must not see Stream::nativeHandle: are the major and minor",
        ),
        (
            "patch 255 (0xff << 40): compiles like major.minor.0, but is not the number asked for "
            "(passed the old check)",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major << 56 | minor << 48 | 0xff << 40:016x}'\n",
            AssertionError,
            r"0x020dff0000000000 is not 2\.13\.0: the patch byte and the five bytes of ABI tag below the minor must be 0",
        ),
        (
            "the five ABI-tag bytes filled ((1 << 40) - 1), not zero (passed the old check)",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major << 56 | minor << 48 | (1 << 40) - 1:016x}'\n",
            AssertionError,
            r"0x020d00ffffffffff is not 2\.13\.0: the patch byte and the five bytes of ABI tag below the minor must be 0",
        ),
        (
            "torch's own macro, TORCH_VERSION_2_13_0: compiles where torch's headers are included, but is not a "
            "number (the old check rejected it, blaming the byte layout)",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=TORCH_VERSION_{major}_{minor}_0'\n",
            AssertionError,
            r"TORCH_VERSION_2_13_0 is a macro of torch's own headers.*write the number",
        ),
        (
            "major << 56 + minor << 48: Python's + binds tighter than <<, so the number is 119 bits wide "
            "(the old check rejected it, but asked whether the minor version was in its byte)",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major << 56 + minor << 48:016x}'\n",
            AssertionError,
            r"\(for 2\.13\) does not fit in 64 bits.*\+ and - bind tighter than <<",
        ),
        (
            "the bytes little-endian (bytes(...).hex() without reversing): the major version in the lowest byte",
            "def target_version_flag(major, minor):\n"
            "    return '-DTORCH_TARGET_VERSION=0x' + bytes([major, minor, 0, 0, 0, 0, 0, 0])[::-1].hex()\n",
            AssertionError,
            r"a 2\.13 target must see Stream::nativeHandle",
        ),
        (
            "the version's decimal digits written as hex (0x0213...): 2.13 reads as 2.19",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major:02d}{minor:02d}000000000000'\n",
            AssertionError,
            # torch 2.15's headers refuse 2.19 as newer than themselves; 2.13's do too, and 2.12 reads as 2.18.
            r"newer than this torch|a 2\.12 target must not see Stream::nativeHandle",
        ),
        (
            "the major version hard-coded as 2",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{2 << 56 | minor << 48:016x}'\n",
            AssertionError,
            r"0x0201000000000000 for 3\.1: the top byte must hold the major version",
        ),
    ],
}

# Right answers other than the official solution, which each check must accept.
RIGHT_ANSWERS = {
    1: [
        (
            "c++filt given the names as arguments, a namespace after the start or a non-word character, "
            "caffe2:: and c10d:: listed first",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt', *names], capture_output=True, text=True,\n"
            "                              check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable)\n"
            "            if re.search(r'(?:^|[^\\w])(caffe2|c10d|c10|at|torch)::', text)}\n",
        ),
        (
            "matches whole namespace names with a lookbehind instead of \\b",
            "def unstable_symbols(nm_lines):\n"
            "    names = [line.split()[-1] for line in nm_lines if line.strip()]\n"
            "    readable = subprocess.run(['c++filt'], input='\\n'.join(names), capture_output=True,\n"
            "                              text=True, check=True).stdout.splitlines()\n"
            "    return {n for n, text in zip(names, readable) if re.search(r'(?<![\\w:])(at|c10|c10d|torch|caffe2)::', text)}\n",
        ),
    ],
    2: [
        (
            "the number in decimal",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION={major << 56 | minor << 48}'\n",
        ),
        (
            "the eight bytes written out, most significant first",
            "def target_version_flag(major, minor):\n"
            "    return '-DTORCH_TARGET_VERSION=0x' + bytes([major, minor, 0, 0, 0, 0, 0, 0]).hex()\n",
        ),
        (
            "upper-case hex digits with a ULL suffix",
            "def target_version_flag(major, minor):\n"
            "    return f'-DTORCH_TARGET_VERSION=0x{major:02X}{minor:02X}000000000000ULL'\n",
        ),
    ],
}
