"""Check the built site in a real browser, as a reader meets it: `make check-site`.

Serves _build/ on 127.0.0.1, so the site lives under a sub-path (/html/) as on
GitHub Pages, opens every page of the table of contents in headless Chromium,
and fails on:

- errors in the browser console from the site's own assets;
- a chapter page that does not show its executed outputs and plots;
- a chapter page without its Colab and download links;
- a page that pastes chapters' outputs ({glue} with :doc:, the benchmarks page)
  without showing each of them: every table's text and every plot;
- internal links or anchors that lead nowhere;
- paths of the build machine on a page.

It also opens the landing page from local files (file://), and saves
screenshots of the landing page and every chapter at desktop and phone widths
and of every page that pastes outputs into _build/screenshots/ (for CI
artifacts; not committed).
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
SITE = BUILD / "html"
SHOTS = BUILD / "screenshots"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
]
MACHINE_PATH = re.compile(r"(/work/|/root/|/tmp/|/home/[a-z]|/Users/)")
WIDTHS = {"desktop": (1280, 2000), "phone": (390, 1800)}


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    raise SystemExit(
        "error: no Chromium found. Install it (Debian/Ubuntu: apt-get install chromium)."
    )


def run_browser(url: str, *args: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [browser(), *FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    return result.stdout, result.stderr


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


class Page(html.parser.HTMLParser):
    """Links, ids, images and visible text of a page."""

    def __init__(self):
        super().__init__()
        self.links, self.ids, self.images, self.text = [], set(), [], []
        self.outputs = 0
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        if "cell_output" in (attrs.get("class") or "").split():
            self.outputs += 1
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def parse(markup: str) -> Page:
    page = Page()
    page.feed(markup)
    return page


def console_errors(log: str, own_prefix: str) -> list[str]:
    errors = []
    for line in log.splitlines():
        match = re.search(r':CONSOLE[^\]]*\] "(.*)", source: (\S+)', line)
        if match and own_prefix in match.group(2):
            message = match.group(1)
            if re.search(r"Uncaught|Error|Failed to load", message):
                errors.append(f"{message} ({match.group(2)})")
    return errors


def notebook_expectations(doc: str) -> tuple[int, int, str]:
    """(code cells with visible outputs, images, the first stdout text) of a notebook."""
    notebook = json.loads((ROOT / f"{doc}.ipynb").read_text())
    cells_with_output, images, first_text = 0, 0, ""
    for cell in notebook["cells"]:
        outputs = [o for o in cell.get("outputs", []) if not (o.get("name") == "stderr")]
        if cell["cell_type"] == "code" and outputs:
            cells_with_output += 1
        for output in outputs:
            images += "image/png" in output.get("data", {})
            if not first_text and output.get("name") == "stdout":
                first_text = "".join(output["text"]).strip().splitlines()[0]
    return cells_with_output, images, first_text


GLUE = re.compile(r"```\{glue\}\s+(\w+)\s*\n:doc:\s*(\S+)")


def pasted_outputs(doc: str) -> list[tuple[str, dict]]:
    """(key, stored output) of every chapter output that a Markdown page pastes."""
    source = ROOT / f"{doc}.md"
    if not source.is_file():
        return []
    pasted = []
    for key, notebook_path in GLUE.findall(source.read_text()):
        notebook = json.loads((source.parent / notebook_path).resolve().read_text())
        outputs = [
            output
            for cell in notebook["cells"]
            for output in cell.get("outputs", [])
            if output.get("metadata", {}).get("scrapbook", {}).get("name") == key
        ]
        if len(outputs) != 1:
            raise SystemExit(f"error: {doc} pastes {key!r}, found {len(outputs)} times in {notebook_path}")
        pasted.append((key, outputs[0]))
    return pasted


def shown_text(output: dict) -> list[str]:
    """The pieces of text an output shows: its HTML's (every table cell), or its plain text's lines."""
    data = output["data"]
    if "text/html" in data:
        pieces = parse("".join(data["text/html"])).text
    else:
        pieces = "".join(data.get("text/plain", "")).splitlines()
    return [" ".join(piece.split()) for piece in pieces if piece.strip()]


def pasting_problems(doc: str, page: Page) -> list[str]:
    """Outputs that `doc` pastes from chapters but `page` does not show."""
    problems = []
    pasted = pasted_outputs(doc)
    plots = sum("image/png" in output["data"] for _, output in pasted)
    shown = [src for src in page.images if "_images/" in src]
    if len(shown) < plots:
        problems.append(f"{doc}: shows {len(shown)} plots, it pastes {plots}")
    flat = " ".join(" ".join(page.text).split())
    for key, output in pasted:
        if "image/png" in output["data"]:
            continue
        missing = [piece for piece in shown_text(output) if piece not in flat]
        if missing:
            problems.append(
                f"{doc}: the pasted output {key!r} is not on the page: {missing[0]!r} is missing"
            )
    return problems


def check_page(base: str, doc: str) -> list[str]:
    url = f"{base}/{doc}.html"
    markup, log = run_browser(url, "--enable-logging=stderr", "--v=0", "--dump-dom")
    page = parse(markup)
    problems = [f"{doc}: console error: {e}" for e in console_errors(log, base)]
    text = " ".join(page.text)
    if match := MACHINE_PATH.search(text):
        problems.append(f"{doc}: shows a path of the build machine: {match.group(0)!r}")
    if doc.startswith("notebooks/"):
        cells, images, first_text = notebook_expectations(doc)
        if page.outputs < cells:
            problems.append(f"{doc}: shows {page.outputs} cell outputs, the notebook has {cells}")
        shown = [src for src in page.images if "_images/" in src]
        if len(shown) < images:
            problems.append(f"{doc}: shows {len(shown)} plots, the notebook has {images}")
        if first_text and first_text not in text:
            problems.append(f"{doc}: the stored output {first_text!r} is not on the page")
        name = doc.split("/")[-1]
        if not any(
            "colab.research.google.com/github/" in link and f"{name}.ipynb" in link
            for link in page.links
        ):
            problems.append(f"{doc}: no Colab link to {name}.ipynb")
        if f"_sources/{doc}.ipynb" not in markup:
            problems.append(f"{doc}: no download link for the notebook")
    problems += pasting_problems(doc, page)
    problems += broken_links(doc, page)
    return problems


@functools.cache
def ids_of(path: pathlib.Path) -> set[str]:
    return parse(path.read_text()).ids


def broken_links(doc: str, page: Page) -> list[str]:
    problems = []
    here = SITE / f"{doc}.html"
    for link in page.links:
        parsed = urllib.parse.urlparse(link)
        if parsed.scheme or link.startswith(("mailto:", "//")):
            continue  # external: not checked (no network here)
        target = (
            here if not parsed.path else (here.parent / urllib.parse.unquote(parsed.path)).resolve()
        )
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"{doc}: broken link {link!r}")
        elif parsed.fragment and target.suffix == ".html" and parsed.fragment not in ids_of(target):
            problems.append(f"{doc}: broken anchor {link!r}")
    return problems


def screenshot(base: str, doc: str) -> list[pathlib.Path]:
    saved = []
    for label, (width, height) in WIDTHS.items():
        target = SHOTS / f"{doc.replace('/', '_')}-{label}.png"
        run_browser(
            f"{base}/{doc}.html", f"--window-size={width},{height}", f"--screenshot={target}"
        )
        if not target.is_file():
            raise SystemExit(f"error: no screenshot was written for {doc} at {label} width")
        saved.append(target)
    return saved


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass  # one line per request would bury the results


def serve(directory: pathlib.Path):
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    if not (SITE / "index.html").is_file():
        raise SystemExit("error: no site in _build/html. Run `make book` first.")
    SHOTS.mkdir(parents=True, exist_ok=True)
    server = serve(BUILD)
    base = f"http://127.0.0.1:{server.server_address[1]}/html"  # a sub-path, as on GitHub Pages
    problems, pages, shots = [], toc_pages(), []
    try:
        for doc in pages:
            problems += check_page(base, doc)
            if doc == pages[0] or doc.startswith("notebooks/") or pasted_outputs(doc):
                shots += screenshot(base, doc)
    finally:
        server.shutdown()
    # From local files too: the landing page (index.html redirects to it) renders cleanly.
    landing = SITE / f"{pages[0]}.html"
    if f"{pages[0]}.html" not in (SITE / "index.html").read_text():
        problems.append(f"index.html does not lead to the landing page {pages[0]}.html")
    markup, log = run_browser(landing.as_uri(), "--enable-logging=stderr", "--v=0", "--dump-dom")
    if "The ladder at a glance" not in markup:
        problems.append("the landing page did not render from local files")
    problems += [
        f"file:// landing page: console error: {e}" for e in console_errors(log, SITE.as_uri())
    ]
    for problem in problems:
        print(f"FAIL {problem}")
    print(
        f"{len(pages)} pages checked in Chromium, {len(shots)} screenshots in "
        f"{SHOTS.relative_to(ROOT)}/: {len(problems)} problems"
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
