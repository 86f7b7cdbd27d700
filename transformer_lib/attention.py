"""Attention primitives: masks, score functions and softmax attention.

One mask convention holds everywhere in the library: a mask is boolean and ``True`` means *may attend* (for an
attention mask) or *is a real token* (for a padding mask). This is the convention of
:func:`torch.nn.functional.scaled_dot_product_attention`.

Softmax attention has two paths that compute the same function:

* :func:`attention_reference` spells out ``softmax(q kᵀ · scale + bias)`` and returns the weights, for teaching
  and for heatmaps;
* :func:`scaled_dot_product_attention` calls PyTorch's fused kernel whenever the weights are not requested.

A query whose every key is masked out gets an output of zeros on both paths (never NaN), in float32, float16 and
bfloat16.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_positive_int, check_same_device, check_tensor

__all__ = [
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "check_mask",
    "real_tokens",
    "DotProductScore",
    "BilinearScore",
    "LowRankBilinearScore",
    "AdditiveScore",
    "SCORE_NAMES",
    "make_score",
    "masked_softmax",
    "attention_reference",
    "scaled_dot_product_attention",
]


# ----------------------------------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------------------------------
def causal_mask(t: int, s: Optional[int] = None, device=None) -> torch.Tensor:
    """Future mask: query ``i`` may attend to key ``j`` only if ``j`` is not later than ``i``.

    With ``s > t`` (decoding with a key/value cache) the ``t`` queries are the *last* ``t`` positions of the
    ``s``-long sequence, so query ``i`` sits at absolute position ``s - t + i``.

    Args:
        t: number of queries.
        s: number of keys (defaults to ``t``); must be at least ``t``.
        device: where to build the mask.

    Shapes:
        returns (t, s), bool, True on and below the shifted diagonal.
    """
    check_positive_int("t", t)
    s = t if s is None else s
    check_positive_int("s", s)
    if s < t:
        raise ValueError(f"s (number of keys) must be >= t (number of queries) = {t}, got {s}")
    q_pos = torch.arange(s - t, s, device=device).unsqueeze(1)  # (t, 1)
    k_pos = torch.arange(s, device=device).unsqueeze(0)  # (1, s)
    return k_pos <= q_pos


def padding_mask(
    lengths: Optional[torch.Tensor] = None,
    real: Optional[torch.Tensor] = None,
    max_len: Optional[int] = None,
) -> torch.Tensor:
    """Key mask that hides padding, from sequence lengths or from a boolean "real token" mask.

    Args:
        lengths: (B,) integer lengths; positions ``>= lengths[b]`` are padding.
        real: (B, S) bool, True for real tokens. Give exactly one of ``lengths`` and ``real``.
        max_len: S when built from ``lengths`` (defaults to ``lengths.max()``).

    Shapes:
        returns (B, 1, 1, S), bool, broadcastable against attention scores (B, H, T, S).
    """
    if (lengths is None) == (real is None):
        raise ValueError("padding_mask needs exactly one of lengths= or real=, got "
                         f"{'both' if lengths is not None else 'neither'}")
    if real is not None:
        check_tensor("real", real, ndim=2, dtype="bool")
        return real[:, None, None, :]
    check_tensor("lengths", lengths, ndim=1, dtype="int")
    if int(lengths.min()) < 0:
        raise ValueError(f"lengths must be non-negative, got minimum {int(lengths.min())}")
    longest = int(lengths.max())
    if max_len is None:
        max_len = longest
    check_positive_int("max_len", max_len)
    if longest > max_len:
        raise ValueError(f"lengths contains {longest}, longer than max_len={max_len}")
    positions = torch.arange(max_len, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def real_tokens(ids: torch.Tensor, pad_id: Optional[int]) -> Optional[torch.Tensor]:
    """Which tokens are real: ``ids != pad_id``, or ``None`` when there is no pad id (every token is real).

    The library's one definition of a real token; the models, the RNN, generation, the batches and the losses use it.

    Shapes:
        ids (B, S) int -> (B, S) bool, True = real token.
    """
    return None if pad_id is None else ids != pad_id


def combine_masks(*masks: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """Logical AND of boolean masks with broadcasting; ``None`` entries are ignored (``None`` if all are)."""
    for i, m in enumerate(masks):
        if m is not None:
            check_tensor(f"masks[{i}]", m, dtype="bool", allow_empty=True)
    return _and_masks(*masks)


def _and_masks(*masks: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """:func:`combine_masks` without the checks, for masks the library built or already checked."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def check_mask(mask: Optional[torch.Tensor], b: int, h: int, t: int, s: int, name: str = "mask") -> None:
    """Check that ``mask`` is boolean and broadcastable to (b, h, t, s)."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}; "
                        "for an additive float mask use bias=")
    if mask.dim() > 4:
        raise ValueError(f"{name} must have at most 4 dimensions (B, H, T, S), got shape {tuple(mask.shape)}")
    target = (b, h, t, s)
    shape = (1,) * (4 - mask.dim()) + tuple(mask.shape)
    for got, want in zip(shape, target):
        if got not in (1, want):
            raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to (B, H, T, S) = {target}")


# ----------------------------------------------------------------------------------------------------------------
# Score functions (chapter 3): e[b, t, s] = score(query_t, key_s)
# ----------------------------------------------------------------------------------------------------------------
class _Score(nn.Module):
    d_q: Optional[int] = None
    d_k: Optional[int] = None

    def _check(self, query: torch.Tensor, keys: torch.Tensor) -> None:
        check_tensor("query", query, ndim=3, dtype="float", last_dim=self.d_q)
        check_tensor("keys", keys, ndim=3, dtype="float", last_dim=self.d_k)
        check_same_device(query=query, keys=keys)
        if query.shape[0] != keys.shape[0]:
            raise ValueError(f"query and keys must have the same batch size, got {query.shape[0]} and {keys.shape[0]}")


class DotProductScore(_Score):
    """Dot-product score ``e = sᵀh``: no parameters, needs the query and key sizes to be equal.

    Args:
        scale: divide by ``√d`` (the Transformer's scaled dot product).

    Shapes:
        query (B, T, d), keys (B, S, d) -> scores (B, T, S).
    """

    def __init__(self, scale: bool = False):
        super().__init__()
        self.scale = scale

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        self._check(query, keys)
        if query.shape[-1] != keys.shape[-1]:
            raise ValueError("dot-product scores need query and keys of equal size, got "
                             f"{query.shape[-1]} and {keys.shape[-1]}; use 'bilinear' for different sizes")
        scores = query @ keys.transpose(1, 2)  # (B, T, S)
        return scores / math.sqrt(query.shape[-1]) if self.scale else scores


class BilinearScore(_Score):
    """Multiplicative (bilinear) score ``e = sᵀ W h`` (Luong et al., 2015).

    Shapes:
        query (B, T, d_q), keys (B, S, d_k) -> scores (B, T, S).
    """

    def __init__(self, d_q: int, d_k: int):
        super().__init__()
        check_positive_int("d_q", d_q)
        check_positive_int("d_k", d_k)
        self.d_q, self.d_k = d_q, d_k
        self.weight = nn.Parameter(torch.empty(d_q, d_k))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(d_q * d_k) ** 0.5)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        self._check(query, keys)
        return (query @ self.weight) @ keys.transpose(1, 2)  # (B, T, d_k) @ (B, d_k, S)


class LowRankBilinearScore(_Score):
    """Reduced-rank multiplicative score ``e = (U s)ᵀ (V h)`` with rank ``k ≪ d``.

    ``W = UᵀV`` has rank at most ``k`` and costs ``k (d_q + d_k)`` parameters instead of ``d_q d_k``.

    Shapes:
        query (B, T, d_q), keys (B, S, d_k) -> scores (B, T, S).
    """

    def __init__(self, d_q: int, d_k: int, rank: int):
        super().__init__()
        for name, v in (("d_q", d_q), ("d_k", d_k), ("rank", rank)):
            check_positive_int(name, v)
        self.d_q, self.d_k, self.rank = d_q, d_k, rank
        self.U = nn.Linear(d_q, rank, bias=False)
        self.V = nn.Linear(d_k, rank, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        self._check(query, keys)
        return self.U(query) @ self.V(keys).transpose(1, 2)  # (B, T, k) @ (B, k, S)


class AdditiveScore(_Score):
    """Additive score ``e = vᵀ tanh(W₁ h + W₂ s)`` (Bahdanau et al., 2014).

    Shapes:
        query (B, T, d_q), keys (B, S, d_k) -> scores (B, T, S); the intermediate is (B, T, S, d_hidden).
    """

    def __init__(self, d_q: int, d_k: int, d_hidden: int):
        super().__init__()
        for name, v in (("d_q", d_q), ("d_k", d_k), ("d_hidden", d_hidden)):
            check_positive_int(name, v)
        self.d_q, self.d_k, self.d_hidden = d_q, d_k, d_hidden
        self.W1 = nn.Linear(d_k, d_hidden, bias=False)
        self.W2 = nn.Linear(d_q, d_hidden, bias=True)
        self.v = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        self._check(query, keys)
        hidden = torch.tanh(self.W1(keys).unsqueeze(1) + self.W2(query).unsqueeze(2))  # (B, T, S, d_hidden)
        return self.v(hidden).squeeze(-1)


SCORE_NAMES = ("dot", "bilinear", "lowrank", "additive")


def make_score(name: str, d_q: int, d_k: int, rank: Optional[int] = None, d_hidden: Optional[int] = None) -> nn.Module:
    """Build one of the four score functions by name.

    Args:
        name: ``'dot'``, ``'bilinear'``, ``'lowrank'`` or ``'additive'``.
        d_q: query size (decoder state).
        d_k: key size (encoder state).
        rank: rank ``k`` of ``'lowrank'`` (default ``max(1, min(d_q, d_k) // 4)``).
        d_hidden: hidden size of ``'additive'`` (default ``d_k``).
    """
    if name == "dot":
        if d_q != d_k:
            raise ValueError(f"score 'dot' needs d_q == d_k, got d_q={d_q}, d_k={d_k}")
        score = DotProductScore()
        score.d_q, score.d_k = d_q, d_k
        return score
    if name == "bilinear":
        return BilinearScore(d_q, d_k)
    if name == "lowrank":
        return LowRankBilinearScore(d_q, d_k, rank or max(1, min(d_q, d_k) // 4))
    if name == "additive":
        return AdditiveScore(d_q, d_k, d_hidden or d_k)
    raise ValueError(f"score name must be one of {list(SCORE_NAMES)}, got {name!r}")


# ----------------------------------------------------------------------------------------------------------------
# Softmax attention
# ----------------------------------------------------------------------------------------------------------------
def masked_softmax(scores: torch.Tensor, mask: Optional[torch.Tensor] = None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` ignoring masked-out entries; rows with nothing to attend to become zeros.

    Masked scores are replaced by the most negative finite value of the dtype (``torch.finfo(dtype).min``), never
    by a constant such as ``-1e5`` (which overflows to ``-inf`` in float16) nor by ``-inf`` (which turns a fully
    masked row into NaN). The softmax runs in float32 for half-precision inputs.

    Shapes:
        scores (..., S) float; mask bool broadcastable to scores -> weights like scores.
    """
    check_tensor("scores", scores, dtype="float", allow_empty=True)
    if mask is not None:
        check_tensor("mask", mask, dtype="bool", allow_empty=True)
    return _masked_softmax(scores, mask, dim)


def _masked_softmax(scores: torch.Tensor, mask: Optional[torch.Tensor], dim: int = -1) -> torch.Tensor:
    """:func:`masked_softmax` without the checks (its callers have checked ``scores`` and ``mask``)."""
    compute = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if mask is None:
        return torch.softmax(compute, dim=dim).to(scores.dtype)
    compute = compute.masked_fill(~mask, torch.finfo(compute.dtype).min)
    weights = torch.softmax(compute, dim=dim)
    weights = weights * mask.any(dim=dim, keepdim=True)  # fully masked rows -> 0, not uniform
    return weights.to(scores.dtype)


def _check_qkv(q, k, v, mask, bias) -> None:
    check_tensor("q", q, ndim=4, dtype="float")
    check_tensor("k", k, ndim=4, dtype="float")
    check_tensor("v", v, ndim=4, dtype="float")
    check_same_device(q=q, k=k, v=v, mask=mask, bias=bias)
    b, h, t, d = q.shape
    if k.shape[:2] != (b, h) or k.shape[-1] != d:
        raise ValueError(f"k must have shape (B, H, S, d) = ({b}, {h}, S, {d}) to match q, got {tuple(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must have shape (B, H, S, d_v) with (B, H, S) = {tuple(k.shape[:3])} as k, "
                         f"got {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    check_mask(mask, b, h, t, k.shape[2])
    if bias is not None:
        check_tensor("bias", bias, dtype="float")
        if bias.dim() > 4:
            raise ValueError(f"bias must broadcast to (B, H, T, S), got shape {tuple(bias.shape)}")
        try:
            torch.broadcast_shapes(bias.shape, (b, h, t, k.shape[2]))
        except RuntimeError:
            raise ValueError(f"bias of shape {tuple(bias.shape)} does not broadcast to (B, H, T, S) = "
                             f"{(b, h, t, k.shape[2])}") from None


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
    dropout_p: float = 0.0,
    causal: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Explicit softmax attention that also returns the attention weights.

    ``weights = softmax(q kᵀ · scale + bias)`` over the keys allowed by ``mask``; ``out = weights v``.

    Args:
        q, k, v: queries, keys and values.
        mask: bool, True = may attend, broadcastable to (B, H, T, S).
        bias: float added to the scores (ALiBi, relative positions), broadcastable to (B, H, T, S).
        scale: defaults to ``1/√d``.
        dropout_p: dropout on the weights (pass 0 in evaluation).
        causal: also apply :func:`causal_mask`.

    Shapes:
        q (B, H, T, d), k (B, H, S, d), v (B, H, S, d_v) -> out (B, H, T, d_v), weights (B, H, T, S).
    """
    _check_qkv(q, k, v, mask, bias)
    return _reference(q, k, v, mask, bias, scale, dropout_p, causal)


def _reference(q, k, v, mask, bias, scale, dropout_p, causal) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention_reference` on checked inputs."""
    if causal:
        mask = _and_masks(mask, causal_mask(q.shape[2], k.shape[2], device=q.device))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias
    weights = _masked_softmax(scores, mask)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    bias: Optional[torch.Tensor] = None,
    causal: bool = False,
    scale: Optional[float] = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Softmax attention: the fused PyTorch kernel unless the weights are requested.

    With ``return_weights=False`` this calls :func:`torch.nn.functional.scaled_dot_product_attention` (flash or
    memory-efficient kernels on GPUs, a fused kernel on CPUs); with ``return_weights=True`` it runs
    :func:`attention_reference`. Both give the same output; fully masked query rows give zeros on both.

    Args:
        q, k, v: queries, keys and values.
        mask: bool, True = may attend, broadcastable to (B, H, T, S).
        bias: float added to the scores, broadcastable to (B, H, T, S).
        causal: apply the future mask (query ``i`` at absolute position ``S - T + i``).
        scale: defaults to ``1/√d``.
        dropout_p: dropout on the weights.
        return_weights: also return the (B, H, T, S) weights (reference path).

    Shapes:
        q (B, H, T, d), k (B, H, S, d), v (B, H, S, d_v) -> out (B, H, T, d_v) [, weights (B, H, T, S)].
    """
    _check_qkv(q, k, v, mask, bias)
    return _attend(q, k, v, mask, bias, causal, scale, dropout_p, return_weights)


def _attend(q, k, v, mask=None, bias=None, causal=False, scale=None, dropout_p=0.0, return_weights=False):
    """:func:`scaled_dot_product_attention` on inputs already checked: the library's layers validate their
    arguments once, at their own boundary, and call this."""
    if return_weights:
        return _reference(q, k, v, mask, bias, scale, dropout_p, causal)
    t, s = q.shape[2], k.shape[2]
    if mask is None and bias is None:
        # PyTorch's is_causal aligns the diagonal at the top-left; with a cache (s > t) build the mask instead.
        if not causal or t == s:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale)
        mask = causal_mask(t, s, device=q.device)
    elif causal:
        mask = _and_masks(mask, causal_mask(t, s, device=q.device))
    keep = None
    if mask is not None:
        # A fully masked row would be NaN inside the kernel: let it attend everywhere, then zero its output.
        keep = mask.any(dim=-1, keepdim=True)
        mask = mask | ~keep
    attn_mask = mask
    if bias is not None:
        bias = bias.to(q.dtype)
        if mask is not None:
            bias = torch.where(mask, bias, torch.tensor(torch.finfo(q.dtype).min, dtype=q.dtype, device=q.device))
        attn_mask = bias
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    return out if keep is None else out * keep
