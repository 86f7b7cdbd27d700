"""Structural checks of the book's sources: the table of contents, each chapter notebook as
stored (executed, no errors, the Colab set-up cell, exercises, claims), and the API page.

These need no build; tests/test_built_book.py and tests/test_browser.py check the HTML.
Every failure message names the chapter and, where it applies, the cell.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import exercisekit, notebooks  # noqa: E402

CHAPTERS = notebooks.toc_chapters()
MIN_EXERCISES = 3
VERDICTS = {"confirmed", "nuanced", "corrected", "not testable at this budget"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def chapter_id(path: Path) -> str:
    return path.stem


def load(path: Path):
    if not path.is_file():
        pytest.fail(f"{notebooks.relative(path)} is listed in _toc.yml but does not exist")
    return nbformat.read(path, as_version=4)


def where(path: Path, number: int, cell) -> str:
    """'chapters/x.ipynb, code cell 3 ("first line")' (code cells numbered from 0, as nbval)."""
    first = notebooks.cell_source(cell).strip().splitlines()[:1]
    return f"{notebooks.relative(path)}, code cell {number} ({first[0][:60] if first else ''!r})"


def markdown_text(nb) -> str:
    return "\n".join(notebooks.cell_source(c) for c in nb.cells if c.cell_type == "markdown")


# --------------------------------------------------------------------------- table of contents
def test_toc_lists_chapters():
    assert CHAPTERS, "_toc.yml lists no chapter under chapters/"


@pytest.mark.parametrize("docname", notebooks.toc_docnames())
def test_toc_entry_exists(docname):
    candidates = [ROOT / f"{docname}{ext}" for ext in (".ipynb", ".md")]
    assert any(p.is_file() for p in candidates), (
        f"_toc.yml lists {docname!r}, but neither {docname}.ipynb nor {docname}.md exists")


def test_chapter_files_are_notebooks_in_order():
    numbers = [notebooks.chapter_number(p) for p in CHAPTERS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), (
        f"chapters in _toc.yml must be .ipynb files named NN_topic in increasing order: {numbers}")


# --------------------------------------------------------------------------- each chapter
@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_is_executed(path):
    """Stored with outputs from one clean top-to-bottom run: execution counts 1, 2, 3, ..."""
    nb = load(path)
    for number, (_, cell) in enumerate(notebooks.code_cells(nb)):
        assert cell.get("execution_count") == number + 1, (
            f"{where(path, number, cell)} has execution_count {cell.get('execution_count')}, "
            f"expected {number + 1}: re-run the chapter with booktools/run_chapter.py")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_has_no_error_output(path):
    nb = load(path)
    for number, (_, cell) in enumerate(notebooks.code_cells(nb)):
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", (
                f"{where(path, number, cell)} has a stored error: "
                f"{output.get('ename')}: {output.get('evalue')}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_kernel(path):
    nb = load(path)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{notebooks.relative(path)}: kernelspec must be python3")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell(path):
    """First code cell: the canonical Colab set-up cell for _config.yml's repository, hidden."""
    nb = load(path)
    cells = notebooks.code_cells(nb)
    assert cells, f"{notebooks.relative(path)} has no code cell"
    _, cell = cells[0]
    assert notebooks.BOOTSTRAP_TAG in cell.metadata.get("tags", []), (
        f"{where(path, 0, cell)}: the Colab set-up cell must be tagged {notebooks.BOOTSTRAP_TAG!r}")
    expected = notebooks.bootstrap_source()
    assert notebooks.cell_source(cell).strip() == expected.strip(), (
        f"{where(path, 0, cell)} is not the canonical Colab set-up cell for "
        f"{notebooks.repository_url()}: run booktools/set_repository_url.py (without an argument it "
        "rewrites the set-up cell of every chapter from the template in booktools/notebooks.py)")


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
import os, subprocess, sys, types
calls = []
returncode = int(os.environ.get("FAKE_PIP_RETURNCODE", "0"))
def fake_run(args, **kw):
    calls.append(("pip", list(args)))
    return subprocess.CompletedProcess(args, returncode, "Collecting transformer_lib\n",
                                       "ERROR: Repository not found (fake pip)\n")
subprocess.run = fake_run
google = types.ModuleType("google"); colab = types.ModuleType("google.colab")
output = types.ModuleType("google.colab.output")
output.enable_custom_widget_manager = lambda: calls.append(("widgets",))
colab.output = output; google.colab = colab
sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": output})
try:
    exec(compile(sys.stdin.read(), "<colab set-up cell>", "exec"), {"__name__": "__main__"})
except Exception as exc:
    calls.append(("raised", type(exc).__name__, str(exc)))
import json; print(json.dumps(calls))
'''


def run_cell_in_subprocess(source: str, harness: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != notebooks.SPEC_VARIABLE}
    return subprocess.run([sys.executable, "-c", harness], input=source, text=True,
                          capture_output=True, timeout=60, cwd=ROOT / "chapters", env={**environ, **env})


def simulated_colab(source: str, **env) -> tuple[list, str]:
    """Run a set-up cell in a simulated Colab (fake pip): the calls it made and what it printed."""
    result = run_cell_in_subprocess(source, COLAB_CHECK, **env)
    assert result.returncode == 0, f"the harness failed:\n{result.stderr}"
    *printed, last = result.stdout.strip().splitlines()
    return json.loads(last), "\n".join(printed)


def check_installs(source: str, where_: str) -> None:
    calls, _ = simulated_colab(source)
    pip = [c[1] for c in calls if c[0] == "pip"]
    assert len(pip) == 1 and pip[0][1:4] == ["-m", "pip", "install"], (
        f"{where_}: expected one `pip install` in Colab, got {calls}")
    spec = f"transformer_lib[widgets,hf] @ git+{notebooks.repository_url()}"
    assert spec in pip[0], f"{where_}: pip must install {spec!r}, got {pip[0]}"
    assert not [c for c in calls if c[0] == "raised"], f"{where_} raised in a simulated Colab: {calls}"
    assert ["widgets"] in calls, f"{where_}: must enable Colab's widget manager"


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell_is_noop_outside_colab(path):
    nb = load(path)
    _, cell = notebooks.code_cells(nb)[0]
    result = run_cell_in_subprocess(notebooks.cell_source(cell), NOOP_CHECK)
    assert result.returncode == 0 and "NOOP-OK" in result.stdout, (
        f"{where(path, 0, cell)} is not a no-op outside Colab:\n{result.stdout}{result.stderr}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_bootstrap_cell_installs_library_in_colab(path):
    nb = load(path)
    _, cell = notebooks.code_cells(nb)[0]
    check_installs(notebooks.cell_source(cell), where(path, 0, cell))


# The template itself (booktools.notebooks.bootstrap_source), independently of the chapters.
def test_bootstrap_template_is_noop_outside_colab():
    result = run_cell_in_subprocess(notebooks.bootstrap_source(), NOOP_CHECK)
    assert result.returncode == 0 and "NOOP-OK" in result.stdout, result.stdout + result.stderr


def test_bootstrap_template_installs_library_in_colab():
    check_installs(notebooks.bootstrap_source(), "the set-up cell template")


def test_bootstrap_template_spec_override():
    """TRANSFORMER_BOOK_SPEC replaces git+<url> (the Colab simulation installs a local checkout)."""
    calls, _ = simulated_colab(notebooks.bootstrap_source(),
                               **{notebooks.SPEC_VARIABLE: "file:///tmp/checkout"})
    pip = [c[1] for c in calls if c[0] == "pip"]
    assert pip and pip[0][-1] == "transformer_lib[widgets,hf] @ file:///tmp/checkout", calls


def test_bootstrap_template_reports_pip_failure():
    """A failing pip is not silent: pip's own error is printed, then the cell raises with advice."""
    calls, printed = simulated_colab(notebooks.bootstrap_source(), FAKE_PIP_RETURNCODE="1")
    assert "ERROR: Repository not found (fake pip)" in printed, printed
    raised = [c for c in calls if c[0] == "raised"]
    assert raised and raised[0][1] == "RuntimeError", calls
    message = raised[0][2]
    assert notebooks.repository_url() in message and "run this cell again" in message, message
    assert ["widgets"] not in calls, "the widget manager must not be enabled after a failed install"


def test_bootstrap_template_url_written_once():
    """The set-up cell names the repository URL of _config.yml exactly once."""
    source = notebooks.bootstrap_source()
    assert source.count(notebooks.repository_url()) == 1, source
    assert source.startswith(notebooks.BOOTSTRAP_MARKER)


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_exercises(path):
    """At least three exercises, labelled ex-NN-..., each with a solution that says something (read by
    booktools.myst, the parser the book is built with)."""
    exercises = exercisekit.find_exercises(path, load(path))
    where = notebooks.relative(path)
    assert len(exercises) >= MIN_EXERCISES, (
        f"{where} has {len(exercises)} exercise(s); a chapter needs {MIN_EXERCISES}")
    unlabelled = [ex.title or f"cell {ex.cell}" for ex in exercises if ex.label == "?"]
    assert not unlabelled, f"{where}: every exercise needs a :label:, these have none: {unlabelled}"
    prefix = f"ex-{notebooks.chapter_number(path):02d}-"
    bad = [ex.label for ex in exercises if not ex.label.startswith(prefix)]
    assert not bad, f"{where}: exercise labels must start with {prefix}: {bad}"
    missing = [ex.label for ex in exercises if not any(text.strip() for _, text in ex.solution_blocks)]
    assert not missing, f"{where}: exercises without a solution: {missing}"


CLAIM_KEY = re.compile(r"^claim_(\d\d)_([a-z0-9]+(?:_[a-z0-9]+)*)_(text|value|verdict|adequacy)$")
CLAIM_PARTS = {"text", "value", "verdict"}


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_chapter_claims_convention(path):
    """Claims of the ledger (transformer_lib.ledger.record_claim): for each claim the keys
    claim_NN_<name>_text, _value and _verdict, NN the chapter's number, and a verdict from
    confirmed / nuanced / corrected."""
    nb = load(path)
    values = {k: v for k, v in notebooks.glued_values(nb).items() if k.startswith("claim_")}
    number = f"{notebooks.chapter_number(path):02d}"
    parts: dict[str, set[str]] = {}
    for key, text in values.items():
        match = CLAIM_KEY.match(key)
        assert match and match.group(1) == number, (
            f"{notebooks.relative(path)}: glued key {key!r} must be claim_{number}_<name>_text, "
            f"_value, _verdict or _adequacy (use transformer_lib.ledger.record_claim)")
        parts.setdefault(match.group(2), set()).add(match.group(3))
        if match.group(3) == "verdict":
            verdict = text.strip()
            assert verdict in VERDICTS, (
                f"{notebooks.relative(path)}: {key} is {verdict!r}, expected one of {sorted(VERDICTS)}")
    failed = sorted(key for key, text in values.items() if key.endswith("_adequacy") and text.strip().startswith("✗")
                    and values.get(key[: -len("adequacy")] + "verdict", "").strip() != "not testable at this budget")
    assert not failed, (f"{notebooks.relative(path)}: claims whose models fail their adequacy check must have the "
                        f"verdict 'not testable at this budget': {failed}")
    incomplete = {name: sorted(CLAIM_PARTS - got) for name, got in parts.items() if not CLAIM_PARTS <= got}
    assert not incomplete, f"{notebooks.relative(path)}: claims missing parts: {incomplete}"
    labels = set(re.findall(r"^\(claim-([a-z0-9-]+)\)=", markdown_text(nb), re.MULTILINE))
    unlabelled = [name for name in parts if f"{number}-{name.replace('_', '-')}" not in labels]
    assert not unlabelled, (
        f"{notebooks.relative(path)}: put the label (claim-{number}-<name>)= above the section that "
        f"tests each claim; missing for {unlabelled}")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_widget_state_is_saved(path):
    """A stored widget view needs its state in the notebook metadata to render in the HTML."""
    nb = load(path)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for number, (_, cell) in enumerate(notebooks.code_cells(nb)):
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                assert view["model_id"] in state, (
                    f"{where(path, number, cell)} shows a widget whose state is not saved: "
                    "execute with booktools/run_chapter.py (store_widget_state=True)")


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_prose_has_no_unresolved_placeholders(path):
    nb = load(path)
    text = markdown_text(nb)
    for marker in ("TODO", "FIXME", "XXX", "{{ "):
        assert marker not in text, f"{notebooks.relative(path)}: markdown contains {marker!r}"


CAPPED_RUN_MACHINERY = re.compile(r"BOOK_MAX_STEPS|BOOK_SMOKE|\bsmoke\b", re.IGNORECASE)


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_cells_show_no_capped_run_machinery(path):
    """The capped CI run of the GPU branch is test machinery: its sizes live in tests/smoke_settings.py, not in
    the cells a reader reads (BOOK_SETTINGS, which a reader may set, is fine)."""
    nb = load(path)
    for number, (_, cell) in enumerate(notebooks.code_cells(nb)):
        if "remove-cell" in cell.metadata.get("tags", []):
            continue
        found = CAPPED_RUN_MACHINERY.search(notebooks.cell_source(cell))
        assert not found, (f"{where(path, number, cell)} mentions {found[0]!r}: the capped run's settings belong "
                           "in tests/smoke_settings.py")


CHAPTER_DURATION = re.compile(r"(?:chapter|notebook|page)\s+runs\s+(?:in|within)\b[^\n]*?"
                              r"(?:minute|second|\d\s*s\b)", re.IGNORECASE)


@pytest.mark.parametrize("path", CHAPTERS, ids=chapter_id)
def test_cells_state_no_chapter_duration(path):
    """How long a chapter runs is measured (`make times`, the README), not written into its cells: such a sentence
    is a figure no cell computes, and it goes stale (three said "well under a minute" of chapters that took 72 to
    337 s on the machine that stored them)."""
    nb = load(path)
    for number, (_, cell) in enumerate(notebooks.code_cells(nb)):
        found = CHAPTER_DURATION.search(notebooks.cell_source(cell))
        assert not found, f"{where(path, number, cell)} states how long the chapter runs: {found[0]!r}"
    found = CHAPTER_DURATION.search(markdown_text(nb))
    assert not found, f"{notebooks.relative(path)}: the prose states how long the chapter runs: {found[0]!r}"


def test_smoke_settings_name_chapters_and_their_settings():
    """Every entry of tests/smoke_settings.py is a chapter of the book and names only settings that chapter has
    (test-colab would fail on an unknown key too, but only after minutes)."""
    from smoke_settings import SMOKE

    stems = {p.stem: p for p in CHAPTERS}
    for stem, overrides in SMOKE.items():
        assert stem in stems, f"tests/smoke_settings.py names {stem!r}, which is not a chapter of _toc.yml"
        source = notebooks.cell_source(notebooks.code_cells(load(stems[stem]))[1][1])
        if "tl.presets." in source:  # settings kept in the library (chapter 11's, shared with a benchmark)
            source += (ROOT / "transformer_lib" / "presets.py").read_text(encoding="utf-8")
        for key in overrides:
            assert re.search(rf"\b{key}=|\"{key}\":", source), (
                f"tests/smoke_settings.py: {key!r} is not a setting of {stem} (its settings cell has no {key}=)")


# --------------------------------------------------------------------------- API reference
def test_api_reference_walks_the_library():
    """api.md lists no module by hand: its `package-modules` table (booktools/api_modules.py) walks transformer_lib, and
    the page generated for a package (_templates/autosummary/module.rst) walks its own modules, so the walk reaches
    every module file of the library. (tests/test_built_book.py checks the pages that the build made.)"""
    from booktools import api_modules

    tables = api_modules.tables_in(ROOT / "api.md")
    assert [package for package, _ in tables] == ["transformer_lib"], \
        "api.md must hold one `.. package-modules:: transformer_lib` table"
    assert {"toctree", "recursive"} <= set(tables[0][1]), "api.md's table needs :toctree: and :recursive:"
    assert not re.search(r"^[ \t]+(?:transformer_lib\.)?[a-z_]+(?:\.[a-z_]+)*[ \t]*$", (ROOT / "api.md").read_text(),
                         re.MULTILINE), "api.md lists module names by hand: the table finds them"
    template = (ROOT / "_templates" / "autosummary" / "module.rst").read_text(encoding="utf-8")
    assert re.search(r"^\.\. package-modules:: \{\{ fullname \}\}\n   :toctree:\n   :recursive:$", template,
                     re.MULTILINE), "a package's page must hold the table of its own modules"

    walked, todo = set(), ["transformer_lib"]
    while todo:  # the tables' walk: a package's table lists its modules, each subpackage's page its own
        for name in api_modules.public_modules(todo.pop()):
            walked.add(name)
            if (ROOT / name.replace(".", "/") / "__init__.py").is_file():
                todo.append(name)
    files = set()  # every public module file, a package by its __init__.py
    for path in (ROOT / "transformer_lib").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if len(parts) > 1 and not any(part.startswith("_") for part in parts):
            files.add(".".join(parts))
    assert walked == files, (f"module files that get no API page (in a folder without __init__.py?): "
                             f"{sorted(files - walked)}; pages of no module file: {sorted(walked - files)}")


def test_readme_library_example_runs():
    """The README's library example is real code: it runs here against the library (about 4 s)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(import torch\nimport transformer_lib as tl\n.*?)```", readme, re.S)
    assert len(blocks) == 1, "README.md should hold one library example starting 'import torch / import transformer_lib'"
    done = subprocess.run([sys.executable, "-c", blocks[0]], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, f"README.md's library example failed:\n{done.stderr[-2000:]}"
    assert "torch.Size([2, 4," in done.stdout, done.stdout  # the last line: cross-attention weights per head


def test_without_output_widgets_sends_nothing_to_the_kernel_mid_cell(tmp_path):
    """A client from notebooks.without_output_widgets executes an ipywidgets explorer with no Output-widget imitation:
    what the explorer prints lands in the cell's outputs, and no comm object could write to the shell channel."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import ipywidgets as widgets\n"
        "widgets.interactive(lambda n=1: print('value', n), n=widgets.IntSlider(value=3, min=1, max=5))")])
    client = notebooks.without_output_widgets(NotebookClient(nb, timeout=120, kernel_name="python3",
                                                             resources={"metadata": {"path": str(tmp_path)}}))
    client.execute()
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "value 3" in printed and client.comm_objects == {}
    imitating = NotebookClient(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(nb.cells[0].source)]),
                               timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    imitating.execute()
    assert imitating.comm_objects  # the default: an Output widget whose outputs nbclient keeps itself
