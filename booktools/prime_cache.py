#!/usr/bin/env python
"""Add the stored, executed chapter notebooks to the book's execution cache.

The book builds with `execute_notebooks: cache` (_config.yml). Priming the cache with the
chapters as stored (outputs included) means that `jupyter-book build` re-executes none of
them: the build renders what `booktools/run_chapter.py` stored and what `make nbval` checked.
A chapter whose stored notebook is not a clean top-to-bottom run (execution counts not
1, 2, 3, ...) is not added, and the build will execute it.

    .venv/bin/python -m booktools.prime_cache [--cache _build/.jupyter_cache]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jupyter_cache import get_cache
from jupyter_cache.base import NbValidityError

from booktools import notebooks  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=notebooks.ROOT / "_build" / ".jupyter_cache")
    args = parser.parse_args(argv)

    cache = get_cache(str(args.cache))
    for path in notebooks.toc_chapters():
        name = notebooks.relative(path)
        if not path.is_file():
            print(f"prime_cache: {name} is missing (listed in _toc.yml)", file=sys.stderr)
            continue
        try:
            cache.cache_notebook_file(str(path), check_validity=True, overwrite=True)
        except NbValidityError as exc:
            print(f"prime_cache: {name} not cached ({exc}); the build will execute it")
            continue
        print(f"prime_cache: {name} cached as stored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
