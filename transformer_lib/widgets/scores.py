"""Explorers of what shapes the scores: sinusoidal positions, masks and the 1/√d_k scaling (chapters 5, 6, 8, 9
and 12). The package :mod:`~transformer_lib.widgets` exports the explorers."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ..checks import check_choice, check_index, check_labels, check_positive_int, check_tensor
from ..attention import causal_mask, combine_masks, padding_mask
from ..plotting import draw_mask, draw_positional
from ..positional import sinusoidal_table
from ..efficient import sparse_pattern
from .base import entropy, explorer, figure, require_widgets, show_token, token_grid


# ----------------------------------------------------------------------------------------------------------------
# 3. Sinusoidal positions (chapter 5)
# ----------------------------------------------------------------------------------------------------------------
def position_similarity(n: int, d: int, p: int, normalize: bool = False) -> np.ndarray:
    """Dot products ``PE[p] · PE[q]`` of the sinusoidal encoding of position ``p`` with every position ``q``.

    ``PE[p] · PE[p] = d/2`` (each sin/cos pair contributes 1) and ``PE[p] · PE[q] = Σ_i cos(ω_i (p - q))`` depends
    only on the offset, so the curve peaks at ``p`` and is the same shape wherever ``p`` sits.

    Args:
        n: number of positions.
        d: d_model (even).
        p: the reference position.
        normalize: divide by ``d/2`` (cosine similarity, 1 at ``p``).

    Shapes:
        returns (n,) float64.
    """
    table = sinusoidal_table(n, d)  # (n, d); validates n and d
    p = check_index("p", p, n, "positions")
    sims = _similarity(table, p)
    return sims / (d / 2) if normalize else sims


def _similarity(table: torch.Tensor, p: int) -> np.ndarray:
    """``PE[p] · PE[q]`` for every q, in float64, from a (n, d) table and a valid position ``p``."""
    table = table.double()
    return (table @ table[p]).numpy()  # (n,)


def plot_sinusoidal(n: int, d: int, p: int):
    """The (n, d) sinusoidal matrix and the similarity of position ``p`` with all others.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    table = sinusoidal_table(n, d)
    p = check_index("p", p, n, "positions")
    return _draw_sinusoidal(table, _similarity(table, p), p)


def _draw_sinusoidal(table: torch.Tensor, sims: np.ndarray, p: int):
    """:func:`plot_sinusoidal` of a table, its similarities with position ``p`` and ``p`` (a redraw)."""
    n, d = table.shape
    fig = figure(8.5, 3.2, wspace=0.35)
    left, right = fig.subplots(1, 2)
    # the colour range is ±max|PE| = ±1
    draw_positional(left, table.numpy(), title=f"PE (n={n}, d_model={d})", cmap="RdBu", colorbar=False)
    left.axhline(p, color="k", linewidth=1)
    fig.colorbar(left.images[0], ax=left, shrink=0.8)
    right.plot(range(n), sims, color="C0")
    right.axvline(p, color="C3", linestyle="--", linewidth=1)
    right.set_xlabel("position q")
    right.set_ylabel(f"PE[{p}] · PE[q]")
    right.set_title(f"similarity with position {p}")
    return fig


def sinusoidal_explorer(max_len: int = 128, max_d: int = 128):
    """Sliders ``d_model`` (even), ``length`` and ``p`` over the sinusoidal table and the similarity of position p.

    Args:
        max_len: the largest length offered.
        max_d: the largest d_model offered.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("max_d", max_d)
    if max_len < 2 or max_d < 2:
        raise ValueError(f"max_len and max_d must be at least 2, got max_len={max_len}, max_d={max_d}")
    widgets = require_widgets()
    length = min(64, max_len)
    controls = {
        "d_model": widgets.IntSlider(value=min(64, max_d - max_d % 2), min=2, max=max_d - max_d % 2, step=2,
                                     description="d_model"),
        "length": widgets.IntSlider(value=length, min=2, max=max_len, description="length n"),
        "p": widgets.IntSlider(value=length // 2, min=0, max=length - 1, description="position p"),
    }

    def on_change(name, value):
        if name == "length":
            controls["p"].max = value - 1  # clamps p's value too

    def render(d_model, length, p):  # one table per view, drawn unchecked (the sliders keep p < length)
        table = sinusoidal_table(length, d_model)
        sims = _similarity(table, p)
        others = np.delete(sims, p)
        return [_draw_sinusoidal(table, sims, p),
                f"PE[{p}]·PE[{p}] = {sims[p]:.1f} (= d_model/2); largest with another position: "
                f"{others.max():.2f}" if others.size else ""]

    return explorer(controls, render, on_change)


# ----------------------------------------------------------------------------------------------------------------
# 4. Masks (chapters 6, 9, 12)
# ----------------------------------------------------------------------------------------------------------------
MASK_KINDS = ("none", "causal", "padding", "causal+padding", "sliding", "local")
_USES_LENGTH = ("padding", "causal+padding")
_USES_WINDOW = ("sliding", "local")


def mask_for(kind: str, n: int, length: Optional[int] = None, window: Optional[int] = None) -> torch.Tensor:
    """A (n, n) attention mask of one kind (True = query i may attend to key j), built from the library's masks
    (the windows from :func:`~transformer_lib.efficient.sparse.sparse_pattern`).

    Kinds: ``'none'`` (all True); ``'causal'`` (j ≤ i); ``'padding'`` (keys j < length are real);
    ``'causal+padding'``;
    ``'sliding'`` (causal window: i - window < j ≤ i); ``'local'`` (band |i - j| ≤ window, BigBird's local part).

    Args:
        kind: one of :data:`MASK_KINDS`.
        n: sequence length.
        length: real tokens, for the padding kinds (ignored otherwise).
        window: window width, for ``'sliding'`` and ``'local'`` (ignored otherwise).

    Shapes:
        returns (n, n) bool.
    """
    check_choice("kind", kind, MASK_KINDS)
    check_positive_int("n", n)
    if kind in _USES_LENGTH:
        if length is None:
            raise ValueError(f"mask kind {kind!r} needs length= (the number of real tokens)")
        check_positive_int("length", length)
        if length > n:
            raise ValueError(f"length must be at most n={n}, got {length}")
    if kind in _USES_WINDOW:
        if window is None:
            raise ValueError(f"mask kind {kind!r} needs window= (the window width)")
        check_positive_int("window", window)
    return _mask(kind, n, length, window)


def _mask(kind: str, n: int, length: Optional[int], window: Optional[int]) -> torch.Tensor:
    """:func:`mask_for` of checked arguments."""
    mask = torch.ones(n, n, dtype=torch.bool)
    if "causal" in kind:
        mask = causal_mask(n)
    if kind in _USES_LENGTH:
        keys = padding_mask(lengths=torch.tensor([length]), max_len=n)[0, 0]  # (1, n): same for every query
        mask = combine_masks(mask, keys)
    if kind in _USES_WINDOW:
        # sliding: |i - j| <= window - 1 and j <= i; local: |i - j| <= window (no global or random keys)
        band = sparse_pattern(n, window - 1, causal=True) if kind == "sliding" else sparse_pattern(n, window)
        mask = combine_masks(mask, band)
    return mask


def visible_positions(mask: torch.Tensor, i: int) -> List[int]:
    """The key positions query ``i`` may attend to under a (T, S) boolean mask."""
    check_tensor("mask", mask, ndim=2, dtype="bool")
    i = check_index("i", i, mask.shape[0], "queries")
    return _visible(mask, i)


def _visible(mask: torch.Tensor, i: int) -> List[int]:
    """:func:`visible_positions` of a checked mask and query."""
    return torch.nonzero(mask[i]).flatten().tolist()


def plot_mask(mask: torch.Tensor, i: Optional[int] = None, tokens: Optional[Sequence[str]] = None, title: str = ""):
    """The mask as a grid, True (may attend) dark; row ``i`` outlined (drawn by
    :func:`~transformer_lib.plotting.mask_figure`).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    check_tensor("mask", mask, ndim=2, dtype="bool")
    t, s = mask.shape
    tokens = check_labels("tokens", tokens, s, "the key axis of the mask", "tokens")
    if i is not None:
        i = check_index("i", i, t, "queries")
    return _draw_mask(mask, i, tokens, title)


def _draw_mask(mask: torch.Tensor, i: Optional[int], tokens, title: str):
    """:func:`plot_mask` on checked arguments (a redraw)."""
    t, s = mask.shape
    fig = figure(min(6.0, 2.0 + 0.3 * s), min(5.0, 1.6 + 0.3 * t), tokens or (), tokens or ())
    ax = draw_mask(fig.add_subplot(), mask.cpu().numpy(), title=title or "mask (dark = may attend)", highlight_row=i)
    token_grid(ax, tokens, None if tokens is None else tokens[:t], "key j", "query i")
    return fig


def mask_explorer(n: int = 8, tokens: Optional[Sequence[str]] = None):
    """Choose a mask kind, its length/window and a query position; see the mask and what that position sees.

    Controls: ``kind`` (Dropdown of ``MASK_KINDS``: none, causal, padding, causal+padding, sliding, local),
    ``length`` and ``window`` (IntSliders, enabled only for the kinds that use them), ``i`` (IntSlider).

    Args:
        n: sequence length (taken from ``tokens`` when given).
        tokens: optional token strings for the axes.
    """
    if tokens is not None:
        tokens = check_labels("tokens", tokens, noun="tokens")
        n = len(tokens)
    check_positive_int("n", n)
    widgets = require_widgets()
    controls = {
        "kind": widgets.Dropdown(options=list(MASK_KINDS), value="causal", description="mask"),
        "length": widgets.IntSlider(value=max(1, n - n // 3), min=1, max=n, description="real tokens",
                                    disabled=True),
        "window": widgets.IntSlider(value=min(3, n), min=1, max=n, description="window", disabled=True),
        "i": widgets.IntSlider(value=n - 1, min=0, max=n - 1, description="query i"),
    }

    def on_change(name, value):
        if name == "kind":
            controls["length"].disabled = value not in _USES_LENGTH
            controls["window"].disabled = value not in _USES_WINDOW

    def render(kind, length, window, i):  # the controls' values are valid: built and drawn unchecked
        mask = _mask(kind, n, length, window)
        seen = _visible(mask, i)
        words = " ".join(show_token(tokens[j]) for j in seen) if tokens is not None else ""
        who = f"query {i}" + (f" ({show_token(tokens[i])!r})" if tokens is not None else "")
        return [_draw_mask(mask, i, tokens, f"{kind} mask (dark = may attend)"),
                f"{who} sees {len(seen)} of {n} keys: {seen}" + (f"  → {words}" if words else "")]

    return explorer(controls, render, on_change)


# ----------------------------------------------------------------------------------------------------------------
# 5. Why divide by √d_k (chapter 8)
# ----------------------------------------------------------------------------------------------------------------
def softmax_stats(d_k: int, scaled: bool, n_keys: int = 16, seed: int = 0) -> Dict[str, object]:
    """Softmax of ``n_keys`` random dot products ``qᵀk_j`` with N(0, 1) entries, with or without ``1/√d_k``.

    Var(qᵀk) = d_k, so without scaling the scores spread as √d_k and the softmax saturates (one weight near 1,
    entropy near 0); with scaling they keep unit variance.

    Args:
        d_k: key/query size.
        scaled: divide the scores by √d_k.
        n_keys: number of keys.
        seed: seed of q and the keys.

    Returns:
        dict with ``scores`` (n_keys,), ``weights`` (n_keys,), ``max_weight`` and ``entropy`` (nats; the uniform
        distribution has ``log n_keys``).
    """
    check_positive_int("d_k", d_k)
    check_positive_int("n_keys", n_keys)
    return _softmax_stats(d_k, scaled, n_keys, seed)


def _softmax_stats(d_k: int, scaled: bool, n_keys: int, seed: int) -> Dict[str, object]:
    """:func:`softmax_stats` of checked sizes."""
    g = torch.Generator().manual_seed(int(seed))
    q = torch.randn(d_k, generator=g, dtype=torch.float64)
    keys = torch.randn(n_keys, d_k, generator=g, dtype=torch.float64)
    scores = keys @ q  # (n_keys,)
    if scaled:
        scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=0).numpy()
    return {"scores": scores.numpy(), "weights": weights, "max_weight": float(weights.max()),
            "entropy": entropy(weights)}


def plot_softmax_scaling(d_k: int, n_keys: int = 16, seed: int = 0):
    """Side-by-side softmax weights of the same random scores without and with ``1/√d_k``.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    check_positive_int("d_k", d_k)
    check_positive_int("n_keys", n_keys)
    return _draw_softmax_scaling([_softmax_stats(d_k, scaled, n_keys, seed) for scaled in (False, True)], n_keys)


def _draw_softmax_scaling(stats_pair, n_keys: int):
    """:func:`plot_softmax_scaling` of the two :func:`softmax_stats` (unscaled, scaled) of one view (a redraw)."""
    fig = figure(8.0, 2.8, top=0.6, wspace=0.1)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, scaled, stats in zip(axes, (False, True), stats_pair):
        ax.bar(range(n_keys), stats["weights"], color="C1" if not scaled else "C0")
        ax.set_ylim(0, 1)
        ax.set_xticks(range(0, n_keys, max(1, n_keys // 8)))
        ax.set_xlabel("key j")
        label = "softmax(qᵀk / √d_k)" if scaled else "softmax(qᵀk)"
        ax.set_title(f"{label}\nmax {stats['max_weight']:.2f}, entropy {stats['entropy']:.2f} nats", fontsize=10)
    axes[0].set_ylabel("weight")
    return fig


def softmax_temperature_explorer(n_keys: int = 16, seed: int = 0, max_d_k: int = 4096):
    """Slide d_k (powers of two) and watch unscaled softmax saturate while the scaled one does not.

    Controls: ``d_k`` (SelectionSlider 1, 2, 4, … ``max_d_k``) and ``seed`` (IntSlider, redraws q and the keys).

    Args:
        n_keys: number of keys.
        seed: initial seed.
        max_d_k: largest d_k offered.
    """
    check_positive_int("n_keys", n_keys)
    check_positive_int("max_d_k", max_d_k)
    widgets = require_widgets()
    options = [2 ** i for i in range(int(math.log2(max_d_k)) + 1)]
    controls = {
        "d_k": widgets.SelectionSlider(options=options, value=min(64, options[-1]), description="d_k"),
        "seed": widgets.IntSlider(value=int(seed), min=0, max=max(20, int(seed)), description="seed"),
    }

    def render(d_k, seed):  # each softmax computed once per view
        raw, scaled = _softmax_stats(d_k, False, n_keys, seed), _softmax_stats(d_k, True, n_keys, seed)
        return [_draw_softmax_scaling((raw, scaled), n_keys),
                f"d_k = {d_k}: spread (std) of the {n_keys} scores {raw['scores'].std():.2f} unscaled vs "
                f"{scaled['scores'].std():.2f} scaled; uniform entropy would be {math.log(n_keys):.2f} nats"]

    return explorer(controls, render)
