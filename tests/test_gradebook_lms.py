"""The gradebook as the LMS imports it, the class record across regrades, feedback files and the instructor's report
(booktools/grade.py, issue 24 §4-5).

The layouts checked here are those the LMS's own import documentation gives:

- Canvas (*Gradebook → Import*): the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``
  first, then one column per assignment; a column Canvas does not know becomes a new assignment. ``ID`` is the
  Canvas user id, the primary key of Canvas's own export; the export's second row is *Points Possible*; totals and
  scores computed by Canvas are read-only columns whose imported values are ignored, so a total is only written
  as an assignment when asked. Sources: Ohio State's CarmenCanvas guide "Import a CSV file into Carmen grades"
  (https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades:
  "Student Name ... OR Student ID OR Student SIS User ID ... SIS Login ID ... Section ... Assignment Name"; "New
  assignment columns in the Gradebook generate new assignments"), the description of Canvas's grades export in
  https://nemogb-dev.github.io/nemogb-r/articles/detailed-canvas-export-info.html ("ID - This gives the student's
  Canvas ID. It is the primary key"), and VCU's Canvas guide to the gradebook CSV
  (https://ts.vcu.edu/askit/teaching-and-learning/canvas/faculty/grading-faculty/gradebook-action-menu-faculty/:
  "read-only columns ... Any changes made to these columns will be ignored when you re-upload the file").
  Canvas's "Download Submissions" names files ``<name>_<user id>_<submission id>_<file>``, with ``_LATE_`` after
  the name for a late one.
- Moodle (*Grades → Import → CSV file*): any columns; on the preview page the instructor maps one column ("Map from")
  to a user field ("Map to": ``userid``, ``username``, ``useridnumber`` or ``useremail``) and each other column to
  a grade item or a new one. Source: MoodleDocs "Grade import"
  (https://docs.moodle.org/311/en/Grade_import: "Change both dropdowns to: 'Email Address' to 'useremail', or to
  'Id Number' to 'useridnumber'"). The column names written here are those of Moodle's own export (``ID number``,
  ``Email address``) and ``Username``.
- Both files are UTF-8 with a byte-order mark (Excel's "CSV UTF-8"), which both LMSs read.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import grade  # noqa: E402
from test_grading import CHECK_CAUSAL, notebook, write  # noqa: E402

BOM = "\ufeff".encode("utf-8")
EX = ["06-causal-mask", "04-self-attention"]
TABLE = [{"student_id": "101", "06-causal-mask": 2, "04-self-attention": 1, "total": 3},
         {"student_id": "104", "06-causal-mask": 0, "04-self-attention": 0, "total": 0}]
ROSTER = {"101": {"name": "Smith, Alice", "section": "A", "sis_user_id": "S001", "sis_login_id": "asmith",
                  "username": "asmith", "email": "alice@uni.example", "idnumber": "2024001"},
          "104": {"name": "Ødegård, Dan", "section": "B", "sis_user_id": "S004", "sis_login_id": "dodegard",
                  "username": "dodegard", "email": "dan@uni.example", "idnumber": ""}}


def rows_of(path: Path) -> list[list[str]]:
    raw = path.read_bytes()
    assert raw.startswith(BOM), "not UTF-8 with a byte-order mark"
    return list(csv.reader(raw.decode("utf-8-sig").splitlines()))


# ----------------------------------------------------------------------------- who submitted
@pytest.mark.parametrize("name, expected", [
    ("smithalice_101_9001_06_minimal_architecture.ipynb", {"id": "101", "name": "smithalice", "late": False}),
    ("jonesbob_LATE_102_9002_06_minimal_architecture.ipynb", {"id": "102", "name": "jonesbob", "late": True}),
    ("jonesbob_LATE_102_9002_06_minimal_architecture-1.ipynb", {"id": "102", "name": "jonesbob", "late": True}),
])
def test_canvas_download_names(name, expected):
    assert grade.identify(Path(name), lms="canvas") == expected
    assert grade.identify(Path(name.replace(".ipynb", "")) / "06.ipynb", lms="canvas") == expected


def test_other_names_keep_folder_or_file_ids():
    assert grade.identify(Path("erin smith/06.ipynb"), lms="canvas") == {"id": "erin smith", "name": "", "late": False}
    assert grade.identify(Path("bob.ipynb"))["id"] == "bob"
    assert grade.identify(Path("doe_12_34_x.ipynb"), r"^[a-z]+_(\d+)_", "canvas")["id"] == "12"


def test_roster_formats(tmp_path):
    canvas_export = tmp_path / "canvas.csv"
    canvas_export.write_text("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (87568490)\n"
                             "    Points Possible,,,,,10\n\"Smith, Alice\",101,S001,asmith,A,9\n", encoding="utf-8")
    assert grade.read_roster(canvas_export) == {"101": {"name": "Smith, Alice", "sis_user_id": "S001",
                                                        "sis_login_id": "asmith", "section": "A"}}
    semicolons = tmp_path / "moodle.csv"
    semicolons.write_text("student_id;Username;Email address;ID number\nalice;asmith;alice@uni.example;2024001\n",
                          encoding="utf-8")
    assert grade.read_roster(semicolons) == {"alice": {"username": "asmith", "email": "alice@uni.example",
                                                       "idnumber": "2024001"}}
    no_id = tmp_path / "no_id.csv"
    no_id.write_text("name,section\nAlice,A\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--roster: .* has no student id column \(its header: \['name', 'section'\]"):
        grade.read_roster(no_id)
    with pytest.raises(ValueError, match="--roster: the file .* does not exist"):
        grade.read_roster(tmp_path / "missing.csv")


# ----------------------------------------------------------------------------- the layouts
def test_canvas_layout(tmp_path):
    """Canvas: the five identity columns first, ID = Canvas user id, a Points Possible row, one column per exercise,
    no total unless asked; a student of the roster without a submission has 0."""
    path = tmp_path / "canvas.csv"
    grade.write_gradebook(path, TABLE, EX, "canvas", {"06-causal-mask": 2}, ROSTER)
    rows = rows_of(path)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + EX
    assert rows[1] == ["Points Possible", "", "", "", "", "2", "1"]
    assert rows[2] == ["Smith, Alice", "101", "S001", "asmith", "A", "2", "1"]
    assert rows[3] == ["Ødegård, Dan", "104", "S004", "dodegard", "B", "0", "0"]
    grade.write_gradebook(path, TABLE, EX, "canvas", {"06-causal-mask": 2}, None, {"101": "smithalice"},
                          total_column="Chapter 6 exercises")
    rows = rows_of(path)
    assert rows[0][-1] == "Chapter 6 exercises" and rows[1][-1] == "3" and rows[2][:2] == ["smithalice", "101"]
    assert rows[3][:5] == ["104", "104", "", "", ""]


@pytest.mark.parametrize("moodle_id, header, value", [("username", "Username", "asmith"),
                                                       ("email", "Email address", "alice@uni.example"),
                                                       ("idnumber", "ID number", "2024001")])
def test_moodle_layout(tmp_path, moodle_id, header, value):
    """Moodle: the identifier column the instructor maps ("Map from" → username / useremail / useridnumber), then
    one column per exercise; a student the roster gives no such identifier is left out and reported."""
    path = tmp_path / "moodle.csv"
    left_out = grade.write_gradebook(path, TABLE, EX, "moodle", {}, ROSTER, moodle_id=moodle_id)
    rows = rows_of(path)
    assert rows[0] == [header] + EX
    assert rows[1] == [value, "2", "1"]
    if moodle_id == "idnumber":
        assert left_out == ["104"] and len(rows) == 2
    else:
        assert left_out == [] and rows[2][1:] == ["0", "0"]


def test_generic_layout(tmp_path):
    path = tmp_path / "g.csv"
    grade.write_gradebook(path, TABLE, EX, "generic")
    assert rows_of(path) == [["student_id"] + EX + ["total"], ["101", "2", "1", "3"], ["104", "0", "0", "0"]]


def test_roster_students_without_submission_get_zero():
    rows = [{"student_id": "101", "exercise_id": "06-causal-mask", "points": 2}]
    table = grade.gradebook_rows(rows, ["06-causal-mask"], ROSTER)
    assert table == [{"student_id": "101", "06-causal-mask": 2, "total": 2},
                     {"student_id": "104", "06-causal-mask": 0, "total": 0}]


def test_record_merge_replaces_a_regraded_student():
    earlier = [{"student_id": "a", "exercise_id": "x", "points": "0"}, {"student_id": "b", "exercise_id": "x",
                                                                        "points": "1"}]
    new = [{"student_id": "a", "exercise_id": "x", "points": 1}]
    assert grade.merge_record(earlier, new) == [earlier[1], new[0]]


def test_record_merge_keeps_the_exercises_not_regraded():
    """A corrected chapter 8 handed in later replaces the chapter 8 row only: the student's chapter 6 grades stay,
    and so does an unreadable file of another chapter; an unreadable file graded again is replaced."""
    ch6 = {"student_id": "a", "student_file": "a/06.ipynb", "exercise_id": "06-causal-mask", "points": "0.9"}
    ch8 = {"student_id": "a", "student_file": "a/08.ipynb", "exercise_id": "08-layer-norm", "points": "0"}
    broken = {"student_id": "a", "student_file": "a/13.ipynb", "exercise_id": "", "points": "0"}
    other = {"student_id": "b", "student_file": "b/08.ipynb", "exercise_id": "08-layer-norm", "points": "1"}
    ch8_again = {"student_id": "a", "student_file": "a/08_v2.ipynb", "exercise_id": "08-layer-norm", "points": 1}
    assert grade.merge_record([ch6, ch8, broken, other], [ch8_again]) == [ch6, broken, other, ch8_again]
    fixed = {"student_id": "a", "student_file": "a/13.ipynb", "exercise_id": "", "points": 0}
    assert grade.merge_record([ch6, broken], [fixed]) == [ch6, fixed]


def test_a_forbidden_call_is_reported_once():
    """Read in the source under an alias and caught again at run time, one call is one finding and one clause."""
    from transformer_lib.exercises import engine
    from transformer_lib.exercises import EXERCISES

    why = "which normalises in one call"
    findings = [f"it calls `F.layer_norm` (torch.nn.functional.layer_norm), {why}",
                f"it calls `torch.nn.functional.layer_norm`, {why}",
                "it calls `tl.LayerNorm` (transformer_lib.blocks.LayerNorm), which is the library's answer"]
    assert engine.distinct_findings(findings) == [findings[0], findings[2]]
    message = engine.no_credit(EXERCISES["08-layer-norm"], findings).message
    assert message.count("layer_norm`") == 1 and "transformer_lib.blocks.LayerNorm" in message
    assert "torch's" in message


def test_tampering_is_listed():
    cells = [{"number": 3, "source": "tl.exercises.check = lambda *a: None\ntorch.Tensor.__eq__ = f\n"
                                     "setattr(torch, 'allclose', g)\nx = 1\nself_value = 2"}]
    assert grade.tampering(cells) == ["cell 3: assigns `tl.exercises.check`", "cell 3: assigns `torch.Tensor.__eq__`",
                                      "cell 3: `setattr(torch, …)`"]


def test_near_copy_of_the_library():
    import inspect

    import transformer_lib as tl
    from transformer_lib.exercises.catalogue import EXERCISES

    pasted = inspect.getsource(tl.attention._masked_softmax).replace("_masked_softmax", "masked_softmax")
    similarity, source = grade.near_copy(EXERCISES["06-masked-softmax"], pasted)
    assert similarity >= grade.NEAR_COPY and source == "tl.attention._masked_softmax"
    own = ("def masked_softmax(scores, mask):\n    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
           "    return torch.softmax(scores, dim=-1) * mask.any(-1, keepdim=True)\n")
    assert grade.near_copy(EXERCISES["06-masked-softmax"], own) is None


def test_bad_arguments_are_named(tmp_path, capsys):
    write(notebook("x = 1"), tmp_path / "s" / "a.ipynb")
    with pytest.raises(SystemExit):
        grade.main([str(tmp_path / "s"), "--late-penalty", "1.5"])
    assert "--late-penalty takes a fraction of the points between 0 and 1" in capsys.readouterr().err
    (tmp_path / "r.csv").write_text("name\nx\n")
    with pytest.raises(SystemExit):
        grade.main([str(tmp_path / "s"), "--roster", str(tmp_path / "r.csv")])
    assert "--roster:" in capsys.readouterr().err
    assert grade.main([str(tmp_path / "s"), "--out", str(tmp_path / "o" / "g.csv"), "--course-ref", "no-such-ref-x"]) == 2
    assert "--course-ref: 'no-such-ref-x'" in capsys.readouterr().err


def test_default_output_is_ignored_by_git():
    assert grade.DEFAULT_OUT.relative_to(ROOT).parts[0] == "_build"
    proc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(grade.DEFAULT_OUT)])
    assert proc.returncode == 0


# ----------------------------------------------------------------------------- a small class, end to end
RIGHT = "def causal_mask(t):\n    i = torch.arange(t)\n    return i[None, :] <= i[:, None]\n"
WRONG = "def causal_mask(t):\n    return torch.ones(t, t).tril(-1).bool()\n"
CHEAT = ("def causal_mask(t):\n    return tl.causal_mask(t)\n\n"
         "tl.exercises.check = lambda *a, **k: print('✓')\ntorch.allclose = lambda *a, **k: True\n")
PASTED = ("def causal_mask(t, s=None, device=None):\n    s = t if s is None else s\n"
          "    q_pos = torch.arange(s - t, s, device=device).unsqueeze(1)  # (t, 1)\n"
          "    k_pos = torch.arange(s, device=device).unsqueeze(0)  # (1, s)\n    return k_pos <= q_pos\n")
CANVAS_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                 "\"Smith, Alice\",101,S001,asmith,A\n\"Jones, Bob\",102,S002,bjones,A\n\"Wu, Carol\",103,S003,cwu,B\n"
                 "\"Ødegård, Dan\",104,S004,dodegard,B\n\"Kim, Erin\",105,S005,ekim,B\n\"Lee, Frank\",106,S006,flee,A\n")


def small_class(folder: Path) -> None:
    def submit(source: str, name: str) -> None:
        write(notebook((source, ["starter", "ex-06-causal-mask"]), CHECK_CAUSAL), folder / name)

    submit(RIGHT, "smithalice_101_9001_06_minimal_architecture.ipynb")
    submit(RIGHT, "jonesbob_LATE_102_9002_06_minimal_architecture.ipynb")
    submit(CHEAT, "wucarol_103_9003_06_minimal_architecture.ipynb")
    submit(PASTED, "kimerin_105_9005_06_minimal_architecture.ipynb")
    submit(WRONG, "leefrank_106_9006_06_minimal_architecture.ipynb")


def run_grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "booktools.grade", *args], capture_output=True, text=True,
                          timeout=900, cwd=ROOT, env=dict(os.environ, GRADING_KEY="class-secret"))


@pytest.mark.slow
def test_small_class_canvas_roster_late_cheat_and_regrade(tmp_path):
    """A class of six in Canvas: a non-submitter (104) gets 0, a late file loses the penalty, the cheat gets no
    credit and is listed with its patches, the pasted library source is flagged, and a regrade of one student
    (106) replaces that student's row in the same gradebook."""
    subs, again, out = tmp_path / "subs", tmp_path / "regrade", tmp_path / "grades" / "grades.csv"
    small_class(subs)
    write(notebook((RIGHT, ["starter", "ex-06-causal-mask"]), CHECK_CAUSAL),
          again / "leefrank_106_9011_06_minimal_architecture.ipynb")
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeff" + CANVAS_ROSTER, encoding="utf-8")
    common = ["--out", str(out), "--lms", "canvas", "--roster", str(roster), "--late-penalty", "0.2",
              "--points", "06-causal-mask=2", "--jobs", "2", "--timeout", "20"]
    proc = run_grade(str(subs), *common)
    assert proc.returncode == 0, proc.stderr
    book = rows_of(out.with_name("gradebook.csv"))
    assert book[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "06-causal-mask"]
    assert book[1] == ["Points Possible", "", "", "", "", "2"]
    scores = {row[1]: row[5] for row in book[2:]}
    assert scores == {"101": "2", "102": "1.6", "103": "0", "104": "0", "105": "2", "106": "0"}
    proc = run_grade(str(again), *common)
    assert proc.returncode == 0, proc.stderr
    book = rows_of(out.with_name("gradebook.csv"))
    assert len(book) == 8 and {row[1]: row[5] for row in book[2:]}["106"] == "2"
    record = list(csv.DictReader(out.read_text(encoding="utf-8-sig").splitlines()))
    assert [r["student_id"] for r in record].count("106") == 1
    assert {r["student_id"]: r["late"] for r in record}["102"] == "True"
    report = out.with_name("report.md").read_text(encoding="utf-8")
    assert "104 (Ødegård, Dan)" in report and "jonesbob_LATE_102" in report
    assert "assigns `tl.exercises.check`" in report and "assigns `torch.allclose`" in report
    assert "it calls `tl.attention.causal_mask`" in report
    assert "105, `kimerin_105_9005_06_minimal_architecture.ipynb`, 06-causal-mask: 100% similar" in report
    feedback = out.with_name("feedback") / "102.md"
    text = feedback.read_text(encoding="utf-8")
    assert "# Feedback: Jones, Bob (102)" in text and "06-causal-mask: 1.6 / 2" in text and "late" in text
    assert "No notebook was received" in (out.with_name("feedback") / "104.md").read_text(encoding="utf-8")
    assert json.loads(out.with_name("findings.json").read_text(encoding="utf-8"))["cheats"]


@pytest.mark.slow
def test_grader_enforces_forbidden_torch_calls(tmp_path):
    """A one-line F.layer_norm (even reached through getattr) gets no credit from the grader, with the reason, and
    is listed in the instructor's report; the from-scratch layer norm passes."""
    check = 'tl.exercises.check("08-layer-norm", layer_norm)'
    cheat = ('def layer_norm(x, gamma, beta, eps=1e-5):\n'
             '    return getattr(F, "layer" + "_norm")(x, x.shape[-1:], gamma, beta, eps)\n')
    own = ('def layer_norm(x, gamma, beta, eps=1e-5):\n    mu = x.mean(-1, keepdim=True)\n'
           '    var = ((x - mu) ** 2).mean(-1, keepdim=True)\n    return (x - mu) / torch.sqrt(var + eps) * gamma + beta\n')
    for name, source in (("cheat", cheat), ("own", own)):
        write(notebook("import torch.nn.functional as F", (source, ["starter", "ex-08-layer-norm"]), check),
              tmp_path / "subs" / f"{name}.ipynb")
    out = tmp_path / "g" / "grades.csv"
    proc = run_grade(str(tmp_path / "subs"), "--out", str(out), "--timeout", "20", "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(out.read_text(encoding="utf-8-sig").splitlines())}
    assert rows["own"]["passed"] == "True", rows["own"]["message"]
    message = rows["cheat"]["message"]
    assert rows["cheat"]["passed"] == "False" and "no credit" in message and "layer_norm" in message
    assert "normalises in one call" in message
    report = out.with_name("report.md").read_text(encoding="utf-8")
    assert "cheat, `cheat.ipynb`: 08-layer-norm: it calls" in report


@pytest.mark.slow
def test_regrading_one_chapter_keeps_the_others(tmp_path):
    """A student whose late chapter 6 was graded hands in chapter 8 later: grading that file adds the chapter 8 row
    and keeps the chapter 6 grade (with its late penalty) and its line in the report."""
    subs, later, out = tmp_path / "subs", tmp_path / "later", tmp_path / "grades" / "grades.csv"
    write(notebook((RIGHT, ["starter", "ex-06-causal-mask"]), CHECK_CAUSAL),
          subs / "jonesbob_LATE_102_9002_06_minimal_architecture.ipynb")
    own = ('def layer_norm(x, gamma, beta, eps=1e-5):\n    mu = x.mean(-1, keepdim=True)\n'
           '    var = ((x - mu) ** 2).mean(-1, keepdim=True)\n    return (x - mu) / torch.sqrt(var + eps) * gamma + beta\n')
    write(notebook((own, ["starter", "ex-08-layer-norm"]), 'tl.exercises.check("08-layer-norm", layer_norm)'),
          later / "jonesbob_102_9012_08_training_tricks.ipynb")
    common = ["--out", str(out), "--lms", "canvas", "--late-penalty", "0.2", "--timeout", "20"]
    for folder in (subs, later):
        proc = run_grade(str(folder), *common)
        assert proc.returncode == 0, proc.stderr
    record = list(csv.DictReader(out.read_text(encoding="utf-8-sig").splitlines()))
    assert {r["exercise_id"]: (r["points"], r["late"]) for r in record if r["student_id"] == "102"} == {
        "06-causal-mask": ("0.8", "True"), "08-layer-norm": ("1", "False")}
    assert "jonesbob_LATE_102_9002_06_minimal_architecture.ipynb" in out.with_name("report.md").read_text(
        encoding="utf-8")
