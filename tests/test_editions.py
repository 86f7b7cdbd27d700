"""Student and instructor editions (booktools/make_editions.py), grading (booktools/grade.py) and the
instructor guide's generated tables.

Two kinds of chapter are used: a tiny synthetic chapter written here, which has every form of
exercise and solution the chapters may use (colon and backtick fences, gated solutions with code,
a code block inside a solution, autograded cells, data files), and the real chapters present in
the repository, checked textually, two of them executed end to end.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import exercise_references as references  # noqa: E402
from booktools import exercisekit as ek  # noqa: E402
from booktools import grade  # noqa: E402
from booktools import make_editions  # noqa: E402
from booktools import notebooks  # noqa: E402

from transformer_lib import exercises  # noqa: E402

NOT_IMPLEMENTED = "not implemented yet"
COURSE_COMMIT = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.strip()
SOLUTION_DIRECTIVE = re.compile(r"\{solution(?:-start|-end)?\}")


def _readable(path: Path) -> bool:
    try:
        notebooks.read_notebook(path)
        return True
    except Exception:  # noqa: BLE001 - a chapter being written may be mid-save
        return False


# Chapters of _toc.yml first, then any other chapter notebook present (being written).
CHAPTERS = [p for p in dict.fromkeys(notebooks.toc_chapters() + sorted(notebooks.CHAPTERS_DIR.glob("[0-9][0-9]_*.ipynb")))
            if p.is_file() and _readable(p)]


def _has_autograded(path: Path) -> bool:
    nb = notebooks.read_notebook(path)
    return any(c.cell_type == "code" and ek.SOLUTION_TAG in notebooks.cell_tags(c) for c in nb.cells)


# ----------------------------------------------------------------------------- synthetic chapter
REFERENCE_CAUSAL = ("def causal_mask(t):\n"
                    "    return torch.ones(t, t, dtype=torch.bool).tril()  # SECRET-REFERENCE-CAUSAL\n")
REFERENCE_ATTENTION = ("def self_attention(x, W_q, W_k, W_v):\n"
                       "    q, k, v = x @ W_q, x @ W_k, x @ W_v  # SECRET-REFERENCE-ATTENTION\n"
                       "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), -1) @ v\n")


def tiny_chapter() -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        code("import sys  # set-up cell", metadata={"tags": ["remove-cell"]}),
        code("import math\nimport torch\nimport transformer_lib as tl\n"
             "DATA = open('data/tiny.txt').read().strip()\nSHARED = open('../shared/table.txt').read().strip()\n"
             "print(DATA, SHARED)"),
        md("# A tiny chapter\n\n## Exercises\n\n"
           ":::{exercise} A colon-fenced conceptual question (id `90-colon`)\n:label: ex-90-colon\n\n"
           "Explain why.\n:::\n\n"
           # a body that holds ::: needs a longer fence (MyST's rule, booktools.myst)
           "::::{solution} ex-90-colon\n:class: dropdown\n\nSECRET-COLON-SOLUTION is the answer.\n\n"
           "```python\n:::\nprint('SECRET-IN-CODE-BLOCK')\n```\n\nSECRET-AFTER-CODE-BLOCK\n::::\n\n"
           "````{exercise} A backtick-fenced question (id 90-backtick)\n:label: ex-90-backtick\n\nConceptual. Why not?\n````\n\n"
           "````{solution} ex-90-backtick\n:class: dropdown\n\nSECRET-BACKTICK-SOLUTION\n"
           "```python\nx = 'SECRET-BACKTICK-CODE'\n```\nSECRET-BACKTICK-TAIL\n````\n\n"
           "Text after the solutions stays."),
        md(":::{exercise} The causal mask (id `06-causal-mask`)\n:label: ex-06-causal-mask\n\n"
           "Implement the mask.\n:::\n\n:::{solution-start} ex-06-causal-mask\n:class: dropdown\n:::\n\n"
           "SECRET-GATED-HINT: use tril."),
        code(REFERENCE_CAUSAL, metadata={"tags": ["solution", "ex-06-causal-mask"]}),
        md(":::{solution-end}\n:::"),
        code('tl.exercises.check("06-causal-mask", causal_mask)'),
        md(":::{exercise} Self-attention (id `04-self-attention`)\n:label: ex-04-self-attention\n\n"
           "Implement it.\n:::"),
        code(REFERENCE_ATTENTION, metadata={"tags": ["solution", "ex-04-self-attention"]}),
        code('tl.exercises.check("04-self-attention", self_attention)'),
        md(":::{exercise} Run an experiment (id `90-experiment`)\n:label: ex-90-experiment\n\n"
           "1. Measure it.\n2. Plot it.\n:::\n\n:::{solution-start} ex-90-experiment\n:class: dropdown\n:::\n\n"
           "SECRET-GATED-TEXT"),
        code("secret = 'SECRET-GATED-CODE'\nprint(secret)"),
        md("SECRET-GATED-MORE\n\n:::{solution-end}\n:::\n\nClosing words stay."),
        code("print('the end', DATA)"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(source chapter, student notebook path, instructor folder) of the synthetic chapter."""
    book = tmp_path_factory.mktemp("book")
    (book / "chapters" / "data").mkdir(parents=True)
    (book / "shared").mkdir()
    (book / "chapters" / "data" / "tiny.txt").write_text("tiny-data\n")
    (book / "shared" / "table.txt").write_text("shared-data\n")
    chapter = book / "chapters" / "90_tiny.ipynb"
    nbformat.write(tiny_chapter(), str(chapter))
    out = tmp_path_factory.mktemp("editions")
    [student] = make_editions.build_student([chapter], out / "student", repo="my-org/my-course",
                                            course_ref=COURSE_COMMIT)
    make_editions.build_instructor([chapter], out / "instructor")
    return chapter, student, out / "instructor"


def all_text(nb) -> str:
    return "\n".join(notebooks.cell_source(c) for c in nb.cells)


def test_tiny_student_edition_has_no_solution(tiny):
    _, student, _ = tiny
    nb = notebooks.read_notebook(student)
    text = all_text(nb)
    assert "SECRET" not in text, [line for line in text.splitlines() if "SECRET" in line]
    assert not SOLUTION_DIRECTIVE.search(text)
    assert "Text after the solutions stays." in text and "Closing words stay." in text
    assert len(re.findall(r"^### Exercise 90\.\d", text, re.MULTILINE)) == 5  # every exercise kept, as a section
    starters = [c for c in nb.cells if "starter" in notebooks.cell_tags(c)]
    assert [ek.exercise_tag_ids(c) for c in starters] == [["06-causal-mask"], ["04-self-attention"]]
    assert all("raise NotImplementedError" in c.source for c in starters)
    assert starters[0].source == exercises.starter_code("06-causal-mask")
    answers = [c for c in nb.cells if "answer" in notebooks.cell_tags(c)]
    assert [c.source.strip() for c in answers] == ["# ex-90-experiment: your work here"]
    assert sum('tl.exercises.check("' in c.source for c in nb.cells) == 2
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")


def test_tiny_student_edition_copies_data_and_readme(tiny):
    _, student, _ = tiny
    root = student.parent.parent
    assert (root / "chapters" / "data" / "tiny.txt").read_text().strip() == "tiny-data"
    assert (root / "shared" / "table.txt").read_text().strip() == "shared-data"
    readme = (root / "README.md").read_text()
    assert ("https://colab.research.google.com/github/my-org/my-course/blob/main/chapters/90_tiny.ipynb"
            in readme)
    assert 'tl.exercises.check("06-causal-mask", …)' in readme and "ex-90-experiment" in readme
    assert (root / "requirements.txt").read_text().startswith(
        f"transformer_lib[widgets,hf] @ git+{notebooks.repository_url()}@{COURSE_COMMIT}\n")


def test_tiny_student_edition_reads_like_the_book(tiny):
    """No raw MyST in the student notebook (as tests/test_colab_edition.py checks the Colab edition): exercises are
    headed sections with their anchors, the set-up cell installs the course's version, no harness line."""
    from booktools import colab

    _, student, _ = tiny
    nb = notebooks.read_notebook(student)
    problems = [raw for c in nb.cells if c.cell_type == "markdown" for raw in colab.raw_myst(c.source)]
    assert not problems, problems
    text = all_text(nb)
    assert "### Exercise 90.3: The causal mask" in text and '<a id="ex-06-causal-mask"></a>' in text
    assert nb.cells[0].source.startswith("# 90. A tiny chapter") and "my-org.github.io/my-course/chapters/90_tiny.html" \
        in nb.cells[0].source
    setup = nb.cells[1]
    assert setup.source == ek.pinned_setup_source(COURSE_COMMIT)
    assert ek.setup_cell_ref(setup.source) == (notebooks.repository_url(), COURSE_COMMIT)
    assert sum(notebooks.is_bootstrap_cell(c) or "remove-cell" in notebooks.cell_tags(c) for c in nb.cells) == 1
    course = json.loads((student.parent.parent / ek.COURSE_FILE).read_text())
    assert course == {"ref": COURSE_COMMIT, "commit": COURSE_COMMIT, "repository": notebooks.repository_url()}


def test_student_edition_rejects_a_bad_course_ref(tmp_path):
    chapter = tmp_path / "chapters" / "90_tiny.ipynb"
    chapter.parent.mkdir()
    nbformat.write(tiny_chapter(), str(chapter))
    for bad, expected in (("no-such-tag-xyz", "is not a tag, branch or commit"), ("a..b", "is not a git tag")):
        with pytest.raises(ValueError, match=rf"--course-ref: '{re.escape(bad)}' {expected}"):
            make_editions.build_student([chapter], tmp_path / "out", course_ref=bad)
    proc = subprocess.run([sys.executable, "-m", "booktools.make_editions", "--student", "--chapters",
                           str(chapter), "--build-dir", str(tmp_path / "b"), "--course-ref", "no-such-tag-xyz"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "--course-ref: 'no-such-tag-xyz'" in proc.stderr, proc.stderr
    with pytest.raises(ValueError, match="--book-url: 'ftp://x' is not an http"):
        make_editions.build_student([chapter], tmp_path / "out", book_url="ftp://x")


def test_tiny_student_edition_executes(tiny):
    """The student notebook runs top to bottom; the check cells say 'not implemented yet'."""
    from nbclient import NotebookClient

    _, student, _ = tiny
    nb = notebooks.read_notebook(student)
    notebooks.without_output_widgets(NotebookClient(nb, timeout=120, kernel_name="python3", resources={
        "metadata": {"path": str(student.parent)}})).execute()
    checks = [c for c in nb.cells if c.cell_type == "code" and "exercises.check" in c.source]
    outputs = ["".join(o.get("text", "") for o in c.outputs) for c in checks]
    assert len(outputs) == 2 and all(NOT_IMPLEMENTED in out for out in outputs), outputs
    assert "the end tiny-data" in "".join(o.get("text", "") for o in nb.cells[-1].outputs)


def test_exercises_found_and_classified(tiny):
    chapter, _, _ = tiny
    found = {ex.label: ex for ex in ek.find_exercises(chapter)}
    assert list(found) == ["ex-90-colon", "ex-90-backtick", "ex-06-causal-mask", "ex-04-self-attention",
                           "ex-90-experiment"]
    kinds = {label: ex.kind for label, ex in found.items()}
    assert kinds == {"ex-90-colon": "conceptual", "ex-90-backtick": "conceptual",
                     "ex-06-causal-mask": "implementation", "ex-04-self-attention": "implementation",
                     "ex-90-experiment": "experiment"}
    # the id in a title is dropped, in backticks (colon fences) or bare (a backtick fence allows no backticks)
    assert found["ex-90-colon"].title == "A colon-fenced conceptual question"
    assert found["ex-90-backtick"].title == "A backtick-fenced question"
    assert found["ex-06-causal-mask"].autograded == ["06-causal-mask"]
    assert found["ex-90-experiment"].parts == 2
    assert found["ex-90-experiment"].minutes == ek.BASE_MINUTES["experiment"] + ek.PER_PART_MINUTES
    assert "SECRET-AFTER-CODE-BLOCK" in found["ex-90-colon"].solution_text
    assert found["ex-90-experiment"].solution_code == ["secret = 'SECRET-GATED-CODE'\nprint(secret)"]
    assert "SECRET-GATED-MORE" in found["ex-90-experiment"].solution_text


@pytest.mark.parametrize("title, text, autograded, kind", [
    ("", "Conceptual. Why?", False, "conceptual"),
    ("Measure the cost", "Anything.", False, "experiment"),
    ("", "Implementation. Write it.", False, "implementation"),
    ("Anything", "Show that it holds, and explain why.", False, "conceptual"),
    ("Anything", "Train the model and evaluate it; compare.", False, "experiment"),
    ("Anything", "Nothing to see.", False, "written"),
    ("Explain", "Explain.", True, "implementation"),
])
def test_infer_kind(title, text, autograded, kind):
    assert ek.infer_kind(title, text, autograded) == kind


def test_tiny_instructor_edition(tiny):
    chapter, _, instructor = tiny
    assert (instructor / "chapters" / chapter.name).read_bytes() == chapter.read_bytes()
    key = (instructor / "ANSWER_KEY.md").read_text()
    for ex in ek.find_exercises(chapter):
        assert f"`{ex.id}` | {ex.kind} |" in key and f"about {ex.minutes} min" in key
    for secret in ("SECRET-COLON-SOLUTION", "SECRET-GATED-CODE", "SECRET-REFERENCE-CAUSAL"):
        assert secret in key
    assert exercises.describe("04-self-attention").splitlines()[0] in key
    assert "booktools.grade" in (instructor / "README.md").read_text()
    # each exercise is named by a number of its own (two share the first markdown cell of the tiny chapter)
    numbers = re.findall(r"^### Exercise (90\.\d+):", key, re.MULTILINE)
    assert numbers == [f"90.{k}" for k in range(1, 6)]
    assert key.count("(with other exercises)") == 2


# ----------------------------------------------------------------------------- the real chapters
STUDENT_BOOK = "https://my-course.github.io/transformers-exercises/"


@pytest.fixture(scope="module")
def student_edition(tmp_path_factory):
    """chapter -> its student notebook, built on first use (one chapter at a time, so that a chapter being
    rewritten fails its own tests only)."""
    root = tmp_path_factory.mktemp("student")
    built: dict[Path, Path] = {}

    def build(chapter: Path) -> Path:
        if chapter not in built:
            out = root / chapter.stem
            make_editions.build_student([chapter], out, repo="my-course/transformers-exercises",
                                        course_ref=COURSE_COMMIT)
            built[chapter] = out / "chapters" / chapter.name
        return built[chapter]
    return build


def _student(student_edition, chapter: Path) -> Path:
    return student_edition(chapter)


def test_chapters_present():
    assert CHAPTERS, "no chapter notebook to build"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_chapter_has_no_solution(student_edition, chapter):
    original = notebooks.read_notebook(chapter)
    student = notebooks.read_notebook(_student(student_edition, chapter))
    text = all_text(student)
    for cell in student.cells:
        if cell.cell_type == "markdown":
            assert not SOLUTION_DIRECTIVE.search(cell.source), f"{chapter.name}: {cell.source[:200]}"
        else:
            assert not cell.outputs and cell.execution_count is None
            assert ek.SOLUTION_TAG not in notebooks.cell_tags(cell)
    assert "widgets" not in student.metadata
    # Every line that only a solution holds (text or code, incl. the reference bodies) is gone.
    original_text = all_text(original)
    starter_lines = {line.strip() for c in student.cells if "starter" in notebooks.cell_tags(c)
                     for line in c.source.splitlines()}
    exercises_found = ek.find_exercises(chapter, original)
    solution_lines = [line.strip() for ex in exercises_found for _, block in ex.solution_blocks
                      for line in block.splitlines()]
    unique = [line for line in dict.fromkeys(solution_lines)
              if len(line) >= 20 and line not in starter_lines
              and original_text.count(line) == solution_lines.count(line)]
    leaked = [line for line in unique if line in text]
    assert not leaked, f"{chapter.name}: solution lines in the student edition: {leaked[:5]}"
    for ex in exercises_found:  # the exercise itself stays
        assert ex.label in text


def prose_glue_roles(text: str) -> int:
    """The glue roles of a markdown text outside its code blocks (directive fences, which may be nested, are not
    code blocks)."""
    stack: list[tuple[str, bool]] = []   # (fence, is a code block)
    count = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stack and len(stripped) >= len(stack[-1][0]) and set(stripped) == {stack[-1][0][0]}:
            stack.pop()
            continue
        if stack and stack[-1][1]:
            continue
        opening = re.match(r"^(`{3,}|~{3,}|:{3,})\s*(.*)$", stripped)
        if opening:
            stack.append((opening[1], not opening[2].startswith("{")))
            continue
        count += len(re.findall(r"\{glue(?::[a-z]+)?\}`", line))
    return count


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_chapter_reads_like_the_book(student_edition, chapter):
    """No raw MyST in the student notebook (the check of tests/test_colab_edition.py's test_no_raw_myst): every
    glue role of the chapter's text outside its solutions is a number of the book's run, its cross-references
    link to the student book, its exercises are headed sections, its code has no test-harness line, and its
    set-up cell installs the course's version."""
    from booktools import colab

    nb = notebooks.read_notebook(_student(student_edition, chapter))
    problems = [f"cell {i}: {raw}" for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                for raw in colab.raw_myst(c.source)]
    assert not problems, f"{chapter.name}: raw MyST left in the student edition:\n" + "\n".join(problems[:20])
    stripped, _ = ek.strip_solutions(notebooks.read_notebook(chapter))
    roles = sum(prose_glue_roles(c.source) for c in stripped.cells
                if c.cell_type == "markdown" and notebooks.BOOTSTRAP_TAG not in notebooks.cell_tags(c))
    text = "\n".join(c.source for c in nb.cells[1:] if c.cell_type == "markdown")
    assert text.count(colab.BOOK_RUN_MARK) == roles
    assert notebooks.html_baseurl() not in text or notebooks.html_baseurl() == STUDENT_BOOK
    exercises_found = ek.find_exercises(chapter)
    assert len(re.findall(rf"^### Exercise {notebooks.chapter_number(chapter)}\.\d+", text, re.MULTILINE)) == \
        len(exercises_found)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == ek.pinned_setup_source(COURSE_COMMIT)
    assert not any("nbval-tolerance" in c.source for c in code)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_starters_are_rejected_kindly(student_edition, chapter):
    """Each solution cell became a starter, which the autograder rejects as not implemented."""
    original = notebooks.read_notebook(chapter)
    student = notebooks.read_notebook(_student(student_edition, chapter))
    tagged = [ek.exercise_tag_ids(c) for c in original.cells
              if c.cell_type == "code" and ek.SOLUTION_TAG in notebooks.cell_tags(c)]
    starters = [c for c in student.cells if "starter" in notebooks.cell_tags(c)]
    assert [ek.exercise_tag_ids(c) for c in starters] == tagged
    for cell in starters:
        assert "raise NotImplementedError" in cell.source
        for ex_id in ek.exercise_tag_ids(cell):
            if ex_id not in exercises.EXERCISES:
                continue
            namespace: dict = {}
            exec(cell.source, namespace)
            result = exercises.check(ex_id, namespace[exercises.EXERCISES[ex_id].function], verbose=False)
            assert not result.passed and NOT_IMPLEMENTED in result.message, result.message


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_solutions_pass_the_grader(chapter):
    """The chapter's solution functions, read as the grader reads a notebook (the last definition wins), pass
    the grader's judge on grading cases (run here, in-process: the chapters are trusted code)."""
    nb = grade.Notebook(grade.read_cells(chapter))
    namespace: dict = {}
    exec(grade_sandbox_prelude(), namespace)
    for snippet in nb.snippets:
        try:
            exec(compile(snippet["source"], snippet["where"], "exec"), namespace)
        except Exception:  # noqa: BLE001 - as the grader: definitions that cannot run are skipped
            pass
    items = [i for i in nb.exercises() if i["id"] in nb.tagged]
    assert len(items) == len(set(nb.tagged))
    for item in items:
        fn = namespace[item["function"]]
        result = references.run_in_process(item["id"], fn, seed=references.grading_seed("test", item["id"]))
        assert result.passed, f"{chapter.name}: {result.message}"


def grade_sandbox_prelude() -> str:
    from booktools import grade_sandbox

    return grade_sandbox.PRELUDE


def _stored_seconds(path: Path) -> float:
    return notebooks.read_notebook(path).metadata.get("book", {}).get("execution_seconds", float("inf"))


# The first chapter, and the quickest other chapter with an autograded exercise.
EXECUTED = [CHAPTERS[0]] if CHAPTERS else []
EXECUTED += sorted((c for c in CHAPTERS if _has_autograded(c) and c not in EXECUTED), key=_stored_seconds)[:1]


@pytest.mark.parametrize("chapter", EXECUTED, ids=lambda p: p.stem)
def test_student_chapter_executes(student_edition, chapter):
    """The student edition of a chapter runs top to bottom without an error (each ≤ 60 s)."""
    from nbclient import NotebookClient

    path = _student(student_edition, chapter)
    nb = notebooks.read_notebook(path)
    notebooks.without_output_widgets(NotebookClient(nb, timeout=300, kernel_name="python3", resources={
        "metadata": {"path": str(path.parent)}})).execute()
    for cell in nb.cells:
        if cell.cell_type == "code" and "starter" in notebooks.cell_tags(cell):
            index = nb.cells.index(cell)
            follow = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
            if follow is not None and "exercises.check" in follow.source:
                out = "".join(o.get("text", "") for o in follow.outputs)
                assert NOT_IMPLEMENTED in out, out


def test_instructor_edition_keeps_chapters(tmp_path):
    chapters = CHAPTERS
    make_editions.build_instructor(chapters, tmp_path)
    key = (tmp_path / "ANSWER_KEY.md").read_text()
    for chapter in chapters:
        assert (tmp_path / "chapters" / chapter.name).read_bytes() == chapter.read_bytes()
        for ex in ek.find_exercises(chapter):
            assert f"`{ex.label}`" in key


# ----------------------------------------------------------------------------- the guide
def test_guide_tables_in_sync():
    for path, text in make_editions.guide_tables(make_editions.chapters_of_toc()).items():
        assert path.is_file() and path.read_text(encoding="utf-8") == text, (
            f"{path.name} is out of date: run `make exercise-table` "
            "(.venv/bin/python -m booktools.make_editions --guide-table)")


def test_guide_page_includes_tables_and_is_in_toc():
    page = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    assert "```{include} _exercise_table.md" in page and "```{include} _autograder_table.md" in page
    assert "instructor_guide" in notebooks.toc_docnames()
    table = (ROOT / "_autograder_table.md").read_text(encoding="utf-8")
    assert all(f"| `{ex_id}` |" in table for ex_id in exercises.available())
    listed = (ROOT / "_exercise_table.md").read_text(encoding="utf-8")
    for chapter in make_editions.chapters_of_toc():
        for ex in ek.find_exercises(chapter):
            assert f"<{ex.label}>`" in listed and f"| {ex.kind} |" in listed




# ----------------------------------------------------------------------------- exercises the body answers
#: Chapters whose body holds the answer of an autograded exercise, until the chapter changes (the lead's list:
#: ch 2 writes the RNN loop of 02-rnn-forward, ch 13 swiglu_ffn of 13-swiglu). Remove an entry when its chapter
#: switches exercise (xfail is strict: the test then passes and the entry must go).
ANSWERED_IN_BODY: set = set()


def _code_lines(source: str) -> set[str]:
    lines = set()
    for line in source.splitlines():
        text = re.sub(r"\s+", " ", line.split("#", 1)[0]).strip()
        if len(text) >= 25 and not text.startswith(("def ", '"""', "return torch.stack", "states.append")):
            lines.add(text)
    return lines


@pytest.mark.parametrize("chapter", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason="answered in the body"))
                                     if c.stem in ANSWERED_IN_BODY else c for c in CHAPTERS], ids=lambda p: p.stem)
def test_autograded_exercise_not_answered_in_the_body(chapter):
    """The code of an autograded solution does not appear in the chapter's body: a student who reads the
    chapter above the exercise must not find the answer there."""
    nb = notebooks.read_notebook(chapter)
    solution_code = set().union(*[_code_lines(notebooks.cell_source(c)) for c in nb.cells
                                  if c.cell_type == "code" and ek.SOLUTION_TAG in notebooks.cell_tags(c)] or [set()])
    solution_cells = {id(c) for ex in ek.find_exercises(chapter, nb) for c in nb.cells
                      if notebooks.cell_source(c) in ex.solution_code}
    body = set().union(*[_code_lines(notebooks.cell_source(c)) for c in nb.cells
                         if c.cell_type == "code" and id(c) not in solution_cells] or [set()])
    answered = sorted(solution_code & body)
    assert not answered, f"{chapter.name}: the body holds the autograded answer: {answered}"
