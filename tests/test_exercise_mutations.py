"""Mutation tests of the autograder: for every exercise, independent wrong implementations (the slips students
make, beyond the checker's own list of hints) must all fail, and independent correct ones (einsum, SDPA,
``F.layer_norm``, ``nn.RNN``, ...) must all pass.

Each implementation is checked three times: by the notebook self-check (``tl.exercises.check``, the stored cases)
and by the grader's judge on the cases of two grading seeds (``booktools/exercise_references.py``), so the cases of
any seed must make every slip show. The implementations are written here, as a student would, not derived from
the grader's references or mistake models.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
from booktools import exercise_references as references  # noqa: E402

from transformer_lib import exercises  # noqa: E402

GRADING_SEEDS = (1, 20240601)
CORRECT: dict[str, list] = {}
WRONG: dict[str, list] = {}


def correct(ex_id):
    def register(fn):
        CORRECT.setdefault(ex_id, []).append(fn)
        return fn
    return register


FORBIDDEN_TORCH: dict = {}


def forbidden_torch(ex_id):
    """Right answers that call the torch function doing the whole exercise: no credit, with the catalogue's reason."""
    def register(fn):
        FORBIDDEN_TORCH.setdefault(ex_id, []).append(fn)
        return fn
    return register


def wrong(ex_id):
    def register(fn):
        WRONG.setdefault(ex_id, []).append(fn)
        return fn
    return register


# ------------------------------------------------------------------------------------------------ 01 power law
@correct("01-power-law")
def power_polyfit(x, y):
    slope, intercept = np.polyfit(np.log(x.numpy()), np.log(y.numpy()), 1)
    return float(np.exp(intercept)), float(-slope)


@correct("01-power-law")
def power_closed_form(x, y):
    lx, ly = x.log(), y.log()
    slope = ((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum()
    return math.exp(float(ly.mean() - slope * lx.mean())), -float(slope)


@correct("01-power-law")
def power_log10(x, y):
    a = torch.stack([torch.log10(x), torch.ones_like(x)], 1)
    slope, intercept = torch.linalg.lstsq(a, torch.log10(y)[:, None]).solution[:, 0]
    return 10 ** float(intercept), -float(slope)


@correct("01-power-law")
def power_normal_equations(x, y):
    a = torch.stack([torch.ones_like(x), x.log()], 1)
    coef = torch.linalg.solve(a.T @ a, a.T @ y.log())
    return float(coef[0].exp()), float(-coef[1])


@wrong("01-power-law")
def power_positive_exponent(x, y):
    slope, intercept = np.polyfit(np.log(x.numpy()), np.log(y.numpy()), 1)
    return float(np.exp(intercept)), float(slope)


@wrong("01-power-law")
def power_linear_space(x, y):
    slope, intercept = np.polyfit(x.numpy(), y.numpy(), 1)
    return float(intercept), float(-slope)


@wrong("01-power-law")
def power_returns_alpha_first(x, y):
    c, alpha = power_polyfit(x, y)
    return alpha, c


@wrong("01-power-law")
def power_log10_then_exp(x, y):
    slope, intercept = np.polyfit(np.log10(x.numpy()), np.log10(y.numpy()), 1)
    return float(np.exp(intercept)), float(-slope)


@wrong("01-power-law")
def power_two_points(x, y):
    alpha = -float((y[-1].log() - y[0].log()) / (x[-1].log() - x[0].log()))
    return float(y[0] * x[0] ** alpha), alpha


@wrong("01-power-law")
def power_semilog(x, y):
    slope, intercept = np.polyfit(np.log(x.numpy()), y.numpy(), 1)
    return float(np.exp(intercept)), float(-slope)


@wrong("01-power-law")
def power_c_from_mean(x, y):
    _, alpha = power_polyfit(x, y)
    return float(y.log().mean().exp()), alpha


@wrong("01-power-law")
def power_regress_x_on_y(x, y):
    slope, intercept = np.polyfit(np.log(y.numpy()), np.log(x.numpy()), 1)
    alpha = -1 / slope
    return float(np.exp(-intercept / slope)), float(alpha)


# ------------------------------------------------------------------------------------------------ 02 RNN
@correct("02-rnn-forward")
def rnn_loop(x, W_xh, W_hh, b):
    h, out = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype), []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T + b)
        out.append(h)
    return torch.stack(out, 1)


@correct("02-rnn-forward")
def rnn_torch_module(x, W_xh, W_hh, b):
    rnn = nn.RNN(W_xh.shape[1], W_hh.shape[0], batch_first=True).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh)
        rnn.weight_hh_l0.copy_(W_hh)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()
        return rnn(x)[0]


@correct("02-rnn-forward")
def rnn_precomputed_inputs(x, W_xh, W_hh, b):
    inputs = torch.einsum("btd,hd->bth", x, W_xh) + b
    h = x.new_zeros(x.shape[0], W_hh.shape[0])
    states = torch.empty(x.shape[0], x.shape[1], W_hh.shape[0], dtype=x.dtype)
    for t in range(x.shape[1]):
        h = torch.tanh(inputs[:, t] + torch.einsum("bh,kh->bk", h, W_hh))
        states[:, t] = h
    return states


@correct("02-rnn-forward")
def rnn_per_sequence(x, W_xh, W_hh, b):
    rows = []
    for seq in x:
        h, states = torch.zeros(W_hh.shape[0], dtype=x.dtype), []
        for x_t in seq:
            h = torch.tanh(W_xh @ x_t + W_hh @ h + b)
            states.append(h)
        rows.append(torch.stack(states))
    return torch.stack(rows)


def _rnn(x, W_xh, W_hh, b, step, h0=None, keep_h0=False):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype) if h0 is None else h0
    out = [h] if keep_h0 else []
    for t in range(x.shape[1]):
        h = step(x[:, t], h)
        out.append(h)
    return torch.stack(out, 1)


@wrong("02-rnn-forward")
def rnn_no_tanh(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: x_t @ W_xh.T + h @ W_hh.T + b)


@wrong("02-rnn-forward")
def rnn_hh_not_transposed(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.tanh(x_t @ W_xh.T + h @ W_hh + b))


@wrong("02-rnn-forward")
def rnn_xh_not_transposed(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.tanh(x_t @ W_xh + h @ W_hh.T + b))


@wrong("02-rnn-forward")
def rnn_bias_outside(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.tanh(x_t @ W_xh.T + h @ W_hh.T) + b)


@wrong("02-rnn-forward")
def rnn_h0_ones(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.tanh(x_t @ W_xh.T + h @ W_hh.T + b),
                h0=torch.ones(x.shape[0], W_hh.shape[0], dtype=x.dtype))


@wrong("02-rnn-forward")
def rnn_returns_h0_too(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.tanh(x_t @ W_xh.T + h @ W_hh.T + b), keep_h0=True)


@wrong("02-rnn-forward")
def rnn_sigmoid(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: torch.sigmoid(x_t @ W_xh.T + h @ W_hh.T + b))


@wrong("02-rnn-forward")
def rnn_state_before_update(x, W_xh, W_hh, b):
    h, out = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype), []
    for t in range(x.shape[1]):
        out.append(h)
        h = torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T + b)
    return torch.stack(out, 1)


@wrong("02-rnn-forward")
def rnn_tanh_only_on_recurrence(x, W_xh, W_hh, b):
    return _rnn(x, W_xh, W_hh, b, lambda x_t, h: x_t @ W_xh.T + torch.tanh(h @ W_hh.T + b))


@wrong("02-rnn-forward")
def rnn_time_major(x, W_xh, W_hh, b):
    h, out = torch.zeros(x.shape[1], W_hh.shape[0], dtype=x.dtype), []
    for t in range(x.shape[0]):
        h = torch.tanh(x[t] @ W_xh.T + h @ W_hh.T + b)
        out.append(h)
    return torch.stack(out, 0)


# ------------------------------------------------------------------------------------------------ 02 padded RNN
@correct("02-rnn-padded")
def padded_freeze(x, lengths, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = torch.zeros(x.shape[0], x.shape[1], W_hh.shape[0], dtype=x.dtype)
    for t in range(x.shape[1]):
        real = (t < lengths)[:, None]
        h = torch.where(real, torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T + b), h)
        states[:, t] = h * real
    return states, h


@correct("02-rnn-padded")
def padded_packed(x, lengths, W_xh, W_hh, b):
    rnn = nn.RNN(W_xh.shape[1], W_hh.shape[0], batch_first=True).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh)
        rnn.weight_hh_l0.copy_(W_hh)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h_n = rnn(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return states, h_n[0]


@correct("02-rnn-padded")
def padded_per_row(x, lengths, W_xh, W_hh, b):
    states = x.new_zeros(x.shape[0], x.shape[1], W_hh.shape[0])
    last = x.new_zeros(x.shape[0], W_hh.shape[0])
    for i in range(x.shape[0]):
        h = x.new_zeros(W_hh.shape[0])
        for t in range(int(lengths[i])):
            h = torch.tanh(W_xh @ x[i, t] + W_hh @ h + b)
            states[i, t] = h
        last[i] = h
    return states, last


@wrong("02-rnn-padded")
def padded_last_at_end(x, lengths, W_xh, W_hh, b):
    states, _ = padded_per_row(x, lengths, W_xh, W_hh, b)
    return states, states[:, -1]


@wrong("02-rnn-padded")
def padded_runs_through_padding(x, lengths, W_xh, W_hh, b):
    states = rnn_loop(x, W_xh, W_hh, b)
    return states, states[torch.arange(x.shape[0]), lengths - 1]


@wrong("02-rnn-padded")
def padded_last_off_by_one(x, lengths, W_xh, W_hh, b):
    states, _ = padded_per_row(x, lengths, W_xh, W_hh, b)
    return states, states[torch.arange(x.shape[0]), (lengths - 2).clamp(min=0)]


@wrong("02-rnn-padded")
def padded_frozen_not_zeroed(x, lengths, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = []
    for t in range(x.shape[1]):
        real = (t < lengths)[:, None]
        h = torch.where(real, torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T + b), h)
        states.append(h)
    return torch.stack(states, 1), h


@wrong("02-rnn-padded")
def padded_zeroed_but_last_after_all(x, lengths, W_xh, W_hh, b):
    states = rnn_loop(x, W_xh, W_hh, b)
    real = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return states * real[..., None], states[:, -1]


@wrong("02-rnn-padded")
def padded_lengths_ignored(x, lengths, W_xh, W_hh, b):
    states = rnn_loop(x, W_xh, W_hh, b)
    return states, states[:, -1]


@wrong("02-rnn-padded")
def padded_no_tanh(x, lengths, W_xh, W_hh, b):
    states = rnn_no_tanh(x, W_xh, W_hh, b)
    real = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    states = states * real[..., None]
    return states, states[torch.arange(x.shape[0]), lengths - 1]


@wrong("02-rnn-padded")
def padded_zero_inputs_last_final(x, lengths, W_xh, W_hh, b):
    real = (torch.arange(x.shape[1])[None, :] < lengths[:, None])[..., None]
    states = rnn_loop(x * real, W_xh, W_hh, b)  # zero inputs on padding, but the recurrence goes on
    return states * real, states[:, -1]


# ------------------------------------------------------------------------------------------------ 03 seq2seq
@correct("03-seq2seq-attention")
def s2s_bmm(s, h, mask):
    scores = torch.bmm(h, s.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, float("-inf"))
    alpha = torch.softmax(scores, -1)
    return torch.bmm(alpha.unsqueeze(1), h).squeeze(1), alpha


@correct("03-seq2seq-attention")
def s2s_renormalise(s, h, mask):
    e = torch.exp((h * s[:, None, :]).sum(-1) - (h * s[:, None, :]).sum(-1).max(-1, keepdim=True).values) * mask
    alpha = e / e.sum(-1, keepdim=True)
    return (alpha[..., None] * h).sum(1), alpha


@correct("03-seq2seq-attention")
def s2s_loop(s, h, mask):
    alphas, contexts = [], []
    for i in range(s.shape[0]):
        n = int(mask[i].sum())
        w = torch.softmax(h[i, :n] @ s[i], 0)
        alphas.append(torch.cat([w, w.new_zeros(h.shape[1] - n)]))
        contexts.append(w @ h[i, :n])
    return torch.stack(contexts), torch.stack(alphas)


@correct("03-seq2seq-attention")
def s2s_sdpa(s, h, mask):
    a = F.scaled_dot_product_attention(s[:, None, :], h, h, attn_mask=mask[:, None, :], scale=1.0)[:, 0]
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h).masked_fill(~mask, -1e30), -1)
    return a, alpha


@wrong("03-seq2seq-attention")
def s2s_softmax_over_batch(s, h, mask):
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h).masked_fill(~mask, -1e9), 0)
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_mask_inverted(s, h, mask):
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h).masked_fill(mask, -1e9), -1)
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_mask_after_softmax(s, h, mask):
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h), -1) * mask
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_no_mask(s, h, mask):
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h), -1)
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_multiply_scores_by_mask(s, h, mask):
    alpha = torch.softmax(torch.einsum("bd,bsd->bs", s, h) * mask, -1)
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_scaled(s, h, mask):
    alpha = torch.softmax((torch.einsum("bd,bsd->bs", s, h) / math.sqrt(s.shape[-1])).masked_fill(~mask, -1e9), -1)
    return torch.einsum("bs,bsd->bd", alpha, h), alpha


@wrong("03-seq2seq-attention")
def s2s_context_from_unmasked(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h)
    alpha = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
    return torch.einsum("bs,bsd->bd", torch.softmax(scores, -1), h), alpha


@wrong("03-seq2seq-attention")
def s2s_swapped_outputs(s, h, mask):
    a, alpha = s2s_bmm(s, h, mask)
    return alpha, a


@wrong("03-seq2seq-attention")
def s2s_mean_context(s, h, mask):
    _, alpha = s2s_bmm(s, h, mask)
    return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True), alpha


# ------------------------------------------------------------------------------------------------ 04 self-attention
@correct("04-self-attention")
def sa_matmul(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1) @ v


@correct("04-self-attention")
def sa_einsum(x, W_q, W_k, W_v):
    q, k, v = (torch.einsum("btd,dk->btk", x, w) for w in (W_q, W_k, W_v))
    w = torch.einsum("btk,bsk->bts", q, k).div(W_k.shape[1] ** 0.5).softmax(-1)
    return torch.einsum("bts,bsv->btv", w, v)


@forbidden_torch("04-self-attention")
def sa_sdpa(x, W_q, W_k, W_v):
    return F.scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)


@correct("04-self-attention")
def sa_manual_softmax(x, W_q, W_k, W_v):
    scores = (x @ W_q) @ (x @ W_k).mT * W_k.shape[1] ** -0.5
    e = (scores - scores.amax(-1, keepdim=True)).exp()
    return (e / e.sum(-1, keepdim=True)) @ (x @ W_v)


@correct("04-self-attention")
def sa_loop(x, W_q, W_k, W_v):
    return torch.stack([torch.softmax((xb @ W_q) @ (xb @ W_k).T / math.sqrt(W_q.shape[1]), 1) @ (xb @ W_v)
                        for xb in x])


def _sa(x, W_q, W_k, W_v, scale, dim=-1):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim) @ v


@wrong("04-self-attention")
def sa_no_scale(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, 1.0)


@wrong("04-self-attention")
def sa_softmax_queries(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, W_k.shape[1] ** -0.5, dim=1)


@wrong("04-self-attention")
def sa_scores_transposed(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(k @ q.transpose(1, 2) / math.sqrt(k.shape[-1]), -1) @ v


@wrong("04-self-attention")
def sa_scale_by_d(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, x.shape[-1] ** -0.5)


@wrong("04-self-attention")
def sa_scale_by_d_v(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, W_v.shape[-1] ** -0.5)


@wrong("04-self-attention")
def sa_divide_by_d_k(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, 1 / W_k.shape[1])


@wrong("04-self-attention")
def sa_multiply_by_sqrt(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_k, W_v, math.sqrt(W_k.shape[1]))


@wrong("04-self-attention")
def sa_keys_are_queries(x, W_q, W_k, W_v):
    return _sa(x, W_q, W_q, W_v, W_k.shape[1] ** -0.5)


@wrong("04-self-attention")
def sa_softmax_over_everything(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
    return torch.softmax(s.flatten(1), -1).view_as(s) @ v


@wrong("04-self-attention")
def sa_scaled_after_softmax(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(q @ k.transpose(1, 2), -1) / math.sqrt(k.shape[-1]) @ v


# ------------------------------------------------------------------------------------------------ 05 sinusoidal
@correct("05-sinusoidal")
def sin_loops(n, d):
    table = torch.zeros(n, d, dtype=torch.float64)
    for p in range(n):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            table[p, 2 * i], table[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return table


@correct("05-sinusoidal")
def sin_interleave_by_stack(n, d):
    angles = torch.arange(n, dtype=torch.float64)[:, None] * torch.exp(
        -math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


@correct("05-sinusoidal")
def sin_numpy(n, d):
    pos, i = np.arange(n)[:, None], np.arange(d)[None, :]
    angles = pos / np.power(10000, (2 * (i // 2)) / d)
    return torch.from_numpy(np.where(i % 2 == 0, np.sin(angles), np.cos(angles)))


@wrong("05-sinusoidal")
def sin_swapped(n, d):
    return sin_loops(n, d)[:, [j ^ 1 for j in range(d)]]


@wrong("05-sinusoidal")
def sin_halves(n, d):
    t = sin_loops(n, d)
    return torch.cat([t[:, 0::2], t[:, 1::2]], 1)


@wrong("05-sinusoidal")
def sin_exponent_i_over_d(n, d):
    angles = torch.arange(n, dtype=torch.float64)[:, None] / 10000 ** (torch.arange(d // 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


@wrong("05-sinusoidal")
def sin_column_index_exponent(n, d):
    pos, j = torch.arange(n, dtype=torch.float64)[:, None], torch.arange(d, dtype=torch.float64)[None, :]
    angles = pos / 10000 ** (j / d)
    return torch.where(j.long() % 2 == 0, angles.sin(), angles.cos())


@wrong("05-sinusoidal")
def sin_positions_from_one(n, d):
    return sin_loops(n + 1, d)[1:]


@wrong("05-sinusoidal")
def sin_base_1000(n, d):
    angles = torch.arange(n, dtype=torch.float64)[:, None] / 1000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


@wrong("05-sinusoidal")
def sin_multiplied(n, d):
    angles = torch.arange(n, dtype=torch.float64)[:, None] * 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


@wrong("05-sinusoidal")
def sin_d_minus_one(n, d):
    angles = torch.arange(n, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(0, d, 2, dtype=torch.float64) / (d - 1))
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


# ------------------------------------------------------------------------------------------------ 06 causal mask
@correct("06-causal-mask")
def causal_arange(t):
    i = torch.arange(t)
    return i[:, None] >= i[None, :]


@correct("06-causal-mask")
def causal_tril(t):
    return torch.tril(torch.ones(t, t, dtype=torch.bool))


@correct("06-causal-mask")
def causal_not_triu(t):
    return ~torch.ones(t, t).triu(1).bool()


@correct("06-causal-mask")
def causal_loops(t):
    mask = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        mask[i, : i + 1] = True
    return mask


@wrong("06-causal-mask")
def causal_strict(t):
    return torch.tril(torch.ones(t, t), diagonal=-1).bool()


@wrong("06-causal-mask")
def causal_upper(t):
    return torch.triu(torch.ones(t, t)).bool()


@wrong("06-causal-mask")
def causal_inverted(t):
    return torch.ones(t, t).triu(1).bool()


@wrong("06-causal-mask")
def causal_float(t):
    return torch.tril(torch.ones(t, t))


@wrong("06-causal-mask")
def causal_one_ahead(t):
    return torch.ones(t, t).tril(1).bool()


@wrong("06-causal-mask")
def causal_diagonal_only(t):
    return torch.eye(t, dtype=torch.bool)


@wrong("06-causal-mask")
def causal_all_true(t):
    return torch.ones(t, t, dtype=torch.bool)


@wrong("06-causal-mask")
def causal_too_big(t):
    return torch.ones(t + 1, t + 1, dtype=torch.bool).tril()


# ------------------------------------------------------------------------------------------------ 06 masked softmax
@correct("06-masked-softmax")
def msm_finfo_min(scores, mask):
    s = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    return (torch.softmax(s, -1) * mask.any(-1, keepdim=True)).to(scores.dtype)


@correct("06-masked-softmax")
def msm_inf_then_nan_to_zero(scores, mask):
    return torch.softmax(scores.float().masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0).to(scores.dtype)


@correct("06-masked-softmax")
def msm_manual(scores, mask):
    s = scores.double()
    m = s.masked_fill(~mask, -torch.inf).amax(-1, keepdim=True).nan_to_num(0.0)
    e = torch.exp(s - m) * mask
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e)).to(scores.dtype)


@correct("06-masked-softmax")
def msm_where(scores, mask):
    s = torch.where(mask, scores.float(), torch.tensor(-1e30))
    w = torch.softmax(s, -1)
    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w)).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_minus_inf(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")).float(), -1).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_minus_1e5_half(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e5).float(), -1).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_minus_1e4_no_zeroing(scores, mask):
    return torch.softmax(scores.float().masked_fill(~mask, -1e4), -1).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_softmax_over_queries(scores, mask):
    s = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    return (torch.softmax(s, dim=-2) * mask.any(-1, keepdim=True)).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_after(scores, mask):
    return (torch.softmax(scores.float(), -1) * mask).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_inverted(scores, mask):
    return msm_finfo_min(scores, ~mask)


@wrong("06-masked-softmax")
def msm_float32_out(scores, mask):
    return msm_finfo_min(scores, mask).float()


@wrong("06-masked-softmax")
def msm_multiply_scores(scores, mask):
    return torch.softmax(scores.float() * mask, -1).to(scores.dtype) * mask.any(-1, keepdim=True)


@wrong("06-masked-softmax")
def msm_first_axis(scores, mask):
    s = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    return (torch.softmax(s, 0) * mask.any(-1, keepdim=True)).to(scores.dtype)


@wrong("06-masked-softmax")
def msm_normalised_over_all(scores, mask):
    e = torch.exp(scores.float() - scores.float().amax(-1, keepdim=True))
    return (e * mask / e.sum(-1, keepdim=True)).to(scores.dtype)


# ------------------------------------------------------------------------------------------------ 07 multi-head
@correct("07-multihead")
def mha_reshape(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    q, k, v = [(x @ w).view(b, t, n_heads, d // n_heads).transpose(1, 2) for w in (W_q, W_k, W_v)]
    out = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // n_heads), -1) @ v
    return out.transpose(1, 2).reshape(b, t, d) @ W_o


@correct("07-multihead")
def mha_head_loop(x, W_q, W_k, W_v, W_o, n_heads):
    d_head = x.shape[-1] // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ W_q[:, cols], x @ W_k[:, cols], x @ W_v[:, cols]
        heads.append(torch.softmax(q @ k.mT / d_head ** 0.5, -1) @ v)
    return torch.cat(heads, -1) @ W_o


@correct("07-multihead")
def mha_einsum(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    q, k, v = [torch.einsum("btd,de->bte", x, w).unflatten(-1, (n_heads, -1)) for w in (W_q, W_k, W_v)]
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d // n_heads)
    out = torch.einsum("bhqk,bkhe->bqhe", torch.softmax(scores, -1), v)
    return torch.einsum("bthe,hef->btf", out, W_o.view(n_heads, d // n_heads, d))


@forbidden_torch("07-multihead")
def mha_einsum_sdpa(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    q, k, v = [torch.einsum("btd,de->bte", x, w).unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
               for w in (W_q, W_k, W_v)]
    out = F.scaled_dot_product_attention(q, k, v)
    return torch.einsum("bthe,hef->btf", out.permute(0, 2, 1, 3), W_o.view(n_heads, d // n_heads, d))


@forbidden_torch("07-multihead")
def mha_torch_module(x, W_q, W_k, W_v, W_o, n_heads):
    d = x.shape[-1]
    mha = nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T], 0))
        mha.out_proj.weight.copy_(W_o.T)
        return mha(x, x, x, need_weights=False)[0]


def _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, scale=None, merge=None, split=None, project=True, dim=-1):
    b, t, d = x.shape
    dh = d // n_heads
    if split == "interleaved":
        q, k, v = [(x @ w).view(b, t, dh, n_heads).permute(0, 3, 1, 2) for w in (W_q, W_k, W_v)]
    elif split == "direct":
        q, k, v = [(x @ w).reshape(b, n_heads, t, dh) for w in (W_q, W_k, W_v)]
    else:
        q, k, v = [(x @ w).view(b, t, n_heads, dh).transpose(1, 2) for w in (W_q, W_k, W_v)]
    out = torch.softmax(q @ k.transpose(-1, -2) * (dh ** -0.5 if scale is None else scale), dim) @ v
    if merge == "transpose23":
        out = out.transpose(2, 3).reshape(b, t, d)
    elif merge == "direct":
        out = out.reshape(b, t, d)
    else:
        out = out.transpose(1, 2).reshape(b, t, d)
    return out @ W_o if project else out


@wrong("07-multihead")
def mha_merge_transposed(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, merge="transpose23")


@wrong("07-multihead")
def mha_merge_without_transpose(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, merge="direct")


@wrong("07-multihead")
def mha_split_without_transpose(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, split="direct", merge="direct")


@wrong("07-multihead")
def mha_interleaved_heads(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, split="interleaved")


@wrong("07-multihead")
def mha_scale_by_model_width(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, scale=x.shape[-1] ** -0.5)


@wrong("07-multihead")
def mha_no_scale(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, scale=1.0)


@wrong("07-multihead")
def mha_no_output_projection(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, project=False)


@wrong("07-multihead")
def mha_softmax_over_queries(x, W_q, W_k, W_v, W_o, n_heads):
    return _mha_wrong(x, W_q, W_k, W_v, W_o, n_heads, dim=-2)


@wrong("07-multihead")
def mha_weights_transposed(x, W_q, W_k, W_v, W_o, n_heads):
    return mha_reshape(x, W_q.T, W_k.T, W_v.T, W_o.T, n_heads)


@wrong("07-multihead")
def mha_one_head(x, W_q, W_k, W_v, W_o, n_heads):
    return mha_reshape(x, W_q, W_k, W_v, W_o, 1)


# ------------------------------------------------------------------------------------------------ 08 layer norm
@correct("08-layer-norm")
def ln_manual(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * gamma + beta


@correct("08-layer-norm")
def ln_rsqrt_centred(x, gamma, beta, eps=1e-5):
    centred = x - x.sum(-1, keepdim=True) / x.shape[-1]
    return centred * torch.rsqrt(centred.pow(2).sum(-1, keepdim=True) / x.shape[-1] + eps) * gamma + beta


@forbidden_torch("08-layer-norm")
def ln_functional(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


@correct("08-layer-norm")
def ln_var_mean(x, gamma, beta, eps=1e-5):
    var, mean = torch.var_mean(x, -1, unbiased=False, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta


@forbidden_torch("08-layer-norm")
def ln_torch_module(x, gamma, beta, eps=1e-5):
    norm = nn.LayerNorm(x.shape[-1], eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


def _ln(x, gamma, beta, eps, unbiased=False, axis=-1, outside=False, center=True, shift=True):
    mu = x.mean(axis, keepdim=True) if center else 0
    var = x.var(axis, unbiased=unbiased, keepdim=True)
    y = (x - mu) / ((var.sqrt() + eps) if outside else (var + eps).sqrt())
    return y * gamma + (beta if shift else 0)


@wrong("08-layer-norm")
def ln_unbiased(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps, unbiased=True)


@wrong("08-layer-norm")
def ln_batch_axis(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps, axis=0)


@wrong("08-layer-norm")
def ln_eps_outside(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps, outside=True)


@wrong("08-layer-norm")
def ln_no_eps(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, 0.0)


@wrong("08-layer-norm")
def ln_default_eps(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, 1e-5)


@wrong("08-layer-norm")
def ln_gamma_beta_swapped(x, gamma, beta, eps=1e-5):
    return _ln(x, beta, gamma, eps)


@wrong("08-layer-norm")
def ln_not_centred(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps, center=False)


@wrong("08-layer-norm")
def ln_no_beta(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps, shift=False)


@wrong("08-layer-norm")
def ln_global_statistics(x, gamma, beta, eps=1e-5):
    return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * gamma + beta


@wrong("08-layer-norm")
def ln_eps_squared(x, gamma, beta, eps=1e-5):
    return _ln(x, gamma, beta, eps ** 2)


@wrong("08-layer-norm")
def ln_std_unbiased_eps_outside(x, gamma, beta, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * gamma + beta


# ------------------------------------------------------------------------------------------------ 09 parameters
@correct("09-block-params")
def params_formula(d_model, d_ff, n_heads, bias=True):
    b = int(bias)
    return 4 * (d_model * d_model + b * d_model) + 2 * d_model * d_ff + b * (d_ff + d_model) + 2 * (1 + b) * d_model


@correct("09-block-params")
def params_torch_layer(d_model, d_ff, n_heads, bias=True):
    layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, bias=bias)
    return sum(p.numel() for p in layer.parameters())


@correct("09-block-params")
def params_parts(d_model, d_ff, n_heads, bias=True):
    parts = [nn.MultiheadAttention(d_model, n_heads, bias=bias), nn.Linear(d_model, d_ff, bias=bias),
             nn.Linear(d_ff, d_model, bias=bias), nn.LayerNorm(d_model, bias=bias), nn.LayerNorm(d_model, bias=bias)]
    return sum(p.numel() for part in parts for p in part.parameters())


@wrong("09-block-params")
def params_per_head_full(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) + 3 * (n_heads - 1) * d_model * d_model


@wrong("09-block-params")
def params_no_norms(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) - 2 * (1 + int(bias)) * d_model


@wrong("09-block-params")
def params_always_bias(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, True)


@wrong("09-block-params")
def params_one_norm(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) - (1 + int(bias)) * d_model


@wrong("09-block-params")
def params_no_output_projection(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) - d_model * d_model - int(bias) * d_model


@wrong("09-block-params")
def params_norms_without_bias(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) - 2 * int(bias) * d_model


@wrong("09-block-params")
def params_norm_bias_kept(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) + 2 * (1 - int(bias)) * d_model


@wrong("09-block-params")
def params_ffn_once(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) - d_model * d_ff


@wrong("09-block-params")
def params_float(d_model, d_ff, n_heads, bias=True):
    return params_formula(d_model, d_ff, n_heads, bias) + 0.5


# ------------------------------------------------------------------------------------------------ 10 greedy decoding
@correct("10-greedy-decode")
def greedy_full_prefix(model, src, max_len):
    with torch.no_grad():
        memory = model.encode(src, src != 0)
        out = torch.ones(src.shape[0], 1, dtype=torch.long)
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            nxt = model.decode(out, memory, src_mask=src != 0)[:, -1].argmax(-1)
            nxt[finished] = 0
            finished |= nxt == 2
            out = torch.cat([out, nxt[:, None]], 1)
            if finished.all():
                break
    return out[:, 1:]


@correct("10-greedy-decode")
def greedy_forward_call(model, src, max_len):
    out = torch.ones(src.shape[0], 1, dtype=torch.long)
    alive = torch.ones(src.shape[0], dtype=torch.bool)
    with torch.no_grad():
        while out.shape[1] <= max_len and alive.any():
            nxt = torch.where(alive, model(src, out)[:, -1].argmax(-1), torch.zeros_like(alive, dtype=torch.long))
            alive &= nxt != 2
            out = torch.cat([out, nxt[:, None]], 1)
    return out[:, 1:]


@correct("10-greedy-decode")
def greedy_row_by_row(model, src, max_len):
    rows = []
    with torch.no_grad():
        for i in range(src.shape[0]):
            tokens = [1]
            while len(tokens) <= max_len:
                logits = model(src[i:i + 1], torch.tensor([tokens]))[0, -1]
                tokens.append(int(logits.argmax()))
                if tokens[-1] == 2:
                    break
            rows.append(tokens[1:])
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


def _greedy_wrong(model, src, max_len, *, pad=True, stop="all", keep_bos=False, start=1, steps=None, drop_eos=False,
                  fill=0, pick=torch.argmax):
    with torch.no_grad():
        out = torch.full((src.shape[0], 1), start, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len if steps is None else steps(max_len)):
            nxt = pick(model(src, out)[:, -1], -1)
            if pad:
                nxt = nxt.masked_fill(done, fill)
            done |= nxt == 2
            out = torch.cat([out, nxt[:, None]], 1)
            if stop == "all" and done.all() or stop == "any" and done.any():
                break
    out = out if keep_bos else out[:, 1:]
    return out.masked_fill(out == 2, 0) if drop_eos else out


@wrong("10-greedy-decode")
def greedy_no_padding_after_eos(model, src, max_len):
    return _greedy_wrong(model, src, max_len, pad=False)


@wrong("10-greedy-decode")
def greedy_stops_at_first_eos(model, src, max_len):
    return _greedy_wrong(model, src, max_len, stop="any")


@wrong("10-greedy-decode")
def greedy_always_max_len(model, src, max_len):
    return _greedy_wrong(model, src, max_len, stop="never")


@wrong("10-greedy-decode")
def greedy_keeps_bos(model, src, max_len):
    return _greedy_wrong(model, src, max_len, keep_bos=True)


@wrong("10-greedy-decode")
def greedy_pads_with_eos(model, src, max_len):
    return _greedy_wrong(model, src, max_len, fill=2)


@wrong("10-greedy-decode")
def greedy_one_step_short(model, src, max_len):
    return _greedy_wrong(model, src, max_len, steps=lambda n: n - 1)


@wrong("10-greedy-decode")
def greedy_starts_with_pad(model, src, max_len):
    return _greedy_wrong(model, src, max_len, start=0)


@wrong("10-greedy-decode")
def greedy_argmin(model, src, max_len):
    return _greedy_wrong(model, src, max_len, pick=torch.argmin)


# ------------------------------------------------------------------------------------------------ 11 next token
@correct("11-next-token")
def nt_topk_scatter(logits, temperature, k):
    scaled = logits / temperature
    values, index = scaled.topk(k, -1)
    return torch.zeros_like(scaled).scatter(-1, index, torch.softmax(values, -1))


@correct("11-next-token")
def nt_sort(logits, temperature, k):
    scaled = logits / temperature
    threshold = scaled.sort(-1, descending=True).values[:, k - 1:k]
    return torch.softmax(torch.where(scaled >= threshold, scaled, torch.tensor(-math.inf, dtype=scaled.dtype)), -1)


@correct("11-next-token")
def nt_probabilities_then_renormalise(logits, temperature, k):
    p = torch.softmax(logits / temperature, -1)
    kth = p.topk(k, -1).values[:, -1:]
    p = p * (p >= kth)
    return p / p.sum(-1, keepdim=True)


@correct("11-next-token")
def nt_power(logits, temperature, k):
    p = torch.softmax(logits.double(), -1) ** (1 / temperature)
    kth = p.topk(k, -1).values[:, -1:]
    p = torch.where(p >= kth, p, 0.0)
    return (p / p.sum(-1, keepdim=True)).to(logits.dtype)


def _nt(logits, temperature, k, fill=-math.inf, largest=True, dim=-1):
    kth = logits.topk(k, -1, largest=largest).values[:, -1:]
    keep = logits >= kth if largest else logits <= kth
    return torch.softmax(logits.masked_fill(~keep, fill) / temperature, dim)


@wrong("11-next-token")
def nt_multiply_temperature(logits, temperature, k):
    return _nt(logits * temperature ** 2, temperature, k)


@wrong("11-next-token")
def nt_no_renormalisation(logits, temperature, k):
    p = torch.softmax(logits / temperature, -1)
    return p * (p >= p.topk(k, -1).values[:, -1:])


@wrong("11-next-token")
def nt_k_plus_one(logits, temperature, k):
    return _nt(logits, temperature, min(k + 1, logits.shape[-1]))


@wrong("11-next-token")
def nt_k_minus_one(logits, temperature, k):
    return _nt(logits, temperature, max(k - 1, 1)) if k > 1 else _nt(logits, temperature, k) * 0.5


@wrong("11-next-token")
def nt_zero_fill(logits, temperature, k):
    return _nt(logits, temperature, k, fill=0.0)


@wrong("11-next-token")
def nt_smallest(logits, temperature, k):
    return _nt(logits, temperature, k, largest=False)


@wrong("11-next-token")
def nt_no_temperature(logits, temperature, k):
    return _nt(logits, 1.0, k)


@wrong("11-next-token")
def nt_softmax_over_batch(logits, temperature, k):
    return _nt(logits, temperature, k, dim=0)


@wrong("11-next-token")
def nt_temperature_on_probabilities(logits, temperature, k):
    p = _nt(logits, 1.0, k) / temperature
    return p


# ------------------------------------------------------------------------------------------------ 12 window mask
@correct("12-window-mask")
def window_abs(t, w):
    i = torch.arange(t)
    return (i[:, None] - i[None, :]).abs() <= w


@correct("12-window-mask")
def window_band(t, w):
    return torch.ones(t, t, dtype=torch.bool).triu(-w).tril(w)


@correct("12-window-mask")
def window_loops(t, w):
    return torch.tensor([[abs(i - j) <= w for j in range(t)] for i in range(t)], dtype=torch.bool).reshape(t, t)


@wrong("12-window-mask")
def window_strict(t, w):
    i = torch.arange(t)
    return (i[:, None] - i[None]).abs() < w


@wrong("12-window-mask")
def window_backwards_only(t, w):
    return torch.ones(t, t, dtype=torch.bool).tril().triu(-w)


@wrong("12-window-mask")
def window_no_abs(t, w):
    i = torch.arange(t)
    return i[:, None] - i[None, :] <= w


@wrong("12-window-mask")
def window_one_wider(t, w):
    return window_abs(t, w + 1)


@wrong("12-window-mask")
def window_int(t, w):
    return window_abs(t, w).int()


@wrong("12-window-mask")
def window_inverted(t, w):
    return ~window_abs(t, w)


@wrong("12-window-mask")
def window_forwards_only(t, w):
    return torch.ones(t, t, dtype=torch.bool).triu().tril(w)


# ------------------------------------------------------------------------------------------------ 13 SwiGLU
@correct("13-swiglu")
def swiglu_functional(x, W1, W3, W2):
    return (F.silu(x @ W1) * (x @ W3)) @ W2


@correct("13-swiglu")
def swiglu_sigmoid_form(x, W1, W3, W2):
    a = x @ W1
    return (a * torch.sigmoid(a) * (x @ W3)) @ W2


@correct("13-swiglu")
def swiglu_linear_layers(x, W1, W3, W2):
    w1, w3, w2 = (nn.Linear(*w.shape, bias=False).double() for w in (W1, W3, W2))
    with torch.no_grad():
        w1.weight.copy_(W1.T)
        w3.weight.copy_(W3.T)
        w2.weight.copy_(W2.T)
        return w2(F.silu(w1(x)) * w3(x))


@wrong("13-swiglu")
def swiglu_gate_swapped(x, W1, W3, W2):
    return ((x @ W1) * F.silu(x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_relu(x, W1, W3, W2):
    return (torch.relu(x @ W1) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_no_gate(x, W1, W3, W2):
    return F.silu(x @ W1) @ W2


@wrong("13-swiglu")
def swiglu_glu(x, W1, W3, W2):
    return (torch.sigmoid(x @ W1) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_gelu(x, W1, W3, W2):
    return (F.gelu(x @ W1) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_tanh(x, W1, W3, W2):
    return (torch.tanh(x @ W1) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_silu_after_product(x, W1, W3, W2):
    return F.silu((x @ W1) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_swish_beta_2(x, W1, W3, W2):
    a = x @ W1
    return (a * torch.sigmoid(2 * a) * (x @ W3)) @ W2


@wrong("13-swiglu")
def swiglu_sum_instead_of_product(x, W1, W3, W2):
    return (F.silu(x @ W1) + (x @ W3)) @ W2


# ------------------------------------------------------------------------------------------------ 13 RMS norm
@correct("13-rms-norm")
def rms_manual(x, gain, eps=1e-6):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


@correct("13-rms-norm")
def rms_rsqrt_sum(x, gain, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) / x.shape[-1] + eps) * gain


@forbidden_torch("13-rms-norm")
def rms_functional(x, gain, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), gain, eps)


@correct("13-rms-norm")
def rms_norm_over_sqrt_d(x, gain, eps=1e-6):
    d = x.shape[-1]
    return gain * x * torch.rsqrt(x.norm(dim=-1, keepdim=True) ** 2 / d + eps)


@wrong("13-rms-norm")
def rms_centred(x, gain, eps=1e-6):
    x = x - x.mean(-1, keepdim=True)
    return rms_manual(x, gain, eps)


@wrong("13-rms-norm")
def rms_eps_outside(x, gain, eps=1e-6):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gain


@wrong("13-rms-norm")
def rms_no_eps(x, gain, eps=1e-6):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * gain


@wrong("13-rms-norm")
def rms_norm_without_d(x, gain, eps=1e-6):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * gain


@wrong("13-rms-norm")
def rms_default_eps(x, gain, eps=1e-6):
    return rms_manual(x, gain, 1e-6)


@wrong("13-rms-norm")
def rms_no_gain(x, gain, eps=1e-6):
    return rms_manual(x, torch.ones_like(gain), eps)


@wrong("13-rms-norm")
def rms_std(x, gain, eps=1e-6):
    return x / (x.std(-1, keepdim=True) + eps) * gain


@wrong("13-rms-norm")
def rms_mean_abs(x, gain, eps=1e-6):
    return x / (x.abs().mean(-1, keepdim=True) + eps) * gain


@wrong("13-rms-norm")
def rms_eps_added_to_squares(x, gain, eps=1e-6):
    return x / torch.sqrt((x ** 2 + eps).sum(-1, keepdim=True) / x.shape[-1] + eps) * gain


# ------------------------------------------------------------------------------------------------ the tests
def _cases(registry):
    return [pytest.param(ex_id, fn, id=f"{ex_id}:{fn.__name__}") for ex_id, fns in registry.items() for fn in fns]


def verdicts(ex_id, fn):
    """(where, result) of the self-check and of the grader's judge on two grading seeds."""
    yield "self-check", exercises.check(ex_id, fn, verbose=False)
    for seed in GRADING_SEEDS:
        yield f"grading seed {seed}", references.run_in_process(ex_id, fn, seed)


def test_every_exercise_has_mutations():
    for ex_id in exercises.EXERCISES:
        assert len(WRONG.get(ex_id, [])) >= 6, f"{ex_id}: at least six wrong implementations"
        assert len(CORRECT.get(ex_id, [])) >= 3, f"{ex_id}: at least three independent correct implementations"
        hints = {key for key, _ in exercises.EXERCISES[ex_id].mistakes}
        assert len(WRONG[ex_id]) > len(hints), f"{ex_id}: more wrong implementations than the checker has hints"


@pytest.mark.parametrize("ex_id, fn", _cases(CORRECT))
def test_correct_implementation_passes(ex_id, fn):
    for where, result in verdicts(ex_id, fn):
        assert result.passed, f"{fn.__name__} ({where}): {result.message}"


@pytest.mark.parametrize("ex_id, fn", _cases(WRONG))
def test_wrong_implementation_fails(ex_id, fn):
    for where, result in verdicts(ex_id, fn):
        assert not result.passed, f"{fn.__name__} passes {ex_id} ({where}): the cases do not show this slip"
        assert "✗" in result.message, result.message


@pytest.mark.parametrize("exercise_id, fn", [(e, f) for e, fns in FORBIDDEN_TORCH.items() for f in fns],
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_torch_function_doing_the_exercise_gets_no_credit(exercise_id, fn):
    result = exercises.check(exercise_id, fn, verbose=False)
    reasons = dict(exercises.EXERCISES[exercise_id].forbidden_torch).values()
    assert not result.passed and "no credit" in result.message, result.message
    assert any(reason in result.message for reason in reasons), result.message
