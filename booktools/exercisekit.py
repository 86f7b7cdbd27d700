"""Exercises of the chapter notebooks: find them, classify them, and take their solutions out.

Shared by booktools/make_editions.py (student and instructor editions, the instructor guide's
table), booktools/make_student_book.py (the HTML book without solutions) and the tests.
Import it with ``from booktools import exercisekit``.

A chapter writes its exercises with sphinx-exercise directives (chapter brief, README):

- ``{exercise}`` with ``:label: ex-NN-name``, or the gated ``{exercise-start}`` / ``{exercise-end}``;
- ``{solution} ex-NN-name``, or the gated ``{solution-start} ex-NN-name`` ... ``{solution-end}``,
  whose content may span several cells, code cells included;
- in colon fences (``:::{solution}``) or backtick fences (````` ````{solution} `````);
- an autograded exercise has one code cell tagged ``["solution", "ex-NN-name"]`` holding the
  reference solution; the autograder's id is ``NN-name`` (``transformer_lib.exercises``).

The markdown is read by :mod:`booktools.myst`, the book's one MyST reader (the parser myst-parser uses), which
says of each line which exercise and which solution it belongs to, and carries the gated solution and exercise
blocks from one cell to the next.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from booktools import myst, notebooks

SOLUTION_TAG = "solution"
STARTER_TAG = "starter"
ANSWER_TAG = "answer"
EX_TAG = re.compile(r"^ex-(\d\d-[A-Za-z0-9_-]+)$")

_ID_IN_TITLE = re.compile(r"\s*\(id\s+(?:`[^`]*`|[0-9][0-9]-[A-Za-z0-9_-]+)\)\s*")
_NUMBERED = re.compile(r"^\s{0,3}\d+[.)]\s", re.MULTILINE)

#: Estimated minutes of an exercise: a base per kind, plus PER_PART for each numbered part after
#: the first (``1.``, ``2.``, ... at the start of a line of the exercise's text).
BASE_MINUTES = {"conceptual": 10, "implementation": 20, "experiment": 25, "written": 10}
PER_PART_MINUTES = 5

#: Words that name an exercise's kind, searched as whole words: first in its title, then as the
#: first word of its text ("Conceptual. ..."), then counted in its text (the most frequent kind).
KIND_WORDS = {
    "conceptual": ("conceptual", "concept", "explain", "why", "show that", "prove", "derive",
                   "argue", "what does"),
    "implementation": ("implementation", "implement", "write a function", "code"),
    "experiment": ("experiment", "train", "measure", "plot", "vary", "sweep", "compare",
                   "evaluate"),
}
KINDS = ("conceptual", "implementation", "experiment", "written")


# --------------------------------------------------------------------------- small helpers
def exercise_tag_ids(cell) -> list[str]:
    """Autograder ids named by a cell's ``ex-NN-name`` tags (``ex-04-x`` -> ``04-x``)."""
    return [m.group(1) for m in (EX_TAG.match(t) for t in notebooks.cell_tags(cell)) if m]


# --------------------------------------------------------------------------- exercises
@dataclass
class ExerciseInfo:
    """One exercise of a chapter, with its solution."""

    label: str                    # ex-NN-name
    chapter: Path
    title: str = ""
    text: str = ""
    solution_text: str = ""
    solution_code: list[str] = field(default_factory=list)   # code cells of the solution
    solution_blocks: list[tuple[str, str]] = field(default_factory=list)  # ("markdown"|"code", text)
    autograded: list[str] = field(default_factory=list)      # autograder ids (NN-name)
    cell: int = 0                                            # index of its first cell

    @property
    def id(self) -> str:
        return self.label[3:] if self.label.startswith("ex-") else self.label

    @property
    def parts(self) -> int:
        return max(1, len(_NUMBERED.findall(self.text)))

    @property
    def kind(self) -> str:
        return infer_kind(self.title, self.text, bool(self.autograded))

    @property
    def minutes(self) -> int:
        return BASE_MINUTES[self.kind] + PER_PART_MINUTES * (self.parts - 1)


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", text) is not None


def infer_kind(title: str, text: str, autograded: bool) -> str:
    """conceptual / implementation / experiment / written (see KIND_WORDS)."""
    if autograded:
        return "implementation"
    lowered = title.lower()
    for kind, words in KIND_WORDS.items():
        if any(_has_word(lowered, w) for w in words):
            return kind
    first = re.match(r"\s*\**([A-Za-z]+)", text)
    if first:
        word = first.group(1).lower()
        for kind in KIND_WORDS:
            if word == kind or (kind == "conceptual" and word == "concept"):
                return kind
    body = text.lower()
    counts = {kind: sum(len(re.findall(rf"(?<![A-Za-z]){re.escape(w)}(?![A-Za-z])", body))
                        for w in words) for kind, words in KIND_WORDS.items()}
    best = max(counts.values())
    if best == 0:
        return "written"
    return next(kind for kind, n in counts.items() if n == best)


def _clean(lines: list[str]) -> str:
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def find_exercises(path: Path, nb=None) -> list[ExerciseInfo]:
    """Every exercise of a chapter notebook, in order, with its solution's text and code."""
    nb = nb if nb is not None else notebooks.read_notebook(path)
    state = myst.ScanState()
    found: dict[int, ExerciseInfo] = {}          # frame.serial -> info
    order: list[ExerciseInfo] = []
    text_lines: dict[int, list[str]] = {}
    solution_blocks: dict[str, list[list]] = {}   # label -> [[kind, cell index, lines or source]]
    tagged: list[tuple[int, list[str], str]] = []  # (cell index, ids, source)

    def info_for(frame: myst.Directive, index: int) -> ExerciseInfo:
        key = frame.serial
        if key not in found:
            title = _ID_IN_TITLE.sub(" ", frame.arg).strip()
            found[key] = ExerciseInfo(label=frame.label or "?", chapter=Path(path), title=title,
                                      cell=index)
            order.append(found[key])
            text_lines[key] = []
        found[key].label = frame.label or found[key].label
        return found[key]

    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in myst.scan_markdown(notebooks.cell_source(cell), state):
                if line.exercise is not None and line.exercise.name in ("exercise", "exercise-start"):
                    info_for(line.exercise, index)
                    if not line.markup and line.solution is None:
                        text_lines[line.exercise.serial].append(line.text)
                if line.solution is not None and not line.markup:
                    blocks = solution_blocks.setdefault(line.solution, [])
                    if not blocks or blocks[-1][0] != "markdown" or blocks[-1][1] != index:
                        blocks.append(["markdown", index, []])
                    blocks[-1][2].append(line.text)
        elif cell.cell_type == "code":
            source = notebooks.cell_source(cell)
            if SOLUTION_TAG in notebooks.cell_tags(cell):
                tagged.append((index, exercise_tag_ids(cell), source))
            if state.gated_solution is not None:
                solution_blocks.setdefault(state.gated_solution, []).append(["code", index, source])
            elif state.gated_exercise is not None:
                info_for(state.gated_exercise, index)
    for info in order:
        key = next(k for k, v in found.items() if v is info)
        info.text = _clean(text_lines[key])
        for kind, _, content in solution_blocks.get(info.label, []):
            text = _clean(content) if kind == "markdown" else content
            if text.strip():
                info.solution_blocks.append((kind, text))
        info.solution_text = "\n\n".join(t for k, t in info.solution_blocks if k == "markdown")
        info.solution_code = [t for k, t in info.solution_blocks if k == "code"]
    by_label = {info.label: info for info in order}
    for index, ids, source in tagged:
        owner = None
        for ex_id in ids:
            owner = by_label.get(f"ex-{ex_id}")
            if owner:
                break
        if owner is None:  # attach to the exercise that precedes the cell
            previous = [info for info in order if info.cell <= index]
            owner = previous[-1] if previous else None
        if owner is None:
            continue
        for ex_id in ids:
            if ex_id not in owner.autograded:
                owner.autograded.append(ex_id)
        if source not in owner.solution_code:
            owner.solution_code.append(source)
            owner.solution_blocks.append(("code", source))
    return order


# --------------------------------------------------------------------------- starters
def starter_for(exercise_id: str, solution_source: str = "") -> str:
    """Source of the starter cell of an autograded exercise.

    ``transformer_lib.exercises.starter_code(id)`` when the autograder knows the id; otherwise
    the solution's top-level functions with their signatures and docstrings, bodies replaced by
    ``raise NotImplementedError``.
    """
    from transformer_lib import exercises

    if exercise_id in exercises.EXERCISES:
        return exercises.starter_code(exercise_id)
    lines = solution_source.splitlines()
    try:
        tree = ast.parse(solution_source)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    pieces = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            first_body = node.body[0]
            keep_until = first_body.lineno - 1
            if (isinstance(first_body, ast.Expr) and isinstance(first_body.value, ast.Constant)
                    and isinstance(first_body.value.value, str)):
                keep_until = first_body.end_lineno
            header = "\n".join(lines[start - 1:keep_until])
            pieces.append(f'{header}\n    raise NotImplementedError("Exercise {exercise_id}: '
                          'write your solution here")\n')
    if not pieces:
        pieces.append(f'# Exercise {exercise_id}: write your solution here\n'
                      f'raise NotImplementedError("Exercise {exercise_id}")\n')
    return "\n\n".join(pieces)


# --------------------------------------------------------------------------- student notebook
def is_check_cell(source: str) -> bool:
    return "exercises.check(" in source


def strip_solutions(nb, keep_outputs: bool = False) -> tuple[object, list[str]]:
    """A copy of ``nb`` without solutions, outputs or widget state; and the starters' ids.

    With ``keep_outputs`` (the student book) the outputs and widget state of the chapter's own cells stay;
    starter and check cells (whose stored output came from the solution) have none.

    Markdown: every ``{solution}`` directive and every gated ``{solution-start}`` ...
    ``{solution-end}`` block is removed (a cell left empty is dropped). Code: a cell tagged
    ``solution`` becomes the exercise's starter (tagged ``starter`` and ``ex-NN-name``); the
    other code cells of a gated solution are dropped, and the first of them leaves an empty
    cell tagged ``answer`` for the student's work; a check cell inside a gated solution is
    kept when a starter precedes it in that block.
    """
    nb = copy.deepcopy(nb)
    state = myst.ScanState()
    cells = []
    starters: list[str] = []
    placeholder_for: str | None = None
    starter_in_block = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            before = state.gated_solution
            lines = [line.text for line in myst.scan_markdown(notebooks.cell_source(cell), state)
                     if line.solution is None]
            if state.gated_solution != before:
                placeholder_for, starter_in_block = None, False
            text = _clean(lines)
            if text.strip():
                cell.source = text
                cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        tags = notebooks.cell_tags(cell)
        source = notebooks.cell_source(cell)
        if not keep_outputs or SOLUTION_TAG in tags or is_check_cell(source):
            cell.outputs = []
            cell.execution_count = None
        if SOLUTION_TAG in tags:
            ids = exercise_tag_ids(cell)
            ex_id = ids[0] if ids else (state.gated_solution or "ex-unknown")[3:]
            cell.source = starter_for(ex_id, source)
            kept = [t for t in tags if t != SOLUTION_TAG]
            cell.metadata["tags"] = [STARTER_TAG] + kept
            starters.append(ex_id)
            starter_in_block = state.gated_solution is not None
            cells.append(cell)
        elif state.gated_solution is not None:
            if is_check_cell(source) and starter_in_block:
                cells.append(cell)
            elif placeholder_for != state.gated_solution and not starter_in_block:
                placeholder_for = state.gated_solution
                cells.append(nbformat.v4.new_code_cell(
                    f"# {state.gated_solution}: your work here\n",
                    metadata={"tags": [ANSWER_TAG]}))
        else:
            cells.append(cell)
    nb.cells = cells
    if not keep_outputs:
        nb.metadata.pop("widgets", None)
    nb.metadata.get("book", {}).pop("execution_seconds", None)
    if "book" in nb.metadata and not nb.metadata["book"]:
        nb.metadata.pop("book")
    return nb, starters


# --------------------------------------------------------------------------- the course's library version
#: The file of the student edition that records the course's library version (booktools/make_editions.py writes
#: it; booktools/grade.py reads it with --course, or compares --course-ref itself).
COURSE_FILE = "course.json"
_REF = re.compile(r"^(?![-/.])(?!.*(?:\.\.|//|@\{|\.lock$|/$|\.$))[A-Za-z0-9._/+-]{1,200}$")


def _git(*args: str) -> str | None:
    import subprocess

    try:
        proc = subprocess.run(["git", "-C", str(notebooks.ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def resolve_course_ref(ref: str, argument: str = "--course-ref") -> dict:
    """The course's library version: {"ref", "commit", "repository"} for a tag, branch or commit of the book's
    repository. Raises ValueError naming ``argument`` when ``ref`` is not a git name or not in this clone."""
    if not isinstance(ref, str) or not _REF.match(ref):
        raise ValueError(f"{argument}: {ref!r} is not a git tag, branch or commit name "
                         "(expected e.g. v1.0, main or a commit hash: letters, digits and . _ / + -)")
    commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not commit:
        raise ValueError(f"{argument}: {ref!r} is not a tag, branch or commit of the clone {notebooks.ROOT} "
                         f"(git rev-parse found none): tag the version first (git tag {ref} && git push origin "
                         f"{ref}), or give an existing commit")
    if ref == "HEAD":  # the remote's HEAD is another version: pin the commit itself
        ref = commit
    moving = _git("show-ref", "--verify", "--quiet", f"refs/heads/{ref}") is not None
    return {"ref": ref, "commit": commit, "repository": notebooks.repository_url(), "branch": moving}


def pip_spec(ref: str | None = None, url: str | None = None) -> str:
    """``git+<repository>`` or, for a course pinned to ``ref``, ``git+<repository>@<ref>``."""
    url = (url or notebooks.repository_url()).rstrip("/")
    return f"git+{url}@{ref}" if ref else f"git+{url}"


def library_version() -> dict:
    """The version of the library this clone grades with: {"commit", "dirty" (files of the library or of the
    grader changed since the commit), "version" (transformer_lib.__version__)}."""
    import transformer_lib

    status = _git("status", "--porcelain", "--", "transformer_lib", "booktools/exercise_references.py",
                  "booktools/grade.py", "booktools/grade_sandbox.py")
    return {"commit": _git("rev-parse", "HEAD") or "unknown", "dirty": bool(status),
            "version": getattr(transformer_lib, "__version__", "unknown")}


def library_changes(commit_a: str, commit_b: str) -> list[str] | None:
    """Files of the library and grader that differ between two commits (None when git cannot tell)."""
    out = _git("diff", "--name-only", commit_a, commit_b, "--", "transformer_lib", "booktools/exercise_references.py",
               "booktools/grade.py", "booktools/grade_sandbox.py")
    return None if out is None else [line for line in out.splitlines() if line.strip()]


_SETUP_SPEC = re.compile(r'os\.environ\.get\(\s*"' + re.escape(notebooks.SPEC_VARIABLE)
                         + r'"\s*,\s*"git\+(?P<url>[^"@\s]+?)(?:@(?P<ref>[^"\s]+))?"\s*\)')


def setup_cell_ref(source: str) -> tuple[str, str | None] | None:
    """(repository url, ref or None) of the pip spec in a Colab set-up cell's source; None when there is none."""
    match = _SETUP_SPEC.search(source)
    return (match["url"], match["ref"]) if match else None


def pinned_setup_source(ref: str | None) -> str:
    """The Colab set-up cell (booktools.notebooks.bootstrap_source), installing ``git+<repository>@<ref>``."""
    url = notebooks.repository_url()
    return notebooks.bootstrap_source(f"{url}@{ref}" if ref else url)
