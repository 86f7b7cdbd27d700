import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.blocks import AttentionWeights
from transformer_lib.models import (DecoderLM, DecoderLMConfig, Encoder, EncoderConfig, EncoderDecoder,
                                    EncoderDecoderConfig, count_parameters)
from transformer_lib.positional import sinusoidal_table

POSITIONS = ["sinusoidal", "learned", "alibi", "relative", "rotary", "none"]
SMALL = dict(d_model=32, n_heads=4, n_layers=2, d_ff=64)


def lm(**kw):
    return DecoderLM(DecoderLMConfig(vocab_size=50, **{**SMALL, **kw})).eval()


def seq2seq(**kw):
    return EncoderDecoder(EncoderDecoderConfig(src_vocab_size=30, tgt_vocab_size=40, **{**SMALL, **kw})).eval()


@pytest.mark.parametrize("position", POSITIONS)
def test_shapes_every_model(position):
    ids = torch.randint(1, 30, (2, 7))
    assert Encoder(EncoderConfig(vocab_size=30, position=position, **SMALL))(ids).shape == (2, 7, 32)
    assert lm(position=position)(ids).shape == (2, 7, 50)
    assert seq2seq(position=position)(ids, torch.randint(1, 40, (2, 5))).shape == (2, 5, 40)


@pytest.mark.parametrize("position", POSITIONS)
def test_lm_kv_cache_equals_no_cache(position):
    model = lm(position=position)
    ids = torch.randint(0, 50, (2, 9))
    full = model(ids)
    cache = model.new_cache()
    steps = [model(ids[:, :4], cache=cache)] + [model(ids[:, i:i + 1], cache=cache) for i in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [True, False])
def test_seq2seq_incremental_decode_equals_forward(norm_first):
    model = seq2seq(norm_first=norm_first)
    src = torch.randint(4, 30, (2, 6))
    src[1, 4:] = 0
    tgt = torch.randint(4, 40, (2, 5))
    full = model(src, tgt)
    memory = model.encode(src)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, i:i + 1], memory, src_mask=src != 0, cache=cache) for i in range(5)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [True, False])
def test_lm_forward_equals_the_stack_spelled_out(norm_first):
    """Embedding (+ sinusoidal positions), the causal blocks in order, the final norm only after a pre-norm
    stack (a post-norm block already ends with a norm), then the tied output projection."""
    model = lm(norm_first=norm_first)
    with torch.no_grad():  # norms away from their identity initialisation: a misplaced norm then shows
        for p in model.parameters():
            p.normal_(0, 0.3)
    ids = torch.randint(0, 50, (2, 7))
    x = model.embed.token(ids) + sinusoidal_table(7, 32)
    for block in model.blocks:
        x = block(x, causal=True)
    if norm_first:
        x = F.layer_norm(x, (32,), model.norm.weight, model.norm.bias, 1e-5)
    torch.testing.assert_close(model(ids), x @ model.embed.token.weight.T)


def test_source_padding_does_not_change_outputs():
    model = seq2seq()
    src = torch.randint(4, 30, (1, 5))
    tgt = torch.randint(4, 40, (1, 4))
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-5, rtol=1e-4)


@settings(max_examples=15, deadline=None)
@given(t=st.integers(2, 10), i=st.integers(0, 9), seed=st.integers(0, 1000))
def test_property_lm_position_i_ignores_later_tokens(t, i, seed):
    i = i % t
    g = torch.Generator().manual_seed(seed)
    model = lm(position="rotary")
    ids = torch.randint(0, 50, (1, t), generator=g)
    other = ids.clone()
    other[:, i + 1:] = torch.randint(0, 50, (1, t - i - 1), generator=g)
    torch.testing.assert_close(model(ids)[:, : i + 1], model(other)[:, : i + 1], atol=1e-5, rtol=1e-4)


@settings(max_examples=10, deadline=None)
@given(t=st.integers(2, 7), seed=st.integers(0, 1000))
def test_property_encoder_without_positions_is_permutation_equivariant(t, seed):
    g = torch.Generator().manual_seed(seed)
    enc = Encoder(EncoderConfig(vocab_size=30, position="none", **SMALL)).eval()
    ids = torch.randint(1, 30, (1, t), generator=g)
    perm = torch.randperm(t, generator=g)
    torch.testing.assert_close(enc(ids[:, perm]), enc(ids)[:, perm], atol=1e-5, rtol=1e-4)


def test_weight_tying_and_parameter_counts():
    tied, untied = lm(), lm(tie_weights=False)
    assert tied.lm_head.weight is tied.embed.token.weight
    c_tied, c_untied = count_parameters(tied), count_parameters(untied)
    assert c_untied["total"] - c_tied["total"] == 50 * 32
    assert c_tied["total"] == sum(p.numel() for p in tied.parameters())
    assert c_tied["attention"] == 2 * (32 * 96 + 96 + 32 * 32 + 32)
    assert c_tied["feed_forward"] == 2 * (32 * 64 + 64 + 64 * 32 + 32)
    c = count_parameters(seq2seq())
    assert c["cross_attention"] == c["attention"] // 2  # one cross per decoder layer, one self per layer
    s2s_tied, s2s_untied = seq2seq(), seq2seq(tie_weights=False)
    assert s2s_tied.lm_head.weight is s2s_tied.tgt_embed.token.weight
    assert s2s_untied.lm_head.weight is not s2s_untied.tgt_embed.token.weight
    assert count_parameters(s2s_untied)["total"] - count_parameters(s2s_tied)["total"] == 40 * 32
    shared = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=40, tgt_vocab_size=40, share_embeddings=True,
                                                 **SMALL))
    assert shared.src_embed.token.weight is shared.tgt_embed.token.weight is shared.lm_head.weight


def test_backward_through_every_model():
    for model in (lm(dropout=0.1), seq2seq(dropout=0.1, position="relative")):
        model.train()
        ids = torch.randint(1, 30, (2, 6))
        out = model(ids) if isinstance(model, DecoderLM) else model(ids, ids)
        out.logsumexp(-1).mean().backward()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_short_training_lowers_loss():
    torch.manual_seed(0)
    model = lm(n_layers=1).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.arange(50).repeat(4).view(1, -1)[:, :65]  # a deterministic cycle: learnable
    losses = []
    for _ in range(60):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 50), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_encoder_return_weights_per_layer():
    enc = Encoder(EncoderConfig(vocab_size=30, **SMALL)).eval()
    ids = torch.randint(1, 30, (2, 5))
    ids[0, 3:] = 0
    h, ws = enc(ids, return_weights=True)
    assert isinstance(ws, AttentionWeights) and ws.cross_attn == () and ws.encoder == ()
    assert len(ws.self_attn) == 2 and ws.self_attn[0].shape == (2, 4, 5, 5)
    assert (ws.self_attn[0][0, :, :, 3:] == 0).all()
    torch.testing.assert_close(h, enc(ids))  # asking for the weights changes nothing else


def test_every_model_returns_one_weights_type():
    """Language model, encoder-decoder (forward, encode, decode): AttentionWeights, one tensor per layer and kind,
    each equal to what the block that computed it returns on its own."""
    src, tgt = torch.randint(1, 30, (2, 6)), torch.randint(1, 40, (2, 4))
    src[1, 4:] = 0
    model = lm(n_layers=3)
    _, w = model(tgt, return_weights=True)
    assert [t.shape for t in w.self_attn] == [(2, 4, 4, 4)] * 3 and w.cross_attn == () == w.encoder
    x = model.embed(tgt)
    for block, layer_w in zip(model.blocks, w.self_attn):  # the layers in order, not three copies of one
        x, block_w = block(x, return_weights=True)
        torch.testing.assert_close(block_w.self_attn[0], layer_w)

    s2s = seq2seq()
    _, w = s2s(src, tgt, return_weights=True)
    assert [len(w.encoder), len(w.self_attn), len(w.cross_attn)] == [2, 2, 2]
    assert w.encoder[0].shape == (2, 4, 6, 6) and w.self_attn[0].shape == (2, 4, 4, 4)
    assert w.cross_attn[0].shape == (2, 4, 4, 6) and (w.cross_attn[1][1, ..., 4:] == 0).all()  # padding
    memory, enc_w = s2s.encode(src, return_weights=True)
    _, dec_w = s2s.decode(tgt, memory, src=src, return_weights=True)
    assert enc_w.encoder == () and dec_w.encoder == ()
    for ours, theirs in zip(w.encoder + w.self_attn + w.cross_attn,
                            enc_w.self_attn + dec_w.self_attn + dec_w.cross_attn):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    summed = AttentionWeights(encoder=enc_w.self_attn) + dec_w
    for kind in ("encoder", "self_attn", "cross_attn"):
        assert all(torch.equal(a, b) for a, b in zip(getattr(summed, kind), getattr(w, kind), strict=True))
    assert w.cpu().cross_attn[0].device.type == "cpu"


def test_attention_weights_bad_input():
    with pytest.raises(TypeError, match=r"AttentionWeights.self_attn must be a tuple of tensors .* got Tensor"):
        AttentionWeights(self_attn=torch.ones(2, 2))
    with pytest.raises(TypeError, match="cross_attn must be a tuple of tensors"):
        AttentionWeights(cross_attn=(torch.ones(1), "layer 2"))
    assert AttentionWeights(self_attn=[torch.ones(1)]).self_attn[0].shape == (1,)  # a list is kept as a tuple


# ---------------------------------------------------------------- bad input
def test_unknown_config_option():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_head'"):
        DecoderLMConfig(vocab_size=10, n_head=4)
    with pytest.raises(ValueError, match=r"unknown config option\(s\) \['n_head'\]"):
        DecoderLMConfig.from_dict({"vocab_size": 10, "n_head": 4})


def test_config_validation():
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got 0"):
        DecoderLMConfig()
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        DecoderLMConfig(vocab_size=10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="position must be one of"):
        DecoderLMConfig(vocab_size=10, position="absolute")
    with pytest.raises(ValueError, match="share_embeddings needs src_vocab_size == tgt_vocab_size"):
        EncoderDecoderConfig(src_vocab_size=10, tgt_vocab_size=12, share_embeddings=True)


def test_token_id_outside_vocabulary():
    with pytest.raises(ValueError, match=r"ids contains token id 50, outside the vocabulary \[0, 49\]"):
        lm()(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match="src contains token id -1"):
        seq2seq()(torch.tensor([[1, -1]]), torch.tensor([[1]]))


def test_float_ids_rejected():
    with pytest.raises(TypeError, match="ids must have a int dtype"):
        lm()(torch.zeros(1, 3))


def test_sequence_longer_than_learned_table():
    model = lm(position="learned", max_len=8)
    with pytest.raises(ValueError, match="sequence length 9 .* exceeds the maximum length 8"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_ids_on_other_device_than_model():
    with pytest.raises(ValueError, match="ids is on meta but the model is on cpu"):
        lm()(torch.zeros(1, 3, dtype=torch.long, device="meta"))


def test_src_mask_shape_mismatch():
    with pytest.raises(ValueError, match="src_mask of shape .* must match"):
        seq2seq()(torch.ones(2, 4, dtype=torch.long), torch.ones(2, 3, dtype=torch.long),
                  src_mask=torch.ones(2, 5, dtype=torch.bool))


def test_bad_cache_type():
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        lm()(torch.ones(1, 2, dtype=torch.long), cache=[])


def test_empty_batch():
    with pytest.raises(ValueError, match="ids is empty"):
        lm()(torch.zeros(0, 3, dtype=torch.long))


@pytest.mark.parametrize("position", ["rotary", "learned"])
def test_models_trace_without_graph_breaks(position):
    """torch.compile sees each model as one graph: no check reads tensor values back while it traces."""
    src, tgt = torch.randint(0, 30, (2, 7)), torch.randint(0, 40, (2, 5))
    torch._dynamo.reset()
    for model, args, kwargs in [(lm(position=position), (torch.randint(0, 50, (2, 9)),), {}),
                                (seq2seq(position=position), (src, tgt), {"src_mask": src != 0})]:
        report = torch._dynamo.explain(model)(*args, **kwargs)
        assert report.graph_break_count == 0, [b.reason for b in report.break_reasons]
    torch._dynamo.reset()


def test_encoder_decoder_is_built_from_an_encoder():
    """The source side of EncoderDecoder is a tl.Encoder: same weights, same memory, same padding rule."""
    from transformer_lib.models import Encoder, EncoderConfig, EncoderDecoder, EncoderDecoderConfig

    shared = dict(d_model=32, n_heads=4, n_layers=2, d_ff=64, position="rotary", norm_first=False)
    torch.manual_seed(0)
    model = EncoderDecoder(EncoderDecoderConfig(src_vocab_size=30, tgt_vocab_size=20, n_dec_layers=1, **shared))
    assert isinstance(model.encoder, Encoder) and model.encoder.embed is model.src_embed
    encoder = Encoder(EncoderConfig(vocab_size=30, **shared))
    encoder.load_state_dict(model.encoder.state_dict())
    src = torch.randint(4, 30, (2, 6))
    src[1, 3:] = 0
    torch.testing.assert_close(model.encode(src), encoder(src))
    with pytest.raises(ValueError, match="src"):
        model.encode(torch.full((1, 3), 99))


def test_encoder_decoder_loads_state_dicts_of_the_flat_layout():
    """State dicts saved before the source side became an Encoder (encoder_blocks.*, encoder_norm.*) still load,
    also inside a parent module; e.g. the stored cases of the notebook self-check."""
    from torch import nn

    from transformer_lib.models import EncoderDecoder, EncoderDecoderConfig

    cfg = EncoderDecoderConfig(src_vocab_size=30, tgt_vocab_size=20, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    torch.manual_seed(0)
    saved = EncoderDecoder(cfg)
    flat = {}
    for key, value in saved.state_dict().items():
        if key.startswith("encoder.embed."):
            continue
        flat[key.replace("encoder.blocks.", "encoder_blocks.").replace("encoder.norm.", "encoder_norm.")] = value
    assert any(k.startswith("encoder_blocks.") for k in flat)
    loaded = EncoderDecoder(cfg)
    loaded.load_state_dict(flat)
    src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 20, (2, 4))
    torch.testing.assert_close(loaded(src, tgt), saved(src, tgt))
    parent = nn.ModuleDict({"model": EncoderDecoder(cfg)})
    parent.load_state_dict({"model." + k: v for k, v in flat.items()})
    torch.testing.assert_close(parent["model"](src, tgt), saved(src, tgt))


def test_init_weights_schemes():
    import math

    from transformer_lib.models import init_weights

    cfg = DecoderLMConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16)
    torch.manual_seed(0)
    model = DecoderLM(cfg)
    assert init_weights(model, "xavier") is model
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    for m in linear:
        bound = math.sqrt(6 / (m.in_features + m.out_features))
        assert m.weight.abs().max() <= bound and m.weight.abs().max() > 0.8 * bound
        assert m.bias is None or torch.count_nonzero(m.bias) == 0
    norms = [m for m in model.modules() if "Norm" in type(m).__name__]
    assert norms and all(torch.all(n.weight == 1) for n in norms)
    init_weights(model, "normal")
    assert all(abs(m.weight.std().item() - 0.02) < 0.005 for m in linear)
    with pytest.raises(ValueError, match=r"scheme must be one of \['normal', 'xavier'\], got 'he'"):
        init_weights(model, "he")
    with pytest.raises(TypeError, match="module must be a torch.nn.Module, got int"):
        init_weights(3)
