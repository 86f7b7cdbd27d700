"""The student book (booktools/make_student_book.py, `make student-book`): the HTML book without solutions.

Builds the student book into a temporary folder (about a minute: execution is off, the stored outputs are used),
then checks that no solution survives, neither its text nor its code, in any chapter page nor in the notebook its
download button serves; that the exercises and their starters are there; that the download and launch buttons
open the student notebooks; and loads the introduction and every chapter in headless Chromium (the page loads,
no JavaScript error, MathJax typeset the math, embedded widgets were rendered), as tests/test_browser.py does for
the main book.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from test_browser import chromium_path  # noqa: E402  (tests/ is on sys.path under pytest)
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
from booktools import exercisekit as ek  # noqa: E402
from booktools import make_student_book  # noqa: E402
from booktools import notebooks  # noqa: E402

pytestmark = pytest.mark.slow

REPO = "my-course/transformers-exercises"
CHAPTERS = [p for p in notebooks.toc_chapters() if p.is_file()]
COURSE_COMMIT = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.strip()
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student-book")
    return make_student_book.build(out, repo=REPO, quiet=True, course_ref=COURSE_COMMIT)


def page(book: Path, chapter: Path) -> BeautifulSoup:
    return BeautifulSoup((book / "chapters" / f"{chapter.stem}.html").read_text(encoding="utf-8"), "html.parser")


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def solution_lines(chapter: Path) -> list[str]:
    """Lines (20 characters or more) that only the solutions of the chapter hold (whitespace normalised; a line
    the chapter's body also holds is not a solution's: tests/test_editions.py checks that the body does not
    answer an autograded exercise)."""
    original = notebooks.read_notebook(chapter)
    lines = [normalise(line) for ex in ek.find_exercises(chapter, original) for _, block in ex.solution_blocks
             for line in block.splitlines()]
    starters = normalise("\n".join(notebooks.cell_source(c) for c in ek.strip_solutions(original)[0].cells
                                   if ek.STARTER_TAG in notebooks.cell_tags(c)))
    everything = normalise("\n".join(notebooks.cell_source(c) for c in original.cells))
    return [line for line in dict.fromkeys(lines) if len(line) >= 20 and line not in starters
            and everything.count(line) == lines.count(line) and not line.startswith(("```", ":::", ":class:"))]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_solution_in_the_page_or_its_notebook(book, chapter):
    document = page(book, chapter)
    assert not document.select("div.solution"), f"{chapter.stem}: a solution is rendered"
    text = normalise(document.get_text(" "))
    source = book / "_sources" / "chapters" / f"{chapter.stem}.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    nb_text = normalise("\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                                  for c in nb["cells"]))
    leaked = [line for line in solution_lines(chapter) if normalise(line) in text or normalise(line) in nb_text]
    assert not leaked, f"{chapter.stem}: solution lines in the student book: {leaked[:5]}"
    assert not re.search(r"\{solution(-start|-end)?\}", nb_text)
    assert not any("solution" in (c.get("metadata", {}).get("tags") or []) for c in nb["cells"])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_exercises_and_starters_are_there(book, chapter):
    document = page(book, chapter)
    html = str(document)
    exercises = ek.find_exercises(chapter)
    assert len(document.select("div.exercise")) == len(exercises)
    for ex in exercises:
        assert f'id="{ex.label}"' in html, ex.label
        if ex.autograded:
            assert "NotImplementedError" in html, f"{ex.label}: no starter"
    assert document.select("img"), f"{chapter.stem}: the stored figures are kept"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_buttons_open_the_student_notebooks(book, chapter):
    hrefs = [a["href"] for a in page(book, chapter).select("a[href]")]
    download = [h for h in hrefs if "_sources/" in h]
    assert download == [f"../_sources/chapters/{chapter.stem}.ipynb"], download
    colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/")]
    assert colab == [f"https://colab.research.google.com/github/{REPO}/blob/main/chapters/{chapter.stem}.ipynb"]
    book_repo = notebooks.github_repo()
    assert not [h for h in hrefs if book_repo in h], "a link to the book's own repository (it has the solutions)"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_downloaded_notebook_reads_like_the_book(book, chapter):
    """The download button serves the student edition's notebook: no raw MyST (tests/test_colab_edition.py's check),
    cross-references to the student book, the set-up cell at the course's version; the footer names it."""
    from booktools import colab

    nb = notebooks.read_notebook(book / "_sources" / "chapters" / f"{chapter.stem}.ipynb")
    problems = [raw for c in nb.cells if c.cell_type == "markdown" for raw in colab.raw_myst(c.source)]
    assert not problems, f"{chapter.stem}: raw MyST in the downloaded notebook: {problems[:10]}"
    assert ek.setup_cell_ref(nb.cells[1].source) == (notebooks.repository_url(), COURSE_COMMIT)
    owner, name = REPO.split("/")
    assert f"https://{owner}.github.io/{name}/chapters/{chapter.stem}.html" in nb.cells[0].source
    assert COURSE_COMMIT[:12] in page(book, chapter).get_text(" ")


def test_instructor_guide_left_out(book):
    assert not (book / "instructor_guide.html").exists()
    assert (book / "index.html").is_file() and (book / "claims.html").is_file()


# ----------------------------------------------------------------------------- in Chromium
@pytest.fixture(scope="module")
def chromium():
    path = chromium_path()
    if path is None:
        if os.environ.get("BOOK_REQUIRE_BUILD") == "1":
            pytest.fail("chromium is not installed: run `make browser`")
        pytest.skip("chromium is not installed: run `make browser`")
    return path


@pytest.fixture(scope="module")
def server(book):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(book)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("name", ["intro"] + [f"chapters/{p.stem}" for p in CHAPTERS])
def test_page_in_chromium(book, chromium, server, name):
    static = BeautifulSoup((book / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        result = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                 "--virtual-time-budget=20000", "--window-size=1280,2000", "--dump-dom",
                                 f"{server}/{name}.html"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = BeautifulSoup(result.stdout, "html.parser")
    title = static.find("h1").get_text(" ", strip=True).rstrip("#").strip()
    assert dom.find("h1") and title in dom.find("h1").get_text(" ", strip=True), f"{name}: page did not load"
    errors = [line for line in result.stderr.splitlines() if "CONSOLE" in line and re.search(r"Uncaught|Error:", line)]
    assert not errors, f"{name}: JavaScript errors:\n" + "\n".join(errors)
    math = static.select(".math")
    if math:
        assert len(dom.find_all("mjx-container")) >= len(math), f"{name}: MathJax did not typeset every formula"
    if static.select('script[type="application/vnd.jupyter.widget-view+json"]'):
        assert dom.select(".jupyter-widgets"), f"{name}: embedded widgets were not rendered"
    assert not dom.select("div.solution"), f"{name}: a solution in the rendered page"
