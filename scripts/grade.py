#!/usr/bin/env python
"""Grade a folder of submitted notebooks with the book's autograder; write one CSV row per exercise.

    .venv/bin/python scripts/grade.py SUBMISSIONS_DIR --out grades.csv [--timeout 60] [--jobs 2]
    make grade SUBMISSIONS=SUBMISSIONS_DIR [GRADES=grades.csv]

Every ``*.ipynb`` under SUBMISSIONS_DIR (recursively; a single notebook works too) is read as
JSON. Its autograded exercises are found from the tags of the student edition: a code cell tagged
``starter`` (or ``solution``) and ``ex-NN-name`` holds the student's function for exercise
``NN-name``. Where the tags were lost, a cell that defines the exercise's function (the name in
``tl.exercises.describe(id)``) counts, preferring exercises named by a ``tl.exercises.check(...)``
call of the notebook; the last such cell wins.

Each notebook is graded in a separate Python process (this interpreter) with its working
directory in a temporary folder and sockets disabled: first the notebook's imports and its
top-level ``def``/``class`` statements (so helpers of other cells are defined; nothing else of
the notebook runs), then, for each exercise in a fresh copy of that namespace, the exercise's
cell(s), then ``tl.exercises.check(id, function)``. An exercise that runs longer than
``--timeout`` seconds is stopped and reported, an allocation past ``--memory-gb`` fails inside
the student's code; a process that hangs or dies is killed and the remaining exercises are
graded in a new one. This protects the grader from mistakes, not from
malice: run untrusted code in a container.

The CSV has the columns ``student_file`` (relative to SUBMISSIONS_DIR), ``exercise_id``,
``passed`` (True/False) and ``message`` (the checker's message on one line). A notebook that
cannot be read (invalid JSON, missing file) gets one row with ``passed=False`` and the reason,
and a message on stderr; a notebook without autograded exercises gets one row saying so.
The exit code is 0 when grading ran (whatever the grades), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

COLUMNS = ["student_file", "exercise_id", "passed", "message"]
EX_TAG = re.compile(r"^ex-(\d\d-[A-Za-z0-9_-]+)$")
CODE_TAGS = ("starter", "solution")
MAX_MESSAGE = 1000
#: Imports every exercise may use without importing them itself (as the chapters do).
PRELUDE = """\
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_lib as tl
torch.set_num_threads(1)
"""


# --------------------------------------------------------------------------- reading notebooks
class Unreadable(Exception):
    """A submitted file that is not a readable notebook."""


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell) -> list[str]:
    metadata = cell.get("metadata") or {}
    tags = metadata.get("tags") or []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def read_cells(path: Path) -> list[dict]:
    """The code cells of a notebook file: [{"source": str, "tags": [...]}]."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Unreadable("file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read the file ({type(exc).__name__}: {exc})") from None
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"not valid JSON ({exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Unreadable("not a Jupyter notebook (no list of cells)")
    return [{"source": _source(c), "tags": _tags(c)} for c in nb["cells"]
            if isinstance(c, dict) and c.get("cell_type") == "code"]


def python_only(source: str) -> str:
    """Cell source with IPython magics and shell escapes commented out."""
    return "\n".join(f"# {line}" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _parse(source: str):
    try:
        return ast.parse(python_only(source))
    except SyntaxError:
        return None


def defined_functions(source: str) -> set[str]:
    tree = _parse(source)
    return {n.name for n in (tree.body if tree else [])
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def check_calls(source: str) -> list[tuple[str, str | None]]:
    """(exercise id, function name or None) of every ``...exercises.check("id", fn)`` call."""
    tree = _parse(source)
    calls = []
    for node in ast.walk(tree) if tree else []:
        if (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "check"
                and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            fn = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) else None
            calls.append((node.args[0].value, fn))
    return calls


def definitions(cells: list[dict]) -> list[str]:
    """The notebook's top-level imports, functions and classes, one snippet each, in order."""
    snippets = []
    for cell in cells:
        source = python_only(cell["source"])
        tree = _parse(cell["source"])
        if tree is None:
            continue
        lines = source.splitlines()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
                snippets.append("\n".join(lines[start - 1:node.end_lineno]))
    return snippets


def function_name(exercise_id: str, exercises) -> str:
    signature = exercises.EXERCISES[exercise_id].signature
    return signature[len("def "):signature.index("(")].strip()


def find_submissions(cells: list[dict], exercises) -> list[dict]:
    """The autograded exercises of a notebook: [{"id", "cells": [source], "function"}]."""
    known = exercises.EXERCISES
    found: dict[str, dict] = {}
    calls: dict[str, str | None] = {}
    for cell in cells:
        for ex_id, fn in check_calls(cell["source"]):
            if ex_id in known:
                calls.setdefault(ex_id, fn)
    for cell in cells:  # tagged cells of the student (or instructor) edition
        if any(t in cell["tags"] for t in CODE_TAGS):
            for tag in cell["tags"]:
                match = EX_TAG.match(tag)
                if match and match.group(1) in known:
                    found.setdefault(match.group(1), {"id": match.group(1), "cells": []})
                    found[match.group(1)]["cells"].append(cell["source"])
    candidates = [i for i in calls if i not in found] or (
        [] if found else [i for i in known if i not in found])
    for ex_id in candidates:  # fall back: the last cell defining the exercise's function
        names = {function_name(ex_id, exercises)} | ({calls[ex_id]} if calls.get(ex_id) else set())
        defining = [c["source"] for c in cells if defined_functions(c["source"]) & names]
        if defining:
            found[ex_id] = {"id": ex_id, "cells": [defining[-1]]}
    ordered = [i for i in known if i in found]
    for ex_id in ordered:
        found[ex_id]["function"] = calls.get(ex_id)
    return [found[i] for i in ordered]


# --------------------------------------------------------------------------- the worker process
WORKER_GUARD = """\
import socket as _socket

def _no_network(*args, **kwargs):
    raise PermissionError("network access is disabled while grading")

_socket.socket.connect = _no_network
_socket.socket.connect_ex = _no_network
_socket.create_connection = _no_network
_socket.getaddrinfo = _no_network
"""


class GradingTimeout(BaseException):
    """Raised in the worker when an exercise runs past its time (not an Exception: the
    checker reports student exceptions, this must reach the worker)."""


def worker(spec_path: str, results_path: str) -> int:
    """Grade the exercises of one notebook; append one JSON line per exercise to results_path."""
    import contextlib
    import io
    import signal
    import traceback

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    results = open(results_path, "a", encoding="utf-8")

    def emit(**row):
        results.write(json.dumps(row) + "\n")
        results.flush()

    def on_alarm(signum, frame):
        raise GradingTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    exec(WORKER_GUARD, {})
    base: dict = {"__name__": "__main__"}
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        exec(PRELUDE, base)
        from transformer_lib import exercises
        if spec.get("memory_gb"):  # a runaway allocation fails in the student's code, not the machine
            import resource

            limit = int(spec["memory_gb"] * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for snippet in spec["definitions"]:
            signal.alarm(spec["timeout"])
            try:
                exec(compile(snippet, "<notebook>", "exec"), base)
            except (Exception, SystemExit, GradingTimeout):  # noqa: BLE001 - a broken helper only matters if used
                pass
            finally:
                signal.alarm(0)
    for item in spec["exercises"]:
        ex_id = item["id"]
        emit(id=ex_id, status="start")
        namespace = dict(base)
        signal.alarm(spec["timeout"])
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                errors = []
                for n, source in enumerate(item["cells"]):
                    # Statement by statement: an error in a line that uses the rest of the notebook
                    # (a test print, a plot) does not hide the function defined next to it.
                    tree = ast.parse(python_only(source), f"<exercise {ex_id}, cell {n + 1}>")
                    for node in tree.body:
                        code = compile(ast.Module(body=[node], type_ignores=[]),
                                       f"<exercise {ex_id}, cell {n + 1}>", "exec")
                        try:
                            exec(code, namespace)
                        except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported if it matters
                            errors.append(traceback.format_exception_only(type(exc), exc)[-1].strip())
                name = function_name(ex_id, exercises)
                fn = namespace.get(name)
                if not callable(fn) and item.get("function"):
                    fn = namespace.get(item["function"])
                if not callable(fn):
                    why = f" (the cell raised {errors[0]})" if errors else ""
                    emit(id=ex_id, status="done", passed=False,
                         message=f"✗ {ex_id}: no function `{name}` defined in the exercise's cell{why}.")
                    continue
                result = exercises.check(ex_id, fn, verbose=False)
            message = result.message
            if not result.passed and "NameError" in message:
                message += ("  (The grader runs the exercise's cell with the notebook's imports, "
                            "functions and classes only: define what it uses in that cell.)")
            emit(id=ex_id, status="done", passed=bool(result.passed), message=message)
        except GradingTimeout:
            emit(id=ex_id, status="done", passed=False,
                 message=f"✗ {ex_id}: stopped after {spec['timeout']} s (an infinite loop?).")
        except Exception as exc:  # noqa: BLE001 - the cell itself failed (SyntaxError, NameError, ...)
            error = traceback.format_exception_only(type(exc), exc)[-1].strip()
            emit(id=ex_id, status="done", passed=False,
                 message=f"✗ {ex_id}: the exercise's cell raised {error}")
        finally:
            signal.alarm(0)
    results.close()
    return 0


# --------------------------------------------------------------------------- grading a notebook
def grade_notebook(path: Path, timeout: int, exercises, memory_gb: float = 4.0) -> list[dict]:
    """Rows (exercise_id, passed, message) for one notebook; never raises."""
    try:
        cells = read_cells(path)
    except Unreadable as exc:
        return [{"exercise_id": "", "passed": False, "message": f"unreadable notebook: {exc}",
                 "unreadable": True}]
    items = find_submissions(cells, exercises)
    if not items:
        return [{"exercise_id": "", "passed": False,
                 "message": "no autograded exercise found (no cell tagged starter/solution with an "
                            "ex-NN-name tag, and no function of tl.exercises.available())"}]
    snippets = definitions(cells)
    rows: dict[str, dict] = {}
    pending = list(items)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        attempt = 0
        while pending:
            attempt += 1
            spec = Path(tmp) / f"spec{attempt}.json"
            results = Path(tmp) / f"results{attempt}.jsonl"
            spec.write_text(json.dumps({"timeout": timeout, "memory_gb": memory_gb, "definitions": snippets,
                                        "exercises": pending}), encoding="utf-8")
            results.touch()
            workdir = Path(tmp) / f"work{attempt}"
            workdir.mkdir()
            env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", MPLBACKEND="Agg",
                       PYTHONDONTWRITEBYTECODE="1")
            limit = 120 + timeout * (len(pending) + 1)  # start-up (import torch) + every exercise
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker",
                                     str(spec), str(results)], cwd=workdir, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, start_new_session=True)
            try:
                _, err = proc.communicate(timeout=limit)
                died = proc.returncode != 0
                reason = (f"the grading process stopped (exit code {proc.returncode}): "
                          + (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1])
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.communicate()
                died, reason = True, f"killed after {limit} s without finishing"
            started = None
            for line in results.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row["status"] == "start":
                    started = row["id"]
                else:
                    rows[row["id"]] = {"exercise_id": row["id"], "passed": row["passed"],
                                       "message": row["message"]}
                    started = None
            remaining = [i for i in pending if i["id"] not in rows]
            progress = len(remaining) < len(pending)
            if started is not None:  # the exercise that was running when the process ended
                rows[started] = {"exercise_id": started, "passed": False,
                                 "message": f"✗ {started}: {reason}"}
                remaining = [i for i in remaining if i["id"] != started]
            elif remaining and (died or not progress):  # e.g. died in the notebook's definitions
                for item in remaining:
                    rows[item["id"]] = {"exercise_id": item["id"], "passed": False,
                                        "message": f"✗ {item['id']}: {reason}"}
                remaining = []
            pending = remaining
    return [rows[i["id"]] for i in items]


def one_line(message: str) -> str:
    text = re.sub(r"\s*\n\s*", " | ", str(message).strip())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " …"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # transformer_lib of this repository
    if argv[:1] == ["--worker"]:
        return worker(argv[1], argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted notebooks (or one notebook)")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write (grades.csv)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per exercise (60)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded in parallel (1)")
    parser.add_argument("--memory-gb", type=float, default=4.0,
                        help="address-space limit of a grading process in GiB (4; 0: none)")
    args = parser.parse_args(argv)

    root = args.submissions
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts and "__MACOSX" not in p.parts)
    elif root.suffix == ".ipynb" and (root.is_file() or root.is_symlink()):
        files, root = [root], root.parent
    else:
        print(f"grade: {args.submissions} is not a folder of notebooks (or a notebook)", file=sys.stderr)
        return 2

    from transformer_lib import exercises

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        graded = list(pool.map(lambda p: grade_notebook(p, args.timeout, exercises, args.memory_gb), files))
    rows = []
    for path, results in zip(files, graded):
        name = path.relative_to(root).as_posix()
        for row in results:
            if row.pop("unreadable", False):
                print(f"grade: skipped {name}: {row['message']}", file=sys.stderr)
            rows.append({"student_file": name, "exercise_id": row["exercise_id"],
                         "passed": bool(row["passed"]), "message": one_line(row["message"])})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    passed = sum(r["passed"] for r in rows)
    print(f"grade: {len(files)} notebook(s), {len(rows)} row(s), {passed} passed, "
          f"{time.perf_counter() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
