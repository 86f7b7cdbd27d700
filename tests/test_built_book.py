"""Checks of the built HTML book (_build/html): every chapter page exists, links to its
notebook of the Colab edition (colab/) in Colab, renders its exercises, glue and citations;
internal links resolve; the book's scripts and styles are served by the book itself (no CDN).

Needs `make build-strict` (or `make book`) first. Without a build these tests are skipped,
unless BOOK_REQUIRE_BUILD=1 (as `make test` sets), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
from booktools import notebooks  # noqa: E402

HTML = ROOT / "_build" / "html"
CHAPTERS = notebooks.toc_chapters()


@pytest.fixture(scope="module", autouse=True)
def built_book():
    if not (HTML / "index.html").is_file():
        message = "the book is not built: run `make build-strict` (or `make book`) first"
        if os.environ.get("BOOK_REQUIRE_BUILD") == "1":
            pytest.fail(message)
        pytest.skip(message)


@lru_cache(maxsize=None)
def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def page(chapter: Path) -> Path:
    return HTML / "chapters" / f"{chapter.stem}.html"


def chapter_id(path: Path) -> str:
    return path.stem


def html_pages() -> list[Path]:
    if not HTML.is_dir():
        return []
    return sorted(p for p in HTML.rglob("*.html") if "_static" not in p.parts
                  and "_sources" not in p.parts)


def article_text(document: BeautifulSoup, drop: str = "pre, code, script, style, .cell_output, .cell_input") -> str:
    """Text of the page's article without the elements the CSS selector `drop` matches (by default code, scripts
    and code cells with their outputs: the prose)."""
    article = document.find("article") or document
    clone = BeautifulSoup(str(article), "html.parser")
    for tag in clone.select(drop):
        tag.decompose()
    return clone.get_text(" ")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_page_built(chapter):
    assert page(chapter).is_file(), f"{notebooks.relative(chapter)}: no page {page(chapter)} built"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_has_colab_link(chapter):
    """The Colab button opens the chapter's notebook of the Colab edition (colab/NN_topic.ipynb),
    which exists in the repository."""
    target = notebooks.colab_edition_target(f"chapters/{chapter.stem}")
    expected = notebooks.colab_url(target)
    links = [a.get("href", "") for a in soup(page(chapter)).find_all("a")]
    assert expected in links, (
        f"{notebooks.relative(chapter)}: no Colab launch link {expected} in the page "
        f"(found: {[link for link in links if 'colab' in link]})")
    assert (ROOT / target).is_file(), (
        f"{notebooks.relative(chapter)}: the Colab link opens {target}, which does not exist: "
        "run `make colab`")


def test_every_colab_link_target_exists():
    """Every Colab link of every page opens a notebook of this repository (at the configured branch)."""
    prefix = notebooks.colab_url("")
    broken = []
    for path in html_pages():
        for a in soup(path).find_all("a"):
            href = a.get("href", "")
            if href.startswith(notebooks.COLAB_LINK_PREFIX):
                if not href.startswith(prefix):
                    broken.append(f"{path.relative_to(HTML)}: {href} (not {prefix}...)")
                elif not (ROOT / href[len(prefix):]).is_file():
                    broken.append(f"{path.relative_to(HTML)}: {href} (no such file in the repository)")
    assert not broken, "Colab links to missing notebooks:\n" + "\n".join(broken)


def test_colab_edition_links_land_on_the_book():
    """Every link of the Colab edition into the HTML book (glossary terms, sections, the API pages of library names)
    opens a page of this build at an anchor it has."""
    base = notebooks.html_baseurl()
    link = re.compile(r"\]\((" + re.escape(base) + r"[^)\s]+)\)")
    broken, checked = [], 0
    for edition in sorted(notebooks.COLAB_DIR.glob("*.ipynb")):
        for cell in nbformat.read(edition, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            for url in link.findall(cell.source):
                path, _, anchor = url[len(base):].partition("#")
                target = HTML / unquote(path)
                checked += 1
                if not target.is_file():
                    broken.append(f"{edition.name}: {url} (no page {path})")
                elif anchor and soup(target).find(id=unquote(anchor)) is None:
                    broken.append(f"{edition.name}: {url} (no anchor {anchor!r} on {path})")
    assert checked, "no link of the Colab edition into the book was found: the pattern is wrong"
    assert not broken, "links of the Colab edition that do not land:\n" + "\n".join(broken)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_hides_bootstrap_cell(chapter):
    text = soup(page(chapter)).get_text()
    assert notebooks.BOOTSTRAP_MARKER not in text, (
        f"{notebooks.relative(chapter)}: the Colab set-up cell is visible in the HTML "
        f"(tag it {notebooks.BOOTSTRAP_TAG!r})")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_hides_test_harness(chapter):
    """The nbval tolerance declarations of the cells are not shown to readers (booktools/book_html.py)."""
    text = soup(page(chapter)).get_text()
    assert "nbval-tolerance" not in text, (
        f"{notebooks.relative(chapter)}: a '# nbval-tolerance' line is visible in the HTML")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_folds_checks_cells(chapter):
    """Every checks cell (glued figures, verdict rules, the claims ledger) shows its output, its code folded
    behind a toggle (myst-nb's hide-input); no other cell is folded."""
    nb = nbformat.read(chapter, as_version=4)
    expected = [c for c in nb.cells if c.cell_type == "code" and notebooks.CHECKS_TAG in notebooks.cell_tags(c)]
    folded = soup(page(chapter)).select(f"div.cell.tag_{notebooks.CHECKS_TAG}")
    assert len(folded) == len(expected), (
        f"{notebooks.relative(chapter)}: {len(expected)} checks cells, {len(folded)} folded in the HTML")
    for cell in folded:
        toggle = cell.find("details", class_="above-input")
        assert toggle is not None and toggle.select_one(".cell_input") is not None, str(cell)[:300]
        assert cell.find("summary") is not None and "Show code cell source" in cell.find("summary").get_text()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_exercises_rendered(chapter):
    document = soup(page(chapter))
    exercises = document.select("div.exercise")
    solutions = document.select("div.solution")
    assert len(exercises) >= 3, f"{notebooks.relative(chapter)}: {len(exercises)} exercises rendered"
    assert len(solutions) >= len(exercises), f"{notebooks.relative(chapter)}: missing solutions"
    folded = [s for s in solutions if "dropdown" in s.get("class", [])]
    assert len(folded) == len(solutions), (
        f"{notebooks.relative(chapter)}: solutions must be folded (:class: dropdown)")
    unfolded = [c.get_text()[:60].strip() for c in document.select("div.cell")
                if "tag_solution" in c.get("class", []) and not c.find_parent("div", class_="solution")]
    assert not unfolded, (f"{notebooks.relative(chapter)}: solution code outside its dropdown (use the gated "
                          f"solution-start / solution-end directives around the cell): {unfolded}")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_roles_resolved(chapter):
    """No raw MyST left in the prose: every glue, citation, term and reference was resolved."""
    text = article_text(soup(page(chapter)))
    for raw in ("{glue", "{cite", "{term", "{ref", "{doc", "{numref", "```", ":::"):
        assert raw not in text, f"{notebooks.relative(chapter)}: unresolved {raw!r} in the page"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=chapter_id)
def test_chapter_widgets_embedded(chapter):
    """Widget views stored in the notebook are embedded with their state in the page."""
    nb = nbformat.read(chapter, as_version=4)
    views = sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                for c in nb.cells for o in c.get("outputs", []))
    document = soup(page(chapter))
    embedded = document.select('script[type="application/vnd.jupyter.widget-view+json"]')
    assert len(embedded) == views, (
        f"{notebooks.relative(chapter)}: {views} widget view(s) in the notebook, "
        f"{len(embedded)} embedded in the page")
    if views:
        assert document.select('script[type="application/vnd.jupyter.widget-state+json"]'), (
            f"{notebooks.relative(chapter)}: widget state missing from the page")


def test_assets_are_served_by_the_book():
    """Scripts and stylesheets load from the book itself, never from a CDN."""
    remote = []
    for path in html_pages():
        for tag in soup(path).find_all(["script", "link"]):
            url = tag.get("src") if tag.name == "script" else (
                tag.get("href") if "stylesheet" in (tag.get("rel") or []) else None)
            if url and urlsplit(url).scheme in ("http", "https") or (url or "").startswith("//"):
                remote.append(f"{path.relative_to(HTML)}: {url}")
    assert not remote, "assets loaded from outside the book:\n" + "\n".join(remote)


def test_mathjax_and_widget_scripts_are_local():
    chapter_pages = [page(c) for c in CHAPTERS if page(c).is_file()]
    sources = [s.get("src", "") for p in chapter_pages for s in soup(p).find_all("script")]
    assert any("_static/mathjax/tex-chtml.js" in s for s in sources), "MathJax not served locally"
    for name in ("mathjax/tex-chtml.js", "widgets/require.js", "widgets/embed-amd.js"):
        assert (HTML / "_static" / name).is_file(), f"_build/html/_static/{name} missing"


@lru_cache(maxsize=None)
def ids_of(path: Path) -> frozenset[str]:
    document = soup(path)
    return frozenset(tag["id"] for tag in document.find_all(id=True)) | frozenset(
        tag["name"] for tag in document.find_all("a", attrs={"name": True}))


def test_internal_links_resolve():
    """Every relative link and image of every page points to an existing file and anchor."""
    broken = []
    for path in html_pages():
        for tag, attribute in (("a", "href"), ("img", "src")):
            for element in soup(path).find_all(tag):
                url = element.get(attribute)
                if not url or url.startswith(("#", "data:", "mailto:", "javascript:")):
                    if url and url.startswith("#") and len(url) > 1 \
                            and unquote(url[1:]) not in ids_of(path):
                        broken.append(f"{path.relative_to(HTML)}: {url} (no such anchor)")
                    continue
                parts = urlsplit(url)
                if parts.scheme or parts.netloc:
                    continue
                target = (path.parent / unquote(parts.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
                if not target.exists():
                    broken.append(f"{path.relative_to(HTML)}: {url} (no such file)")
                elif parts.fragment and target.suffix == ".html" \
                        and unquote(parts.fragment) not in ids_of(target):
                    broken.append(f"{path.relative_to(HTML)}: {url} (no such anchor)")
    assert not broken, f"{len(broken)} broken internal link(s):\n" + "\n".join(sorted(set(broken)))


def test_every_toc_document_built():
    missing = [d for d in notebooks.toc_docnames() if not (HTML / f"{d}.html").is_file()]
    assert not missing, f"documents of _toc.yml without a page: {missing}"


def library_modules() -> list[str]:
    """Every public module and subpackage of transformer_lib, found by walking the package."""
    import transformer_lib

    return sorted(info.name for info in pkgutil.walk_packages(transformer_lib.__path__, "transformer_lib.")
                  if not any(part.startswith("_") for part in info.name.split(".")))


def test_api_reference_has_a_page_per_module():
    """Each module of transformer_lib has its page under api/ (generated by autosummary), which documents it and is
    a row of its package's table (api.html's for a top-level module) with the module's summary; api/ holds no other
    page."""
    modules = library_modules()
    pages = sorted(path.stem for path in (HTML / "api").glob("*.html"))
    assert pages == modules, (f"modules without a page: {sorted(set(modules) - set(pages))}; "
                              f"pages of no module: {sorted(set(pages) - set(modules))}")
    for module in modules:
        path = HTML / "api" / f"{module}.html"
        assert soup(path).find(id=f"module-{module}"), f"api/{module}.html does not document {module}"
        package = module.rpartition(".")[0]
        table = HTML / "api.html" if package == "transformer_lib" else HTML / "api" / f"{package}.html"
        rows = [row for row in soup(table).select("table.autosummary tr")
                if any((table.parent / urlsplit(a["href"]).path).resolve() == path.resolve()
                       for a in row.select("td:first-child a[href]"))]
        assert rows, f"{table.relative_to(HTML)} has no row linking to api/{module}.html"
        summary = rows[0].select("td")[-1].get_text(" ", strip=True)
        assert summary, f"{table.relative_to(HTML)}: no summary of {module}"


def test_api_package_pages_document_only_their_own_names():
    """A package's page documents only what its __init__ defines: the names it imports from its modules (and lists
    in __all__) are documented on their modules' pages (ignore-module-all in _templates/autosummary/module.rst)."""
    misplaced = []
    packages = [module for module in library_modules() if hasattr(importlib.import_module(module), "__path__")]
    assert packages, "transformer_lib has no subpackage?"
    for module in packages:
        namespace = importlib.import_module(module)
        for term in soup(HTML / "api" / f"{module}.html").select("dl.py > dt[id]"):
            name = term["id"].removeprefix(f"{module}.")
            obj = getattr(namespace, name, None) if "." not in name else None
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ != module:
                misplaced.append(f"api/{module}.html documents {name}, defined in {obj.__module__}")
    assert not misplaced, "\n".join(misplaced)
