"""The GPU report (extending_pytorch.gpu_report, make gpu-report), without a GPU.

What runs here: the no-GPU record, the step runner (pass, fail, crash, time-out,
budget), the parsers of pytest's, compute-sanitizer's and Nsight Compute's
output on samples of each, the selection of the GPU tests, and the rendering of
a record (tables, plot, Markdown) that the pages use. The steps themselves need
a GPU; `make gpu-report` runs them there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from extending_pytorch import bench
from extending_pytorch.gpu_report import parse, pytest_plugin, records, run, steps

from conftest import REPO_ROOT

# The report's own logic, on sample outputs: the same on every torch (the report runs on a GPU
# machine's torch, whatever it is).
pytestmark = pytest.mark.same_on_every_torch

PYTHON = sys.executable


def sample_report(**changes) -> dict:
    """A record as a GPU run writes it, with made-up figures (two sizes, two dtypes)."""
    rows = []
    for dtype, size in (("float32", 4), ("bfloat16", 2)):
        for batch, dim in ((4096, 512), (32768, 8192)):
            copy = 4000.0
            for k, name in enumerate(("eager", "compile", "cpp", "triton")):
                seconds = (k + 1) * 1e-4 * batch * dim / 4096 / 512
                for task, elements in bench.MINIMUM_TRAFFIC_ELEMENTS.items():
                    gbps = elements * batch * dim * size / seconds / 1e9
                    rows.append(dict(implementation=name, task=task, batch=batch, dim=dim, dtype=dtype,
                                     seconds=seconds, spread=0.01, copy_gbps=copy, gbps=gbps,
                                     fraction_of_copy=gbps / copy))
    n = 32768 * 8192 * 4
    report = dict(
        schema=records.SCHEMA, kind="report", budget_s=460, seconds=300,
        provenance=dict(date="2026-12-01T10:20:00Z", command="python -m extending_pytorch.gpu_report",
                        gpus=[dict(name="NVIDIA H100 80GB HBM3", capability="9.0", memory_gib=79.2,
                                   driver="580.1")],
                        processor="x", cpu_count=16, torch="2.11.0+cu130", torch_cuda="13.0", nvcc="13.0",
                        triton="3.6.0", python="3.12.3", platform="Linux x86_64", commit="abc", dirty=False),
        steps=[dict(name="tests", what="the GPU tests", status="passed", seconds=80.0, summary="250 passed"),
               dict(name="sanitizer-memcheck", what="memcheck", status="failed", seconds=20.0,
                    summary="ERROR SUMMARY: 2 errors")],
        benchmark=dict(machine=None, records=rows),
        dram=[dict(implementation="cpp", batch=32768, dim=8192, dtype="float32", element_size=4,
                   kernels=[dict(kernel="triplet_forward_kernel", bytes_read=3 * n, bytes_written=1e5, seconds=7e-4),
                            dict(kernel="triplet_backward_kernel", bytes_read=6 * n, bytes_written=3 * n, seconds=2.4e-3)])],
    )
    report.update(changes)
    return report


# ---- The record without a GPU (what CI runs) ---------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU record needs a machine without a GPU")
def test_make_gpu_report_without_a_gpu_writes_a_record_that_says_so(tmp_path):
    # Catches a no-GPU run that crashes, measures something, leaves a step out,
    # or writes a record the pages cannot read.
    # As on a GPU machine without matplotlib: an import of it fails.
    code = (
        "import sys; sys.modules['matplotlib'] = None; "
        "from extending_pytorch.gpu_report import main; "
        f"main(['--output-dir', {str(tmp_path)!r}, '--log-dir', {str(tmp_path / 'logs')!r}])"
    )
    done = subprocess.run(
        [PYTHON, "-c", code],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No CUDA device on this machine: nothing was measured" in done.stdout
    (json_path,) = tmp_path.glob("*.json")
    report = json.loads(json_path.read_text())
    assert report["provenance"]["gpus"] == []
    assert report["provenance"]["torch"] == torch.__version__
    planned = [s.name for s in steps.plan(PYTHON, tmp_path, has_gpu=False)]
    assert [s["name"] for s in report["steps"]] == planned
    assert all(s["status"] == "skipped" and s["reason"] == "no CUDA device on this machine"
               for s in report["steps"])
    assert report["benchmark"] is None and report["dram"] == []
    assert "No CUDA device was found: nothing was measured" in json_path.with_suffix(".md").read_text()
    # The pages show GPU records only; asked for every record, the loader reads it.
    assert records.load_reports(tmp_path) == []
    (loaded,) = records.load_reports(tmp_path, gpu_only=False)
    assert loaded["steps"] == report["steps"]


def test_the_plan_has_every_check_the_report_promises(tmp_path):
    names = [s.name for s in steps.plan(PYTHON, tmp_path, has_gpu=True)]
    assert names[0] == "build"
    for name in ("tests", "wrong-rank", "sweep", "ncu-cpp", "ncu-compile", "ncu-triton", "stable", "emulator",
                 *(f"sanitizer-{tool}" for tool in ("memcheck", "racecheck", "initcheck", "synccheck"))):
        assert name in names


def test_the_stable_step_needs_torch_2_13(monkeypatch, tmp_path):
    monkeypatch.setattr(steps, "torch_version", lambda: (2, 11))
    stable = {s.name: s for s in steps.plan(PYTHON, tmp_path, has_gpu=True)}["stable"]
    assert stable.skip == "the stable package needs torch 2.13 or newer"
    monkeypatch.setattr(steps, "torch_version", lambda: (2, 13))
    assert {s.name: s for s in steps.plan(PYTHON, tmp_path, has_gpu=True)}["stable"].skip is None


# ---- The step runner ----------------------------------------------------------


def python_step(name, code, limit=60, **options):
    return steps.Step(name, f"runs {name}", [PYTHON, "-c", code], limit, **options)


def run_one(step, tmp_path, seconds_left=100):
    return steps.run_step(step, env=dict(__import__("os").environ), log_dir=tmp_path, seconds_left=seconds_left)


def test_a_step_passes_fails_or_crashes_and_says_so(tmp_path):
    # Catches a runner that takes a failure or a crash for a pass.
    passed = run_one(python_step("ok", "print('all good')"), tmp_path)
    assert passed["status"] == "passed" and passed["summary"] == "all good"
    failed = run_one(python_step("bad", "import sys; sys.exit('it broke')"), tmp_path)
    assert failed["status"] == "failed" and failed["summary"] == "it broke"
    crashed = run_one(python_step("crash", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), tmp_path)
    assert crashed["status"] == "failed" and crashed["summary"] == "killed by SIGSEGV"
    assert (tmp_path / "bad.log").read_text().strip() == "it broke"


def test_a_step_past_its_limit_is_stopped_with_its_children(tmp_path):
    # Catches a time-out that leaves a grandchild running (compute-sanitizer and
    # ncu start Python as their child): the grandchild would write its file later.
    marker = tmp_path / "late"
    code = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        f"\"import time, pathlib; time.sleep(3); pathlib.Path({str(marker)!r}).write_text('x')\"])"
    )
    result = run_one(python_step("slow", code, limit=1), tmp_path)
    assert result["status"] == "timed out" and result["summary"] == "stopped after 1 s (its limit)"
    subprocess.run([PYTHON, "-c", "import time; time.sleep(4)"])
    assert not marker.exists()


def test_a_step_gets_what_is_left_of_the_budget(tmp_path):
    # Catches a runner that gives a step its own limit (60 s) when less is left.
    result = run_one(python_step("slow", "import time; time.sleep(30)", limit=60), tmp_path, seconds_left=6)
    assert result["status"] == "timed out" and result["summary"] == "stopped after 6 s (its limit)"
    skipped = run_one(python_step("late", "print(1)"), tmp_path, seconds_left=2)
    assert skipped["status"] == "skipped" and "budget" in skipped["reason"]


def test_one_failed_step_does_not_stop_the_next_and_a_failed_build_skips_the_rest(monkeypatch, tmp_path):
    # Catches a report that stops at the first failure, and one that runs
    # steps after a failed build (each would fail for the same reason).
    def fake_plan(python, work_dir, *, has_gpu, quick=False):
        return [python_step("first", "import sys; sys.exit(1)"), python_step("second", "print('ran')")]

    monkeypatch.setattr(steps, "plan", fake_plan)
    report = run.run_report(log_dir=tmp_path, announce=lambda *a, **k: None)
    assert [(s["name"], s["status"]) for s in report["steps"]] == [("first", "failed"), ("second", "passed")]

    def failing_build(python, work_dir, *, has_gpu, quick=False):
        return [python_step("build", "import sys; sys.exit(1)"), python_step("tests", "print('ran')")]

    monkeypatch.setattr(steps, "plan", failing_build)
    report = run.run_report(log_dir=tmp_path, announce=lambda *a, **k: None)
    assert report["steps"][1]["status"] == "skipped"
    assert report["steps"][1]["reason"] == "the operators did not build (see the build step)"
    assert "output" not in report["steps"][0]  # only its tail goes into the record


# ---- What the tools print -------------------------------------------------------


NCU_SAMPLE = '''\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "triplet_forward_kernel": 0%....50%....100% - 3 passes
==PROF== Profiling "triplet_backward_kernel": 0%....50%....100% - 3 passes
profiled one forward + backward of cpp at B x D = 32768 x 8192, float32
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","void triplet_forward_kernel<float>(TripletInputs<float>, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","3,221,225,472"
"0","4242","python3.12","127.0.0.1","void triplet_forward_kernel<float>(TripletInputs<float>, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","131,072"
"0","4242","python3.12","127.0.0.1","void triplet_forward_kernel<float>(TripletInputs<float>, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","722,016"
"1","4242","python3.12","127.0.0.1","void triplet_backward_kernel<float>(TripletInputs<float>, float const*, float*, float*, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","6.44"
"1","4242","python3.12","127.0.0.1","void triplet_backward_kernel<float>(TripletInputs<float>, float const*, float*, float*, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Gbyte","3.20"
"1","4242","python3.12","127.0.0.1","void triplet_backward_kernel<float>(TripletInputs<float>, float const*, float*, float*, float*)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","2.39"
'''


def test_nsight_compute_csv_gives_bytes_and_seconds_per_kernel_in_base_units():
    # Catches a parser that mixes kernels up, keeps units (Gbyte, msecond) unscaled,
    # or chokes on thousands separators.
    forward, backward = parse.ncu_kernels(NCU_SAMPLE)
    assert forward == dict(id=0, kernel="void triplet_forward_kernel<float>(TripletInputs<float>, float*)",
                           bytes_read=3221225472.0, bytes_written=131072.0, seconds=pytest.approx(722.016e-6))
    assert backward["bytes_read"] == pytest.approx(6.44e9) and backward["bytes_written"] == pytest.approx(3.2e9)
    assert backward["seconds"] == pytest.approx(2.39e-3)
    assert parse.short_kernel_name(backward["kernel"]) == "triplet_backward_kernel"
    assert parse.ncu_kernels("==PROF== no kernels were profiled") == []


def test_nsight_compute_2025_units_are_read():
    # Catches the report's first run on an H200 (Nsight Compute 2025 prints "ns"):
    # the parser raised there, and the report ended without a record.
    forward, _ = parse.ncu_kernels(NCU_SAMPLE.replace('"nsecond","722,016"', '"ns","722,016"'))
    assert forward["seconds"] == pytest.approx(722.016e-6)


def test_an_output_the_report_cannot_read_fails_that_step_only(monkeypatch, tmp_path):
    # Catches a parser's exception ending the whole report (and its record) at one step.
    def unreadable(output, returncode):
        raise ValueError("unknown Nsight Compute unit 'furlong'")

    def fake_plan(python, work_dir, *, has_gpu, quick=False):
        first = python_step("ncu-x", "print('profiled')")
        first.summarize = unreadable
        return [first, python_step("second", "print('ran')")]

    monkeypatch.setattr(steps, "plan", fake_plan)
    report = run.run_report(log_dir=tmp_path, announce=lambda *a, **k: None)
    assert [(s["name"], s["status"]) for s in report["steps"]] == [("ncu-x", "failed"), ("second", "passed")]
    assert "furlong" in report["steps"][0]["summary"]


def test_parallel_runs_lanes_side_by_side_and_the_alone_steps_by_themselves(monkeypatch, tmp_path):
    # Catches a --parallel that runs a step which times kernels or reads DRAM counters
    # while another step runs (its figures would include the other's work), and one that
    # runs the lanes one after another: the first lane's step waits for a file the
    # second lane's step writes, and fails if it does not come.
    events, flag = tmp_path / "events", tmp_path / "flag"

    def step(name, body="", **fields):
        code = (f"import pathlib, time\nlog = pathlib.Path({str(events)!r})\n"
                f"with log.open('a') as f: f.write('start {name} %r\\n' % time.monotonic())\n"
                f"{body}\n"
                f"with log.open('a') as f: f.write('end {name} %r\\n' % time.monotonic())\n")
        made = python_step(name, code)
        for key, value in fields.items():
            setattr(made, key, value)
        return made

    waits = (f"flag = pathlib.Path({str(flag)!r})\n"
             "for _ in range(600):\n    if flag.exists(): break\n    time.sleep(0.1)\n"
             "else:\n    raise SystemExit('the other lane never ran beside this one')")
    writes = f"pathlib.Path({str(flag)!r}).write_text('here')\ntime.sleep(0.3)"

    def fake_plan(python, work_dir, *, has_gpu, quick=False):
        return [step("build", alone=True), step("tests", waits, lane="a"), step("sweep", alone=True),
                step("sanitizer", writes, lane="b"), step("ncu", alone=True)]

    monkeypatch.setattr(steps, "plan", fake_plan)
    report = run.run_report(parallel=True, log_dir=tmp_path, announce=lambda *a, **k: None)
    assert [(s["name"], s["status"]) for s in report["steps"]] == [
        ("build", "passed"), ("tests", "passed"), ("sweep", "passed"), ("sanitizer", "passed"), ("ncu", "passed")]
    spans = {}
    for line in events.read_text().splitlines():
        what, name, when = line.split()
        spans.setdefault(name, {})[what] = float(when)
    for alone in ("build", "sweep", "ncu"):
        for other, span in spans.items():
            if other != alone:
                apart = span["end"] <= spans[alone]["start"] or span["start"] >= spans[alone]["end"]
                assert apart, f"{other} ran while {alone}, which must run alone, ran"
    assert spans["build"]["end"] <= spans["tests"]["start"]  # the build first: the others load its operators
    assert report["parallel"] is True


def test_unknown_nsight_compute_units_are_an_error_not_a_guess():
    with pytest.raises(ValueError, match="unknown Nsight Compute unit 'furlong'"):
        parse.ncu_kernels(NCU_SAMPLE.replace('"nsecond"', '"furlong"'))


def test_sanitizer_and_pytest_summaries():
    clean = "========= COMPUTE-SANITIZER\nkernels ran\n========= ERROR SUMMARY: 0 errors\n"
    assert parse.sanitizer_summary(clean) == "ERROR SUMMARY: 0 errors"
    assert parse.sanitizer_errors(clean) == 0
    racy = ("========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n"
            "========= ERROR SUMMARY: 2 errors\n")
    assert parse.sanitizer_summary(racy) == (
        "RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings); ERROR SUMMARY: 2 errors")
    assert parse.sanitizer_errors(racy) == 2
    assert parse.sanitizer_errors("Segmentation fault") is None
    output = "....s\nFAILED tests/test_cuda.py::test_x\n===== 1 failed, 250 passed, 3 skipped in 81.2s =====\n"
    assert parse.pytest_summary(output) == "1 failed, 250 passed, 3 skipped in 81.2s"


def test_the_test_step_keeps_exactly_the_tests_that_run_on_a_gpu():
    # Catches a selection that drops a GPU test (it would then run nowhere:
    # make test skips it) or keeps a CPU one (make test runs those), on the
    # test files' real collection. Triton's tests run on DEVICE, the GPU where
    # there is one, without a mark.
    listed = subprocess.run(
        [PYTHON, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "extending_pytorch.gpu_report.pytest_plugin", *steps.TEST_FILES],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    kept = {line.split("[")[0] for line in listed.stdout.splitlines() if "::" in line}
    for test in (
        "tests/test_cuda.py::test_layouts_dims_and_dtypes_cuda",
        "tests/test_cuda.py::test_cuda_graph_capture_replays_the_same_results",
        "tests/test_involution.py::test_wrong_rank_is_refused_cuda",
        "tests/test_triton.py::test_16_bit_values_and_gradients_against_float64",
        "tests/test_triton.py::test_offsets_are_64_bit",
        "tests/test_triton.py::test_cuda_graph_capture_replays_the_same_results_cuda",
        "tests/test_cpp_ops.py::test_opcheck_cuda",
    ):
        assert test in kept, f"{test} needs a GPU and is not selected"
    for test in (
        "tests/test_cuda.py::test_kernel_file_compiles_with_nvcc_for_sm80_and_sm90",
        "tests/test_cuda.py::test_binding_compiles_against_torch_and_cuda_headers",
        "tests/test_cuda.py::test_layouts_dims_and_16_bit_dtypes_cpu",
        "tests/test_cuda.py::test_a_capture_that_fails_in_its_process_fails_the_test_with_the_childs_error",
        "tests/test_involution.py::test_wrong_rank_is_refused_cpu",
        "tests/test_cpp_ops.py::test_opcheck_cpu",
    ):
        assert test not in kept, f"{test} runs without a GPU and is selected"


def test_every_test_file_of_the_gpu_step_exists():
    for name in (*steps.TEST_FILES, steps.STABLE_TEST_FILE):
        assert (REPO_ROOT / name).is_file(), name


# ---- Rendering (the pages) ------------------------------------------------------


def test_a_record_renders_as_tables_with_its_provenance():
    # Catches a table that puts a figure under the wrong implementation or
    # size, or a caption without the GPU, torch and date.
    report = sample_report()
    table = records.report_table(report, "float32")
    assert table.columns == ["B", "D", "eager µs", "torch.compile µs", "CUDA operator µs", "Triton µs",
                             "copy GB/s"]
    at = {(r["implementation"], r["batch"]): r for r in report["benchmark"]["records"]
          if r["dtype"] == "float32" and r["task"] == "forward+backward"}
    first = table.rows[0]
    assert first[:2] == ["4096", "512"]
    assert first[4] == f"{at['cpp', 4096]['seconds'] * 1e6:,.0f} ({at['cpp', 4096]['fraction_of_copy']:.2f})"
    assert first[-1] == "4,000"
    for words in ("NVIDIA H100 80GB HBM3", "driver 580.1", "torch 2.11.0+cu130", "2026-12-01", "commit abc",
                  "forward+backward, float32"):
        assert words in table.caption
    bf16 = records.report_table(report, "bfloat16", task="forward")
    assert "forward, bfloat16" in bf16.caption and bf16.rows[1][:2] == ["32768", "8192"]


def test_dram_bytes_are_shown_in_units_of_n():
    table = records.dram_table(sample_report())
    rows = {(r[0], r[1]): r for r in table.rows}
    assert rows["CUDA operator", "triplet_backward_kernel"][2:4] == ["6.00", "3.00"]
    assert rows["CUDA operator", "total"][2:4] == ["9.00", "3.00"]
    assert records.dram_table(sample_report(dram=[])) is None


def test_the_plot_has_one_line_per_implementation_and_a_panel_per_dtype():
    import matplotlib

    matplotlib.use("Agg")
    fig = records.plot_fraction_of_copy(sample_report())
    panels = fig.axes
    assert [a.get_title() for a in panels] == ["forward+backward, float32", "forward+backward, bfloat16"]
    labels = [line.get_label() for line in panels[0].get_lines() if not line.get_label().startswith("_")]
    assert labels == ["eager", "torch.compile", "CUDA operator", "Triton"]
    cpp = panels[0].get_lines()[2]
    expected = [r["fraction_of_copy"] for r in sample_report()["benchmark"]["records"]
                if r["implementation"] == "cpp" and r["dtype"] == "float32" and r["task"] == "forward+backward"]
    assert list(cpp.get_ydata()) == pytest.approx(expected)
    no_copy = sample_report()
    for r in no_copy["benchmark"]["records"]:
        r["fraction_of_copy"] = None
    with pytest.raises(ValueError, match="no fraction of the copy bandwidth"):
        records.plot_fraction_of_copy(no_copy)


def test_records_round_trip_and_name_their_files(tmp_path):
    report = sample_report()
    json_path, md_path = records.write(report, tmp_path)
    assert json_path.name == "2026-12-01-1020-nvidia-h100-80gb-hbm3-torch-2.11.0-cu130.json"
    (loaded,) = records.load_reports(tmp_path)
    assert loaded["benchmark"] == report["benchmark"] and loaded["file"] == json_path.name
    text = md_path.read_text()
    assert "# GPU report: NVIDIA H100 80GB HBM3, 2026-12-01" in text
    assert "| sanitizer-memcheck | failed | 20 | ERROR SUMMARY: 2 errors |" in text
    assert "## DRAM bytes (Nsight Compute)" in text
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(ValueError, match="other.json: not a GPU report record"):
        records.load_reports(tmp_path)


def test_every_committed_record_loads_and_renders():
    # The records the pages show: each must load, render its tables, and say
    # where it was made; a transcribed one says it was transcribed.
    found = records.load_reports()
    assert found, "notebooks/data/gpu/ holds no GPU record"
    for report in found:
        md = REPO_ROOT / "notebooks" / "data" / "gpu" / report["file"].replace(".json", ".md")
        assert md.read_text() == records.markdown(report), f"{md.name} is stale: rewrite it with records.write"
        for dtype in records.dtypes(report):
            assert records.report_table(report, dtype).rows
        assert records.steps_table(report).rows
        if report["kind"] == "transcribed":
            assert "transcribed by hand" in records.where(report)


def test_bench_measures_in_the_dtype_it_is_given():
    # Catches a sweep whose bfloat16 rows were timed in float32 (the dtype
    # ignored) or whose minimum traffic counts 4-byte elements for 2-byte ones.
    result = bench.run([(8, 16)], rounds=1, min_run_time=0.001, names=["eager"], dtype=torch.bfloat16)
    assert result["dtype"] == "bfloat16"
    for r in result["records"]:
        assert r["dtype"] == "bfloat16"
        assert r["floor_bytes"] == bench.MINIMUM_TRAFFIC_ELEMENTS[r["task"]] * 8 * 16 * 2


def test_the_readme_lists_every_committed_record():
    # The README cannot render the records: it links each one's Markdown file.
    readme = (REPO_ROOT / "README.md").read_text()
    for md in sorted((REPO_ROOT / "notebooks" / "data" / "gpu").glob("*.md")):
        assert f"(notebooks/data/gpu/{md.name})" in readme, f"README.md does not link {md.name}"


def test_the_steps_table_lets_long_results_wrap():
    # A step's result is a sentence: right-aligned and unwrapped it ran off the page.
    html = records.steps_table(sample_report())._repr_html_()
    assert '<td style="text-align:left; padding:0.2em 0.7em">250 passed</td>' in html
    assert '<td style="text-align:left; padding:0.2em 0.7em">passed</td>' in html
    assert "nowrap\">250 passed" not in html


def test_the_recorded_command_names_no_path_of_the_machine():
    # Catches a record (and the captions that quote it) showing where it ran.
    from extending_pytorch.gpu_report import environment

    assert environment.command(["--output-dir", "/home/me/out", "--quick", "--log-dir=/tmp/x"]) == (
        "python -m extending_pytorch.gpu_report --output-dir DIR --quick --log-dir=DIR")
    assert environment.command([]) == "python -m extending_pytorch.gpu_report"
    # A note is kept in the record's notes: the command says one was given.
    assert environment.command(["--note", "helion 1.4.0 here", "--note=x"]) == (
        "python -m extending_pytorch.gpu_report --note TEXT --note=TEXT")


def test_a_step_can_fail_on_what_it_printed_and_gets_its_own_environment(tmp_path):
    # Catches an ncu step recorded as passed although it profiled nothing, and
    # a sanitizer step run with PyTorch's caching allocator on (the variable
    # that turns it off must reach the process).
    plan = {s.name: s for s in steps.plan(PYTHON, tmp_path, has_gpu=True)}
    assert plan["ncu-cpp"].verify("==PROF== Disconnected") == "ncu exited 0 but profiled no kernel"
    assert plan["ncu-cpp"].verify(NCU_SAMPLE) is None
    assert plan["sanitizer-memcheck"].env == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    step = python_step("env", "import os; print(os.environ['PYTORCH_NO_CUDA_MEMORY_CACHING'])",
                       env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                       verify=lambda out: None if "kernel" in out else "no kernel in the output")
    result = run_one(step, tmp_path)
    assert (result["status"], result["summary"]) == ("failed", "no kernel in the output")
    assert result["output"].strip() == "1"


def test_helion_runs_under_the_configs_the_autotuning_step_kept(monkeypatch, tmp_path):
    # Catches a sweep that ignores the tuned configs, and one that loses the forward's when
    # the step was stopped while the backward tuned (the H200's first run was stopped so).
    helion = pytest.importorskip("helion", reason="helion is installed on Linux only")
    from extending_pytorch import helion_ops
    from extending_pytorch.gpu_report import workloads

    monkeypatch.setattr(helion_ops, "forward_kernel", helion_ops.forward_kernel)
    monkeypatch.setattr(helion_ops, "backward_kernel", helion_ops.backward_kernel)
    assert workloads.use_helion_configs(tmp_path / "missing.json") is None
    assert helion_ops.forward_kernel.configs == [helion_ops.FORWARD_CONFIG]
    tuned = dict(block_sizes=[2, 256], num_warps=8, num_stages=1)
    path = tmp_path / "helion_configs.json"
    path.write_text(json.dumps(dict(batch=32768, dim=8192, dtype="float32", effort="quick", seconds=240.0,
                                    forward=tuned, backward=None)))
    record = workloads.use_helion_configs(path)
    assert helion_ops.forward_kernel.configs == [helion.Config(**tuned)]
    assert helion_ops.backward_kernel.configs == [helion_ops.BACKWARD_CONFIG]
    text = records.markdown(sample_report(helion_configs=record))
    assert '- forward: `{"block_sizes": [2, 256], "num_stages": 1, "num_warps": 8}`' in text
    assert "- backward: not tuned (stopped)" in text

