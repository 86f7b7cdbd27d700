#!/usr/bin/env python
"""Start a chapter: write chapters/NN_topic.ipynb from the book's chapter skeleton.

    .venv/bin/python -m booktools.new_chapter 05_position "Position"
    .venv/bin/python -m booktools.new_chapter 05_position --from-myst draft.md

The skeleton has the Colab set-up cell (hidden, tag remove-cell), the title, the configuration
cell (CPU settings, GPU settings), a glue example, a widget example and the exercise section.
With --from-myst, the chapter is converted from a jupytext MyST-markdown draft instead, and its
first code cell is replaced by the canonical Colab set-up cell. Either way, add the chapter to
_toc.yml and run `booktools/run_chapter.py` to execute it and store its outputs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from booktools import notebooks  # noqa: E402

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python"}

CONFIG_CELL = '''\
import matplotlib.pyplot as plt
import torch

import transformer_lib as tl
from transformer_lib.notebook import glue, pick_settings  # works in Colab too (no myst-nb there)

# Settings: CPU-sized by default (the book is built on a 2-core CPU within 60 s per chapter);
# the larger GPU settings are used automatically when a GPU is present (e.g. Colab).
GPU = torch.cuda.is_available()
CPU_SETTINGS = dict(d_model=64, n_layers=2, steps=300, batch_size=32)
GPU_SETTINGS = dict(d_model=256, n_layers=4, steps=3_000, batch_size=128)
SETTINGS = pick_settings(CPU_SETTINGS, GPU_SETTINGS)  # GPU_SETTINGS when CUDA is present; BOOK_SETTINGS=cpu or gpu chooses
DEVICE = torch.device("cuda" if GPU else "cpu")
SEED = 0
torch.manual_seed(SEED)
print(f"device: {DEVICE}, settings: {SETTINGS}")'''

EXPERIMENT_CELL = '''\
x = torch.randn(1000, generator=torch.Generator().manual_seed(SEED))
print(f"standard deviation of the sample: {x.std().item():.2f}")'''

# The checks cell (tagged hide-input: the book folds it, the editions show it in Colab's form view).
GLUE_CELL = '''\
glue("example_std", f"{x.std().item():.2f}", display=False)  # quoted as {glue:text}`example_std`'''

WIDGET_CELL = '''\
import ipywidgets as widgets


def show(scale=1.0):
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(x[:50] * scale)
    plt.show()


display(widgets.interactive(show, scale=widgets.FloatSlider(value=1.0, min=0.5, max=2.0)))'''


def skeleton(stem: str, title: str) -> nbformat.NotebookNode:
    number = notebooks.chapter_number(Path(stem))
    nb = new_notebook(metadata={"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO})
    nb.cells = [
        new_code_cell(notebooks.bootstrap_source(), metadata={"tags": [notebooks.BOOTSTRAP_TAG]}),
        new_markdown_cell(f"(ch-{stem[3:].replace('_', '-')})=\n# {title}\n\n"
                          "One paragraph: what this chapter asks and how it answers."),
        new_code_cell(CONFIG_CELL),
        new_markdown_cell("## First section\n\nThe sample's standard deviation is "
                          "{glue:text}`example_std`."),
        new_code_cell(EXPERIMENT_CELL),
        new_code_cell(GLUE_CELL, metadata={"tags": [notebooks.CHECKS_TAG]}),
        new_code_cell(WIDGET_CELL, metadata={"tags": ["nbval-ignore-output"]}),
        new_markdown_cell(
            "## Exercises\n\n"
            f"````{{exercise}}\n:label: ex-{number:02d}-concept\n\nConceptual question.\n````\n\n"
            f"````{{solution}} ex-{number:02d}-concept\n:class: dropdown\n\nAnswer.\n````\n\n"
            f"````{{exercise}}\n:label: ex-{number:02d}-implement\n\nImplementation task.\n````\n\n"
            f"````{{solution}} ex-{number:02d}-implement\n:class: dropdown\n\nAnswer.\n````\n\n"
            f"````{{exercise}}\n:label: ex-{number:02d}-experiment\n\nExperiment.\n````\n\n"
            f"````{{solution}} ex-{number:02d}-experiment\n:class: dropdown\n\nAnswer.\n````"
        ),
    ]
    return nb


def from_myst(draft: Path) -> nbformat.NotebookNode:
    import jupytext

    nb = jupytext.read(draft, fmt="md:myst")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = LANGUAGE_INFO
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    bootstrap = new_code_cell(notebooks.bootstrap_source(),
                              metadata={"tags": [notebooks.BOOTSTRAP_TAG]})
    if first is not None and notebooks.BOOTSTRAP_TAG in first.metadata.get("tags", []):
        nb.cells[nb.cells.index(first)] = bootstrap
    else:
        nb.cells.insert(0, bootstrap)
    nb.nbformat, nb.nbformat_minor = 4, 5
    for number, cell in enumerate(nb.cells):
        cell.setdefault("id", f"cell-{number}")
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stem", help="file name without extension, e.g. 05_position")
    parser.add_argument("title", nargs="?", default="Title", help="chapter title")
    parser.add_argument("--from-myst", type=Path, help="jupytext MyST-markdown draft to convert")
    parser.add_argument("--force", action="store_true", help="overwrite an existing notebook")
    args = parser.parse_args(argv)

    notebooks.chapter_number(Path(args.stem))  # validates NN_topic
    path = notebooks.CHAPTERS_DIR / f"{args.stem}.ipynb"
    if path.exists() and not args.force:
        parser.error(f"{notebooks.relative(path)} exists (use --force to overwrite)")
    nb = from_myst(args.from_myst) if args.from_myst else skeleton(args.stem, args.title)
    nbformat.validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    print(f"wrote {notebooks.relative(path)}; add `- file: chapters/{args.stem}` to _toc.yml, then "
          f"run: .venv/bin/python -m booktools.run_chapter {notebooks.relative(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
