"""Linformer attention (Wang et al., 2020, "Linformer: Self-Attention with Linear Complexity"), chapter 12.

Keys and values are projected *along the sequence axis* from ``n`` positions to ``k`` with learned
``E, F ∈ R^{k×n}``, so each query scores ``k`` projected positions: ``(B, H, T, k)`` weights instead of
``(B, H, T, S)``. A drop-in replacement for :class:`~transformer_lib.multihead.MultiHeadAttention`.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
from torch import nn

from ..checks import check_positive_int, check_same_device
from ..attention import check_mask, scaled_dot_product_attention
from ..multihead import LayerCache, MultiHeadAttention, merge_heads, split_heads
from .sparse import _key_mask

__all__ = ["LinformerAttention"]


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
