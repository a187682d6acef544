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
