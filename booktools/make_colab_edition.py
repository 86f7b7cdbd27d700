#!/usr/bin/env python
"""Write the Colab edition, colab/NN_topic.ipynb, from the chapters of _toc.yml.

    .venv/bin/python -m booktools.make_colab_edition            # (re)write colab/
    .venv/bin/python -m booktools.make_colab_edition --check    # exit 1 if colab/ is out of date

The Colab links of the HTML book open these notebooks. Each is its chapter with the MyST made plain
markdown (glued numbers from the book's stored run in bold, citations as author-year text,
cross-references as links to the HTML book, exercises as sections, solutions folded), the Colab
set-up cell of booktools/notebooks.py first, and the stored outputs. The conversion is
booktools/colab.py; tests/test_colab_edition.py fails when colab/ differs from what this writes,
so run it (or `make colab`) after changing a chapter, and commit colab/.
"""

from __future__ import annotations

import argparse
import sys

from booktools import colab, notebooks  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that colab/ is up to date")
    args = parser.parse_args(argv)
    missing = [notebooks.relative(p) for p in notebooks.toc_chapters() if not p.is_file()]
    for name in missing:
        print(f"make_colab_edition: {name} is listed in _toc.yml but missing; skipped", file=sys.stderr)
    try:
        files = colab.build()
    except colab.ConversionError as exc:
        print(f"make_colab_edition: {exc}", file=sys.stderr)
        return 1
    if args.check:
        stale = [notebooks.relative(p) for p in colab.stale(files)]
        extra = [notebooks.relative(p) for p in sorted(colab.EDITION_DIR.glob("*.ipynb")) if p not in files]
        for name in stale:
            print(f"{name} is out of date: run `make colab` (booktools/make_colab_edition.py)", file=sys.stderr)
        for name in extra:
            print(f"{name} belongs to no chapter of _toc.yml: run `make colab`", file=sys.stderr)
        if stale or extra:
            return 1
        print(f"colab/: {len(files)} notebooks up to date")
        return 0
    changed = colab.write(files)
    for path in changed:
        print(f"{'wrote' if path.is_file() else 'removed'} {notebooks.relative(path)}")
    print(f"colab/: {len(files)} notebooks, {len(changed)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
