#!/usr/bin/env python
"""Change the book's repository URL, and bring every copy of what derives from it up to date.

    .venv/bin/python -m booktools.set_repository_url https://github.com/OWNER/REPO   # change the URL
    .venv/bin/python -m booktools.set_repository_url                                 # only re-sync
    .venv/bin/python -m booktools.set_repository_url --check                         # report, change nothing

The URL is defined once, in _config.yml (repository.url, anchor &repository_url); the launch
buttons, the Colab links and the pages read it from there. Notebooks cannot read _config.yml in
Colab, so the Colab set-up cell of each chapter carries a copy, made from the template in
booktools/notebooks.py. This script

1. with a URL: rewrites repository.url and html.baseurl (the GitHub Pages address of the
   repository, or --baseurl) in _config.yml;
2. rewrites the set-up cell (the first code cell) of every chapter notebook in chapters/ from the
   template (outputs untouched; the cell prints nothing outside Colab);
3. regenerates the Colab edition, colab/ (booktools/make_colab_edition.py).

Without a URL it does 2 and 3: run it after changing the template. tests/test_book.py checks that
the set-up cells agree with _config.yml, tests/test_colab_edition.py that colab/ is up to date.
"""

from __future__ import annotations

import argparse
import re
import sys

from booktools import make_colab_edition  # noqa: E402
from booktools import notebooks  # noqa: E402


def rewrite_config(url: str, baseurl: str | None) -> None:
    text = notebooks.CONFIG.read_text(encoding="utf-8")
    text, count = re.subn(r"(url:\s*&repository_url\s+)\S+", rf"\g<1>{url}", text)
    if count != 1:
        raise SystemExit("_config.yml: no `url: &repository_url ...` line to rewrite")
    owner, _, repo = notebooks.github_repo(url).partition("/")
    baseurl = (baseurl or f"https://{owner.lower()}.github.io/{repo}/").rstrip("/") + "/"
    text, count = re.subn(r"(?m)^(\s+baseurl:\s*)\S+", rf"\g<1>{baseurl}", text)
    if count != 1:
        raise SystemExit("_config.yml: no `baseurl: ...` line under html: to rewrite")
    notebooks.CONFIG.write_text(text, encoding="utf-8")
    print(f"_config.yml: repository.url = {url}, html.baseurl = {baseurl}")


def sync_setup_cells(check: bool) -> list[str]:
    """Rewrite (or with ``check`` only list) the chapters whose set-up cell is not the template's."""
    expected = notebooks.bootstrap_source()
    stale = []
    for path in sorted(notebooks.CHAPTERS_DIR.glob("*.ipynb")):
        nb = notebooks.read_notebook(path)
        cells = notebooks.code_cells(nb)
        if not cells or not notebooks.is_bootstrap_cell(cells[0][1]):
            print(f"{notebooks.relative(path)}: no Colab set-up cell, left unchanged")
            continue
        cell = cells[0][1]
        if notebooks.cell_source(cell) == expected and notebooks.BOOTSTRAP_TAG in notebooks.cell_tags(cell):
            continue
        stale.append(notebooks.relative(path))
        if check:
            print(f"{notebooks.relative(path)}: the Colab set-up cell differs from the template")
            continue
        cell.source = expected
        tags = cell.metadata.setdefault("tags", [])
        if notebooks.BOOTSTRAP_TAG not in tags:
            tags.append(notebooks.BOOTSTRAP_TAG)
        notebooks.write_notebook(nb, path)
        print(f"{notebooks.relative(path)}: Colab set-up cell updated")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="https://github.com/OWNER/REPO (omit to re-sync only)")
    parser.add_argument("--baseurl", help="where the HTML book is published "
                                          "(default: https://OWNER.github.io/REPO/)")
    parser.add_argument("--check", action="store_true", help="report what is out of date, change nothing")
    args = parser.parse_args(argv)
    if args.url:
        if args.check:
            parser.error("--check takes no URL")
        url = args.url.rstrip("/").removesuffix(".git")
        if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
            parser.error(f"expected https://github.com/OWNER/REPO (Colab opens GitHub), got {url!r}")
        rewrite_config(url, args.baseurl)

    stale = sync_setup_cells(args.check)
    print(f"set-up cells: {len(stale)} chapter(s) {'out of date' if args.check else 'updated'}")
    # The Colab edition carries the URL too: regenerate it (or check it) as `make colab` does.
    edition = make_colab_edition.main(["--check"] if args.check else [])
    return 1 if stale and args.check else edition


if __name__ == "__main__":
    sys.exit(main())
