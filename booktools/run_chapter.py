#!/usr/bin/env python
"""Execute chapter notebooks in place, the way the book and nbval run them, and record the time.

    .venv/bin/python -m booktools.run_chapter chapters/01_impact.ipynb [more.ipynb ...]
    .venv/bin/python -m booktools.run_chapter --all          # every chapter of _toc.yml

Each notebook runs top to bottom in a fresh kernel of this Python (the .venv), with chapters/
as working directory, so that its stored outputs are exactly what `make nbval` will compare.
Widget state is saved in the notebook metadata (the book's static HTML shows the widgets'
first view from it). The wall time is printed and stored in the notebook metadata under
``book.execution_seconds``; benchmarks/chapter_times.py reports it.

A chapter that fails is not written; the error names the chapter and the cell.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

from booktools import notebooks  # noqa: E402


def kernel_environment() -> None:
    """Make the kernel match nbval's: this interpreter's environment, inline matplotlib."""
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    # A non-inline MPLBACKEND (e.g. Agg from a CI shell) would hide every figure.
    os.environ.pop("MPLBACKEND", None)
    os.environ.setdefault("PYTHONHASHSEED", "0")


def failing_cell(nb, exc: Exception) -> str:
    """Describe the cell that raised: its number among code cells and its first line."""
    for number, (_, cell) in enumerate(notebooks.code_cells(nb), start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = notebooks.cell_source(cell).strip().splitlines()[:1]
                return f"code cell {number} ({first[0] if first else 'empty'!r})"
    return "a cell (see the traceback above)"


def run(path: Path, timeout: int) -> float:
    """Execute ``path`` in place; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)  # state of a previous run
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
        allow_errors=False,
    )
    start = time.perf_counter()
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(
            f"FAILED {notebooks.relative(path)}: {failing_cell(nb, exc)} raised; "
            "the stored notebook was left unchanged."
        ) from None
    seconds = time.perf_counter() - start
    nb.metadata.setdefault("book", {})["execution_seconds"] = round(seconds, 1)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="chapter notebooks to execute")
    parser.add_argument("--all", action="store_true", help="every chapter listed in _toc.yml")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell")
    args = parser.parse_args(argv)

    paths = list(args.notebooks) + (notebooks.toc_chapters() if args.all else [])
    if not paths:
        parser.error("name at least one notebook, or --all")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")

    kernel_environment()
    total = 0.0
    for path in paths:
        path = path.resolve()
        print(f"running {notebooks.relative(path)} ...", flush=True)
        seconds = run(path, args.timeout)
        total += seconds
        print(f"  {notebooks.relative(path)}: {seconds:.1f} s, outputs stored", flush=True)
    if len(paths) > 1:
        print(f"total: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
