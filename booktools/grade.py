#!/usr/bin/env python
"""Grade a folder of submitted notebooks: a CSV row per notebook and exercise, and a gradebook for an LMS.

    .venv/bin/python -m booktools.grade SUBMISSIONS [--out _build/grades/grades.csv] [--gradebook FILE]
        [--lms generic|canvas|moodle] [--roster class.csv] [--moodle-id username|email|idnumber] [--total-column NAME]
        [--late-penalty 0.1] [--student ID] [--fresh] [--course-ref v1.0 | --course course.json]
        [--timeout 60] [--jobs 2] [--memory-gb 4] [--key-file FILE] [--points 04-self-attention=2 ...]
        [--exercises 06-causal-mask,06-masked-softmax] [--id-pattern REGEX]
    make grade SUBMISSIONS="path/to/folder" [LMS=canvas] [ROSTER=class.csv] [LATE_PENALTY=0.1] [COURSE_REF=v1.0] ...

Every ``*.ipynb`` under SUBMISSIONS (recursively, following symlinked folders; a single notebook works too) is read
as JSON; the grader never runs the student's code in its own process.

**What is graded.** The autograded exercises of a notebook are those named by a ``tl.exercises.check("id", fn)``
call or by an ``ex-NN-name`` tag of a starter or solution cell (otherwise: every exercise whose function the
notebook defines). The graded function is what the notebook would run: the *last* definition of its name in
notebook order (the name passed to the check call, else the one of the exercise's signature), so an answer pasted
in a new cell below the starter is graded, as the notebook's own check showed.

**How.** For each exercise the grader draws the cases from a seed derived from a key students never see
(``--key-file``, or the environment variable ``GRADING_KEY``, or ``_build/grading.key``, created on first use), starts
``booktools/grade_sandbox.py`` in a separate process (isolated mode, only the library on its path, sockets disabled,
an address-space limit, a time limit) which runs the notebook's imports, functions, classes and simple assignments
in notebook order and returns the function's outputs for the cases, nothing else. This process computes the
expected outputs with the references (``booktools/exercise_references.py``, not part of the library), reads the
outputs with ``torch.load(weights_only=True)`` and judges. A submission that calls the library function the
exercise asks for (``tl.causal_mask`` for the causal mask, ...) or the exercise's reference gets no credit and a
message that says why: the grader reads the function and everything of the notebook it uses, and in the student's
process those library functions are tripwires that report the call and raise.

**Output** (default: ``_build/grades/``, which git ignores). ``--out`` (long form, the class record):
``student_id, student_file, exercise_id, passed, points, late, message``, one row per notebook and exercise (an
unreadable notebook, or one without an autograded exercise, gets one row with an empty exercise id and the reason).
Grading again merges into it: a student's exercise graded now replaces that exercise's earlier rows, and the
student's other exercises keep theirs (``--fresh`` starts anew); a folder of one student's notebooks is graded under
that student's id (``--student``, or the folder's name when the record knows it). ``--gradebook`` (default ``gradebook.csv`` next to ``--out``): one row per student
(of the record and of ``--roster``: a student who submitted nothing has 0), a column per exercise with its points
(a student's best notebook counts), laid out for ``--lms``: *generic* (``student_id``, the exercises, ``total``),
*canvas* (``Student, ID, SIS User ID, SIS Login ID, Section``, a *Points Possible* row, a column per exercise; ``ID``
is the Canvas user id read from Canvas's download names ``name[_LATE]_<user id>_<submission id>_<file>``) or
*moodle* (the ``Username``, ``Email address`` or ``ID number`` of ``--roster``, then the exercises); the total is a
column of its own for an LMS only with ``--total-column``. A late file (``_LATE_``) is marked and loses
``--late-penalty`` of its points. Next to the record: ``feedback/<id>.md`` per student (each exercise: points and
message), ``report.md`` for the instructor (the version graded with and a warning when it is not the course's pinned
one, non-submitters, late files, tampering attempts and forbidden calls, submissions near-identical to the
library's own implementation, unreadable notebooks) and ``findings.json`` (what the report lists, merged like the
record). CSV files are UTF-8 with a byte-order mark.

**Version.** The grader records the commit of the library it grades with; the course's version is ``--course-ref``,
``--course`` (the student edition's ``course.json``) or the ref the submissions' set-up cells install
(``make student-edition COURSE_REF=...``); when they differ it warns, naming the library files that changed.

Exit code: 0 when grading ran (whatever the grades), 2 on a usage error, 3 when no notebook was found.

The student's process cannot change a verdict, but it runs untrusted code with the grader's user rights: grade in a
container or a throw-away account when that matters.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent

import torch  # noqa: E402

from booktools import exercise_references as references  # noqa: E402
from booktools.exercisekit import EX_TAG  # noqa: E402  (a chapter's exercise tag, ex-NN-name)
import transformer_lib  # noqa: E402
from transformer_lib.exercises import engine, guard  # noqa: E402
from transformer_lib.exercises.catalogue import EXERCISES  # noqa: E402

SANDBOX = TOOLS / "grade_sandbox.py"
LIBRARY_DIR = Path(transformer_lib.__file__).resolve().parent
DEFAULT_KEY_FILE = ROOT / "_build" / "grading.key"
DEFAULT_OUT = ROOT / "_build" / "grades" / "grades.csv"   # ignored by git (_build/)
COLUMNS = ["student_id", "student_file", "exercise_id", "passed", "points", "late", "message"]
MIN_TOKENS = 30  # a shorter function is not compared by containment
NEAR_COPY = 0.9  # similarity to the library's implementation from which a submission is flagged
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CODE_TAGS = ("starter", "solution")
MAX_MESSAGE = 1000
MAX_NOTEBOOK_BYTES = 50 * 2**20
MAX_OUTPUT_BYTES = 600 * 2**20
STARTUP_SECONDS = 120  # importing torch in the student's process on a busy machine
LIBRARY_ALIASES = ("tl", "transformer_lib")  # bound by the sandbox's prelude


# --------------------------------------------------------------------------- reading notebooks
class Unreadable(Exception):
    """A submitted file that is not a readable notebook."""


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell) -> list[str]:
    metadata = cell.get("metadata") or {}
    tags = metadata.get("tags") or [] if isinstance(metadata, dict) else []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def read_cells(path: Path) -> list[dict]:
    """The code cells of a notebook file: [{"source": str, "tags": [...], "number": n}] (n: 1-based position
    among all cells)."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise Unreadable(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Unreadable("file not found (a broken link?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read the file ({type(exc).__name__}: {exc})") from None
    try:
        nb = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise Unreadable(f"not valid JSON ({exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Unreadable("not a Jupyter notebook (no list of cells)")
    return [{"source": _source(c), "tags": _tags(c), "number": n}
            for n, c in enumerate(nb["cells"], 1) if isinstance(c, dict) and c.get("cell_type") == "code"]


def python_only(source: str) -> str:
    """Cell source with IPython magics and shell escapes commented out."""
    return "\n".join(f"# {line}" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def parse(source: str):
    """The module AST of a cell, or the SyntaxError."""
    try:
        return ast.parse(python_only(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return exc


def _plain_value(node) -> bool:
    """A right-hand side the grader may evaluate: a literal, a lambda, or a name or attribute (an alias)."""
    if isinstance(node, ast.Lambda):
        return True
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def is_definition(node) -> bool:
    """Statements the grader runs: imports, functions, classes and simple assignments (constants, aliases)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Name) for t in node.targets) and _plain_value(node.value)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.value is not None and _plain_value(node.value)
    return False


class Notebook:
    """What the grader reads of one notebook: its definitions in order, check calls, tags, syntax errors."""

    def __init__(self, cells: list[dict]):
        self.cells = cells
        self.statements: list[ast.stmt] = []     # the definitions, in notebook order
        self.snippets: list[dict] = []           # their sources, for the student's process
        self.syntax_errors: dict[int, str] = {}  # cell number -> error
        self.calls: dict[str, str | None] = {}   # exercise id -> function name of its last check call
        self.tagged: list[str] = []
        for cell in cells:
            tree = parse(cell["source"])
            if not isinstance(tree, ast.Module):
                self.syntax_errors[cell["number"]] = f"{type(tree).__name__}: {tree}"
                continue
            lines = python_only(cell["source"]).splitlines()
            for node in tree.body:
                if is_definition(node):
                    start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
                    self.statements.append(node)
                    self.snippets.append({"source": "\n".join(lines[start - 1:node.end_lineno]),
                                          "where": f"<cell {cell['number']}>"})
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "check"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str) and node.args[0].value in EXERCISES):
                    name = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) else None
                    self.calls[node.args[0].value] = name or self.calls.get(node.args[0].value)
            if any(t in cell["tags"] for t in CODE_TAGS):
                for tag in cell["tags"]:
                    match = EX_TAG.match(tag)
                    if match and match.group(1) in EXERCISES:
                        self.tagged.append(match.group(1))
        self.bound = {name for node in self.statements for name in guard.bound_names(node)}

    def exercises(self) -> list[dict]:
        """[{"id", "function", "fallback"}] in the catalogue's order."""
        ids = [i for i in EXERCISES if i in self.calls or i in self.tagged]
        if not ids:
            defined = {node.name for node in self.statements if isinstance(node, ast.FunctionDef)}
            ids = [i for i, ex in EXERCISES.items() if ex.function in defined]
        items = []
        for ex_id in ids:
            standard = EXERCISES[ex_id].function
            function = self.calls.get(ex_id) or standard
            fallback = standard if function != standard else None
            if function not in self.bound and fallback in self.bound:
                function, fallback = fallback, None
            items.append({"id": ex_id, "function": function, "fallback": fallback})
        return items

    def syntax_note(self, name: str) -> str:
        """A note on cells that mention ``def name`` but could not be parsed."""
        for number, error in self.syntax_errors.items():
            cell = next(c for c in self.cells if c["number"] == number)
            if re.search(rf"\bdef\s+{re.escape(name)}\b", cell["source"]):
                return f" (cell {number}, which defines `{name}`, has a syntax error: {error})"
        return ""


# --------------------------------------------------------------------------- the student's process
def child_env(workdir: Path) -> dict:
    """A small environment for the student's process: no grading key, no PYTHONPATH."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT") if k in os.environ}
    return dict(keep, HOME=str(workdir), TMPDIR=str(workdir), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")


def run_sandbox(workdir: Path, spec: dict, cases: list, timeout: int) -> dict:
    """Run the student's process; return {"outputs", "events", "returncode", "killed", "log"}."""
    lib = workdir / "lib"
    lib.mkdir(parents=True)
    (lib / "transformer_lib").symlink_to(LIBRARY_DIR, target_is_directory=True)
    spec = dict(spec, lib=str(lib), blocked_paths=[str(ROOT), str(TOOLS)])
    (workdir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    torch.save([engine.encode_case(c) for c in cases], workdir / "cases.pt")
    read_end, write_end = os.pipe()
    chunks: list[bytes] = []

    def reader():
        size = 0
        with os.fdopen(read_end, "rb") as pipe:
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                if size < 2**20:
                    chunks.append(chunk)
                    size += len(chunk)

    thread = threading.Thread(target=reader, daemon=True)
    with open(workdir / "log.txt", "wb") as log:
        try:
            proc = subprocess.Popen([sys.executable, "-I", str(SANDBOX), str(workdir), str(write_end)],
                                    cwd=workdir, env=child_env(workdir), pass_fds=(write_end,),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        finally:
            os.close(write_end)
        thread.start()
        killed = False
        try:
            proc.wait(timeout=timeout + STARTUP_SECONDS)
        except subprocess.TimeoutExpired:
            killed = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the process and anything it started
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    thread.join(timeout=10)
    events = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    outputs = None
    out_path = workdir / "outputs.pt"
    if out_path.is_file() and not out_path.is_symlink() and out_path.stat().st_size <= MAX_OUTPUT_BYTES:
        try:
            outputs = torch.load(out_path, weights_only=True)
        except Exception:  # noqa: BLE001 - anything unreadable counts as no outputs
            outputs = None
        if not isinstance(outputs, dict) or not isinstance(outputs.get("outcomes"), list):
            outputs = None
    log_tail = ""
    try:
        with open(workdir / "log.txt", "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - 2000))
            log_tail = handle.read().decode("utf-8", "replace")
    except OSError:
        pass
    return {"outputs": outputs, "events": events, "returncode": proc.returncode, "killed": killed, "log": log_tail}


def _outcome(value) -> dict:
    """An outcome read back from the student's process, reduced to what the judge reads."""
    if not isinstance(value, dict):
        return {"status": "error", "error": "an unreadable result"}
    status = value.get("status")
    if status == "ok":
        return {"status": "ok", "value": value.get("value")}
    if status in ("not_implemented", "timeout", "error"):
        return {"status": status, "error": str(value.get("error", ""))[:500]}
    return {"status": "error", "error": "an unreadable result"}


def grade_exercise(nb: Notebook, item: dict, key: str, timeout: int, memory_gb: float, workdir: Path) -> dict:
    """{"exercise_id", "passed", "message"} for one exercise of one notebook."""
    ex_id = item["id"]
    ex = EXERCISES[ex_id]
    findings = guard.static_findings(ex, nb.statements, item["function"], LIBRARY_ALIASES)
    if item.get("fallback") and item["fallback"] in nb.bound and item["function"] not in nb.bound:
        findings += guard.static_findings(ex, nb.statements, item["fallback"], LIBRARY_ALIASES)
    findings = list(dict.fromkeys(findings))
    cases = references.make_cases(ex_id, references.grading_seed(key, ex_id))
    spec = {"exercise": ex_id, "function": item["function"], "fallback": item.get("fallback"),
            "snippets": nb.snippets, "timeout": timeout, "memory_gb": memory_gb}
    run = run_sandbox(workdir, spec, cases, timeout)
    findings += [engine.call_finding(ex, str(e.get("name"))) for e in run["events"] if e.get("event") == "forbidden"]
    findings = engine.distinct_findings(findings)

    def verdict(passed: bool, message: str) -> dict:
        return {"exercise_id": ex_id, "passed": passed, "message": message}

    if findings:
        return dict(verdict(False, engine.no_credit(ex, findings).message), findings=findings)
    outputs = run["outputs"]
    if outputs is None:
        case = next((e.get("n") for e in reversed(run["events"]) if e.get("event") == "case"), None)
        started = any(e.get("event") == "start" for e in run["events"])
        where = f"during case {case}" if case else "while running the notebook's definitions"
        if run["killed"]:
            if started:
                return verdict(False, f"✗ {ex_id}: stopped after {timeout} s (an infinite loop?) {where}.")
            return verdict(False, f"✗ {ex_id}: the grading process did not start within "
                                  f"{timeout + STARTUP_SECONDS} s.")
        return verdict(False, f"✗ {ex_id}: the grading process ended (exit code {run['returncode']}) {where} "
                              f"without returning results: os._exit, a crash, or the memory limit "
                              f"({memory_gb:g} GiB).")
    if not outputs.get("defined"):
        errors = [str(e) for e in outputs.get("errors") or []]
        why = f" ({errors[-1]})" if errors else ""
        return verdict(False, f"✗ {ex_id}: no function `{item['function']}` is defined in the notebook"
                              f"{nb.syntax_note(item['function']) or why}.")
    params = outputs.get("params")
    if isinstance(params, list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in params):
        problem = engine.signature_problem(ex, [(str(a), str(b)) for a, b in params],
                                           f"{item['function']}({', '.join(str(a) for a, _ in params)})")
        if problem:
            return verdict(False, problem)
    outcomes = [_outcome(o) for o in outputs["outcomes"]]
    expected = references.expected_outputs(ex_id, cases)
    mistakes = references.mistake_outputs(ex_id, cases)
    result = engine.judge(ex, cases, expected, outcomes, mistakes)
    message = result.message
    if not result.passed and "NameError" in message:
        message += ("  (The grader runs the notebook's imports, functions, classes and simple assignments, not its "
                    "other statements: define what the function uses in one of those.)")
    if not result.passed and engine.NOT_IMPLEMENTED in message:  # the self-check's "run this cell again" is no grade
        message = (f"✗ {ex_id}: {engine.NOT_IMPLEMENTED}: the notebook's `{item['function']}` still raises "
                   f"NotImplementedError{nb.syntax_note(item['function'])}.")
    return verdict(result.passed, message)


def prepare_notebook(path: Path):
    """(Notebook, exercises to grade) or (None, the rows that say why there is nothing to grade)."""
    try:
        cells = read_cells(path)
    except Unreadable as exc:
        return None, [{"exercise_id": "", "passed": False, "message": f"unreadable notebook: {exc}",
                       "unreadable": True}]
    nb = Notebook(cells)
    items = nb.exercises()
    if not items:
        return None, [{"exercise_id": "", "passed": False,
                       "message": "no autograded exercise found (no tl.exercises.check call, no cell tagged "
                                  "starter/solution with an ex-NN-name tag, no function of "
                                  "tl.exercises.available())"}]
    return nb, items


def _grade_safely(nb: Notebook, item: dict, key: str, timeout: int, memory_gb: float, workdir: Path) -> dict:
    try:
        return grade_exercise(nb, item, key, timeout, memory_gb, workdir)
    except Exception as exc:  # noqa: BLE001 - a grader bug must not stop the other notebooks
        return {"exercise_id": item["id"], "passed": False,
                "message": f"✗ {item['id']}: the grader failed ({type(exc).__name__}: {exc})"}


def grade_files(files: list[Path], key: str, timeout: int = 60, memory_gb: float = 4.0,
                jobs: int = 1) -> list[list[dict]]:
    """Rows (exercise_id, passed, message) per notebook; ``jobs`` exercises run at a time. Never raises."""
    prepared = [prepare_notebook(path) for path in files]
    tasks = [(i, j, nb, item) for i, (nb, items) in enumerate(prepared) if nb is not None
             for j, item in enumerate(items)]
    results: list[list[dict]] = [[] if nb is not None else rows for nb, rows in prepared]
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        def run(task):
            i, j, nb, item = task
            return _grade_safely(nb, item, key, timeout, memory_gb, Path(tmp) / f"{i}-{j}-{item['id']}")

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for (i, _, _, _), row in zip(tasks, pool.map(run, tasks)):
                results[i].append(row)
    return results


def grade_notebook(path: Path, key: str, timeout: int = 60, memory_gb: float = 4.0, jobs: int = 1) -> list[dict]:
    """Rows (exercise_id, passed, message) for one notebook; never raises."""
    return grade_files([path], key, timeout, memory_gb, jobs)[0]


# --------------------------------------------------------------------------- files, ids, keys
def find_notebooks(root: Path) -> list[Path]:
    """Every notebook under ``root``, following symlinked folders (each real folder once)."""
    found, seen = [], set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if d not in (".ipynb_checkpoints", "__MACOSX") and not d.startswith("."))
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".ipynb") and not f.startswith(".")]
    return sorted(found)


def student_id(relative: Path, pattern: str | None = None) -> str:
    """The student of a notebook: its first folder under SUBMISSIONS, or its file name without extension."""
    name = relative.parts[0] if len(relative.parts) > 1 else relative.stem
    if pattern:
        match = re.search(pattern, name)
        if match:
            return match.group("id") if "id" in match.groupdict() else (match.group(1) if match.groups()
                                                                          else match.group(0))
    return name


def grading_key(key_file: Path | None) -> tuple[str, str]:
    """(key, where it came from). Never printed."""
    if key_file is None and os.environ.get("GRADING_KEY"):
        return os.environ["GRADING_KEY"], "the environment variable GRADING_KEY"
    path = key_file or DEFAULT_KEY_FILE
    if not path.is_file():
        if key_file is not None:
            raise FileNotFoundError(f"the key file {path} does not exist")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
        path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip(), f"{path} (created now)"
    return path.read_text(encoding="utf-8").strip(), str(path)


def one_line(message: str) -> str:
    text = re.sub(r"\s*\n\s*", " | ", str(message).strip())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " …"


def parse_points(values: list[str]) -> dict[str, float]:
    points = {}
    for value in values:
        ex_id, _, number = value.partition("=")
        try:
            points[ex_id] = float(number)
        except ValueError:
            raise ValueError(f"--points takes ID=POINTS, got {value!r}") from None
        if ex_id not in EXERCISES:
            raise ValueError(f"--points: {ex_id!r} is not an id of tl.exercises.available()")
    return points


def _number(x: float):
    return int(x) if float(x).is_integer() else round(x, 3)


# --------------------------------------------------------------------------- students: ids, late files, roster
#: Canvas's "Download Submissions" names each file ``<name>_<user id>_<submission id>_<file>``, and
#: ``<name>_LATE_<user id>_<submission id>_<file>`` for a late one (the name is the student's, lower-cased, without
#: spaces; the user id is Canvas's, the ``ID`` column of its gradebook).
CANVAS_NAME = re.compile(r"^(?P<name>[^_]+?)(?P<late>_LATE)?_(?P<id>\d+)_(?P<submission>\d+)_(?P<file>.+)$")


def identify(relative: Path, pattern: str | None = None, lms: str = "generic") -> dict:
    """{"id", "name", "late"} of a notebook: Canvas's user id and late marker for a Canvas download name (``--lms
    canvas``), else :func:`student_id` (``--id-pattern``, the first folder, or the file name)."""
    first = relative.parts[0]
    if lms == "canvas" and not pattern:
        match = CANVAS_NAME.match(first if len(relative.parts) > 1 else relative.name)
        if match:
            return {"id": match["id"], "name": match["name"], "late": bool(match["late"])}
    return {"id": student_id(relative, pattern), "name": "", "late": "_LATE_" in first}


ROSTER_FIELDS = {  # roster column (lower case, spaces and underscores removed) -> field
    "studentid": "id", "id": "id", "student": "name", "name": "name", "fullname": "name", "section": "section",
    "sisuserid": "sis_user_id", "sisloginid": "sis_login_id", "username": "username", "email": "email",
    "emailaddress": "email", "idnumber": "idnumber"}


def read_roster(path: Path) -> dict[str, dict]:
    """The class list: student id -> {"name", "section", "sis_user_id", "sis_login_id", "username", "email",
    "idnumber"} (those the file has). A CSV (comma, semicolon or tab; UTF-8, with or without a byte-order mark)
    with a header naming ``student_id`` or ``ID`` (the id the grader finds: the student's folder or file name, or
    Canvas's user id) and any of the other columns; a Canvas gradebook export works as it is (its *Points Possible*
    row is skipped). Raises ValueError naming --roster."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"--roster: the file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--roster: cannot read {path} as UTF-8 text ({exc})") from None
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(text.splitlines(), dialect))
    if not rows:
        raise ValueError(f"--roster: {path} is empty (expected a header with student_id or ID, then a row per student)")
    header = [re.sub(r"[\s_]", "", h.strip().lower()) for h in rows[0]]
    fields = {i: ROSTER_FIELDS[h] for i, h in enumerate(header) if h in ROSTER_FIELDS}
    if "id" not in fields.values():
        raise ValueError(f"--roster: {path} has no student id column (its header: {rows[0]}; expected a column "
                         "student_id or ID holding the ids the grader finds: folder or file names, or Canvas user ids)")
    roster: dict[str, dict] = {}
    for row in rows[1:]:
        record = {field: row[i].strip() for i, field in fields.items() if i < len(row)}
        sid = record.pop("id", "")
        if not sid or record.get("name", "").strip().lower() == "points possible":
            continue
        roster[sid] = record
    return roster


# --------------------------------------------------------------------------- the gradebook
def gradebook_rows(rows: list[dict], exercises: list[str], roster: dict[str, dict] | None = None) -> list[dict]:
    """One row per student: the best points of each exercise over the student's notebooks, and the total; every
    student of ``roster`` too (0 for an exercise not submitted)."""
    students: dict[str, dict[str, float]] = {sid: {} for sid in roster or {}}
    for row in rows:
        best = students.setdefault(row["student_id"], {})
        if row["exercise_id"] in exercises:
            best[row["exercise_id"]] = max(best.get(row["exercise_id"], 0.0), float(row["points"]))
    table = []
    for sid in sorted(students):
        scores = {ex_id: students[sid].get(ex_id, 0.0) for ex_id in exercises}
        table.append({"student_id": sid, **{k: _number(v) for k, v in scores.items()},
                      "total": _number(sum(scores.values()))})
    return table


MOODLE_IDS = {"username": "Username", "email": "Email address", "idnumber": "ID number"}


def write_gradebook(path: Path, table: list[dict], exercises: list[str], lms: str, points: dict | None = None,
                    roster: dict[str, dict] | None = None, names: dict[str, str] | None = None,
                    total_column: str | None = None, moodle_id: str = "username") -> list[str]:
    """Write the gradebook as the LMS imports it; returns the ids of students left out (Moodle: no identifier).

    - generic: ``student_id``, a column per exercise, ``total``.
    - canvas: ``Student, ID, SIS User ID, SIS Login ID, Section``, then a column per exercise (each an assignment
      of Canvas) and, only with ``total_column``, the total as one more; the second row is *Points Possible*, as
      Canvas exports it. ``ID`` is Canvas's user id (from the download names); names, SIS ids and sections come
      from the roster.
    - moodle: the identifier Moodle maps to a user (``Username``, ``Email address`` or ``ID number``, from the
      roster; without one, the student id is taken as it), a column per exercise, the total only with
      ``total_column``.

    UTF-8 with a byte-order mark, so that Excel reads ✓, ✗ and ε as well as the LMS does."""
    points = points or {}
    roster = roster or {}
    names = names or {}
    columns = list(exercises) + ([total_column] if total_column else [])

    def values(row):
        return [row[e] for e in exercises] + ([row["total"]] if total_column else [])

    left_out = []
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle)
        if lms == "canvas":
            writer.writerow(CANVAS_COLUMNS + columns)
            possible = [_number(points.get(e, 1.0)) for e in exercises]
            writer.writerow(["Points Possible", "", "", "", ""] + possible
                            + ([_number(sum(points.get(e, 1.0) for e in exercises))] if total_column else []))
            for row in table:
                info = roster.get(row["student_id"], {})
                writer.writerow([info.get("name") or names.get(row["student_id"]) or row["student_id"],
                                 row["student_id"], info.get("sis_user_id", ""), info.get("sis_login_id", ""),
                                 info.get("section", "")] + values(row))
        elif lms == "moodle":
            writer.writerow([MOODLE_IDS[moodle_id]] + columns)
            for row in table:
                info = roster.get(row["student_id"])
                ident = row["student_id"] if info is None and not roster else (info or {}).get(moodle_id, "")
                if not ident:
                    left_out.append(row["student_id"])
                    continue
                writer.writerow([ident] + values(row))
        else:
            writer.writerow(["student_id"] + exercises + ["total"])
            for row in table:
                writer.writerow([row["student_id"]] + [row[e] for e in exercises] + [row["total"]])
    return left_out


# --------------------------------------------------------------------------- the class record, feedback, report
def read_record(path: Path) -> list[dict]:
    """The rows of an earlier long CSV (the class record), or [] when there is none."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or "student_id" not in reader.fieldnames:
            raise ValueError(f"--out: {path} exists but is not a grades file of booktools/grade.py (its header: "
                             f"{reader.fieldnames}); give another --out or --fresh")
        return [{k: r.get(k, "") for k in COLUMNS} for r in reader]


def _record_key(row: dict) -> tuple[str, str]:
    """What a row grades: a student's exercise, or (a row without an exercise: an unreadable notebook, one without
    any autograded exercise) a student's file."""
    exercise = row.get("exercise_id") or ""
    return str(row["student_id"]), exercise if exercise else "file:" + str(row.get("student_file", ""))


def merge_record(earlier: list[dict], new: list[dict]) -> list[dict]:
    """The class record after a (re)grading: each earlier row of a student's exercise graded now is replaced by the
    new row; the student's other exercises (another chapter, handed in earlier) keep their rows."""
    regraded = {_record_key(r) for r in new}
    return [r for r in earlier if _record_key(r) not in regraded] + new


def tampering(cells: list[dict]) -> list[str]:
    """Statements of a notebook that replace part of the checker, torch or the library (a patched ``check``,
    ``torch.allclose``, ``Tensor.__eq__``, ...): the grader's verdicts do not depend on them, but the instructor
    should know. One line per statement, with its cell."""
    watched_roots = {"tl", "transformer_lib", "torch", "F", "nn", "np", "numpy", "math", "builtins", "exercises"}
    found = []
    for cell in cells:
        tree = parse(cell["source"])
        if not isinstance(tree, ast.Module):
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                    and node.args:
                chain = _attribute_chain(node.args[0])
                if chain and chain[0] in watched_roots:
                    found.append(f"cell {cell['number']}: `{node.func.id}({'.'.join(chain)}, …)`")
                continue
            for target in targets:
                chain = _attribute_chain(target)
                if chain and len(chain) > 1 and (chain[0] in watched_roots or "check" in chain
                                                 or chain[-1].startswith("__")):
                    found.append(f"cell {cell['number']}: assigns `{'.'.join(chain)}`")
    return list(dict.fromkeys(found))


def _attribute_chain(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def safe_name(sid: str) -> str:
    return re.sub(r"[^\w.@+-]+", "_", sid).strip("._") or "student"


def feedback_text(sid: str, rows: list[dict], exercises: list[str], points: dict, name: str = "",
                  version: dict | None = None, submitted: bool = True) -> str:
    """The feedback file of one student: each exercise with its points and message."""
    lines = [f"# Feedback: {name + ' (' + sid + ')' if name else sid}", ""]
    if not submitted:
        lines += ["No notebook was received: every exercise counts 0.", ""]
    best: dict[str, dict] = {}
    for row in rows:
        if row["exercise_id"] in exercises:
            current = best.get(row["exercise_id"])
            if current is None or float(row["points"]) > float(current["points"]):
                best[row["exercise_id"]] = row
    total = 0.0
    for ex_id in exercises:
        row = best.get(ex_id)
        possible = points.get(ex_id, 1.0)
        got = float(row["points"]) if row else 0.0
        total += got
        lines += [f"## {ex_id}: {_number(got)} / {_number(possible)}", ""]
        if row is None:
            lines += ["Not found in your notebook(s).", ""]
            continue
        late = " (submitted late)" if str(row.get("late")) == "True" else ""
        lines += [f"`{row['student_file']}`{late}", "", row["message"].replace(" | ", "\n"), ""]
    for row in rows:
        if not row["exercise_id"]:
            lines += [f"`{row['student_file']}`: {row['message']}", ""]
    lines += [f"**Total: {_number(total)} / {_number(sum(points.get(e, 1.0) for e in exercises))}**", ""]
    if version:
        lines += [f"Graded with the book's library at commit `{version['commit'][:12]}`.", ""]
    return "\n".join(lines)


def course_version(course_ref: str | None, course_file: Path | None, files: list[Path]) -> tuple[dict | None, str]:
    """(the course's pinned version {"ref", "commit"} or None, where it came from): ``--course-ref``, else
    ``--course`` (the student edition's course.json), else the ref the submissions' set-up cells install."""
    from booktools import exercisekit as ek

    if course_ref:
        return ek.resolve_course_ref(course_ref), "--course-ref"
    if course_file:
        try:
            data = json.loads(Path(course_file).read_text(encoding="utf-8"))
            return {"ref": str(data["ref"]), "commit": str(data["commit"])}, str(course_file)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"--course: {course_file} is not the student edition's {ek.COURSE_FILE} "
                             f"({type(exc).__name__}: {exc}); expected {{\"ref\": ..., \"commit\": ...}}") from None
    refs: dict[str, int] = {}
    for path in files:
        try:
            cells = read_cells(path)
        except Unreadable:
            continue
        for cell in cells:
            found = ek.setup_cell_ref(cell["source"])
            if found and found[1]:
                refs[found[1]] = refs.get(found[1], 0) + 1
    if not refs:
        return None, ""
    ref = max(refs, key=refs.get)
    try:
        return ek.resolve_course_ref(ref, "the submissions' set-up cells"), "the submissions' set-up cells"
    except ValueError:
        return {"ref": ref, "commit": ""}, "the submissions' set-up cells (not a commit of this clone)"


def version_warning(course: dict | None, version: dict) -> str | None:
    """A warning when the grader's version is not the course's pinned one (None when they agree or no pin)."""
    from booktools import exercisekit as ek

    if course is None:
        return None
    if not course.get("commit"):
        return (f"the course pins the library to {course['ref']!r}, which this clone does not have: the grades may "
                f"differ from the students' self-check (fetch the tag: git fetch --tags)")
    if course["commit"] != version["commit"]:
        changed = ek.library_changes(course["commit"], version["commit"])
        what = ("the library and grader files are the same" if changed == [] else
                f"{len(changed)} library or grader file(s) differ: {', '.join(changed[:5])}" if changed else
                "git cannot compare them")
        return (f"grading with commit {version['commit'][:12]}, but the course pins {course['ref']} = "
                f"{course['commit'][:12]} ({what}); check out {course['ref']} to grade with the students' version")
    if version.get("dirty"):
        return "the library or the grader has local changes since the course's commit (git status)"
    return None


def report_text(version: dict, course: dict | None, warning: str | None, record: list[dict], table: list[dict],
                missing: list[str], late: list[str], cheats: list[tuple[str, str, str]], copies: list[tuple],
                unreadable: list[str], left_out: list[str], started: str) -> str:
    """The instructor's report (report.md next to the grades)."""
    lines = ["# Grading report", "",
             f"- graded {started} with `transformer_lib` {version['version']} at commit `{version['commit']}`"
             + (" (with local changes)" if version.get("dirty") else ""),
             f"- course version: {course['ref']} = `{course['commit'] or '?'}`" if course else
             "- course version: not pinned (COURSE_REF / --course-ref)"]
    if warning:
        lines.append(f"- **warning**: {warning}")
    lines += [f"- {len(table)} student(s), {sum(1 for r in record if r['exercise_id'])} graded exercise(s), "
              f"{sum(1 for r in record if str(r['passed']) == 'True')} passed", ""]
    sections = [
        ("No submission (in the roster, no notebook)", [f"- {sid}" for sid in missing]),  # names added by main
        ("Late files", [f"- {item}" for item in late]),
        ("Tampering attempts and forbidden calls (no credit where it mattered; the verdicts do not depend on them)",
         [f"- {sid}, `{where}`: {what}" for sid, where, what in cheats]),
        ("Near-identical to the library's implementation (for you to judge; the grade is unchanged)",
         [f"- {sid}, `{where}`, {ex_id}: {similarity:.0%} similar to `{source}`"
          for sid, where, ex_id, similarity, source in copies]),
        ("Unreadable notebooks", [f"- {item}" for item in unreadable]),
        ("Left out of the gradebook (no LMS identifier in the roster)", [f"- {sid}" for sid in left_out]),
    ]
    for title, items in sections:
        lines += [f"## {title}", ""] + (items or ["(none)"]) + [""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- near-copies of the library
def _normalised(source: str) -> str | None:
    """A function's code with its docstrings and comments dropped and every identifier it binds or reads renamed
    in order of appearance (v0, v1, ...), attribute names kept: two copies that differ only in names match."""
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError):
        return None
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return None
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        return names.setdefault(name, f"v{len(names)}")

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.name = rename(node.name)
            node.returns = None
        elif isinstance(node, ast.arg):
            node.arg, node.annotation = rename(node.arg), None
        elif isinstance(node, ast.Name):
            node.id = rename(node.id)
    return ast.unparse(functions[-1])


def near_copy(ex, source: str) -> tuple[float, str] | None:
    """(similarity, library function) of the closest of the library's own implementations of the exercise (its
    forbidden functions) to the submitted function ``source``, when it reaches :data:`NEAR_COPY`."""
    import difflib
    import inspect

    mine = _normalised(source)
    if mine is None:
        return None
    best = None
    for qualname in ex.forbidden:
        try:
            obj = guard.resolve(qualname)
            library = _normalised(inspect.getsource(obj))
        except Exception:  # noqa: BLE001 - a class, a builtin: nothing to compare
            continue
        if library is None:
            continue
        a, b = re.findall(r"\w+|[^\w\s]", mine), re.findall(r"\w+|[^\w\s]", library)
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        # the library's code with its argument checks left out is still a copy: the share of the submission's
        # tokens found in order in the library's, for a submission long enough not to match by chance
        contained = sum(block.size for block in matcher.get_matching_blocks()) / len(a) if len(a) >= MIN_TOKENS else 0
        ratio = max(matcher.ratio(), contained)
        if best is None or ratio > best[0]:
            best = (ratio, guard.display_name(qualname))
    return best if best and best[0] >= NEAR_COPY else None


def graded_source(nb: Notebook, function: str) -> str | None:
    """The source of the last top-level definition of ``function`` in the notebook (what is graded)."""
    for node, snippet in zip(reversed(nb.statements), reversed(nb.snippets)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            return snippet["source"]
    return None


# --------------------------------------------------------------------------- command line
def _positive_fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"--late-penalty takes a fraction of the points between 0 and 1 (0.1: 10 %% "
                                         f"off), got {value!r}")
    return number


def main(argv: list[str] | None = None) -> int:
    from booktools import exercisekit as ek

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted notebooks (or one notebook)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="long CSV, a row per notebook and exercise: the class record, merged on regrading "
                             "(default: _build/grades/grades.csv, ignored by git)")
    parser.add_argument("--gradebook", type=Path, help="gradebook CSV, a row per student (default: "
                                                        "gradebook.csv next to --out)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per exercise for the student's code (60)")
    parser.add_argument("--jobs", type=int, default=1, help="exercises graded in parallel (1)")
    parser.add_argument("--memory-gb", type=float, default=4.0,
                        help="address-space limit of the student's process in GiB (4; 0: none)")
    parser.add_argument("--key-file", type=Path, help="file holding the secret key of the grading cases "
                                                      "(default: $GRADING_KEY, else _build/grading.key)")
    parser.add_argument("--points", action="append", default=[], metavar="ID=POINTS",
                        help="points of an exercise in the gradebook (default 1 each); repeatable")
    parser.add_argument("--exercises", help="comma-separated exercise ids: the gradebook's columns (default: "
                                            "every exercise found)")
    parser.add_argument("--id-pattern", help="regular expression that extracts the student id from the folder or "
                                             "file name (group 'id', else group 1)")
    parser.add_argument("--lms", choices=("generic", "canvas", "moodle"), default="generic",
                        help="gradebook layout: generic, canvas (Canvas's import: ID = Canvas user id from the "
                             "download names, a Points Possible row) or moodle (an identifier Moodle maps)")
    parser.add_argument("--roster", type=Path, help="class list CSV (student_id or ID, and name, section, SIS ids, "
                                                    "username, email, ID number): non-submitters get 0")
    parser.add_argument("--moodle-id", choices=tuple(MOODLE_IDS), default="username",
                        help="with --lms moodle: the roster column Moodle maps users by (username)")
    parser.add_argument("--total-column", metavar="NAME",
                        help="add the total as one more gradebook column named NAME (Canvas and Moodle import it as "
                             "an assignment of its own; off by default)")
    parser.add_argument("--late-penalty", type=_positive_fraction, default=0.0,
                        help="fraction of the points taken off a late file (Canvas's _LATE_ names), e.g. 0.1")
    parser.add_argument("--student", help="SUBMISSIONS is this one student's folder (a regrade): its notebooks are "
                                          "graded under this id and merged into the class record")
    parser.add_argument("--fresh", action="store_true", help="start a new class record instead of merging into --out")
    parser.add_argument("--course-ref", help="the course's pinned tag or commit (COURSE_REF): warn when grading with "
                                             "another version")
    parser.add_argument("--course", type=Path, help="the student edition's course.json (instead of --course-ref)")
    args = parser.parse_args(argv)
    if args.timeout < 1 or args.jobs < 1 or args.memory_gb < 0:
        parser.error(f"--timeout and --jobs must be at least 1, --memory-gb at least 0 (got --timeout {args.timeout}, "
                     f"--jobs {args.jobs}, --memory-gb {args.memory_gb})")
    try:
        points = parse_points(args.points)
        roster = read_roster(args.roster) if args.roster else None
    except ValueError as exc:
        parser.error(str(exc))
    columns = [e.strip() for e in args.exercises.split(",") if e.strip()] if args.exercises else None
    if columns and [e for e in columns if e not in EXERCISES]:
        parser.error(f"--exercises: unknown id(s) {[e for e in columns if e not in EXERCISES]} (expected ids of "
                     "tl.exercises.available())")
    if args.lms == "moodle" and roster is not None and not any(args.moodle_id in r for r in roster.values()):
        parser.error(f"--moodle-id {args.moodle_id}: the roster {args.roster} has no such column (expected a column "
                     f"{MOODLE_IDS[args.moodle_id]!r})")

    root = args.submissions
    if root.is_dir():
        files = find_notebooks(root)
    elif root.suffix == ".ipynb" and (root.is_file() or root.is_symlink()):
        files, root = [root], root.parent
    else:
        print(f"grade: {args.submissions} is not a folder of notebooks (or a notebook)", file=sys.stderr)
        return 2
    if not files:
        print(f"grade: no notebook (*.ipynb) found under {args.submissions} (symlinked folders are followed); "
              "nothing graded, no CSV written", file=sys.stderr)
        return 3
    try:
        earlier = [] if args.fresh else read_record(args.out)
        course, course_source = course_version(args.course_ref, args.course, files)
    except ValueError as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 2
    try:
        key, key_source = grading_key(args.key_file)
    except FileNotFoundError as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 2
    version = ek.library_version()
    warning = version_warning(course, version)
    print(f"grade: {len(files)} notebook(s); grading key from {key_source}; library at commit "
          f"{version['commit'][:12]}" + (f"; course version {course['ref']} (from {course_source})" if course else ""),
          file=sys.stderr)
    if warning:
        print(f"grade: warning: {warning}", file=sys.stderr)
    # One student's folder graded again: under the student's id (--student, or the folder's name when the class
    # record knows it), not one "student" per notebook.
    single = args.student
    if single is None and root.is_dir() and all(len(Path(os.path.relpath(f, root)).parts) == 1 for f in files) \
            and root.name in {r["student_id"] for r in earlier}:
        single = root.name
    if single:
        print(f"grade: regrading {single!r} ({len(files)} notebook(s)); merged into {args.out}", file=sys.stderr)
    torch.set_num_threads(1)

    start = time.perf_counter()
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    graded = grade_files(files, key, args.timeout, args.memory_gb, args.jobs)
    rows, names, late_files, cheats, copies, unreadable = [], {}, [], [], [], []
    for path, results in zip(files, graded):
        rel = Path(os.path.relpath(path, root))
        if single:
            who = {"id": single, "name": "", "late": "_LATE_" in rel.name}
            rel = Path(safe_name(single)) / rel if len(rel.parts) == 1 else rel
        else:
            who = identify(rel, args.id_pattern, args.lms)
        sid = who["id"]
        if who["name"]:
            names.setdefault(sid, who["name"])
        if who["late"]:
            late_files.append((sid, rel.as_posix(), f"{sid}: `{rel.as_posix()}`"
                               + (f" (−{args.late_penalty:.0%})" if args.late_penalty else "")))
        try:
            cells = read_cells(path)
        except Unreadable:
            cells = []
        for what in tampering(cells):
            cheats.append((sid, rel.as_posix(), what))
        nb = Notebook(cells) if cells else None
        for row in results:
            if row.pop("unreadable", False):
                print(f"grade: {rel.as_posix()}: {row['message']}", file=sys.stderr)
                unreadable.append((sid, rel.as_posix(), f"{sid}: `{rel.as_posix()}`: {row['message']}"))
            for finding in row.pop("findings", []):
                cheats.append((sid, rel.as_posix(), f"{row['exercise_id']}: {finding}"))
            passed = bool(row["passed"])
            value = points.get(row["exercise_id"], 1.0) if passed else 0.0
            message = one_line(row["message"])
            if who["late"] and passed and args.late_penalty:
                value *= 1.0 - args.late_penalty
                message += f" (late: −{args.late_penalty:.0%})"
            if nb is not None and row["exercise_id"]:
                item = next((i for i in nb.exercises() if i["id"] == row["exercise_id"]), None)
                source = graded_source(nb, item["function"]) if item else None
                close = near_copy(EXERCISES[row["exercise_id"]], source) if source else None
                if close:
                    copies.append((sid, rel.as_posix(), row["exercise_id"], close[0], close[1]))
            rows.append({"student_id": sid, "student_file": rel.as_posix(), "exercise_id": row["exercise_id"],
                         "passed": passed, "points": _number(value), "late": who["late"], "message": message})
    record = merge_record(earlier, rows)
    # What the report lists, kept with the record (findings.json) as [student, file, item] and merged the same way:
    # an item of a file graded now is replaced by this run's; an earlier item stays while its file still has rows in
    # the record (a late chapter 6 file stays listed when the student's chapter 8 is regraded).
    findings_path = args.out.with_name("findings.json")
    items = {"late": late_files, "cheats": [(c[0], c[1], list(c)) for c in cheats],
             "copies": [(c[0], c[1], list(c)) for c in copies], "unreadable": unreadable}
    graded_now = {(str(r["student_id"]), str(r["student_file"])) for r in rows}
    in_record = {(str(r["student_id"]), str(r["student_file"])) for r in record}
    if earlier and findings_path.is_file():
        try:
            stored = json.loads(findings_path.read_text(encoding="utf-8"))
        except ValueError:
            stored = {}
        for kind in items:
            kept = [tuple(e) for e in stored.get(kind, [])
                    if (e[0], e[1]) not in graded_now and (e[0], e[1]) in in_record]
            items[kind] = kept + items[kind]
    findings_path.parent.mkdir(parents=True, exist_ok=True)
    findings_path.write_text(json.dumps(items, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    late_files = [value for _, _, value in items["late"]]
    cheats = [tuple(value) for _, _, value in items["cheats"]]
    copies = [tuple(value) for _, _, value in items["copies"]]
    unreadable = [value for _, _, value in items["unreadable"]]
    if earlier:
        print(f"grade: merged with {len(record) - len(rows)} earlier row(s) of {args.out} (--fresh starts anew)",
              file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(record)
    exercises = columns or [e for e in EXERCISES if any(r["exercise_id"] == e for r in record)]
    gradebook = args.gradebook or args.out.with_name("gradebook.csv")
    table = gradebook_rows(record, exercises, roster)
    left_out = write_gradebook(gradebook, table, exercises, args.lms, points, roster, names, args.total_column,
                               args.moodle_id)
    submitted = {r["student_id"] for r in record}
    missing = sorted(set(roster or {}) - submitted)
    cheats = list(dict.fromkeys(cheats))  # the static reading and the tripwire may both report a call
    if roster is not None:
        unknown = sorted(submitted - set(roster))
        if unknown:
            print(f"grade: warning: {len(unknown)} student id(s) not in the roster {args.roster}: {unknown[:10]}",
                  file=sys.stderr)
    feedback_dir = args.out.parent / "feedback"
    feedback_dir.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list[dict]] = {}
    for row in record:
        by_student.setdefault(row["student_id"], []).append(row)
    for row in table:
        sid = row["student_id"]
        name = (roster or {}).get(sid, {}).get("name") or names.get(sid, "")
        (feedback_dir / f"{safe_name(sid)}.md").write_text(
            feedback_text(sid, by_student.get(sid, []), exercises, points, name, version, sid in submitted),
            encoding="utf-8")
    report = args.out.parent / "report.md"
    shown_missing = [f"{sid} ({(roster or {}).get(sid, {}).get('name')})" if (roster or {}).get(sid, {}).get("name")
                     else sid for sid in missing]
    report.write_text(report_text(version, course, warning, record, table, shown_missing, late_files, cheats, copies,
                                  unreadable, left_out, started), encoding="utf-8")
    if left_out:
        print(f"grade: warning: {len(left_out)} student(s) have no {MOODLE_IDS[args.moodle_id]} in the roster and are "
              f"left out of the Moodle gradebook: {left_out[:10]}", file=sys.stderr)
    passed = sum(r["passed"] for r in rows)
    print(f"grade: {len(files)} notebook(s) of {len({r['student_id'] for r in rows})} student(s), {len(rows)} row(s), "
          f"{passed} passed, {time.perf_counter() - start:.0f} s -> {args.out}, {gradebook}, {report}, "
          f"{feedback_dir}/ ({len(table)} student(s) in the gradebook"
          + (f", {len(missing)} without a submission" if missing else "") + ")", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
