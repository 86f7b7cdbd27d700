"""booktools.gpu_run: the record of the chapters' GPU settings (make test-gpu), its comparison and the ledger's
GPU column. The GPU run itself needs CUDA; what it records and compares is tested here on stored notebooks."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch

from booktools import gpu_run, notebooks


def _nb(cells):
    return {"cells": cells}


def _glue_output(name, text):
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name}},
            "data": {"application/papermill.record/text/plain": repr(text)}}


def _code(source, outputs):
    return {"cell_type": "code", "source": source, "outputs": outputs}


SAMPLE = _nb([
    _code("# nbval-tolerance: abs=0.05\n# nbval-tolerance[c01_time]: rel=0.5\nx = 1",
          [_glue_output("c01_loss", "loss 2.31"), _glue_output("c01_time", "12 ms")]),
    _code("record_claim(...)", [_glue_output("claim_01_x_text", "a claim"), _glue_output("claim_01_x_value", "1.0"),
                                _glue_output("claim_01_x_verdict", "confirmed"),
                                _glue_output("claim_01_x_adequacy", "✓ check: 0.1")]),
])


def test_collect_reads_glued_values_with_their_declared_tolerances():
    got = gpu_run.collect(SAMPLE)
    assert got["glued"]["c01_loss"] == {"text": "loss 2.31", "tolerance": "abs=0.05"}
    assert got["glued"]["c01_time"] == {"text": "12 ms", "tolerance": "rel=0.5"}
    assert got["glued"]["claim_01_x_verdict"]["tolerance"] is None                  # no declaration: exact
    assert got["claims"] == {"01_x": {"text": "a claim", "value": "1.0", "verdict": "confirmed",
                                      "adequacy": "✓ check: 0.1"}}


def _record(nb, status="ok"):
    entry = {"status": status, "seconds": 1.0, "peak_gib": 0.1}
    entry.update(gpu_run.collect(nb))
    return {"environment": {"device": "test"}, "chapters": {"01_impact": entry}}


def test_compare_numbers_within_tolerance_verdicts_exactly():
    ref = _record(SAMPLE)
    assert gpu_run.compare(ref, copy.deepcopy(ref)) == []
    close = copy.deepcopy(ref)
    close["chapters"]["01_impact"]["glued"]["c01_loss"]["text"] = "loss 2.35"             # within abs=0.05
    close["chapters"]["01_impact"]["glued"]["c01_time"]["text"] = "17 ms"                 # within rel=0.5
    assert gpu_run.compare(ref, close) == []
    far = copy.deepcopy(ref)
    far["chapters"]["01_impact"]["glued"]["c01_loss"]["text"] = "loss 2.40"
    far["chapters"]["01_impact"]["glued"]["claim_01_x_verdict"]["text"] = "nuanced"
    problems = gpu_run.compare(ref, far)
    assert len(problems) == 2
    assert any("c01_loss" in p and "exceeds the declared tolerance" in p for p in problems)
    assert any("claim_01_x_verdict is 'nuanced', reference 'confirmed'" in p for p in problems)


def test_compare_flags_a_chapter_that_no_longer_finishes_and_missing_values():
    ref = _record(SAMPLE)
    stopped = _record(SAMPLE, status="timeout in cell 3")
    assert gpu_run.compare(ref, stopped) == ["01_impact: finished in the reference, now timeout in cell 3"]
    missing = copy.deepcopy(ref)
    del missing["chapters"]["01_impact"]["glued"]["c01_time"]
    assert gpu_run.compare(ref, missing) == ["01_impact: c01_time was glued in the reference, not now"]
    assert gpu_run.compare(ref, {"chapters": {}}) == []                                 # a subset of chapters


def test_without_cuda_the_run_stops_at_once_with_a_clear_message():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = subprocess.run([sys.executable, "-m", "booktools.gpu_run"], cwd=notebooks.ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2
    assert "make test-gpu needs a CUDA GPU" in run.stderr and "torch.cuda.is_available() is False" in run.stderr


def test_the_stored_record_is_well_formed():
    """gpu-runs/reference.json: the environment of the run and, per chapter, its status and glued values."""
    record = gpu_run.load_reference()
    assert record is not None, "gpu-runs/reference.json is missing: run make test-gpu on a GPU machine"
    for key in ("device", "torch", "date", "commit"):
        assert record["environment"].get(key), f"the record's environment has no {key}"
    toc = {p.stem for p in notebooks.toc_chapters()}
    assert set(record["chapters"]) <= toc, sorted(set(record["chapters"]) - toc)
    for chapter, entry in record["chapters"].items():
        assert entry["status"] and isinstance(entry["glued"], dict), chapter
        for claim_id, claim in entry["claims"].items():
            assert claim_id.startswith(chapter[:2]) and claim.get("verdict"), (chapter, claim_id)


def _write_nb(path, *sources):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_chapters_run_several_at_a_time_each_under_a_limit_on_the_whole_chapter(tmp_path):
    """`--jobs`: chapters in separate processes, results as they finish. The limit bounds the whole chapter: ten
    cells of 3 s each never exceed a limit of 12 s one by one, but together they must be stopped."""
    fast = _write_nb(tmp_path / "a.ipynb", "from transformer_lib.notebook import glue_text\nglue_text('c00_x', 'one')")
    slow = _write_nb(tmp_path / "b.ipynb", *["import time\ntime.sleep(3)"] * 10, "x = 1")
    stale = json.loads(slow.read_text())                       # a stored output of the cell the stop never reaches
    stale["cells"][10]["outputs"] = [_glue_output("c00_stale", "stored on the CPU")]
    slow.write_text(json.dumps(stale))
    got = {path.name: (nb, info) for path, nb, info in gpu_run.run_chapters([fast, slow], 12, jobs=2)}
    assert got["a.ipynb"][1]["status"] == "ok", got["a.ipynb"][1]
    assert gpu_run.collect(got["a.ipynb"][0])["glued"]["c00_x"]["text"] == "one"
    status, seconds = got["b.ipynb"][1]["status"], got["b.ipynb"][1]["seconds"]
    assert status.startswith("timeout in cell ") and 1 <= int(status.rsplit(" ", 1)[1]) <= 4, status
    assert 12 <= seconds < 25, seconds
    assert gpu_run.collect(got["b.ipynb"][0])["glued"] == {}


def test_jobs_must_be_positive():
    run = subprocess.run([sys.executable, "-m", "booktools.gpu_run", "--jobs", "0"], cwd=notebooks.ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--jobs must be a positive number of chapters, got 0" in run.stderr


def test_merge_keeps_the_chapters_a_run_did_not_reach_with_the_run_they_came_from():
    old = _record(SAMPLE)
    old["environment"] = {"device": "H200", "torch": "2.11", "date": "2026-11-26", "commit": "aaa", "note": "old"}
    old["chapters"]["02_recurrence"] = dict(old["chapters"]["01_impact"])
    new = {"environment": {"device": "H100", "torch": "2.13", "date": "2026-11-27", "commit": "bbb", "jobs": 1},
           "chapters": {"01_impact": gpu_run.chapter_entry(SAMPLE, {"status": "ok", "seconds": 2.0, "peak_gib": 0.1},
                                                           {"device": "H100", "date": "2026-11-27", "jobs": 1})}}
    merged = gpu_run.merge(old, new)
    assert merged["environment"]["date"] == "2026-11-27" and "02" in merged["environment"]["kept"]
    assert merged["chapters"]["01_impact"]["run"] == {"device": "H100", "date": "2026-11-27", "jobs": 1}
    assert merged["chapters"]["02_recurrence"]["run"] == {"device": "H200", "torch": "2.11", "date": "2026-11-26",
                                                          "commit": "aaa"}
    assert gpu_run.merge(None, new)["chapters"] == new["chapters"]
    assert "kept" not in gpu_run.merge(None, new)["environment"]


def test_the_source_digest_follows_the_code_not_outputs_or_prose():
    base = gpu_run.source_digest(SAMPLE)
    prose = copy.deepcopy(SAMPLE)
    prose["cells"].append({"cell_type": "markdown", "source": "new prose"})
    prose["cells"][0]["outputs"] = []
    assert gpu_run.source_digest(prose) == base
    code = copy.deepcopy(SAMPLE)
    code["cells"][0]["source"] += "\ny = 2"
    assert gpu_run.source_digest(code) != base
    measured = copy.deepcopy(SAMPLE)
    measured["cells"].append(_code(gpu_run.PEAK_MEMORY_CELL, []))
    assert gpu_run.source_digest(measured) == base


def _with_source(source):
    nb = copy.deepcopy(SAMPLE)
    nb["cells"][1]["source"] = source
    return gpu_run.source_digest(nb)


def test_the_source_digest_ignores_comments_blank_lines_and_formatting_not_code_or_strings():
    """What a kernel runs counts: a comment, a blank line or a line break inside brackets does not; a number, a name
    or a string (strings can be glued text) does."""
    cell = 'SETTINGS = dict(steps=500)  # 500 steps\nglue_text("c01_x", f"{SETTINGS[\'steps\']} steps")\n'
    base = _with_source(cell)
    assert _with_source("# The settings: a new comment\n" + cell.replace("# 500 steps", "# fits 3 minutes")) == base
    assert _with_source(cell.replace("\n", "\n\n\n")) == base                                     # blank lines
    assert _with_source(cell.replace("dict(steps=500)", "dict(\n    steps=500,\n)")) == base      # formatting
    assert _with_source(cell.replace("500)", "400)")) != base                                     # code
    assert _with_source(cell.replace("} steps", "} training steps")) != base                      # a string
    assert _with_source('"""A docstring."""\n' + cell) != base                                    # a docstring


def test_the_source_digest_reads_cells_with_ipython_magics_without_their_comments():
    magic = "%matplotlib inline\n!pip install -q einops  # for the exercises\nx = 1\n"
    base = _with_source(magic)
    assert _with_source("# set-up\n" + magic.replace("  # for the exercises", "") + "\n\n") == base
    assert _with_source(magic.replace("einops", "einops==0.8")) != base
    assert _with_source(magic.replace("x = 1", "x = 2")) != base
    untokenizable = "%%time\n'''an unterminated string\n"                    # counted as it is
    assert _with_source(untokenizable) != _with_source(untokenizable.replace("an", "another"))


def test_the_digests_are_the_same_on_every_python():
    """Pinned: the GPU machine, the CI and a contributor may run different Pythons (3.11 to 3.13 checked), and a
    digest that moved with the Python would mark every GPU verdict as of earlier code. ``ast.dump`` differs between
    them (3.12 adds an empty ``type_params`` to every ``def``; 3.12.1 an empty string to some f-strings)."""
    source = ('def f(width: int = 3) -> str:\n    """Doc."""\n    return f"{\'x\':<{width}}|"\n'
              "class A:\n    y = [1, 2.0, None, b'z', ...]\n")
    assert gpu_run.source_digest(_nb([_code(source, [])])) == "c160a9d8e7451dd3"
    assert gpu_run.library_digest({"transformer_lib/m.py": source}) == {"transformer_lib/m.py": "999367c1c32e807a"}


def test_the_library_digest_follows_code_not_docstrings_or_comments():
    module = ('"""The module."""\n\ndef f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n\n\n'
              'class C:\n    """A class."""\n    n = 1\n')

    def digest(source):
        return gpu_run.library_digest({"transformer_lib/m.py": source})["transformer_lib/m.py"]

    base = digest(module)
    assert len(base) == 16
    assert digest(module.replace("Twice x.", "Twice x, as chapter 8 shows.").replace("  # doubled", "")) == base
    assert digest(module.replace('    """A class."""\n', "")) == base
    assert digest(module.replace("2 * x", "3 * x")) != base
    assert digest(module.replace("n = 1", "n = 2")) != base


def test_the_library_digest_of_the_working_tree_and_its_changes():
    now = gpu_run.library_digest()
    assert "transformer_lib/presets.py" in now
    assert all(p.startswith("transformer_lib/") and p.endswith(".py") for p in now)
    assert gpu_run.environment()["library"] == now                                   # what a run records
    assert gpu_run.library_changes(now, now) == {"changed": [], "new": [], "removed": []}
    then = dict(now, **{"transformer_lib/presets.py": "0" * 16, "transformer_lib/old.py": "1" * 16})
    del then["transformer_lib/training/loop.py"]
    assert gpu_run.library_changes(then, now) == {"changed": ["presets.py"], "new": ["training/loop.py"],
                                                  "removed": ["old.py"]}


def test_a_chapter_entry_names_the_library_of_its_run():
    run = {"device": "H100", "date": "2026-11-28", "commit": "ccc", "jobs": 1, "cuda": "13.0",
           "library": {"transformer_lib/a.py": "0123456789abcdef"}}
    entry = gpu_run.chapter_entry(SAMPLE, {"status": "ok", "seconds": 1.0, "peak_gib": 0.1}, run)
    assert entry["run"] == {k: v for k, v in run.items() if k != "cuda"}
    record = {"environment": run, "chapters": {"01_impact": dict(entry, run=None)}}      # an older entry: no run
    assert gpu_run.run_of(record, record["chapters"]["01_impact"])["library"] == run["library"]


def test_the_ledger_marks_gpu_verdicts_of_earlier_code_and_changed_claims():
    from booktools import build_ledger

    record = _record(SAMPLE)
    record["chapters"]["01_impact"].update(source=gpu_run.source_digest(SAMPLE), run={"date": "2026-11-26"})
    gpu = gpu_run.claim_verdicts(record)
    claim = {"id": "01_x", "stored": ["'a claim'"]}                 # a stored text/plain value, as repr() wrote it
    assert build_ledger.pasted(claim["stored"][0]) == "a claim"
    assert build_ledger.gpu_verdict(claim, gpu, gpu_run.source_digest(SAMPLE)) == "confirmed"
    assert build_ledger.gpu_verdict(claim, gpu, "another digest") == "confirmed (earlier code, 2026-11-26)"
    assert build_ledger.gpu_verdict(dict(claim, stored=["'another claim'"]), gpu) == "— (claim changed since)"
    assert build_ledger.gpu_verdict(dict(claim, id="01_y"), gpu) == "—"


def test_the_stored_record_names_the_run_and_code_of_every_chapter():
    record = gpu_run.load_reference()
    for chapter, entry in record["chapters"].items():
        assert entry.get("source") and entry.get("run", {}).get("date") and entry["run"].get("commit"), chapter
        library = entry["run"].get("library")
        assert library and "transformer_lib/__init__.py" in library, f"{chapter}: its run has no library digest"
        assert all(p.startswith("transformer_lib/") and p.endswith(".py") and len(d) == 16
                   for p, d in library.items()), chapter
