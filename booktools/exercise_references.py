#!/usr/bin/env python
"""The grader's side of the exercises: reference solutions, case generators and the models of common mistakes.

Not part of ``transformer_lib`` (students import the library; they never get this module): the grader
(``booktools/grade.py``) computes expected outputs here, in its own process, and the student's process only returns
its outputs for the cases. The library's notebook self-check compares with outputs stored in
``transformer_lib/exercises/data/selfcheck.pt``, which this script writes:

    .venv/bin/python -m booktools.exercise_references --write-selfcheck   # after changing a case or a reference
    .venv/bin/python -m booktools.exercise_references --check-selfcheck   # fails when the stored data is stale

Every case generator takes a ``torch.Generator`` and must produce, for any seed, inputs on which each plausible
slip shows (a low-variance row for a layer norm, d_k != d_v != d for attention, rows that stop at different
steps for greedy decoding, ...); ``tests/test_exercise_mutations.py`` checks this with independent wrong and
correct implementations. The grading cases come from a seed derived from a key the students do not see
(:func:`grading_seed`); the self-check uses seed 0.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]

from transformer_lib.exercises import engine  # noqa: E402
from transformer_lib.exercises.catalogue import EXERCISES  # noqa: E402

SELFCHECK_PATH = ROOT / "transformer_lib" / "exercises" / "data" / "selfcheck.pt"
SELFCHECK_SEED = 0
FORMAT_VERSION = 1

REFERENCES: Dict[str, Callable] = {}
CASES: Dict[str, Callable[[torch.Generator], List[Dict[str, Any]]]] = {}
MISTAKES: Dict[str, Dict[str, Callable]] = {}


def exercise(ex_id: str, cases: Callable):
    def register(fn):
        REFERENCES[ex_id] = fn
        CASES[ex_id] = cases
        MISTAKES.setdefault(ex_id, {})
        return fn
    return register


def mistake(ex_id: str, key: str):
    def register(fn):
        MISTAKES.setdefault(ex_id, {})[key] = fn
        return fn
    return register


def _rand(g, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=g, dtype=dtype)


def _randint(g, low: int, high: int) -> int:
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=g))


def _uniform(g, low: float, high: float) -> float:
    return float(low + (high - low) * torch.rand(1, generator=g, dtype=torch.float64))


# ----------------------------------------------------------------------------------------------------------------
# 01 — fit a power law L = c · x^(-alpha) by least squares in log-log space.
# ----------------------------------------------------------------------------------------------------------------
def _power_law_cases(g):
    cases = []
    for i in range(8):
        c, alpha = _uniform(g, 0.5, 10.5), _uniform(g, 0.03, 0.8)
        n = _randint(g, 5, 12)
        if i % 2 == 0:
            start = _uniform(g, -2.0, 5.0)
            x = torch.logspace(start, start + _uniform(g, 2.0, 6.0), n, dtype=torch.float64)
        else:  # irregular spacing
            x = torch.exp(torch.sort(_uniform(g, -3.0, 3.0) + 12.0 * torch.rand(n, generator=g,
                                                                                 dtype=torch.float64)).values)
        noise = torch.exp(_uniform(g, 0.02, 0.2) * _rand(g, n))
        cases.append(dict(x=x, y=c * x ** (-alpha) * noise))
    return cases


@exercise("01-power-law", _power_law_cases)
def _power_law_ref(x, y):
    lx, ly = torch.log(torch.as_tensor(x, dtype=torch.float64)), torch.log(torch.as_tensor(y, dtype=torch.float64))
    a = torch.stack([torch.ones_like(lx), lx], 1)
    sol = torch.linalg.lstsq(a, ly.unsqueeze(1)).solution.squeeze(1)
    return float(torch.exp(sol[0])), float(-sol[1])


@mistake("01-power-law", "wrong_sign")
def _power_law_wrong_sign(x, y):
    c, alpha = _power_law_ref(x, y)
    return c, -alpha


@mistake("01-power-law", "linear")
def _power_law_linear(x, y):
    x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    return float(y.mean() - slope * x.mean()), float(-slope)


@mistake("01-power-law", "swapped")
def _power_law_swapped(x, y):
    c, alpha = _power_law_ref(x, y)
    return alpha, c


@mistake("01-power-law", "log10_exp")
def _power_law_log10_exp(x, y):
    lx, ly = torch.log10(x), torch.log10(y)
    slope = ((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum()
    return float(torch.exp(ly.mean() - slope * lx.mean())), float(-slope)


@mistake("01-power-law", "x_on_y")
def _power_law_x_on_y(x, y):
    lx, ly = torch.log(x), torch.log(y)
    inv = ((lx - lx.mean()) * (ly - ly.mean())).sum() / ((ly - ly.mean()) ** 2).sum()
    slope = 1 / inv
    return float(torch.exp(ly.mean() - slope * lx.mean())), float(-slope)


# ----------------------------------------------------------------------------------------------------------------
# 02 — a vanilla RNN over a sequence, and over a padded batch.
# ----------------------------------------------------------------------------------------------------------------
def _rnn_weights(g, d_in, d_h):
    return dict(W_xh=_rand(g, d_h, d_in) * 1.5 / math.sqrt(d_in), W_hh=_rand(g, d_h, d_h) * 1.2 / math.sqrt(d_h),
                b=_rand(g, d_h) * 0.5)


def _rnn_cases(g):
    shapes = [(1, 1, 3, 4), (2, 5, 3, 4), (3, 7, 2, 6), (2, 12, 5, 5), (4, 4, 6, 6),
              (_randint(g, 2, 4), _randint(g, 3, 9), _randint(g, 2, 5), _randint(g, 3, 6))]
    return [dict(x=_rand(g, b, t, d_in), **_rnn_weights(g, d_in, d_h)) for b, t, d_in, d_h in shapes]


def _rnn_run(x, W_xh, W_hh, b, nonlinearity=torch.tanh):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = []
    for t in range(x.shape[1]):
        h = nonlinearity(x[:, t] @ W_xh.T + h @ W_hh.T + b)
        states.append(h)
    return torch.stack(states, 1)


@exercise("02-rnn-forward", _rnn_cases)
def _rnn_ref(x, W_xh, W_hh, b):
    return _rnn_run(x, W_xh, W_hh, b)


@mistake("02-rnn-forward", "no_tanh")
def _rnn_no_tanh(x, W_xh, W_hh, b):
    return _rnn_run(x, W_xh, W_hh, b, nonlinearity=lambda z: z)


@mistake("02-rnn-forward", "transposed")
def _rnn_transposed(x, W_xh, W_hh, b):
    return _rnn_run(x, W_xh, W_hh.T, b)


@mistake("02-rnn-forward", "no_recurrence")
def _rnn_no_recurrence(x, W_xh, W_hh, b):
    return torch.tanh(x @ W_xh.T + b)


@mistake("02-rnn-forward", "shifted")
def _rnn_shifted(x, W_xh, W_hh, b):
    states = _rnn_run(x, W_xh, W_hh, b)
    return torch.cat([torch.zeros_like(states[:, :1]), states[:, :-1]], 1)


@mistake("02-rnn-forward", "bias_outside")
def _rnn_bias_outside(x, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T) + b
        states.append(h)
    return torch.stack(states, 1)


def _rnn_padded_cases(g):
    cases = []
    for b, t, d_in, d_h in [(1, 1, 3, 4), (3, 6, 3, 4), (4, 8, 2, 5), (2, 5, 4, 4),
                            (_randint(g, 3, 5), _randint(g, 4, 9), _randint(g, 2, 5), _randint(g, 3, 6))]:
        lengths = torch.randint(1, t + 1, (b,), generator=g)
        if b > 1:  # a full row, a row of one step and rows in between
            lengths[0], lengths[-1] = t, max(1, t // 2) if b > 2 else 1
            if b > 2:
                lengths[1] = 1
        cases.append(dict(x=_rand(g, b, t, d_in), lengths=lengths, **_rnn_weights(g, d_in, d_h)))
    return cases


def _padded_run(x, lengths, W_xh, W_hh, b, nonlinearity=torch.tanh):
    states = _rnn_run(x, W_xh, W_hh, b, nonlinearity)
    real = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    states = states * real[..., None]
    last = states[torch.arange(x.shape[0]), lengths - 1]
    return states, last


@exercise("02-rnn-padded", _rnn_padded_cases)
def _rnn_padded_ref(x, lengths, W_xh, W_hh, b):
    return _padded_run(x, lengths, W_xh, W_hh, b)


@mistake("02-rnn-padded", "last_is_final")
def _rnn_padded_last_is_final(x, lengths, W_xh, W_hh, b):
    states = _rnn_run(x, W_xh, W_hh, b)
    real = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return states * real[..., None], states[:, -1]


@mistake("02-rnn-padded", "padding_not_zeroed")
def _rnn_padded_not_zeroed(x, lengths, W_xh, W_hh, b):
    states = _rnn_run(x, W_xh, W_hh, b)
    return states, states[torch.arange(x.shape[0]), lengths - 1]


@mistake("02-rnn-padded", "last_off_by_one")
def _rnn_padded_last_off_by_one(x, lengths, W_xh, W_hh, b):
    states, _ = _padded_run(x, lengths, W_xh, W_hh, b)
    return states, states[torch.arange(x.shape[0]), (lengths - 2).clamp(min=0)]


@mistake("02-rnn-padded", "no_tanh")
def _rnn_padded_no_tanh(x, lengths, W_xh, W_hh, b):
    return _padded_run(x, lengths, W_xh, W_hh, b, nonlinearity=lambda z: z)


@mistake("02-rnn-padded", "transposed")
def _rnn_padded_transposed(x, lengths, W_xh, W_hh, b):
    return _padded_run(x, lengths, W_xh, W_hh.T, b)


# ----------------------------------------------------------------------------------------------------------------
# 03 — attention of one decoder state over the encoder states (dot-product score).
# ----------------------------------------------------------------------------------------------------------------
def _seq2seq_cases(g):
    cases = []
    for b, s_len, d in [(1, 1, 3), (2, 5, 4), (4, 6, 8), (3, 9, 5), (4, 4, 4),
                        (_randint(g, 2, 5), _randint(g, 3, 10), _randint(g, 2, 8))]:
        lengths = torch.randint(1, s_len + 1, (b,), generator=g)
        if b > 1:
            lengths[0] = s_len
            lengths[-1] = max(1, s_len - 2)
        mask = torch.arange(s_len)[None, :] < lengths[:, None]
        cases.append(dict(s=_rand(g, b, d), h=_rand(g, b, s_len, d), mask=mask))
    return cases


def _seq2seq_weights(s, h, mask, fill=None, scale=1.0):
    scores = torch.einsum("bd,bsd->bs", s, h) * scale
    fill = torch.finfo(s.dtype).min if fill is None else fill
    return torch.softmax(scores.masked_fill(~mask, fill), dim=-1) * mask.any(-1, keepdim=True)


@exercise("03-seq2seq-attention", _seq2seq_cases)
def _seq2seq_attn_ref(s, h, mask):
    w = _seq2seq_weights(s, h, mask)
    return torch.einsum("bs,bsd->bd", w, h), w


@mistake("03-seq2seq-attention", "softmax_batch")
def _seq2seq_softmax_batch(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h).masked_fill(~mask, torch.finfo(s.dtype).min)
    w = torch.softmax(scores, dim=0)
    return torch.einsum("bs,bsd->bd", w, h), w


@mistake("03-seq2seq-attention", "mask_inverted")
def _seq2seq_mask_inverted(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h).masked_fill(mask, torch.finfo(s.dtype).min)
    w = torch.softmax(scores, dim=-1)
    return torch.einsum("bs,bsd->bd", w, h), w


@mistake("03-seq2seq-attention", "mask_inverted_zeroed")
def _seq2seq_mask_inverted_zeroed(s, h, mask):
    return _seq2seq_attn_ref(s, h, ~mask)


@mistake("03-seq2seq-attention", "mask_after")
def _seq2seq_mask_after(s, h, mask):
    w = torch.softmax(torch.einsum("bd,bsd->bs", s, h), dim=-1) * mask
    return torch.einsum("bs,bsd->bd", w, h), w


@mistake("03-seq2seq-attention", "no_mask")
def _seq2seq_no_mask(s, h, mask):
    return _seq2seq_attn_ref(s, h, torch.ones_like(mask))


@mistake("03-seq2seq-attention", "mask_zero_fill")
def _seq2seq_mask_zero_fill(s, h, mask):
    w = _seq2seq_weights(s, h, mask, fill=0.0)
    return torch.einsum("bs,bsd->bd", w, h), w


@mistake("03-seq2seq-attention", "scaled")
def _seq2seq_scaled(s, h, mask):
    w = _seq2seq_weights(s, h, mask, scale=1 / math.sqrt(s.shape[-1]))
    return torch.einsum("bs,bsd->bd", w, h), w


# ----------------------------------------------------------------------------------------------------------------
# 04 — scaled dot-product self-attention, one head.
# ----------------------------------------------------------------------------------------------------------------
def _self_attn_cases(g):
    shapes = [(1, 1, 4, 4, 4), (2, 5, 8, 4, 6), (3, 7, 6, 16, 5), (2, 4, 10, 9, 3), (2, 6, 5, 7, 11),
              (4, 4, 12, 3, 2), (_randint(g, 1, 3), _randint(g, 3, 8), _randint(g, 4, 10), _randint(g, 2, 6),
                                 _randint(g, 7, 12))]
    return [dict(x=_rand(g, b, t, d), W_q=_rand(g, d, dk) / math.sqrt(d), W_k=_rand(g, d, dk) / math.sqrt(d),
                 W_v=_rand(g, d, dv)) for b, t, d, dk, dv in shapes]


def _attend(x, W_q, W_k, W_v, scale, dim=-1, transpose=False):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = (k @ q.transpose(-2, -1)) if transpose else (q @ k.transpose(-2, -1))
    return torch.softmax(scores * scale, dim=dim) @ v


@exercise("04-self-attention", _self_attn_cases)
def _self_attn_ref(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / math.sqrt(W_k.shape[-1]))


@mistake("04-self-attention", "unscaled")
def _self_attn_unscaled(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1.0)


@mistake("04-self-attention", "wrong_axis")
def _self_attn_wrong_axis(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / math.sqrt(W_k.shape[-1]), dim=-2)


@mistake("04-self-attention", "transposed_scores")
def _self_attn_transposed_scores(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / math.sqrt(W_k.shape[-1]), transpose=True)


@mistake("04-self-attention", "scale_d_model")
def _self_attn_scale_d_model(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / math.sqrt(x.shape[-1]))


@mistake("04-self-attention", "scale_d_v")
def _self_attn_scale_d_v(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / math.sqrt(W_v.shape[-1]))


@mistake("04-self-attention", "scale_no_sqrt")
def _self_attn_scale_no_sqrt(x, W_q, W_k, W_v):
    return _attend(x, W_q, W_k, W_v, 1 / W_k.shape[-1])


# ----------------------------------------------------------------------------------------------------------------
# 05 — the sinusoidal position table.
# ----------------------------------------------------------------------------------------------------------------
def _sinusoidal_cases(g):
    return [dict(n=n, d=d) for n, d in [(1, 2), (5, 4), (16, 8), (50, 32), (7, 64), (12, 6),
                                        (_randint(g, 2, 40), 2 * _randint(g, 2, 24))]]


def _table(n, d, base=10000.0, exponent=2.0, start=0, sin_first=True):
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]
    inv = base ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    out = torch.empty(n, d, dtype=torch.float64)
    first, second = (torch.sin, torch.cos) if sin_first else (torch.cos, torch.sin)
    out[:, 0::2], out[:, 1::2] = first(pos * inv), second(pos * inv)
    return out


@exercise("05-sinusoidal", _sinusoidal_cases)
def _sinusoidal_ref(n, d):
    return _table(n, d)


@mistake("05-sinusoidal", "swapped")
def _sinusoidal_swapped(n, d):
    return _table(n, d, sin_first=False)


@mistake("05-sinusoidal", "halves")
def _sinusoidal_halves(n, d):
    t = _table(n, d)
    return torch.cat([t[:, 0::2], t[:, 1::2]], 1)


@mistake("05-sinusoidal", "wrong_exponent")
def _sinusoidal_wrong_exponent(n, d):
    return _table(n, d, exponent=1.0)


@mistake("05-sinusoidal", "from_one")
def _sinusoidal_from_one(n, d):
    return _table(n, d, start=1)


@mistake("05-sinusoidal", "base")
def _sinusoidal_base(n, d):
    return _table(n, d, base=1000.0)


# ----------------------------------------------------------------------------------------------------------------
# 06 — causal mask and masked softmax.
# ----------------------------------------------------------------------------------------------------------------
def _causal_cases(g):
    return [dict(t=t) for t in (1, 2, 3, 5, 8, 13, _randint(g, 14, 40))]


@exercise("06-causal-mask", _causal_cases)
def _causal_ref(t):
    i = torch.arange(t)
    return i[None, :] <= i[:, None]


@mistake("06-causal-mask", "strict")
def _causal_strict(t):
    return torch.ones(t, t, dtype=torch.bool).tril(-1)


@mistake("06-causal-mask", "transposed")
def _causal_transposed(t):
    return torch.ones(t, t, dtype=torch.bool).triu()


@mistake("06-causal-mask", "inverted")
def _causal_inverted(t):
    return ~torch.ones(t, t, dtype=torch.bool).tril()


def _masked_softmax_cases(g):
    cases = []
    shapes = [((2, 5), torch.float32), ((3, 4, 6), torch.float32), ((2, 7), torch.float16),
              ((4, 4), torch.float32), ((3, 2, 5), torch.float16),
              ((_randint(g, 4, 6), _randint(g, 3, 9)), torch.float16 if _randint(g, 0, 1) else torch.float32)]
    for shape, dtype in shapes:
        mask = torch.rand(*shape, generator=g) < 0.6
        mask[0] = False  # a fully masked row
        mask[-1] = True  # a row with every entry allowed
        mask[-1, ..., 0] = False
        if shape[0] > 2:
            mask[1] = False
            mask[1, ..., -1] = True  # a row with one allowed entry
        scores = torch.randn(*shape, generator=g) * 3
        scores = scores + 4 * (~mask)  # the masked entries have the largest scores
        cases.append(dict(scores=scores.to(dtype), mask=mask))
    return cases


def _masked_softmax_core(scores, mask, fill=None, zero_rows=True, out_dtype=None, dim=-1):
    s = scores.float()
    s = s.masked_fill(~mask, torch.finfo(s.dtype).min if fill is None else fill)
    w = torch.softmax(s, dim)
    if zero_rows:
        w = w * mask.any(-1, keepdim=True)
    return w.to(scores.dtype if out_dtype is None else out_dtype)


@exercise("06-masked-softmax", _masked_softmax_cases)
def _masked_softmax_ref(scores, mask):
    return _masked_softmax_core(scores, mask)


@mistake("06-masked-softmax", "inf")
def _masked_softmax_inf(scores, mask):
    return torch.softmax(scores.float().masked_fill(~mask, float("-inf")), -1).to(scores.dtype)


@mistake("06-masked-softmax", "minus_1e5")
def _masked_softmax_1e5(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e5).float(), -1).to(scores.dtype)


@mistake("06-masked-softmax", "wrong_axis")
def _masked_softmax_wrong_axis(scores, mask):
    return _masked_softmax_core(scores, mask, dim=-2)


@mistake("06-masked-softmax", "after")
def _masked_softmax_after(scores, mask):
    return (torch.softmax(scores.float(), -1) * mask).to(scores.dtype)


@mistake("06-masked-softmax", "inverted")
def _masked_softmax_inverted(scores, mask):
    return _masked_softmax_core(scores, ~mask)


@mistake("06-masked-softmax", "uniform_rows")
def _masked_softmax_uniform_rows(scores, mask):
    return _masked_softmax_core(scores, mask, zero_rows=False)


@mistake("06-masked-softmax", "float32_out")
def _masked_softmax_float32_out(scores, mask):
    return _masked_softmax_core(scores, mask, out_dtype=torch.float32)


# ----------------------------------------------------------------------------------------------------------------
# 07 — multi-head attention from explicit weights.
# ----------------------------------------------------------------------------------------------------------------
def _mha_cases(g):
    shapes = [(1, 1, 4, 2), (2, 5, 8, 2), (2, 6, 12, 3), (3, 4, 16, 4), (2, 3, 12, 6),
              (_randint(g, 1, 3), _randint(g, 2, 7), 0, _randint(g, 2, 4))]
    cases = []
    for b, t, d, h in shapes:
        d = d or h * _randint(g, 2, 5)
        cases.append(dict(x=_rand(g, b, t, d), W_q=_rand(g, d, d) / d ** 0.5, W_k=_rand(g, d, d) / d ** 0.5,
                          W_v=_rand(g, d, d) / d ** 0.5, W_o=_rand(g, d, d) / d ** 0.5, n_heads=h))
    return cases


def _mha(x, W_q, W_k, W_v, W_o, n_heads, scale=None, split="standard", merge="standard", project=True):
    b, t, d = x.shape
    dh = d // n_heads

    def split_fn(y):
        if split == "no_transpose":
            return y.reshape(b, n_heads, t, dh)
        if split == "interleaved":
            return y.view(b, t, dh, n_heads).permute(0, 3, 1, 2)
        return y.view(b, t, n_heads, dh).transpose(1, 2)

    q, k, v = split_fn(x @ W_q), split_fn(x @ W_k), split_fn(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1) * (1 / math.sqrt(dh) if scale is None else scale), -1)
    out = w @ v  # (B, H, T, dh)
    if merge == "feature_major":
        out = out.permute(0, 2, 3, 1).reshape(b, t, d)
    elif merge == "no_transpose":
        out = out.reshape(b, t, d)
    else:
        out = out.transpose(1, 2).reshape(b, t, d)
    return out @ W_o if project else out


@exercise("07-multihead", _mha_cases)
def _mha_ref(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads)


@mistake("07-multihead", "merge_wrong")
def _mha_merge_wrong(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, merge="feature_major")


@mistake("07-multihead", "split_without_transpose")
def _mha_split_without_transpose(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, split="no_transpose", merge="no_transpose")


@mistake("07-multihead", "scale_d_model")
def _mha_scale_by_d_model(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, scale=1 / math.sqrt(x.shape[-1]))


@mistake("07-multihead", "unscaled")
def _mha_noscale(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, scale=1.0)


@mistake("07-multihead", "interleaved_split")
def _mha_interleaved(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, split="interleaved")


@mistake("07-multihead", "no_output_projection")
def _mha_no_projection(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha(x, W_q, W_k, W_v, W_o, n_heads, project=False)


# ----------------------------------------------------------------------------------------------------------------
# 08 — layer norm, and 13 — RMS norm: rows of every kind (tiny variance, constant, offset, ...).
# ----------------------------------------------------------------------------------------------------------------
def _norm_inputs(g, shape):
    x = _rand(g, *shape) * _uniform(g, 1.0, 3.0) + _uniform(g, 0.5, 2.0)
    rows = x.view(-1, shape[-1])
    if rows.shape[0] >= 2:
        rows[0] = _uniform(g, -1.0, 1.0) + 1e-3 * _rand(g, shape[-1])  # variance below eps
    if rows.shape[0] >= 3:
        rows[1] = _uniform(g, -2.0, 2.0)  # constant row
    if rows.shape[0] >= 4:
        rows[2] = 1e-3 * _rand(g, shape[-1])  # tiny values around zero (root mean square below eps)
    return x


def _layer_norm_cases(g):
    shapes = [(1, 2), (3, 4), (2, 5, 8), (4, 3, 16), (6, 5), (_randint(g, 2, 4), _randint(g, 4, 7), _randint(g, 2, 9))]
    epses = [1e-5, 1e-5, 1e-3, 0.1, 1e-5, 10 ** -_uniform(g, 1.0, 5.0)]
    return [dict(x=_norm_inputs(g, shape), gamma=_rand(g, shape[-1]), beta=_rand(g, shape[-1]), eps=eps)
            for shape, eps in zip(shapes, epses)]


def _layer_norm(x, gamma, beta, eps, axis=-1, unbiased=False, eps_outside=False, mean_scale=1.0):
    mu = x.mean(axis, keepdim=True) * mean_scale
    var = ((x - mu) ** 2).sum(axis, keepdim=True) / (x.shape[axis] - (1 if unbiased else 0))
    denominator = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    return (x - mu) / denominator * gamma + beta


@exercise("08-layer-norm", _layer_norm_cases)
def _layer_norm_ref(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, eps)


@mistake("08-layer-norm", "unbiased")
def _layer_norm_unbiased(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, eps, unbiased=True)


@mistake("08-layer-norm", "batch_axis")
def _layer_norm_batch_axis(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, eps, axis=0)


@mistake("08-layer-norm", "sum")
def _layer_norm_sum(x, gamma, beta, eps=1e-5):
    mu = x.sum(-1, keepdim=True)  # the slide that drops the 1/d
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


@mistake("08-layer-norm", "eps_outside")
def _layer_norm_eps_outside(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, eps, eps_outside=True)


@mistake("08-layer-norm", "no_eps")
def _layer_norm_no_eps(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, 0.0)


@mistake("08-layer-norm", "fixed_eps")
def _layer_norm_fixed_eps(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, gamma, beta, 1e-5)


@mistake("08-layer-norm", "gamma_beta_swapped")
def _layer_norm_swapped(x, gamma, beta, eps=1e-5):
    return _layer_norm(x, beta, gamma, eps)


def _rms_norm_cases(g):
    shapes = [(1, 3), (3, 4), (2, 5, 8), (4, 3, 16), (6, 5), (_randint(g, 2, 4), _randint(g, 4, 7), _randint(g, 2, 9))]
    epses = [1e-6, 1e-6, 1e-4, 0.1, 1e-6, 10 ** -_uniform(g, 1.0, 6.0)]
    return [dict(x=_norm_inputs(g, shape), gain=_rand(g, shape[-1]), eps=eps) for shape, eps in zip(shapes, epses)]


def _rms(x, gain, eps, centred=False, eps_outside=False, scale=None):
    if centred:
        x = x - x.mean(-1, keepdim=True)
    ms = (x ** 2).mean(-1, keepdim=True) * (x.shape[-1] if scale == "sum" else 1)
    denominator = torch.sqrt(ms) + eps if eps_outside else torch.sqrt(ms + eps)
    return x / denominator * gain


@exercise("13-rms-norm", _rms_norm_cases)
def _rms_norm_ref(x, gain, eps=1e-6):
    return _rms(x, gain, eps)


@mistake("13-rms-norm", "centred")
def _rms_norm_centred(x, gain, eps=1e-6):
    return _rms(x, gain, eps, centred=True)


@mistake("13-rms-norm", "eps_outside")
def _rms_norm_eps_outside(x, gain, eps=1e-6):
    return _rms(x, gain, eps, eps_outside=True)


@mistake("13-rms-norm", "no_eps")
def _rms_norm_no_eps(x, gain, eps=1e-6):
    return _rms(x, gain, 0.0)


@mistake("13-rms-norm", "norm")
def _rms_norm_norm(x, gain, eps=1e-6):
    return _rms(x, gain, eps, scale="sum")


@mistake("13-rms-norm", "fixed_eps")
def _rms_norm_fixed_eps(x, gain, eps=1e-6):
    return _rms(x, gain, 1e-6)


@mistake("13-rms-norm", "no_gain")
def _rms_norm_no_gain(x, gain, eps=1e-6):
    return _rms(x, torch.ones_like(gain), eps)


# ----------------------------------------------------------------------------------------------------------------
# 09 — parameters of one encoder block (counted from tl.EncoderBlock).
# ----------------------------------------------------------------------------------------------------------------
def _block_params_cases(g):
    fixed = [(8, 32, 2, True), (64, 256, 4, True), (512, 2048, 8, True), (32, 128, 4, False), (12, 60, 3, True),
             (16, 48, 1, False)]
    h = _randint(g, 2, 8)
    fixed.append((h * _randint(g, 2, 16), _randint(g, 8, 300), h, bool(_randint(g, 0, 1))))
    return [dict(d_model=d, d_ff=f, n_heads=h, bias=b) for d, f, h, b in fixed]


@exercise("09-block-params", _block_params_cases)
def _block_params_ref(d_model, d_ff, n_heads, bias=True):
    from transformer_lib.blocks import EncoderBlock

    block = EncoderBlock(d_model, n_heads, d_ff, bias=bias)
    return sum(p.numel() for p in block.parameters())


@mistake("09-block-params", "per_head")
def _block_params_per_head(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) + (n_heads - 1) * 3 * d_model * d_model


@mistake("09-block-params", "no_norms")
def _block_params_no_norms(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) - (4 if bias else 2) * d_model


@mistake("09-block-params", "no_bias")
def _block_params_no_bias(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, False) - (4 * d_model if not bias else 0)


@mistake("09-block-params", "one_norm")
def _block_params_one_norm(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) - (2 if bias else 1) * d_model


@mistake("09-block-params", "no_output_projection")
def _block_params_no_wo(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) - d_model * d_model - (d_model if bias else 0)


# ----------------------------------------------------------------------------------------------------------------
# 10 — greedy decoding of a seq2seq model: rows that stop at different steps, a row that never stops.
# ----------------------------------------------------------------------------------------------------------------
def _greedy_model(g, std: float, eos_boost: float):
    """A small random EncoderDecoder whose outputs depend on the source (weights ~ N(0, std²)), with EOS made
    likely by ``eos_boost`` so that rows stop after a few steps."""
    from transformer_lib.models import EncoderDecoder, EncoderDecoderConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=2,
                                                    n_layers=1, d_ff=32)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * std)
        model.lm_head.weight[2] += eos_boost
    return model


def _greedy_margin_ok(model, src, out) -> bool:
    """Every argmax of the reference decoding wins by a clear margin (no near-ties that rounding could flip)."""
    with torch.no_grad():
        src_mask = src != 0
        memory = model.encode(src, src_mask)
        tokens = torch.cat([torch.ones(src.shape[0], 1, dtype=torch.long), out], 1)
        logits = model.decode(tokens[:, :-1], memory, src_mask=src_mask)
        top2 = logits.topk(2, -1).values
        live = torch.ones_like(out, dtype=torch.bool)
        for i in range(out.shape[0]):
            stop = (out[i] == 2).nonzero()
            if len(stop):
                live[i, stop[0, 0] + 1:] = False
        return bool(((top2[..., 0] - top2[..., 1])[live] > 1e-3).all())


GREEDY_TRAITS = {"stops_early", "unfinished_row", "different_steps", "single"}


def _greedy_traits(out, max_len: int) -> set:
    steps = [int((row == 2).nonzero()[0, 0]) if (row == 2).any() else max_len for row in out]
    traits = set()
    if out.shape[1] < max_len:
        traits.add("stops_early")  # every row produced EOS before max_len
    if not bool((out == 2).any(1).all()):
        traits.add("unfinished_row")  # a row never produced EOS
    if out.shape[0] > 1 and len(set(steps)) > 1 and min(steps) < out.shape[1] - 1:
        traits.add("different_steps")  # a row stops while another goes on
    if out.shape[0] == 1:
        traits.add("single")
    return traits


def _greedy_cases(g):
    """Cases covering rows that stop at different steps, a row that never produces EOS, a batch that stops
    before max_len, and a batch of one; padded sources."""
    cases, found = [], set()
    for _ in range(200):
        b = _randint(g, 1, 4)
        max_len = _randint(g, 5, 9)
        model = _greedy_model(g, _uniform(g, 0.7, 1.2), _uniform(g, 0.5, 2.0))
        lengths = torch.randint(2, 6, (b,), generator=g)
        src = torch.randint(4, 12, (b, 5), generator=g)
        src = src.masked_fill(torch.arange(5)[None, :] >= lengths[:, None], 0)
        out = _greedy_ref(model, src, max_len)
        traits = _greedy_traits(out, max_len)
        if traits - found and _greedy_margin_ok(model, src, out):
            cases.append(dict(model=model, src=src, max_len=max_len))
            found |= traits
        if found >= GREEDY_TRAITS:
            break
    return cases


@exercise("10-greedy-decode", _greedy_cases)
def _greedy_ref(model, src, max_len):
    from transformer_lib.generation import greedy_translate

    return greedy_translate(model, src, max_len=max_len)


def _greedy_loop(model, src, max_len, stop="all", pad_after_eos=True, keep_bos=False, run_to_max=False):
    with torch.no_grad():
        src_mask = src != 0
        memory = model.encode(src, src_mask)
        out = torch.ones(src.shape[0], 1, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            nxt = model.decode(out, memory, src_mask=src_mask)[:, -1].argmax(-1)
            if pad_after_eos:
                nxt = nxt.masked_fill(done, 0)
            done = done | (nxt == 2)
            out = torch.cat([out, nxt[:, None]], 1)
            if run_to_max:
                continue
            if (stop == "all" and bool(done.all())) or (stop == "any" and bool(done.any())):
                break
    return out if keep_bos else out[:, 1:]


@mistake("10-greedy-decode", "no_stop")
def _greedy_no_stop(model, src, max_len):
    return _greedy_loop(model, src, max_len, pad_after_eos=False)


@mistake("10-greedy-decode", "stop_all_at_first")
def _greedy_stop_first(model, src, max_len):
    return _greedy_loop(model, src, max_len, stop="any")


@mistake("10-greedy-decode", "always_max_len")
def _greedy_always_max(model, src, max_len):
    return _greedy_loop(model, src, max_len, run_to_max=True)


@mistake("10-greedy-decode", "keeps_bos")
def _greedy_keeps_bos(model, src, max_len):
    return _greedy_loop(model, src, max_len, keep_bos=True)


# ----------------------------------------------------------------------------------------------------------------
# 11 — next-token distribution with temperature and top-k.
# ----------------------------------------------------------------------------------------------------------------
def _next_token_cases(g):
    shapes = [(1, 5, 1.0, 5), (2, 10, 0.5, 3), (3, 20, 2.0, 1), (2, 8, 1.3, 4), (4, 12, 0.7, 6),
              (_randint(g, 1, 4), _randint(g, 6, 30), _uniform(g, 0.3, 3.0), 0)]
    cases = []
    for b, v, t, k in shapes:
        k = k or _randint(g, 2, v - 1)
        cases.append(dict(logits=_rand(g, b, v) * 2, temperature=t, k=k))
    return cases


def _top_k_probs(logits, temperature, k, fill=float("-inf"), largest=True):
    scaled = logits / temperature
    kth = torch.topk(scaled, k, dim=-1, largest=largest).values[..., -1:]
    drop = scaled < kth if largest else scaled > kth
    return torch.softmax(scaled.masked_fill(drop, fill), dim=-1)


@exercise("11-next-token", _next_token_cases)
def _next_token_ref(logits, temperature, k):
    return _top_k_probs(logits, temperature, k)


@mistake("11-next-token", "times_t")
def _next_token_times_t(logits, temperature, k):
    return _top_k_probs(logits * temperature * temperature, temperature, k)


@mistake("11-next-token", "no_renorm")
def _next_token_no_renorm(logits, temperature, k):
    p = torch.softmax(logits / temperature, -1)
    kth = torch.topk(p, k, -1).values[..., -1:]
    return p * (p >= kth)


@mistake("11-next-token", "k_plus_one")
def _next_token_k_plus_one(logits, temperature, k):
    return _top_k_probs(logits, temperature, min(k + 1, logits.shape[-1]))


@mistake("11-next-token", "zero_fill")
def _next_token_zero_fill(logits, temperature, k):
    return _top_k_probs(logits, temperature, k, fill=0.0)


@mistake("11-next-token", "smallest")
def _next_token_smallest(logits, temperature, k):
    return _top_k_probs(logits, temperature, k, largest=False)


# ----------------------------------------------------------------------------------------------------------------
# 12 — sliding-window (local) attention mask.
# ----------------------------------------------------------------------------------------------------------------
def _window_cases(g):
    t = _randint(g, 10, 30)
    return [dict(t=t, w=w) for t, w in [(1, 0), (4, 1), (6, 2), (9, 3), (5, 0), (7, 10), (t, _randint(g, 1, t // 2))]]


def _offsets(t):
    i = torch.arange(t)
    return i[:, None] - i[None, :]


@exercise("12-window-mask", _window_cases)
def _window_ref(t, w):
    return _offsets(t).abs() <= w


@mistake("12-window-mask", "strict")
def _window_strict(t, w):
    return _offsets(t).abs() < w


@mistake("12-window-mask", "one_sided")
def _window_one_sided(t, w):
    d = _offsets(t)
    return (d >= 0) & (d <= w)


@mistake("12-window-mask", "no_abs")
def _window_no_abs(t, w):
    return _offsets(t) <= w


# ----------------------------------------------------------------------------------------------------------------
# 13 — SwiGLU feed-forward.
# ----------------------------------------------------------------------------------------------------------------
def _swiglu_cases(g):
    shapes = [(1, 1, 2, 3), (2, 4, 8, 12), (3, 5, 6, 16), (2, 3, 5, 5),
              (_randint(g, 1, 3), _randint(g, 1, 5), _randint(g, 2, 8), _randint(g, 2, 12))]
    return [dict(x=_rand(g, b, t, d), W1=_rand(g, d, f) / math.sqrt(d), W3=_rand(g, d, f) / math.sqrt(d),
                 W2=_rand(g, f, d) / math.sqrt(f)) for b, t, d, f in shapes]


@exercise("13-swiglu", _swiglu_cases)
def _swiglu_ref(x, W1, W3, W2):
    return (F.silu(x @ W1) * (x @ W3)) @ W2


@mistake("13-swiglu", "wrong_gate")
def _swiglu_wrong_gate(x, W1, W3, W2):
    return ((x @ W1) * F.silu(x @ W3)) @ W2


@mistake("13-swiglu", "relu")
def _swiglu_relu(x, W1, W3, W2):
    return (F.relu(x @ W1) * (x @ W3)) @ W2


@mistake("13-swiglu", "no_gate")
def _swiglu_no_gate(x, W1, W3, W2):
    return F.silu(x @ W1) @ W2


@mistake("13-swiglu", "sigmoid")
def _swiglu_sigmoid(x, W1, W3, W2):
    return (torch.sigmoid(x @ W1) * (x @ W3)) @ W2


@mistake("13-swiglu", "gelu")
def _swiglu_gelu(x, W1, W3, W2):
    return (F.gelu(x @ W1) * (x @ W3)) @ W2


# ----------------------------------------------------------------------------------------------------------------
# Cases, expected outputs, mistakes
# ----------------------------------------------------------------------------------------------------------------
def grading_seed(key: str, exercise_id: str) -> int:
    """The seed of an exercise's grading cases, derived from the instructor's key (never shown to students)."""
    digest = hashlib.sha256(f"{key}\0{exercise_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def make_cases(exercise_id: str, seed: int) -> List[Dict[str, Any]]:
    return CASES[exercise_id](torch.Generator().manual_seed(seed))


def call(fn: Callable, case: Dict[str, Any]):
    return fn(**engine.clone_inputs(case))


def expected_outputs(exercise_id: str, cases: List[Dict[str, Any]]) -> list:
    return [call(REFERENCES[exercise_id], case) for case in cases]


def mistake_outputs(exercise_id: str, cases: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per case: mistake key -> that mistake's output (None where it cannot run on the case)."""
    out = []
    for case in cases:
        row = {}
        for key, fn in MISTAKES.get(exercise_id, {}).items():
            try:
                row[key] = call(fn, case)
            except Exception:  # noqa: BLE001 - a mistake model that cannot run on this case is skipped
                row[key] = None
        out.append(row)
    return out


def judge(exercise_id: str, cases, outcomes, expected=None, mistakes=None) -> engine.CheckResult:
    """The verdict for the outcomes of the student's function on ``cases`` (expected outputs computed here)."""
    expected = expected_outputs(exercise_id, cases) if expected is None else expected
    mistakes = mistake_outputs(exercise_id, cases) if mistakes is None else mistakes
    return engine.judge(EXERCISES[exercise_id], cases, expected, outcomes, mistakes)


def run_in_process(exercise_id: str, fn: Callable, seed: int) -> engine.CheckResult:
    """Check ``fn`` in this process on the cases of ``seed`` (tests; the grader runs student code elsewhere)."""
    cases = make_cases(exercise_id, seed)
    outcomes = []
    for case in cases:
        try:
            outcomes.append({"status": "ok", "value": engine.portable(call(fn, engine.decode_case(
                engine.encode_case(case))))})
        except NotImplementedError:
            outcomes.append({"status": "not_implemented"})
            break
        except Exception as exc:  # noqa: BLE001 - reported as the student's error
            outcomes.append({"status": "error", "error": f"{type(exc).__name__}: {exc}"})
            break
    return judge(exercise_id, cases, outcomes)


# ----------------------------------------------------------------------------------------------------------------
# The self-check data of the library
# ----------------------------------------------------------------------------------------------------------------
def selfcheck_data(seed: int = SELFCHECK_SEED) -> Dict[str, Any]:
    """What ``transformer_lib.exercises.check`` compares with: per exercise, the cases (models as config and
    weights), the expected outputs and the outputs of the known mistakes."""
    data: Dict[str, Any] = {"version": FORMAT_VERSION, "seed": seed, "exercises": {}}
    for ex_id in EXERCISES:
        cases = make_cases(ex_id, seed)
        expected = [engine.portable(v) for v in expected_outputs(ex_id, cases)]
        mistakes = [{k: (None if v is None else engine.portable(v)) for k, v in row.items()}
                    for row in mistake_outputs(ex_id, cases)]
        data["exercises"][ex_id] = {"cases": [engine.encode_case(c) for c in cases], "expected": expected,
                                    "mistakes": mistakes}
    return data


def write_selfcheck(path: Path = SELFCHECK_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(selfcheck_data(), tmp)
    tmp.replace(path)
    return path


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point():
            return bool(torch.allclose(a.double(), b.double(), atol=1e-6, rtol=1e-5, equal_nan=True))
        return bool(torch.equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return a == b


def selfcheck_problems(path: Path = SELFCHECK_PATH) -> List[str]:
    """Exercise ids whose stored self-check data differs from what this module computes now."""
    if not path.is_file():
        return [f"{path} is missing"]
    stored = torch.load(path, weights_only=True)
    fresh = selfcheck_data(stored.get("seed", SELFCHECK_SEED))
    problems = []
    if stored.get("version") != FORMAT_VERSION:
        problems.append(f"format version {stored.get('version')} != {FORMAT_VERSION}")
    for ex_id in sorted(set(fresh["exercises"]) | set(stored["exercises"])):
        if not _same(stored["exercises"].get(ex_id), fresh["exercises"].get(ex_id)):
            problems.append(ex_id)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-selfcheck", action="store_true", help=f"write {SELFCHECK_PATH.relative_to(ROOT)}")
    parser.add_argument("--check-selfcheck", action="store_true", help="fail if the stored data is stale")
    args = parser.parse_args(argv)
    if args.write_selfcheck:
        print(f"wrote {write_selfcheck().relative_to(ROOT)}")
    if args.check_selfcheck:
        problems = selfcheck_problems()
        if problems:
            print("stale self-check data: " + ", ".join(problems) + "; run "
                  "`.venv/bin/python -m booktools.exercise_references --write-selfcheck`", file=sys.stderr)
            return 1
        print("self-check data up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
