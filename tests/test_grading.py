"""The grader (booktools/grade.py, booktools/grade_sandbox.py): what it reads of a notebook, that the student's code
cannot change a verdict, that the library's answer and the reference get no credit, the long CSV and the
gradebook, and `make grade`.

The notebooks here are small and written by the tests; tests/test_editions.py checks that the chapters' own
solutions pass the grader.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import grade  # noqa: E402

STARTER_CAUSAL = ('def causal_mask(t):\n    """Return a (t, t) bool tensor."""\n'
                  '    raise NotImplementedError("Exercise 06-causal-mask: write your solution here")\n')
STARTER_ATTENTION = ('def self_attention(x, W_q, W_k, W_v):\n'
                     '    raise NotImplementedError("Exercise 04-self-attention: write your solution here")\n')
CAUSAL = "def causal_mask(t):\n    i = torch.arange(t)\n    return i[None, :] <= i[:, None]\n"
ATTENTION = ("def self_attention(x, W_q, W_k, W_v):\n    q, k, v = x @ W_q, x @ W_k, x @ W_v\n"
             "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), -1) @ v\n")
CHECK_CAUSAL = 'tl.exercises.check("06-causal-mask", causal_mask)'
CHECK_ATTENTION = 'tl.exercises.check("04-self-attention", self_attention)'


def notebook(*cells) -> nbformat.NotebookNode:
    """A student notebook: an import cell, then the given (source, tags) or source cells."""
    nodes = [nbformat.v4.new_code_cell("import math\nimport torch\nimport transformer_lib as tl")]
    for cell in cells:
        source, tags = cell if isinstance(cell, tuple) else (cell, [])
        nodes.append(nbformat.v4.new_code_cell(source, metadata={"tags": tags}))
    return nbformat.v4.new_notebook(cells=nodes)


def submission(causal: str = STARTER_CAUSAL, attention: str = STARTER_ATTENTION, after_causal: str | None = None):
    cells = [(causal, ["starter", "ex-06-causal-mask"])]
    if after_causal is not None:
        cells.append(after_causal)
    cells += [CHECK_CAUSAL, (attention, ["starter", "ex-04-self-attention"]), CHECK_ATTENTION]
    return notebook(*cells)


def write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


# ----------------------------------------------------------------------------- reading a notebook
def cells_of(nb) -> list[dict]:
    return [{"source": c.source, "tags": list(c.metadata.get("tags", [])), "number": n}
            for n, c in enumerate(nb.cells, 1) if c.cell_type == "code"]


def test_last_definition_in_notebook_order_is_graded():
    nb = grade.Notebook(cells_of(submission(after_causal=CAUSAL)))
    items = {i["id"]: i for i in nb.exercises()}
    assert set(items) == {"06-causal-mask", "04-self-attention"}
    assert items["06-causal-mask"]["function"] == "causal_mask"
    defs = [s for s in nb.snippets if s["source"].startswith("def causal_mask")]
    assert [d["where"] for d in defs] == ["<cell 2>", "<cell 3>"]  # both run, in order: the pasted one wins


def test_function_named_by_the_check_call():
    nb = grade.Notebook(cells_of(notebook("def my_mask(t):\n    return torch.ones(t, t, dtype=torch.bool).tril()",
                                          'tl.exercises.check("06-causal-mask", my_mask)')))
    assert nb.exercises() == [{"id": "06-causal-mask", "function": "my_mask", "fallback": "causal_mask"}]


def test_only_definitions_run():
    nb = grade.Notebook(cells_of(notebook("EPS = 1e-6\nalias = torch.tril\nf = lambda t: t\nx = torch.randn(3)\n"
                                          "train_for_an_hour()\n%time y = 1\nfor i in range(3):\n    pass")))
    sources = [s["source"] for s in nb.snippets]
    assert sources[-3:] == ["EPS = 1e-6", "alias = torch.tril", "f = lambda t: t"]
    assert not any("train_for_an_hour" in s or "randn" in s for s in sources)


def test_syntax_error_is_named():
    nb = grade.Notebook(cells_of(submission(after_causal="def causal_mask(t):\n    return (")))
    assert "syntax error" in nb.syntax_note("causal_mask")


def test_student_ids():
    assert grade.student_id(Path("alice/week3/06.ipynb")) == "alice"
    assert grade.student_id(Path("bob.ipynb")) == "bob"
    assert grade.student_id(Path("doe_12345_678_06.ipynb"), r"^[a-z]+_(\d+)_") == "12345"


def test_find_notebooks_follows_symlinked_folders(tmp_path):
    real = tmp_path / "store" / "carol"
    write(notebook("x = 1"), real / "06.ipynb")
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "carol").symlink_to(real, target_is_directory=True)
    (subs / "loop").symlink_to(subs, target_is_directory=True)  # a cycle is followed once
    assert [p.relative_to(subs).as_posix() for p in grade.find_notebooks(subs)] == ["carol/06.ipynb"]


def test_gradebook_takes_each_students_best_notebook():
    rows = [{"student_id": "a", "exercise_id": "06-causal-mask", "points": 0},
            {"student_id": "a", "exercise_id": "06-causal-mask", "points": 2},
            {"student_id": "a", "exercise_id": "04-self-attention", "points": 1},
            {"student_id": "b", "exercise_id": "", "points": 0}]
    table = grade.gradebook_rows(rows, ["04-self-attention", "06-causal-mask"])
    assert table == [{"student_id": "a", "04-self-attention": 1, "06-causal-mask": 2, "total": 3},
                     {"student_id": "b", "04-self-attention": 0, "06-causal-mask": 0, "total": 0}]


# ----------------------------------------------------------------------------- grading a folder
def test_grade_folder(tmp_path):
    subs = tmp_path / "submissions with spaces"
    untagged = submission(CAUSAL, ATTENTION + "print(x_of_another_cell.shape)\n")
    untagged.cells[1].metadata["tags"] = []  # the tags were lost; the check call names the exercise
    write(untagged, subs / "alice" / "06.ipynb")
    # answer pasted below the starter (the starter stays); an infinite loop
    write(submission(after_causal=CAUSAL, attention="def self_attention(x, W_q, W_k, W_v):\n    while True:\n"
                                                    "        pass\n"), subs / "bob.ipynb")
    # a wrong mask that then fakes the checker; the library's attention
    write(submission("def causal_mask(t):\n    return torch.ones(t, t).tril(-1).bool()\n\n"
                     "class Yes:\n    passed = True\n    message = '✓'\n"
                     "tl.exercises.check = lambda *a, **k: Yes()\ntl.exercises._check = lambda *a, **k: Yes()\n",
                     "def self_attention(x, W_q, W_k, W_v):\n"
                     "    return tl.attention.scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)\n"),
          subs / "dave.ipynb")
    write(submission(), subs / "starter.ipynb")
    (subs / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), subs / "empty.ipynb")

    out, book = tmp_path / "grades.csv", tmp_path / "book.csv"
    proc = subprocess.run([sys.executable, "-m", "booktools.grade", str(subs), "--out", str(out),
                           "--gradebook", str(book), "--timeout", "5", "--jobs", "2", "--key-file",
                           str(tmp_path / "key")], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=dict(os.environ, GRADING_KEY=""))
    assert proc.returncode == 2 and "key file" in proc.stderr  # a missing key file is an error
    (tmp_path / "key").write_text("course-secret\n")
    proc = subprocess.run([sys.executable, "-m", "booktools.grade", str(subs), "--out", str(out),
                           "--gradebook", str(book), "--timeout", "5", "--jobs", "2", "--key-file",
                           str(tmp_path / "key")], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "broken.ipynb" in proc.stderr
    rows = {(r["student_file"], r["exercise_id"]): r for r in read_csv(out)}
    assert list(read_csv(out)[0]) == grade.COLUMNS
    assert all("\n" not in r["message"] for r in rows.values())
    assert len(rows) == 10

    def verdict(name, ex_id):
        row = rows[(name, ex_id)]
        return row["passed"] == "True", row["message"]

    assert verdict("alice/06.ipynb", "06-causal-mask")[0] and verdict("alice/06.ipynb", "04-self-attention")[0]
    assert rows[("alice/06.ipynb", "06-causal-mask")]["student_id"] == "alice"
    assert verdict("bob.ipynb", "06-causal-mask")[0]  # pasted below the starter: graded, as the notebook shows
    passed, message = verdict("bob.ipynb", "04-self-attention")
    assert not passed and "stopped after 5 s" in message
    passed, message = verdict("dave.ipynb", "06-causal-mask")
    assert not passed and "off by one" in message  # replacing tl.exercises.check changes nothing
    passed, message = verdict("dave.ipynb", "04-self-attention")
    assert not passed and "no credit" in message and "scaled_dot_product_attention" in message
    for ex_id in ("06-causal-mask", "04-self-attention"):
        assert "not implemented yet" in verdict("starter.ipynb", ex_id)[1]
    assert "not valid JSON" in rows[("broken.ipynb", "")]["message"]
    assert rows[("empty.ipynb", "")]["passed"] == "False"

    table = {r["student_id"]: r for r in read_csv(book)}
    assert list(read_csv(book)[0]) == ["student_id", "06-causal-mask", "04-self-attention", "total"] or \
        list(read_csv(book)[0]) == ["student_id", "04-self-attention", "06-causal-mask", "total"]
    assert set(table) == {"alice", "bob", "dave", "starter", "broken", "empty"}
    assert table["alice"]["total"] == "2" and table["bob"]["total"] == "1" and table["dave"]["total"] == "0"
    assert table["broken"]["total"] == "0"


def test_grade_usage_errors(tmp_path):
    assert grade.main([str(tmp_path / "missing"), "--out", str(tmp_path / "g.csv")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert grade.main([str(empty), "--out", str(tmp_path / "g.csv")]) == 3
    assert not (tmp_path / "g.csv").exists()


def test_one_line_messages():
    assert grade.one_line("✗ a\n  b\n") == "✗ a | b"


# ----------------------------------------------------------------------------- make grade
def make(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_make_grade_without_notebooks_fails_clearly(tmp_path):
    folder = tmp_path / "no notebooks here"
    folder.mkdir()
    (folder / "readme.txt").write_text("nothing")
    proc = make("grade", f"SUBMISSIONS={folder}", f"GRADES={tmp_path / 'g.csv'}")
    assert proc.returncode != 0 and "no notebook" in proc.stderr
    proc = make("grade")
    assert proc.returncode != 0 and "usage: make grade" in proc.stdout + proc.stderr


def test_make_help_lists_the_exercise_targets():
    out = make("help").stdout
    for target in ("student-edition", "instructor-edition", "exercise-table", "grade", "student-book"):
        assert f"make {target}" in out, target


@pytest.mark.slow
def test_make_grade_symlinked_folders_spaces_and_options(tmp_path):
    store = tmp_path / "lms export"
    write(submission(CAUSAL, ATTENTION), store / "erin smith" / "06 minimal.ipynb")
    subs = tmp_path / "to grade"
    subs.mkdir()
    (subs / "erin smith").symlink_to(store / "erin smith", target_is_directory=True)
    key = tmp_path / "key file"
    key.write_text("another secret")
    grades, book = tmp_path / "out dir" / "grades.csv", tmp_path / "out dir" / "book.csv"
    proc = make("grade", f"SUBMISSIONS={subs}", f"GRADES={grades}", f"GRADEBOOK={book}", "TIMEOUT=30", "JOBS=2",
                "MEMORY_GB=3", f"KEY_FILE={key}", "LMS=canvas")
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(grades)
    assert {(r["student_id"], r["exercise_id"], r["passed"]) for r in rows} == {
        ("erin smith", "06-causal-mask", "True"), ("erin smith", "04-self-attention", "True")}
    table = read_csv(book)
    assert list(table[0])[:5] == grade.CANVAS_COLUMNS and table[0]["Student"] == "Points Possible"
    assert table[1]["ID"] == "erin smith" and table[1]["06-causal-mask"] == "1" and "Exercises total" not in table[1]


@pytest.mark.slow
def test_make_grade_gives_cheats_no_credit(tmp_path):
    """Every way of faking a grade that the issue lists (and a few more) gets no credit through `make grade`."""
    subs = tmp_path / "cheats"
    cheats = {
        "fake_checker": "def causal_mask(t):\n    return torch.ones(t, t, dtype=torch.bool).triu()\n"
                        "tl.exercises.check = lambda *a, **k: print('✓')\n",
        "library": "def causal_mask(t):\n    return tl.causal_mask(t)\n",
        "reference": "def causal_mask(t):\n    return tl.exercises.EXERCISES['06-causal-mask'].reference(t)\n",
        "hidden_library": "def causal_mask(t):\n    return getattr(tl, 'causal' + '_mask')(t)\n",
        "vars_library": "def causal_mask(t):\n    return vars(tl.attention)['causal_' + 'mask'](t)\n",
        "default_argument": "def causal_mask(t, _m=tl.causal_mask(64)):\n    return _m[:t, :t]\n",
        "grader_import": "def causal_mask(t):\n    import exercise_references as r\n    return r.REFERENCES['06-causal-mask'](t)\n",
        "grader_package": "def causal_mask(t):\n    from booktools import exercise_references as r\n"
                          "    return r.REFERENCES['06-causal-mask'](t)\n",
        "exit_early": "import os\ndef causal_mask(t):\n    os._exit(0)\n",
    }
    for name, source in cheats.items():
        write(submission(source, ATTENTION), subs / f"{name}.ipynb")
    # a helper in another cell imports the library's answer under another name
    write(notebook("from transformer_lib.attention import causal_mask as cm\n\ndef helper(t):\n    return cm(t)",
                   ("def causal_mask(t):\n    return helper(t)", ["starter", "ex-06-causal-mask"]), CHECK_CAUSAL),
          subs / "helper.ipynb")
    grades = tmp_path / "grades.csv"
    proc = make("grade", f"SUBMISSIONS={subs}", f"GRADES={grades}", "TIMEOUT=20", "JOBS=2")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in read_csv(grades) if r["exercise_id"] == "06-causal-mask"]
    assert len(rows) == len(cheats) + 1
    for row in rows:
        assert row["passed"] == "False" and row["points"] == "0", row
    messages = {r["student_id"]: r["message"] for r in rows}
    assert "likely mistake" in messages["fake_checker"]
    for name in ("library", "hidden_library", "default_argument", "helper"):
        assert "no credit" in messages[name] and "causal_mask" in messages[name], messages[name]
    assert "reference" in messages["reference"] and "no credit" in messages["reference"]
    assert "no credit" in messages["vars_library"] and "no credit" in messages["grader_import"]
    assert "no credit" in messages["grader_package"] and "booktools" in messages["grader_package"]
    assert "ended" in messages["exit_early"]


def test_make_help_and_the_guide_agree_on_the_grade_options():
    """`make help` and instructor_guide.md list the same variables of `make grade`, with the same defaults."""
    import re

    help_text = make("help").stdout
    start = help_text.index("make grade")
    block = "\n".join(line for line in help_text[start:].splitlines()[:6] if line.startswith(("make grade", " ")))
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    command = guide[guide.index('make grade SUBMISSIONS="submissions/"'):]
    command = command[:command.index("# or:")]
    option = re.compile(r"\[([A-Z_]+)=([^\]\s:]+)")
    in_help, in_guide = dict(option.findall(block)), dict(option.findall(command))
    assert set(in_help) == set(in_guide), (sorted(in_help), sorted(in_guide))
    assert in_help["JOBS"] == in_guide["JOBS"] == "1"
    assert "JOBS ?= 1" in (ROOT / "Makefile").read_text(encoding="utf-8")
