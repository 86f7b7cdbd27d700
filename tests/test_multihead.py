import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.attention import causal_mask, padding_mask
from transformer_lib.multihead import LayerCache, MultiHeadAttention, merge_heads, split_heads
from transformer_lib.positional import ALiBi, RelativePosition, Rotary


def layer(d=16, h=4, **kw):
    return MultiHeadAttention(d, h, **kw).eval()


def test_shapes_self_and_cross():
    mha = layer()
    x, ctx = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    assert mha(x).shape == (2, 5, 16)
    out, w = mha(x, context=ctx, return_weights=True)
    assert out.shape == (2, 5, 16) and w.shape == (2, 4, 5, 7)


def test_split_merge_heads_roundtrip_and_layout():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[0, 1, 2], x[0, 2, 2:4])  # head 1 holds features 2..3
    torch.testing.assert_close(merge_heads(heads), x)


def test_fast_equals_reference_path():
    mha = layer()
    x = torch.randn(3, 6, 16)
    mask = padding_mask(lengths=torch.tensor([6, 3, 1]), max_len=6)
    fast = mha(x, mask=mask, causal=True)
    ref, _ = mha(x, mask=mask, causal=True, return_weights=True)
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=1e-5)


def test_equals_torch_multihead_attention():
    torch_mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    mha = layer()
    mha.in_proj.weight.data.copy_(torch_mha.in_proj_weight)
    mha.in_proj.bias.data.copy_(torch_mha.in_proj_bias)
    mha.out_proj.load_state_dict(torch_mha.out_proj.state_dict())
    x = torch.randn(2, 5, 16)
    want, want_w = torch_mha(x, x, x, attn_mask=~causal_mask(5), average_attn_weights=False)
    got, got_w = mha(x, causal=True, return_weights=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_w, want_w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", [None, "alibi", "relative", "rotary"])
def test_kv_cache_equals_full_sequence(position):
    pos = {None: None, "alibi": ALiBi(4), "relative": RelativePosition(4, 3), "rotary": Rotary(4)}[position]
    mha = layer(position=pos)
    x = torch.randn(2, 7, 16)
    full = mha(x, causal=True)
    cache = LayerCache()
    steps = [mha(x[:, :3], causal=True, cache=cache)] + [mha(x[:, i:i + 1], causal=True, cache=cache)
                                                         for i in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7


def test_static_cross_attention_cache_computed_once():
    mha = layer()
    x, ctx = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    cache = LayerCache(static=True)
    a = mha(x[:, :1], context=ctx, cache=cache)
    k_first = cache.k
    b = mha(x[:, 1:], context=ctx, cache=cache)
    assert cache.k is k_first
    torch.testing.assert_close(torch.cat([a, b], 1), mha(x, context=ctx))


@settings(max_examples=20, deadline=None)
@given(t=st.integers(2, 8), seed=st.integers(0, 10_000))
def test_property_permutation_equivariance_without_positions(t, seed):
    g = torch.Generator().manual_seed(seed)
    mha = layer()
    x = torch.randn(1, t, 16, generator=g)
    perm = torch.randperm(t, generator=g)
    torch.testing.assert_close(mha(x[:, perm]), mha(x)[:, perm], atol=1e-5, rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(t=st.integers(2, 8), i=st.integers(0, 7), seed=st.integers(0, 10_000))
def test_property_causal_output_independent_of_future(t, i, seed):
    i = i % t
    g = torch.Generator().manual_seed(seed)
    mha = layer(position=Rotary(4))
    x = torch.randn(1, t, 16, generator=g)
    y = x.clone()
    y[:, i + 1:] = torch.randn(1, t - i - 1, 16, generator=g)
    torch.testing.assert_close(mha(x, causal=True)[:, : i + 1], mha(y, causal=True)[:, : i + 1], atol=1e-5,
                               rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), extra=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_property_padding_does_not_change_real_tokens(n, extra, seed):
    g = torch.Generator().manual_seed(seed)
    mha = layer()
    x = torch.randn(1, n, 16, generator=g)
    padded = torch.cat([x, torch.randn(1, extra, 16, generator=g)], 1)
    mask = padding_mask(lengths=torch.tensor([n]), max_len=n + extra)
    torch.testing.assert_close(mha(padded, mask=mask)[:, :n], mha(x), atol=1e-5, rtol=1e-4)


def test_backward():
    mha = MultiHeadAttention(16, 4, dropout=0.1)
    x = torch.randn(2, 5, 16, requires_grad=True)
    mha(x, causal=True).pow(2).mean().backward()
    assert x.grad is not None and all(p.grad is not None for p in mha.parameters())


# ---------------------------------------------------------------- bad input
def test_d_model_not_divisible():
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads, got d_model=10, n_heads=4"):
        MultiHeadAttention(10, 4)


def test_wrong_feature_size():
    with pytest.raises(ValueError, match="x must have last dimension 16, got 8"):
        layer()(torch.randn(2, 3, 8))


def test_wrong_rank():
    with pytest.raises(ValueError, match="x must have 3 dimensions, got 2"):
        layer()(torch.randn(3, 16))


def test_integer_input():
    with pytest.raises(TypeError, match="x must have a float dtype"):
        layer()(torch.ones(2, 3, 16, dtype=torch.long))


def test_mask_wrong_dtype():
    with pytest.raises(TypeError, match="mask must have dtype torch.bool"):
        layer()(torch.randn(2, 3, 16), mask=torch.ones(3, 3))


def test_mask_wrong_shape():
    with pytest.raises(ValueError, match="does not broadcast to"):
        layer()(torch.randn(2, 3, 16), mask=torch.ones(2, 1, 4, 4, dtype=torch.bool))


def test_context_batch_mismatch():
    with pytest.raises(ValueError, match="context must have the batch size of x"):
        layer()(torch.randn(2, 3, 16), context=torch.randn(3, 4, 16))


def test_empty_batch():
    with pytest.raises(ValueError, match="x is empty"):
        layer()(torch.randn(0, 3, 16))


def test_bad_dropout():
    with pytest.raises(ValueError, match=r"dropout must be a float in \[0, 1\), got 1.5"):
        MultiHeadAttention(16, 4, dropout=1.5)


def test_bad_cache_type():
    with pytest.raises(TypeError, match="cache must be a LayerCache"):
        layer()(torch.randn(1, 2, 16), cache={})


def test_meta_device_mismatch_is_reported():
    mha = layer()
    x = torch.randn(1, 2, 16, device="meta")
    with pytest.raises(ValueError, match="x is on meta but the layer's weights are on cpu"):
        mha(x)


@pytest.mark.gpu
def test_fast_equals_reference_on_cuda(cuda):
    mha = layer().to(cuda)
    x = torch.randn(2, 9, 16, device=cuda)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        fast = mha(x, causal=True)
        ref, _ = mha(x, causal=True, return_weights=True)
    torch.testing.assert_close(fast.float(), ref.float(), atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("return_weights", [False, True])
def test_mask_is_validated_once_per_layer_call(monkeypatch, return_weights):
    """The layer checks its mask at its own boundary; attention below it runs unchecked."""
    import transformer_lib.attention as attention
    import transformer_lib.multihead as multihead

    checks, check_mask = [], attention.check_mask

    def counting_check_mask(*args, **kwargs):
        checks.append(args[0])
        return check_mask(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("the layer's inputs were validated a second time below its boundary")

    monkeypatch.setattr(multihead, "check_mask", counting_check_mask)
    for name in ("_check_qkv", "check_mask", "masked_softmax", "combine_masks"):
        monkeypatch.setattr(attention, name, refuse)
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = padding_mask(lengths=torch.tensor([5, 3]), max_len=5)
    out = mha(x, mask=mask, causal=True, return_weights=return_weights)
    assert len(checks) == 1 and checks[0] is mask
    if return_weights:
        out, weights = out
        assert torch.all(weights[1, :, :, 3:] == 0)
    assert out.shape == (2, 5, 16) and torch.isfinite(out).all()


def test_mask_on_another_device_names_the_mask():
    mha = MultiHeadAttention(8, 2)
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match="mask"):
        mha(torch.randn(1, 3, 8), mask=mask)
