"""Explorers of attention weights: one query over the keys, bare self-attention, the heads of a trained model
(chapters 3, 4, 7 and 10). The package :mod:`~transformer_lib.widgets` exports the explorers."""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Optional, Sequence

import numpy as np
import torch

from ..checks import as_tensor, check_choice, check_index, check_labels, check_number
from .base import (ArrayLike, explorer, figure, require_widgets, show_token, token_axis, token_grid,
                   token_options)
from ..attention import attention_reference
from ..blocks import AttentionWeights
from ..plotting import draw_heatmap


# ----------------------------------------------------------------------------------------------------------------
# 1. One query's attention over the keys (chapters 3, 4, 10)
# ----------------------------------------------------------------------------------------------------------------
def _weights_3d(weights) -> torch.Tensor:
    w = as_tensor("weights", weights, ndim=(2, 3))
    return w if w.dim() == 3 else w.unsqueeze(0)  # (H, T, S)


def query_attention(weights: ArrayLike, query_index: int, head: int = 0) -> np.ndarray:
    """The attention weights of one query over all keys.

    Args:
        weights: attention weights, (T, S) or (H, T, S).
        query_index: which query row.
        head: which head (only 0 for 2-D weights).

    Shapes:
        returns (S,) float64; sums to 1 for a softmax row (0 for a fully masked one).
    """
    w = _weights_3d(weights)  # (H, T, S)
    head, query_index = _check_query(w, query_index, head)
    return w[head, query_index].numpy()


def _check_query(w: torch.Tensor, query_index, head):
    head = check_index("head", head, w.shape[0], "heads")
    return head, check_index("query_index", query_index, w.shape[1], "queries")


def _attention_tokens(tokens, weights, key_tokens):
    w = _weights_3d(weights)
    tokens = check_labels("tokens", tokens, w.shape[1], "the query axis of weights", "tokens")
    if key_tokens is None:
        if w.shape[2] != w.shape[1]:
            raise ValueError(f"weights has {w.shape[1]} queries and {w.shape[2]} keys; pass key_tokens for the keys")
        return w, tokens, tokens, True
    return w, tokens, check_labels("key_tokens", key_tokens, w.shape[2], "the key axis of weights", "tokens"), False


def plot_query_attention(tokens: Sequence[str], weights: ArrayLike, query_index: int, head: int = 0,
                         key_tokens: Optional[Sequence[str]] = None):
    """Bar chart of one query's weights over the keys (the query's own position highlighted).

    Args:
        tokens: the query tokens (T); also the keys unless ``key_tokens`` is given.
        weights: (T, S) or (H, T, S).
        query_index: which query.
        head: which head.
        key_tokens: the key tokens (S) for cross-attention.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    w, tokens, key_tokens, is_self = _attention_tokens(tokens, weights, key_tokens)
    head, query_index = _check_query(w, query_index, head)
    return _draw_query_attention(w, tokens, key_tokens, is_self, query_index, head)


def _draw_query_attention(w: torch.Tensor, tokens, key_tokens, is_self: bool, query_index: int, head: int):
    """:func:`plot_query_attention` on checked arguments (a redraw)."""
    row = w[head, query_index].numpy()
    fig = figure(max(4.0, 0.45 * len(key_tokens) + 1.5), 2.8, key_tokens)
    ax = fig.add_subplot()
    colors = ["C0"] * len(row)
    if is_self:
        colors[query_index] = "C3"
    ax.bar(range(len(row)), row, color=colors)
    token_axis(ax, key_tokens)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    heads = f", head {head}" if w.shape[0] > 1 else ""
    ax.set_title(f"query {query_index} ({show_token(tokens[query_index])!r}{heads})")
    return fig


def attention_explorer(tokens: Sequence[str], weights: ArrayLike, key_tokens: Optional[Sequence[str]] = None):
    """Pick a query token (and a head for 3-D weights) and see its attention over the keys.

    Args:
        tokens: query tokens (T).
        weights: (T, S) or (H, T, S) attention weights.
        key_tokens: key tokens (S), for cross-attention; defaults to ``tokens``.

    Returns:
        an ``ipywidgets.VBox`` with controls ``query`` (Dropdown) and ``head`` (IntSlider, 3-D weights only).
    """
    w, tokens, key_tokens, is_self = _attention_tokens(tokens, weights, key_tokens)
    widgets = require_widgets()
    controls = {"query": widgets.Dropdown(options=token_options(tokens), value=0, description="query")}
    if w.shape[0] > 1:
        controls["head"] = widgets.IntSlider(value=0, min=0, max=w.shape[0] - 1, description="head")

    def render(query, head=0):  # the controls offer valid indices only: nothing to check again
        row = w[head, query].numpy()
        top = int(row.argmax())
        return [_draw_query_attention(w, tokens, key_tokens, is_self, query, head),
                f"strongest key: {top} ({show_token(key_tokens[top])!r}) with weight {row[top]:.2f}"]

    return explorer(controls, render)


# ----------------------------------------------------------------------------------------------------------------
# 2. Bare self-attention on hand-made embeddings (chapter 4)
# ----------------------------------------------------------------------------------------------------------------
PROJECTIONS = ("identity", "random")


def self_attention_weights(embeddings: ArrayLike, projection: str = "identity", scale: float = 1.0,
                           seed: int = 0) -> np.ndarray:
    """Self-attention weights ``softmax(scale · (XQ)(XK)ᵀ)`` of a sentence of embeddings.

    With ``projection='identity'`` (Q = K = I) the score of a token with itself is its squared norm, which tends to
    dominate; ``'random'`` draws Q and K with N(0, 1/d) entries from ``seed``.

    Args:
        embeddings: X, one row per token.
        projection: ``'identity'`` or ``'random'``.
        scale: multiplies the scores (an inverse temperature): large is sharper, small is flatter.
        seed: seed of the random projections.

    Shapes:
        embeddings (T, d) -> weights (T, T) float64, rows sum to 1.
    """
    x = as_tensor("embeddings", embeddings, ndim=2)  # (T, d)
    check_choice("projection", projection, PROJECTIONS)
    scale = check_number("scale", scale, strict=True)
    return _self_attention_weights(x, projection, scale, seed)


def _self_attention_weights(x: torch.Tensor, projection: str, scale: float, seed: int) -> np.ndarray:
    """:func:`self_attention_weights` of checked float64 embeddings."""
    if projection == "identity":
        q, k = x, x
    else:
        d = x.shape[1]
        g = torch.Generator().manual_seed(int(seed))
        Q = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        K = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        q, k = x @ Q, x @ K  # (T, d)
    # The library's softmax attention with the given scale; only its weights are shown (k stands in for the values).
    _, weights = attention_reference(q[None, None], k[None, None], k[None, None], scale=scale)  # (1, 1, T, T)
    return weights[0, 0].numpy()


def plot_self_attention(tokens: Sequence[str], embeddings: ArrayLike, query_index: int,
                        projection: str = "identity", scale: float = 1.0, seed: int = 0):
    """The whole (T, T) weight matrix and the chosen word's row as bars.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    weights = self_attention_weights(embeddings, projection, scale, seed)
    tokens = check_labels("tokens", tokens, weights.shape[0], "embeddings", "tokens")
    query_index = check_index("query_index", query_index, len(tokens), "tokens")
    return _draw_self_attention(tokens, weights, query_index)


def _draw_self_attention(tokens, weights: np.ndarray, query_index: int):
    """:func:`plot_self_attention` on checked arguments (a redraw)."""
    fig = figure(max(7.0, 0.7 * len(tokens) + 2), 3.2, tokens, tokens)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.4))
    draw_heatmap(left, weights, title="all weights α_ij", cmap="Blues", vmin=0, vmax=1, colorbar=False,
                 highlight_row=query_index)
    token_grid(left, tokens, tokens, "key j", "query i")
    colors = ["C0"] * len(tokens)
    colors[query_index] = "C3"
    right.bar(range(len(tokens)), weights[query_index], color=colors)
    token_axis(right, tokens)
    right.set_ylim(0, 1)
    right.set_title(f"{show_token(tokens[query_index])!r} attends to")
    return fig


def self_attention_explorer(tokens: Sequence[str], embeddings: ArrayLike, seed: int = 0):
    """Chapter 4's explorer: why Q, K (and V) are needed.

    Controls: ``word`` (Dropdown), ``projection`` (ToggleButtons ``Q = K = I`` / random), ``scale``
    (FloatLogSlider, 0.1…10, multiplies the scores). Shows the weights and the share of attention a word keeps on
    itself.

    Args:
        tokens: the sentence (T words).
        embeddings: (T, d) hand-made embeddings.
        seed: seed of the random projections.
    """
    x = as_tensor("embeddings", embeddings, ndim=2)
    tokens = check_labels("tokens", tokens, x.shape[0], "embeddings", "tokens")
    widgets = require_widgets()
    controls = {
        "word": widgets.Dropdown(options=token_options(tokens), value=len(tokens) - 1, description="word"),
        "projection": widgets.ToggleButtons(options=[("Q = K = I", "identity"), ("random Q, K (seeded)", "random")],
                                            value="identity", description="projections"),
        "scale": widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description="score scale"),
    }

    def render(word, projection, scale):  # values the controls offer: computed and drawn once, unchecked
        weights = _self_attention_weights(x, projection, float(scale), seed)
        diagonal = float(np.diag(weights).mean())
        return [_draw_self_attention(tokens, weights, word),
                f"share of {show_token(tokens[word])!r}'s attention on itself: {weights[word, word]:.2f}; "
                f"mean share on the diagonal over the sentence: {diagonal:.2f}"]

    return explorer(controls, render)


# ----------------------------------------------------------------------------------------------------------------
# 6. Heads of a trained model (chapter 7)
# ----------------------------------------------------------------------------------------------------------------
def _stack_layers(weights) -> torch.Tensor:
    """(L, H, T, S) from a tensor, from a list of per-layer (H, T, S) / (1, H, T, S) tensors, or from a model's
    :class:`~transformer_lib.blocks.AttentionWeights` when it holds one kind of attention."""
    if isinstance(weights, AttentionWeights):
        kinds = [f.name for f in fields(weights) if getattr(weights, f.name)]
        if len(kinds) != 1:
            raise ValueError(f"weights holds {len(kinds)} kinds of attention ({', '.join(kinds) or 'none'}); "
                             f"pass one, e.g. weights.{kinds[-1] if kinds else 'self_attn'}")
        weights = getattr(weights, kinds[0])
    if isinstance(weights, (list, tuple)):
        if not weights:
            raise ValueError("weights is an empty list; expected one (H, T, S) tensor per layer")
        layers = []
        for i, w in enumerate(weights):
            w = as_tensor(f"weights[{i}]", w, ndim=(3, 4))
            if w.dim() == 4:
                if w.shape[0] != 1:
                    raise ValueError(f"weights[{i}] has batch size {w.shape[0]}; select one example first, "
                                     "e.g. [w[b] for w in weights]")
                w = w[0]
            layers.append(w)
        if len({tuple(w.shape) for w in layers}) > 1:
            raise ValueError(f"all layers must have the same (H, T, S) shape, got {[tuple(w.shape) for w in layers]}")
        return torch.stack(layers)
    return as_tensor("weights", weights, ndim=4)


def head_weights(weights, layer: int, head: int) -> np.ndarray:
    """The (T, S) attention map of one head of one layer.

    Args:
        weights: (L, H, T, S), a list of L per-layer (H, T, S) or (1, H, T, S) tensors, or a model's
            :class:`~transformer_lib.blocks.AttentionWeights` holding one kind (``w.cross_attn``…).
        layer: layer index.
        head: head index.
    """
    w = _stack_layers(weights)
    layer, head = _check_head(w, layer, head)
    return w[layer, head].numpy()


def _check_head(w: torch.Tensor, layer, head):
    layer = check_index("layer", layer, w.shape[0], "layers")
    return layer, check_index("head", head, w.shape[1], "heads")


def _head_tokens(w: torch.Tensor, tokens, key_tokens):
    tokens = check_labels("tokens", tokens, w.shape[2], "the query axis of weights", "tokens")
    key_tokens = tokens if key_tokens is None else key_tokens
    return tokens, check_labels("key_tokens", key_tokens, w.shape[3], "the key axis of weights", "tokens")


def plot_head(tokens: Sequence[str], weights, layer: int, head: int, key_tokens: Optional[Sequence[str]] = None):
    """Heatmap of one head (rows: queries, columns: keys).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    w = _stack_layers(weights)
    tokens, key_tokens = _head_tokens(w, tokens, key_tokens)
    layer, head = _check_head(w, layer, head)
    return _draw_head(tokens, key_tokens, w[layer, head].numpy(), layer, head)


def _draw_head(tokens, key_tokens, grid: np.ndarray, layer: int, head: int):
    """:func:`plot_head` on checked arguments (a redraw): ``grid`` is the head's (T, S) map."""
    size = min(7.0, 2.2 + 0.32 * max(len(tokens), len(key_tokens)))
    fig = figure(size + 0.8, size, key_tokens, tokens)
    ax = draw_heatmap(fig.add_subplot(), grid, title=f"layer {layer}, head {head}", cmap="Blues", vmin=0, vmax=1,
                      colorbar=False)
    token_grid(ax, key_tokens, tokens)
    fig.colorbar(ax.images[0], ax=ax, shrink=0.8)
    return fig


def heads_explorer(tokens: Sequence[str], weights, key_tokens: Optional[Sequence[str]] = None):
    """Sliders ``layer`` and ``head`` over a model's attention maps.

    Args:
        tokens: query tokens (T).
        weights: (L, H, T, S), a list of per-layer (H, T, S) / (1, H, T, S) tensors, or a model's
            :class:`~transformer_lib.blocks.AttentionWeights` holding one kind of attention.
        key_tokens: key tokens (S) for cross-attention; defaults to ``tokens``.
    """
    w = _stack_layers(weights)  # checked and stacked once; a slider move only slices it
    tokens, key_tokens = _head_tokens(w, tokens, key_tokens)
    widgets = require_widgets()
    controls = {
        "layer": widgets.IntSlider(value=0, min=0, max=w.shape[0] - 1, description="layer"),
        "head": widgets.IntSlider(value=0, min=0, max=w.shape[1] - 1, description="head"),
    }

    def render(layer, head):
        grid = w[layer, head].numpy()
        focus = float(grid.max(axis=-1).mean())
        return [_draw_head(tokens, key_tokens, grid, layer, head),
                f"mean over queries of the largest weight: {focus:.2f} (1 = every query looks at one key)"]

    return explorer(controls, render)
