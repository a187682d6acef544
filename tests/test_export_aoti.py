"""Chapter 7: chapter 4's operator through torch.export and AOTInductor, run elsewhere.

A small model (a linear embedding, then the triplet hinge loss) is exported
with torch.export, compiled ahead of time on the CPU with
torch._inductor.aoti_compile_and_package, and loaded in a fresh Python
process that imports torch and nothing of the book: the operator's library
is loaded there with torch.ops.load_library, the package with
torch._inductor.aoti_load_package.

The package does not contain the operator: its generated wrapper refers to
it by name (a proxy-executor call, listed in the package's wrapper .json),
and the process that runs the package must load the operator's library
first; without it, loading the package fails with a clear error. What does
not travel at all is Python: the fake implementation is needed only while
exporting and compiling, and the autograd formula not at all, since the
package is an inference artifact.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

import extending_pytorch._C as native
from extending_pytorch.ops import triplet_hinge_loss
from extending_pytorch.reference import reference_triplet_hinge_loss

SETTINGS = dict(t1=-0.5, t2=0.2, beta=0.3)


class Embed(torch.nn.Module):
    """Embeds three batches and scores them with the triplet hinge loss."""

    def __init__(self):
        super().__init__()
        self.project = torch.nn.Linear(16, 8)

    def forward(self, anchor, positive, negative):
        embed = [self.project(x) for x in (anchor, positive, negative)]
        return triplet_hinge_loss(*embed, reduction="none", **SETTINGS)


def inputs(batch, seed):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, 16, generator=generator) for _ in range(3))


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    torch.manual_seed(0)
    model = Embed().eval()
    batch = torch.export.Dim("batch", min=2, max=1024)
    exported = torch.export.export(
        model, inputs(8, 0), dynamic_shapes=({0: batch}, {0: batch}, {0: batch})
    )
    path = tmp_path_factory.mktemp("aoti") / "embed.pt2"
    torch._inductor.aoti_compile_and_package(exported, package_path=str(path))
    return model, exported, path


def test_export_keeps_the_operator_as_one_node(package):
    # Catches an export that decomposed or inlined the loss (then the package
    # would not exercise the C++ kernel at all).
    _, exported, _ = package
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert torch.ops.extending_pytorch.triplet_hinge_loss.default in targets


FRESH = """
import json, sys, torch
torch.ops.load_library(sys.argv[1])
model = torch._inductor.aoti_load_package(sys.argv[2])
results = {}
for name in ("small", "large"):
    args = torch.load(name + "_inputs.pt")
    out = model(*args)
    results[name] = out
    # The package computes values; nothing in it records a graph.
    grads_wanted = [a.clone().requires_grad_() for a in args]
    results[name + "_requires_grad"] = model(*grads_wanted).requires_grad
results["modules"] = sorted(m for m in sys.modules if m.startswith("extending_pytorch"))
torch.save(results, "outputs.pt")
"""


def test_package_runs_in_a_fresh_process(package, tmp_path):
    # Catches a package that needs the book's Python package at run time,
    # a kernel that the package calls with the wrong arguments, and a
    # batch size baked in at export (the second batch differs from the first).
    model, _, path = package
    small, large = inputs(8, 1), inputs(300, 2)
    torch.save(small, tmp_path / "small_inputs.pt")
    torch.save(large, tmp_path / "large_inputs.pt")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S -I would also drop torch; instead, check below that no module of the
    # book was imported in the fresh process.
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FRESH), native.__file__, str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = torch.load(tmp_path / "outputs.pt")
    assert out["modules"] == []
    with torch.no_grad():
        for name, args in (("small", small), ("large", large)):
            embed = [model.project(x) for x in args]
            expected = reference_triplet_hinge_loss(*embed, reduction="none", **SETTINGS)
            torch.testing.assert_close(out[name], expected)
            assert out[name + "_requires_grad"] is False


def test_package_refers_to_the_operator_by_name_only(package):
    # Catches a claim that the .pt2 carries the kernel: the operator appears
    # only as a name in the wrapper's proxy-executor description (.json), and
    # no file of the package is the operator's library.
    _, _, path = package
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        descriptions = [
            json.loads(archive.read(n)) for n in names if n.endswith(".wrapper.json")
        ]
    targets = [node["node"]["target"] for d in descriptions for node in d["nodes"]]
    assert targets == ["extending_pytorch::triplet_hinge_loss"]
    library_name = pathlib.Path(native.__file__).name
    assert not any(n.endswith(library_name) for n in names)


WITHOUT_LIBRARY = """
import sys, torch
torch._inductor.aoti_load_package(sys.argv[1])
"""


def test_package_without_the_operators_library_fails_clearly(package, tmp_path):
    # Catches the belief that the package is self-contained: a fresh process
    # that does not call torch.ops.load_library cannot load it, and the error
    # names the missing operator.
    _, _, path = package
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WITHOUT_LIBRARY), str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "Could not find schema for extending_pytorch::triplet_hinge_loss" in result.stderr
