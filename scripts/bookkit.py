"""Shared helpers of the book's scripts and tests: where things are, what `_toc.yml` lists,
the repository URL of `_config.yml`, and the canonical Colab set-up cell of a chapter.

Import from a script in scripts/ with ``import bookkit``; from tests, add scripts/ to sys.path.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "_config.yml"
TOC = ROOT / "_toc.yml"
CHAPTERS_DIR = ROOT / "chapters"

# The first code cell of every chapter: hidden in the book (tag), a no-op outside Colab.
BOOTSTRAP_TAG = "remove-cell"
BOOTSTRAP_MARKER = "# Colab set-up"
BOOTSTRAP_TEMPLATE = '''\
# Colab set-up (hidden in the book): install the book's library when this notebook runs in
# Google Colab. Anywhere else this cell does nothing (locally, `make book` installs it).
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet",
         "transformer_lib[widgets,hf] @ git+{url}"],
        check=True,
    )
    from google.colab import output

    output.enable_custom_widget_manager()  # ipywidgets 8 in Colab'''

CHAPTER_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+$")


def load_config() -> dict:
    """The parsed `_config.yml`."""
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def repository_url() -> str:
    """The book's repository URL, defined once in `_config.yml` (repository.url)."""
    return load_config()["repository"]["url"].rstrip("/")


def bootstrap_source(url: str | None = None) -> str:
    """The exact source of the Colab set-up cell for the repository ``url``."""
    return BOOTSTRAP_TEMPLATE.format(url=url or repository_url())


def _toc_entries(node) -> list[str]:
    files: list[str] = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(str(node["file"]))
        for key in ("root", "parts", "chapters", "sections"):
            if key == "root" and key in node:
                files.append(str(node["root"]))
            elif key in node and node[key]:
                for child in node[key]:
                    files.extend(_toc_entries(child))
    elif isinstance(node, list):
        for child in node:
            files.extend(_toc_entries(child))
    return files


def toc_docnames() -> list[str]:
    """Every document of `_toc.yml` (root first), without file extension, in book order."""
    toc = yaml.safe_load(TOC.read_text(encoding="utf-8"))
    names = _toc_entries(toc)
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
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def chapter_number(path: Path) -> int:
    """The chapter number NN of chapters/NN_topic.ipynb."""
    match = CHAPTER_NAME.match(Path(path).stem)
    if not match:
        raise ValueError(f"chapter file name {Path(path).name!r} does not match NN_topic.ipynb")
    return int(match.group(1))


def code_cells(nb) -> list[tuple[int, dict]]:
    """(index in the notebook, cell) of every code cell of a notebook (nbformat node or dict)."""
    return [(i, cell) for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"]


def cell_source(cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source
