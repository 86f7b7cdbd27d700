"""Structural checks of the book's sources: the table of contents, each chapter notebook as
stored (executed, no errors, the Colab set-up cell, exercises, claims), and the API page.

These need no build; tests/test_built_book.py and tests/test_browser.py check the HTML.
Every failure message names the chapter and, where it applies, the cell.
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
sys.path.insert(0, str(ROOT / "scripts"))
import bookkit  # noqa: E402

CHAPTERS = bookkit.toc_chapters()
MIN_EXERCISES = 3
VERDICTS = {"confirmed", "nuanced", "corrected"}
GLUE_MIME = "application/papermill.record/"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def chapter_id(path: Path) -> str:
    return path.stem


def load(path: Path):
    if not path.is_file():
        pytest.fail(f"{bookkit.relative(path)} is listed in _toc.yml but does not exist")
    return nbformat.read(path, as_version=4)


def where(path: Path, number: int, cell) -> str:
    """'chapters/x.ipynb, code cell 3 ("first line")' (code cells numbered from 0, as nbval)."""
    first = bookkit.cell_source(cell).strip().splitlines()[:1]
    return f"{bookkit.relative(path)}, code cell {number} ({first[0][:60] if first else ''!r})"


def markdown_text(nb) -> str:
    return "\n".join(bookkit.cell_source(c) for c in nb.cells if c.cell_type == "markdown")


def glued(nb) -> dict[str, str]:
    """Every glued key of a notebook -> its text/plain value."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(key.startswith(GLUE_MIME) for key in data):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                text = data.get(GLUE_MIME + "text/plain", "")
                if name:
                    values[name] = text
    return values


# --------------------------------------------------------------------------- table of contents
def test_toc_lists_chapters():
    assert CHAPTERS, "_toc.yml lists no chapter under chapters/"


@pytest.mark.parametrize("docname", bookkit.toc_docnames())
def test_toc_entry_exists(docname):
    candidates = [ROOT / f"{docname}{ext}" for ext in (".ipynb", ".md")]
    assert any(p.is_file() for p in candidates), (
        f"_toc.yml lists {docname!r}, but neither {docname}.ipynb nor {docname}.md exists")


def test_chapter_files_are_notebooks_in_order():
    numbers = [bookkit.chapter_number(p) for p in CHAPTERS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), (
        f"chapters in _toc.yml must be .ipynb files named NN_topic in increasing order: {numbers}")


# --------------------------------------------------------------------------- each chapter
@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_is_executed(path):
    """Stored with outputs from one clean top-to-bottom run: execution counts 1, 2, 3, ..."""
    nb = load(path)
    for number, (_, cell) in enumerate(bookkit.code_cells(nb)):
        assert cell.get("execution_count") == number + 1, (
            f"{where(path, number, cell)} has execution_count {cell.get('execution_count')}, "
            f"expected {number + 1}: re-run the chapter with scripts/run_chapter.py")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_has_no_error_output(path):
    nb = load(path)
    for number, (_, cell) in enumerate(bookkit.code_cells(nb)):
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", (
                f"{where(path, number, cell)} has a stored error: "
                f"{output.get('ename')}: {output.get('evalue')}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_kernel(path):
    nb = load(path)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{bookkit.relative(path)}: kernelspec must be python3")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell(path):
    """First code cell: the canonical Colab set-up cell for _config.yml's repository, hidden."""
    nb = load(path)
    cells = bookkit.code_cells(nb)
    assert cells, f"{bookkit.relative(path)} has no code cell"
    _, cell = cells[0]
    assert bookkit.BOOTSTRAP_TAG in cell.metadata.get("tags", []), (
        f"{where(path, 0, cell)}: the Colab set-up cell must be tagged {bookkit.BOOTSTRAP_TAG!r}")
    expected = bookkit.bootstrap_source()
    assert bookkit.cell_source(cell).strip() == expected.strip(), (
        f"{where(path, 0, cell)} is not the canonical Colab set-up cell for "
        f"{bookkit.repository_url()} (run scripts/set_repository_url.py, or copy it from README)")


NOOP_CHECK = r'''
import os, subprocess, sys
calls = []
def forbid(name):
    def fail(*args, **kwargs):
        calls.append(name)
        raise AssertionError(f"the Colab set-up cell called {name} outside Colab: {args!r}")
    return fail
for name in ("run", "call", "check_call", "check_output", "Popen"):
    setattr(subprocess, name, forbid("subprocess." + name))
os.system = forbid("os.system")
before = set(sys.modules)
exec(compile(sys.stdin.read(), "<colab set-up cell>", "exec"), {"__name__": "__main__"})
new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in {"pip", "google"})
assert not calls and not new, (calls, new)
print("NOOP-OK")
'''

COLAB_CHECK = r'''
import subprocess, sys, types
calls = []
subprocess.run = lambda args, **kw: calls.append(("pip", list(args)))
google = types.ModuleType("google"); colab = types.ModuleType("google.colab")
output = types.ModuleType("google.colab.output")
output.enable_custom_widget_manager = lambda: calls.append(("widgets",))
colab.output = output; google.colab = colab
sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": output})
exec(compile(sys.stdin.read(), "<colab set-up cell>", "exec"), {"__name__": "__main__"})
import json; print(json.dumps(calls))
'''


def run_cell_in_subprocess(source: str, harness: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", harness], input=source, text=True,
                          capture_output=True, timeout=60, cwd=ROOT / "chapters")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell_is_noop_outside_colab(path):
    nb = load(path)
    _, cell = bookkit.code_cells(nb)[0]
    result = run_cell_in_subprocess(bookkit.cell_source(cell), NOOP_CHECK)
    assert result.returncode == 0 and "NOOP-OK" in result.stdout, (
        f"{where(path, 0, cell)} is not a no-op outside Colab:\n{result.stdout}{result.stderr}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell_installs_library_in_colab(path):
    nb = load(path)
    _, cell = bookkit.code_cells(nb)[0]
    result = run_cell_in_subprocess(bookkit.cell_source(cell), COLAB_CHECK)
    assert result.returncode == 0, f"{where(path, 0, cell)} failed in a simulated Colab:\n" \
                                   f"{result.stderr}"
    calls = json.loads(result.stdout.strip().splitlines()[-1])
    pip = [c[1] for c in calls if c[0] == "pip"]
    assert len(pip) == 1 and pip[0][1:4] == ["-m", "pip", "install"], (
        f"{where(path, 0, cell)}: expected one `pip install` in Colab, got {calls}")
    spec = f"transformer_lib[widgets,hf] @ git+{bookkit.repository_url()}"
    assert spec in pip[0], f"{where(path, 0, cell)}: pip must install {spec!r}, got {pip[0]}"
    assert ["widgets"] in calls, f"{where(path, 0, cell)}: must enable Colab's widget manager"


EXERCISE = re.compile(r"^(`{3,}|:{3,})\{(exercise|exercise-start)\}", re.MULTILINE)
EXERCISE_LABEL = re.compile(r"^(`{3,}|:{3,})\{(?:exercise|exercise-start)\}[^\n]*\n"
                            r"(?::[a-z-]+:[^\n]*\n)*?:label:\s*(\S+)", re.MULTILINE)
SOLUTION = re.compile(r"^(`{3,}|:{3,})\{(?:solution|solution-start)\}\s*(\S+)", re.MULTILINE)


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_exercises(path):
    """At least three exercises, labelled ex-NN-..., each with a solution."""
    nb = load(path)
    text = markdown_text(nb)
    count = len(EXERCISE.findall(text))
    assert count >= MIN_EXERCISES, (
        f"{bookkit.relative(path)} has {count} exercise(s); a chapter needs {MIN_EXERCISES}")
    labels = [m.group(2) for m in EXERCISE_LABEL.finditer(text)]
    assert len(labels) == count, f"{bookkit.relative(path)}: every exercise needs a :label:"
    prefix = f"ex-{bookkit.chapter_number(path):02d}-"
    bad = [label for label in labels if not label.startswith(prefix)]
    assert not bad, f"{bookkit.relative(path)}: exercise labels must start with {prefix}: {bad}"
    solved = {m.group(2) for m in SOLUTION.finditer(text)}
    missing = [label for label in labels if label not in solved]
    assert not missing, f"{bookkit.relative(path)}: exercises without a solution: {missing}"


CLAIM_KEY = re.compile(r"^claim_(\d\d)_([a-z0-9]+(?:_[a-z0-9]+)*)_(text|value|verdict)$")
CLAIM_PARTS = {"text", "value", "verdict"}


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_claims_convention(path):
    """Claims of the ledger (transformer_lib.ledger.record_claim): for each claim the keys
    claim_NN_<name>_text, _value and _verdict, NN the chapter's number, and a verdict from
    confirmed / nuanced / corrected."""
    nb = load(path)
    values = {k: v for k, v in glued(nb).items() if k.startswith("claim_")}
    number = f"{bookkit.chapter_number(path):02d}"
    parts: dict[str, set[str]] = {}
    for key, text in values.items():
        match = CLAIM_KEY.match(key)
        assert match and match.group(1) == number, (
            f"{bookkit.relative(path)}: glued key {key!r} must be claim_{number}_<name>_text, "
            f"_value or _verdict (use transformer_lib.ledger.record_claim)")
        parts.setdefault(match.group(2), set()).add(match.group(3))
        if match.group(3) == "verdict":
            verdict = text.strip().strip("'\"")
            assert verdict in VERDICTS, (
                f"{bookkit.relative(path)}: {key} is {verdict!r}, expected one of {sorted(VERDICTS)}")
    incomplete = {name: sorted(CLAIM_PARTS - got) for name, got in parts.items() if got != CLAIM_PARTS}
    assert not incomplete, f"{bookkit.relative(path)}: claims missing parts: {incomplete}"
    labels = set(re.findall(r"^\(claim-([a-z0-9-]+)\)=", markdown_text(nb), re.MULTILINE))
    unlabelled = [name for name in parts if f"{number}-{name.replace('_', '-')}" not in labels]
    assert not unlabelled, (
        f"{bookkit.relative(path)}: put the label (claim-{number}-<name>)= above the section that "
        f"tests each claim; missing for {unlabelled}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_widget_state_is_saved(path):
    """A stored widget view needs its state in the notebook metadata to render in the HTML."""
    nb = load(path)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for number, (_, cell) in enumerate(bookkit.code_cells(nb)):
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                assert view["model_id"] in state, (
                    f"{where(path, number, cell)} shows a widget whose state is not saved: "
                    "execute with scripts/run_chapter.py (store_widget_state=True)")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_prose_has_no_unresolved_placeholders(path):
    nb = load(path)
    text = markdown_text(nb)
    for marker in ("TODO", "FIXME", "XXX", "{{ "):
        assert marker not in text, f"{bookkit.relative(path)}: markdown contains {marker!r}"


# --------------------------------------------------------------------------- paired sources
def paired_sources():
    pairs = []
    for md in sorted(bookkit.CHAPTERS_DIR.glob("*.md")):
        head = md.read_text(encoding="utf-8")[:400]
        if head.startswith("---") and "jupytext" in head:
            pairs.append(md)
    return pairs


@pytest.mark.parametrize("md", paired_sources(), ids=lambda p: p.name)
def test_paired_source_in_sync(md):
    """A jupytext MyST pair (optional) must have the same cells as its notebook."""
    import jupytext

    ipynb = md.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{bookkit.relative(md)} is paired with a missing {ipynb.name}"
    text = jupytext.read(md)
    nb = nbformat.read(ipynb, as_version=4)

    def cells(notebook):
        return [(c.cell_type, bookkit.cell_source(c).strip()) for c in notebook.cells]

    assert cells(text) == cells(nb), (
        f"{bookkit.relative(md)} is out of sync with {ipynb.name}: run "
        f"`jupytext --sync {bookkit.relative(ipynb)}`")


# --------------------------------------------------------------------------- API reference
def test_api_page_lists_every_library_module():
    """api.md documents each public module of transformer_lib, one line each."""
    text = (ROOT / "api.md").read_text(encoding="utf-8")
    block = re.search(r"\.\. api-modules::\s*\n((?:\s*\n|[ \t]+\S[^\n]*\n)*)", text)
    assert block, "api.md must contain an `.. api-modules::` directive"
    listed = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    modules = sorted(p.stem for p in (ROOT / "transformer_lib").glob("*.py")
                     if not p.stem.startswith("_"))
    missing = sorted(set(modules) - set(listed))
    extra = sorted(set(listed) - set(modules))
    assert not missing, f"api.md: add these transformer_lib modules to api-modules: {missing}"
    assert not extra, f"api.md lists modules that do not exist: {extra}"
