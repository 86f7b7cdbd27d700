#!/usr/bin/env python
"""Seconds per chapter on this machine, against the book's budget (a report, not a test).

    .venv/bin/python benchmarks/chapter_times.py --junit _build/reports/nbval.xml   # make times
    .venv/bin/python benchmarks/chapter_times.py --run     # execute every chapter now and time it

Sources of the times, per chapter of _toc.yml:
- "nbval": the last `make nbval` run (its JUnit report sums the time of every cell of the
  chapter, kernel start-up included). With several nbval workers two chapters share the CPU,
  so these times are pessimistic.
- "stored": the time `booktools/run_chapter.py` recorded in the notebook when its outputs were
  last regenerated (metadata book.execution_seconds), possibly on another machine.
- "run": with --run, a fresh execution here (nothing is written); or, with --runs FILE, the chapters
  executed one at a time by `benchmarks/run_all.py --chapters` (its results/chapters.json).

A fresh execution wins over an nbval time, which wins over a stored one.

Budget: at most 180 s per chapter (chapter 10: 300 s) and 900 s for the whole book on the 2-core CPU that builds it.
Chapters over budget are flagged; the exit status is 0 unless --strict is given.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

CHAPTER_BUDGET_S = 180.0
# Chapters allowed more by their issue: chapter 10 trains three models from three seeds after a learning-rate search.
CHAPTER_BUDGETS_S = {"10_translation.ipynb": 300.0}
BOOK_BUDGET_S = 900.0


def chapter_budget(chapter) -> float:
    """The budget in seconds of a chapter (a path, or a repository-relative name such as 'chapters/10_….ipynb')."""
    return CHAPTER_BUDGETS_S.get(Path(chapter).name, CHAPTER_BUDGET_S)


def budget_text() -> str:
    """The chapter budgets in words: '180 s per chapter (chapter 10: 300 s)'."""
    others = ", ".join(f"{name.split('_')[0].lstrip('0')}: {budget:.0f} s"
                       for name, budget in sorted(CHAPTER_BUDGETS_S.items()))
    return f"{CHAPTER_BUDGET_S:.0f} s per chapter (chapter {others})"


def toc_chapters() -> list[Path]:
    """Every chapter _toc.yml lists, in book order, missing files included (booktools answers: it is run as a
    tool from the repository root, which a benchmark does not import from)."""
    listed = subprocess.run([sys.executable, "-m", "booktools.toc_chapters", "--listed"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in listed.splitlines() if line.strip()]


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def nbval_times(junit: Path) -> dict[str, float]:
    """Seconds per notebook (repository-relative path) from an nbval JUnit report."""
    times: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = case.get("classname", "")
        if not classname.endswith(".ipynb"):
            continue
        path = classname[: -len(".ipynb")].replace(".", "/") + ".ipynb"
        times[path] += float(case.get("time", 0.0))
    return dict(times)


def stored_time(path: Path) -> float | None:
    nb = nbformat.read(path, as_version=4)
    return nb.metadata.get("book", {}).get("execution_seconds")


def executed_times(runs_file: Path) -> dict[str, float]:
    """Seconds per chapter from ``run_all.py --chapters``'s chapters.json (chapters executed one at a time)."""
    data = json.loads(runs_file.read_text())
    return {row["chapter"]: float(row["seconds"]) for row in data.get("rows", []) if row.get("seconds") is not None}


def run_time(path: Path) -> float:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.widget_registry = {}  # no Output-widget imitation: booktools.notebooks.without_output_widgets
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def report(junit: Path | None = None, runs_file: Path | None = None, run: bool = False) -> dict:
    """Seconds per chapter of _toc.yml and the verdict against the budgets, as data.

    Returns:
        ``{'rows': [{'chapter', 'seconds', 'source', 'stored', 'budget_s', 'over'}], 'total': float,
        'over': [chapter, ...] (plus ``'whole book'``), 'notes': [str]}``; ``seconds`` is None for a chapter with
        no time, ``source`` is ``run``, ``nbval``, ``stored`` or ``missing``.
    """
    notes = []
    measured = nbval_times(junit) if junit and junit.is_file() else {}
    if junit and not measured:
        notes.append(f"no nbval timings in {junit} (run `make nbval` first)")
    runs = executed_times(runs_file) if runs_file and runs_file.is_file() else {}
    rows, total, over = [], 0.0, []
    for path in toc_chapters():
        name = relative(path)
        budget = chapter_budget(path)
        if not path.is_file():
            rows.append({"chapter": name, "seconds": None, "source": "missing", "stored": None, "budget_s": budget,
                         "over": False})
            continue
        stored = stored_time(path)
        fresh = run_time(path) if run else runs.get(name)
        seconds = fresh if fresh is not None else measured.get(name, stored)
        source = "run" if fresh is not None else ("nbval" if name in measured else "stored")
        late = seconds is not None and seconds > budget
        if seconds is not None:
            total += seconds
        if late:
            over.append(name)
        rows.append({"chapter": name, "seconds": seconds, "source": source, "stored": stored, "budget_s": budget,
                     "over": late})
    if total > BOOK_BUDGET_S:
        over.append("whole book")
    return {"rows": rows, "total": total, "over": over, "notes": notes}


def format_report(data: dict) -> str:
    """The report as the table ``make times`` prints."""
    header = ("chapter", "seconds", "source", "stored", "budget")
    rows = [(r["chapter"], "?" if r["seconds"] is None else f"{r['seconds']:.1f}",
             r["source"] if r["source"] != "missing" else "", "-" if r["stored"] is None else f"{r['stored']:.1f}",
             f"OVER {r['budget_s']:.0f} s" if r["over"] else "") for r in data["rows"]]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    out = [f"note: {n}" for n in data["notes"]]
    out += [f"Chapter execution times (budget {budget_text()}, {BOOK_BUDGET_S:.0f} s for the book)",
            line.format(*header)] + [line.format(*row) for row in rows]
    book_flag = f"  OVER {BOOK_BUDGET_S:.0f} s" if "whole book" in data["over"] else ""
    out.append(f"total: {data['total']:.1f} s for {len(rows)} chapter(s){book_flag}")
    if data["over"]:
        out.append("over budget: " + ", ".join(data["over"]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", type=Path, help="JUnit XML report of an nbval run")
    parser.add_argument("--run", action="store_true", help="execute each chapter now and time it")
    parser.add_argument("--runs", type=Path, help="chapters.json written by run_all.py --chapters (fresh runs)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when over budget")
    args = parser.parse_args(argv)
    data = report(args.junit, args.runs, args.run)
    print(format_report(data))
    return 1 if data["over"] and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
