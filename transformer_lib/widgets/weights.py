"""Explorers of attention weights: one query over the keys, bare self-attention, the heads of a trained model
(chapters 3, 4, 7 and 10). The package :mod:`~transformer_lib.widgets` exports the explorers."""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Optional, Sequence

import numpy as np
import torch

from .._checks import check_choice, check_index, check_number
from .base import (ArrayLike, _as_tensor, _check_tokens, _explorer, _figure, _require_widgets, _show_token,
                   _token_axis, _token_grid, _token_options)
from ..attention import attention_reference
from ..blocks import AttentionWeights
from ..plotting import attention_heatmap


# ----------------------------------------------------------------------------------------------------------------
# 1. One query's attention over the keys (chapters 3, 4, 10)
# ----------------------------------------------------------------------------------------------------------------
def _check_weights_2d_3d(weights) -> torch.Tensor:
    w = _as_tensor("weights", weights, ndim=(2, 3))
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
    w = _check_weights_2d_3d(weights)  # (H, T, S)
    head = check_index("head", head, w.shape[0], "heads")
    query_index = check_index("query_index", query_index, w.shape[1], "queries")
    return w[head, query_index].numpy()


def _attention_tokens(tokens, weights, key_tokens):
    w = _check_weights_2d_3d(weights)
    tokens = _check_tokens("tokens", tokens, w.shape[1], "the query axis of weights")
    if key_tokens is None:
        if w.shape[2] != w.shape[1]:
            raise ValueError(f"weights has {w.shape[1]} queries and {w.shape[2]} keys; pass key_tokens for the keys")
        return w, tokens, tokens, True
    return w, tokens, _check_tokens("key_tokens", key_tokens, w.shape[2], "the key axis of weights"), False


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
    row = query_attention(w, query_index, head)
    fig = _figure(max(4.0, 0.45 * len(key_tokens) + 1.5), 2.8, key_tokens)
    ax = fig.add_subplot()
    colors = ["C0"] * len(row)
    if is_self:
        colors[query_index] = "C3"
    ax.bar(range(len(row)), row, color=colors)
    _token_axis(ax, key_tokens)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    heads = f", head {head}" if w.shape[0] > 1 else ""
    ax.set_title(f"query {query_index} ({_show_token(tokens[query_index])!r}{heads})")
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
    widgets = _require_widgets()
    controls = {"query": widgets.Dropdown(options=_token_options(tokens), value=0, description="query")}
    if w.shape[0] > 1:
        controls["head"] = widgets.IntSlider(value=0, min=0, max=w.shape[0] - 1, description="head")

    def render(query, head=0):
        row = query_attention(w, query, head)
        top = int(row.argmax())
        return [plot_query_attention(tokens, w, query, head, None if is_self else key_tokens),
                f"strongest key: {top} ({_show_token(key_tokens[top])!r}) with weight {row[top]:.2f}"]

    return _explorer(controls, render)


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
    x = _as_tensor("embeddings", embeddings, ndim=2)  # (T, d)
    check_choice("projection", projection, PROJECTIONS)
    scale = check_number("scale", scale, strict=True)
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
    tokens = _check_tokens("tokens", tokens, weights.shape[0], "embeddings")
    query_index = check_index("query_index", query_index, len(tokens), "tokens")
    fig = _figure(max(7.0, 0.7 * len(tokens) + 2), 3.2, tokens, tokens)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.4))
    attention_heatmap(weights, ax=left, title="all weights α_ij", cmap="Blues", vmin=0, vmax=1, colorbar=False,
                      highlight_row=query_index)
    _token_grid(left, tokens, tokens, "key j", "query i")
    colors = ["C0"] * len(tokens)
    colors[query_index] = "C3"
    right.bar(range(len(tokens)), weights[query_index], color=colors)
    _token_axis(right, tokens)
    right.set_ylim(0, 1)
    right.set_title(f"{_show_token(tokens[query_index])!r} attends to")
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
    x = _as_tensor("embeddings", embeddings, ndim=2)
    tokens = _check_tokens("tokens", tokens, x.shape[0], "embeddings")
    widgets = _require_widgets()
    controls = {
        "word": widgets.Dropdown(options=_token_options(tokens), value=len(tokens) - 1, description="word"),
        "projection": widgets.ToggleButtons(options=[("Q = K = I", "identity"), ("random Q, K (seeded)", "random")],
                                            value="identity", description="projections"),
        "scale": widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description="score scale"),
    }

    def render(word, projection, scale):
        weights = self_attention_weights(x, projection, scale, seed)
        diagonal = float(np.diag(weights).mean())
        return [plot_self_attention(tokens, x, word, projection, scale, seed),
                f"share of {_show_token(tokens[word])!r}'s attention on itself: {weights[word, word]:.2f}; "
                f"mean share on the diagonal over the sentence: {diagonal:.2f}"]

    return _explorer(controls, render)


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
            w = _as_tensor(f"weights[{i}]", w, ndim=(3, 4))
            if w.dim() == 4:
                if w.shape[0] != 1:
                    raise ValueError(f"weights[{i}] has batch size {w.shape[0]}; select one example first, "
                                     "e.g. [w[b] for w in weights]")
                w = w[0]
            layers.append(w)
        if len({tuple(w.shape) for w in layers}) > 1:
            raise ValueError(f"all layers must have the same (H, T, S) shape, got {[tuple(w.shape) for w in layers]}")
        return torch.stack(layers)
    return _as_tensor("weights", weights, ndim=4)


def head_weights(weights, layer: int, head: int) -> np.ndarray:
    """The (T, S) attention map of one head of one layer.

    Args:
        weights: (L, H, T, S), a list of L per-layer (H, T, S) or (1, H, T, S) tensors, or a model's
            :class:`~transformer_lib.blocks.AttentionWeights` holding one kind (``w.cross_attn``…).
        layer: layer index.
        head: head index.
    """
    w = _stack_layers(weights)
    layer = check_index("layer", layer, w.shape[0], "layers")
    head = check_index("head", head, w.shape[1], "heads")
    return w[layer, head].numpy()


def _head_tokens(w: torch.Tensor, tokens, key_tokens):
    tokens = _check_tokens("tokens", tokens, w.shape[2], "the query axis of weights")
    key_tokens = tokens if key_tokens is None else key_tokens
    return tokens, _check_tokens("key_tokens", key_tokens, w.shape[3], "the key axis of weights")


def plot_head(tokens: Sequence[str], weights, layer: int, head: int, key_tokens: Optional[Sequence[str]] = None):
    """Heatmap of one head (rows: queries, columns: keys).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    w = _stack_layers(weights)
    tokens, key_tokens = _head_tokens(w, tokens, key_tokens)
    grid = head_weights(w, layer, head)
    size = min(7.0, 2.2 + 0.32 * max(len(tokens), len(key_tokens)))
    fig = _figure(size + 0.8, size, key_tokens, tokens)
    ax = attention_heatmap(grid, ax=fig.add_subplot(), title=f"layer {layer}, head {head}", cmap="Blues", vmin=0,
                           vmax=1, colorbar=False)
    _token_grid(ax, key_tokens, tokens)
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
    w = _stack_layers(weights)
    tokens, key_tokens = _head_tokens(w, tokens, key_tokens)
    widgets = _require_widgets()
    controls = {
        "layer": widgets.IntSlider(value=0, min=0, max=w.shape[0] - 1, description="layer"),
        "head": widgets.IntSlider(value=0, min=0, max=w.shape[1] - 1, description="head"),
    }

    def render(layer, head):
        grid = head_weights(w, layer, head)
        focus = float(grid.max(axis=-1).mean())
        return [plot_head(tokens, w, layer, head, key_tokens),
                f"mean over queries of the largest weight: {focus:.2f} (1 = every query looks at one key)"]

    return _explorer(controls, render)
