#!/usr/bin/env python
"""Print the chapter notebooks listed in _toc.yml, one per line, in book order.

    .venv/bin/python -m booktools.toc_chapters            # what `make nbval` tests
    .venv/bin/python -m booktools.toc_chapters --listed   # every listed chapter, missing files included

Exits with an error naming the chapter if a listed notebook does not exist (unless --listed), so that
`make nbval` fails on a missing chapter file rather than testing fewer chapters.
"""

from __future__ import annotations

import argparse
import sys

from booktools import notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listed", action="store_true", help="print missing chapters too, and exit 0")
    args = parser.parse_args(argv)
    chapters = notebooks.toc_chapters()
    missing = [notebooks.relative(p) for p in chapters if not p.is_file()]
    if missing and not args.listed:
        for name in missing:
            print(f"ERROR: _toc.yml lists {name}, which does not exist", file=sys.stderr)
        return 1
    for path in chapters:
        print(notebooks.relative(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
