#!/usr/bin/env python
"""Build the book with Jupyter Book and report every warning by chapter and cell.

    .venv/bin/python -m booktools.build_book            # incremental build, warnings reported
    .venv/bin/python -m booktools.build_book --strict   # fresh build, -W -n --keep-going:
                                                      # any warning fails (make build-strict)

The full log is written to _build/reports/build.log. Sphinx reports a warning in a notebook
by a line number of the notebook as MyST-NB reads it; this script translates it to the code
or markdown cell it falls in (cells of each kind numbered from 0, as nbval numbers code cells),
so that a failure says e.g.
``chapters/01_impact.ipynb, markdown cell 5 (cell index 11, line 9) ('In both ...'): WARNING:
undefined label: ...``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from booktools import notebooks  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
WARNING = re.compile(r"^(?P<loc>.*?): (?P<kind>WARNING|ERROR|CRITICAL|SEVERE):?(?P<rest>.*)$")
LOCATION = re.compile(r"^(?P<path>[^:]+?)(?::(?P<line>\d+))?$")


def cell_of_line(path: Path, line: int) -> str:
    """Name the cell of a notebook that a Sphinx line number points into.

    MyST-NB numbers the lines of a notebook's cell ``i`` from ``(i + 1) * 10000 + 1`` on, so
    ``line // 10000 - 1`` is the cell index and ``line % 10000`` the line within the cell.
    """
    if line < 10000:
        return f"line {line}"
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - a report helper must not fail the report
        return f"line {line}"
    index, line_in_cell = line // 10000 - 1, line % 10000
    if not 0 <= index < len(nb.cells):
        return f"line {line}"
    cell = nb.cells[index]
    kind_number = sum(1 for c in nb.cells[:index] if c.cell_type == cell.cell_type)
    first = notebooks.cell_source(cell).strip().splitlines()[:1]
    preview = f" ({first[0][:60]!r})" if first else ""
    return (f"{cell.cell_type} cell {kind_number} (cell index {index}, line {line_in_cell})"
            f"{preview}")


def explain(line: str) -> str | None:
    """The warning on `line` with its location named by chapter and cell, or None."""
    match = WARNING.match(ANSI.sub("", line).strip())
    if not match:
        return None
    where = match["loc"]
    location = LOCATION.match(where)
    if location:
        path = Path(location["path"])
        if path.exists():
            where = notebooks.relative(path)
            if path.suffix == ".ipynb" and location["line"]:
                where += ", " + cell_of_line(path, int(location["line"]))
            elif location["line"]:
                where += f", line {location['line']}"
    elif where.startswith(str(notebooks.ROOT)):
        where = where[len(str(notebooks.ROOT)) + 1:]
    return f"{where}: {match['kind']}: {match['rest'].strip()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true",
                        help="fresh build with -W -n --keep-going (warnings fail)")
    args = parser.parse_args(argv)

    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(notebooks.ROOT)]
    if args.strict:
        command += ["-W", "-n", "--keep-going", "--all"]
    reports = notebooks.ROOT / "_build" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    log_path = reports / "build.log"

    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, cwd=notebooks.ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        warnings = []
        for line in process.stdout:
            sys.stdout.write(line)
            log.write(line)
            explained = explain(line)
            if explained:
                warnings.append(explained)
        returncode = process.wait()
    seconds = time.perf_counter() - start

    print(f"\nbook build: {seconds:.1f} s, log in {notebooks.relative(log_path)}")
    if warnings:
        print(f"{len(warnings)} warning(s):")
        for warning in warnings:
            print(f"  {warning}")
    if returncode != 0 or (args.strict and warnings):
        print("BUILD FAILED" + (" (warnings are errors in --strict mode)" if warnings else ""))
        return returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
