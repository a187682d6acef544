"""Tables, recorded outputs and the measuring helpers the chapters share."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402
from myst_nb.ext.glue import extract_glue_data_cell  # noqa: E402

import extending_pytorch as ep  # noqa: E402
from extending_pytorch import bench, benchmarking, display  # noqa: E402


def test_table_text_aligns_columns_and_keeps_the_caption():
    table = ep.Table(
        ["size", "time"],
        [["small", "1.5 ms"], ["large", "12.25 ms"]],
        caption="Measured somewhere.",
    )
    assert str(table).splitlines() == [
        "size       time",
        "-----  --------",
        "small    1.5 ms",
        "large  12.25 ms",
        "Measured somewhere.",
    ]
    assert repr(table) == str(table)


def test_table_html_has_every_cell_escaped():
    table = ep.Table(["a<b", "n"], [["x & y", 3]], caption="<caption>")
    markup = table._repr_html_()
    cells = re.findall(r"<t[hd] [^>]*>(.*?)</t[hd]>", markup)
    assert cells == ["a&lt;b", "n", "x &amp; y", "3"]
    assert "&lt;caption&gt;</caption>" in markup
    assert "<caption>" not in markup.replace(
        '<caption style="caption-side:bottom; text-align:left">', ""
    )


def test_table_refuses_rows_of_the_wrong_length():
    with pytest.raises(
        ValueError,
        match=re.escape("rows[1] has 1 cells, expected 2 (one per column)"),
    ):
        ep.Table(["a", "b"], [["1", "2"], ["3"]])


def test_text_shows_without_quotes():
    text = ep.Text("first line\nsecond <line>")
    assert repr(text) == "first line\nsecond <line>"
    assert text._repr_html_() == "<p>first line</p><p>second &lt;line&gt;</p>"


class FakeShell:
    """What `ep.show` uses of a running IPython kernel: its formatter."""

    display_formatter = DisplayFormatter()


def recorded(monkeypatch, value, name):
    """What `ep.show` displays in Jupyter: (bundle, metadata) per call."""
    calls = []

    def fake_display(bundle, raw, metadata):
        assert raw is True
        calls.append((bundle, metadata))

    monkeypatch.setattr("IPython.get_ipython", lambda: FakeShell())
    monkeypatch.setattr("IPython.display.display", fake_display)
    ep.show(value, name=name)
    return calls


def test_show_displays_the_value_under_a_name_the_site_finds(monkeypatch):
    table = ep.Table(["a"], [["1"]])
    [(bundle, metadata)] = recorded(monkeypatch, table, "timings")
    assert bundle["text/html"] == table._repr_html_()
    assert bundle["text/plain"] == str(table)
    # myst-nb, which builds the site, reads the stored output back by name,
    # and keeps it visible in the chapter.
    output = nbformat.v4.new_output(
        "display_data", data=bundle, metadata=metadata
    )
    cell = nbformat.v4.new_code_cell(outputs=[output])
    [(key, found)] = extract_glue_data_cell(cell)
    assert key == "timings"
    assert found["data"]["text/html"] == table._repr_html_()
    assert cell.outputs == [output]


def test_show_closes_a_figure_so_it_appears_once(monkeypatch):
    fig, axis = plt.subplots()
    axis.plot([1, 2], [3, 4])
    recorded(monkeypatch, fig, "plot")
    assert fig.number not in plt.get_fignums()


def test_show_prints_the_value_outside_jupyter(capsys):
    ep.show(ep.Table(["a"], [["1"]]), name="timings")
    assert capsys.readouterr().out == "a\n-\n1\n"


@pytest.mark.parametrize("name", ["two words", "", "1st", None])
def test_show_refuses_a_name_the_site_cannot_use(monkeypatch, name):
    with pytest.raises(ValueError, match="name must be an identifier"):
        recorded(monkeypatch, ep.Text("x"), name)


def test_compare_interleaves_rounds_and_takes_medians():
    order = []
    cases = {
        key: ("order.append(key)", dict(order=order, key=key))
        for key in ("a", "b")
    }
    medians = ep.compare(cases, rounds=2, min_run_time=0.001)
    assert set(medians) == {"a", "b"} and all(
        seconds > 0 for seconds in medians.values()
    )
    runs = [
        key for i, key in enumerate(order) if i == 0 or order[i - 1] != key
    ]
    assert runs == ["a", "b", "a", "b"]


def test_compare_refuses_zero_rounds():
    with pytest.raises(ValueError, match="rounds must be at least 1, got 0"):
        ep.compare({}, rounds=0)


def test_machine_descriptions_name_processor_threads_and_versions():
    cpu = benchmarking.machine(num_threads=2)
    assert cpu["device"] == "cpu" and cpu["threads"] == 2
    line = benchmarking.describe_machine(cpu)
    assert line.startswith("Measured on 2 threads of ")
    assert f"torch {cpu['torch']}" in line
    assert ep.measured_on().startswith("Measured on 1 thread of ")
    gpu = dict(cpu, device="NVIDIA H200", cuda="13.0", torch="2.11.0+cu130")
    assert (
        benchmarking.describe_machine(gpu)
        == "Measured on NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130."
    )


def fake_records():
    records = []
    for name, seconds in (("eager", 4e-3), ("cpp", 1e-3)):
        for batch in (256, 1024):
            records.append(
                dict(
                    implementation=name,
                    task="forward+backward",
                    batch=batch,
                    dim=512,
                    seconds=seconds,
                    floor_bytes=9 * batch * 512 * 4,
                    gbps=9 * batch * 512 * 4 / seconds / 1e9,
                    copy_gbps=100.0,
                    fraction_of_copy=0.5,
                )
            )
    return records


def test_benchmark_table_has_a_row_per_size_and_the_machine_caption():
    machine = benchmarking.machine(num_threads=2)
    table = bench.table(fake_records(), machine)
    assert isinstance(table, display.Table)
    assert table.columns == [
        "task",
        "B",
        "D",
        "eager ms (GB/s)",
        "cpp ms (GB/s)",
        "copy bandwidth GB/s",
    ]
    assert [row[:3] for row in table.rows] == [
        ["forward+backward", "256", "512"],
        ["forward+backward", "1024", "512"],
    ]
    assert table.rows[0][4] == "1.000 (5)"
    assert table.caption == benchmarking.describe_machine(machine)


def test_bandwidth_plot_draws_each_implementation_and_the_copy_bandwidth():
    fig = bench.plot_bandwidth(fake_records(), dim=512)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["eager", "cpp", "copy bandwidth"]
    # One vocabulary: the measured copy is "copy bandwidth", the bytes any
    # implementation must move "minimum traffic"; no floor or ceiling.
    words = " ".join([fig.axes[0].get_ylabel(), fig.axes[0].get_title(), *labels])
    assert "minimum traffic" in words
    assert not {"floor", "ceiling", "yardstick"} & set(words.lower().split())
    plt.close(fig)
    with pytest.raises(
        ValueError,
        match=re.escape("no records for dim=1024 and task='forward+backward'"),
    ):
        bench.plot_bandwidth(fake_records(), dim=1024)


def test_speed_words_calls_a_ratio_within_the_noise_no_measurable_difference():
    assert bench.speed_words(2.0, noise=0.1) == "2.00x faster"
    assert bench.speed_words(0.25, noise=0.1) == "4.00x slower"
    # 2% apart, with rounds that spread over 5%: within the noise, either way.
    assert bench.speed_words(1.02, noise=0.05) == "no measurable difference"
    assert bench.speed_words(1 / 1.02, noise=0.05) == "no measurable difference"
    assert bench.speed_words(1.06, noise=0.05) == "1.06x faster"
    # Equal to its noise at the two digits printed: 1.13 with noise 13% (the turn-4 review's case).
    assert bench.speed_words(1.1304, noise=0.1296) == "no measurable difference"
    assert bench.speed_words(1 / 1.1304, noise=0.1296) == "no measurable difference"
    assert bench.speed_words(1.1404, noise=0.1296) == "1.14x faster"


def test_speed_words_takes_the_noise_from_the_measured_spread():
    # Two timings whose rounds overlap: the same code, measured twice.
    same = benchmarking.Timing([1.00e-3, 1.10e-3, 1.04e-3])
    again = benchmarking.Timing([1.02e-3, 0.98e-3, 1.08e-3])
    ratio = bench.time_ratio(same, again)
    assert ratio.noise == pytest.approx(same.spread + again.spread)
    assert bench.speed_words(ratio) == "no measurable difference"
    # Clearly apart: a ratio of 2 with the same spreads.
    slow = benchmarking.Timing([2.00e-3, 2.20e-3, 2.08e-3])
    assert bench.speed_words(bench.time_ratio(slow, again)) == "2.04x faster"
    # bench.ratios gives the records' spreads to its ratios.
    records = fake_records()
    for record in records:
        record["spread"] = 0.5 if record["implementation"] == "eager" else 0.1
    ratio = bench.ratios(records, 256, 512)["eager"]
    assert ratio == 4.0 and ratio.noise == pytest.approx(0.6)
    for record in records:
        record["spread"] = 4.0
    assert bench.speed_words(bench.ratios(records, 256, 512)["eager"]) == (
        "no measurable difference"
    )


def test_speed_words_refuses_a_ratio_whose_noise_is_unknown():
    with pytest.raises(ValueError, match="speed_words needs the measurement's noise"):
        bench.speed_words(1.5)
    # Records of an older run, without spreads: their ratios have no noise.
    with pytest.raises(ValueError, match="speed_words needs the measurement's noise"):
        bench.speed_words(bench.ratios(fake_records(), 256, 512)["eager"])


def test_compare_returns_medians_with_their_spread():
    import torch

    timings = benchmarking.compare(
        {"add": ("x + 1", dict(x=torch.ones(8)))}, rounds=3, min_run_time=0.01
    )
    timing = timings["add"]
    assert isinstance(timing, float) and len(timing.rounds) == 3
    assert timing == sorted(timing.rounds)[1]
    assert timing.spread == pytest.approx(
        (max(timing.rounds) - min(timing.rounds)) / timing
    )


@pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"),
    reason="glibc malloc tuning is Linux-only",
)
def test_malloc_settings_decide_whether_each_new_tensor_faults_in():
    # In a fresh process: in this one, earlier tests may have left large free
    # chunks in the heap, which glibc reuses before it maps anything new, and
    # then even the "fresh" setting would show no page faults.
    import subprocess
    import sys

    script = """
import torch
import extending_pytorch as ep
from extending_pytorch import benchmarking
source = torch.ones(1 << 21)  # 8 MiB of float32
assert benchmarking.return_freed_memory() is True
# Each 8 MiB result is a fresh mapping: 2048 pages of 4 KiB (fewer where the
# kernel backs it with huge pages, but never none).
fresh = benchmarking.page_faults_per_call(lambda: source * 2)
assert ep.keep_freed_memory() is True
reused = benchmarking.page_faults_per_call(lambda: source * 2)
print(fresh, reused)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    fresh, reused = map(float, result.stdout.split())
    assert fresh >= 1 and reused <= fresh / 10, (fresh, reused)
