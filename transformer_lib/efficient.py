"""Cheaper attention for long sequences: Linformer and sparse (BigBird-style) attention (chapter 12).

Full attention scores every (query, key) pair: ``n²`` scores per head, ``O(n² d)`` compute and an ``(n, n)``
weight matrix. Two ways to spend less, both drop-in replacements for
:class:`~transformer_lib.multihead.MultiHeadAttention` (same forward signature, same ``in_proj``/``out_proj``
parameters, so ``layer.load_state_dict(mha.state_dict(), strict=False)`` copies the shared weights):

* :class:`LinformerAttention` (Wang et al., 2020, "Linformer: Self-Attention with Linear Complexity"): keys and
  values are projected *along the sequence axis* from ``n`` positions to ``k`` with learned ``E, F ∈ R^{k×n}``,
  so each query scores ``k`` projected positions: ``(B, H, T, k)`` instead of ``(B, H, T, S)``.
* :class:`~transformer_lib.sparse.SparseAttention` (Zaheer et al., 2020, "Big Bird: Transformers for Longer Sequences"): each query
  attends to a local window ``|i - j| <= window``, to the first ``n_global`` tokens (which themselves attend to
  everything) and to ``n_random`` random keys. :func:`~transformer_lib.sparse.sparse_pattern` builds the pattern as an ``(n, n)`` boolean
  mask (exact, but the dense kernel still pays for ``n²`` scores); :func:`~transformer_lib.sparse.blocked_sparse_attention` computes
  the same function block by block in ``O(n · (window + n_global + n_random))`` memory.

The sparse machinery lives in :mod:`~transformer_lib.sparse` and is re-exported here. Counting helpers for the
chapter's tables: :func:`attention_pairs`, :func:`attention_pattern_density` and
:func:`flops_per_layer`. Shapes use the legend of :mod:`transformer_lib.attention` (B batch, T query length,
S key length, D d_model, H heads, Dh head size).
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ._checks import check_choice, check_positive_int, check_same_device
from .attention import check_mask, scaled_dot_product_attention
from .multihead import LayerCache, MultiHeadAttention, merge_heads, split_heads
from .sparse import (SparseAttention, _check_pattern_args, _key_mask, _sparse_pairs,  # noqa: F401
                     blocked_sparse_attention, random_links, sparse_pattern)


__all__ = [
    "ATTENTION_KINDS",
    "LinformerAttention",
    "attention_pairs",
    "attention_pattern_density",
    "flops_per_layer",
    "make_attention",
]

ATTENTION_KINDS = ("full", "linformer", "sparse")


# ----------------------------------------------------------------------------------------------------------------
# Linformer
# ----------------------------------------------------------------------------------------------------------------
class LinformerAttention(MultiHeadAttention):
    """Multi-head attention with keys and values projected along the sequence axis (Wang et al., 2020).

    ``head_i = softmax(q_i (E k_i)ᵀ / √Dh) (F v_i)`` with ``E, F ∈ R^{k×n}`` shared by all heads (the paper's
    "headwise sharing"; ``share_kv=True`` is its "key-value sharing" ``E = F``). ``E`` and ``F`` start as the
    random projections of the paper's Theorem 1: entries ``N(0, 1/k)``. Scores are ``(B, H, T, k)``: cost and
    memory grow linearly in ``n`` for a fixed ``k``.

    * A sequence shorter than ``seq_len`` (``S < seq_len``) uses the first ``S`` columns of ``E`` and ``F``;
      a longer one is an error (the projections have ``seq_len`` columns).
    * Masks act on keys only (a padding mask): the padded keys and values are set to zero *before* the
      projection, so padding never reaches the ``k`` projected positions. A mask that differs between queries
      cannot be applied after the sequence axis has been mixed, and neither can a causal mask: ``causal=True``
      and ``cache=`` raise (the paper uses Linformer in encoders).

    Args:
        d_model: model width ``D``.
        n_heads: number of heads ``H``; must divide ``d_model``.
        seq_len: the longest sequence ``n`` the layer accepts (number of columns of ``E`` and ``F``).
        k: projected length (rows of ``E`` and ``F``).
        dropout: dropout on the attention weights (training only).
        bias: use biases in ``in_proj`` and ``out_proj``.
        share_kv: one projection for keys and values (``F`` is ``E``).

    Shapes:
        x (B, T, D); context (B, S, D) (defaults to x), S <= seq_len; mask bool broadcastable to (B, H, 1, S),
        True = real token; returns (B, T, D), or ((B, T, D), weights (B, H, T, k)) with ``return_weights=True``
        (weights over the projected positions).
    """

    def __init__(self, d_model: int, n_heads: int, seq_len: int, k: int = 64, dropout: float = 0.0,
                 bias: bool = True, share_kv: bool = True):
        super().__init__(d_model, n_heads, dropout=dropout, bias=bias)
        check_positive_int("seq_len", seq_len)
        check_positive_int("k", k)
        self.seq_len, self.k, self.share_kv = seq_len, k, share_kv
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))  # (k, n)
        # With share_kv the same Parameter is registered twice (as tied embeddings are): one tensor, two names.
        self.F = self.E if share_kv else nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))

    def extra_repr(self) -> str:
        return f"seq_len={self.seq_len}, k={self.k}, share_kv={self.share_kv}"

    def forward(
        self,
        x: torch.Tensor,
        context: Optional[torch.Tensor] = None,
        mask: Optional[torch.Tensor] = None,
        return_weights: bool = False,
        causal: bool = False,
        cache: Optional[LayerCache] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend from ``x`` to the ``k`` projected positions of ``context`` (of ``x`` when None).

        Args:
            x: queries' input.
            context: keys' and values' input (cross-attention).
            mask: bool key mask, True = real token; padded keys/values are zeroed before the projection.
            return_weights: also return the (B, H, T, k) weights.
            causal: not supported (raises ValueError).
            cache: not supported (raises ValueError).

        Returns:
            (B, T, D), or (out, weights (B, H, T, k)).
        """
        if causal:
            raise ValueError("LinformerAttention does not support causal=True: E and F mix all positions, "
                             "future ones included, into every projected key; use SparseAttention or "
                             "MultiHeadAttention in a decoder")
        if cache is not None:
            raise ValueError("LinformerAttention does not support a key/value cache (got cache=...): the "
                             "projection along the sequence axis changes with every new token")
        self._check_inputs(x, context)
        src = x if context is None else context
        b, t, d = x.shape
        s, h = src.shape[1], self.n_heads
        if s > self.seq_len:
            raise ValueError(f"sequence length {s} is longer than this LinformerAttention's seq_len="
                             f"{self.seq_len} (E and F have {self.seq_len} columns); build it with seq_len >= {s}")
        q = split_heads(self._project(x, slice(0, d)), h)  # (B, H, T, Dh)
        k, v = split_heads(self._project(src, slice(d, 3 * d)), 2 * h).chunk(2, dim=1)  # 2 × (B, H, S, Dh)
        if mask is not None:
            check_mask(mask, b, h, t, s)
            check_same_device(x=x, mask=mask)
            keep = _key_mask(mask, "LinformerAttention").unsqueeze(-1).to(k.dtype)  # (B|1, H|1, S, 1)
            k, v = k * keep, v * keep  # padded keys and values contribute nothing to E k, F v
        k = self.E[:, :s].to(k.dtype) @ k  # (k, S) @ (B, H, S, Dh) -> (B, H, k, Dh)
        v = self.F[:, :s].to(v.dtype) @ v  # (B, H, k, Dh)
        out = scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           return_weights=return_weights)
        if return_weights:
            out, weights = out
            return self.out_proj(merge_heads(out)), weights
        return self.out_proj(merge_heads(out))


# ----------------------------------------------------------------------------------------------------------------
# Counting: pairs, density, FLOPs
# ----------------------------------------------------------------------------------------------------------------
def attention_pairs(kind: str, n: int, k: Optional[int] = None, window: Optional[int] = None, n_global: int = 0,
                    n_random: int = 0, causal: bool = False, global_positions: Sequence[int] = ()) -> int:
    """Number of (query, key) scores per head that enter the softmax for one length-``n`` self-attention.

    ``'full'``: ``n²`` (``n(n+1)/2`` causal); ``'linformer'``: ``n·k``; ``'sparse'``: the allowed entries of
    :func:`~transformer_lib.sparse.sparse_pattern` (counted in ``O(n)`` without building it). This is what an ideal kernel computes; the
    dense-mask implementations (masked full attention, ``SparseAttention(impl='dense')``) still compute ``n²``.

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


# ----------------------------------------------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------------------------------------------
def make_attention(kind: str, d_model: int, n_heads: int, **kw) -> MultiHeadAttention:
    """Build an attention layer by name: ``'full'`` (:class:`~transformer_lib.multihead.MultiHeadAttention`),
    ``'linformer'`` (:class:`LinformerAttention`, needs ``seq_len=``) or ``'sparse'`` (:class:`~transformer_lib.sparse.SparseAttention`).

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
