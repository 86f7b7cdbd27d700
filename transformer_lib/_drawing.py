"""Drawing primitives of :mod:`~transformer_lib.diagrams`: boxes, arrows, labels and tensors, laid out in inches.

The data coordinates of a :func:`canvas` are inches, so that positions, box sizes and font sizes share one unit.
The colours are the palette of :mod:`~transformer_lib.plotting` with fixed roles, the same in every diagram. The
checks only diagrams need (one query's weights, an RNN path) live here too, on those of ``checks`` (words, arrays):
each error names the argument, the value received and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgb
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from .checks import as_numpy
from .plotting import BOOK_COLORS

BLUE, ORANGE, GREEN, VERMILION, PINK, SKY, YELLOW, BLACK = BOOK_COLORS
GREY, INK = "#8C8C8C", "#444444"
QUERY, KEY, VALUE, HIGHLIGHT = VERMILION, BLUE, GREEN, VERMILION
ENCODER, DECODER, CROSS = BLUE, ORANGE, PINK



# ------------------------------------------------------------------------------------------- primitives
@dataclass(frozen=True)
class Box:
    """A drawn box: centre ``(x, y)`` and size ``(w, h)`` in inches, with the anchors arrows attach to."""
    x: float
    y: float
    w: float
    h: float

    top = property(lambda self: (self.x, self.y + self.h / 2))
    bottom = property(lambda self: (self.x, self.y - self.h / 2))
    left = property(lambda self: (self.x - self.w / 2, self.y))
    right = property(lambda self: (self.x + self.w / 2, self.y))


def canvas(width: float, height: float):
    """A figure whose data coordinates are inches, with no axes drawn."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def tint(color, amount: float = 0.2):
    """``color`` mixed with white: ``amount`` 1 is the colour itself, 0 is white."""
    return tuple(1 - amount * (1 - c) for c in to_rgb(color))


def box(ax, x, y, w, h, text="", color=GREY, size=9, lw=1.2, ls="-", fill=0.2, textcolor="black", zorder=3):
    """A rounded box centred at ``(x, y)``, filled with a tint of its edge colour, with centred text."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.05",
                                fc=tint(color, fill), ec=color, lw=lw, ls=ls, zorder=zorder))
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, color=textcolor, zorder=zorder + 1)
    return Box(x, y, w, h)


def circle(ax, x, y, r, text="", color=BLACK, size=10, fc="white", zorder=3):
    """A circle of radius ``r`` centred at ``(x, y)`` with centred text (a sum, a step number)."""
    ax.add_patch(Circle((x, y), r, fc=fc, ec=color, lw=1.2, zorder=zorder))
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, zorder=zorder + 1)
    return Box(x, y, 2 * r, 2 * r)


def arrow(ax, start, end, color=BLACK, lw=1.1, alpha=1.0, ls="-", head=True, zorder=2):
    """A straight arrow from ``start`` to ``end``, its tip exactly at ``end`` (a plain line with ``head=False``)."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>" if head else "-", mutation_scale=9, color=color,
                                 lw=lw, alpha=alpha, linestyle=ls, shrinkA=0, shrinkB=0, zorder=zorder))


def label(ax, x, y, text, size=8.5, color=INK, **kw):
    """Free text, centred at ``(x, y)`` unless ``ha``/``va`` say otherwise."""
    return ax.text(x, y, text, fontsize=size, color=color, **{"ha": "center", "va": "center", **kw})


def attention_edges(ax, xs_in, xs_out, y_in, y_out, allowed, focus, color, symbol, w, h=0.28):
    """One attention layer as a graph: boxes :math:`symbol_i` at ``y_out`` read the boxes at ``y_in`` along the
    edges ``allowed(i, j)``; the edges into box ``focus`` are strong, the others faint. Returns the boxes."""
    outs = []
    for i, x in enumerate(xs_out):
        outs.append(box(ax, x, y_out, w, h, f"${symbol}_{{{i + 1}}}$", color, size=8.5, lw=2.0 if i == focus else 1.2))
        for j, xj in enumerate(xs_in):
            if allowed(i, j):  # arrival points spread along the box, so that the arrow heads stay apart
                hot, end = i == focus, (x + (j - (len(xs_in) - 1) / 2) * min(0.07, 0.3 / len(xs_in)), y_out - h / 2)
                arrow(ax, (xj, y_in + h / 2), end, color, lw=1.6 if hot else 0.7, alpha=1.0 if hot else 0.3,
                      head=hot, zorder=2 if hot else 1)
    return outs


# ------------------------------------------------------------------------------------------- validation
def check_weights(weights, length: int, row: int) -> np.ndarray:
    """Attention weights of one query: (S,), or (T, S) of which row ``row`` is taken; None is uniform."""
    if weights is None:
        return np.full(length, 1.0 / length)
    w = as_numpy("weights", weights).astype(float)
    if w.ndim == 2:
        if row >= w.shape[0]:
            raise ValueError(f"weights has {w.shape[0]} rows (queries), too few for query {row + 1}")
        w = w[row]
    if w.shape != (length,):
        raise ValueError(f"weights must have shape ({length},) or (n_queries, {length}), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or abs(w.sum() - 1) > 1e-3:
        raise ValueError(f"weights must be non-negative and sum to 1 (a softmax), got sum {w.sum():.4f}")
    return w


def check_path(path, n: int):
    """An RNN path ``(i, j)`` with ``1 <= i <= j <= n``, ``'ends'`` for ``(1, n)``, or None."""
    value = (1, n) if path == "ends" else path
    if value is not None and (not isinstance(value, (tuple, list)) or len(value) != 2
                              or not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in value)
                              or not 1 <= value[0] <= value[1] <= n):
        raise ValueError(f"highlight_path must be 'ends', None or (i, j) with 1 <= i <= j <= n_steps = {n}, "
                         f"got {path!r}")
    return value


# ------------------------------------------------------------------------------------------ tensors
def tensor_cards(ax, x, y, colors, cell, offset=0.09):
    """A 3-D tensor as a stack of 2-D cards (first axis from front to back), lower-left corner of the front card
    at ``(x, y)``; ``colors`` is (cards, rows, cols, 3), one RGB colour per entry. Returns the width and height."""
    k, rows, cols = colors.shape[:3]
    limits = ax.get_xlim(), ax.get_ylim()  # imshow would rescale the axes
    for m in reversed(range(k)):  # back to front
        x0, y0 = x + m * offset, y + m * offset
        ax.imshow(colors[m], extent=(x0, x0 + cols * cell, y0, y0 + rows * cell), interpolation="nearest",
                  zorder=2 + 2 * (k - m))
        lines = [[(x0 + c * cell, y0), (x0 + c * cell, y0 + rows * cell)] for c in range(cols + 1)]
        lines += [[(x0, y0 + r * cell), (x0 + cols * cell, y0 + r * cell)] for r in range(rows + 1)]
        ax.add_collection(LineCollection(lines, colors="white" if cell > 0.05 else "none", linewidths=0.6,
                                         zorder=3 + 2 * (k - m)))
        ax.add_patch(Rectangle((x0, y0), cols * cell, rows * cell, fill=False, ec=INK, lw=0.8,
                               zorder=3 + 2 * (k - m)))
    ax.set_xlim(limits[0])
    ax.set_ylim(limits[1])
    return cols * cell + (k - 1) * offset, rows * cell + (k - 1) * offset
