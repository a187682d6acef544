"""Plausible wrong answers to the exercises of notebooks/07_shipping_operator.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
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
            "    return {n for n, r in zip(names, readable) if re.search(r'\\b(at|c10|torch|std)::', r)}\n",
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
            "    return {r for r in readable if re.search(r'\\b(at|c10|torch)::', r)}\n",
            AssertionError,
            r"returned names that are not in the lines.*not their demangled text",
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
    ],
}
