"""tools/colab_torch.py: what each chapter's Colab setup cell does with the torch it finds."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from conftest import load_tool

# A script of the book's: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch

colab_torch = load_tool("colab_torch")


@pytest.mark.parametrize(
    "torch_version, driver, action",
    [
        ("2.15.0+cu132", None, "keep"),
        ("2.13.0+cpu", "535.104.05", "keep"),  # supported: kept whatever the driver
        ("2.14.1", None, "keep"),
        ("2.11.0+cu128", None, "install"),  # Colab's CPU runtime, June 2026
        ("2.11.0+cu128", "580.82.07", "install"),  # a GPU whose driver runs CUDA 13
        ("2.11.0+cu128", "550.54.15", "old-driver"),  # the CUDA 13 build would not see it
        ("2.9.1", None, "install"),
        (None, None, "install"),  # no torch at all
    ],
)
def test_decide(torch_version, driver, action):
    # Catches a version compared as text ("2.9" > "2.13") or a driver check that keeps an old torch.
    assert colab_torch.decide(torch_version, driver) == action


def test_bad_version_names_what_was_expected():
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR.*got 'nightly'"):
        colab_torch.major_minor("nightly")


def fake_runtime(monkeypatch, torch_version, driver, sees_gpu="True"):
    """Colab as the script sees it; returns the commands it runs."""
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        stdout = f"2.15.0+cu132 {sees_gpu}\n" if "-c" in command else ""
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(colab_torch, "installed_torch", lambda: torch_version)
    monkeypatch.setattr(colab_torch, "gpu_driver", lambda: driver)
    monkeypatch.setattr(colab_torch.subprocess, "run", run)
    return commands


def test_old_torch_is_replaced_by_the_pinned_one_and_checked_in_a_fresh_process(monkeypatch):
    # (monkeypatch puts this process's torch back into sys.modules afterwards.)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    commands = fake_runtime(monkeypatch, "2.11.0+cu128", "580.82.07")
    colab_torch.main()
    install, check = commands
    assert install[-2:] == ["torch==2.15.0", "triton==3.9.0"], install
    assert check[:2] == [sys.executable, "-c"] and "torch.cuda.is_available()" in check[2]


def test_a_gpu_the_new_torch_cannot_see_is_an_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    fake_runtime(monkeypatch, "2.11.0+cu128", "580.82.07", sees_gpu="False")
    with pytest.raises(RuntimeError, match="does not see this runtime's GPU"):
        colab_torch.main()


def test_torch_already_imported_asks_for_a_restart_and_installs_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    commands = fake_runtime(monkeypatch, "2.11.0+cu128", None)
    with pytest.raises(RuntimeError, match="Restart session"):
        colab_torch.main()
    assert commands == []


def test_supported_torch_installs_nothing_but_a_missing_triton(monkeypatch):
    commands = fake_runtime(monkeypatch, "2.15.0+cu132", None)
    monkeypatch.setattr(colab_torch.importlib.util, "find_spec", lambda name: object())
    colab_torch.main()
    assert commands == []
