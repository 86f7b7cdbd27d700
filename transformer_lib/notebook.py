"""What a chapter notebook needs besides the model code: glued values and its CPU/GPU settings.

The book's chapters run in three places: the book build (myst-nb reads the glued values into the
prose), a reader's Jupyter, and Google Colab, where the book-building tools are not installed. This
module works the same in all three without importing myst-nb.

- :func:`glue` records a value under a name exactly as ``myst_nb.glue`` does, so the book's
  ``{glue:text}`name``` roles find it; in Colab it also prints ``name = value``, so that a reader
  sees their own run's figure below the cell (the Colab edition's prose shows the book's).
- :func:`pick_settings` returns the CPU-sized settings, or the larger GPU settings on a GPU. The
  environment variable ``BOOK_SETTINGS=gpu`` takes the GPU settings on any device (``cpu`` the CPU
  settings), ``BOOK_MAX_STEPS=N`` caps every setting named ``*steps`` and ``BOOK_SMOKE`` (a JSON
  object) shrinks other sizes under that cap, so that CI runs the GPU branch of every chapter on the
  CPU in seconds. The capped run's sizes live with the test that uses them (tests/smoke_settings.py),
  not in the chapters' cells.
- :func:`glue_text`, :func:`md_table`, :func:`sci` and :func:`listing` are the small formatting helpers every chapter used to
  define for itself: a value recorded for the prose only, a table of results, a number in scientific notation.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Sequence

#: Prefix of the MIME types of a glued value that is recorded but not displayed (myst-nb's convention).
GLUE_PREFIX = "application/papermill.record/"


def in_colab() -> bool:
    """True inside Google Colab."""
    return "google.colab" in sys.modules


def glue(name: str, value: Any, display: bool = True) -> None:
    """Record ``value`` under ``name`` for the book's ``{glue}`` roles (the output myst-nb's ``glue`` writes).

    Args:
        name: the key the prose refers to, e.g. ``"c04_agree_accuracy"``.
        value: anything IPython can display; the chapters glue formatted strings and figures.
        display: also show the value in the cell's output (False: recorded only).

    Raises:
        TypeError: if ``name`` is not a non-empty string.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"glue name must be a non-empty string, got {name!r}")
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    mimebundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + key: data for key, data in mimebundle.items()}, raw=True, metadata=metadata)
    if in_colab() and not display and "text/plain" in mimebundle:
        print(f"{name} = {mimebundle['text/plain']}")


def use_gpu_settings() -> bool:
    """True when a chapter should take its GPU settings: CUDA is available, or ``BOOK_SETTINGS=gpu``.

    Raises:
        ValueError: if ``BOOK_SETTINGS`` is set to something other than ``cpu`` or ``gpu``.
    """
    requested = os.environ.get("BOOK_SETTINGS", "").strip().lower()
    if requested not in ("", "cpu", "gpu"):
        raise ValueError(f"BOOK_SETTINGS must be 'cpu' or 'gpu' (or unset), got {requested!r}")
    if requested:
        return requested == "gpu"
    import torch

    return torch.cuda.is_available()


def max_steps() -> int | None:
    """The step cap of ``BOOK_MAX_STEPS``, or None when unset.

    Raises:
        ValueError: if ``BOOK_MAX_STEPS`` is not a positive integer.
    """
    raw = os.environ.get("BOOK_MAX_STEPS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"BOOK_MAX_STEPS must be a positive integer, got {raw!r}")
    return int(raw)


def smoke_overrides() -> dict:
    """The settings that ``BOOK_SMOKE`` replaces in a capped run (an empty dict when unset).

    ``BOOK_SMOKE`` holds a JSON object, e.g. ``{"seeds": 2, "lengths": [64, 128]}``; the test that runs every
    chapter's GPU branch capped (tests/test_colab.py) sets it per chapter from tests/smoke_settings.py.

    Raises:
        ValueError: if ``BOOK_SMOKE`` is not a JSON object.
    """
    raw = os.environ.get("BOOK_SMOKE", "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"BOOK_SMOKE must be a JSON object of settings, got {raw!r} ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"BOOK_SMOKE must be a JSON object of settings, got {type(value).__name__} {raw!r}")
    return value


def pick_settings(cpu: dict, gpu: dict) -> dict:
    """The settings a chapter runs with: ``gpu`` when :func:`use_gpu_settings`, else ``cpu``.

    When ``BOOK_MAX_STEPS`` is set (CI's quick run of every chapter's GPU branch on a CPU), the entries of
    ``BOOK_SMOKE`` (:func:`smoke_overrides`) replace those of the chosen settings -- sizes other than steps that
    only a GPU handles in reasonable time: sequence lengths, evaluation sets -- and every integer setting whose
    name ends in ``steps`` is capped. A JSON list replaces a tuple as a tuple. Without the cap ``BOOK_SMOKE`` is
    ignored, so a reader's settings never change because of it.

    Args:
        cpu: the CPU-sized settings (the book's stored outputs come from them).
        gpu: the larger settings for a GPU; they must name the same keys as ``cpu``.

    Returns:
        dict: a copy of the chosen settings.

    Raises:
        ValueError: if the two dicts do not have the same keys, or ``BOOK_SMOKE`` (under the cap) names another key.
    """
    if set(cpu) != set(gpu):
        raise ValueError(f"CPU and GPU settings must have the same keys; only in CPU: {sorted(set(cpu) - set(gpu))}, "
                         f"only in GPU: {sorted(set(gpu) - set(cpu))}")
    chosen = dict(gpu if use_gpu_settings() else cpu)
    cap = max_steps()
    if cap is not None:
        smoke = smoke_overrides()
        unknown = sorted(set(smoke) - set(chosen))
        if unknown:
            raise ValueError(f"BOOK_SMOKE must name settings among {sorted(chosen)}, got unknown {unknown}")
        for key, value in smoke.items():
            chosen[key] = tuple(value) if isinstance(chosen[key], tuple) and isinstance(value, list) else value
        for key, value in chosen.items():
            if key.endswith("steps") and isinstance(value, int) and not isinstance(value, bool):
                chosen[key] = min(value, cap)
    return chosen


def glue_text(name: str, text: Any) -> None:
    """Record ``text`` for ``{glue:text}`name``` in the prose without showing it below the cell.

    Raises:
        TypeError: if ``name`` is not a non-empty string.
    """
    glue(name, text, display=False)


def listing(items: Sequence[str]) -> str:
    """Words joined as a sentence lists them: ``'a'``, ``'a and b'``, ``'a, b and c'``."""
    items = [str(item) for item in items]
    if not items:
        raise ValueError("items must hold at least one item, got none")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _table_cell(cell: Any) -> str:
    """``str(cell)`` for a Markdown table: its pipes escaped (an unescaped one would start a new column)."""
    return str(cell).replace("|", "\\|")


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]):
    """A Markdown table (an ``IPython.display.Markdown``) from a header and rows of formatted cells.

    Args:
        header: the column titles.
        rows: one sequence per row, as many cells as ``header``; each cell is shown as ``str(cell)``, a ``|`` in
            it (``max |x|``) escaped so that it does not split the cell.

    Raises:
        ValueError: if ``header`` is empty or a row has another number of cells.
    """
    from IPython.display import Markdown

    header = [_table_cell(h) for h in header]
    if not header:
        raise ValueError("header must name at least one column, got none")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for i, row in enumerate(rows):
        cells = [_table_cell(c) for c in row]
        if len(cells) != len(header):
            raise ValueError(f"rows[{i}] must have {len(header)} cells (one per column of the header), "
                             f"got {len(cells)}: {cells!r}")
        lines.append("| " + " | ".join(cells) + " |")
    return Markdown("\n".join(lines))


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: float, digits: int = 1, plain: tuple[float, float] | None = None) -> str:
    """``x`` in scientific notation with a superscript exponent: ``sci(3.3e18)`` is ``'3.3 × 10¹⁸'``.

    Args:
        x: a finite number, not zero unless it is written plainly.
        digits: digits after the decimal point of the mantissa.
        plain: optional ``(low, high)``: a number with ``low <= |x| < high`` is written plainly with
            ``digits + 1`` significant digits (``sci(0.25, plain=(0.01, 1000))`` is ``'0.25'``).

    Raises:
        ValueError: if ``x`` is not finite, or zero outside the ``plain`` range; if ``digits`` is negative.
    """
    if not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be an integer >= 0, got {digits!r}")
    x = float(x)
    if plain is not None and plain[0] <= abs(x) < plain[1]:
        text = f"{x:#.{digits + 1}g}"                     # '#' keeps trailing zeros: 4.0, not 4
        return text[:-1] if text.endswith(".") else text   # but not a bare point: 46, not 46.
    if not math.isfinite(x) or x == 0:
        raise ValueError(f"x must be a finite, non-zero number to be written in scientific notation, got {x!r}")
    exponent = math.floor(math.log10(abs(x)))
    return f"{x / 10**exponent:.{digits}f} × 10{str(exponent).translate(_SUPERSCRIPT)}"
