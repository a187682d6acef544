"""The migration page quotes real messages: check that today's PyTorch and compiler still print them."""

from __future__ import annotations

import shutil
import subprocess
import warnings

import pytest
import torch
from torch.autograd import Function

from conftest import REPO_ROOT

PAGE = (REPO_ROOT / "book" / "migration.md").read_text()


def normalise(text: str) -> str:
    # gcc prints ‘…’ in a UTF-8 locale and '…' in the C locale.
    return text.replace("‘", "'").replace("’", "'")


def assert_quoted(message: str) -> None:
    assert normalise(message) in normalise(
        PAGE
    ), f"book/migration.md should quote: {message}"


def test_torch_utils_ffi_is_gone():
    with pytest.raises(ModuleNotFoundError) as error:
        import torch.utils.ffi  # noqa: F401
    assert_quoted(f"ModuleNotFoundError: {error.value}")


def test_variable_is_a_shim_that_returns_tensors():
    from torch.autograd import Variable

    assert type(Variable(torch.ones(2))) is torch.Tensor
    assert isinstance(torch.ones(2), Variable)
    assert "`isinstance(t, Variable)` is true for *every* tensor" in PAGE


def test_saved_variables_warns():
    class Saved(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 2 * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_variables
            return 2 * grad

    with pytest.warns(DeprecationWarning) as record:
        Saved.apply(torch.ones(2, requires_grad=True)).sum().backward()
    assert_quoted(f"DeprecationWarning: {record[0].message}")


def test_non_static_forward_fails():
    namespace = {"Function": Function}
    exec(
        "class Legacy(Function):\n    def forward(self, x):\n        return 2 * x\n",
        namespace,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(RuntimeError) as error:
            namespace["Legacy"]()(torch.ones(2, requires_grad=True))
    first_sentences = str(error.value).split(" (Example")[0]
    assert_quoted(f"RuntimeError: {first_sentences}")


def test_volatile_is_ignored_with_a_warning():
    from torch.autograd import Variable

    with pytest.warns(UserWarning) as record:
        Variable(torch.ones(2), volatile=True)
    assert_quoted(f"UserWarning: {record[0].message}")


CPP_CASES = {
    "TH header": (
        "#include <TH/TH.h>\n",
        "fatal error: TH/TH.h: No such file or directory",
    ),
    "THC header": (
        "#include <THC/THC.h>\n",
        "fatal error: THC/THC.h: No such file or directory",
    ),
    "AT_CHECK": (
        '#include <c10/util/Exception.h>\nvoid f(int x) { AT_CHECK(x > 0, "x must be positive"); }\n',
        "error: 'AT_CHECK' was not declared in this scope",
    ),
}


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
@pytest.mark.parametrize("case", CPP_CASES, ids=list(CPP_CASES))
def test_removed_cpp_apis_fail_to_compile(case, tmp_path):
    from torch.utils.cpp_extension import include_paths

    source, message = CPP_CASES[case]
    (tmp_path / "legacy.cpp").write_text(source)
    result = subprocess.run(
        [
            "c++",
            "-std=c++17",
            "-fsyntax-only",
            *(f"-I{p}" for p in include_paths()),
            "legacy.cpp",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert normalise(message) in normalise(result.stderr), result.stderr
    assert_quoted(message)


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_at_assertm_compiles_and_means_torch_internal_assert(tmp_path):
    # The page: AT_ASSERTM still compiles, but means TORCH_INTERNAL_ASSERT (whose message
    # blames PyTorch, not the caller). Fails if it stops compiling or is mapped to anything else.
    from torch.utils.cpp_extension import include_paths

    from extending_pytorch.build_flags import CXX_STANDARD

    (tmp_path / "legacy.cpp").write_text(
        '#include <c10/util/Exception.h>\n'
        'void check(int dim) { AT_ASSERTM(dim == 4, "input must be 4-D"); }\n'
    )
    flags = [f"-std={CXX_STANDARD}", *(f"-I{p}" for p in include_paths())]
    compiled = subprocess.run(
        ["c++", *flags, "-fsyntax-only", "legacy.cpp"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert compiled.returncode == 0, compiled.stderr
    expanded = subprocess.run(
        ["c++", *flags, "-E", "-P", "legacy.cpp"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    body = expanded[expanded.rindex("void check(int dim)"):]
    # TORCH_INTERNAL_ASSERT's expansion calls torchInternalAssertFail; TORCH_CHECK's does not.
    assert "torchInternalAssertFail" in body, body
    assert "torchCheckFail" not in body, body
    assert_quoted("`AT_ASSERTM` still compiles, but it now means `TORCH_INTERNAL_ASSERT`")


# setuptools and pip do not depend on torch's version.
@pytest.mark.same_on_every_torch
def test_setup_py_install_warns_that_it_is_deprecated(tmp_path):
    import sys

    (tmp_path / "setup.py").write_text(
        'from setuptools import setup\nsetup(name="legacy_ext", version="0.0", py_modules=[])\n'
    )
    result = subprocess.run(
        [sys.executable, "setup.py", "install", "--root", str(tmp_path / "root")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    message = "SetuptoolsDeprecationWarning: setup.py install is deprecated."
    assert message in result.stdout + result.stderr, result.stdout + result.stderr
    assert_quoted(message)


@pytest.mark.same_on_every_torch
def test_isolated_build_does_not_see_torch(tmp_path):
    # pip builds a project with a pyproject.toml in a fresh environment holding only its build
    # requirements, which pip fetches from the package index (the only step that needs a network).
    import sys

    (tmp_path / "setup.py").write_text(
        'import torch\nfrom setuptools import setup\nsetup(name="legacy_ext", version="0.0", py_modules=[])\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
         "--target", str(tmp_path / "target"), "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    output = result.stdout + result.stderr
    if "No matching distribution found for setuptools" in output:
        pytest.skip("no package index reachable: pip cannot fetch setuptools for the isolated build")
    message = "ModuleNotFoundError: No module named 'torch'"
    assert result.returncode != 0 and message in output, output
    assert_quoted(message)
