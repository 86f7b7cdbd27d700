"""Sparse attention (BigBird; Zaheer et al., 2020, "Big Bird: Transformers for Longer Sequences"), chapter 12.

Each query attends to a local window ``|i - j| <= window``, to the global tokens (which themselves attend to
everything) and to ``n_random`` random keys. The global tokens are the first ``n_global`` positions (BigBird-ITC)
and, optionally, chosen positions ``global_positions`` (Longformer's task-specific global attention, e.g. the
question tokens; Beltagy et al., 2020). :func:`sparse_pattern` builds the pattern as an ``(n, n)``
boolean mask (exact, but the dense kernel still pays for ``n²`` scores); :func:`blocked_sparse_attention` computes
the same function block by block in ``O(n · (window + n_global + n_random))`` memory; :class:`SparseAttention` is
the layer, a drop-in replacement for :class:`~transformer_lib.multihead.MultiHeadAttention`.
The package :mod:`~transformer_lib.efficient` exports these names next to Linformer and the kinds by name.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_choice, check_positive_int, check_same_device, check_seed, check_tensor
from ..attention import check_mask, combine_masks, masked_softmax, scaled_dot_product_attention
from ..multihead import LayerCache, MultiHeadAttention, merge_heads, split_heads

__all__ = ["SparseAttention", "sparse_pattern", "random_links", "blocked_sparse_attention"]


# ----------------------------------------------------------------------------------------------------------------
# Shared input checks
# ----------------------------------------------------------------------------------------------------------------
def _check_non_negative(name: str, value) -> None:
    check_positive_int(name, value, allow_zero=True)


def _key_mask(mask: torch.Tensor, who: str) -> torch.Tensor:
    """A mask broadcastable to (B, H, T, S) that only depends on the key -> (B|1, H|1, S)."""
    m = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # (B|1, H|1, T|1, S|1)
    if m.shape[2] != 1:
        raise ValueError(f"{who} applies masks over keys only: mask must broadcast to (B, H, 1, S) "
                         f"(e.g. transformer_lib.attention.padding_mask), got shape {tuple(mask.shape)}")
    return m[:, :, 0, :]


# ----------------------------------------------------------------------------------------------------------------
# Sparse patterns (BigBird): local window + global tokens + random links
# ----------------------------------------------------------------------------------------------------------------
_MASK32 = 0xFFFFFFFF


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """Integer hash of int64 values in [0, 2³²) (no overflow: every product stays below 2⁶³)."""
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _MASK32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _MASK32
    return (x >> 16) ^ x


def _check_global_positions(global_positions, seq_len: Optional[int] = None) -> Tuple[int, ...]:
    """``global_positions`` as a tuple of ints; with ``seq_len``, each must lie in ``[-seq_len, seq_len)``."""
    if isinstance(global_positions, (str, bytes)) or not isinstance(global_positions, (list, tuple, range)):
        raise TypeError(f"global_positions must be a sequence of ints (e.g. (-1,) for the last token), "
                        f"got {type(global_positions).__name__} {global_positions!r}")
    out = []
    for p in global_positions:
        if isinstance(p, bool) or not isinstance(p, int):
            raise TypeError(f"global_positions must hold ints, got {type(p).__name__} {p!r} in {global_positions!r}")
        if seq_len is not None and not -seq_len <= p < seq_len:
            raise ValueError(f"global_positions must lie in [-seq_len, seq_len) = [{-seq_len}, {seq_len}), "
                             f"got {p} in {tuple(global_positions)!r}")
        out.append(p)
    return tuple(out)


def _check_pattern_args(seq_len, window, n_global, n_random, seed, global_positions=()) -> None:
    check_positive_int("seq_len", seq_len)
    _check_non_negative("window", window)
    _check_non_negative("n_global", n_global)
    _check_non_negative("n_random", n_random)
    check_seed(seed)
    _check_global_positions(global_positions, seq_len)


def _global_flags(seq_len: int, n_global: int, global_positions=(), device=None) -> torch.Tensor:
    """(seq_len,) bool, True at the global tokens: the first ``n_global`` and ``global_positions`` (mod seq_len)."""
    flags = torch.zeros(seq_len, dtype=torch.bool, device=device)
    flags[:n_global] = True
    if global_positions:
        flags[torch.tensor([p % seq_len for p in global_positions], dtype=torch.long, device=device)] = True
    return flags


def _row_chunk(seq_len: int) -> int:
    return max(1, 2 ** 22 // seq_len)  # bound the (rows, seq_len) int64 temporaries to ~32 MB


def _local_global(rows: torch.Tensor, seq_len: int, window: int, glob: torch.Tensor, causal: bool) -> torch.Tensor:
    """Local + global part of the pattern for the query positions ``rows`` -> (R, seq_len) bool.

    ``glob`` is the (seq_len,) bool vector of global tokens (:func:`_global_flags`).
    """
    i = rows[:, None]  # (R, 1)
    j = torch.arange(seq_len, device=rows.device)[None, :]  # (1, S)
    allowed = (i - j).abs() <= window
    if bool(glob.any()):
        allowed = allowed | glob[rows][:, None] | glob[None, :]
    if causal:
        allowed = allowed & (j <= i)
    return allowed


def _links_for_rows(rows, seq_len, window, glob, n_random, seed, causal) -> Tuple[torch.Tensor, torch.Tensor]:
    r = min(n_random, seq_len)
    taken = _local_global(rows, seq_len, window, glob, causal=False)
    candidate = ~taken
    j = torch.arange(seq_len, device=rows.device)[None, :]
    if causal:
        candidate = candidate & (j <= rows[:, None])
    # A counter-based draw: key (seed, i, j) -> hash. Row i's links depend only on (seed, i) and its candidates,
    # so in causal mode the links of a prefix do not change when the sequence grows (KV-cache decoding).
    row_h = _hash32((rows[:, None] + (seed & _MASK32) * 0x9E3779B1) & _MASK32)  # (R, 1)
    score = _hash32((row_h ^ _hash32(j)) & _MASK32)  # (R, S), in [0, 2³²)
    score = torch.where(candidate, score, torch.full_like(score, -1))
    values, idx = score.topk(r, dim=1)  # (R, r)
    return idx, values >= 0


def random_links(seq_len: int, window: int, n_global: int = 0, n_random: int = 0, seed: int = 0,
                 causal: bool = False, device=None,
                 global_positions: Sequence[int] = ()) -> Tuple[torch.Tensor, torch.Tensor]:
    """The random keys of each query in BigBird's pattern, as indices.

    Each query draws ``n_random`` keys among those its local window and the global tokens do not already give it
    (and, with ``causal=True``, among keys not after it); a row with fewer candidates takes them all. The draw is
    deterministic: a hash of ``(seed, i, j)`` ranks the candidates (a counter-based generator, so the links of
    query ``i`` in causal mode do not depend on the sequence length).

    Args:
        seq_len: sequence length ``n``.
        window: local half-width (``|i - j| <= window`` is local).
        n_global: number of global tokens (the first ones).
        n_random: random keys per query.
        seed: selects the pattern.
        causal: draw only among keys ``j <= i``.
        device: where to build the tensors.
        global_positions: further global tokens, by position (negative counts from the end).

    Shapes:
        returns idx (n, min(n_random, n)) long, valid (n, min(n_random, n)) bool (False where a row had fewer
        candidates than ``n_random``).
    """
    _check_pattern_args(seq_len, window, n_global, n_random, seed, global_positions)
    rows = torch.arange(seq_len, device=device)
    chunk = _row_chunk(seq_len)
    glob = _global_flags(seq_len, n_global, global_positions, device)
    parts = [_links_for_rows(rows[a:a + chunk], seq_len, window, glob, n_random, seed, causal)
             for a in range(0, seq_len, chunk)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def sparse_pattern(seq_len: int, window: int, n_global: int = 0, n_random: int = 0, seed: int = 0,
                   causal: bool = False, device=None, global_positions: Sequence[int] = ()) -> torch.Tensor:
    """BigBird's attention pattern (Zaheer et al., 2020) as a boolean mask, True = may attend.

    Query ``i`` may attend to key ``j`` when ``|i - j| <= window`` (local), when ``i`` or ``j`` is a global token
    (global tokens attend to everything and everything attends to them), or when ``j`` is one of
    ``i``'s ``n_random`` random links (see :func:`random_links`). The global tokens are the first ``n_global``
    positions (BigBird-ITC) and the positions in ``global_positions``, negative ones counted from the end
    (``(-1,)``: the last token), as Longformer gives global attention to the tokens that carry a task's question
    (Beltagy et al., 2020). With ``causal=True`` the pattern is intersected with the causal mask (``j <= i``), and
    the random links are drawn among earlier keys.

    Args:
        seq_len: sequence length ``n``.
        window: local half-width.
        n_global: number of global tokens.
        n_random: random keys per query.
        seed: selects the random links.
        causal: keep only ``j <= i``.
        device: where to build the mask.
        global_positions: further global tokens, by position (negative counts from the end).

    Shapes:
        returns (n, n) bool.
    """
    _check_pattern_args(seq_len, window, n_global, n_random, seed, global_positions)
    return _pattern_rows(torch.arange(seq_len, device=device), seq_len, window, n_global, n_random, seed, causal,
                         global_positions)


def _pattern_rows(rows, seq_len, window, n_global, n_random, seed, causal, global_positions=()) -> torch.Tensor:
    """Rows ``rows`` of the length-``seq_len`` pattern -> (R, seq_len) bool, built in chunks of rows."""
    parts = []
    glob = _global_flags(seq_len, n_global, global_positions, rows.device)
    for a in range(0, len(rows), _row_chunk(seq_len)):
        r = rows[a:a + _row_chunk(seq_len)]
        part = _local_global(r, seq_len, window, glob, causal)
        if n_random:
            idx, valid = _links_for_rows(r, seq_len, window, glob, n_random, seed, causal)
            # Invalid entries point at keys the row already has: writing False there would erase them, so OR.
            part |= torch.zeros_like(part).scatter_(1, idx, valid)
        parts.append(part)
    return torch.cat(parts)


# ----------------------------------------------------------------------------------------------------------------
# Blocked sparse attention: the same function without the (n, n) matrix
# ----------------------------------------------------------------------------------------------------------------
def blocked_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    n_global: int = 0,
    links: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    causal: bool = False,
    mask: Optional[torch.Tensor] = None,
    block: Optional[int] = None,
    scale: Optional[float] = None,
    dropout_p: float = 0.0,
    chunk: int = 256,
    global_positions: Sequence[int] = (),
) -> torch.Tensor:
    """Sparse (local + global + random) self-attention computed block by block, without an ``(n, n)`` matrix.

    Equal to ``scaled_dot_product_attention(q, k, v, mask=sparse_pattern(...) & mask)``. The sequence is cut into
    blocks of ``block >= window`` queries; block ``b`` scores only the keys of blocks ``b - 1, b, b + 1``
    (``3·block`` keys, which contain its whole window; the band ``|i - j| <= window`` is masked inside), the
    ``g`` global keys and its queries' random keys (gathered by index). The global queries, which attend
    to every key, are computed densely (``g × n`` scores). Blocks are processed ``chunk`` queries at a
    time, so the scores held at once are ``B·H·chunk·(3·block + n_global + n_random)``: memory beyond the inputs
    and the output does not grow with ``n``, and compute grows linearly.

    Args:
        q, k, v: queries, keys and values of one self-attention (``T == S``).
        window: local half-width.
        n_global: number of global tokens (the first ones).
        links: ``(idx, valid)`` from :func:`random_links` with the same global tokens (None: no random links).
        causal: also require ``j <= i``.
        mask: bool key mask broadcastable to (B, H, 1, S), True = real token.
        block: block size (default ``max(window, 16)``); must be ``>= window``.
        scale: defaults to ``1/√Dh``.
        dropout_p: dropout on the attention weights.
        chunk: queries per step (rounded to whole blocks).
        global_positions: further global tokens, by position (negative counts from the end).

    Shapes:
        q, k (B, H, T, Dh), v (B, H, T, Dv), links (T, r) -> out (B, H, T, Dv).
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, ndim=4, dtype="float")
    check_same_device(q=q, k=k, v=v, mask=mask)
    bsz, h, t, dh = q.shape
    if k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError("blocked_sparse_attention is self-attention: k must have the shape of q "
                         f"{tuple(q.shape)} and v the same (B, H, T), got k {tuple(k.shape)}, v {tuple(v.shape)}")
    _check_non_negative("window", window)
    _check_non_negative("n_global", n_global)
    global_positions = _check_global_positions(global_positions, t)
    check_positive_int("chunk", chunk)
    blk = max(window, 16) if block is None else block
    check_positive_int("block", blk)
    if blk < window:
        raise ValueError(f"block must be >= window so that blocks b-1, b, b+1 cover the window, got block={blk}, "
                         f"window={window}")
    check_mask(mask, bsz, h, t, t)
    idx = valid = None
    if links is not None and links[0].shape[-1] > 0:
        idx, valid = links
        check_tensor("links[0]", idx, ndim=2, dtype="int")
        check_tensor("links[1]", valid, ndim=2, dtype="bool")
        if idx.shape[0] != t or valid.shape != idx.shape:
            raise ValueError(f"links must be (idx, valid) of shape ({t}, r), got {tuple(idx.shape)} and "
                             f"{tuple(valid.shape)}")
    dev = q.device
    scale = 1.0 / math.sqrt(dh) if scale is None else scale
    glob = _global_flags(t, min(n_global, t), global_positions, dev)  # (T,) bool
    gpos = glob.nonzero()[:, 0]  # (g,) positions of the global tokens, sorted
    g = len(gpos)
    nb = -(-t // blk)  # number of blocks
    pad = nb * blk - t
    glob_p = F.pad(glob, (blk, pad + blk))  # aligned with the padded keys below

    key_ok = (torch.ones(1, 1, t, dtype=torch.bool, device=dev) if mask is None
              else _key_mask(mask, "blocked_sparse_attention"))  # (B|1, H|1, S)
    qp = F.pad(q, (0, 0, 0, pad))  # (B, H, Tp, Dh)
    kp = F.pad(k, (0, 0, blk, pad + blk))  # one zero block before and after: (B, H, Tp + 2·blk, Dh)
    vp = F.pad(v, (0, 0, blk, pad + blk))
    okp = F.pad(key_ok, (blk, pad + blk), value=False)  # (B|1, H|1, Tp + 2·blk); padding is never attended
    if idx is not None:
        idx, valid = F.pad(idx, (0, 0, 0, pad)), F.pad(valid, (0, 0, 0, pad), value=False)  # (Tp, r)
    k_g, v_g = k.index_select(2, gpos)[:, :, None], v.index_select(2, gpos)[:, :, None]  # (B, H, 1, g, Dh)

    outs = []
    per_step = max(1, chunk // blk)
    for b0 in range(0, nb, per_step):
        c = min(per_step, nb - b0)  # blocks in this step
        r0, r1 = b0 * blk, (b0 + c) * blk  # query rows r0..r1-1; their keys are rows r0-blk..r1+blk-1
        qb = qp[:, :, r0:r1].reshape(bsz, h, c, blk, dh)  # (B, H, c, blk, Dh)
        qpos = torch.arange(r0, r1, device=dev).view(c, blk)  # (c, blk)

        # Local band: block b scores the keys of blocks b-1, b, b+1.
        kw = kp[:, :, r0:r1 + 2 * blk].unfold(2, 3 * blk, blk)  # (B, H, c, Dh, 3·blk), a view
        vw = vp[:, :, r0:r1 + 2 * blk].unfold(2, 3 * blk, blk).transpose(-1, -2)  # (B, H, c, 3·blk, Dv)
        kpos = qpos[:, :1] - blk + torch.arange(3 * blk, device=dev)  # (c, 3·blk) absolute key positions
        not_global = ~glob_p[r0:r1 + 2 * blk].unfold(0, 3 * blk, blk)  # (c, 3·blk); globals are scored below
        band = ((qpos[:, :, None] - kpos[:, None, :]).abs() <= window) & not_global[:, None, :]
        if causal:
            band = band & (kpos[:, None, :] <= qpos[:, :, None])
        band = band & okp[:, :, r0:r1 + 2 * blk].unfold(-1, 3 * blk, blk)[:, :, :, None, :]
        scores, masks, values = [qb @ kw], [band], [vw]  # scores (B, H, c, blk, 3·blk)

        if g:  # every query also scores the global keys
            scores.insert(0, qb @ k_g.transpose(-1, -2))  # (B, H, c, blk, g)
            gm = key_ok[:, :, None, None, gpos]  # (B|1, H|1, 1, 1, g)
            masks.insert(0, gm & (gpos <= qpos[:, :, None]) if causal else gm)
            values.insert(0, v_g)
        if idx is not None:  # and its random keys, gathered by index
            ic, vc = idx[r0:r1], valid[r0:r1]  # (c·blk, r)
            flat = ic.reshape(-1)  # index_select is much faster than advanced indexing here
            k_r = k.index_select(2, flat).view(bsz, h, c, blk, -1, dh)  # (B, H, c, blk, r, Dh)
            scores.append((qb.unsqueeze(-2) * k_r).sum(-1))  # (B, H, c, blk, r)
            masks.append((vc & key_ok[:, :, ic]).view(*key_ok.shape[:2], c, blk, -1))

        widths = [s.shape[-1] for s in scores]
        scores = torch.cat(scores, dim=-1).mul_(scale)  # (B, H, c, blk, g + 3·blk + r)
        weights = masked_softmax(scores, torch.cat([m.expand(*scores.shape[:-1], m.shape[-1]) for m in masks], -1))
        del scores
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        parts = weights.split(widths, dim=-1)
        out = sum(w @ val for w, val in zip(parts, values))  # (B, H, c, blk, Dv)
        if idx is not None:
            v_r = v.index_select(2, flat).view(bsz, h, c, blk, idx.shape[1], -1)  # (B, H, c, blk, r, Dv)
            out = out + (parts[-1].unsqueeze(-1) * v_r).sum(-2)
        outs.append(out.reshape(bsz, h, c * blk, -1))
    out = torch.cat(outs, dim=2)[:, :, :t]  # (B, H, T, Dv)

    if g:  # global queries attend to every key: g dense rows
        rows_mask = key_ok[:, :, None, :]  # (B|1, H|1, 1, S)
        if causal:
            rows_mask = rows_mask & (torch.arange(t, device=dev) <= gpos[:, None])
        out_g = scaled_dot_product_attention(q.index_select(2, gpos), k, v, mask=rows_mask, scale=scale,
                                             dropout_p=dropout_p)  # (B, H, g, Dv)
        out = out.index_copy(2, gpos, out_g)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Sparse attention layer
# ----------------------------------------------------------------------------------------------------------------
class SparseAttention(MultiHeadAttention):
    """Multi-head self-attention restricted to BigBird's sparse pattern (Zaheer et al., 2020).

    Each query attends to its local window (``|i - j| <= window``), to the global tokens (the first ``n_global``
    and those of ``global_positions``, which attend to every position) and to ``n_random`` random keys; see
    :func:`sparse_pattern`. The random links are fixed:
    drawn from ``seed`` once per sequence length and cached on the layer.

    Two implementations of the same function:

    * ``impl='dense'``: the pattern becomes a boolean mask for
      :func:`~transformer_lib.attention.scaled_dot_product_attention`. Exact and simple, but it still computes all
      ``n²`` scores: it shows the pattern, not the savings. Supports ``return_weights``, positions and a cache.
    * ``impl='blocked'``: :func:`blocked_sparse_attention`: ``O(n · (3·block + n_global + n_random))`` compute,
      no ``(n, n)`` tensor, and masks over keys only. Calls with ``return_weights=True`` or a ``cache`` take the
      dense path.

    Args:
        d_model: model width ``D``.
        n_heads: number of heads ``H``.
        window: local half-width.
        n_global: number of global tokens (the first positions; BigBird-ITC).
        n_random: random keys per query.
        global_positions: further global tokens, by position; negative ones count from the end of each sequence
            (``(-1,)``: the last token, e.g. where a question is read, as Longformer's task-specific global
            attention).
        dropout: dropout on the attention weights (training only).
        bias: use biases in ``in_proj`` and ``out_proj``.
        seed: selects the random links.
        position: attention-level position module (dense path only).
        impl: ``'dense'`` or ``'blocked'``.
        block: block size of the blocked path (default ``max(window, 16)``).

    Shapes:
        x (B, T, D); mask bool broadcastable to (B, H, T, T) (blocked path: to (B, H, 1, T)), True = may attend;
        returns (B, T, D), or ((B, T, D), weights (B, H, T, T)) with ``return_weights=True``.
    """

    _CACHE_SIZE = 8  # patterns of this many (length, causal, device) kept

    def __init__(self, d_model: int, n_heads: int, window: int = 32, n_global: int = 1, n_random: int = 3,
                 dropout: float = 0.0, bias: bool = True, seed: int = 0, position: Optional[nn.Module] = None,
                 impl: str = "dense", block: Optional[int] = None, global_positions: Sequence[int] = ()):
        super().__init__(d_model, n_heads, dropout=dropout, bias=bias, position=position)
        _check_pattern_args(1, window, n_global, n_random, seed)
        self.global_positions = _check_global_positions(global_positions)
        check_choice("impl", impl, ("dense", "blocked"))
        if block is not None:
            check_positive_int("block", block)
            if block < window:
                raise ValueError(f"block must be >= window, got block={block}, window={window}")
        if impl == "blocked" and position is not None:
            raise ValueError("impl='blocked' does not support position modules; use impl='dense'")
        self.window, self.n_global, self.n_random, self.seed = window, n_global, n_random, seed
        self.impl, self.block = impl, block
        self._patterns: "OrderedDict[tuple, object]" = OrderedDict()  # deterministic, so not in the state_dict

    def extra_repr(self) -> str:
        extra = f", global_positions={self.global_positions}" if self.global_positions else ""
        return (f"window={self.window}, n_global={self.n_global}, n_random={self.n_random}, seed={self.seed}, "
                f"impl={self.impl!r}{extra}")

    def _cached(self, what: str, seq_len: int, causal: bool, device) -> object:
        key = (what, seq_len, causal, str(device))
        if key not in self._patterns:
            fn = sparse_pattern if what == "pattern" else random_links
            self._patterns[key] = fn(seq_len, self.window, self.n_global, self.n_random, self.seed, causal,
                                     device=device, global_positions=self.global_positions)
            while len(self._patterns) > self._CACHE_SIZE:
                self._patterns.popitem(last=False)
        self._patterns.move_to_end(key)
        return self._patterns[key]

    def pattern(self, seq_len: int, causal: bool = False, device=None) -> torch.Tensor:
        """The (seq_len, seq_len) boolean pattern this layer uses (cached)."""
        return self._cached("pattern", seq_len, causal, device)

    def density(self, seq_len: int, causal: bool = False) -> float:
        """Fraction of the ``seq_len²`` (query, key) pairs the pattern allows
        (see :func:`~transformer_lib.efficient.kinds.attention_pairs`)."""
        check_positive_int("n", seq_len)  # the checks (and messages) of attention_pairs('sparse', n, ...)
        _check_pattern_args(seq_len, self.window, self.n_global, self.n_random, 0, self.global_positions)
        return _sparse_pairs(seq_len, self.window, self.n_global, self.n_random, causal,
                             self.global_positions) / (seq_len * seq_len)

    def forward(
        self,
        x: torch.Tensor,
        context: Optional[torch.Tensor] = None,
        mask: Optional[torch.Tensor] = None,
        return_weights: bool = False,
        causal: bool = False,
        cache: Optional[LayerCache] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Sparse self-attention over ``x``.

        Args:
            x: the sequence.
            context: must be None (BigBird uses full attention for cross-attention: use MultiHeadAttention).
            mask: bool, True = may attend; combined (AND) with the pattern.
            return_weights: also return the (B, H, T, T) weights (zero outside the pattern).
            causal: intersect the pattern with the causal mask (decoders).
            cache: a self-attention :class:`~transformer_lib.multihead.LayerCache`; needs ``causal=True``.

        Returns:
            (B, T, D), or (out, weights (B, H, T, S)).
        """
        if context is not None:
            raise ValueError("SparseAttention is self-attention only, got context=...; use MultiHeadAttention "
                             "for cross-attention (as BigBird's decoder does)")
        self._check_inputs(x, cache=cache)
        b, t, _ = x.shape
        if cache is not None:
            if cache.static:
                raise ValueError("SparseAttention takes a self-attention cache, got a static (cross-attention) one")
            if not causal:
                raise ValueError("a cache needs causal=True: only the causal pattern of a prefix stays the same "
                                 "as the sequence grows")
            if any(p < 0 for p in self.global_positions):
                raise ValueError(f"a cache needs non-negative global_positions (a position counted from the end "
                                 f"moves as the sequence grows), got global_positions={self.global_positions}")
        s = t + (cache.length if cache is not None else 0)
        check_mask(mask, b, self.n_heads, t, s)
        _check_global_positions(self.global_positions, s)
        check_same_device(x=x, mask=mask)

        if self.impl == "blocked" and not return_weights and cache is None:
            q, k, v = split_heads(self.in_proj(x), 3 * self.n_heads).chunk(3, dim=1)  # 3 × (B, H, T, Dh)
            links = self._cached("links", t, causal, x.device) if self.n_random else None
            out = blocked_sparse_attention(q, k, v, self.window, self.n_global, links=links, causal=causal,
                                           mask=mask, block=self.block,
                                           dropout_p=self.dropout if self.training else 0.0,
                                           global_positions=self.global_positions)
            return self.out_proj(merge_heads(out))

        if cache is None:
            pattern = self.pattern(s, causal, device=x.device)  # (T, T)
        else:  # decoding: only the last t rows of the causal length-s pattern (prefix-stable, so not cached)
            pattern = _pattern_rows(torch.arange(s - t, s, device=x.device), s, self.window, self.n_global,
                                    self.n_random, self.seed, True, self.global_positions)  # (T, S)
        return super().forward(x, mask=combine_masks(mask, pattern), return_weights=return_weights,
                               causal=causal, cache=cache)


# ----------------------------------------------------------------------------------------------------------------
# Counting the pattern's pairs in O(n) (SparseAttention.density, efficient.attention_pairs)
# ----------------------------------------------------------------------------------------------------------------
def _sparse_pairs(n: int, window: int, n_global: int, n_random: int, causal: bool, global_positions=()) -> int:
    i = torch.arange(n, dtype=torch.int64)
    glob = _global_flags(n, min(n_global, n), global_positions)
    below = torch.cat([torch.zeros(1, dtype=torch.int64), glob.long().cumsum(0)])  # below[x]: globals at j < x
    lo = (i - window).clamp(min=0)
    hi = i if causal else (i + window).clamp(max=n - 1)
    reach = i + 1 if causal else torch.full_like(i, n)  # keys the row may use at all
    overlap = below[hi + 1] - below[lo]  # globals inside the window
    g_keys = below[i + 1] if causal else torch.full_like(i, int(below[-1]))  # global keys the row may use
    row = hi - lo + 1 + g_keys - overlap
    row = torch.where(glob, reach, row)
    row = row + torch.minimum(reach - row, torch.tensor(min(n_random, n)))
    return int(row.sum())
