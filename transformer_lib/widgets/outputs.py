"""Explorers of a model's outputs and costs: sampling the next token, the quadratic cost, translations side by
side (chapters 3, 10, 11 and 12). The package :mod:`~transformer_lib.widgets` exports the explorers."""
from __future__ import annotations

import html
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from ..checks import as_tensor, check_index, check_labels, check_number, check_positive_int
from ..efficient import flops_per_layer
from ..generation import apply_temperature, top_k_filter
from .base import (ArrayLike, entropy, explorer, figure, html_output, require_widgets, show_token,
                   token_axis)


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
    z = as_tensor("logits", logits, ndim=1)  # (V,)
    temperature = check_number("temperature", temperature, strict=False)
    if top_k is not None:
        check_positive_int("top_k", top_k, allow_zero=True)
    return _distribution(z, temperature, top_k)


def _distribution(z: torch.Tensor, temperature: float, top_k: Optional[int]) -> np.ndarray:
    """:func:`next_token_distribution` of checked float64 logits, temperature and top-k."""
    if temperature == 0.0:
        probs = torch.zeros_like(z)
        probs[z.argmax()] = 1.0
        return probs.numpy()
    z = apply_temperature(z, temperature)
    if top_k:
        z = top_k_filter(z, min(top_k, z.numel()))
    return torch.softmax(z, dim=0).numpy()


def _check_vocab(logits, vocab):
    z = as_tensor("logits", logits, ndim=1)
    return z, check_labels("vocab", vocab, z.numel(), "logits", "tokens")


def plot_next_token(logits: ArrayLike, vocab: Sequence[str], temperature: float = 1.0, top_k: Optional[int] = None,
                    max_bars: int = 30):
    """Bars of the next-token probabilities of the ``max_bars`` highest-logit tokens (order fixed by the logits).

    Returns:
        a :class:`matplotlib.figure.Figure`.
    """
    z, vocab = _check_vocab(logits, vocab)
    check_positive_int("max_bars", max_bars)
    probs = next_token_distribution(z, temperature, top_k)
    return _draw_next_token(z, vocab, probs, temperature, top_k, max_bars)


def _draw_next_token(z: torch.Tensor, vocab, probs: np.ndarray, temperature: float, top_k: Optional[int],
                     max_bars: int):
    """:func:`plot_next_token` of checked logits and vocabulary and their distribution ``probs`` (a redraw)."""
    order = torch.argsort(z, descending=True)[:max_bars].tolist()
    fig = figure(max(4.5, 0.28 * len(order) + 1.5), 2.8, [vocab[j] for j in order])
    ax = fig.add_subplot()
    ax.bar(range(len(order)), probs[order], color=["C0" if probs[j] > 0 else "0.7" for j in order])
    token_axis(ax, [vocab[j] for j in order])
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
    widgets = require_widgets()
    controls = {
        "temperature": widgets.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.05, description="temperature"),
        "top_k": widgets.IntSlider(value=0, min=0, max=len(vocab), description="top-k (0 = all)"),
    }

    def render(temperature, top_k):  # the sliders' values are valid: one distribution per view, unchecked
        probs = _distribution(z, float(temperature), top_k)
        best = int(probs.argmax())
        return [_draw_next_token(z, vocab, probs, temperature, top_k, max_bars),
                f"{int((probs > 0).sum())} of {len(vocab)} tokens can be drawn; most likely "
                f"{show_token(vocab[best])!r} with p = {probs[best]:.2f}; entropy {entropy(probs):.2f} nats"]

    return explorer(controls, render)


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
    return _cost(n, d, d_ff, bytes_per, n_heads)


def _cost(n: int, d: int, d_ff: int, bytes_per: int, n_heads: int) -> Dict[str, float]:
    """:func:`attention_cost` of checked sizes (``d_ff`` given)."""
    score_elements = n_heads * n * n
    flops = flops_per_layer("full", n, d, d_ff=d_ff)  # the library's count (8 n d², 2 n² d twice, 4 n d d_ff)
    projection, scores, mix, ffn = flops["projections"], flops["scores"], flops["values"], flops["feed_forward"]
    attention, total = flops["attention"] + projection, flops["total"]
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
    cost = attention_cost(n, d, d_ff, 4, n_heads)  # checks the sizes
    return _draw_cost(n, d, 4 * d if d_ff is None else d_ff, n_heads, cost)


def _draw_cost(n: int, d: int, d_ff: int, n_heads: int, cost: Dict[str, float]):
    """:func:`plot_cost` of checked sizes and their float32 ``cost`` (a redraw)."""
    fig = figure(9.0, 3.4, wspace=0.4, bottom_extra=0.3, left_extra=0.3)
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
        memory = [_cost(int(m), d, d_ff, bytes_per, n_heads)["score_bytes"] for m in lengths]
        right.plot(lengths, memory, label=label, color=color)
        right.plot([n], [_cost(n, d, d_ff, bytes_per, n_heads)["score_bytes"]], "o", color=color)
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
    widgets = require_widgets()
    controls = {
        "n": widgets.SelectionSlider(options=[2 ** i for i in range(4, 18)], value=512, description="length n"),
        "d": widgets.SelectionSlider(options=[64, 128, 256, 512, 768, 1024, 2048, 4096, 8192], value=512,
                                     description="d_model"),
        "n_heads": widgets.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="heads"),
    }

    def render(n, d, n_heads):  # sizes the sliders offer: computed and drawn unchecked
        fp32 = _cost(n, d, d_ff_ratio * d, 4, n_heads)
        fp16 = _cost(n, d, d_ff_ratio * d, 2, n_heads)
        return [_draw_cost(n, d, d_ff_ratio * d, n_heads, fp32),
                f"score matrices: {fp32['score_elements']:,} entries = {_bytes(fp32['score_bytes'])} in float32, "
                f"{_bytes(fp16['score_bytes'])} in float16; attention is {fp32['attention_share']:.0%} of the "
                f"layer's {fp32['total_flops']:.3g} FLOPs; the n² terms win beyond n = {fp32['crossover_n']:,}"]

    return explorer(controls, render)


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
    index = check_index("index", index, len(sources), "examples")
    return _rows(sources, outputs_by_model, index, references)


def _rows(sources, outputs_by_model, index: int, references) -> List[Tuple[str, str, Optional[bool]]]:
    """:func:`translation_rows` of checked arguments."""
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
    widgets = require_widgets()
    options = [(f"{i}: {_as_text(s)[:50]}", i) for i, s in enumerate(sources)]
    controls = {"example": widgets.Dropdown(options=options, value=0, description="example")}

    def render(example):
        rows = _rows(sources, outputs_by_model, example, references)  # checked once, above
        width = max(len(label) for label, _, _ in rows)
        plain = "\n".join(f"{label:<{width}}  {text}" + {True: "  ✓", False: "  ✗", None: ""}[match]
                          for label, text, match in rows)
        return [html_output(translation_html(rows), plain)]

    return explorer(controls, render)
