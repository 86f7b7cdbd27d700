"""The Colab edition (colab/NN_topic.ipynb, booktools/make_colab_edition.py, booktools/colab.py): in
sync with the chapters, plain markdown that Colab renders (no raw MyST), every glued number
resolved, solutions folded, and the book's Colab links open notebooks that exist.

After changing a chapter: `make colab` (or `.venv/bin/python -m booktools.make_colab_edition`).
"""

from __future__ import annotations

import base64
import re
import sys
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from booktools import colab, notebooks  # noqa: E402

CHAPTERS = [p for p in notebooks.toc_chapters() if p.is_file()]
GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`")
MAKE = "run `make colab` (booktools/make_colab_edition.py) and commit colab/"


@lru_cache(maxsize=None)
def generated(chapter: Path) -> str:
    """What booktools/make_colab_edition.py writes for ``chapter``."""
    return colab.render(colab.convert_chapter(chapter))


def edition(chapter: Path):
    path = colab.edition_path(chapter)
    if not path.is_file():
        pytest.fail(f"{notebooks.relative(path)} is missing: {MAKE}")
    return nbformat.read(path, as_version=4)


def chapter_id(path: Path) -> str:
    return path.stem


# --------------------------------------------------------------------------- in sync
@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_edition_in_sync(chapter):
    path = colab.edition_path(chapter)
    assert path.is_file(), f"{notebooks.relative(path)} is missing: {MAKE}"
    assert path.read_text(encoding="utf-8") == generated(chapter), (
        f"{notebooks.relative(path)} is out of date with {notebooks.relative(chapter)}: {MAKE}")


def test_edition_has_no_stray_notebooks():
    expected = {colab.edition_path(c) for c in CHAPTERS}
    extra = [notebooks.relative(p) for p in sorted(colab.EDITION_DIR.glob("*.ipynb")) if p not in expected]
    assert not extra, f"colab/ holds notebooks of no chapter of _toc.yml: {extra}: {MAKE}"


# --------------------------------------------------------------------------- what Colab shows
@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_no_raw_myst(chapter):
    nb = edition(chapter)
    problems = [f"cell {i}: {raw}" for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                for raw in colab.raw_myst(cell.source)]
    assert not problems, f"{notebooks.relative(colab.edition_path(chapter))}: raw MyST left:\n" + \
        "\n".join(problems[:20])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_every_glue_reference_resolved(chapter):
    """As many values of the book's run (bold, †) as {glue} roles in the chapter's prose."""
    source = notebooks.read_notebook(chapter)
    code_block = re.compile(r"(?ms)^\s*(`{3,}|~{3,})(?!`*\s*\{)[^\n]*\n.*?^\s*\1\s*$")
    roles = sum(len(GLUE_ROLE.findall(code_block.sub("", notebooks.cell_source(cell))))
                for cell in source.cells
                if cell.cell_type == "markdown" and notebooks.BOOTSTRAP_TAG not in notebooks.cell_tags(cell))
    nb = edition(chapter)
    text = "\n".join(c.source for c in nb.cells[1:] if c.cell_type == "markdown")
    assert "{glue" not in text
    assert text.count(colab.BOOK_RUN_MARK) == roles, (
        f"{notebooks.relative(chapter)}: {roles} glue roles, {text.count(colab.BOOK_RUN_MARK)} values "
        "of the book's run in the Colab edition")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_top_cell_and_setup_cell(chapter):
    nb = edition(chapter)
    top = nb.cells[0]
    page = f"{notebooks.html_baseurl()}chapters/{chapter.stem}.html"
    assert top.cell_type == "markdown" and top.source.startswith("# ") and page in top.source, top.source
    assert "book's run" in top.source and "name = value" in top.source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == notebooks.bootstrap_source(), (
        f"{notebooks.relative(colab.edition_path(chapter))}: the first code cell must be the Colab set-up "
        f"cell of booktools/notebooks.py: {MAKE}")
    others = [c for c in code[1:] if notebooks.BOOTSTRAP_MARKER in c.source]
    assert not others, "the chapter's own set-up cell must not be copied"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_code_cells_and_outputs_kept(chapter):
    """Every code cell of the chapter that the book shows is in the edition, with its stored outputs."""
    source = notebooks.read_notebook(chapter)
    kept = [c for c in source.cells if c.cell_type == "code"
            and notebooks.BOOTSTRAP_TAG not in notebooks.cell_tags(c)]
    copied = [c for c in edition(chapter).cells if c.cell_type == "code"][1:]
    assert len(copied) == len(kept)
    for original, copy in zip(kept, copied):
        shown = notebooks.reader_source(original.source)
        if notebooks.CHECKS_TAG in notebooks.cell_tags(original) and not copy.source.startswith(colab.FORM_TITLE):
            shown = notebooks.checks_form_title(shown) + "\n" + shown   # a checks cell outside a solution
        assert copy.source.removeprefix(colab.FORM_TITLE + "\n") == shown
        assert copy.outputs == original.outputs


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_test_harness_is_out_of_sight(chapter):
    """The nbval tolerance declarations stay in the book's notebooks (nbval reads them) but not in what a
    reader runs in Colab; every other line of the code is there."""
    for cell in edition(chapter).cells:
        if cell.cell_type == "code":
            assert "nbval-tolerance" not in cell.source, cell.source[:200]


HARNESS_CALL = re.compile(r"\b(glue|glue_text|record_claim|record_erratum)\(")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_checks_cells_are_folded(chapter):
    """What a chapter computes only for its prose and its ledger (glued figures, verdict rules, the claims
    ledger) sits in checks cells: the book folds their code, the Colab edition shows them in form view under a
    title that says what they do, and every other cell is the experiment a reader follows."""
    source = notebooks.read_notebook(chapter)
    shown = [c for c in source.cells if c.cell_type == "code" and notebooks.BOOTSTRAP_TAG not in notebooks.cell_tags(c)
             and "solution" not in notebooks.cell_tags(c)]
    visible = [c for c in shown if notebooks.CHECKS_TAG not in notebooks.cell_tags(c)]
    leaks = [c.source.split("\n")[0][:80] for c in visible if HARNESS_CALL.search(c.source)]
    assert not leaks, f"cells that glue or record a claim without the {notebooks.CHECKS_TAG!r} tag: {leaks}"
    checks = [c for c in shown if notebooks.CHECKS_TAG in notebooks.cell_tags(c)]
    copied = {c.source.split("\n", 1)[1]: c for c in edition(chapter).cells
              if c.cell_type == "code" and c.metadata.get("cellView") == "form"}
    for cell in checks:
        copy = copied.get(notebooks.reader_source(cell.source))
        assert copy is not None, f"checks cell not folded in the Colab edition: {cell.source[:120]}"
        title = copy.source.split("\n")[0]
        # inside a solution, the cell folds with the solution's code under the solution's title
        assert title in (notebooks.checks_form_title(cell.source), colab.FORM_TITLE), title


def test_checks_form_title_says_what_the_cell_does():
    assert "claims ledger" in notebooks.checks_form_title('_ = record_claim("01_x", "c", "v", "confirmed")')
    assert "claims ledger" not in notebooks.checks_form_title('glue_text("c01_n", "3")')


def test_reader_source_removes_only_the_harness():
    source = "# nbval-tolerance: abs=0.1  (spread)\n# nbval-tolerance[c01_*]: rel=0.2\n\nx = 1  # a comment\nprint(x)"
    assert notebooks.reader_source(source) == "x = 1  # a comment\nprint(x)"
    assert notebooks.reader_source("x = 1\n    # nbval-tolerance: abs=1\ny = 2") == "x = 1\ny = 2"
    assert notebooks.reader_source("x = 1") == "x = 1"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_exercises_and_folded_solutions(chapter):
    nb = edition(chapter)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    number = notebooks.chapter_number(chapter)
    assert f"### Exercise {number}.1" in text and f"### Exercise {number}.3" in text
    assert "<details><summary>Solution</summary>" in text
    assert text.count("<details>") == text.count("</details>")
    source = notebooks.read_notebook(chapter)
    solution_code = [c for c in source.cells if "solution" in notebooks.cell_tags(c)]
    folded = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("cellView") == "form"
              and not c.source.startswith("# @title Checks")]
    assert len(folded) >= len(solution_code)
    for cell in folded:
        assert cell.source.startswith(colab.FORM_TITLE + "\n")


# --------------------------------------------------------------------------- the book's Colab links
@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_book_colab_link_opens_edition(chapter):
    """booktools/book_html.py rewrites the launch button that sphinx-book-theme builds from the page name."""
    from booktools import book_html

    docname = f"chapters/{chapter.stem}"
    theme_url = notebooks.colab_url(f"{docname}.ipynb")
    context = {"header_buttons": [{"type": "group", "buttons": [{"type": "link", "url": theme_url}]}]}
    book_html.colab_edition_links(None, docname, "page.html", context, None)
    url = context["header_buttons"][0]["buttons"][0]["url"]
    assert url == notebooks.colab_url(f"colab/{chapter.name}"), url
    assert (ROOT / "colab" / chapter.name).is_file(), f"the Colab link opens a missing colab/{chapter.name}"


# --------------------------------------------------------------------------- the converter
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


def _synthetic_chapter(tmp_path: Path) -> Path:
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    glue_output = new_output("display_data", data={
        notebooks.GLUE_PREFIX + "text/plain": "'0.25'"}, metadata={"scrapbook": {"name": "c99_x",
                                                                                  "mime_prefix": notebooks.GLUE_PREFIX}})
    fig_output = new_output("display_data", data={notebooks.GLUE_PREFIX + "image/png": PIXEL,
                                                  notebooks.GLUE_PREFIX + "text/plain": "<Figure>"},
                            metadata={"scrapbook": {"name": "c99_fig", "mime_prefix": notebooks.GLUE_PREFIX}})
    float_output = new_output("display_data", data={notebooks.GLUE_PREFIX + "text/plain": "0.123456"},
                              metadata={"scrapbook": {"name": "c99_f", "mime_prefix": notebooks.GLUE_PREFIX}})
    cells = [
        new_code_cell("# Colab set-up (old)\nimport sys", metadata={"tags": ["remove-cell"]}),
        new_markdown_cell("(ch-test)=\n# A test chapter\n\nSee {cite:p}`vaswani2017attention` and "
                          "{cite:t}`bahdanau2015neural`; {term}`self-attention` and "
                          "{func}`~transformer_lib.attention.attention_reference`; literal "
                          "`` {glue:text}`not_a_role` `` stays code."),
        new_code_cell("x = 1", outputs=[glue_output, fig_output, float_output], execution_count=1),
        new_code_cell("hidden = 2", metadata={"tags": ["remove-cell"]}),
        new_markdown_cell("The value is {glue:text}`c99_x` and {glue:text}`c99_f:.2f`.\n\n"
                          ":::{note}\nA note with $x^2$.\n:::\n\n"
                          "```{glue:figure} c99_fig\n:name: fig-test\nThe caption.\n```\n\n"
                          "$$\na = b\n$$ (eq-test)\n\n% a comment\n\n"
                          "```python\n{glue:text}`inside_code`\n```"),
        new_markdown_cell("## Exercises\n\n:::{exercise} First\n:label: ex-99-first\n\nDo it.\n:::\n\n"
                          ":::{solution} ex-99-first\n:class: dropdown\nDone.\n:::\n\n"
                          "::::{exercise} Second\n:label: ex-99-second\n\nWrite code.\n::::\n\n"
                          "::::{solution-start} ex-99-second\n:class: dropdown\n::::\n\nExplanation."),
        new_code_cell("def f():\n    return 1", metadata={"tags": ["solution", "ex-99-second"]}),
        new_markdown_cell("More words.\n\n::::{solution-end}\n::::\n\nAfter the solution."),
    ]
    path = tmp_path / "chapters" / "99_test.ipynb"
    path.parent.mkdir()
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3",
                                                                       "display_name": "Python 3",
                                                                       "language": "python"}}), path)
    return path


def test_converter_on_a_synthetic_chapter(tmp_path):
    nb = colab.convert_chapter(_synthetic_chapter(tmp_path))
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n\n".join(c.source for c in md)
    base = notebooks.html_baseurl()
    assert md[0].source.startswith("# 99. A test chapter")
    assert code[0].source == notebooks.bootstrap_source()
    assert [c.source for c in code[1:]] == ["x = 1", colab.FORM_TITLE + "\ndef f():\n    return 1"]
    assert code[2].metadata["cellView"] == "form"
    assert '<a id="ch-test"></a>' in text and "\n# A test chapter" not in text
    assert "(Vaswani et al., 2017)" in text and "Bahdanau et al. (2015)" in text
    assert f"[self-attention]({base}glossary.html#term-Self-attention)" in text
    assert (f"[`attention_reference()`]({base}api/transformer_lib.attention.html"
            "#transformer_lib.attention.attention_reference)") in text
    assert "`` {glue:text}`not_a_role` ``" in text, "a code span must stay as it is"
    assert f"**0.25**{colab.BOOK_RUN_MARK}" in text and f"**0.12**{colab.BOOK_RUN_MARK}" in text
    assert "> **Note.**\n>\n> A note with $x^2$." in text
    assert '<a id="fig-test"></a>\n![The caption.](attachment:c99_fig.png)' in text
    figure_cell = next(c for c in md if "attachment:c99_fig.png" in c.source)
    assert figure_cell.attachments["c99_fig.png"]["image/png"] == PIXEL
    assert '<a id="eq-test"></a>\n$$\na = b\n$$' in text and "a comment" not in text
    assert "```python\n{glue:text}`inside_code`\n```" in text, "code blocks stay as they are"
    assert '<a id="ex-99-first"></a>\n### Exercise 99.1: First\n\nDo it.' in text
    assert "<details><summary>Solution</summary>\n\nDone.\n\n</details>" in text
    assert "### Exercise 99.2: Second" in text and "#### Solution (code)" in text
    assert "<details><summary>Solution</summary>\n\nExplanation.\n\n</details>" in text
    assert "<details><summary>Solution</summary>\n\nMore words.\n\n</details>\n\nAfter the solution." in text
    assert "hidden = 2" not in [c.source for c in code]
    for cell in md:
        assert not colab.raw_myst(cell.source), (cell.source, colab.raw_myst(cell.source))


def test_converter_rejects_unknown_glue_key(tmp_path):
    path = _synthetic_chapter(tmp_path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[4].source += "\n\nAnd {glue:text}`c99_missing`."
    nbformat.write(nb, path)
    with pytest.raises(colab.ConversionError, match="c99_missing"):
        colab.convert_chapter(path)


def test_raw_myst_detector():
    assert colab.raw_myst("left {glue:text}`x` over")
    assert colab.raw_myst(":::{note}\nx\n:::")
    assert colab.raw_myst("```{figure} a.png\n```")
    assert colab.raw_myst("(my-label)=\n# Title")
    assert not colab.raw_myst("a `{glue:text}` in code, $\\mathbb{R}^{n}$ and\n```python\n{x}`y`\n```")


# --------------------------------------------------------------------------- changing the URL
def test_set_repository_url_updates_every_copy(tmp_path):
    """booktools/set_repository_url.py, run in a copy of the book: _config.yml (URL and html.baseurl),
    every chapter's set-up cell and the Colab edition follow the new URL; --check then passes."""
    import shutil
    import subprocess

    for name in ("_config.yml", "_toc.yml", "references.bib", "chapters", "colab", "booktools"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tmp_path / name)
    for page in ROOT.glob("*.md"):
        shutil.copy2(page, tmp_path / page.name)
    script = [sys.executable, "-m", "booktools.set_repository_url"]   # the copy's booktools: run from the copy
    run = subprocess.run(script + ["https://github.com/Some-Org/my-book"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    config = (tmp_path / "_config.yml").read_text(encoding="utf-8")
    assert "url: &repository_url https://github.com/Some-Org/my-book\n" in config
    assert "baseurl: https://some-org.github.io/my-book/\n" in config
    for chapter in CHAPTERS:
        nb = nbformat.read(tmp_path / "chapters" / chapter.name, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert "git+https://github.com/Some-Org/my-book\"" in first.source
        assert first.source == notebooks.bootstrap_source("https://github.com/Some-Org/my-book")
        text = (tmp_path / "colab" / chapter.name).read_text(encoding="utf-8")
        assert "Some-Org/my-book" in text and "https://some-org.github.io/my-book/chapters/" in text
        assert "transformer-book/transformer-book" not in text
    check = subprocess.run(script + ["--check"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
