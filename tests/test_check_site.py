"""The browser check of the site (tools/check_site.py) catches what it claims to catch."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import load_tool

# The browser check of the site: the same on every torch.
pytestmark = pytest.mark.same_on_every_torch

check_site = load_tool("check_site")

HAS_BROWSER = any(shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome"))


def test_console_errors_of_the_site_count_and_others_do_not():
    log = (
        '[1:1:1121/1.0:INFO:CONSOLE:3] "Uncaught ReferenceError: oops is not defined", '
        "source: http://127.0.0.1:8000/html/_static/x.js (3)\n"
        '[1:1:1121/1.0:INFO:CONSOLE:1] "Failed to load resource: net::ERR_NAME_NOT_RESOLVED", '
        "source: https://cdn.example.org/mathjax.js (0)\n"
        '[1:1:1121/1.0:INFO:CONSOLE:1] "[PST]: Changed to auto mode", '
        "source: http://127.0.0.1:8000/html/_static/theme.js (1)\n"
    )
    errors = check_site.console_errors(log, "http://127.0.0.1:8000/html")
    assert errors == [
        "Uncaught ReferenceError: oops is not defined " "(http://127.0.0.1:8000/html/_static/x.js)"
    ]


def test_broken_links_and_anchors_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(check_site, "SITE", tmp_path)
    (tmp_path / "b.html").write_text('<h2 id="there">B</h2>')
    page = check_site.parse(
        '<a href="b.html#there">ok</a> <a href="#top">missing here</a> '
        '<a href="c.html">missing page</a> <a href="b.html#nowhere">missing anchor</a> '
        '<a href="https://example.org/">external</a>'
    )
    (tmp_path / "a.html").write_text('<p id="intro">A</p>')
    problems = check_site.broken_links("a", page)
    assert problems == [
        "a: broken anchor '#top'",
        "a: broken link 'c.html'",
        "a: broken anchor 'b.html#nowhere'",
    ]


def test_machine_paths_are_recognised():
    assert check_site.MACHINE_PATH.search("saved to /work/main/_build/x.png")
    assert check_site.MACHINE_PATH.search("/home/alice/book")
    assert not check_site.MACHINE_PATH.search("extensions/csrc/triplet.cpp")


@pytest.mark.skipif(
    not HAS_BROWSER, reason="needs Chromium (.ci/run installs it for make check-site)"
)
def test_a_page_with_a_script_error_and_a_machine_path_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(check_site, "SITE", tmp_path)
    (tmp_path / "broken.html").write_text(
        "<html><body><p>built in /work/main/_build</p>"
        "<script>notDefinedAnywhere();</script></body></html>"
    )
    problems = check_site.check_page(tmp_path.as_uri(), "broken")
    assert any("console error" in p and "notDefinedAnywhere" in p for p in problems), problems
    assert any("path of the build machine" in p for p in problems), problems


def test_pasted_outputs_must_all_be_on_the_page(tmp_path, monkeypatch):
    monkeypatch.setattr(check_site, "ROOT", tmp_path)
    (tmp_path / "book").mkdir()
    (tmp_path / "notebooks").mkdir()
    table = {"text/html": "<table><tr><th>size</th><td>1.5 ms</td></tr></table>",
             "text/plain": "size 1.5 ms"}
    plot = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    notebook = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": data,
         "metadata": {"scrapbook": {"name": name, "mime_prefix": ""}}}
        for name, data in (("timings", table), ("plot", plot))
    ]}]}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "book" / "results.md").write_text(
        "# Results\n\n```{glue} timings\n:doc: ../notebooks/01_x.ipynb\n```\n\n"
        "```{glue} plot\n:doc: ../notebooks/01_x.ipynb\n```\n"
    )
    assert [key for key, _ in check_site.pasted_outputs("book/results")] == ["timings", "plot"]
    complete = check_site.parse(
        '<table><tr><th>size</th><td>1.5 ms</td></tr></table><img src="../_images/p.png">'
    )
    assert check_site.pasting_problems("book/results", complete) == []
    stale = check_site.parse("<table><tr><th>size</th><td>2.0 ms</td></tr></table>")
    assert check_site.pasting_problems("book/results", stale) == [
        "book/results: shows 0 plots, it pastes 1",
        "book/results: the pasted output 'timings' is not on the page: '1.5 ms' is missing",
    ]
    # A page naming a key that the chapter never recorded is an error, not a pass.
    (tmp_path / "book" / "results.md").write_text("```{glue} nothing\n:doc: ../notebooks/01_x.ipynb\n```\n")
    with pytest.raises(SystemExit, match="pastes 'nothing', found 0 times"):
        check_site.pasted_outputs("book/results")
