"""Reader profile (d), macOS, at the requirements level: no Mac is here, so CI checks what pip
would install on one (book/setup.md, "Where the book runs").

pip evaluates a requirement's environment marker with the interpreter that runs it (its
--platform option does not change that), so the markers are evaluated here for a Mac, with
packaging, the library pip uses: requirements.txt's own, and those of the pinned torch's
dependencies (which pull in triton and NVIDIA's CUDA libraries on Linux only).
"""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.requirements import Requirement

from conftest import REPO_ROOT

# The book's files and torch's metadata: the same on every torch we pin (run once).
pytestmark = pytest.mark.same_on_every_torch

MACOS = {
    "sys_platform": "darwin",
    "platform_system": "Darwin",
    "platform_machine": "arm64",
    "os_name": "posix",
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
# Linux-only wheels: Triton (triton-lang/triton#8380) and Helion, which generates Triton; NVIDIA's
# CUDA libraries.
LINUX_ONLY = ("triton", "helion", "nvidia-", "cuda-")


def installed_on(requirements: list[str], environment: dict) -> list[str]:
    """The names of the requirements whose marker holds in `environment`."""
    names = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            names.append(requirement.name)
    return names


def book_requirements() -> list[str]:
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_macos_gets_every_requirement_but_the_linux_only_ones():
    # Catches a Linux-only pin without its marker (triton==3.9.0 alone made pip fail on a Mac).
    requirements = book_requirements()
    on_mac = installed_on(requirements, MACOS)
    assert [n for n in on_mac if n.startswith(LINUX_ONLY)] == [], on_mac
    # ... and only those are left out: torch, numpy, the site's tools and the tests' all install.
    left_out = [Requirement(line).name for line in requirements if Requirement(line).name not in on_mac]
    assert left_out and all(n.startswith(LINUX_ONLY) for n in left_out), left_out
    assert "torch" in on_mac
    linux = dict(MACOS, sys_platform="linux", platform_system="Linux", platform_machine="x86_64")
    assert installed_on(requirements, linux) == [Requirement(line).name for line in requirements]


def test_pinned_torch_pulls_no_linux_only_package_on_macos():
    pinned = next(line for line in book_requirements() if line.startswith("torch=="))
    if importlib.metadata.version("torch").split("+")[0] != pinned.split("==")[1]:
        pytest.skip(f"this environment's torch is not the pinned {pinned}")
    dependencies = importlib.metadata.requires("torch")
    on_mac = installed_on(dependencies, MACOS)
    assert [n for n in on_mac if n.startswith(LINUX_ONLY)] == [], on_mac
    # ... while on Linux they are there: the markers are what keeps them off a Mac.
    linux = dict(MACOS, sys_platform="linux", platform_system="Linux", platform_machine="x86_64")
    assert [n for n in installed_on(dependencies, linux) if n.startswith(LINUX_ONLY)]
