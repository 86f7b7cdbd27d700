"""Interactive explorers: ipywidgets that let a reader move one control and watch attention respond.

Every explorer comes in three layers, so that what it shows is tested and usable without a browser:

1. a *pure* function computing the numbers shown for given control values (``query_attention``,
   ``self_attention_weights``, ``position_similarity``, ``mask_for``, ``softmax_stats``, ``head_weights``,
   ``next_token_distribution``, ``attention_cost``, ``translation_rows``);
2. a ``plot_*`` function drawing them on a :class:`matplotlib.figure.Figure` built without ``pyplot`` (no global
   figure registry, so nothing leaks and any backend works);
3. an ``*_explorer`` function returning an ``ipywidgets.VBox`` of controls above an ``Output``.

The explorer renders its first view while it is being built and writes it straight into the ``Output`` widget's
``outputs`` (a PNG and a line of text). When the notebook is executed, that state is saved with the widget, so the
static HTML of the book shows the first view even though no kernel is running behind it.

ipywidgets is imported only inside the ``*_explorer`` functions: the pure and plotting functions work without it
(``pip install "transformer_lib[widgets]"`` adds it).
"""
from __future__ import annotations

import base64
import functools
import html
import io
import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ._checks import check_choice, check_positive_int, check_tensor
from .attention import causal_mask, combine_masks, padding_mask
from .positional import sinusoidal_table

__all__ = [
    "query_attention", "plot_query_attention", "attention_explorer",
    "PROJECTIONS", "self_attention_weights", "plot_self_attention", "self_attention_explorer",
    "position_similarity", "plot_sinusoidal", "sinusoidal_explorer",
    "MASK_KINDS", "mask_for", "visible_positions", "plot_mask", "mask_explorer",
    "softmax_stats", "plot_softmax_scaling", "softmax_temperature_explorer",
    "head_weights", "plot_head", "heads_explorer",
    "next_token_distribution", "plot_next_token", "sampling_explorer",
    "attention_cost", "plot_cost", "cost_explorer",
    "translation_rows", "translation_html", "translation_explorer",
]

ArrayLike = Union[torch.Tensor, np.ndarray]
_DPI = 90  # small PNGs keep the executed notebooks light


# ----------------------------------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------------------------------
def _require_widgets():
    try:
        import ipywidgets
    except ImportError as err:  # pragma: no cover - exercised by monkeypatching in the tests
        raise ImportError('the interactive explorers need ipywidgets: pip install "transformer_lib[widgets]"') from err
    return ipywidgets


def _as_tensor(name: str, x, ndim=None) -> torch.Tensor:
    """A float64 CPU copy of a tensor or NumPy array (validated)."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.asarray(x))
    check_tensor(name, x, ndim=ndim)
    if x.dtype == torch.bool or x.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    return x.detach().to("cpu", torch.float64)


def _check_index(name: str, value, size: int, what: str) -> int:
    if isinstance(value, (np.integer,)):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be in [0, {size - 1}] ({size} {what}), got {value}")
    return value


def _check_tokens(name: str, tokens, length: Optional[int] = None, what: str = "") -> List[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(tokens).__name__}")
    tokens = [str(t) for t in tokens]
    if length is not None and len(tokens) != length:
        raise ValueError(f"{name} has {len(tokens)} entries but {what} has {length}")
    if not tokens:
        raise ValueError(f"{name} is empty; expected at least one token")
    return tokens


def _check_number(name: str, value, minimum: float = 0.0, strict: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {value}")
    return value


def _show_token(token: str) -> str:
    """Make whitespace tokens visible on an axis (character-level vocabularies)."""
    return {" ": "␣", "\n": "\\n", "\t": "\\t", "": "∅"}.get(token, token)


def _rotate(labels: Sequence[str]) -> bool:
    longest = max(map(len, labels), default=0)
    return longest > 6 or (longest > 2 and len(labels) > 8)


def _figure(width: float, height: float, xlabels: Sequence[str] = (), ylabels: Sequence[str] = (),
            top: float = 0.4, right: float = 0.2, wspace: float = 0.3, bottom_extra: float = 0.0,
            left_extra: float = 0.0):
    """A Figure without pyplot and with fixed margins in inches, grown to fit long token labels.

    A layout engine (constrained/tight) would double the drawing time; the explorers must redraw in well under
    0.3 s, so the margins are computed here instead.
    """
    from matplotlib.figure import Figure
    xlabels = [_show_token(t) for t in xlabels]
    ylabels = [_show_token(t) for t in ylabels]
    longest_x = max(map(len, xlabels), default=0)
    bottom = 0.5 + bottom_extra + (0.06 * longest_x + 0.1 if _rotate(xlabels) else 0.0)
    left = 0.55 + left_extra + 0.075 * max(max(map(len, ylabels), default=0) - 3, 0)
    height = height + bottom - 0.5
    width = width + left - 0.55
    fig = Figure(figsize=(width, height), dpi=_DPI)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace)
    return fig


def _token_axis(ax, labels: Sequence[str], axis: str = "x") -> None:
    ticks = range(len(labels))
    rotate = 45 if _rotate(labels) else 0
    labels = [_show_token(t) for t in labels]
    if axis == "x":
        ax.set_xticks(ticks, labels, rotation=rotate, ha="right" if rotate else "center")
    else:
        ax.set_yticks(ticks, labels)


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _png_output(fig) -> dict:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    fig.clear()
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": data, "text/plain": "<Figure>"}}


def _text_output(text: str, stream: str = "stdout") -> dict:
    return {"output_type": "stream", "name": stream, "text": text if text.endswith("\n") else text + "\n"}


def _html_output(markup: str, plain: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": markup, "text/plain": plain}}


def _to_outputs(items) -> Tuple[dict, ...]:
    from matplotlib.figure import Figure
    outputs = []
    for item in items:
        if isinstance(item, Figure):
            outputs.append(_png_output(item))
        elif isinstance(item, str):
            outputs.append(_text_output(item))
        else:
            outputs.append(item)
    return tuple(outputs)


def _explorer(controls: Dict[str, object], render: Callable[..., Sequence], on_change: Optional[Callable] = None):
    """VBox(controls…, Output) re-rendered whenever a control changes; the first view is rendered now.

    ``render(**values)`` returns Figures, strings and ready-made output dicts; they are written straight into
    ``Output.outputs`` so the saved widget state (and the static HTML) contains them. ``on_change(name, value)``
    may adjust dependent controls (e.g. a slider's maximum) before the single re-render.
    """
    widgets = _require_widgets()
    out = widgets.Output()
    busy = [False]

    def refresh(change=None, name=None):
        if busy[0]:
            return
        busy[0] = True
        try:
            if on_change is not None and change is not None:
                on_change(name, change["new"])
            values = {key: control.value for key, control in controls.items()}
            out.outputs = _to_outputs(render(**values))
        except Exception as err:  # shown to the reader instead of disappearing into the kernel log
            if change is None:
                raise
            out.outputs = (_text_output(f"{type(err).__name__}: {err}", "stderr"),)
        finally:
            busy[0] = False

    for name, control in controls.items():
        control.style.description_width = "initial"
        control.observe(functools.partial(refresh, name=name), names="value")
    refresh()
    box = widgets.VBox(list(controls.values()) + [out])
    box.controls, box.out, box.refresh = controls, out, refresh
    return box


def _token_options(tokens: Sequence[str]) -> List[Tuple[str, int]]:
    return [(f"{i}: {_show_token(t)}", i) for i, t in enumerate(tokens)]


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
    head = _check_index("head", head, w.shape[0], "heads")
    query_index = _check_index("query_index", query_index, w.shape[1], "queries")
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
    scale = _check_number("scale", scale)
    if projection == "identity":
        q, k = x, x
    else:
        d = x.shape[1]
        g = torch.Generator().manual_seed(int(seed))
        Q = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        K = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        q, k = x @ Q, x @ K  # (T, d)
    scores = scale * (q @ k.T)  # (T, T)
    return torch.softmax(scores, dim=-1).numpy()


def plot_self_attention(tokens: Sequence[str], embeddings: ArrayLike, query_index: int,
                        projection: str = "identity", scale: float = 1.0, seed: int = 0):
    """The whole (T, T) weight matrix and the chosen word's row as bars.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    weights = self_attention_weights(embeddings, projection, scale, seed)
    tokens = _check_tokens("tokens", tokens, weights.shape[0], "embeddings")
    query_index = _check_index("query_index", query_index, len(tokens), "tokens")
    fig = _figure(max(7.0, 0.7 * len(tokens) + 2), 3.2, tokens, tokens)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.4))
    left.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    left.add_patch(_row_box(query_index, len(tokens)))
    _token_axis(left, tokens)
    _token_axis(left, tokens, "y")
    left.set_xlabel("key j")
    left.set_ylabel("query i")
    left.set_title("all weights α_ij")
    colors = ["C0"] * len(tokens)
    colors[query_index] = "C3"
    right.bar(range(len(tokens)), weights[query_index], color=colors)
    _token_axis(right, tokens)
    right.set_ylim(0, 1)
    right.set_title(f"{_show_token(tokens[query_index])!r} attends to")
    return fig


def _row_box(i: int, width: int):
    from matplotlib.patches import Rectangle
    return Rectangle((-0.5, i - 0.5), width, 1, fill=False, edgecolor="C3", linewidth=2)


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
    table = sinusoidal_table(n, d).double()  # (n, d); validates n and d
    p = _check_index("p", p, n, "positions")
    sims = table @ table[p]  # (n,)
    if normalize:
        sims = sims / (d / 2)
    return sims.numpy()


def plot_sinusoidal(n: int, d: int, p: int):
    """The (n, d) sinusoidal matrix and the similarity of position ``p`` with all others.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    table = sinusoidal_table(n, d).numpy()
    sims = position_similarity(n, d, p)
    fig = _figure(8.5, 3.2, wspace=0.35)
    left, right = fig.subplots(1, 2)
    image = left.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    left.axhline(p, color="k", linewidth=1)
    left.set_xlabel("dimension")
    left.set_ylabel("position")
    left.set_title(f"PE (n={n}, d_model={d})")
    fig.colorbar(image, ax=left, shrink=0.8)
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
    widgets = _require_widgets()
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

    def render(d_model, length, p):
        sims = position_similarity(length, d_model, p)
        others = np.delete(sims, p)
        return [plot_sinusoidal(length, d_model, p),
                f"PE[{p}]·PE[{p}] = {sims[p]:.1f} (= d_model/2); largest with another position: "
                f"{others.max():.2f}" if others.size else ""]

    return _explorer(controls, render, on_change)


# ----------------------------------------------------------------------------------------------------------------
# 4. Masks (chapters 6, 9, 12)
# ----------------------------------------------------------------------------------------------------------------
MASK_KINDS = ("none", "causal", "padding", "causal+padding", "sliding", "local")
_USES_LENGTH = ("padding", "causal+padding")
_USES_WINDOW = ("sliding", "local")


def mask_for(kind: str, n: int, length: Optional[int] = None, window: Optional[int] = None) -> torch.Tensor:
    """A (n, n) attention mask of one kind (True = query i may attend to key j), built from the library's masks.

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
    mask = torch.ones(n, n, dtype=torch.bool)
    if "causal" in kind:
        mask = causal_mask(n)
    if kind in _USES_LENGTH:
        if length is None:
            raise ValueError(f"mask kind {kind!r} needs length= (the number of real tokens)")
        check_positive_int("length", length)
        if length > n:
            raise ValueError(f"length must be at most n={n}, got {length}")
        keys = padding_mask(lengths=torch.tensor([length]), max_len=n)[0, 0]  # (1, n): same for every query
        mask = combine_masks(mask, keys)
    if kind in _USES_WINDOW:
        if window is None:
            raise ValueError(f"mask kind {kind!r} needs window= (the window width)")
        check_positive_int("window", window)
        offset = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # (n, n): i - j
        band = (offset >= 0) & (offset < window) if kind == "sliding" else offset.abs() <= window
        mask = combine_masks(mask, band)
    return mask


def visible_positions(mask: torch.Tensor, i: int) -> List[int]:
    """The key positions query ``i`` may attend to under a (T, S) boolean mask."""
    check_tensor("mask", mask, ndim=2, dtype="bool")
    i = _check_index("i", i, mask.shape[0], "queries")
    return torch.nonzero(mask[i]).flatten().tolist()


def plot_mask(mask: torch.Tensor, i: Optional[int] = None, tokens: Optional[Sequence[str]] = None, title: str = ""):
    """The mask as a grid, True (may attend) dark; row ``i`` outlined.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    check_tensor("mask", mask, ndim=2, dtype="bool")
    t, s = mask.shape
    fig = _figure(min(6.0, 2.0 + 0.3 * s), min(5.0, 1.6 + 0.3 * t), tokens or (), tokens or ())
    ax = fig.add_subplot()
    ax.imshow(mask.numpy().astype(float), cmap="Greys", vmin=0, vmax=1.25)
    ax.set_xticks(np.arange(-0.5, s), minor=True)
    ax.set_yticks(np.arange(-0.5, t), minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    if tokens is not None:
        tokens = _check_tokens("tokens", tokens, s, "the mask")
        _token_axis(ax, tokens)
        _token_axis(ax, tokens[:t], "y")
    if i is not None:
        i = _check_index("i", i, t, "queries")
        ax.add_patch(_row_box(i, s))
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_title(title or "mask (dark = may attend)")
    return fig


def mask_explorer(n: int = 8, tokens: Optional[Sequence[str]] = None):
    """Choose a mask kind, its length/window and a query position; see the mask and what that position sees.

    Controls: ``kind`` (Dropdown of :data:`MASK_KINDS`), ``length`` and ``window`` (IntSliders, enabled only for the
    kinds that use them), ``i`` (IntSlider).

    Args:
        n: sequence length (taken from ``tokens`` when given).
        tokens: optional token strings for the axes.
    """
    if tokens is not None:
        tokens = _check_tokens("tokens", tokens)
        n = len(tokens)
    check_positive_int("n", n)
    widgets = _require_widgets()
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

    def render(kind, length, window, i):
        mask = mask_for(kind, n, length, window)
        seen = visible_positions(mask, i)
        words = " ".join(_show_token(tokens[j]) for j in seen) if tokens is not None else ""
        who = f"query {i}" + (f" ({_show_token(tokens[i])!r})" if tokens is not None else "")
        return [plot_mask(mask, i, tokens, f"{kind} mask (dark = may attend)"),
                f"{who} sees {len(seen)} of {n} keys: {seen}" + (f"  → {words}" if words else "")]

    return _explorer(controls, render, on_change)


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
    g = torch.Generator().manual_seed(int(seed))
    q = torch.randn(d_k, generator=g, dtype=torch.float64)
    keys = torch.randn(n_keys, d_k, generator=g, dtype=torch.float64)
    scores = keys @ q  # (n_keys,)
    if scaled:
        scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=0).numpy()
    return {"scores": scores.numpy(), "weights": weights, "max_weight": float(weights.max()),
            "entropy": _entropy(weights)}


def plot_softmax_scaling(d_k: int, n_keys: int = 16, seed: int = 0):
    """Side-by-side softmax weights of the same random scores without and with ``1/√d_k``.

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    fig = _figure(8.0, 2.8, top=0.6, wspace=0.1)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, scaled in zip(axes, (False, True)):
        stats = softmax_stats(d_k, scaled, n_keys, seed)
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
    widgets = _require_widgets()
    options = [2 ** i for i in range(int(math.log2(max_d_k)) + 1)]
    controls = {
        "d_k": widgets.SelectionSlider(options=options, value=min(64, options[-1]), description="d_k"),
        "seed": widgets.IntSlider(value=int(seed), min=0, max=max(20, int(seed)), description="seed"),
    }

    def render(d_k, seed):
        raw, scaled = softmax_stats(d_k, False, n_keys, seed), softmax_stats(d_k, True, n_keys, seed)
        return [plot_softmax_scaling(d_k, n_keys, seed),
                f"d_k = {d_k}: spread (std) of the {n_keys} scores {raw['scores'].std():.2f} unscaled vs "
                f"{scaled['scores'].std():.2f} scaled; uniform entropy would be {math.log(n_keys):.2f} nats"]

    return _explorer(controls, render)


# ----------------------------------------------------------------------------------------------------------------
# 6. Heads of a trained model (chapter 7)
# ----------------------------------------------------------------------------------------------------------------
def _stack_layers(weights) -> torch.Tensor:
    """(L, H, T, S) from a tensor, or from a list of per-layer (H, T, S) / (1, H, T, S) tensors (a model's output)."""
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
        weights: (L, H, T, S), or a list of L per-layer (H, T, S) or (1, H, T, S) tensors (as models return them).
        layer: layer index.
        head: head index.
    """
    w = _stack_layers(weights)
    layer = _check_index("layer", layer, w.shape[0], "layers")
    head = _check_index("head", head, w.shape[1], "heads")
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
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="Blues", vmin=0, vmax=1)
    _token_axis(ax, key_tokens)
    _token_axis(ax, tokens, "y")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"layer {layer}, head {head}")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def heads_explorer(tokens: Sequence[str], weights, key_tokens: Optional[Sequence[str]] = None):
    """Sliders ``layer`` and ``head`` over a model's attention maps.

    Args:
        tokens: query tokens (T).
        weights: (L, H, T, S) or a list of per-layer (H, T, S) / (1, H, T, S) tensors.
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


# ----------------------------------------------------------------------------------------------------------------
# 7. Sampling the next token (chapter 11)
# ----------------------------------------------------------------------------------------------------------------
def next_token_distribution(logits: ArrayLike, temperature: float = 1.0, top_k: Optional[int] = None) -> np.ndarray:
    """The distribution sampling draws from: ``softmax(logits / temperature)`` restricted to the top k, renormalised.

    ``temperature = 0`` is greedy decoding (one-hot on the arg-max). Tokens tied with the k-th largest logit are
    kept (the rule of nanoGPT and Hugging Face's top-k warper). ``top_k`` of ``None`` or 0 keeps every token.

    Args:
        logits: next-token logits.
        temperature: ≥ 0.
        top_k: keep the k most likely tokens.

    Shapes:
        logits (V,) -> probabilities (V,) float64, summing to 1.
    """
    z = _as_tensor("logits", logits, ndim=1)  # (V,)
    temperature = _check_number("temperature", temperature, strict=False)
    if top_k is not None:
        check_positive_int("top_k", top_k, allow_zero=True)
    if temperature == 0.0:
        probs = torch.zeros_like(z)
        probs[z.argmax()] = 1.0
        return probs.numpy()
    z = z / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.numel())).values[-1]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.softmax(z, dim=0).numpy()


def _check_vocab(logits, vocab):
    z = _as_tensor("logits", logits, ndim=1)
    return z, _check_tokens("vocab", vocab, z.numel(), "logits")


def plot_next_token(logits: ArrayLike, vocab: Sequence[str], temperature: float = 1.0, top_k: Optional[int] = None,
                    max_bars: int = 30):
    """Bars of the next-token probabilities of the ``max_bars`` highest-logit tokens (order fixed by the logits).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    z, vocab = _check_vocab(logits, vocab)
    check_positive_int("max_bars", max_bars)
    probs = next_token_distribution(z, temperature, top_k)
    order = torch.argsort(z, descending=True)[:max_bars].tolist()
    fig = _figure(max(4.5, 0.28 * len(order) + 1.5), 2.8, [vocab[j] for j in order])
    ax = fig.add_subplot()
    ax.bar(range(len(order)), probs[order], color=["C0" if probs[j] > 0 else "0.7" for j in order])
    _token_axis(ax, [vocab[j] for j in order])
    ax.set_ylim(0, 1)
    ax.set_ylabel("probability")
    k = f"top-k {top_k}" if top_k else "all tokens"
    ax.set_title(f"temperature {temperature:g}, {k}" + (f" (top {len(order)} of {len(vocab)} shown)"
                                                        if len(order) < len(vocab) else ""))
    return fig


def sampling_explorer(logits: ArrayLike, vocab: Sequence[str], max_bars: int = 30):
    """Temperature and top-k sliders over one next-token distribution.

    Controls: ``temperature`` (FloatSlider 0…3, 0 = greedy) and ``top_k`` (IntSlider 0…V, 0 = all tokens).

    Args:
        logits: (V,) next-token logits (e.g. ``model(ids)[0, -1]``).
        vocab: the V token strings.
        max_bars: how many tokens to draw.
    """
    z, vocab = _check_vocab(logits, vocab)
    check_positive_int("max_bars", max_bars)
    widgets = _require_widgets()
    controls = {
        "temperature": widgets.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.05, description="temperature"),
        "top_k": widgets.IntSlider(value=0, min=0, max=len(vocab), description="top-k (0 = all)"),
    }

    def render(temperature, top_k):
        probs = next_token_distribution(z, temperature, top_k)
        best = int(probs.argmax())
        return [plot_next_token(z, vocab, temperature, top_k, max_bars),
                f"{int((probs > 0).sum())} of {len(vocab)} tokens can be drawn; most likely "
                f"{_show_token(vocab[best])!r} with p = {probs[best]:.2f}; entropy {_entropy(probs):.2f} nats"]

    return _explorer(controls, render)


# ----------------------------------------------------------------------------------------------------------------
# 8. The quadratic cost (chapter 12)
# ----------------------------------------------------------------------------------------------------------------
def attention_cost(n: int, d: int, d_ff: Optional[int] = None, bytes_per: int = 4,
                   n_heads: int = 1) -> Dict[str, float]:
    """Per-layer, per-sequence cost of self-attention and the feed-forward network (a multiply-add = 2 FLOPs).

    * score matrix: ``n_heads · n²`` entries, ``n_heads · n² · bytes_per`` bytes;
    * projections (Q, K, V and output): ``8 n d²`` FLOPs;
    * scores ``QKᵀ`` and mixing ``αV``: ``2 n² d`` each, whatever the number of heads;
    * feed-forward: ``4 n d d_ff``.

    The quadratic part overtakes the linear parts when ``n > 2d + d_ff`` (``crossover_n``). Softmax, norms and
    biases are left out (lower order).

    Args:
        n: sequence length.
        d: d_model.
        d_ff: feed-forward width (default ``4 d``).
        bytes_per: bytes per score (4 for float32, 2 for float16/bfloat16).
        n_heads: heads (one score matrix each).

    Returns:
        dict with ``score_elements``, ``score_bytes``, ``projection_flops``, ``score_flops``, ``mix_flops``,
        ``attention_flops``, ``ffn_flops``, ``total_flops``, ``attention_share``, ``quadratic_share``,
        ``crossover_n``.
    """
    for name, value in (("n", n), ("d", d), ("bytes_per", bytes_per), ("n_heads", n_heads)):
        check_positive_int(name, value)
    d_ff = 4 * d if d_ff is None else d_ff
    check_positive_int("d_ff", d_ff)
    score_elements = n_heads * n * n
    projection, scores, mix = 8 * n * d * d, 2 * n * n * d, 2 * n * n * d
    attention = projection + scores + mix
    ffn = 4 * n * d * d_ff
    total = attention + ffn
    return {"score_elements": score_elements, "score_bytes": score_elements * bytes_per,
            "projection_flops": projection, "score_flops": scores, "mix_flops": mix,
            "attention_flops": attention, "ffn_flops": ffn, "total_flops": total,
            "attention_share": attention / total, "quadratic_share": (scores + mix) / total,
            "crossover_n": 2 * d + d_ff}


def _bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} TiB"  # pragma: no cover


def plot_cost(n: int, d: int, d_ff: Optional[int] = None, n_heads: int = 1):
    """FLOPs by part at length ``n`` and score-matrix memory against length (float32 and float16).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    cost = attention_cost(n, d, d_ff, 4, n_heads)
    fig = _figure(9.0, 3.4, wspace=0.4, bottom_extra=0.3, left_extra=0.3)
    left, right = fig.subplots(1, 2)
    parts = {"projections\n8nd²": cost["projection_flops"],
             "QKᵀ + αV\n4n²d": cost["score_flops"] + cost["mix_flops"],
             "feed-forward\n4n·d·d_ff": cost["ffn_flops"]}
    left.bar(range(3), [v / 1e9 for v in parts.values()], color=["C0", "C3", "C2"])
    left.set_xticks(range(3), list(parts))
    left.set_ylabel("GFLOPs per layer")
    left.ticklabel_format(axis="y", style="plain", useOffset=False)
    left.set_title(f"n = {n}, d = {d}: {cost['quadratic_share']:.0%} quadratic")
    lengths = np.unique(np.geomspace(16, max(2 * n, 1 << 17), 60).astype(int))
    for bytes_per, label, color in ((4, "float32", "C0"), (2, "float16", "C1")):
        memory = [attention_cost(int(m), d, d_ff, bytes_per, n_heads)["score_bytes"] for m in lengths]
        right.plot(lengths, memory, label=label, color=color)
        right.plot([n], [attention_cost(n, d, d_ff, bytes_per, n_heads)["score_bytes"]], "o", color=color)
    for limit, label in ((16 * 2 ** 30, "16 GiB"), (80 * 2 ** 30, "80 GiB")):
        right.axhline(limit, color="0.5", linestyle=":", linewidth=1)
        right.text(lengths[0], limit * 1.3, label, fontsize=8, color="0.4")
    # Fixed ticks with plain labels: log axes' default 10^k labels go through mathtext, which is slow to draw.
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.xaxis.set_major_locator(FixedLocator([2 ** k for k in range(4, 19, 3)]))
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(v) >> 10}k" if v >= 1024 else f"{int(v)}"))
    right.yaxis.set_major_locator(FixedLocator([1024 ** k for k in range(1, 6)]))
    right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _bytes(v)))
    for axis in (right.xaxis, right.yaxis):
        axis.set_minor_formatter(NullFormatter())
    right.set_xlabel("sequence length n")
    right.set_ylabel("score-matrix bytes")
    right.set_title(f"one layer, {n_heads} head{'s' if n_heads > 1 else ''}, one sequence")
    right.legend(fontsize=8, loc="lower right")
    return fig


def cost_explorer(d_ff_ratio: int = 4):
    """Sliders ``n`` (powers of two, 16…131072), ``d`` and ``n_heads``: memory and FLOPs of one layer.

    Args:
        d_ff_ratio: the feed-forward width as a multiple of d (4 in the paper).
    """
    check_positive_int("d_ff_ratio", d_ff_ratio)
    widgets = _require_widgets()
    controls = {
        "n": widgets.SelectionSlider(options=[2 ** i for i in range(4, 18)], value=512, description="length n"),
        "d": widgets.SelectionSlider(options=[64, 128, 256, 512, 768, 1024, 2048, 4096, 8192], value=512,
                                     description="d_model"),
        "n_heads": widgets.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="heads"),
    }

    def render(n, d, n_heads):
        fp32 = attention_cost(n, d, d_ff_ratio * d, 4, n_heads)
        fp16 = attention_cost(n, d, d_ff_ratio * d, 2, n_heads)
        return [plot_cost(n, d, d_ff_ratio * d, n_heads),
                f"score matrices: {fp32['score_elements']:,} entries = {_bytes(fp32['score_bytes'])} in float32, "
                f"{_bytes(fp16['score_bytes'])} in float16; attention is {fp32['attention_share']:.0%} of the "
                f"layer's {fp32['total_flops']:.3g} FLOPs; the n² terms win beyond n = {fp32['crossover_n']:,}"]

    return _explorer(controls, render)


# ----------------------------------------------------------------------------------------------------------------
# 9. Translations side by side (chapters 3 and 10)
# ----------------------------------------------------------------------------------------------------------------
def _as_text(value) -> str:
    return value if isinstance(value, str) else " ".join(map(str, value))


def _check_translations(sources, outputs_by_model, references):
    if isinstance(sources, str) or not isinstance(sources, Sequence):
        raise TypeError(f"sources must be a list of sentences, got {type(sources).__name__}")
    if not sources:
        raise ValueError("sources is empty; expected at least one sentence")
    if not isinstance(outputs_by_model, Mapping):
        raise TypeError(f"outputs_by_model must be a dict of model name -> outputs, got "
                        f"{type(outputs_by_model).__name__}")
    for name, outputs in outputs_by_model.items():
        is_list = isinstance(outputs, Sequence) and not isinstance(outputs, str)
        if not is_list or len(outputs) != len(sources):
            got = len(outputs) if is_list else type(outputs).__name__
            raise ValueError(f"outputs_by_model[{name!r}] must have one output per source ({len(sources)}), got {got}")
    if references is not None:
        if isinstance(references, str) or not isinstance(references, Sequence):
            raise TypeError(f"references must be a list of sentences, got {type(references).__name__}")
        if len(references) != len(sources):
            raise ValueError(f"references must have one entry per source ({len(sources)}), got {len(references)}")


def translation_rows(sources: Sequence, outputs_by_model: Mapping[str, Sequence], index: int,
                     references: Optional[Sequence] = None) -> List[Tuple[str, str, Optional[bool]]]:
    """The rows shown for one example: source, reference, then each model's output.

    Sentences may be strings or token lists (joined with spaces).

    Args:
        sources: source sentences.
        outputs_by_model: model name -> one output per source.
        index: which example.
        references: reference translations (optional).

    Returns:
        list of ``(label, text, exact_match)``; ``exact_match`` is None for the source and reference rows and
        when there is no reference.
    """
    _check_translations(sources, outputs_by_model, references)
    index = _check_index("index", index, len(sources), "examples")
    rows = [("source", _as_text(sources[index]), None)]
    reference = None
    if references is not None:
        reference = _as_text(references[index])
        rows.append(("reference", reference, None))
    for name, outputs in outputs_by_model.items():
        text = _as_text(outputs[index])
        rows.append((str(name), text, None if reference is None else text == reference))
    return rows


def translation_html(rows: Sequence[Tuple[str, str, Optional[bool]]]) -> str:
    """An HTML table of :func:`translation_rows` (✓ / ✗ for exact matches)."""
    marks = {True: '<span style="color:#2a7">✓</span>', False: '<span style="color:#c33">✗</span>', None: ""}
    body = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(label)}</th>"
                   f"<td style='font-family:monospace;text-align:left'>{html.escape(text)}</td>"
                   f"<td>{marks[match]}</td></tr>"
                   for label, text, match in rows)
    return f"<table>{body}</table>"


def translation_explorer(sources: Sequence, outputs_by_model: Mapping[str, Sequence],
                         references: Optional[Sequence] = None):
    """A dropdown over examples showing source, reference and every model's output side by side.

    Args:
        sources: source sentences (strings or token lists).
        outputs_by_model: model name -> outputs, one per source.
        references: reference translations (optional; enables ✓/✗).
    """
    _check_translations(sources, outputs_by_model, references)
    widgets = _require_widgets()
    options = [(f"{i}: {_as_text(s)[:50]}", i) for i, s in enumerate(sources)]
    controls = {"example": widgets.Dropdown(options=options, value=0, description="example")}

    def render(example):
        rows = translation_rows(sources, outputs_by_model, example, references)
        width = max(len(label) for label, _, _ in rows)
        plain = "\n".join(f"{label:<{width}}  {text}" + {True: "  ✓", False: "  ✗", None: ""}[match]
                          for label, text, match in rows)
        return [_html_output(translation_html(rows), plain)]

    return _explorer(controls, render)
