import pytest
import torch
import torch.nn.functional as F

from transformer_lib.attention import padding_mask
from transformer_lib.blocks import (AttentionWeights, DecoderBlock, EncoderBlock, FeedForward, LayerNorm, RMSNorm,
                                    make_norm)


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


def test_feed_forward_dropout_is_after_the_activation():
    """``W₂ dropout(act(W₁ x))`` in training mode: the hidden units are dropped, not the output features."""
    ff = FeedForward(8, 32, dropout=0.5).train()
    x = torch.randn(2, 3, 8)
    torch.manual_seed(3)
    got = ff(x)
    torch.manual_seed(3)
    torch.testing.assert_close(got, ff.w2(F.dropout(F.relu(ff.w1(x)), 0.5)))


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


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_layer_norm_equals_torch(eps):
    """A large ε shows where it goes: inside the square root, ``(x - μ)/√(σ² + ε)``, not ``(x - μ)/(σ + ε)``."""
    x = torch.randn(4, 10)
    torch.testing.assert_close(LayerNorm(10, eps=eps)(x), torch.nn.LayerNorm(10, eps=eps)(x))
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(LayerNorm(10, eps=eps)(x), (x - mu) / torch.sqrt(var + eps))


@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_formula(eps):
    x = torch.randn(2, 6)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    torch.testing.assert_close(RMSNorm(6, eps=eps)(x), want)


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


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_block_dropout_is_on_the_sublayer_output_only(norm_first):
    """Training mode, p = 0.3: each sub-layer is ``x + dropout(f(norm(x)))`` (pre-norm) or
    ``norm(x + dropout(f(x)))`` (post-norm), spelled out by hand with the same random stream."""
    block = EncoderBlock(16, 4, 32, dropout=0.3, norm_first=norm_first).train()
    x = torch.randn(2, 5, 16)
    torch.manual_seed(1)
    got = block(x)
    torch.manual_seed(1)  # the block draws in this order: attention weights, attention output, FFN hidden, FFN out
    if norm_first:
        y = x + F.dropout(block.attn(block.attn_sub.norm(x)), 0.3)
        want = y + F.dropout(block.ff(block.ff_sub.norm(y)), 0.3)
    else:
        y = block.attn_sub.norm(x + F.dropout(block.attn(x), 0.3))
        want = block.ff_sub.norm(y + F.dropout(block.ff(y), 0.3))
    torch.testing.assert_close(got, want)
    torch.manual_seed(1)
    assert not torch.allclose(block(x), block.eval()(x))  # dropout is active in training mode


@pytest.mark.parametrize("norm_first", [True, False])
def test_dropout_never_touches_the_residual_stream(norm_first):
    """With every sub-layer's output projection zeroed, each sub-layer adds exactly 0: whatever dropout does to
    the sub-layer outputs, the training-mode block equals the evaluation-mode one. Dropout applied after the
    residual sum (``dropout(x + f(x))``) would zero and rescale the residual stream itself."""
    block = DecoderBlock(16, 4, 32, dropout=0.5, norm_first=norm_first)
    with torch.no_grad():
        for linear in (block.self_attn.out_proj, block.cross_attn.out_proj, block.ff.w2):
            linear.weight.zero_()
            linear.bias.zero_()
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    torch.testing.assert_close(block.train()(x, memory=mem), block.eval()(x, memory=mem))


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
    out, w = block(x, memory=mem, return_weights=True)
    assert isinstance(w, AttentionWeights) and w.encoder == ()
    (sw,), (cw,) = w.self_attn, w.cross_attn
    assert out.shape == (2, 4, 16) and sw.shape == (2, 4, 4, 4) and cw.shape == (2, 4, 4, 6)
    assert (sw[..., 0, 1:] == 0).all()  # causal self-attention
    gpt = DecoderBlock(16, 4, 32, cross_attention=False)
    assert gpt(x).shape == (2, 4, 16)
    _, w = gpt(x, return_weights=True)
    assert len(w.self_attn) == 1 and w.cross_attn == ()
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
