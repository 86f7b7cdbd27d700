"""The book's architecture diagrams, drawn by code: RNN, seq2seq attention, self-attention, heads, blocks.

Each public function draws one figure of the lecture with matplotlib alone (the chapters run in Colab with
torch, numpy and matplotlib only) and returns the ``Figure``. The figures are deterministic, take the few
arguments that make them useful to teach with (how many steps, which token to follow, real attention weights)
and give the colour-blind-safe palette of :mod:`~transformer_lib.plotting` fixed roles: query vermilion, key
blue, value green; encoder blue, decoder orange, cross-attention pink; layer norm yellow.

Positions are counted from 1, as in the book's equations and in the figures' labels (:math:`x_1, h_1, s_1`).
The drawing primitives (boxes, arrows, labels, tensors drawn as cards, laid out in inches) are in ``_drawing``.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .checks import check_choice, check_int_range, check_labels
from ._drawing import (BLACK, BLUE, CROSS, DECODER, ENCODER, GREEN, GREY, HIGHLIGHT, INK, KEY, ORANGE, PINK, QUERY,
                       SKY, VALUE, VERMILION, YELLOW, arrow, attention_edges, box, canvas, check_path,
                       check_weights, circle, label, tensor_cards, tint)

__all__ = ["unrolled_rnn", "seq2seq_attention", "self_attention_qkv", "multihead_split_merge", "multihead_heads",
           "transformer_block", "architectures", "encoder_decoder"]


# ------------------------------------------------------------------------------------------------ RNN
def unrolled_rnn(n_steps: int = 5, highlight_path: Union[Tuple[int, int], str, None] = "ends",
                 words: Optional[Sequence[str]] = None) -> Figure:
    """The RNN unrolled over time: the chain :math:`h_0 \\to h_1 \\to \\dots \\to h_n`, one input per step.

    Every state waits for the one before it (the row of sequential steps), and information from :math:`x_i`
    reaches :math:`h_j` only along the chain; the highlighted path is that route, with its length written.

    Args:
        n_steps: number of time steps :math:`n` (1 to 12).
        highlight_path: ``(i, j)``: highlight the path from input :math:`x_i` to state :math:`h_j`
            (``1 <= i <= j <= n_steps``), ``j - i + 1`` applications of the recurrence; ``"ends"`` is
            ``(1, n_steps)``; None highlights nothing.
        words: one word per input, written under it.

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for ``n_steps`` out of range, a path outside the sequence or the wrong number of words.
        TypeError: for an ``n_steps`` that is not an int, or a string instead of a list of words.
    """
    n = check_int_range("n_steps", n_steps, 1, 12, " (the diagram draws every step)")
    words = check_labels("words", words, (n, n), noun="words")
    path = check_path(highlight_path, n)
    on_path = (lambda t: path is not None and path[0] <= t <= path[1])  # noqa: E731
    y_in = 0.75 if words else 0.45
    y_h, y_step = y_in + 1.1, y_in + 1.72
    width, height = 10.0, y_step + (0.65 if path is not None else 0.25)
    fig, ax = canvas(width, height)
    x0, gap = 0.95, (width - 1.5) / n
    bw, bh = min(0.62, 0.6 * gap), 0.42
    xs = [x0 + t * gap for t in range(n + 1)]
    h_prev = box(ax, xs[0], y_h, bw, bh, "$h_{0}$", GREY, ls="--")
    label(ax, xs[0], y_h - 0.38, "zeros")
    label(ax, xs[1] - 0.6 * gap, y_step, "sequential step:", ha="right", style="italic")
    label_all = gap - bw >= 0.5  # room for the weight names on every arrow
    for t in range(1, n + 1):
        hot_in, hot_h = path is not None and t == path[0], on_path(t) and t > path[0]
        h = box(ax, xs[t], y_h, bw, bh, f"$h_{{{t}}}$", HIGHLIGHT if on_path(t) else ENCODER,
                lw=2.2 if on_path(t) else 1.2)
        x = box(ax, xs[t], y_in, bw, bh, f"$x_{{{t}}}$", HIGHLIGHT if hot_in else GREY, lw=2.2 if hot_in else 1.2)
        if words:
            label(ax, xs[t], y_in - 0.4, words[t - 1], size=9, style="italic", color="black")
        arrow(ax, x.top, h.bottom, HIGHLIGHT if hot_in else BLACK, lw=2.2 if hot_in else 1.1)
        arrow(ax, h_prev.right, h.left, HIGHLIGHT if hot_h else BLACK, lw=2.2 if hot_h else 1.1)
        if label_all or t == 1:
            label(ax, (h_prev.right[0] + h.left[0]) / 2, y_h + 0.16, "$W_{hh}$")
            label(ax, xs[t] + 0.08, (y_in + y_h) / 2, "$W_{xh}$", ha="left")
        if hot_in or hot_h:  # number the edges of the path, so that its length can be counted
            where = ((xs[t] - 0.15, (y_in + y_h) / 2) if hot_in
                     else ((h_prev.right[0] + h.left[0]) / 2, y_h - 0.17))
            circle(ax, *where, 0.09, str(t - path[0] + 1), HIGHLIGHT, size=7)
        label(ax, xs[t], y_step, str(t), size=9)
        h_prev = h
    if path is not None:
        i, j = path
        label(ax, width / 2, height - 0.22, f"$x_{{{i}}}$ reaches $h_{{{j}}}$ through {j - i + 1} applications "
              f"of the recurrence: path length {j - i + 1}", size=10, color=HIGHLIGHT)
    return fig


# ------------------------------------------------------------------------------------- seq2seq attention
def seq2seq_attention(src_words: Optional[Sequence[str]] = None, tgt_words: Optional[Sequence[str]] = None,
                      step: int = 2, weights=None) -> Figure:
    """One decoder step of an RNN encoder–decoder with attention (chapter 3's equations).

    The decoder state :math:`s_t` scores every encoder state (:math:`e^t_i = s_t^\\top h_i`), the softmax
    turns the scores into weights :math:`\\alpha^t_i` (the bars), and the context
    :math:`a_t = \\sum_i \\alpha^t_i h_i` joins :math:`s_t` in :math:`\\tilde s_t`, which predicts :math:`y_t`.
    Lines into the context are as thick as their weight.

    Args:
        src_words: the source sentence (1 to 8 words); default ``the cat saw a dog``, from the book's
            translation task.
        tgt_words: its translation (1 to 8 words), default ``tl.data.reference_translate(src_words)`` of the
            default source; the decoder reads ``<bos>`` and then the previous target word.
        step: the decoder step :math:`t` drawn (1 to ``len(tgt_words)``).
        weights: attention weights, a tensor, array or list of shape (S,) for this step or (T, S) for all
            steps (row ``step - 1`` is drawn), e.g. a trained model's map; None draws uniform weights.

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for a step outside the target, or weights of the wrong shape or that are not a softmax.
        TypeError: for a string instead of a list of words, or a ``step`` that is not an int.
    """
    src = check_labels("src_words", ("the", "cat", "saw", "a", "dog") if src_words is None else src_words, (1, 8),
                       noun="words")
    tgt = check_labels("tgt_words", ("ti", "mesu", "ka", "na", "hani", "mo", "mira") if tgt_words is None
                       else tgt_words, (1, 8), noun="words")
    S, T = len(src), len(tgt)
    t = check_int_range("step", step, 1, T, f" (the target has {T} words)")
    alpha = check_weights(weights, S, t - 1)
    width, height = 10.0, 4.0
    fig, ax = canvas(width, height)
    g = min(1.05, (width - 1.2) / (S + T + 1.4))
    bw, bh = min(0.55, 0.78 * g), 0.4
    enc_x = [0.75 + g / 2 + i * g for i in range(S)]
    dec_x = [enc_x[-1] + 1.4 * g + i * g for i in range(T)]
    y_word, y_state, y_bus, y_bar, y_top = 0.5, 1.1, 1.62, 1.82, 3.3
    tx = dec_x[t - 1]
    h_boxes, prev = [], None
    for i, x in enumerate(enc_x):  # encoder
        h = box(ax, x, y_state, bw, bh, f"$h_{{{i + 1}}}$", ENCODER)
        label(ax, x, y_word, src[i], size=9, style="italic", color="black")
        arrow(ax, (x, y_word + 0.12), h.bottom)
        if prev:
            arrow(ax, prev.right, h.left)
        h_boxes.append(h)
        prev = h
    inputs = ["<bos>"] + tgt[:-1]
    for k, x in enumerate(dec_x):  # decoder: s_1 … s_T, the states after step t not computed yet
        later = k + 1 > t
        s = box(ax, x, y_state, bw, bh, f"$s_{{{k + 1}}}$", DECODER, ls="--" if later else "-",
                lw=2.2 if k + 1 == t else 1.2, fill=0.08 if later else 0.2)
        label(ax, x, y_word, inputs[k], size=9, style="italic", color=GREY if later else "black")
        arrow(ax, (x, y_word + 0.12), s.bottom, GREY if later else BLACK)
        arrow(ax, prev.right, s.left, GREY if later else BLACK, ls="--" if later else "-")
        if k == 0:
            label(ax, (prev.right[0] + s.left[0]) / 2, y_state + 0.33, "$s_0 = h_S$")
        prev = s
    label(ax, (enc_x[0] + enc_x[-1]) / 2, 0.15, "encoder", size=9)
    label(ax, (dec_x[0] + dec_x[-1]) / 2, 0.15, "decoder" + (" (reads the previous target word)" if T > 3 else ""),
          size=9)
    # The query s_t branches off towards every encoder state; each dot is one score e^t_i = s_t^T h_i.
    ax.plot([enc_x[0], tx], [y_bus, y_bus], color=QUERY, lw=1.3, ls=(0, (4, 2)), zorder=1)
    ax.plot([tx], [y_bus], "o", color=QUERY, ms=4, zorder=4)
    label(ax, (enc_x[-1] + dec_x[0]) / 2 + 0.05, y_bus + 0.16, f"query $s_{{{t}}}$", color=QUERY)
    label(ax, 0.12, y_bus, "scores\n$s_t^\\top h_i$", ha="left", color=QUERY, size=8)
    label(ax, 0.12, y_bar + 0.35, "weights\n$\\alpha^t_i$", ha="left", size=8)
    context = box(ax, (enc_x[0] + enc_x[-1]) / 2, y_top, max(1.5, bw * 2.6), 0.46,
                  f"context $a_{{{t}}}$", ENCODER, size=9)
    for i, (x, h) in enumerate(zip(enc_x, h_boxes)):
        ax.plot([x, x], [h.top[1], y_bus], color=KEY, lw=1.1, zorder=1)
        ax.plot([x], [y_bus], "o", color=QUERY, ms=5, zorder=4)
        ax.add_patch(Rectangle((x - 0.18 * g, y_bar), 0.36 * g, 0.8 * alpha[i], fc=tint(VERMILION, 0.6),
                               ec=VERMILION, lw=1.0, zorder=3))
        top = y_bar + 0.8 * alpha[i]
        label(ax, x, top + 0.1, f"{alpha[i]:.2f}", size=8.5, color="black")
        end = (context.x + (i - (S - 1) / 2) * min(0.2, context.w / (S + 1)), context.bottom[1])
        arrow(ax, (x, top + 0.2), end, ENCODER, lw=0.6 + 3.5 * alpha[i],
              alpha=0.35 + 0.65 * alpha[i] / alpha.max(), head=False)
    s_tilde = box(ax, tx, y_top, bw * 1.1, 0.46, f"$\\tilde s_{{{t}}}$", DECODER, lw=2.2)
    arrow(ax, (tx, y_state + bh / 2), s_tilde.bottom, lw=1.4)
    arrow(ax, context.right, s_tilde.left, ENCODER, lw=1.4)
    arrow(ax, s_tilde.right, (s_tilde.right[0] + 0.3, y_top))
    label(ax, s_tilde.right[0] + 0.36, y_top, tgt[t - 1], size=10, color="black", ha="left", weight="bold")
    label(ax, 0.12, height - 0.22, f"step $t = {t}$:   $e^t_i = s_t^\\top h_i$,   "
          "$\\alpha^t = \\mathrm{softmax}(e^t)$,   $a_t = \\Sigma_i\\, \\alpha^t_i h_i$,   "
          "$\\tilde s_t = \\tanh(W_c[a_t; s_t])$,   "
          "$p(y_t \\mid y_{<t}, x) = \\mathrm{softmax}(W_o \\tilde s_t + b_o)$",
          size=9, ha="left", color="black")
    return fig


# ---------------------------------------------------------------------------------------- self-attention
def self_attention_qkv(words: Optional[Sequence[str]] = None, focus: int = 2, weights=None) -> Figure:
    """Self-attention for one token, column by column (chapter 4's equations).

    Every input :math:`x_j` gives a query, a key and a value (:math:`q_j = x_j Q`, :math:`k_j = x_j K`,
    :math:`v_j = x_j V`). The query of the focus token :math:`i` meets every key in a score
    :math:`e_{ij} = q_i^\\top k_j`, the softmax over :math:`j` turns the scores into weights
    :math:`\\alpha_{ij}`, and the output is :math:`h_i = \\sum_j \\alpha_{ij} v_j`: a weighted sum of the
    values :math:`v_j` of all tokens, not of the focus token's own value. The other tokens' queries are grey:
    they make the other outputs, computed in the same way at the same time.

    Args:
        words: the tokens (2 to 8); default ``students learned about transformers``.
        focus: the token :math:`i` whose output is drawn (1 to ``len(words)``).
        weights: the weights :math:`\\alpha_{ij}` of the focus token, shape (n,), or a whole map (n, n) of
            which row ``focus - 1`` is drawn; None writes the symbols and draws uniform lines.

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for a focus outside the sentence, or weights of the wrong shape or not a softmax.
        TypeError: for a string instead of a list of words, or a ``focus`` that is not an int.
    """
    words = check_labels("words", ("students", "learned", "about", "transformers") if words is None else words,
                         (2, 8), noun="words")
    n = len(words)
    i = check_int_range("focus", focus, 1, n, f" (the sentence has {n} tokens)")
    alpha = check_weights(weights, n, i - 1)
    width, height, left = 10.0, 4.2, 1.45
    fig, ax = canvas(width, height)
    g = (width - left - 0.3) / n
    dx, bw = min(0.42, 0.3 * g), min(0.34, 0.26 * g)
    cx = [left + (j + 0.5) * g for j in range(n)]
    y_word, y_x, y_qkv, y_e, y_gate, y_sum = 0.22, 0.65, 1.4, 2.15, 3.05, 3.9
    # Row labels, in the book's general notation.
    for y, text in [(y_x, "inputs $x_j$"), (y_qkv, "$q_j = x_j Q$\n$k_j = x_j K$\n$v_j = x_j V$"),
                    (y_e, "scores\n$e_{ij} = q_i^\\top k_j$"), ((y_e + y_gate) / 2, "softmax over $j$"),
                    (y_gate, "weights $\\alpha_{ij}$\ntimes values $v_j$"), (y_sum, "sum over $j$")]:
        label(ax, 0.08, y, text, ha="left", size=8.5)
    ax.add_patch(Rectangle((left - 0.05, (y_e + y_gate) / 2 - 0.16), width - left - 0.1, 0.32, fc=tint(GREY, 0.12),
                           ec="none", zorder=0))
    # The query bus: q_i rises to the score row and runs under every score.
    qx = cx[i - 1] - dx
    ax.plot([qx, qx], [y_qkv + 0.15, y_e], color=QUERY, lw=1.4, zorder=1)
    cuts = [min(qx, cx[0])] + [x for c in cx[:-1] for x in (c + dx - 0.06, c + dx + 0.06)] + [cx[-1]]
    for a, b in zip(cuts[::2], cuts[1::2]):  # the bus, with a gap where each value lane crosses it
        ax.plot([a, b], [y_e, y_e], color=QUERY, lw=1.4, zorder=1, solid_capstyle="butt")
    total = circle(ax, left + 0.4 * (width - left), y_sum, 0.17, "$\\Sigma$", BLACK, size=11)
    for j, c in enumerate(cx):
        x = box(ax, c, y_x, 0.5, 0.34, f"$x_{{{j + 1}}}$", GREY, lw=2.0 if j == i - 1 else 1.2)
        label(ax, c, y_word, words[j], size=9, style="italic", color="black",
              weight="bold" if j == i - 1 else "normal")
        for off, name, color in [(-dx, "q", QUERY), (0.0, "k", KEY), (dx, "v", VALUE)]:
            faded = name == "q" and j != i - 1
            b = box(ax, c + off, y_qkv, bw, 0.3, f"${name}_{{{j + 1}}}$", GREY if faded else color, size=8.5,
                    fill=0.1 if faded else 0.25, textcolor=GREY if faded else "black")
            arrow(ax, (c + off / 3, x.top[1]), b.bottom, GREY if faded else BLACK, lw=0.9)
            if j == i - 1:
                label(ax, c + off * 0.85 + (0.1 if off >= 0 else -0.1), (y_x + y_qkv) / 2, name.upper(), size=8,
                      style="italic")
        e = box(ax, c, y_e, min(0.52, 0.5 * g), 0.28, f"$e_{{{i},{j + 1}}}$", BLACK, size=8, fill=0.0)
        arrow(ax, (c, y_qkv + 0.15), e.bottom, KEY, lw=1.1)
        ax.plot([c + dx, c + dx], [y_qkv + 0.15, y_gate - 0.15], color=VALUE, lw=1.3, zorder=2)
        text = f"$\\times\\,\\alpha_{{{i},{j + 1}}}$" if weights is None else f"$\\times\\,{alpha[j]:.2f}$"
        gate = box(ax, c + dx, y_gate, min(0.66, 0.6 * g), 0.3, text, VALUE, size=8, fill=0.12)
        arrow(ax, e.top, (gate.x - gate.w / 4, gate.bottom[1]), BLACK, lw=0.9)
        arrow(ax, gate.top, (total.x + 0.1 * (j - (n - 1) / 2), total.bottom[1] + 0.02), VALUE,
              lw=0.6 + 3.5 * alpha[j], alpha=0.3 + 0.7 * alpha[j] / alpha.max(), head=False, zorder=1)
    out = box(ax, total.x + 0.75, y_sum, 0.55, 0.34, f"$h_{{{i}}}$", QUERY, lw=2.0)
    arrow(ax, total.right, out.left)
    label(ax, out.right[0] + 0.15, y_sum, f"$h_{{{i}}} = \\Sigma_j\\, \\alpha_{{{i}j}}\\, v_j$\nthe values $v_j$ "
          f"of all tokens, weighted for \u201c{words[i - 1]}\u201d", ha="left", size=9, color="black", linespacing=1.5)
    return fig


# ------------------------------------------------------------------------------------------- multi-head
def multihead_split_merge(d_model: int = 8, n_heads: int = 2, seq_len: int = 3) -> Figure:
    """Multi-head attention as tensor shapes (chapter 7): split the heads, attend in each, merge them back.

    The queries :math:`XQ` of shape (n, d_model) are reshaped to (n, H, d_head), cutting each token's features
    into H groups (the colours), transposed to (H, n, d_head) so that the heads act as a batch axis, and each
    head computes its own weights (H, n, n) and output (H, n, d_head). Transposing and reshaping back
    concatenates the heads to (n, d_model); the output projection :math:`Y` mixes them. :math:`XK` and
    :math:`XV` are split in the same way. Every shape is written with the actual sizes.

    Args:
        d_model: width of the token vectors (at most 32, to draw every entry).
        n_heads: number of heads :math:`H` (1 to 6); it must divide ``d_model``.
        seq_len: number of tokens :math:`n` (1 to 8).

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for sizes out of range or ``n_heads`` that does not divide ``d_model``.
        TypeError: for a size that is not an int.
    """
    d = check_int_range("d_model", d_model, 1, 32, " (the diagram draws every entry)")
    H = check_int_range("n_heads", n_heads, 1, 6, " (one colour per head)")
    n = check_int_range("seq_len", seq_len, 1, 8, " (the diagram draws every token)")
    if d % H:
        raise ValueError(f"n_heads must divide d_model, got d_model={d} and n_heads={H}")
    dh = d // H
    palette = np.array([tint(c, 0.75) for c in (BLUE, ORANGE, GREEN, VERMILION, PINK, SKY)])
    by_column = palette[np.arange(d) // dh][None, None].repeat(n, axis=1)               # (1, n, d, 3)
    split = palette[:H, None, :][None].repeat(n, axis=0).repeat(dh, axis=2)            # (n, H, dh, 3)
    per_head = palette[:H, None, None, :].repeat(n, axis=1)                            # (H, n, 1, 3)
    stages = [  # (name, symbolic shape, numeric shape, colours, operation on the arrow that leads here)
        ("$XQ$", "(n, d_model)", (n, d), by_column, ""),
        ("split", "(n, H, d_head)", (n, H, dh), split, "reshape"),
        ("heads first", "(H, n, d_head)", (H, n, dh), per_head.repeat(dh, axis=2), "transpose"),
        ("weights", "(H, n, n)", (H, n, n), 0.5 + 0.5 * per_head.repeat(n, axis=2), "scores,\nsoftmax"),
        ("head outputs", "(H, n, d_head)", (H, n, dh), per_head.repeat(dh, axis=2), "$\\times$ values"),
        ("concatenated", "(n, d_model)", (n, d), by_column, "transpose,\nreshape"),
        ("output", "(n, d_model)", (n, d), np.full((1, n, d, 3), tint(GREY, 0.6)), "$\\times\\, Y$"),
    ]
    offset, gap = 0.09, 0.72
    widths = sum(c.shape[2] for *_, c, _ in stages)
    cell = min(0.16, 1.1 / n, (10.0 - 0.6 - 6 * gap - offset * sum(c.shape[0] - 1 for *_, c, _ in stages)) / widths)
    tallest = max(c.shape[1] * cell + (c.shape[0] - 1) * offset for *_, c, _ in stages)
    width, height = 10.0, tallest + 1.65
    fig, ax = canvas(width, height)
    x, y_mid = 0.4, 0.75 + tallest / 2
    for name, symbolic, shape, colors, operation in stages:
        if operation:
            arrow(ax, (x - gap + 0.08, y_mid), (x - 0.08, y_mid), lw=1.1)
            label(ax, x - gap / 2, y_mid + 0.12, operation, va="bottom", size=8.5, linespacing=1.1)
        w, h = tensor_cards(ax, x, y_mid - colors.shape[1] * cell / 2, colors, cell, offset)
        label(ax, x + w / 2, 0.58, name, size=9, color="black")
        label(ax, x + w / 2, 0.36, symbolic.replace("d_model", "$d_{\\mathrm{model}}$").replace(
            "d_head", "$d_{\\mathrm{head}}$"), size=8.5)
        label(ax, x + w / 2, 0.15, str(shape), size=9, color="black")
        x += w + gap
    label(ax, 0.15, height - 0.3, f"$d_{{\\mathrm{{model}}}}$ = {d},  $H$ = n_heads = {H},  "
          f"$d_{{\\mathrm{{head}}}}$ = {d} / {H} = {dh},  $n$ = {n} tokens.  Colours: heads; a stack of cards: "
          "its first axis.  Each head: $\\mathrm{softmax}(qk^\\top / \\sqrt{d_{\\mathrm{head}}})\\, v$.\n"
          "$XK$ and $XV$ are split in the same way. The library puts a batch axis in front: "
          "(B, T, D) → (B, T, H, Dh) → (B, H, T, Dh).", ha="left", size=8.5, linespacing=1.6)
    return fig


# --------------------------------------------------------------------------------------------- the block
_NORM_TITLES = {"pre": "Pre-norm: $x + \\mathrm{Sublayer}(\\mathrm{LayerNorm}(x))$   (chapter 8's choice; the "
                       "library's default)",
                "post": "Post-norm: $\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))$   (the original Transformer)"}


def _block_row(ax, norm: str, y: float, sublayers, width: float) -> None:
    """One block, left to right at height ``y``: each sublayer in a residual connection, its norm before
    (pre) or after (post)."""
    label(ax, 0.1, y + 0.75, _NORM_TITLES[norm], ha="left", size=9.5, color="black")
    ln_w, r, slot = 0.82, 0.13, (width - 1.75) / len(sublayers)
    f_w = min(1.5, slot - ln_w - 2 * r - 0.72)
    gp = (slot - ln_w - 2 * r - f_w) / 4
    label(ax, 0.35, y, "$x$", size=12, color="black")
    label(ax, 0.35, y - 0.3, "(B, T, D)", size=8)
    prev, x = (0.5, y), 0.7
    for k, (name, color) in enumerate(sublayers):
        bx = x + gp / 2
        ax.plot([bx], [y], "o", color=BLACK, ms=3.5, zorder=4)
        parts = [("LayerNorm", YELLOW, ln_w), (name, color, f_w), ("+", BLACK, 2 * r)]
        if norm == "post":
            parts = parts[1:] + parts[:1]
        x += gp
        for text, c, w in parts:
            if text == "+":
                node = circle(ax, x + r, y, r, "+", BLACK, size=11)
                ax.plot([bx, bx, node.x], [y, y + 0.48, y + 0.48], color=INK, lw=1.1, zorder=1)
                arrow(ax, (node.x, y + 0.48), node.top, INK)
                if k == 0:
                    label(ax, (bx + node.x) / 2, y + 0.58, "residual connection", size=8)
            else:
                node = box(ax, x + w / 2, y, w, 0.5, text, c, size=8.5, fill=0.45 if c == YELLOW else 0.25)
            arrow(ax, prev, node.left)
            prev, x = node.right, x + w + gp
            if c == CROSS:
                arrow(ax, (node.x, y - 0.62), node.bottom, CROSS, lw=1.3)
                label(ax, node.x, y - 0.74, "encoder output $m$ (keys, values)", size=8, color=INK)
        x = 0.7 + (k + 1) * slot
    arrow(ax, prev, (width - 0.85, y))
    label(ax, width - 0.45, y, "output", size=9, color="black")
    label(ax, width - 0.45, y - 0.3, "(B, T, D)", size=8)


def transformer_block(norm: str = "both", kind: str = "encoder") -> Figure:
    """The Transformer block: its sublayers, their residual connections and where layer norm sits.

    Each sublayer (self-attention, for a decoder also cross-attention, then the feed-forward network) sits in a
    residual connection. Pre-norm normalises the sublayer's input, ``x + f(LayerNorm(x))``, leaving the residual
    path untouched (a pre-norm stack ends with one final LayerNorm); post-norm normalises after the sum,
    ``LayerNorm(x + f(x))``. These are ``tl.EncoderBlock`` and ``tl.DecoderBlock`` with ``norm_first=True`` or
    ``False``. The block keeps the shape (B, T, D) of its input.

    Args:
        norm: ``'pre'``, ``'post'``, or ``'both'`` (pre-norm above post-norm, to compare).
        kind: ``'encoder'`` (self-attention, feed-forward) or ``'decoder'`` (masked self-attention,
            cross-attention to the encoder's output, feed-forward).

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for an unknown ``norm`` or ``kind``.
    """
    check_choice("norm", norm, ("pre", "post", "both"))
    check_choice("kind", kind, ("encoder", "decoder"))
    sublayers = ([("Multi-head\nself-attention", ORANGE)] if kind == "encoder"
                 else [("Masked\nself-attention", ORANGE), ("Cross-\nattention", CROSS)])
    sublayers.append(("Feed-forward\nnetwork", SKY))
    rows = ["pre", "post"] if norm == "both" else [norm]
    pitch = 1.5 if kind == "encoder" else 1.85
    width, height = 10.0, pitch * len(rows) + 0.1
    fig, ax = canvas(width, height)
    for r, which in enumerate(rows):
        _block_row(ax, which, height - 1.0 - r * pitch, sublayers, width)
    return fig


# ------------------------------------------------------------------------------------ the architectures
def architectures(n_tokens: int = 4, focus: int = 2) -> Figure:
    """Encoder, decoder and encoder–decoder side by side, as one attention layer each (chapter 9).

    The encoder's self-attention is bidirectional (every token reads every token), the decoder's is masked
    (token :math:`i` reads tokens :math:`j \\le i`), and in the encoder–decoder each target position also reads
    every output :math:`m_j` of the encoder through cross-attention (no future mask: the whole source is
    known). The edges into the ``focus`` position are drawn strong; a model stacks ``n_layers`` such layers.

    Args:
        n_tokens: tokens per sequence (2 to 6); the encoder–decoder has as many source as target tokens.
        focus: the position whose reads are highlighted (1 to ``n_tokens``).

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for ``n_tokens`` or ``focus`` out of range.
        TypeError: for an ``n_tokens`` or ``focus`` that is not an int.
    """
    n = check_int_range("n_tokens", n_tokens, 2, 6, " (the diagram draws every attention edge)")
    f = check_int_range("focus", focus, 1, n, f" (there are {n} tokens)") - 1
    width, height, sp = 10.0, 3.55, min(0.55, 2.1 / n)
    w, (y0, y1, y2) = min(0.38, 0.86 * sp), (0.7, 1.6, 2.45)
    fig, ax = canvas(width, height)

    def tokens(centre):
        xs = [centre + (j - (n - 1) / 2) * sp for j in range(n)]
        for j, x in enumerate(xs):
            box(ax, x, y0, w, 0.28, str(j + 1), GREY, size=8.5)
        return xs

    everything, causal = (lambda i, j: True), (lambda i, j: j <= i)
    for x in (2.75, 5.6):
        ax.plot([x, x], [0.1, height - 0.1], color=GREY, lw=0.6, alpha=0.5)
    for centre, allowed, color, title, subtitle, note, last in [
            (1.35, everything, ENCODER, "Encoder (BERT-style)", "bidirectional self-attention",
             "one contextual vector per token", n),
            (4.15, causal, DECODER, "Decoder (GPT-style)", "masked (causal) self-attention",
             "position $i$ predicts token $i + 1$", f + 1),
            (7.6, None, CROSS, "Encoder–decoder (Transformer, T5)", "cross-attention from the decoder to the encoder",
             None, None)]:
        label(ax, centre, height - 0.25, title, size=10, color="black")
        label(ax, centre, height - 0.5, subtitle, size=8.5)
        if allowed:
            xs = tokens(centre)
            attention_edges(ax, xs, xs, y0, y1, allowed, f, color, "h", w)
            label(ax, centre, y2, note, size=8.5)
            label(ax, centre, 0.2, f"token {f + 1} reads tokens 1–{last}" if last > 1 else "token 1 reads token 1",
                  size=8.5, color="black")
    src, tgt = tokens(6.55), tokens(8.75)
    m = attention_edges(ax, src, src, y0, y1, everything, f, ENCODER, "m", w)
    attention_edges(ax, tgt, tgt, y0, y1, causal, f, DECODER, "y", w)
    for i, x in enumerate(tgt):  # the decoder's state is the query of cross-attention
        arrow(ax, (x, y1 + 0.14), (x, y2 - 0.14), DECODER, lw=1.6 if i == f else 0.9)
    attention_edges(ax, [b.x for b in m], tgt, y1, y2, everything, f, CROSS, "h", w)
    label(ax, 6.55, 0.2, "source", size=8.5, color="black")
    targets = f"targets 1–{f + 1}" if f else "target 1"
    label(ax, 8.75, 0.2, f"target token {f + 1} reads {targets},\nthen every $m_j$", size=8.5, color="black")
    return fig


# ----------------------------------------------------------------------------------- the whole model
def _stack(ax, x, y0, w, sublayers, norm: str, n_layers: int, side: str, color):
    """One column of the encoder–decoder: a frame holding one block (drawn once, repeated ``n_layers`` times),
    its sublayers bottom to top, each in a residual connection. Returns the block's input anchor, its output
    anchor and the boxes of the sublayers (by name)."""
    bh, gap, r = 0.42, 0.2, 0.12
    parts = []                                                  # (kind, text, colour)
    for name, c in sublayers:
        if norm == "post":
            parts += [("sub", name, c), ("addnorm", "Add & Norm", YELLOW)]
        else:
            parts += [("norm", "Norm", YELLOW), ("sub", name, c), ("add", "+", BLACK)]
    heights = [2 * r if kind == "add" else (0.34 if kind in ("addnorm", "norm") else bh) for kind, _, _ in parts]
    top = y0 + 0.35 + sum(heights) + gap * (len(parts) - 1) + 0.3
    ax.add_patch(Rectangle((x - w / 2 - 0.3, y0), w + 0.6, top - y0, fc=tint(color, 0.08), ec=color, lw=1.3,
                           ls="--", zorder=0))
    lx = x - w / 2 - 0.55 if side == "left" else x + w / 2 + 0.55
    label(ax, lx, (y0 + top) / 2, f"{n_layers}×", size=12, color="black")
    y, prev, boxes, branch = y0 + 0.35, (x, y0), {}, None
    for (kind, text, c), h in zip(parts, heights):
        cy = y + h / 2
        if kind == "add":
            node = circle(ax, x, cy, r, "+", BLACK, size=11)
        else:
            node = box(ax, x, cy, w if kind == "sub" else 0.8 * w, h, text, c, size=8.5,
                       fill=0.45 if c == YELLOW else 0.25)
        if kind == "sub":
            boxes[text] = node
        if (norm == "post" and kind == "sub") or (norm == "pre" and kind == "norm"):
            branch = (x, prev[1] + 0.08)                       # the residual path leaves here
            ax.plot([x], [branch[1]], "o", color=BLACK, ms=3, zorder=4)
        arrow(ax, prev, node.bottom)
        if (norm == "post" and kind == "addnorm") or (norm == "pre" and kind == "add"):
            bx = x - w / 2 - 0.15 if side == "left" else x + w / 2 + 0.15
            ax.plot([x, bx, bx], [branch[1], branch[1], cy], color=INK, lw=1.0, zorder=1)
            arrow(ax, (bx, cy), node.left if side == "left" else node.right, INK)
        prev, y = node.top, y + h + gap
    return (x, y0), prev, boxes, top


def encoder_decoder(n_layers: int = 6, norm: str = "post") -> Figure:
    """The encoder–decoder Transformer as stacked blocks: the figure every reader of the paper knows.

    Left, the encoder: input embeddings plus positions, then ``n_layers`` blocks of multi-head self-attention and
    a feed-forward network. Right, the decoder: output embeddings (the target shifted right) plus positions, then
    ``n_layers`` blocks of masked self-attention, cross-attention to the encoder's output, and a feed-forward
    network; a linear layer and a softmax turn its last states into next-token probabilities. Each sublayer sits
    in a residual connection. This is ``tl.EncoderDecoder``.

    Args:
        n_layers: the number of blocks written beside each stack (1 to 48; the paper's base model has 6).
        norm: ``'post'``, as in the original paper ("Add & Norm" after each sublayer), or ``'pre'``, the library's
            default (a norm before each sublayer, the sum after it, and one final norm on top of each stack).

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for ``n_layers`` out of range or an unknown ``norm``.
        TypeError: for an ``n_layers`` that is not an int.
    """
    n = check_int_range("n_layers", n_layers, 1, 48)
    check_choice("norm", norm, ("post", "pre"))
    width, height = 9.4, 12.0                 # the height is trimmed to the drawing at the end
    fig, ax = canvas(width, height)
    w, xe, xd = 2.2, 2.5, 6.9

    def base(x, words, embedding):
        label(ax, x, 0.25, words, size=9, color="black")
        emb = box(ax, x, 0.85, w, 0.42, embedding, GREY, size=8.5)
        arrow(ax, (x, 0.42), emb.bottom)
        plus = circle(ax, x, 1.45, 0.13, "+", BLACK, size=11)
        arrow(ax, emb.top, plus.bottom)
        side = -1 if x < width / 2 else 1
        wave = np.linspace(0, 2 * np.pi, 40)
        cx = x + side * (w / 2 + 0.1)
        ax.plot(cx + side * 0.05 + np.linspace(-0.15, 0.15, 40), 1.45 + 0.09 * np.sin(2 * wave), color=INK, lw=1.0)
        label(ax, cx + side * 0.35, 1.45, "positional\nencoding", size=8, ha="left" if side > 0 else "right")
        arrow(ax, (cx - side * 0.17, 1.45), plus.right if side > 0 else plus.left, INK)
        return plus

    enc_in = base(xe, "inputs (source tokens)", "Input embedding")
    dec_in = base(xd, "outputs, shifted right (target tokens)", "Output embedding")
    _, enc_out, _, enc_top = _stack(ax, xe, 1.85, w, [("Multi-head\nself-attention", ENCODER),
                                                       ("Feed-forward", SKY)], norm, n, "left", ENCODER)
    arrow(ax, enc_in.top, (xe, 1.85 + 0.35 - 0.0), head=False)
    _, dec_out, boxes, dec_top = _stack(ax, xd, 1.85, w, [("Masked multi-head\nself-attention", DECODER),
                                                           ("Multi-head\ncross-attention", CROSS),
                                                           ("Feed-forward", SKY)], norm, n, "right", DECODER)
    arrow(ax, dec_in.top, (xd, 1.85 + 0.35), head=False)
    if norm == "pre":                                               # the final norm of each pre-norm stack
        enc_out = box(ax, xe, enc_top + 0.3, 0.8 * w, 0.32, "Norm", YELLOW, size=8.5, fill=0.45).top
        arrow(ax, (xe, enc_top - 0.15), (xe, enc_top + 0.14))
        dec_norm = box(ax, xd, dec_top + 0.3, 0.8 * w, 0.32, "Norm", YELLOW, size=8.5, fill=0.45)
        arrow(ax, (xd, dec_top - 0.15), dec_norm.bottom)
        dec_out = dec_norm.top
    else:
        arrow(ax, enc_out, (xe, enc_top + 0.15))
        enc_out = (xe, enc_top + 0.15)
    # the encoder's output m feeds every decoder block's cross-attention (keys and values)
    cross = boxes["Multi-head\ncross-attention"]
    ym = enc_out[1] + 0.25
    ax.plot([xe, xe, (xe + xd) / 2, (xe + xd) / 2], [enc_out[1], ym, ym, cross.y], color=CROSS, lw=1.6, zorder=1)
    arrow(ax, ((xe + xd) / 2, cross.y), cross.left, CROSS, lw=1.6)
    label(ax, xe, ym + 0.45, "encoder output $m$:\nkeys and values of\nevery decoder block", size=8,
          ha="center", linespacing=1.3)
    y = dec_out[1] + 0.3
    lin = box(ax, xd, y + 0.25, w, 0.38, "Linear", GREY, size=8.5)
    arrow(ax, dec_out, lin.bottom)
    soft = box(ax, xd, y + 0.9, w, 0.38, "Softmax", GREY, size=8.5)
    arrow(ax, lin.top, soft.bottom)
    arrow(ax, soft.top, (xd, y + 1.35))
    label(ax, xd, y + 1.5, "next-token probabilities", size=9, color="black")
    label(ax, xe, ym + 1.05, "Encoder", size=11, color=ENCODER)
    label(ax, xd + w / 2 + 0.3, y + 0.55, "Decoder", size=11, color=DECODER, ha="left")
    top = max(y + 1.8, ym + 1.35)
    ax.set_xlim(-0.3, 9.7)                     # the book's width of 10 inches, the drawing centred
    ax.set_ylim(0, top)
    fig.set_size_inches(10.0, top)
    return fig


def multihead_heads(n_heads: int = 8, d_model: int = 512) -> Figure:
    """Multi-head attention as a picture of heads (chapter 7): each head projects the queries, keys and values
    to its own width ``d_model / n_heads``, attends with scaled dot products, and the heads' outputs are
    concatenated and mixed by one more linear map :math:`Y`. The heads are drawn as a stack of cards: they run
    side by side on the same input, with different weights.

    Args:
        n_heads: the number of heads :math:`H` (1 to 16; the first three cards are drawn).
        d_model: the width of the token vectors, written with the heads' width (``n_heads`` must divide it).

    Returns:
        The ``Figure``.

    Raises:
        ValueError: for ``n_heads`` or ``d_model`` out of range, or an ``n_heads`` that does not divide ``d_model``.
        TypeError: for a size that is not an int.
    """
    H = check_int_range("n_heads", n_heads, 1, 16)
    d = check_int_range("d_model", d_model, 1, 65536)
    if d % H:
        raise ValueError(f"n_heads must divide d_model, got d_model={d} and n_heads={H}")
    width, height = 7.8, 6.2
    fig, ax = canvas(width, height)
    cards, step = min(H, 3), 0.14
    xs = {"V": 1.9, "K": 3.3, "Q": 4.7}
    colors = {"V": VALUE, "K": KEY, "Q": QUERY}
    for c in range(cards - 1, -1, -1):                       # back cards first, offset up and right
        dx, dy = c * step, c * step
        ax.add_patch(Rectangle((1.1 + dx, 1.05 + dy), 4.4, 2.55, fc="white", ec=INK, lw=1.0, zorder=1 + (cards - c)))
        if c:
            continue                                          # the back cards are the other heads, seen edge-on
        z = 2 + cards
        for name, x in xs.items():
            box(ax, x, 1.45, 1.0, 0.4, f"Linear $W^{name}_i$", colors[name], size=8, zorder=z)
            arrow(ax, (x, 0.55), (x, 1.25), colors[name], zorder=z + 1)
            label(ax, x, 0.38, {"V": "values", "K": "keys", "Q": "queries"}[name], size=8.5)
        att = box(ax, 3.3, 2.75, 3.6, 0.55, "Scaled dot-product attention\n"
                  "softmax$(qk^\\top/\\sqrt{d_{\\mathrm{head}}})\\,v$", ORANGE, size=8, zorder=z)
        for name, x in xs.items():
            arrow(ax, (x, 1.65), (x, att.y - 0.275), colors[name], zorder=z + 1)
        label(ax, 1.25, 3.35, "head $i$", size=8.5, ha="left", zorder=z + 1)
    label(ax, 6.0, 2.2, f"$H$ = {H} heads\n(one card each)", size=8.5, ha="left")
    label(ax, 6.0, 1.45, f"each of width\n$d_{{\\mathrm{{head}}}}$ = {d} / {H} = {d // H}", size=8.5, ha="left")
    concat = box(ax, 3.3, 4.25, 2.2, 0.42, "Concatenate", GREY, size=8.5)
    for c in range(cards):
        arrow(ax, (3.3 + c * step, 3.03 + c * step), (3.3 + (c - 1) * 0.25, concat.y - 0.21), INK, lw=0.9)
    lin = box(ax, 3.3, 5.0, 2.2, 0.42, "Linear $Y$", GREY, size=8.5)
    arrow(ax, concat.top, lin.bottom)
    arrow(ax, lin.top, (3.3, 5.55))
    label(ax, 3.3, 5.75, f"output, width $d_{{\\mathrm{{model}}}}$ = {d}", size=9, color="black")
    ax.set_xlim(-1.1, 8.9)                     # the book's width of 10 inches, the drawing centred
    fig.set_size_inches(10.0, height)
    return fig
