"""transformer_lib.interop: converted modules compute what PyTorch's and Hugging Face's modules compute.

Every comparison randomises *all* trainable weights first (norm gains and biases included: at their default
initialisation of 1 and 0 a swapped norm would go unnoticed) and runs both sides in evaluation mode, float32.
No test touches the network: Hugging Face models are built from small random configs.
"""
import socket
import sys

import pytest
import torch
from torch import nn

from transformer_lib.attention import causal_mask
from transformer_lib.blocks import DecoderBlock, EncoderBlock
from transformer_lib.interop import (SUPPORTED_HF, SUPPORTED_TORCH, from_hf, from_torch, hub_available,
                                     load_pretrained_gpt2, load_pretrained_marian, mask_from_torch, to_torch,
                                     weights_from_hf)
from transformer_lib.models import DecoderLM, EncoderDecoder
from transformer_lib.multihead import MultiHeadAttention
from transformer_lib.positional import Rotary

D, H, FF, V = 32, 4, 64, 100
LAYER_ATOL, MODEL_ATOL = 1e-5, 1e-4


@torch.no_grad()
def randomize_(module, std=0.3):
    """Random values for every trainable weight (fixed tables such as Marian's sinusoids are left alone)."""
    for p in module.parameters():
        if p.requires_grad:
            p.normal_(0.0, std)
    return module.eval()


def torch_masks(b=3, t=7, s=7):
    """PyTorch-convention masks: True = NOT allowed / padding."""
    blocked = torch.triu(torch.ones(t, s, dtype=torch.bool), diagonal=1)  # future positions
    pad = torch.zeros(b, s, dtype=torch.bool)
    pad[0, s - 2:] = True
    pad[-1, 3:] = True
    return blocked, pad


def seq_first(x, batch_first):
    return x if batch_first else x.transpose(0, 1)


# ---------------------------------------------------------------- masks
def test_mask_from_torch_flips_the_convention():
    blocked, pad = torch_masks()
    m = mask_from_torch(blocked, pad)
    assert m.shape == (3, 1, 7, 7) and m.dtype == torch.bool
    want = causal_mask(7)[None, None] & ~pad[:, None, None, :]
    assert torch.equal(m, want)
    assert mask_from_torch(attn_mask=blocked).shape == (1, 1, 7, 7)
    assert mask_from_torch(key_padding_mask=pad).shape == (3, 1, 1, 7)
    assert mask_from_torch() is None


def test_mask_from_torch_float_masks_and_per_head_masks():
    float_causal = nn.Transformer.generate_square_subsequent_mask(5)  # 0 / -inf
    assert torch.equal(mask_from_torch(float_causal)[0, 0], causal_mask(5))
    hf_style = torch.zeros(2, 5).masked_fill(torch.tensor([[0, 0, 0, 1, 1], [0] * 5], dtype=torch.bool),
                                             torch.finfo(torch.float32).min)
    assert torch.equal(mask_from_torch(key_padding_mask=hf_style)[:, 0, 0], hf_style == 0)
    per_head = torch.rand(2 * H, 5, 5) > 0.5  # (B·H, T, S)
    m = mask_from_torch(per_head, n_heads=H)
    assert m.shape == (2, H, 5, 5) and torch.equal(m.reshape(2 * H, 5, 5), ~per_head)


def test_mask_from_torch_bad_inputs():
    with pytest.raises(ValueError, match="additive float mask"):
        mask_from_torch(torch.full((4, 4), -2.5))
    with pytest.raises(ValueError, match="n_heads"):
        mask_from_torch(torch.zeros(8, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask"):
        mask_from_torch(torch.zeros(4, 4, dtype=torch.bool), torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="attn_mask"):
        mask_from_torch(torch.zeros(4, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="attn_mask"):
        mask_from_torch(torch.zeros(4, dtype=torch.bool))


# ---------------------------------------------------------------- torch.nn.MultiheadAttention
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_matches_torch_with_masks(batch_first, bias):
    theirs = randomize_(nn.MultiheadAttention(D, H, bias=bias, batch_first=batch_first))
    ours = from_torch(theirs)
    assert isinstance(ours, MultiHeadAttention) and not ours.training
    x = torch.randn(3, 7, D)
    blocked, pad = torch_masks()
    xs = seq_first(x, batch_first)
    with torch.no_grad():
        for attn_mask, kpm in ((None, None), (blocked, None), (None, pad), (blocked, pad)):
            ref, ref_w = theirs(xs, xs, xs, attn_mask=attn_mask, key_padding_mask=kpm, average_attn_weights=False)
            out, w = ours(x, mask=mask_from_torch(attn_mask, kpm), return_weights=True)
            torch.testing.assert_close(out, seq_first(ref, batch_first), atol=LAYER_ATOL, rtol=0)
            torch.testing.assert_close(w, ref_w, atol=LAYER_ATOL, rtol=0)
        # is_causal in PyTorch = causal=True here
        ref, _ = theirs(xs, xs, xs, attn_mask=blocked, is_causal=True, need_weights=False)
        torch.testing.assert_close(ours(x, causal=True), seq_first(ref, batch_first), atol=LAYER_ATOL, rtol=0)


def test_mha_cross_attention_and_float_mask():
    theirs = randomize_(nn.MultiheadAttention(D, H, batch_first=True))
    ours = from_torch(theirs)
    q, kv = torch.randn(2, 4, D), torch.randn(2, 9, D)
    float_pad = torch.zeros(2, 9)
    float_pad[1, 6:] = float("-inf")
    with torch.no_grad():
        ref, _ = theirs(q, kv, kv, key_padding_mask=float_pad)
        torch.testing.assert_close(ours(q, context=kv, mask=mask_from_torch(key_padding_mask=float_pad)), ref,
                                   atol=LAYER_ATOL, rtol=0)


def test_mha_gradients_match_torch():
    theirs = randomize_(nn.MultiheadAttention(D, H, batch_first=True))
    ours = from_torch(theirs)
    x1 = torch.randn(2, 5, D, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    theirs(x1, x1, x1, need_weights=False)[0].square().sum().backward()
    ours(x2).square().sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad, atol=1e-4, rtol=0)
    torch.testing.assert_close(ours.in_proj.weight.grad, theirs.in_proj_weight.grad, atol=1e-4, rtol=1e-5)


def test_to_torch_round_trip():
    ours = randomize_(MultiHeadAttention(D, H))
    x = torch.randn(2, 6, D)
    for batch_first in (True, False):
        theirs = to_torch(ours, batch_first=batch_first)
        assert isinstance(theirs, nn.MultiheadAttention) and theirs.batch_first == batch_first
        xs = seq_first(x, batch_first)
        with torch.no_grad():
            ref, _ = theirs(xs, xs, xs, need_weights=False)
            torch.testing.assert_close(ours(x), seq_first(ref, batch_first), atol=LAYER_ATOL, rtol=0)
    back = from_torch(to_torch(ours))
    for a, b in zip(back.parameters(), ours.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="position"):
        to_torch(MultiHeadAttention(D, H, position=Rotary(D // H)))
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        to_torch(nn.Linear(D, D))


# ---------------------------------------------------------------- torch.nn.Transformer*Layer
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_layer_matches_torch(norm_first, activation, batch_first):
    theirs = randomize_(nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, activation=activation,
                                                   norm_first=norm_first, batch_first=batch_first))
    ours = from_torch(theirs)
    assert isinstance(ours, EncoderBlock) and not ours.training
    assert ours.attn_sub.norm.eps == theirs.norm1.eps
    x = torch.randn(3, 7, D)
    blocked, pad = torch_masks()
    with torch.no_grad():
        for src_mask, kpm in ((None, None), (blocked, pad)):
            ref = seq_first(theirs(seq_first(x, batch_first), src_mask=src_mask, src_key_padding_mask=kpm),
                            batch_first)
            torch.testing.assert_close(ours(x, mask=mask_from_torch(src_mask, kpm)), ref, atol=LAYER_ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_matches_torch(norm_first, activation):
    theirs = randomize_(nn.TransformerDecoderLayer(D, H, FF, dropout=0.1, activation=activation,
                                                   norm_first=norm_first, batch_first=False))
    ours = from_torch(theirs)
    assert isinstance(ours, DecoderBlock) and ours.cross_attn is not None and not ours.training
    x, memory = torch.randn(3, 7, D), torch.randn(3, 9, D)
    blocked, pad = torch_masks()
    mem_pad = torch.zeros(3, 9, dtype=torch.bool)
    mem_pad[1, 4:] = True
    with torch.no_grad():
        ref = theirs(x.transpose(0, 1), memory.transpose(0, 1), tgt_mask=blocked, tgt_key_padding_mask=pad,
                     memory_key_padding_mask=mem_pad).transpose(0, 1)
        # the causal mask either through causal=True (the library's default) or inside the converted mask
        out1 = ours(x, memory, mask=mask_from_torch(None, pad), memory_mask=mask_from_torch(None, mem_pad))
        out2 = ours(x, memory, mask=mask_from_torch(blocked, pad), memory_mask=mask_from_torch(None, mem_pad),
                    causal=False)
    torch.testing.assert_close(out1, ref, atol=LAYER_ATOL, rtol=0)
    torch.testing.assert_close(out2, ref, atol=LAYER_ATOL, rtol=0)


def test_layer_options_bias_eps_and_tanh_gelu():
    theirs = randomize_(nn.TransformerEncoderLayer(D, H, FF, activation=nn.GELU(approximate="tanh"),
                                                   layer_norm_eps=1e-3, bias=False, batch_first=True))
    ours = from_torch(theirs)
    assert ours.ff.activation == "gelu_tanh" and ours.attn_sub.norm.eps == 1e-3 and ours.ff.w1.bias is None
    x = torch.randn(2, 5, D)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), atol=LAYER_ATOL, rtol=0)


def test_conversion_keeps_dtype_and_backward_works():
    theirs = randomize_(nn.TransformerEncoderLayer(D, H, FF, batch_first=True)).double()
    ours = from_torch(theirs)
    assert next(ours.parameters()).dtype == torch.float64
    x = torch.randn(2, 5, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), atol=1e-12, rtol=0)
    ours.train()
    ours(x).sum().backward()
    assert all(p.grad is not None for p in ours.parameters())


def test_from_torch_bad_inputs():
    with pytest.raises(TypeError, match="MultiheadAttention"):
        from_torch(nn.Linear(4, 4))
    assert "torch.nn.TransformerEncoderLayer" in SUPPORTED_TORCH
    with pytest.raises(ValueError, match="kdim"):
        from_torch(nn.MultiheadAttention(D, H, kdim=16, vdim=16))
    with pytest.raises(ValueError, match="add_bias_kv"):
        from_torch(nn.MultiheadAttention(D, H, add_bias_kv=True))
    with pytest.raises(ValueError, match="add_zero_attn"):
        from_torch(nn.MultiheadAttention(D, H, add_zero_attn=True))
    with pytest.raises(ValueError, match="activation"):
        from_torch(nn.TransformerEncoderLayer(D, H, FF, activation=torch.tanh))


# ---------------------------------------------------------------- Hugging Face
def gpt2(**options):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=V, n_embd=D, n_layer=2, n_head=H, n_positions=40, bos_token_id=1,
                                  eos_token_id=2, pad_token_id=0, **options)
    return randomize_(transformers.GPT2LMHeadModel(cfg))


def marian(**options):
    transformers = pytest.importorskip("transformers")
    options = {"activation_function": "swish", "scale_embedding": True, "encoder_attention_heads": H,
               "decoder_attention_heads": H, "encoder_ffn_dim": FF, "decoder_ffn_dim": FF, **options}
    cfg = transformers.MarianConfig(vocab_size=V, d_model=D, encoder_layers=2, decoder_layers=2,
                                    max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0,
                                    bos_token_id=1, eos_token_id=2, forced_eos_token_id=2, **options)
    hf = randomize_(transformers.MarianMTModel(cfg))
    with torch.no_grad():
        hf.final_logits_bias.normal_()  # a buffer, zero at init
    return hf


@pytest.mark.parametrize("options", [
    {},
    {"activation_function": "relu", "tie_word_embeddings": False, "layer_norm_epsilon": 1e-3, "n_inner": 48},
    {"reorder_and_upcast_attn": True, "attn_implementation": "eager"},  # same function in float32
])
def test_gpt2_logits_match(options):
    hf = gpt2(**options)
    ours = from_hf(hf)
    assert isinstance(ours, DecoderLM) and not ours.training
    assert ours.cfg.max_len == hf.config.n_positions and ours.cfg.position == "learned"
    assert (ours.lm_head.weight is ours.embed.token.weight) == hf.config.tie_word_embeddings
    ids = torch.randint(0, V, (3, 12))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, atol=MODEL_ATOL, rtol=0)


def assert_same_weights(ours, theirs, kinds):
    for kind in kinds:
        assert len(getattr(ours, kind)) == len(getattr(theirs, kind)) == 2, kind
        for a, b in zip(getattr(ours, kind), getattr(theirs, kind)):
            torch.testing.assert_close(a, b, atol=LAYER_ATOL, rtol=0)


def test_gpt2_attention_weights_match():
    hf = gpt2(attn_implementation="eager")  # Hugging Face's fused attention returns no weights
    ours = from_hf(hf)
    ids = torch.randint(0, V, (3, 12))
    with torch.no_grad():
        theirs = weights_from_hf(hf(ids, output_attentions=True))
        _, weights = ours(ids, return_weights=True)
    assert theirs.cross_attn == () == theirs.encoder and theirs.self_attn[0].shape == (3, H, 12, 12)
    assert_same_weights(weights, theirs, ["self_attn"])
    with pytest.raises(ValueError, match="output_attentions=True"):
        weights_from_hf(hf(ids))


def test_gpt2_kv_cache_generation_matches():
    hf = gpt2()
    ours = from_hf(hf)
    prompt = torch.randint(3, V, (2, 5))
    n_new = 6
    with torch.no_grad():
        hf_ids = hf.generate(prompt, max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False)
        cache, ids = ours.new_cache(), prompt
        logits = ours(prompt, cache=cache)[:, -1]
        step_logits = [logits]
        for _ in range(n_new):
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
            logits = ours(ids[:, -1:], cache=cache)[:, -1]
            step_logits.append(logits)
        full = hf(ids).logits  # (B, 5 + n_new, V) without any cache
    assert torch.equal(ids, hf_ids)
    for i, step in enumerate(step_logits[:-1]):
        torch.testing.assert_close(step, full[:, prompt.shape[1] - 1 + i], atol=MODEL_ATOL, rtol=0)


def test_gpt2_unsupported_options():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        from_hf(gpt2(scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(ValueError, match="scale_attn_weights"):
        from_hf(gpt2(scale_attn_weights=False))
    with pytest.raises(ValueError, match="activation_function"):
        from_hf(gpt2(activation_function="quick_gelu"))


def marian_batch():
    src = torch.randint(3, V, (3, 10))
    src[0, 6:] = 0  # padding (pad_token_id = 0) in two of three source rows
    src[2, 8:] = 0
    tgt = torch.randint(3, V, (3, 8))
    tgt[:, 0] = 0  # Marian starts decoding from the pad id
    return src, src != 0, tgt


@pytest.mark.parametrize("options", [
    {},
    {"activation_function": "gelu", "scale_embedding": False},
    {"activation_function": "relu", "share_encoder_decoder_embeddings": False, "decoder_vocab_size": 90,
     "tie_word_embeddings": False},
])
def test_marian_logits_match_with_padding(options):
    hf = marian(**options)
    ours = from_hf(hf)
    assert isinstance(ours, EncoderDecoder) and not ours.training
    cfg = ours.cfg
    assert not cfg.norm_first and cfg.sinusoidal_layout == "halves" and cfg.logits_bias and cfg.pad_id == 0
    assert cfg.share_embeddings == hf.config.share_encoder_decoder_embeddings
    src, real, tgt = marian_batch()
    tgt = tgt.clamp(max=cfg.tgt_vocab_size - 1)
    with torch.no_grad():
        ref = hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
        torch.testing.assert_close(ours(src, tgt, src_mask=real), ref, atol=MODEL_ATOL, rtol=0)
        torch.testing.assert_close(ours(src, tgt), ref, atol=MODEL_ATOL, rtol=0)  # pad_id masks by default


def test_marian_comparison_is_sensitive_and_cache_decoding_matches():
    hf = marian()
    ours = from_hf(hf)
    src, real, tgt = marian_batch()
    with torch.no_grad():
        ref = hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
        memory = ours.encode(src, real)
        cache = ours.new_cache()
        steps = torch.cat([ours.decode(tgt[:, i:i + 1], memory, real, cache=cache) for i in range(tgt.shape[1])], 1)
        torch.testing.assert_close(steps, ref, atol=MODEL_ATOL, rtol=0)
        hf.model.decoder.layers[0].encoder_attn_layer_norm.bias.add_(0.1)  # a change HF sees and we do not
        changed = hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
    assert (changed - ours(src, tgt, src_mask=real)).abs().max() > 1e-3


def reversal_batch(n, generator):
    """n pairs of a toy task: a source of 2-8 ids in 3..19 (padded with 0) and the target, its reverse then EOS."""
    src, tgt = torch.zeros(n, 8, dtype=torch.long), torch.zeros(n, 9, dtype=torch.long)
    for i, length in enumerate(torch.randint(2, 9, (n,), generator=generator).tolist()):
        ids = torch.randint(3, 20, (length,), generator=generator)
        src[i, :length], tgt[i, :length], tgt[i, length] = ids, ids.flip(0), 2
    return src, tgt


@pytest.fixture(scope="module")
def trained_marian():
    """A small Marian model trained for 500 steps on reversing its source. Decoding it is a real search: outputs end
    at many lengths, some rows run to the length limit, and beam search often disagrees with greedy decoding (an
    untrained random model repeats one token, so every method returns the same output)."""
    torch.manual_seed(0)
    hf = marian().train()
    optimizer = torch.optim.AdamW(hf.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    for _ in range(500):
        src, tgt = reversal_batch(32, generator)
        start = torch.zeros(len(tgt), 1, dtype=torch.long)  # Marian starts decoding from its pad id, 0
        loss = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=torch.cat([start, tgt[:, :-1]], 1),
                  labels=tgt.masked_fill(tgt == 0, -100)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return hf.eval()


def up_to_eos(ids, eos=2, pad=0, length=None):
    """Each row cut after its first EOS and padded with `pad` to `length` columns (Hugging Face fills with EOS)."""
    out = torch.full((len(ids), max(length or 0, ids.shape[1])), pad, dtype=torch.long)
    for i, row in enumerate(ids):
        ends = (row == eos).nonzero()
        n = int(ends[0]) + 1 if len(ends) else len(row)
        out[i, :n] = row[:n]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("beam_size, length_penalty", [(1, 1.0), (4, 0.0), (4, 1.0), (3, 2.0), (5, 0.5)])
def test_beam_search_matches_hf_generate(trained_marian, beam_size, length_penalty):
    """Our beam search returns what Hugging Face's returns, with the same score, on 64 sources of a trained model;
    with beam_size=1 both are greedy decoding."""
    from transformer_lib.generation import beam_search, greedy_translate

    hf, max_len = trained_marian, 12
    ours = from_hf(hf)
    src, _ = reversal_batch(64, torch.Generator().manual_seed(2))
    real = src != 0
    options = dict(num_beams=beam_size, early_stopping=True) if beam_size > 1 else dict(num_beams=1)
    with torch.no_grad():
        theirs = hf.generate(input_ids=src, attention_mask=real.long(), do_sample=False, max_length=max_len + 1,
                             length_penalty=length_penalty, forced_eos_token_id=None, output_scores=True,
                             return_dict_in_generate=True, **options)
    special = dict(bos_id=0, eos_id=2, pad_id=0, src_mask=real)
    mine, logp = beam_search(ours, src, beam_size=beam_size, max_len=max_len, length_penalty=length_penalty,
                             return_scores=True, **special)
    width = max(mine.shape[1], theirs.sequences.shape[1] - 1)
    assert torch.equal(up_to_eos(mine, length=width), up_to_eos(theirs.sequences[:, 1:], length=width))
    ended = (mine == 2).any(1)
    assert ended.any() and not ended.all()  # some rows end with EOS, others run to max_len
    greedy = greedy_translate(ours, src, max_len=max_len, **special)
    width = max(width, greedy.shape[1])
    differs = (up_to_eos(greedy, length=width) != up_to_eos(mine, length=width)).any(1)
    if beam_size == 1:
        assert not differs.any()
    else:
        assert differs.any()  # the search is not greedy decoding in disguise
        lengths = torch.where(ended, (mine == 2).int().argmax(1) + 1, mine.shape[1]).float()  # EOS counted
        torch.testing.assert_close(logp / lengths ** length_penalty, theirs.sequences_scores, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_suppressed_tokens_match_hf_bad_words_ids(trained_marian):
    """suppress_ids is Hugging Face's bad_words_ids of single tokens with renormalize_logits=True: the same outputs
    and scores, greedy and beam, when the suppressed tokens are ones the model wants (the two most frequent first
    tokens of its greedy outputs) plus the pad id that starts Marian's decoder."""
    from transformer_lib.generation import beam_search, greedy_translate, sequence_logprob

    hf, max_len = trained_marian, 12
    ours = from_hf(hf)
    src, _ = reversal_batch(64, torch.Generator().manual_seed(3))
    real = src != 0
    special = dict(bos_id=0, eos_id=2, pad_id=0, src_mask=real)
    free = greedy_translate(ours, src, max_len=max_len, **special)
    wanted = torch.bincount(free[:, 0]).topk(2).indices.tolist()
    suppress = [0] + wanted
    for beam_size in (1, 4):
        options = dict(num_beams=beam_size, early_stopping=True) if beam_size > 1 else dict(num_beams=1)
        with torch.no_grad():
            theirs = hf.generate(input_ids=src, attention_mask=real.long(), do_sample=False, max_length=max_len + 1,
                                 length_penalty=1.0, forced_eos_token_id=None, bad_words_ids=[[i] for i in suppress],
                                 renormalize_logits=True, output_scores=True, return_dict_in_generate=True, **options)
        if beam_size == 1:
            mine = greedy_translate(ours, src, max_len=max_len, suppress_ids=suppress, **special)
        else:
            mine, logp = beam_search(ours, src, beam_size=beam_size, max_len=max_len, return_scores=True,
                                     suppress_ids=suppress, **special)
        width = max(mine.shape[1], theirs.sequences.shape[1] - 1, free.shape[1])
        assert torch.equal(up_to_eos(mine, length=width), up_to_eos(theirs.sequences[:, 1:], length=width))
        body = up_to_eos(mine, length=width)
        assert not torch.isin(body[:, 0], torch.tensor(suppress)).any()
        assert not torch.isin(body[body != 0], torch.tensor(wanted)).any()    # never generated, anywhere
        assert (up_to_eos(free, length=width) != body).any(1).sum() >= 8       # the suppression changed outputs
        if beam_size > 1:
            ended = (mine == 2).any(1)
            lengths = torch.where(ended, (mine == 2).int().argmax(1) + 1, mine.shape[1]).float()
            torch.testing.assert_close(logp / lengths, theirs.sequences_scores, atol=1e-4, rtol=0)
            rescored = sequence_logprob(ours, src, mine, suppress_ids=suppress, **special)
            torch.testing.assert_close(rescored, logp, atol=1e-4, rtol=0)
            assert (sequence_logprob(ours, src, mine, **special) < rescored - 1e-3).any()   # renormalised: higher


@pytest.mark.parametrize("suppress, error, match", [
    (3, TypeError, "suppress_ids must be a sequence"), ("ab", TypeError, "suppress_ids must be a sequence"),
    ([1, -2], ValueError, r"\(ints >= 0\), got \[1, -2\]"), ([True], ValueError, "suppress_ids"),
    ([10_000], ValueError, "below the vocabulary size"),
])
def test_suppress_ids_bad_input(suppress, error, match):
    from transformer_lib.generation import beam_search, greedy_translate

    ours = from_hf(marian())
    src = torch.tensor([[5, 6, 7]])
    for decode in (greedy_translate, beam_search):
        with pytest.raises(error, match=match):
            decode(ours, src, max_len=4, bos_id=0, eos_id=2, pad_id=0, suppress_ids=suppress)


def test_marian_attention_weights_match_with_padding():
    hf = marian(attn_implementation="eager")
    ours = from_hf(hf)
    src, real, tgt = marian_batch()
    with torch.no_grad():
        theirs = weights_from_hf(hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt,
                                    output_attentions=True))
        _, weights = ours(src, tgt, src_mask=real, return_weights=True)
    assert_same_weights(weights, theirs, ["encoder", "self_attn", "cross_attn"])
    assert (weights.cross_attn[0][0, ..., 6:] == 0).all()  # padded source words get no weight on either side
    hf.model.decoder.layers[1].encoder_attn.k_proj.weight.data.mul_(2)  # to the last cross-attention only (a key
    # bias would not do: it adds one constant to every score of a row, which softmax removes)
    with torch.no_grad():
        changed = weights_from_hf(hf(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt,
                                     output_attentions=True))
    assert (changed.cross_attn[1] - weights.cross_attn[1]).abs().max() > 1e-3
    torch.testing.assert_close(changed.cross_attn[0], weights.cross_attn[0], atol=LAYER_ATOL, rtol=0)


def test_marian_positions_are_the_halves_sinusoids():
    from transformer_lib.positional import sinusoidal_table
    hf = marian()
    torch.testing.assert_close(hf.model.encoder.embed_positions.weight, sinusoidal_table(64, D, "halves"),
                               atol=1e-6, rtol=0)


def test_marian_unsupported_options():
    with pytest.raises(ValueError, match="encoder_attention_heads"):
        from_hf(marian(decoder_attention_heads=2))
    with pytest.raises(ValueError, match="encoder_ffn_dim"):
        from_hf(marian(decoder_ffn_dim=48))


def test_from_hf_rejects_other_models():
    transformers = pytest.importorskip("transformers")
    assert "transformers.MarianMTModel" in SUPPORTED_HF
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        from_hf(nn.Linear(4, 4))
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        from_hf(transformers.GPT2Model(transformers.GPT2Config(vocab_size=V, n_embd=D, n_layer=1, n_head=H)))


def test_missing_transformers_raises_import_error_with_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    for call in (lambda: from_hf(nn.Linear(2, 2)), load_pretrained_gpt2, load_pretrained_marian):
        with pytest.raises(ImportError, match=r"transformer_lib\[hf\]"):
            call()


def test_hub_available_offline_is_false_without_trying_the_network(monkeypatch):
    attempts = []

    def refuse(address, timeout=None, *args, **kwargs):
        attempts.append((address, timeout))
        raise OSError("no network in tests")

    monkeypatch.setattr(socket, "create_connection", refuse)  # never reach the network
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    for offline in ("1", "true", "ON"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        assert hub_available() is False
    assert attempts == []  # offline: answered at once, no connection attempted (so no timeout to wait for)

    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert hub_available(timeout=0.1) is False  # online but unreachable
    assert attempts == [(("huggingface.co", 443), 0.1)]
