"""Self-grading exercises: ``available()`` lists them, ``check(exercise_id, solution)`` grades one.

``check`` runs the student's function against the library's reference on many random cases (shapes, masks,
dtypes, edge cases). When the answer is wrong it compares it with the outputs of known mistakes (missing
``1/√d_k``, softmax over the wrong axis, mask inverted or applied after the softmax, heads merged in the wrong
order, causal mask off by one, …) and names the one it matches; otherwise it shows the first mismatching case.
It never raises: a wrong signature, a wrong shape, NaNs or an exception inside the solution are reported plainly.

Example::

    from transformer_lib import exercises
    exercises.available()                      # {'04-self-attention': 'Scaled dot-product self-attention…', …}
    result = exercises.check("06-causal-mask", my_causal_mask)
    result.passed                              # True / False
"""
from __future__ import annotations

import inspect
import math
import textwrap
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

__all__ = ["CheckResult", "Exercise", "available", "check", "starter_code", "describe", "EXERCISES"]


@dataclass
class CheckResult:
    """The verdict of :func:`check`: ``passed``, a readable ``message`` and the number of cases run."""

    exercise_id: str
    passed: bool
    message: str
    cases: int = 0

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


@dataclass
class Exercise:
    """One autograded exercise.

    Attributes:
        id: ``'NN-short-name'``.
        description: one line shown by :func:`available`.
        signature: the function signature students implement (also the starter's first line).
        contract: the docstring of the starter (what the function must do, with shapes).
        reference: the correct implementation (built on the library).
        cases: ``cases(generator)`` -> list of keyword-argument dicts.
        mistakes: ``(hint, wrong_implementation)`` pairs recognised in feedback.
        compare: ``compare(expected, got)`` -> None if equal, else a short reason.
    """

    id: str
    description: str
    signature: str
    contract: str
    reference: Callable
    cases: Callable[[torch.Generator], List[Dict[str, Any]]]
    mistakes: List[Tuple[str, Callable]] = field(default_factory=list)
    atol: float = 1e-5
    rtol: float = 1e-4


# ----------------------------------------------------------------------------------------------------------------
# Comparison helpers
# ----------------------------------------------------------------------------------------------------------------
def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _mismatch(expected, got, atol: float, rtol: float) -> Optional[str]:
    """None if ``got`` equals ``expected`` (tensors within tolerance, other values exactly), else why not."""
    exp_t, got_t = _as_tuple(expected), _as_tuple(got)
    if len(exp_t) != len(got_t):
        return f"expected {len(exp_t)} returned value(s), got {len(got_t)}"
    for i, (e, g) in enumerate(zip(exp_t, got_t)):
        where = f"returned value {i}: " if len(exp_t) > 1 else ""
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return f"{where}expected a torch.Tensor, got {type(g).__name__}"
            if tuple(g.shape) != tuple(e.shape):
                return f"{where}expected shape {tuple(e.shape)}, got {tuple(g.shape)}"
            if e.dtype == torch.bool:
                if g.dtype != torch.bool:
                    return f"{where}expected a bool tensor, got dtype {g.dtype}"
                if not torch.equal(e, g):
                    return f"{where}{int((e != g).sum())} of {e.numel()} entries differ"
                continue
            if g.is_floating_point() and torch.isnan(g).any() and not torch.isnan(e).any():
                return f"{where}the result contains NaN"
            if not torch.allclose(g.to(e.dtype), e, atol=atol, rtol=rtol, equal_nan=True):
                err = (g.to(e.dtype) - e).abs().max().item()
                return f"{where}values differ (max abs difference {err:.3g})"
        elif isinstance(e, float):
            if not isinstance(g, (int, float)) and not (isinstance(g, torch.Tensor) and g.numel() == 1):
                return f"{where}expected a number, got {type(g).__name__}"
            if not math.isclose(float(g), e, rel_tol=rtol, abs_tol=atol):
                return f"{where}expected {e:.6g}, got {float(g):.6g}"
        elif e != g:
            return f"{where}expected {e!r}, got {g!r}"
    return None


def _short(value, limit: int = 400) -> str:
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}:\n{value}"
    elif isinstance(value, (tuple, list)):
        text = "(" + ", ".join(_short(v, limit // 2) for v in value) + ")"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " …"


def _call(fn: Callable, kwargs: Dict[str, Any]):
    return fn(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()})


# ----------------------------------------------------------------------------------------------------------------
# Reference implementations and known mistakes, per chapter
# ----------------------------------------------------------------------------------------------------------------
def _rand(g, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=g, dtype=dtype)


# 01 — fit a power law L = c · x^(-alpha) by least squares in log-log space.
def _power_law_ref(x, y):
    lx, ly = torch.log(torch.as_tensor(x, dtype=torch.float64)), torch.log(torch.as_tensor(y, dtype=torch.float64))
    a = torch.stack([torch.ones_like(lx), lx], 1)
    sol = torch.linalg.lstsq(a, ly.unsqueeze(1)).solution.squeeze(1)
    return float(torch.exp(sol[0])), float(-sol[1])


def _power_law_cases(g):
    cases = []
    for _ in range(8):
        c, alpha = float(torch.rand(1, generator=g) * 10 + 0.5), float(torch.rand(1, generator=g) * 0.5 + 0.03)
        x = torch.logspace(3, 9, 7, dtype=torch.float64)
        noise = torch.exp(0.02 * _rand(g, 7))
        cases.append(dict(x=x, y=c * x ** (-alpha) * noise))
    return cases


def _power_law_wrong_sign(x, y):
    c, alpha = _power_law_ref(x, y)
    return c, -alpha


def _power_law_linear(x, y):
    x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    return float(y.mean() - slope * x.mean()), float(-slope)


# 02 — a vanilla RNN over a sequence.
def _rnn_ref(x, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_xh.T + h @ W_hh.T + b)
        states.append(h)
    return torch.stack(states, 1)


def _rnn_cases(g):
    cases = []
    for b, t, d_in, d_h in [(1, 1, 3, 4), (2, 5, 3, 4), (3, 7, 2, 6), (2, 12, 5, 5)]:
        cases.append(dict(x=_rand(g, b, t, d_in), W_xh=_rand(g, d_h, d_in) * 0.5, W_hh=_rand(g, d_h, d_h) * 0.5,
                          b=_rand(g, d_h) * 0.1))
    return cases


def _rnn_no_tanh(x, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    out = []
    for t in range(x.shape[1]):
        h = x[:, t] @ W_xh.T + h @ W_hh.T + b
        out.append(h)
    return torch.stack(out, 1)


def _rnn_transposed(x, W_xh, W_hh, b):
    return _rnn_ref(x, W_xh, W_hh.T, b)


def _rnn_no_recurrence(x, W_xh, W_hh, b):
    return torch.tanh(x @ W_xh.T + b)


# 03 — attention of one decoder state over the encoder states (chapter 3, dot-product score).
def _seq2seq_attn_ref(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h).masked_fill(~mask, torch.finfo(s.dtype).min)
    w = torch.softmax(scores, dim=-1) * mask.any(-1, keepdim=True)
    return torch.einsum("bs,bsd->bd", w, h), w


def _seq2seq_cases(g):
    cases = []
    for b, s_len, d in [(1, 1, 3), (2, 5, 4), (4, 6, 8), (3, 9, 5)]:
        lengths = torch.randint(1, s_len + 1, (b,), generator=g)
        mask = torch.arange(s_len)[None, :] < lengths[:, None]
        cases.append(dict(s=_rand(g, b, d), h=_rand(g, b, s_len, d), mask=mask))
    return cases


def _seq2seq_softmax_batch(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h).masked_fill(~mask, torch.finfo(s.dtype).min)
    w = torch.softmax(scores, dim=0)
    return torch.einsum("bs,bsd->bd", w, h), w


def _seq2seq_mask_inverted(s, h, mask):
    scores = torch.einsum("bd,bsd->bs", s, h).masked_fill(mask, torch.finfo(s.dtype).min)
    w = torch.softmax(scores, dim=-1)
    return torch.einsum("bs,bsd->bd", w, h), w


def _seq2seq_mask_inverted_zeroed(s, h, mask):
    return _seq2seq_attn_ref(s, h, ~mask)


def _seq2seq_mask_after(s, h, mask):
    w = torch.softmax(torch.einsum("bd,bsd->bs", s, h), dim=-1) * mask
    return torch.einsum("bs,bsd->bd", w, h), w


def _seq2seq_no_mask(s, h, mask):
    return _seq2seq_attn_ref(s, h, torch.ones_like(mask))


# 04 — scaled dot-product self-attention, one head.
def _self_attn_ref(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1)
    return w @ v


def _self_attn_cases(g):
    return [dict(x=_rand(g, b, t, d), W_q=_rand(g, d, dk), W_k=_rand(g, d, dk), W_v=_rand(g, d, dv))
            for b, t, d, dk, dv in [(1, 1, 4, 4, 4), (2, 5, 8, 4, 6), (3, 7, 6, 16, 5), (2, 4, 10, 9, 3)]]


def _self_attn_unscaled(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def _self_attn_wrong_axis(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-2) @ v


def _self_attn_transposed_scores(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v


# 05 — the sinusoidal position table.
def _sinusoidal_ref(n, d):
    from .positional import sinusoidal_table

    return sinusoidal_table(n, d).double()


def _sinusoidal_cases(g):
    return [dict(n=n, d=d) for n, d in [(1, 2), (5, 4), (16, 8), (50, 32), (7, 64)]]


def _sinusoidal_swapped(n, d):
    t = _sinusoidal_ref(n, d)
    return torch.stack([t[:, 1::2], t[:, 0::2]], -1).reshape(n, d)


def _sinusoidal_halves(n, d):
    from .positional import sinusoidal_table

    return sinusoidal_table(n, d, layout="halves").double()


def _sinusoidal_wrong_exponent(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    out = torch.empty(n, d, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = torch.sin(pos * inv), torch.cos(pos * inv)
    return out


# 06 — causal mask and masked softmax.
def _causal_ref(t):
    from .attention import causal_mask

    return causal_mask(t)


def _causal_cases(g):
    return [dict(t=t) for t in (1, 2, 3, 5, 8, 13)]


def _causal_strict(t):
    return torch.ones(t, t, dtype=torch.bool).tril(-1)


def _causal_transposed(t):
    return torch.ones(t, t, dtype=torch.bool).triu()


def _causal_inverted(t):
    return ~torch.ones(t, t, dtype=torch.bool).tril()


def _masked_softmax_ref(scores, mask):
    from .attention import masked_softmax

    return masked_softmax(scores, mask)


def _masked_softmax_cases(g):
    cases = []
    for shape, dtype in [((2, 5), torch.float32), ((3, 4, 6), torch.float32), ((2, 7), torch.float16),
                         ((4, 4), torch.float32)]:
        mask = torch.rand(*shape, generator=g) < 0.6
        mask[0] = False  # one fully masked row
        mask[-1, 0] = True
        cases.append(dict(scores=(torch.randn(*shape, generator=g) * 3).to(dtype), mask=mask))
    return cases


def _masked_softmax_inf(scores, mask):
    return torch.softmax(scores.float().masked_fill(~mask, float("-inf")), -1).to(scores.dtype)


def _masked_softmax_1e5(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e5).float(), -1).to(scores.dtype)


def _masked_softmax_after(scores, mask):
    return (torch.softmax(scores.float(), -1) * mask).to(scores.dtype)


def _masked_softmax_inverted(scores, mask):
    return _masked_softmax_ref(scores, ~mask)


# 07 — multi-head attention from explicit weights.
def _mha_ref(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    dh = d // n_heads

    def split(y):
        return y.view(b, t, n_heads, dh).transpose(1, 2)

    q, k, v = split(x @ W_q), split(x @ W_k), split(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), -1)
    return (w @ v).transpose(1, 2).reshape(b, t, d) @ W_o


def _mha_cases(g):
    return [dict(x=_rand(g, b, t, d), W_q=_rand(g, d, d) / d ** 0.5, W_k=_rand(g, d, d) / d ** 0.5,
                 W_v=_rand(g, d, d) / d ** 0.5, W_o=_rand(g, d, d) / d ** 0.5, n_heads=h)
            for b, t, d, h in [(1, 1, 4, 2), (2, 5, 8, 2), (2, 6, 12, 3), (3, 4, 16, 4)]]


def _mha_merge_wrong(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    dh = d // n_heads

    def split(y):
        return y.view(b, t, n_heads, dh).transpose(1, 2)

    q, k, v = split(x @ W_q), split(x @ W_k), split(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), -1)
    return (w @ v).permute(0, 2, 3, 1).reshape(b, t, d) @ W_o  # (B, T, d_head, H): feature-major


def _mha_split_without_transpose(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    dh = d // n_heads

    def split(y):
        return y.reshape(b, n_heads, t, dh)

    q, k, v = split(x @ W_q), split(x @ W_k), split(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), -1)
    return (w @ v).reshape(b, t, d) @ W_o


def _mha_scale_by_d_model(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    dh = d // n_heads

    def split(y):
        return y.view(b, t, n_heads, dh).transpose(1, 2)

    q, k, v = split(x @ W_q), split(x @ W_k), split(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1)
    return (w @ v).transpose(1, 2).reshape(b, t, d) @ W_o


def _mha_noscale(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    dh = d // n_heads

    def split(y):
        return y.view(b, t, n_heads, dh).transpose(1, 2)

    q, k, v = split(x @ W_q), split(x @ W_k), split(x @ W_v)
    w = torch.softmax(q @ k.transpose(-2, -1), -1)
    return (w @ v).transpose(1, 2).reshape(b, t, d) @ W_o


# 08 — layer normalisation.
def _layer_norm_ref(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def _layer_norm_cases(g):
    return [dict(x=_rand(g, *shape) * 3 + 1, gamma=_rand(g, shape[-1]), beta=_rand(g, shape[-1]), eps=1e-5)
            for shape in [(1, 2), (3, 4), (2, 5, 8), (4, 3, 16)]]


def _layer_norm_unbiased(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, unbiased=True, keepdim=True) + eps) * gamma + beta


def _layer_norm_batch_axis(x, gamma, beta, eps=1e-5):
    mu, var = x.mean(0, keepdim=True), x.var(0, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def _layer_norm_sum(x, gamma, beta, eps=1e-5):
    mu = x.sum(-1, keepdim=True)  # the slide that drops the 1/d
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


# 09 — parameters of one encoder block.
def _block_params_ref(d_model, d_ff, n_heads, bias=True):
    from .blocks import EncoderBlock

    block = EncoderBlock(d_model, n_heads, d_ff, bias=bias)
    return sum(p.numel() for p in block.parameters())


def _block_params_cases(g):
    return [dict(d_model=d, d_ff=f, n_heads=h, bias=b) for d, f, h, b in
            [(8, 32, 2, True), (64, 256, 4, True), (512, 2048, 8, True), (32, 128, 4, False), (12, 60, 3, True)]]


def _block_params_per_head(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) + (n_heads - 1) * 3 * d_model * d_model


def _block_params_no_norms(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, bias) - (4 if bias else 2) * d_model


def _block_params_no_bias(d_model, d_ff, n_heads, bias=True):
    return _block_params_ref(d_model, d_ff, n_heads, False) - (4 * d_model if not bias else 0)


# 10 — greedy decoding of a seq2seq model.
def _greedy_ref(model, src, max_len):
    from .generation import greedy_translate

    return greedy_translate(model, src, max_len=max_len)


def _greedy_cases(g):
    from .models import EncoderDecoder, EncoderDecoderConfig

    cases = []
    for seed, b in ((0, 1), (1, 3), (2, 4)):
        torch.manual_seed(seed)
        model = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=2,
                                                    n_layers=1, d_ff=32)).eval()
        with torch.no_grad():  # make EOS likely after a few steps so stopping matters
            model.lm_head.weight[2] *= 3
        src = torch.randint(4, 12, (b, 5), generator=g)
        cases.append(dict(model=model, src=src, max_len=8))
    return cases


# 11 — next-token distribution with temperature and top-k.
def _next_token_ref(logits, temperature, k):
    scaled = logits / temperature
    kth = torch.topk(scaled, k, dim=-1).values[..., -1:]
    return torch.softmax(scaled.masked_fill(scaled < kth, float("-inf")), dim=-1)


def _next_token_cases(g):
    return [dict(logits=_rand(g, b, v) * 2, temperature=t, k=k)
            for b, v, t, k in [(1, 5, 1.0, 5), (2, 10, 0.5, 3), (3, 20, 2.0, 1), (2, 8, 1.3, 4)]]


def _next_token_times_t(logits, temperature, k):
    return _next_token_ref(logits * temperature * temperature, temperature, k)


def _next_token_no_renorm(logits, temperature, k):
    p = torch.softmax(logits / temperature, -1)
    kth = torch.topk(p, k, -1).values[..., -1:]
    return p * (p >= kth)


def _next_token_k_plus_one(logits, temperature, k):
    return _next_token_ref(logits, temperature, min(k + 1, logits.shape[-1]))


# 12 — sliding-window (local) attention mask.
def _window_ref(t, w):
    i = torch.arange(t)
    return (i[:, None] - i[None, :]).abs() <= w


def _window_cases(g):
    return [dict(t=t, w=w) for t, w in [(1, 0), (4, 1), (6, 2), (9, 3), (5, 0), (7, 10)]]


def _window_strict(t, w):
    i = torch.arange(t)
    return (i[:, None] - i[None, :]).abs() < w


def _window_one_sided(t, w):
    i = torch.arange(t)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d <= w)


# 13 — SwiGLU feed-forward.
def _swiglu_ref(x, W1, W3, W2):
    return (F.silu(x @ W1) * (x @ W3)) @ W2


def _swiglu_cases(g):
    return [dict(x=_rand(g, b, t, d), W1=_rand(g, d, f), W3=_rand(g, d, f), W2=_rand(g, f, d))
            for b, t, d, f in [(1, 1, 2, 3), (2, 4, 8, 12), (3, 5, 6, 16)]]


def _swiglu_wrong_gate(x, W1, W3, W2):
    return ((x @ W1) * F.silu(x @ W3)) @ W2


def _swiglu_relu(x, W1, W3, W2):
    return (F.relu(x @ W1) * (x @ W3)) @ W2


def _swiglu_no_gate(x, W1, W3, W2):
    return F.silu(x @ W1) @ W2


EXERCISES: Dict[str, Exercise] = {e.id: e for e in [
    Exercise("01-power-law", "Fit a scaling law L = c·x^(-α) to measurements (least squares in log-log space)",
             "def fit_power_law(x, y):",
             "x, y: 1-D tensors of positive numbers. Return (c, alpha) as floats such that y ≈ c * x ** (-alpha),\n"
             "fitted by least squares on log y = log c - alpha log x.",
             _power_law_ref, _power_law_cases,
             [("the exponent has the wrong sign: y = c·x^(-α) falls when α > 0", _power_law_wrong_sign),
              ("the fit is done on x and y themselves; fit log y against log x", _power_law_linear)],
             atol=1e-6, rtol=1e-6),
    Exercise("02-rnn-forward", "Run a vanilla RNN h_t = tanh(W_xh x_t + W_hh h_{t-1} + b) over a sequence",
             "def rnn_forward(x, W_xh, W_hh, b):",
             "x: (B, T, d_in); W_xh: (d_h, d_in); W_hh: (d_h, d_h); b: (d_h,). Start from h_0 = 0 and return all\n"
             "hidden states h_1..h_T as a (B, T, d_h) tensor, h_t = tanh(x_t W_xhᵀ + h_{t-1} W_hhᵀ + b).",
             _rnn_ref, _rnn_cases,
             [("the tanh nonlinearity is missing", _rnn_no_tanh),
              ("W_hh is used transposed: multiply h_{t-1} by W_hhᵀ (h @ W_hh.T)", _rnn_transposed),
              ("the previous hidden state is not fed back (no recurrence)", _rnn_no_recurrence)]),
    Exercise("03-seq2seq-attention", "Dot-product attention of a decoder state over encoder states, with a mask",
             "def seq2seq_attention(s, h, mask):",
             "s: (B, d) decoder state; h: (B, S, d) encoder states; mask: (B, S) bool, True = real source token.\n"
             "Return (a, alpha): alpha = softmax over the real tokens of the scores s·h_i (B, S), zeros on padding;\n"
             "a = sum_i alpha_i h_i (B, d).",
             _seq2seq_attn_ref, _seq2seq_cases,
             [("the softmax runs over the batch axis; normalise over the source positions (dim=-1)",
               _seq2seq_softmax_batch),
              ("the mask is inverted: True marks real tokens, which must be kept", _seq2seq_mask_inverted),
              ("the mask is inverted: True marks real tokens, which must be kept", _seq2seq_mask_inverted_zeroed),
              ("the mask is applied after the softmax, so the weights no longer sum to 1; mask the scores first",
               _seq2seq_mask_after),
              ("the mask is ignored: padding positions receive attention", _seq2seq_no_mask)]),
    Exercise("04-self-attention", "Single-head scaled dot-product self-attention softmax(XW_q (XW_k)ᵀ/√d_k) XW_v",
             "def self_attention(x, W_q, W_k, W_v):",
             "x: (B, T, d); W_q, W_k: (d, d_k); W_v: (d, d_v). Return softmax(Q Kᵀ / sqrt(d_k)) V with Q = x W_q,\n"
             "K = x W_k, V = x W_v, the softmax over the keys (last axis); shape (B, T, d_v).",
             _self_attn_ref, _self_attn_cases,
             [("the 1/√d_k scaling is missing", _self_attn_unscaled),
              ("the softmax runs over the queries (dim=-2); it must run over the keys (dim=-1)", _self_attn_wrong_axis),
              ("the score matrix is transposed: row i must hold q_i·k_j for all j", _self_attn_transposed_scores)]),
    Exercise("05-sinusoidal", "The sinusoidal position table of Vaswani et al. (2017)",
             "def sinusoidal(n, d):",
             "Return the (n, d) float64 table PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).",
             _sinusoidal_ref, _sinusoidal_cases,
             [("sin and cos are swapped: even columns hold sines", _sinusoidal_swapped),
              ("the sines and cosines are in two halves; the paper interleaves them (even = sin, odd = cos)",
               _sinusoidal_halves),
              ("the exponent is i/d; it must be 2i/d (i indexes pairs of columns)", _sinusoidal_wrong_exponent)],
             atol=1e-5, rtol=1e-5),
    Exercise("06-causal-mask", "The causal (future) mask, True = may attend",
             "def causal_mask(t):",
             "Return a (t, t) bool tensor, True where query i may attend key j, i.e. j <= i.",
             _causal_ref, _causal_cases,
             [("off by one: a position must also see itself (j <= i, the diagonal is True)", _causal_strict),
              ("the mask is transposed: it lets each position see the future (use the lower triangle)",
               _causal_transposed),
              ("the convention is inverted: True must mean 'may attend'", _causal_inverted)]),
    Exercise("06-masked-softmax", "A masked softmax safe in float16 with fully masked rows",
             "def masked_softmax(scores, mask):",
             "scores: (..., S) float (float32 or float16); mask: same shape, bool, True = may attend. Return the\n"
             "softmax over the last axis restricted to allowed entries, in the dtype of scores; rows with no allowed\n"
             "entry must be all zeros (not NaN, not uniform).",
             _masked_softmax_ref, _masked_softmax_cases,
             [("fully masked rows give NaN: -inf everywhere makes 0/0; give those rows zeros", _masked_softmax_inf),
              ("-1e5 is not a safe mask value (it overflows to -inf in float16, and fully masked rows become "
               "uniform); use torch.finfo(dtype).min and zero fully masked rows", _masked_softmax_1e5),
              ("the mask is applied after the softmax, so rows no longer sum to 1", _masked_softmax_after),
              ("the mask is inverted: True means 'may attend'", _masked_softmax_inverted)],
             atol=2e-3, rtol=2e-3),
    Exercise("07-multihead", "Multi-head attention with explicit weights (split, attend, merge)",
             "def multihead_attention(x, W_q, W_k, W_v, W_o, n_heads):",
             "x: (B, T, D); W_q, W_k, W_v, W_o: (D, D); n_heads divides D. Head h uses features\n"
             "[h*D/H, (h+1)*D/H) of x W_q, x W_k, x W_v; each head computes softmax(q kᵀ/√(D/H)) v; the heads are\n"
             "concatenated in head order (B, T, D) and multiplied by W_o. No mask.",
             _mha_ref, _mha_cases,
             [("the heads are merged in the wrong order: transpose (B, H, T, d_h) back to (B, T, H, d_h) before "
               "reshaping", _mha_merge_wrong),
              ("the split reshapes to (B, H, T, d_h) directly; reshape to (B, T, H, d_h) then transpose",
               _mha_split_without_transpose),
              ("the scores are scaled by 1/√D; each head uses 1/√(D/H)", _mha_scale_by_d_model),
              ("the 1/√d_k scaling is missing", _mha_noscale)]),
    Exercise("08-layer-norm", "Layer normalisation over the features of each token",
             "def layer_norm(x, gamma, beta, eps=1e-5):",
             "x: (..., d); gamma, beta: (d,). Normalise each token over its d features: (x - mean)/sqrt(var + eps)\n"
             "* gamma + beta with mean = (1/d)Σx_j and the biased variance (1/d)Σ(x_j - mean)².",
             _layer_norm_ref, _layer_norm_cases,
             [("the variance is the unbiased one (1/(d-1)); layer norm uses 1/d", _layer_norm_unbiased),
              ("the statistics are taken over the batch axis (that is batch norm); use the last axis",
               _layer_norm_batch_axis),
              ("the mean is a sum: it needs the 1/d factor", _layer_norm_sum)]),
    Exercise("09-block-params", "Count the parameters of one Transformer encoder block",
             "def block_parameters(d_model, d_ff, n_heads, bias=True):",
             "Return the number of parameters of one encoder block: multi-head attention (W_q, W_k, W_v, W_o, each\n"
             "d_model × d_model, plus biases if bias), the feed-forward network (d_model → d_ff → d_model, plus\n"
             "biases if bias) and two layer norms (a gain each, plus a bias each if bias, as in tl.EncoderBlock).",
             _block_params_ref, _block_params_cases,
             [("the per-head matrices are counted as d_model × d_model each; together the heads' W_q/W_k/W_v are "
               "d_model × d_model", _block_params_per_head),
              ("the two layer norms (2 × 2·d_model parameters, 2 × d_model without biases) are missing",
               _block_params_no_norms),
              ("the biases are not handled as asked", _block_params_no_bias)]),
    Exercise("10-greedy-decode", "Greedy decoding of an encoder–decoder with stopping at EOS",
             "def greedy_decode(model, src, max_len):",
             "model: an EncoderDecoder; src: (B, S) source ids. Start each target with BOS (id 1), repeatedly append\n"
             "the argmax of the next-token logits, stop a row after it produces EOS (id 2) and pad the rest with PAD\n"
             "(id 0); produce at most max_len tokens. Return (B, L) ids without the BOS, L = the longest row\n"
             "(including its EOS).",
             _greedy_ref, _greedy_cases, []),
    Exercise("11-next-token", "Next-token distribution with temperature and top-k",
             "def next_token_probs(logits, temperature, k):",
             "logits: (B, V). Divide by temperature, keep the k largest logits of each row, and return the softmax\n"
             "over them (zeros elsewhere); shape (B, V), each row sums to 1.",
             _next_token_ref, _next_token_cases,
             [("the logits are multiplied by the temperature; divide by it", _next_token_times_t),
              ("the top-k probabilities are not renormalised: apply the top-k filter to the logits before the "
               "softmax", _next_token_no_renorm),
              ("off by one: keep exactly k tokens", _next_token_k_plus_one)]),
    Exercise("12-window-mask", "The sliding-window (local) attention mask",
             "def window_mask(t, w):",
             "Return a (t, t) bool tensor, True where |i - j| <= w (each query sees w neighbours on each side and\n"
             "itself).",
             _window_ref, _window_cases,
             [("off by one: |i - j| <= w includes the w-th neighbour", _window_strict),
              ("the window looks only backwards; it must be symmetric (|i - j| <= w)", _window_one_sided)]),
    Exercise("13-swiglu", "The SwiGLU feed-forward network (Shazeer, 2020)",
             "def swiglu(x, W1, W3, W2):",
             "x: (..., d); W1, W3: (d, f); W2: (f, d). Return (silu(x W1) * (x W3)) W2.",
             _swiglu_ref, _swiglu_cases,
             [("the gate is on the wrong branch: silu applies to x W1", _swiglu_wrong_gate),
              ("ReLU is used; SwiGLU gates with silu (x·sigmoid(x))", _swiglu_relu),
              ("the gate x W3 is missing", _swiglu_no_gate)]),
]}


# ----------------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------------
def available(chapter: Optional[int] = None) -> Dict[str, str]:
    """Exercise ids with one-line descriptions (all of them, or one chapter's)."""
    return {k: e.description for k, e in EXERCISES.items() if chapter is None or k.startswith(f"{chapter:02d}-")}


def describe(exercise_id: str) -> str:
    """The signature and contract of an exercise."""
    ex = _get(exercise_id)
    return f"{ex.signature}\n{textwrap.indent(ex.contract, '    ')}"


def starter_code(exercise_id: str) -> str:
    """Source of the starter cell: the signature, the contract as docstring, ``raise NotImplementedError``."""
    ex = _get(exercise_id)
    doc = textwrap.indent(ex.contract, "    ")
    return f'{ex.signature}\n    """{doc.strip()}\n    """\n    raise NotImplementedError("Exercise {ex.id}: write your solution here")\n'


def _get(exercise_id: str) -> Exercise:
    if exercise_id not in EXERCISES:
        raise KeyError(f"unknown exercise id {exercise_id!r}; valid ids: {', '.join(EXERCISES)}")
    return EXERCISES[exercise_id]


def _params(fn: Callable) -> Optional[List[str]]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def check(exercise_id: str, solution: Callable, seed: int = 0, verbose: bool = True) -> CheckResult:
    """Grade ``solution`` for ``exercise_id``; print and return the verdict. Never raises.

    Args:
        exercise_id: an id from :func:`available`.
        solution: the student's function (see :func:`describe` for its contract).
        seed: seed of the random cases.
        verbose: print the message.

    Returns:
        a :class:`CheckResult` (truthy when passed).
    """
    result = _check(exercise_id, solution, seed)
    if verbose:
        print(result.message)
    return result


def _check(exercise_id: str, solution: Callable, seed: int) -> CheckResult:
    if exercise_id not in EXERCISES:
        return CheckResult(str(exercise_id), False,
                           f"✗ Unknown exercise id {exercise_id!r}. Valid ids:\n"
                           + "\n".join(f"  {k}: {d}" for k, d in available().items()))
    ex = EXERCISES[exercise_id]
    if not callable(solution):
        return CheckResult(ex.id, False, f"✗ {ex.id}: expected a function, got {type(solution).__name__}.")
    expected_params = [p.strip().split("=")[0] for p in ex.signature[ex.signature.index("(") + 1:
                                                                     ex.signature.rindex(")")].split(",")]
    got_params = _params(solution)
    required = [p for p in expected_params if "=" not in p]
    if got_params is not None and not any(
            p.kind in (p.VAR_KEYWORD,) for p in inspect.signature(solution).parameters.values()):
        missing = [p for p in required if p not in got_params]
        if missing:
            return CheckResult(ex.id, False,
                               f"✗ {ex.id}: wrong signature. Expected {ex.signature[4:-1]}, got "
                               f"{solution.__name__}{inspect.signature(solution)} (missing {', '.join(missing)}).")
    g = torch.Generator().manual_seed(seed)
    cases = ex.cases(g)
    for n, case in enumerate(cases, 1):
        expected = _call(ex.reference, case)
        try:
            got = _call(solution, case)
        except NotImplementedError:
            return CheckResult(ex.id, False, f"… {ex.id}: not implemented yet — replace "
                                             "`raise NotImplementedError` with your code, then run this cell again.",
                               n - 1)
        except Exception as err:  # noqa: BLE001 - any error in student code is reported, never raised
            tb = traceback.format_exception_only(type(err), err)[-1].strip()
            return CheckResult(ex.id, False, f"✗ {ex.id}: your function raised {tb}\n  on case {n}: "
                                             f"{_short(case)}", n - 1)
        reason = _mismatch(expected, got, ex.atol, ex.rtol)
        if reason is None:
            continue
        for hint, wrong in ex.mistakes:
            try:
                if _mismatch(_call(wrong, case), got, ex.atol, ex.rtol) is None:
                    return CheckResult(ex.id, False, f"✗ {ex.id}: likely mistake — {hint}.\n  (case {n}: {reason})",
                                       n - 1)
            except Exception:  # noqa: BLE001 - a mistake model that cannot run on this case is skipped
                continue
        return CheckResult(ex.id, False,
                           f"✗ {ex.id}: case {n} of {len(cases)} fails — {reason}.\n  inputs: {_short(case)}\n"
                           f"  expected: {_short(expected)}\n  got: {_short(got)}", n - 1)
    return CheckResult(ex.id, True, f"✓ {ex.id}: all {len(cases)} cases pass.", len(cases))
