"""The autograder itself: every exercise accepts its reference and rejects common mistakes with the right hint.

The wrong implementations below are written here, independently of the grader's own mistake models, the way a
student would write them.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import exercises


def test_available_lists_every_chapter():
    ids = exercises.available()
    chapters = {int(k[:2]) for k in ids}
    assert chapters == set(range(1, 14))
    assert all(isinstance(v, str) and v for v in ids.values())
    assert set(exercises.available(chapter=6)) == {"06-causal-mask", "06-masked-softmax"}


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_reference_is_accepted(exercise_id):
    result = exercises.check(exercise_id, exercises.EXERCISES[exercise_id].reference, verbose=False)
    assert result.passed, result.message
    assert result.cases >= 3 and "✓" in result.message


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_starter_is_rejected_kindly(exercise_id):
    namespace = {}
    exec(exercises.starter_code(exercise_id), namespace)
    fn = next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))
    result = exercises.check(exercise_id, fn, verbose=False)
    assert not result.passed
    assert "not implemented yet" in result.message


def test_check_prints_and_returns(capsys):
    result = exercises.check("06-causal-mask", lambda t: torch.ones(t, t, dtype=torch.bool).tril())
    assert result and "✓" in capsys.readouterr().out


# ---------------------------------------------------------------- common mistakes, written as a student would
def attention_no_scale(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return F.softmax(q @ k.transpose(1, 2), dim=-1) @ v


def attention_wrong_axis(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return F.softmax(q @ k.transpose(1, 2) / k.shape[-1] ** 0.5, dim=1) @ v


def seq2seq_mask_inverted(s, h, mask):
    e = (h @ s.unsqueeze(-1)).squeeze(-1).masked_fill(mask, -1e9)
    a = torch.softmax(e, -1)
    return (a.unsqueeze(-1) * h).sum(1), a


def seq2seq_mask_after_softmax(s, h, mask):
    a = torch.softmax((h @ s.unsqueeze(-1)).squeeze(-1), -1) * mask
    return (a.unsqueeze(-1) * h).sum(1), a


def causal_off_by_one(t):
    return torch.tril(torch.ones(t, t), diagonal=-1).bool()


def causal_upper(t):
    return torch.triu(torch.ones(t, t)).bool()


def masked_softmax_minus_inf(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")).float(), -1).to(scores.dtype)


def mha_merge_wrong(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    q, k, v = [(x @ w).view(b, t, n_heads, -1).transpose(1, 2) for w in (W_q, W_k, W_v)]
    out = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // n_heads), -1) @ v  # (B, H, T, dh)
    return out.transpose(2, 3).reshape(b, t, d) @ W_o  # wrong: merges (dh, T) instead of (T, H·dh)


def mha_merge_feature_major(x, W_q, W_k, W_v, W_o, n_heads):
    b, t, d = x.shape
    q, k, v = [(x @ w).view(b, t, n_heads, -1).transpose(1, 2) for w in (W_q, W_k, W_v)]
    out = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // n_heads), -1) @ v
    return out.permute(0, 2, 3, 1).reshape(b, t, d) @ W_o


def layer_norm_unbiased(x, gamma, beta, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) ** 2 + eps).sqrt() * gamma + beta


def sinusoidal_swapped(n, d):
    p = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    out = torch.zeros(n, d, dtype=torch.float64)
    out[:, 0::2] = torch.cos(p / 10000 ** (i / d))
    out[:, 1::2] = torch.sin(p / 10000 ** (i / d))
    return out


def rnn_no_tanh(x, W_xh, W_hh, b):
    h, out = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype), []
    for t in range(x.shape[1]):
        h = x[:, t] @ W_xh.T + h @ W_hh.T + b
        out.append(h)
    return torch.stack(out, 1)


def next_token_multiplied(logits, temperature, k):
    scaled = logits * temperature
    kth = scaled.topk(k, -1).values[:, -1:]
    return torch.softmax(scaled.masked_fill(scaled < kth, -float("inf")), -1)


def window_strict(t, w):
    i = torch.arange(t)
    return (i[:, None] - i[None]).abs() < w


def swiglu_relu(x, W1, W3, W2):
    return (torch.relu(x @ W1) * (x @ W3)) @ W2


def power_law_positive_exponent(x, y):
    slope, intercept = torch.linalg.lstsq(torch.stack([torch.log(x), torch.ones_like(x)], 1),
                                          torch.log(y)[:, None]).solution[:, 0]
    return float(torch.exp(intercept)), float(slope)


def block_params_no_norms(d_model, d_ff, n_heads, bias=True):
    b = 1 if bias else 0
    return 4 * d_model * d_model + 4 * d_model * b + 2 * d_model * d_ff + (d_ff + d_model) * b


def greedy_keeps_bos(model, src, max_len):
    from transformer_lib.generation import greedy_translate

    out = greedy_translate(model, src, max_len=max_len)
    return torch.cat([torch.ones(out.shape[0], 1, dtype=out.dtype), out], 1)


MISTAKES = [
    ("04-self-attention", attention_no_scale, "1/√d_k scaling is missing"),
    ("04-self-attention", attention_wrong_axis, "softmax runs over the queries"),
    ("03-seq2seq-attention", seq2seq_mask_inverted, "mask is inverted"),
    ("03-seq2seq-attention", seq2seq_mask_after_softmax, "mask is applied after the softmax"),
    ("06-causal-mask", causal_off_by_one, "off by one"),
    ("06-causal-mask", causal_upper, "transposed"),
    ("06-masked-softmax", masked_softmax_minus_inf, "fully masked rows give NaN"),
    ("07-multihead", mha_merge_feature_major, "heads are merged in the wrong order"),
    ("08-layer-norm", layer_norm_unbiased, "unbiased"),
    ("05-sinusoidal", sinusoidal_swapped, "sin and cos are swapped"),
    ("02-rnn-forward", rnn_no_tanh, "tanh nonlinearity is missing"),
    ("11-next-token", next_token_multiplied, "multiplied by the temperature"),
    ("12-window-mask", window_strict, "off by one"),
    ("13-swiglu", swiglu_relu, "ReLU is used"),
    ("01-power-law", power_law_positive_exponent, "wrong sign"),
    ("09-block-params", block_params_no_norms, "layer norms"),
]


@pytest.mark.parametrize("exercise_id, wrong, hint", MISTAKES, ids=[f"{m[0]}:{m[1].__name__}" for m in MISTAKES])
def test_common_mistake_rejected_with_hint(exercise_id, wrong, hint):
    result = exercises.check(exercise_id, wrong, verbose=False)
    assert not result.passed
    assert hint in result.message, result.message


def test_unrecognised_mistake_shows_first_mismatching_case():
    result = exercises.check("07-multihead", mha_merge_wrong, verbose=False)
    assert not result.passed
    assert "inputs:" in result.message and "expected:" in result.message and "got:" in result.message


def test_greedy_mistake_shows_shape():
    result = exercises.check("10-greedy-decode", greedy_keeps_bos, verbose=False)
    assert not result.passed and "expected shape" in result.message


# ---------------------------------------------------------------- bad input never crashes
def test_unknown_id_lists_valid_ids():
    result = exercises.check("04-selfattention", attention_no_scale, verbose=False)
    assert not result.passed and "Unknown exercise id" in result.message and "04-self-attention" in result.message


def test_wrong_signature_reported():
    result = exercises.check("04-self-attention", lambda x, W: x, verbose=False)
    assert not result.passed and "wrong signature" in result.message


def test_wrong_return_shape_reported():
    result = exercises.check("06-causal-mask", lambda t: torch.ones(t, t + 1, dtype=torch.bool), verbose=False)
    assert not result.passed and "expected shape" in result.message


def test_nan_reported():
    result = exercises.check("13-swiglu", lambda x, W1, W3, W2: torch.full((*x.shape[:-1], W2.shape[1]), float("nan"),
                                                                         dtype=x.dtype), verbose=False)
    assert not result.passed and "NaN" in result.message


def test_exception_reported():
    def broken(t):
        return [][t]

    result = exercises.check("06-causal-mask", broken, verbose=False)
    assert not result.passed and "IndexError" in result.message


def test_not_callable_reported():
    result = exercises.check("06-causal-mask", 42, verbose=False)
    assert not result.passed and "expected a function" in result.message
