"""The three kinds of self-attention of chapter 12 by name: what each computes (pairs, density, FLOPs per layer)
and a layer of each kind (:func:`make_attention`)."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from ..checks import check_choice, check_positive_int
from ..multihead import MultiHeadAttention
from .linformer import LinformerAttention
from .sparse import SparseAttention, _check_pattern_args, _sparse_pairs

__all__ = ["ATTENTION_KINDS", "attention_pairs", "attention_pattern_density", "flops_per_layer", "make_attention"]

ATTENTION_KINDS = ("full", "linformer", "sparse")


def attention_pairs(kind: str, n: int, k: Optional[int] = None, window: Optional[int] = None, n_global: int = 0,
                    n_random: int = 0, causal: bool = False, global_positions: Sequence[int] = ()) -> int:
    """Number of (query, key) scores per head that enter the softmax for one length-``n`` self-attention.

    ``'full'``: ``n²`` (``n(n+1)/2`` causal); ``'linformer'``: ``n·k``; ``'sparse'``: the allowed entries of
    :func:`~transformer_lib.efficient.sparse.sparse_pattern` (counted in ``O(n)`` without building it). This is
    what an ideal kernel computes; the dense-mask implementations (masked full attention,
    ``SparseAttention(impl='dense')``) still compute ``n²``.

    Args:
        kind: ``'full'``, ``'linformer'`` or ``'sparse'``.
        n: sequence length.
        k: Linformer's projected length.
        window, n_global, n_random: the sparse pattern.
        causal: count only ``j <= i`` (not available for Linformer).
        global_positions: the sparse pattern's further global tokens, by position (negative counts from the end).

    Returns:
        the count, an int.
    """
    check_choice("kind", kind, ATTENTION_KINDS)
    check_positive_int("n", n)
    if kind == "full":
        return n * (n + 1) // 2 if causal else n * n
    if kind == "linformer":
        if k is None:
            raise ValueError("kind='linformer' needs k= (the projected length)")
        check_positive_int("k", k)
        if causal:
            raise ValueError("Linformer has no causal form (causal=True given)")
        return n * k
    if window is None:
        raise ValueError("kind='sparse' needs window=")
    _check_pattern_args(n, window, n_global, n_random, 0, global_positions)
    return _sparse_pairs(n, window, n_global, n_random, causal, global_positions)


def attention_pattern_density(kind: str, n: int, **kw) -> float:
    """:func:`attention_pairs` divided by ``n²``: the fraction of the full score matrix that is computed."""
    return attention_pairs(kind, n, **kw) / (n * n)


def flops_per_layer(kind: str, n: int, d_model: int, k: Optional[int] = None, window: Optional[int] = None,
                    n_global: int = 0, n_random: int = 0, causal: bool = False,
                    d_ff: Optional[int] = None, global_positions: Sequence[int] = ()) -> Dict[str, int]:
    """FLOPs of one self-attention layer (and, with ``d_ff``, its feed-forward network) on one length-``n``
    sequence, by part.

    Convention: 2 FLOPs per multiply-add; softmax, masking, norms, biases, activations and dropout are not counted
    (the convention of :class:`torch.utils.flop_counter.FlopCounterMode`, which the tests count against). Summed
    over the heads (``H · Dh = D``), so the number of heads does not appear.

    * ``scores``: ``q kᵀ``, 2 · pairs · D (pairs from :func:`attention_pairs`);
    * ``values``: weights times values, 2 · pairs · D;
    * ``seq_proj``: Linformer's ``E k`` and ``F v``, 2 · 2 · k · n · D (zero otherwise);
    * ``attention`` = scores + values + seq_proj;
    * ``projections``: ``in_proj`` and ``out_proj``, 2 · n · D · 3D + 2 · n · D · D = 8 n D²;
    * ``feed_forward``: its two linear maps, 2 · 2 · n · D · d_ff = 4 n D d_ff (zero without ``d_ff``);
    * ``total`` = attention + projections + feed_forward.

    Args:
        kind: ``'full'``, ``'linformer'`` or ``'sparse'``.
        n: sequence length.
        d_model: model width ``D``.
        k, window, n_global, n_random, causal, global_positions: as in :func:`attention_pairs`.
        d_ff: hidden width of the layer's feed-forward network (None: count the attention only).

    Returns:
        dict with keys ``scores, values, seq_proj, attention, projections, feed_forward, total`` (ints).
    """
    check_positive_int("d_model", d_model)
    if d_ff is not None:
        check_positive_int("d_ff", d_ff)
    pairs = attention_pairs(kind, n, k=k, window=window, n_global=n_global, n_random=n_random, causal=causal,
                            global_positions=global_positions)
    scores = values = 2 * pairs * d_model
    seq_proj = 4 * k * n * d_model if kind == "linformer" else 0
    attention = scores + values + seq_proj
    projections = 8 * n * d_model * d_model
    feed_forward = 4 * n * d_model * d_ff if d_ff is not None else 0
    return {"scores": scores, "values": values, "seq_proj": seq_proj, "attention": attention,
            "projections": projections, "feed_forward": feed_forward,
            "total": attention + projections + feed_forward}


def make_attention(kind: str, d_model: int, n_heads: int, **kw) -> MultiHeadAttention:
    """Build an attention layer by name: ``'full'`` (:class:`~transformer_lib.multihead.MultiHeadAttention`),
    ``'linformer'`` (:class:`~transformer_lib.efficient.linformer.LinformerAttention`, needs ``seq_len=``) or
    ``'sparse'`` (:class:`~transformer_lib.efficient.sparse.SparseAttention`).

    Args:
        kind: one of :data:`ATTENTION_KINDS`.
        d_model, n_heads: width and heads.
        **kw: the chosen class's other arguments (``dropout``, ``bias``, ``seq_len``, ``k``, ``window``…).

    Returns:
        the layer; all three share the forward signature ``(x, context, mask, return_weights, causal, cache)``.
    """
    check_choice("kind", kind, ATTENTION_KINDS)
    if kind == "full":
        return MultiHeadAttention(d_model, n_heads, **kw)
    if kind == "linformer":
        if "seq_len" not in kw:
            raise ValueError("make_attention('linformer', ...) needs seq_len= (the longest sequence)")
        return LinformerAttention(d_model, n_heads, **kw)
    return SparseAttention(d_model, n_heads, **kw)
