"""The built book in a real browser: headless Chromium loads each page from a local server.

For the introduction and every chapter page it checks that the page loads (its title is in
the DOM), that MathJax typeset the math (mjx-container elements, no raw $$ or \\( left), that
the chapter's figures are there, and that every embedded widget was rendered by the widget
manager (widget DOM, with the output widget's first view). It saves a screenshot of each
chapter to _build/screenshots/ and writes what it saw to _build/reports/browser.txt.

Needs the built book (_build/html) and /usr/bin/chromium (`make test` installs it). Without
them these tests are skipped, unless BOOK_REQUIRE_BUILD=1, which turns the skip into a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
from booktools import notebooks  # noqa: E402
from test_built_book import article_text  # noqa: E402  (pytest puts this folder on sys.path)

HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
REPORT = ROOT / "_build" / "reports" / "browser.txt"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]
VIRTUAL_TIME_MS = 20_000  # time the page's scripts get (MathJax, widget manager)
PAGES = ["intro"] + [f"chapters/{p.stem}" for p in notebooks.toc_chapters()]
RESULTS: dict[str, str] = {}


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def chromium():
    path = chromium_path()
    problem = None
    if not (HTML / "index.html").is_file():
        problem = "the book is not built: run `make build-strict` (or `make book`) first"
    elif path is None:
        problem = "chromium is not installed: run `make browser` (apt-get install chromium)"
    if problem:
        if os.environ.get("BOOK_REQUIRE_BUILD") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def server():
    """Serve _build/html on a free localhost port for the duration of the module."""
    handler = functools.partial(QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if RESULTS:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text("\n".join(RESULTS[k] for k in PAGES if k in RESULTS) + "\n",
                          encoding="utf-8")


def run_chromium(chromium: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             f"--virtual-time-budget={VIRTUAL_TIME_MS}", *args],
            capture_output=True, text=True, timeout=180)


def console_errors(stderr: str) -> list[str]:
    """Uncaught JavaScript errors that Chromium logged from the page's console."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and re.search(r"Uncaught|Error:", line)]


@pytest.mark.parametrize("name", PAGES)
def test_page_in_browser(chromium, server, name):
    static = BeautifulSoup((HTML / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
    result = run_chromium(chromium, "--window-size=1280,2000", "--dump-dom",
                          f"{server}/{name}.html")
    assert result.returncode == 0, f"{name}: chromium failed:\n{result.stderr[-2000:]}"
    dom = BeautifulSoup(result.stdout, "html.parser")

    # The page loaded: its title is in the rendered DOM.
    title = static.find("h1").get_text(" ", strip=True).rstrip("#").strip()
    assert dom.find("h1") and title in dom.find("h1").get_text(" ", strip=True), (
        f"{name}: page did not load (no title {title!r} in the DOM)")
    errors = console_errors(result.stderr)
    assert not errors, f"{name}: JavaScript errors:\n" + "\n".join(errors)

    # Math: every math element was typeset by MathJax, and no raw TeX delimiters remain.
    math_elements = static.select(".math")
    typeset = dom.find_all("mjx-container")
    if math_elements:
        assert len(typeset) >= len(math_elements), (
            f"{name}: MathJax typeset {len(typeset)} of {len(math_elements)} math elements")
    text = article_text(dom, drop="script, style, pre, code, mjx-container, .cell_input")  # outputs stay
    for raw in ("$$", "\\(", "\\["):
        assert raw not in text, f"{name}: raw TeX {raw!r} left in the page"

    # Figures: the images of the chapter's outputs are in the DOM.
    images = [img for img in dom.find_all("img") if "_images/" in (img.get("src") or "")]
    if name.startswith("chapters/"):
        assert images, f"{name}: no figure in the page"

    # Widgets: each embedded view was rendered by the widget manager.
    views = static.select('script[type="application/vnd.jupyter.widget-view+json"]')
    rendered = dom.select(".jupyter-widgets")
    outputs = dom.select(".widget-output")
    output_images = [img for o in outputs for img in o.find_all("img")]
    if views:
        assert rendered, f"{name}: {len(views)} widget view(s) embedded but none rendered"
        assert not dom.select(".jupyter-widgets .widget-error, .jupyter-widgets-error-widget"), (
            f"{name}: the widget manager reported an error")
        if outputs:
            assert output_images, f"{name}: the output widget shows no first view (no image)"

    RESULTS[name] = (f"{name}: loaded; math {len(typeset)} typeset / {len(math_elements)} "
                     f"elements; figures {len(images)}; widget views {len(views)} embedded, "
                     f"{len(rendered)} widget elements rendered, output-widget images "
                     f"{len(output_images)}; console errors {len(errors)}")


@pytest.mark.parametrize("name", [p for p in PAGES if p.startswith("chapters/")])
def test_chapter_screenshot(chromium, server, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / f"{Path(name).name}.png"
    target.unlink(missing_ok=True)
    result = run_chromium(chromium, "--window-size=1280,3000", f"--screenshot={target}",
                          f"{server}/{name}.html")
    assert result.returncode == 0 and target.is_file(), (
        f"{name}: no screenshot:\n{result.stderr[-2000:]}")
    assert target.stat().st_size > 20_000, f"{name}: screenshot {target} looks empty"


@pytest.mark.parametrize("anchor, page, target", [
    ("transformer_lib.attention.attention_reference", "api/transformer_lib.attention",  # the Colab edition's links
     "transformer_lib.attention.attention_reference"),
    ("transformer_lib.multihead.MultiHeadAttention.forward", "api/transformer_lib.multihead",
     "transformer_lib.multihead.MultiHeadAttention.forward"),
    ("module-transformer_lib.data.tokenizers", "api/transformer_lib.data.tokenizers",
     "module-transformer_lib.data.tokenizers"),
    ("api-training-loop", "api/transformer_lib.training.loop",  # a section of the former one-page reference
     "module-transformer_lib.training.loop"),
])
def test_former_api_anchor_goes_to_its_page(chromium, server, anchor, page, target):
    """The API reference was one page: a link to an object on api.html goes on to the object on its module's page
    (booktools/api_modules.py), so that the links of the Colab edition and older bookmarks keep working."""
    static = BeautifulSoup((HTML / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    assert static.find(id=target), f"{page}.html has no anchor {target}"
    result = run_chromium(chromium, "--window-size=1280,2000", "--dump-dom", f"{server}/api.html#{anchor}")
    assert result.returncode == 0, f"chromium failed:\n{result.stderr[-2000:]}"
    title = BeautifulSoup(result.stdout, "html.parser").find("h1")
    title = title.get_text(" ", strip=True) if title else None
    expected = static.find("h1").get_text(" ", strip=True).rstrip("#").strip()
    assert title and expected in title, f"api.html#{anchor} did not go on to {page}.html (title {title!r})"
