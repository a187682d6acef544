"""Re-point the book at another repository: a fork, for a course.

    python tools/repoint.py OWNER/NAME [--branch BRANCH]    (or: make repoint REPO=OWNER/NAME)

The repository is set in one place, `repository:` in _config.yml (the site's
buttons use it); this command rewrites that, and everything that must agree
with it: every notebook's Colab badge and Colab setup cell, the clone commands
of the introduction page and the README, the README's link to the site, and the
site's base URL (GitHub Pages), and the branch the pages workflow publishes from. Outputs and
execution counts of the notebooks are left as they are, and so is the notebooks' JSON layout.

It needs nothing but Python's standard library (no torch, no .venv): editing text should not
install several gigabytes first.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def current(root: pathlib.Path) -> tuple[str, str]:
    """(owner/name, branch) as _config.yml sets them."""
    text = (root / "_config.yml").read_text()
    url = re.search(r"^  url: https://github\.com/(\S+)$", text, re.MULTILINE)
    branch = re.search(r"^  branch: (\S+)$", text, re.MULTILINE)
    if not url or not branch:
        raise SystemExit("error: _config.yml has no repository url or branch")
    return url.group(1), branch.group(1)


def repoint(root: pathlib.Path, repository: str, branch: str) -> list[str]:
    """Rewrite every place that names the repository; returns the files changed."""
    if not NAME.match(repository):
        raise SystemExit(f"error: repository must look like OWNER/NAME, got {repository!r}")
    old_repo, old_branch = current(root)
    owner, name = repository.split("/")
    old_owner, old_name = old_repo.split("/")
    changed = []

    config = root / "_config.yml"
    text = config.read_text()
    text = text.replace(
        f"url: https://github.com/{old_repo}\n", f"url: https://github.com/{repository}\n"
    )
    text = re.sub(r"^  branch: \S+$", f"  branch: {branch}", text, flags=re.MULTILINE)
    text = text.replace(
        f"https://{old_owner}.github.io/{old_name}/", f"https://{owner}.github.io/{name}/"
    )
    config.write_text(text)
    changed.append("_config.yml")

    badge = f"colab.research.google.com/github/{old_repo}/blob/{old_branch}/"
    setup = f'REPOSITORY, BRANCH = "{old_repo}", "{old_branch}"'
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        edited = False
        for cell in notebook["cells"]:
            old = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            source = old.replace(
                badge, f"colab.research.google.com/github/{repository}/blob/{branch}/"
            )
            source = source.replace(setup, f'REPOSITORY, BRANCH = "{repository}", "{branch}"')
            if source != old:
                # Stored as the notebooks are: a list of lines.
                cell["source"], edited = source.splitlines(keepends=True), True
        if edited:
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            changed.append(path.relative_to(root).as_posix())

    # The pages workflow publishes the site from the fork's branch.
    pages = root / ".github" / "workflows" / "pages.yml"
    if pages.exists():
        text = pages.read_text()
        new = text.replace(f"branches: [{old_branch}]", f"branches: [{branch}]")
        if new != text:
            pages.write_text(new)
            changed.append(".github/workflows/pages.yml")

    # The clone commands, and the README's link to the site.
    for page in ("book/intro.md", "README.md"):
        path = root / page
        if not path.exists():
            continue
        text = path.read_text().replace(f"github.com/{old_repo}.git", f"github.com/{repository}.git")
        text = text.replace(f"https://{old_owner}.github.io/{old_name}/", f"https://{owner}.github.io/{name}/")
        path.write_text(text)
        changed.append(page)
    return changed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", help="OWNER/NAME on GitHub")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for path in repoint(args.root, args.repository, args.branch):
        print(f"updated {path}")


if __name__ == "__main__":
    main()
