"""The book's figures: attention heatmaps, masks, positional tables, training curves and measured series.

Every chapter draws through these functions so that figures share one look (:func:`use_book_style`). Each
function accepts torch tensors (any device, with or without gradients) or numpy arrays, checks shapes and label
counts, and returns the matplotlib ``Axes`` it drew on (or the ``Figure`` for multi-panel plots) so that a
chapter can add titles, annotations or save it.

Conventions: in attention maps rows are queries (T) and columns keys (S), as in the weights' shape (T, S).
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Union

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
from cycler import cycler
from matplotlib.patches import Rectangle

from .checks import as_numpy, check_index, check_labels

__all__ = [
    "BOOK_COLORS",
    "use_book_style",
    "attention_heatmap",
    "attention_heads",
    "plot_curves",
    "plot_series",
    "mask_figure",
    "positional_matrix",
]

# Okabe & Ito's colour-blind-safe palette, in a fixed order so that a model keeps its colour across chapters.
BOOK_COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

ArrayLike = Union[torch.Tensor, np.ndarray, Sequence]


def use_book_style() -> Dict[str, object]:
    """Set the book's matplotlib defaults (figure size, dpi, grid, colour cycle, no top/right spines).

    Returns:
        The rcParams that were set (to print or to undo).
    """
    params = {
        "figure.figsize": (6.0, 3.5),
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "savefig.bbox": "tight",
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "grid.linestyle": "-",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": cycler(color=list(BOOK_COLORS)),
        "image.cmap": "viridis",
        "legend.frameon": False,
        "lines.linewidth": 1.6,
    }
    matplotlib.rcParams.update(params)
    return params


# ---------------------------------------------------------------------------------------- helpers
def _new_ax(ax, figsize=None):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    elif not isinstance(ax, matplotlib.axes.Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _grid_image(ax, data, x_labels, y_labels, cmap, vmin=None, vmax=None, interpolation="nearest"):
    """imshow with one cell per entry and optional tick labels; no grid lines across the image."""
    im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation=interpolation)
    ax.grid(False)
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)))
        ax.set_xticklabels(x_labels, rotation=90 if max(map(len, x_labels), default=0) > 2 else 0)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)))
        ax.set_yticklabels(y_labels)
    return im


def _outline_row(ax, row: int, n_cols: int) -> None:
    """Outline row ``row`` of a grid image (one query and all its keys) in the highlight colour ``C3``."""
    ax.add_patch(Rectangle((-0.5, row - 0.5), n_cols, 1, fill=False, edgecolor="C3", linewidth=2))


# ------------------------------------------------------------------------------------------- attention
def attention_heatmap(weights: ArrayLike, x_labels: Optional[Sequence[str]] = None,
                      y_labels: Optional[Sequence[str]] = None, ax=None, title: Optional[str] = None,
                      cmap: str = "viridis", annotate: bool = False, vmin: Optional[float] = None,
                      vmax: Optional[float] = None, colorbar: bool = True, highlight_row: Optional[int] = None):
    """Draw one attention map: row ``i`` is query ``i``, column ``j`` its weight on key ``j``.

    Args:
        weights: attention weights (or any score matrix).
        x_labels: one label per key (columns), e.g. the source tokens.
        y_labels: one label per query (rows), e.g. the target tokens.
        ax: an Axes to draw on (default: a new figure).
        title: the Axes title.
        cmap: matplotlib colour map.
        annotate: write each value (2 decimals) in its cell — for small maps.
        vmin, vmax: colour range (default: the data's range).
        colorbar: add a colour bar.
        highlight_row: outline this query's row (e.g. the query an explorer has selected).

    Shapes:
        weights (T, S).

    Returns:
        The ``Axes``; ``ax.images[0].get_array()`` holds the data drawn.
    """
    data = as_numpy("weights", weights, ndim=2)
    t, s = data.shape
    x_labels = check_labels("x_labels", x_labels, s, "the key axis (columns) of weights")
    y_labels = check_labels("y_labels", y_labels, t, "the query axis (rows) of weights")
    highlight_row = None if highlight_row is None else check_index("highlight_row", highlight_row, t, "queries")
    return draw_heatmap(_new_ax(ax), data, x_labels, y_labels, title, cmap, annotate, vmin, vmax, colorbar,
                        highlight_row)


def draw_heatmap(ax, data: np.ndarray, x_labels=None, y_labels=None, title=None, cmap="viridis", annotate=False,
                 vmin=None, vmax=None, colorbar=True, highlight_row=None):
    """:func:`attention_heatmap` on arguments it has checked: ``data`` a (T, S) array, the labels lists of S and T
    strings or None, ``highlight_row`` a valid row or None. Unchecked, for the library's redraws (an explorer's
    slider move) that checked their inputs once."""
    t, s = data.shape
    im = _grid_image(ax, data, x_labels, y_labels, cmap, vmin, vmax)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate:
        lo, hi = im.get_clim()
        mid = (lo + hi) / 2
        for i in range(t):
            for j in range(s):
                ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if data[i, j] > mid else "white")
    if highlight_row is not None:
        _outline_row(ax, highlight_row, s)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def attention_heads(weights: ArrayLike, x_labels: Optional[Sequence[str]] = None,
                    y_labels: Optional[Sequence[str]] = None, ncols: int = 4,
                    titles: Optional[Sequence[str]] = None, suptitle: Optional[str] = None,
                    cmap: str = "viridis", panel_size: float = 2.6):
    """A grid with one attention map per head, on a shared colour scale.

    Args:
        weights: the heads' weights of one example (``weights[b]`` of a (B, H, T, S) tensor).
        x_labels: one label per key (columns).
        y_labels: one label per query (rows), shown on the first column of panels.
        ncols: panels per row.
        titles: one title per head (default ``head 0``, ``head 1`` …).
        suptitle: title of the whole figure.
        cmap: matplotlib colour map.
        panel_size: width and height of each panel in inches.

    Shapes:
        weights (H, T, S).

    Returns:
        The ``Figure``; ``fig.axes[h]`` is head ``h`` (unused panels are hidden; the colour bar comes last).
    """
    data = as_numpy("weights", weights, ndim=3)
    h, t, s = data.shape
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    x_labels = check_labels("x_labels", x_labels, s, "the key axis (columns) of weights")
    y_labels = check_labels("y_labels", y_labels, t, "the query axis (rows) of weights")
    if titles is None:
        titles = [f"head {i}" for i in range(h)]
    titles = check_labels("titles", titles, h, "the head axis of weights")
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size * ncols + 0.8, panel_size * nrows),
                             squeeze=False, constrained_layout=True)
    vmin, vmax = float(data.min()), float(data.max())
    im = None
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.set_visible(False)
            continue
        im = _grid_image(ax, data[i], x_labels, y_labels if i % ncols == 0 else None, cmap, vmin, vmax)
        if y_labels is not None and i % ncols:
            ax.set_yticks([])
        ax.set_title(titles[i])
    fig.colorbar(im, ax=axes[:, -1].tolist(), shrink=0.8)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def mask_figure(mask: ArrayLike, x_labels: Optional[Sequence[str]] = None,
                y_labels: Optional[Sequence[str]] = None, ax=None, title: Optional[str] = None,
                highlight_row: Optional[int] = None):
    """Draw a boolean attention mask: True (may attend) dark, False light, with cell borders.

    Args:
        mask: bool mask, True = query ``i`` may attend to key ``j`` (the library's convention).
        x_labels: one label per key (columns).
        y_labels: one label per query (rows).
        ax: an Axes to draw on (default: a new figure).
        title: the Axes title.
        highlight_row: outline this query's row: the keys it may see.

    Shapes:
        mask (T, S) bool (a 0/1 array is accepted).

    Returns:
        The ``Axes``; the image holds the mask as 0/1.
    """
    data = as_numpy("mask", mask, ndim=2)
    if data.dtype != bool:
        if not np.isin(data, (0, 1)).all():
            raise ValueError(f"mask must be boolean (or 0/1), got values such as {np.unique(data)[:5].tolist()}")
        data = data.astype(bool)
    t, s = data.shape
    x_labels = check_labels("x_labels", x_labels, s, "the key axis (columns) of mask")
    y_labels = check_labels("y_labels", y_labels, t, "the query axis (rows) of mask")
    highlight_row = None if highlight_row is None else check_index("highlight_row", highlight_row, t, "queries")
    ax = _new_ax(ax, figsize=(min(6.0, 1.0 + 0.35 * s), min(6.0, 0.8 + 0.35 * t)))
    return draw_mask(ax, data, x_labels, y_labels, title, highlight_row)


def draw_mask(ax, data: np.ndarray, x_labels=None, y_labels=None, title=None, highlight_row=None):
    """:func:`mask_figure` on arguments it has checked: ``data`` a (T, S) bool array, the labels lists of S and T
    strings or None, ``highlight_row`` a valid row or None. Unchecked, for the library's redraws."""
    t, s = data.shape
    # Greys on [-0.15, 1.25]: True (1) dark grey, False (0) light grey, so white cell borders show on both.
    _grid_image(ax, data.astype(float), x_labels, y_labels, "Greys", vmin=-0.15, vmax=1.25)
    ax.set_xticks(np.arange(-0.5, s, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, t, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.0)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if highlight_row is not None:
        _outline_row(ax, highlight_row, s)
    return ax


def positional_matrix(table: ArrayLike, ax=None, title: Optional[str] = None, cmap: str = "RdBu_r",
                      colorbar: bool = True):
    """Draw a positional-encoding table: positions down, dimensions across (low dimensions vary fastest).

    Args:
        table: e.g. :func:`transformer_lib.positional.sinusoidal_table` ``(n, d)``.
        ax: an Axes to draw on (default: a new figure).
        title: the Axes title.
        cmap: a diverging colour map; the range is symmetric around 0.
        colorbar: add a colour bar.

    Shapes:
        table (n_positions, d_model).

    Returns:
        The ``Axes``.
    """
    data = as_numpy("table", table, ndim=2)
    return draw_positional(_new_ax(ax), data, title, cmap, colorbar)


def draw_positional(ax, data: np.ndarray, title=None, cmap="RdBu_r", colorbar=True):
    """:func:`positional_matrix` on a checked (n, d) array. Unchecked, for the library's redraws."""
    bound = float(np.abs(data).max()) or 1.0
    im = _grid_image(ax, data, None, None, cmap, -bound, bound)
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


# ---------------------------------------------------------------------------------------------- curves
def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` points (same length; as ``training.History.smoothed``)."""
    c = np.cumsum(np.concatenate([[0.0], values]))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def _curve(name: str, value) -> list:
    """Normalise one history into a list of (label suffix, steps, values, dashed)."""
    if hasattr(value, "train_loss") and hasattr(value, "steps"):  # a training.History
        out = [("", np.asarray(value.steps, dtype=float), np.asarray(value.train_loss, dtype=float), False)]
        evals = [(s, m["loss"]) for s, m in getattr(value, "eval", []) if isinstance(m, Mapping) and "loss" in m]
        if evals:
            steps, losses = zip(*evals)
            out.append((" (eval)", np.asarray(steps, float), np.asarray(losses, float), True))
        return out
    if isinstance(value, tuple) and len(value) == 2:
        steps = as_numpy(f"histories[{name!r}] steps", value[0], ndim=1)
        values = as_numpy(f"histories[{name!r}] values", value[1], ndim=1)
        if len(steps) != len(values):
            raise ValueError(f"histories[{name!r}] has {len(steps)} steps but {len(values)} values")
        return [("", steps.astype(float), values.astype(float), False)]
    values = as_numpy(f"histories[{name!r}]", value, ndim=1).astype(float)
    return [("", np.arange(len(values), dtype=float), values, False)]


def plot_curves(histories, ax=None, xlabel: str = "step", ylabel: str = "loss", logy: bool = False,
                smooth: Optional[int] = None, title: Optional[str] = None):
    """Training curves, one colour per run.

    Args:
        histories: a dict ``name -> values`` where values is a list/array (x = 0, 1, …), a pair
            ``(steps, values)``, or a :class:`transformer_lib.training.loop.History` (its training loss, plus its
            evaluation ``'loss'`` dashed when present); a single History or list is drawn as ``'train'``.
        ax: an Axes to draw on (default: a new figure).
        xlabel, ylabel: axis labels.
        logy: logarithmic y axis.
        smooth: window of a trailing moving average; the raw curve stays visible, faint.
        title: the Axes title.

    Shapes:
        each values sequence (N,), with steps (N,).

    Returns:
        The ``Axes``; one solid line per run (plus a faint raw line when smoothing).
    """
    if not isinstance(histories, Mapping):
        histories = {"train": histories}
    if not histories:
        raise ValueError("histories is empty; expected at least one run")
    if smooth is not None and (isinstance(smooth, bool) or not isinstance(smooth, int) or smooth < 1):
        raise ValueError(f"smooth must be a positive int window or None, got {smooth!r}")
    ax = _new_ax(ax)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", list(BOOK_COLORS))
    for i, (name, value) in enumerate(histories.items()):
        color = colors[i % len(colors)]
        for suffix, steps, values, dashed in _curve(str(name), value):
            style = "--" if dashed else "-"
            if smooth and smooth > 1 and not dashed:
                ax.plot(steps, values, style, color=color, alpha=0.25, linewidth=1.0)
                values = _moving_average(values, smooth)
            ax.plot(steps, values, style, color=color, label=f"{name}{suffix}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


def plot_series(x: ArrayLike, series: Mapping[str, ArrayLike], xlabel: str = "", ylabel: str = "",
                logx: bool = False, logy: bool = False, ax=None, title: Optional[str] = None,
                marker: Optional[str] = "o"):
    """Measured series against one x axis (timings against length, accuracy against distance …).

    Args:
        x: the shared x values.
        series: ``name -> y values`` (same length as ``x``; NaN leaves a gap, e.g. out of memory).
        xlabel, ylabel: axis labels.
        logx, logy: logarithmic axes.
        ax: an Axes to draw on (default: a new figure).
        title: the Axes title.
        marker: point marker (None for lines only).

    Shapes:
        x (N,); each y (N,).

    Returns:
        The ``Axes`` with one line per series.
    """
    xs = as_numpy("x", x, ndim=1).astype(float)
    if not isinstance(series, Mapping) or not series:
        raise TypeError(f"series must be a non-empty dict name -> values, got {type(series).__name__}")
    ax = _new_ax(ax)
    for name, y in series.items():
        ys = as_numpy(f"series[{name!r}]", y, ndim=1).astype(float)
        if len(ys) != len(xs):
            raise ValueError(f"series[{name!r}] has {len(ys)} values but x has {len(xs)}")
        ax.plot(xs, ys, marker=marker, label=str(name))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(series) > 1:
        ax.legend()
    return ax
