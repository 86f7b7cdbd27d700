#!/usr/bin/env python
"""The student book: the HTML book without solutions, neither their text nor their code.

    .venv/bin/python -m booktools.make_student_book [--repo ORG/REPO] [--branch main] [--out _build/student-book]
        [--course-ref v1.0] [--book-url https://org.github.io/course/]
    make student-book [STUDENT_REPO=ORG/REPO] [COURSE_REF=v1.0] [STUDENT_BOOK_URL=...]

Writes a separate book source, ``_build/student-book/src/``: the pages of ``_toc.yml`` except the instructor
guide, and every chapter as its student notebook (``exercisekit.strip_solutions``: every solution directive and
gated solution block removed, each autograded solution cell replaced by the exercise's starter) with the stored
outputs of the chapter's own cells kept (check cells and starters have none, since theirs came from the
solution). Then ``jupyter-book build`` with execution off (the stored outputs are used; nothing runs) into
``_build/student-book/html``.

The book's buttons open the student notebooks: its "download source" gives the student notebook the page was
built from, and with ``--repo`` (the GitHub repository where the instructor publishes ``make student-edition``,
laid out as ``chapters/NN_topic.ipynb``) the Colab launch button and the repository button point there. Without
``--repo`` the book has no launch or repository button: the book's own repository holds the solutions.

The notebook a page's download button serves is the student edition's notebook of the chapter
(``make_editions.reader_notebook``: plain markdown, no raw MyST, cross-references to this book at ``--book-url``),
written over the MyST source after the build. With ``--course-ref`` (``COURSE_REF``) the set-up cells install the
library at the course's tag or commit, and every page's footer names that version.

``tests/test_student_book.py`` checks that no solution survives in the HTML and loads the pages in Chromium.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent

from booktools import exercisekit as ek  # noqa: E402
from booktools import notebooks  # noqa: E402

DEFAULT_OUT = ROOT / "_build" / "student-book"
LEFT_OUT = {"instructor_guide"}   # pages of _toc.yml the student book does not have
COPIED = ["references.bib", "benchmarks/results"]  # files the pages include or cite


def _drop_pages(node, docnames: set[str]):
    """The _toc.yml tree without the entries whose file is in ``docnames`` (and parts left empty)."""
    if isinstance(node, list):
        kept = [_drop_pages(child, docnames) for child in node]
        return [k for k in kept if k is not None]
    if isinstance(node, dict):
        if str(node.get("file", "")).removesuffix(".md").removesuffix(".ipynb") in docnames:
            return None
        out = {key: _drop_pages(value, docnames) if key in ("parts", "chapters", "sections") else value
               for key, value in node.items()}
        if "chapters" in out and not out["chapters"] and "file" not in out:
            return None
        return out
    return node


def student_config(repo: str | None, branch: str, course: dict | None = None) -> dict:
    config = notebooks.load_config()
    config["title"] = f"{config.get('title', 'The book')} — student edition"
    config["execute"] = dict(config.get("execute") or {}, execute_notebooks="off")
    html = dict(config.get("html") or {})
    html.pop("baseurl", None)
    html.update(use_repository_button=bool(repo), use_issues_button=False, use_edit_page_button=False,
                use_download_button=True)
    if course:
        html["extra_footer"] = (f"<p>Course version: the library <code>transformer_lib</code> at "
                                f"<code>{course['ref']}</code> (commit <code>{course['commit'][:12]}</code>).</p>")
    config["html"] = html
    if repo:
        config["repository"] = {"url": f"https://github.com/{repo.strip('/')}", "path_to_book": "", "branch": branch}
        config["launch_buttons"] = dict(config.get("launch_buttons") or {}, colab_url="https://colab.research.google.com")
    else:
        config["repository"] = dict(config.get("repository") or {})
        config["launch_buttons"] = dict(config.get("launch_buttons") or {}, colab_url="", binderhub_url="",
                                        jupyterhub_url="", thebe=False)
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {"booktools.api_modules": str(ROOT), "booktools.student_html": str(ROOT)}
    inner = sphinx.setdefault("config", {})
    inner["html_static_path"] = [str(ROOT / p) for p in inner.get("html_static_path", [])]
    inner["templates_path"] = [str(ROOT / p) for p in inner.get("templates_path", [])]  # the API pages' templates
    return config


def write_source(src: Path, repo: str | None = None, branch: str = "main", course: dict | None = None) -> list[Path]:
    """The student book's source folder; returns the chapter notebooks written."""
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    toc = yaml.safe_load(notebooks.TOC.read_text(encoding="utf-8"))
    (src / "_toc.yml").write_text(yaml.safe_dump(_drop_pages(toc, LEFT_OUT), sort_keys=False, allow_unicode=True),
                                  encoding="utf-8")
    (src / "_config.yml").write_text(yaml.safe_dump(student_config(repo, branch, course), sort_keys=False,
                                                    allow_unicode=True), encoding="utf-8")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, src / name)
        elif source.is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, src / name)
    written = []
    for docname in notebooks.toc_docnames():
        if docname in LEFT_OUT:
            continue
        for suffix in (".md", ".ipynb"):
            page = ROOT / f"{docname}{suffix}"
            if not page.is_file():
                continue
            target = src / f"{docname}{suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            if suffix == ".ipynb":
                student, _ = ek.strip_solutions(notebooks.read_notebook(page), keep_outputs=True)
                for cell in student.cells:  # the hidden set-up cell installs the course's version
                    if notebooks.is_bootstrap_cell(cell):
                        cell.source = ek.pinned_setup_source(course["ref"] if course else None)
                notebooks.write_notebook(student, target)
                written.append(target)
            else:
                shutil.copy2(page, target)
    for include in ROOT.glob("_*.md"):  # files included by pages (the instructor guide's tables are not needed)
        if include.name not in ("_exercise_table.md", "_autograder_table.md"):
            shutil.copy2(include, src / include.name)
    return written


def replace_downloads(html: Path, chapters: list[Path], book_url: str, course: dict | None) -> list[Path]:
    """Write the student edition's notebook of each chapter (make_editions.reader_notebook) over the MyST source that
    the page's download button serves (``_sources/chapters/NN_topic.ipynb``); returns the files written."""
    from booktools import make_editions

    written = []
    config = notebooks.load_config()
    for chapter in chapters:
        docname = f"chapters/{chapter.stem}"
        target = html / "_sources" / f"{docname}.ipynb"
        if not target.parent.is_dir():
            continue
        original = notebooks.read_notebook(ROOT / f"{docname}.ipynb")
        student, _ = ek.strip_solutions(original)
        notebooks.write_notebook(make_editions.reader_notebook(ROOT / f"{docname}.ipynb", original, student, book_url,
                                                               course, config, docname), target)
        written.append(target)
    return written


def build(out: Path = DEFAULT_OUT, repo: str | None = None, branch: str = "main", quiet: bool = False,
          course_ref: str | None = None, book_url: str | None = None) -> Path:
    """Write the source and build the HTML; return the HTML folder. ``course_ref``: the course's tag or commit
    (ValueError naming --course-ref when this clone has none such); ``book_url``: where the student book is
    published (default: the GitHub Pages address of ``repo``), for the downloaded notebooks' links."""
    from booktools import make_editions

    course = ek.resolve_course_ref(course_ref) if course_ref else None
    url, _ = make_editions.student_book_url(repo, book_url)
    src = out / "src"
    chapters = write_source(src, repo, branch, course)
    start = time.perf_counter()
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(src), "--builder", "html"], capture_output=quiet, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout or "")[-3000:] + (proc.stderr or "")[-3000:] if quiet else ""
        raise RuntimeError(f"jupyter-book build of the student book failed (exit {proc.returncode})\n{tail}")
    html = out / "html"
    if html.exists():
        shutil.rmtree(html)
    shutil.copytree(src / "_build" / "html", html)
    replace_downloads(html, chapters, url, course)
    print(f"student book: {len(chapters)} chapters, built in {time.perf_counter() - start:.0f} s -> {html}")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", help="ORG/REPO on GitHub holding the student edition (launch and repository "
                                       "buttons); none: no launch button")
    parser.add_argument("--branch", default="main", help="branch of --repo (default: main)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (src/ and html/)")
    parser.add_argument("--course-ref", help="tag or commit of the book's repository that the course uses (COURSE_REF)")
    parser.add_argument("--book-url", help="address where this student book is published (STUDENT_BOOK_URL; default: "
                                           "the GitHub Pages address of --repo)")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.repo, args.branch, course_ref=args.course_ref, book_url=args.book_url)
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
