"""The one home of the book's notebook tooling: where things are, what `_toc.yml` lists, the
repository URL of `_config.yml`, reading and writing chapter notebooks (cells, tags, glued values,
titles), and the canonical Colab set-up cell of a chapter.

The tools of booktools run from the repository root (``python -m booktools.<tool>``) and the tests import it
from there.

Cells may be nbformat nodes or plain dicts (``json.load`` of a notebook): every helper reads them
with ``cell["..."]`` / ``cell.get(...)`` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "_config.yml"
TOC = ROOT / "_toc.yml"
CHAPTERS_DIR = ROOT / "chapters"
COLAB_DIR = ROOT / "colab"          # the Colab edition (booktools/make_colab_edition.py)
REFERENCES = ROOT / "references.bib"

CHAPTER_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+$")

#: Prefix of the MIME types of a value glued with ``display=False`` (myst-nb's convention).
GLUE_PREFIX = "application/papermill.record/"


def without_output_widgets(client):
    """An nbclient ``NotebookClient`` that does not act as a front end for ipywidgets' Output widget; returns it.

    By default nbclient imitates one: while a cell such as ``widgets.interactive(...)`` runs, it sends the widget's
    new outputs to the kernel on the shell channel, the channel on which it awaits that cell's reply, and now and then
    the reply is then not seen until the wait times out (nbclient issue #312). On 2026-12-02 the explorer cells of
    chapters 1 and 2 each held a simulated-Colab run for the whole 600 s of the cell timeout, the kernel idle and its
    reply waiting, and then passed. Without the imitation the Output widget's outputs go to the cell. For runs that
    keep no widget state; ``run_chapter``, whose stored notebooks the book renders with their widgets, keeps it.
    (The registry is set after construction: ``NotebookClient`` takes no such argument.)
    """
    client.widget_registry = {}
    return client


# --------------------------------------------------------------------------- the Colab set-up cell
# The first code cell of every chapter: hidden in the book (tag), a no-op outside Colab.
BOOTSTRAP_TAG = "remove-cell"
BOOTSTRAP_MARKER = "# Colab set-up"
#: Environment variable that replaces ``git+<repository url>`` in the pip requirement (tests install
#: from a local checkout with ``file:///path/to/checkout``).
SPEC_VARIABLE = "TRANSFORMER_BOOK_SPEC"
BOOTSTRAP_TEMPLATE = '''\
# Colab set-up (hidden in the book): install the book's library when this notebook runs in
# Google Colab. Anywhere else this cell does nothing (locally, `make book` installs it).
import os
import sys

if "google.colab" in sys.modules:
    import subprocess

    spec = os.environ.get("{variable}", "git+{url}")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", f"transformer_lib[widgets,hf] @ {{spec}}"],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        print(pip.stdout[-1500:], pip.stderr[-1500:], sep="\\n")  # pip's own error
        raise RuntimeError(f"pip could not install the book's library from {{spec}} (its message is above). "
                           "Check that the repository exists and is public, and that the runtime is "
                           "connected to the internet; then run this cell again.")
    from google.colab import output

    output.enable_custom_widget_manager()  # ipywidgets 8 in Colab'''


# --------------------------------------------------------------------------- what a reader sees of a code cell
#: Lines of a code cell that belong to the test harness, not to the experiment: the tolerance declarations that
#: nbval reads (``# nbval-tolerance: ...``, README "Portable outputs"). The cell keeps them (nbval needs them);
#: the HTML book, the Colab edition and the student edition show the cell without them.
HARNESS_LINE = re.compile(r"^[ \t]*#[ \t]*nbval-tolerance\b.*$")


#: Tag of a code cell that holds a chapter's checks rather than its experiment: the figures the prose quotes
#: (glue), the verdict rule and the claims-ledger record. The cell runs everywhere and nbval compares it; the HTML
#: book folds its input (myst-nb's ``hide-input``), the Colab and student editions show it in Colab's form view.
CHECKS_TAG = "hide-input"


def checks_form_title(source: str) -> str:
    """The Colab form title of a checks cell (:data:`CHECKS_TAG`): what the folded code does."""
    if re.search(r"\brecord_(claim|erratum)\(", source):
        return "# @title Checks: the verdict for the claims ledger and the figures the text quotes"
    return "# @title Checks: the figures the text quotes"


def fold_checks(cell) -> None:
    """Put a checks cell (:data:`CHECKS_TAG`) of an edition in Colab's form view, under its title; other cells are
    left as they are. The cell must already hold its reader source."""
    if CHECKS_TAG in cell_tags(cell):
        cell.metadata["cellView"] = "form"
        cell.source = f"{checks_form_title(cell.source)}\n{cell.source}"


def reader_source(source: str) -> str:
    """A code cell's source as a reader sees it: the harness lines (:data:`HARNESS_LINE`) removed, with the
    blank lines they leave at the top of the cell."""
    lines = [line for line in source.split("\n") if not HARNESS_LINE.match(line)]
    while lines and not lines[0].strip() and len(lines) > 1:
        lines.pop(0)
    return "\n".join(lines)


# --------------------------------------------------------------------------- configuration
def load_config() -> dict:
    """The parsed `_config.yml`."""
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def repository_url(config: dict | None = None) -> str:
    """The book's repository URL, defined once in `_config.yml` (repository.url)."""
    config = load_config() if config is None else config
    return str(config["repository"]["url"]).rstrip("/")


def repository_branch(config: dict | None = None) -> str:
    """The branch of the repository that the Colab links open (repository.branch, default main)."""
    config = load_config() if config is None else config
    return str(config["repository"].get("branch") or "main")


def github_repo(url: str | None = None) -> str:
    """``owner/repo`` of a GitHub repository URL (default: the book's)."""
    return urlsplit(url or repository_url()).path.strip("/").removesuffix(".git")


def html_baseurl(config: dict | None = None) -> str:
    """Where the HTML book is published, ending in ``/``: `_config.yml`'s ``html.baseurl``, or the
    GitHub Pages address of the repository (``https://<owner>.github.io/<repo>/``)."""
    config = load_config() if config is None else config
    base = (config.get("html") or {}).get("baseurl")
    if base:
        return str(base).rstrip("/") + "/"
    owner, _, repo = github_repo(repository_url(config)).partition("/")
    return f"https://{owner.lower()}.github.io/{repo}/"


def colab_url(path: str | Path, config: dict | None = None) -> str:
    """The Colab address that opens the repository file ``path`` (relative to the root)."""
    config = load_config() if config is None else config
    rel = "" if str(path) in ("", ".") else Path(path).as_posix()   # "": the prefix of every link
    return (f"{COLAB_LINK_PREFIX}{github_repo(repository_url(config))}"
            f"/blob/{repository_branch(config)}/{rel}")


COLAB_LINK_PREFIX = "https://colab.research.google.com/github/"


def colab_edition_target(docname: str) -> str | None:
    """The file of the Colab edition that the book's Colab link of page ``docname`` opens
    (``colab/NN_topic.ipynb`` for ``chapters/NN_topic``), or None for a page that is not a chapter."""
    if not docname.startswith("chapters/") or not CHAPTER_NAME.match(Path(docname).name):
        return None
    return f"{COLAB_DIR.name}/{Path(docname).name}.ipynb"


def bootstrap_source(url: str | None = None) -> str:
    """The exact source of the Colab set-up cell for the repository ``url`` (default: the book's)."""
    return BOOTSTRAP_TEMPLATE.format(url=(url or repository_url()).rstrip("/"), variable=SPEC_VARIABLE)


# --------------------------------------------------------------------------- table of contents
def toc_docnames(toc: Path | None = None) -> list[str]:
    """Every document of `_toc.yml` (root first), without file extension, in book order.

    Parsed by sphinx-external-toc, the parser Jupyter Book itself uses.
    """
    from sphinx_external_toc.parsing import parse_toc_yaml

    site = parse_toc_yaml(str(toc or TOC))
    names: list[str] = []

    def walk(docname: str) -> None:
        if docname in names:
            return
        names.append(docname)
        document = site[docname] if docname in site else None
        for subtree in getattr(document, "subtrees", None) or []:
            for item in subtree.items:
                if isinstance(item, str):  # FileItem; globs and URLs are not documents
                    walk(str(item))

    walk(site.root.docname)
    return [re.sub(r"\.(ipynb|md)$", "", name) for name in names]


def toc_chapters() -> list[Path]:
    """The chapter notebooks listed in `_toc.yml` (documents under chapters/), in book order.

    A listed chapter is always returned as ``chapters/<name>.ipynb``, whether or not the file
    exists, so that callers can report a missing chapter by name.
    """
    return [ROOT / f"{name}.ipynb" for name in toc_docnames() if name.startswith("chapters/")]


def relative(path: Path) -> str:
    """``path`` relative to the repository root, for messages."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def chapter_number(path: Path) -> int:
    """The chapter number NN of chapters/NN_topic.ipynb."""
    match = CHAPTER_NAME.match(Path(path).stem)
    if not match:
        raise ValueError(f"chapter file name {Path(path).name!r} does not match NN_topic.ipynb")
    return int(match.group(1))


# --------------------------------------------------------------------------- notebooks and cells
def read_notebook(path: Path):
    """A notebook as an nbformat (version 4) node."""
    import nbformat

    return nbformat.read(str(path), as_version=4)


def write_notebook(nb, path: Path) -> None:
    """Write ``nb`` to ``path`` as nbformat does (one-space indent, trailing newline)."""
    import nbformat

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def code_cells(nb) -> list[tuple[int, dict]]:
    """(index in the notebook, cell) of every code cell of a notebook (nbformat node or dict)."""
    return [(i, cell) for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"]


def cell_source(cell) -> str:
    """The source of a cell as one string (nbformat stores a string, raw JSON may hold a list)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def cell_tags(cell) -> list[str]:
    """The tags of a cell (metadata.tags), possibly empty."""
    return list((cell.get("metadata") or {}).get("tags", []) or [])


def is_bootstrap_cell(cell) -> bool:
    """True for a Colab set-up cell (a code cell starting with the set-up marker)."""
    return cell.get("cell_type") == "code" and cell_source(cell).lstrip().startswith(BOOTSTRAP_MARKER)


def chapter_title(nb) -> str:
    """The first level-one heading of a notebook (without its MyST label line), or ''."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            for line in cell_source(cell).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def _text(data) -> str:
    return "".join(data) if isinstance(data, list) else str(data)


def glued_outputs(nb) -> dict[str, dict]:
    """Every glued value of an executed notebook: name -> its MIME bundle (MIME prefix removed).

    Values glued with ``display=False`` carry the prefix ``application/papermill.record/``; values
    glued with ``display=True`` are plain display outputs. Both have ``metadata.scrapbook.name``.
    """
    values: dict[str, dict] = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) or []:
            name = ((output.get("metadata") or {}).get("scrapbook") or {}).get("name")
            data = output.get("data") or {}
            if not name or not data:
                continue
            values[name] = {key.removeprefix(GLUE_PREFIX): value for key, value in data.items()}
    return values


def pasted_text(text: str) -> str:
    """What ``{glue:text}`` shows for a stored text/plain value: myst-nb literal-evaluates it first,
    which removes the quotes of a string."""
    try:
        return str(ast.literal_eval(text))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return text


def glued_values(nb) -> dict[str, str]:
    """Every glued value of an executed notebook -> its text: the text/plain value as the book
    pastes it (quotes of a string removed), or the text/markdown value when there is no text/plain."""
    values = {}
    for name, bundle in glued_outputs(nb).items():
        if "text/plain" in bundle:
            values[name] = pasted_text(_text(bundle["text/plain"]))
        elif "text/markdown" in bundle:
            values[name] = _text(bundle["text/markdown"])
    return values
