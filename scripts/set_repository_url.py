#!/usr/bin/env python
"""Change the book's repository URL everywhere it is written down.

    .venv/bin/python scripts/set_repository_url.py https://github.com/OWNER/REPO

The URL is defined once, in _config.yml (repository.url, anchor &repository_url); the launch
buttons and the pages read it from there. Notebooks cannot read _config.yml in Colab, so the
Colab set-up cell of each chapter carries a copy: this script rewrites _config.yml and that
cell of every chapter notebook (outputs untouched; the cell prints nothing).
tests/test_book.py checks that the copies agree with _config.yml.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bookkit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="https://github.com/OWNER/REPO")
    args = parser.parse_args(argv)
    url = args.url.rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        parser.error(f"expected https://github.com/OWNER/REPO (Colab opens GitHub), got {url!r}")

    text = bookkit.CONFIG.read_text(encoding="utf-8")
    new_text, count = re.subn(r"(url:\s*&repository_url\s+)\S+", rf"\g<1>{url}", text)
    if count != 1:
        parser.error("_config.yml: no `url: &repository_url ...` line to rewrite")
    bookkit.CONFIG.write_text(new_text, encoding="utf-8")
    print(f"_config.yml: repository.url = {url}")

    for path in sorted(bookkit.CHAPTERS_DIR.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = bookkit.code_cells(nb)
        if not cells or bookkit.BOOTSTRAP_MARKER not in bookkit.cell_source(cells[0][1]):
            print(f"{bookkit.relative(path)}: no Colab set-up cell, left unchanged")
            continue
        cells[0][1].source = bookkit.bootstrap_source(url)
        nbformat.write(nb, path)
        print(f"{bookkit.relative(path)}: Colab set-up cell updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
