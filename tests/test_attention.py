import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.attention import (AdditiveScore, BilinearScore, DotProductScore, LowRankBilinearScore,
                                       SCORE_NAMES, attention_reference, causal_mask, combine_masks, make_score,
                                       masked_softmax, padding_mask, scaled_dot_product_attention)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def qkv(b=2, h=3, t=5, s=7, d=8, dtype=torch.float32):
    return (torch.randn(b, h, t, d, dtype=dtype), torch.randn(b, h, s, d, dtype=dtype),
            torch.randn(b, h, s, d, dtype=dtype))


# ---------------------------------------------------------------- masks
def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    assert torch.equal(m, torch.tril(torch.ones(4, 4, dtype=torch.bool)))


def test_causal_mask_with_cache_offset():
    m = causal_mask(2, 5)  # the last two of five positions
    assert torch.equal(m, torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))


def test_padding_mask_from_lengths_and_real_agree():
    lengths = torch.tensor([3, 1])
    real = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    a = padding_mask(lengths=lengths, max_len=4)
    b = padding_mask(real=real)
    assert a.shape == (2, 1, 1, 4)
    assert torch.equal(a, b)


def test_combine_masks_broadcasts_and_ignores_none():
    c = combine_masks(None, causal_mask(3), padding_mask(lengths=torch.tensor([2, 3])))
    assert c.shape == (2, 1, 3, 3)
    assert not c[0, 0, 2, 2] and c[1, 0, 2, 2]
    assert combine_masks(None, None) is None


# ---------------------------------------------------------------- scores
@pytest.mark.parametrize("name", SCORE_NAMES)
def test_score_shapes(name):
    d = 6
    score = make_score(name, d, d)
    out = score(torch.randn(2, 3, d), torch.randn(2, 5, d))
    assert out.shape == (2, 3, 5)


def test_dot_score_equals_matmul():
    s, h = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    torch.testing.assert_close(DotProductScore()(s, h), torch.einsum("btd,bsd->bts", s, h))


def test_bilinear_score_formula_and_params():
    score = BilinearScore(3, 5)
    s, h = torch.randn(1, 2, 3), torch.randn(1, 4, 5)
    torch.testing.assert_close(score(s, h)[0, 1, 2], s[0, 1] @ score.weight @ h[0, 2])
    assert sum(p.numel() for p in score.parameters()) == 15


def test_lowrank_score_equals_bilinear_with_product_matrix():
    score = LowRankBilinearScore(8, 6, rank=2)
    s, h = torch.randn(1, 3, 8), torch.randn(1, 4, 6)
    w = score.U.weight.t() @ score.V.weight  # (8, 6) of rank 2
    torch.testing.assert_close(score(s, h), s @ w @ h.transpose(1, 2))
    assert torch.linalg.matrix_rank(w) == 2
    assert sum(p.numel() for p in score.parameters()) == 2 * (8 + 6)


def test_additive_score_formula():
    score = AdditiveScore(3, 4, d_hidden=5)
    s, h = torch.randn(1, 2, 3), torch.randn(1, 6, 4)
    want = score.v(torch.tanh(score.W1(h[0, 4]) + score.W2(s[0, 1])))
    torch.testing.assert_close(score(s, h)[0, 1, 4], want.squeeze())


# ---------------------------------------------------------------- softmax attention
def test_reference_matches_formula():
    q, k, v = qkv()
    out, w = attention_reference(q, k, v)
    want_w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(w, want_w)
    torch.testing.assert_close(out, want_w @ v)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_path_equals_reference_float32(causal, with_mask, with_bias):
    q, k, v = qkv(t=7, s=7)
    mask = padding_mask(lengths=torch.tensor([7, 4]), max_len=7) if with_mask else None
    bias = torch.randn(1, 3, 7, 7) if with_bias else None
    fast = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, causal=causal)
    ref, _ = attention_reference(q, k, v, mask=mask, bias=bias, causal=causal)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("t", [7, 3], ids=["t=s", "t<s"])
def test_fast_path_honours_a_custom_scale(causal, with_mask, with_bias, t):
    """A non-default ``scale`` reaches the fused kernel on every branch (no mask, mask, bias, causal with a
    cache offset) and gives the reference path's ``softmax(q kᵀ · scale + bias) v``."""
    q, k, v = qkv(t=t, s=7)
    mask = padding_mask(lengths=torch.tensor([7, 4]), max_len=7) if with_mask else None
    bias = torch.randn(1, 3, t, 7) if with_bias else None
    kw = dict(mask=mask, bias=bias, causal=causal)
    fast = scaled_dot_product_attention(q, k, v, scale=0.9, **kw)
    ref, w = attention_reference(q, k, v, scale=0.9, **kw)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    scores = (q @ k.transpose(-1, -2)) * 0.9 + (0 if bias is None else bias)
    allowed = combine_masks(mask, causal_mask(t, 7) if causal else None)
    torch.testing.assert_close(w, masked_softmax(scores, allowed))
    default = scaled_dot_product_attention(q, k, v, **kw)  # 1/√8 ≈ 0.35: the scale does change the output
    assert (fast - default).abs().max() > 1e-2


def test_fast_path_equals_reference_bfloat16_loosely():
    q, k, v = qkv(dtype=torch.bfloat16)
    mask = padding_mask(lengths=torch.tensor([7, 3]), max_len=7)
    fast = scaled_dot_product_attention(q, k, v, mask=mask)
    ref, _ = attention_reference(q, k, v, mask=mask)
    torch.testing.assert_close(fast.float(), ref.float(), atol=3e-2, rtol=3e-2)


def test_causal_with_cache_offset_equals_full_rows():
    q, k, v = qkv(t=6, s=6)
    full = scaled_dot_product_attention(q, k, v, causal=True)
    last2 = scaled_dot_product_attention(q[:, :, 4:], k, v, causal=True)
    torch.testing.assert_close(last2, full[:, :, 4:])


def test_fast_path_is_used_without_weights(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    q, k, v = qkv()
    scaled_dot_product_attention(q, k, v)
    assert calls == [1]
    scaled_dot_product_attention(q, k, v, return_weights=True)
    assert calls == [1]  # the reference path does not call the fused kernel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weights", [False, True])
def test_fully_masked_rows_are_zero_not_nan(dtype, weights):
    q, k, v = qkv(dtype=dtype)
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    mask[0, 0, 2] = False  # query 2 of batch 0 may attend nothing
    mask[1] = False  # batch 1 attends nothing at all
    out = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=weights)
    out = out[0] if weights else out
    assert torch.isfinite(out).all()
    assert (out[0, :, 2] == 0).all() and (out[1] == 0).all()
    assert (out[0, :, 1] != 0).any()


def test_masked_softmax_uses_dtype_min_not_minus_1e5():
    scores = torch.zeros(1, 3, dtype=torch.float16)
    assert torch.isinf(torch.tensor(-1e5, dtype=torch.float16))  # the lecture's constant overflows in float16
    w = masked_softmax(scores, torch.tensor([[True, False, True]]))
    torch.testing.assert_close(w.float(), torch.tensor([[0.5, 0.0, 0.5]]))


def test_weights_sum_to_one_over_allowed_keys():
    q, k, v = qkv()
    mask = padding_mask(lengths=torch.tensor([7, 2]), max_len=7)
    _, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))
    assert (w[1, :, :, 2:] == 0).all()


def test_reference_backward():
    q, k, v = (t.requires_grad_() for t in qkv())
    out, _ = attention_reference(q, k, v, causal=True)
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 6), s=st.integers(1, 6), seed=st.integers(0, 1000))
def test_property_fully_masked_rows_finite(t, s, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, n, 4, generator=g) for n in (t, s, s))
    mask = torch.rand(1, 1, t, s, generator=g) < 0.4
    out = scaled_dot_product_attention(q, k, v, mask=mask)
    ref, _ = attention_reference(q, k, v, mask=mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- bad input
def test_bad_mask_dtype():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="mask must have dtype torch.bool"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 7))


def test_bad_mask_shape():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"mask of shape \(5, 6\) does not broadcast"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 6, dtype=torch.bool))


def test_bad_rank():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="q must have 4 dimensions, got 3"):
        scaled_dot_product_attention(q[0], k, v)


def test_mismatched_key_size():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="k must have shape"):
        scaled_dot_product_attention(q, k[..., :4], v)


def test_dot_score_needs_equal_sizes():
    with pytest.raises(ValueError, match="d_q == d_k"):
        make_score("dot", 4, 5)


def test_unknown_score_name():
    with pytest.raises(ValueError, match="score name must be one of"):
        make_score("cosine", 4, 4)


def test_padding_mask_needs_one_source():
    with pytest.raises(ValueError, match="exactly one of lengths= or real="):
        padding_mask()


def test_causal_mask_bad_sizes():
    with pytest.raises(ValueError, match="must be >= t"):
        causal_mask(5, 3)


def test_empty_batch_rejected():
    q, k, v = qkv(b=0)
    with pytest.raises(ValueError, match="q is empty"):
        scaled_dot_product_attention(q, k, v)


def test_score_wrong_feature_size():
    with pytest.raises(ValueError, match="query must have last dimension 3"):
        BilinearScore(3, 4)(torch.randn(1, 2, 5), torch.randn(1, 2, 4))


def test_real_tokens_is_the_one_definition_of_padding():
    from transformer_lib.attention import real_tokens

    ids = torch.tensor([[5, 7, 0, 0], [3, 0, 4, 0]])
    assert torch.equal(real_tokens(ids, 0), torch.tensor([[True, True, False, False], [True, False, True, False]]))
    assert real_tokens(ids, None) is None
