"""Multi-head attention (Vaswani et al., 2017, section 3.2.2) with an optional key/value cache.

The layer projects ``x`` to queries, keys and values with one ``in_proj`` matrix (rows ``q | k | v``), splits the
model dimension into ``n_heads`` heads of size ``d_head = d_model / n_heads`` (reshape to (B, T, H, d_head), then
transpose to (B, H, T, d_head) so that heads act as a batch axis), attends in each head and merges the heads back
with ``out_proj``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch
from torch import nn

from .checks import check_dropout, check_positive_int, check_same_device, check_tensor
from .attention import _attend, check_mask

__all__ = ["LayerCache", "KVCache", "MultiHeadAttention", "split_heads", "merge_heads"]


@dataclass
class LayerCache:
    """Keys and values one attention layer has already computed during step-by-step decoding.

    Self-attention appends the new keys/values at every step. Cross-attention (``static=True``) computes the
    encoder memory's keys/values once, on the first step, and reuses them.

    Shapes:
        k, v: (B, H, S_so_far, d_head).
    """

    k: Optional[torch.Tensor] = None
    v: Optional[torch.Tensor] = None
    static: bool = False

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search keeps the surviving hypotheses)."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class KVCache:
    """The caches of a whole decoder: one self-attention and one cross-attention :class:`LayerCache` per layer."""

    def __init__(self, n_layers: int):
        check_positive_int("n_layers", n_layers)
        self.self_attn = [LayerCache() for _ in range(n_layers)]
        self.cross_attn = [LayerCache(static=True) for _ in range(n_layers)]

    @property
    def length(self) -> int:
        """Number of positions already decoded."""
        return self.self_attn[0].length

    def reorder(self, index: torch.Tensor) -> None:
        for c in self.self_attn + self.cross_attn:
            c.reorder(index)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H): reshape then transpose so the heads become a batch axis."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, H·d_head): the inverse of :func:`split_heads` (head-major concatenation)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention.

    Args:
        d_model: model width ``D``.
        n_heads: number of heads ``H``; must divide ``d_model``.
        dropout: dropout on the attention weights (training only).
        bias: use biases in the projections.
        position: optional attention-level position scheme from :mod:`transformer_lib.positional`
            (:class:`~transformer_lib.positional.ALiBi`, :class:`~transformer_lib.positional.RelativePosition`,
            :class:`~transformer_lib.positional.Rotary`), applied to self-attention.

    Shapes:
        x (B, T, D); context (B, S, D) (defaults to x); mask bool broadcastable to (B, H, T, S), True = may attend;
        returns (B, T, D), or ((B, T, D), weights (B, H, T, S)) with ``return_weights=True``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 position: Optional[nn.Module] = None):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got d_model={d_model}, n_heads={n_heads}")
        check_dropout(dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: W_q | W_k | W_v
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.position = position

    def _project(self, x: torch.Tensor, part: slice) -> torch.Tensor:
        w = self.in_proj.weight[part]
        b = None if self.in_proj.bias is None else self.in_proj.bias[part]
        return nn.functional.linear(x, w, b)

    def _check_inputs(self, x: torch.Tensor, context: Optional[torch.Tensor] = None,
                      cache: Optional["LayerCache"] = None) -> None:
        """The checks every attention layer of the library runs on its inputs (subclasses reuse them)."""
        check_tensor("x", x, ndim=3, dtype="float", last_dim=self.d_model)
        if context is not None:
            check_tensor("context", context, ndim=3, dtype="float", last_dim=self.d_model)
            check_same_device(x=x, context=context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(f"context must have the batch size of x ({x.shape[0]}), got {context.shape[0]}")
        if self.in_proj.weight.device != x.device:
            raise ValueError(f"x is on {x.device} but the layer's weights are on {self.in_proj.weight.device}")
        if cache is not None and not isinstance(cache, LayerCache):
            raise TypeError(f"cache must be a LayerCache or None, got {type(cache).__name__}")

    def forward(
        self,
        x: torch.Tensor,
        context: Optional[torch.Tensor] = None,
        mask: Optional[torch.Tensor] = None,
        return_weights: bool = False,
        causal: bool = False,
        cache: Optional[LayerCache] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend from ``x`` to ``context`` (self-attention when ``context`` is None).

        Args:
            x: queries' input.
            context: keys' and values' input for cross-attention.
            mask: bool, True = may attend.
            return_weights: also return the attention weights (reference path).
            causal: apply the future mask (self-attention decoders).
            cache: a :class:`LayerCache`; new keys/values are appended (or, if ``static``, computed once).
        """
        self._check_inputs(x, context, cache)
        b, t, d = x.shape
        h = self.n_heads

        if context is None:  # self-attention: one projection for q, k and v
            q, k, v = split_heads(self.in_proj(x), 3 * h).chunk(3, dim=1)  # 3 × (B, H, T, d_head)
        else:
            q = split_heads(self._project(x, slice(0, d)), h)
            if cache is not None and cache.static and cache.k is not None:
                k, v = cache.k, cache.v
            else:
                k, v = split_heads(self._project(context, slice(d, 3 * d)), 2 * h).chunk(2, dim=1)

        offset = 0
        if cache is not None:
            if cache.static:
                cache.k, cache.v = k, v
            else:
                offset = cache.length
                if cache.k is not None:
                    k = torch.cat([cache.k, k], dim=2)
                    v = torch.cat([cache.v, v], dim=2)
                cache.k, cache.v = k, v

        s = k.shape[2]
        check_mask(mask, b, h, t, s)  # the one check of the mask: below, attention runs unchecked
        if mask is not None:
            check_same_device(x=x, mask=mask)
        bias = None
        if self.position is not None and context is None:
            q, k, bias = self.position(q, k, offset)
        out = _attend(q, k, v, mask=mask, bias=bias, causal=causal,
                      dropout_p=self.dropout if self.training else 0.0, return_weights=return_weights)
        if return_weights:
            out, weights = out
            return self.out_proj(merge_heads(out)), weights
        return self.out_proj(merge_heads(out))
