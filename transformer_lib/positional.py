"""Position information: self-attention alone is permutation-equivariant, so order must be added.

Two families live here:

* added to the token embeddings: :class:`SinusoidalPositionalEncoding` (Vaswani et al., 2017) and
  :class:`LearnedPositionalEmbedding`;
* applied inside attention (passed to ``MultiHeadAttention(position=...)``): :class:`ALiBi` (Press et al., 2022),
  :class:`RelativePosition` (Shaw et al., 2018) and :class:`Rotary` (RoPE, Su et al., 2021).

Attention-level modules share one interface: ``forward(q, k, offset) -> (q, k, bias)`` with q (B, H, T, d_head)
at absolute positions ``offset … offset+T-1``, k (B, H, S, d_head) at positions ``0 … S-1``, and ``bias`` a float
tensor added to the scores (or None).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import nn

from .checks import check_choice, check_positive_int, check_tensor

__all__ = [
    "sinusoidal_table",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "alibi_slopes",
    "ALiBi",
    "RelativePosition",
    "Rotary",
    "POSITION_KINDS",
]

POSITION_KINDS = ("sinusoidal", "learned", "alibi", "relative", "rotary", "none")


def sinusoidal_table(n_positions: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """The sinusoidal table ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(p / 10000^(2i/d))``.

    Low dimensions oscillate fast, high dimensions slowly.

    Args:
        n_positions: number of positions ``n``.
        d_model: width ``d`` (even).
        layout: ``'interleaved'`` (sin, cos, sin, cos, … — the paper) or ``'halves'`` (all sines, then all
            cosines — the layout of Marian / fairseq checkpoints).

    Shapes:
        returns (n, d), float32.
    """
    check_positive_int("n_positions", n_positions)
    check_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal encodings, got {d_model}")
    check_choice("layout", layout, ("interleaved", "halves"))
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (n, 1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * inv_freq  # (n, d/2)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0::2], table[:, 1::2] = torch.sin(angles), torch.cos(angles)
    else:
        table[:, : d_model // 2], table[:, d_model // 2:] = torch.sin(angles), torch.cos(angles)
    return table.float()


def _check_embedding_input(x: torch.Tensor, d_model: int, start: int) -> None:
    check_tensor("x", x, ndim=3, dtype="float", last_dim=d_model)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be a non-negative int, got {start!r}")


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to token embeddings; works for any length.

    Args:
        d_model: width.
        max_len: length of the precomputed table (extended on the fly when a longer input arrives).
        layout: see :func:`sinusoidal_table`.

    Shapes:
        x (B, T, D) -> (B, T, D); ``start`` is the absolute position of ``x[:, 0]`` (decoding with a cache).
    """

    def __init__(self, d_model: int, max_len: int = 512, layout: str = "interleaved"):
        super().__init__()
        self.d_model, self.layout = d_model, layout
        self.register_buffer("table", sinusoidal_table(max_len, d_model, layout), persistent=False)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        _check_embedding_input(x, self.d_model, start)
        end = start + x.shape[1]
        if end > self.table.shape[0]:
            self.table = sinusoidal_table(max(end, 2 * self.table.shape[0]), self.d_model, self.layout).to(
                self.table.device)
        return x + self.table[start:end].to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """A trained vector per absolute position (BERT, GPT-2): flexible, but only up to ``max_len``.

    Shapes:
        x (B, T, D) -> (B, T, D). A sequence longer than ``max_len`` raises ``ValueError``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        check_positive_int("max_len", max_len)
        check_positive_int("d_model", d_model)
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        _check_embedding_input(x, self.d_model, start)
        end = start + x.shape[1]
        if end > self.max_len:
            raise ValueError(f"sequence length {end} (positions {start}..{end - 1}) exceeds the maximum length "
                             f"{self.max_len} of this learned position table; learned positions cannot "
                             "extrapolate — use max_len >= the longest sequence, or a relative scheme")
        return x + self.weight[start:end]


def _positions(q: torch.Tensor, k: torch.Tensor, offset: int) -> Tuple[torch.Tensor, torch.Tensor]:
    t, s = q.shape[2], k.shape[2]
    return (torch.arange(offset, offset + t, device=q.device), torch.arange(s, device=q.device))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head-specific slopes of ALiBi: the geometric sequence 2^(-8/n), 2^(-16/n), … (Press et al., 2022).

    For a head count that is not a power of two, the paper's rule interleaves the slopes of the next power.
    """
    check_positive_int("n_heads", n_heads)

    def power_of_two(n):
        start = 2 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes)


class ALiBi(nn.Module):
    """Attention with Linear Biases: add ``-m_h · |i - j|`` to the score of query ``i`` and key ``j``.

    No parameters and nothing added to the embeddings; "train short, test long" (Press et al., 2022).

    Shapes:
        q (B, H, T, d), k (B, H, S, d) -> (q, k, bias (1, H, T, S)).
    """

    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        if q.shape[1] != self.n_heads:
            raise ValueError(f"ALiBi was built for {self.n_heads} heads, got q with {q.shape[1]}")
        qp, kp = _positions(q, k, offset)
        distance = (qp[:, None] - kp[None, :]).abs().to(q.dtype)  # (T, S)
        return q, k, -self.slopes.to(q.dtype)[None, :, None, None] * distance


class RelativePosition(nn.Module):
    """Relative position representations of Shaw et al. (2018), key side.

    A learned vector ``a_r`` for each clipped distance ``r = clip(j - i, -K, K)`` is added to the key:
    ``e_ij = q_i · (k_j + a_{j-i}) / √d``, implemented as the bias ``q_i · a_{j-i} / √d``. Shared across heads.

    Args:
        d_head: size of each head.
        max_distance: clipping distance ``K``; longer distances share the last vector, so any length works.

    Shapes:
        q (B, H, T, d), k (B, H, S, d) -> (q, k, bias (B, H, T, S)).
    """

    def __init__(self, d_head: int, max_distance: int = 16):
        super().__init__()
        check_positive_int("d_head", d_head)
        check_positive_int("max_distance", max_distance)
        self.d_head, self.max_distance = d_head, max_distance
        self.table = nn.Parameter(torch.randn(2 * max_distance + 1, d_head) * d_head ** -0.5)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        if q.shape[-1] != self.d_head:
            raise ValueError(f"RelativePosition was built for d_head={self.d_head}, got q with {q.shape[-1]}")
        qp, kp = _positions(q, k, offset)
        rel = (kp[None, :] - qp[:, None]).clamp(-self.max_distance, self.max_distance) + self.max_distance  # (T,S)
        per_distance = q @ self.table.to(q.dtype).t()  # (B, H, T, 2K+1): q_i · a_r for every r
        t, s = rel.shape
        bias = per_distance.gather(-1, rel.expand(q.shape[0], q.shape[1], t, s))  # (B, H, T, S)
        return q, k, bias / math.sqrt(self.d_head)


class Rotary(nn.Module):
    """Rotary position embedding (RoPE, Su et al., 2021): rotate each pair of q/k features by ``p · θ_i``.

    The dot product of a rotated query at ``i`` and a rotated key at ``j`` depends only on ``i - j``.
    Pairs are the two halves of the head (``x[..., :d/2]`` with ``x[..., d/2:]``), the GPT-NeoX/LLaMA layout.

    Shapes:
        q (B, H, T, d), k (B, H, S, d) -> (rotated q, rotated k, None).
    """

    def __init__(self, d_head: int, base: float = 10000.0):
        super().__init__()
        check_positive_int("d_head", d_head)
        if d_head % 2:
            raise ValueError(f"d_head must be even for rotary embeddings, got {d_head}")
        self.d_head = d_head
        self.register_buffer("inv_freq", base ** (-torch.arange(0, d_head, 2).float() / d_head), persistent=False)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate x (B, H, L, d) at the given (L,) positions."""
        angles = positions.float()[:, None] * self.inv_freq[None, :]  # (L, d/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x[..., : self.d_head // 2], x[..., self.d_head // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        if q.shape[-1] != self.d_head:
            raise ValueError(f"Rotary was built for d_head={self.d_head}, got q with {q.shape[-1]}")
        qp, kp = _positions(q, k, offset)
        return self.rotate(q, qp), self.rotate(k, kp), None


def make_attention_position(kind: str, n_heads: int, d_head: int, max_distance: int = 16) -> Optional[nn.Module]:
    """The attention-level module for ``kind`` ('alibi', 'relative', 'rotary'), None for the other kinds."""
    check_choice("position", kind, POSITION_KINDS)
    if kind == "alibi":
        return ALiBi(n_heads)
    if kind == "relative":
        return RelativePosition(d_head, max_distance)
    if kind == "rotary":
        return Rotary(d_head)
    return None
