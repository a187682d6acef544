"""Run the book's CUDA kernels on the CPU in every emulator build mode (make emulate).

For each mode of extending_pytorch.emulator (fast: the emulator's own checks;
memory: AddressSanitizer + UBSan; races: ThreadSanitizer) this runs
tests/test_emulator.py restricted to that mode, in its own process, and fails
if any mode reports anything: a wrong value, an unwritten output, a broken
rule of CUDA's collectives, an out-of-bounds or misaligned access, a race.

    python tools/emulate.py                       # every mode
    python tools/emulate.py --modes fast,memory
    python tools/emulate.py --csrc /tmp/copy/csrc # the kernels of a copy of
                                                  # extensions/csrc (e.g. with a bug put in)

Builds are cached under extensions/build/emulator/, keyed by the sources' hash.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODES = ("fast", "memory", "races")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: fast,memory,races")
    parser.add_argument("--csrc", help="read the kernels from this copy of extensions/csrc")
    # Anything else (-x, -k name, ...) is passed on to pytest.
    args, pytest_args = parser.parse_known_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; choose from {MODES}")
    env = dict(os.environ)
    if args.csrc:
        csrc = pathlib.Path(args.csrc).resolve()
        if not (csrc / "cuda" / "triplet.cu").is_file():
            parser.error(f"--csrc {csrc} has no cuda/triplet.cu")
        env["EXTENDING_PYTORCH_EMULATOR_CSRC"] = str(csrc)
    results = {}
    started = time.monotonic()
    for mode in modes:
        env["EXTENDING_PYTORCH_EMULATOR_MODES"] = mode
        command = [sys.executable, "-m", "pytest", "tests/test_emulator.py", "-q",
                   "-p", "no:cacheprovider", "-rfE", *pytest_args]
        print(f"== emulate: {mode} ==", flush=True)
        t = time.monotonic()
        code = subprocess.run(command, cwd=ROOT, env=env).returncode
        results[mode] = (code, time.monotonic() - t)
    print("\n== emulate: summary ==")
    for mode, (code, seconds) in results.items():
        # pytest: 0 passed, 5 nothing collected/selected (a mode this machine cannot build).
        status = {0: "ok", 5: "nothing ran"}.get(code, f"FAILED (pytest exit {code})")
        print(f"  {mode:7s} {status:28s} {seconds:6.1f} s")
    print(f"  total {time.monotonic() - started:.1f} s")
    return 0 if all(code == 0 for code, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
