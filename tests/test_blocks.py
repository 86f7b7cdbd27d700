import pytest
import torch
import torch.nn.functional as F

from transformer_lib.attention import padding_mask
from transformer_lib.blocks import DecoderBlock, EncoderBlock, FeedForward, LayerNorm, RMSNorm, make_norm


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu", "swiglu"])
def test_feed_forward_shapes_and_formula(activation):
    ff = FeedForward(8, 32, activation)
    x = torch.randn(2, 3, 8)
    out = ff(x)
    assert out.shape == x.shape
    if activation == "relu":
        torch.testing.assert_close(out, ff.w2(F.relu(ff.w1(x))))
    if activation == "gelu_tanh":
        torch.testing.assert_close(out, ff.w2(F.gelu(ff.w1(x), approximate="tanh")))
    if activation == "swiglu":
        torch.testing.assert_close(out, ff.w2(F.silu(ff.w1(x)) * ff.w3(x)))


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 16)
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(ff(x)[0, 2], ff(x[:, 2:3])[0, 0])


def test_layer_norm_statistics_per_token():
    ln = LayerNorm(16)
    out = ln(torch.randn(3, 5, 16) * 7 + 3)
    torch.testing.assert_close(out.mean(-1), torch.zeros(3, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(3, 5), atol=1e-3, rtol=0)
    torch.testing.assert_close(ln(torch.ones(1, 16) * 2)[0], torch.zeros(16))


def test_layer_norm_equals_torch():
    x = torch.randn(4, 10)
    torch.testing.assert_close(LayerNorm(10)(x), torch.nn.LayerNorm(10)(x))


def test_rms_norm_formula():
    x = torch.randn(2, 6)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(RMSNorm(6)(x), want)


def test_make_norm_none_is_identity():
    x = torch.randn(2, 3)
    assert make_norm(None, 3)(x) is x


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_block_pre_and_post_norm(norm_first):
    block = EncoderBlock(16, 4, 32, norm_first=norm_first).eval()
    x = torch.randn(2, 5, 16)
    h = block.attn_sub.norm(x) if norm_first else x
    a = block.attn(h)
    y = x + a if norm_first else block.attn_sub.norm(x + a)
    h = block.ff_sub.norm(y) if norm_first else y
    want = y + block.ff(h) if norm_first else block.ff_sub.norm(y + block.ff(h))
    torch.testing.assert_close(block(x), want)


def test_block_without_residual_norm_or_ffn():
    block = EncoderBlock(16, 4, d_ff=None, norm=None, residual=False).eval()
    x = torch.randn(1, 4, 16)
    torch.testing.assert_close(block(x), block.attn(x))
    assert block.ff is None


def test_encoder_block_padding_invariance():
    block = EncoderBlock(16, 4, 32).eval()
    x = torch.randn(1, 3, 16)
    padded = torch.cat([x, torch.randn(1, 2, 16)], 1)
    mask = padding_mask(lengths=torch.tensor([3]), max_len=5)
    torch.testing.assert_close(block(padded, mask=mask)[:, :3], block(x), atol=1e-5, rtol=1e-4)


def test_decoder_block_with_and_without_memory():
    block = DecoderBlock(16, 4, 32).eval()
    x, mem = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    out, (sw, cw) = block(x, memory=mem, return_weights=True)
    assert out.shape == (2, 4, 16) and sw.shape == (2, 4, 4, 4) and cw.shape == (2, 4, 4, 6)
    assert (sw[..., 0, 1:] == 0).all()  # causal self-attention
    gpt = DecoderBlock(16, 4, 32, cross_attention=False)
    assert gpt(x).shape == (2, 4, 16)
    with pytest.raises(ValueError, match="cross_attention=False"):
        gpt(x, memory=mem)


def test_block_backward():
    block = DecoderBlock(16, 4, 32, dropout=0.1)
    x = torch.randn(2, 4, 16, requires_grad=True)
    block(x, memory=torch.randn(2, 3, 16)).sum().backward()
    assert all(p.grad is not None for p in block.parameters())


def test_bad_inputs():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(8, 16, "tanh")
    with pytest.raises(ValueError, match="norm must be one of"):
        make_norm("batch", 8)
    with pytest.raises(ValueError, match="x must have last dimension 8, got 4"):
        LayerNorm(8)(torch.randn(2, 4))
    with pytest.raises(ValueError, match="d_ff must be a positive int, got -3"):
        FeedForward(8, -3)
