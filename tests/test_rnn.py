import pytest
import torch
import torch.nn.functional as F

from transformer_lib.models import count_parameters
from transformer_lib.rnn import (ATTENTION_NAMES, CELLS, RNNCache, RNNClassifier, RNNEncoder, RNNSeq2Seq,
                                 RNNSeq2SeqConfig, make_recurrent)

V_SRC, V_TGT = 13, 11


@pytest.fixture(autouse=True)
def _one_thread():
    # Every model here is tiny: a second thread buys nothing and, on a busy machine, its spin-waiting makes the
    # training test tens of times slower. Restored afterwards for the other test modules.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_cfg(**kw):
    base = dict(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_embed=8, d_hidden=12)
    base.update(kw)
    return RNNSeq2SeqConfig(**base)


def batch(b=3, s=7, t=5, lengths=(7, 4, 2)):
    """Right-padded source (PAD = 0) with the given lengths, and a target without padding."""
    src = torch.randint(1, V_SRC, (b, s))
    for i, n in enumerate(lengths):
        src[i, n:] = 0
    tgt = torch.randint(1, V_TGT, (b, t))
    return src, tgt


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("attention", ATTENTION_NAMES)
def test_seq2seq_shapes(cell, attention):
    model = RNNSeq2Seq(small_cfg(cell=cell, attention=attention, n_layers=2)).eval()
    src, tgt = batch()
    logits, weights = model(src, tgt, return_weights=True)
    assert logits.shape == (3, 5, V_TGT)
    assert model.encode(src).shape == (3, 7, 12)
    if attention is None:
        assert weights is None
    else:
        assert weights.shape == (3, 5, 7)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("cell", CELLS)
def test_make_recurrent_is_batch_first_torch_module(cell):
    layer = make_recurrent(cell, 6, 10, n_layers=2)
    assert isinstance(layer, {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell])
    out, _ = layer(torch.randn(4, 9, 6))
    assert out.shape == (4, 9, 10)


def test_encoder_and_classifier_shapes():
    enc = RNNEncoder(V_SRC, 8, 12, cell="gru", bidirectional=True)
    src, _ = batch()
    states, final = enc(src)
    assert states.shape == (3, 7, 12) and final.shape == (3, 12)
    assert torch.equal(states[1, 4:], torch.zeros(3, 12))  # padding carries nothing
    clf = RNNClassifier(V_SRC, 2, d_embed=8, d_hidden=12, cell="lstm")
    assert clf(src).shape == (3, 2)


# ---------------------------------------------------------------- equal to a reference
@pytest.mark.parametrize("cell", CELLS)
def test_encoder_final_state_is_last_real_token_of_plain_torch_rnn(cell):
    enc = RNNEncoder(V_SRC, 8, 12, cell=cell, n_layers=2).eval()
    src, _ = batch()
    states, final = enc(src)
    for i, n in enumerate((7, 4, 2)):
        ref, _ = enc.rnn(enc.embed(src[i:i + 1, :n]))  # the unpadded sentence alone, no packing
        torch.testing.assert_close(states[i:i + 1, :n], ref, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(final[i], ref[0, -1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cell", CELLS)
def test_bidirectional_encoder_reads_each_sentence_as_if_alone(cell):
    """The packed path: the right-to-left half starts at each sentence's last real token, not in its padding."""
    enc = RNNEncoder(V_SRC, 8, 12, cell=cell, n_layers=2, bidirectional=True).eval()
    src, _ = batch()
    states, final = enc(src)
    for i, n in enumerate((7, 4, 2)):
        alone, alone_final = enc(src[i:i + 1, :n])
        torch.testing.assert_close(states[i:i + 1, :n], alone, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(final[i:i + 1], alone_final, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_states_ignore_what_the_padding_holds(bidirectional):
    """Real tokens' states and the final state do not change when the padded positions hold other tokens (the
    left-to-right encoder runs the padded batch unpacked)."""
    enc = RNNEncoder(V_SRC, 8, 12, cell="lstm", bidirectional=bidirectional).eval()
    src, _ = batch()
    mask = src != 0
    noisy = torch.where(mask, src, torch.randint(1, V_SRC, src.shape, generator=torch.Generator().manual_seed(0)))
    states, final = enc(src, mask)
    states_noisy, final_noisy = enc(noisy, mask)
    torch.testing.assert_close(states_noisy, states, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(final_noisy, final, atol=1e-6, rtol=1e-5)


def test_attention_equals_explicit_luong_equations():
    model = RNNSeq2Seq(small_cfg(cell="gru", attention="bilinear")).eval()
    src, tgt = batch()
    mask = src != 0
    memory = model.encode(src)
    s_t, _ = model.decoder_rnn(model.tgt_embed(tgt), model.initial_state(memory, mask))  # (B, T, H)
    e = torch.einsum("btq,qk,bsk->bts", s_t, model.attn_score.weight, memory)  # s_tᵀ W h_i
    alpha = torch.softmax(e.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    a = torch.einsum("bts,bsh->bth", alpha, memory)
    expected = model.lm_head(torch.tanh(model.attn_combine(torch.cat([a, s_t], -1))))
    logits, weights = model(src, tgt, return_weights=True)
    torch.testing.assert_close(weights, alpha)
    torch.testing.assert_close(logits, expected)


# ---------------------------------------------------------------- cache
@pytest.mark.parametrize("cell,attention", [("rnn", "dot"), ("lstm", "additive"), ("gru", None),
                                            ("lstm", "lowrank"), ("gru", "bilinear")])
def test_step_by_step_decoding_with_cache_matches_teacher_forcing(cell, attention):
    model = RNNSeq2Seq(small_cfg(cell=cell, attention=attention, n_layers=2, bidirectional=True)).eval()
    src, tgt = batch(t=6)
    full, full_w = model(src, tgt, return_weights=True)
    memory, mask = model.encode(src), src != 0
    for chunk in (1, 2, 4):  # one token, two tokens, then an uneven split
        cache = model.new_cache()
        steps, ws = [], []
        for start in range(0, tgt.shape[1], chunk):
            out = model.decode(tgt[:, start:start + chunk], memory, mask, cache=cache, return_weights=True)
            steps.append(out[0])
            ws.append(out[1])
        assert cache.length == tgt.shape[1]
        torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
        if attention is not None:
            torch.testing.assert_close(torch.cat(ws, 1), full_w, atol=1e-5, rtol=1e-5)


def test_decode_derives_mask_from_src_and_4d_masks():
    model = RNNSeq2Seq(small_cfg(cell="lstm", attention="dot")).eval()
    src, tgt = batch()
    memory = model.encode(src)
    expected = model(src, tgt)
    torch.testing.assert_close(model.decode(tgt, memory, src=src), expected)
    torch.testing.assert_close(model.decode(tgt, memory, (src != 0)[:, None, None, :]), expected)


def test_cache_reorder_selects_batch_rows():
    model = RNNSeq2Seq(small_cfg(cell="lstm", attention="additive")).eval()
    src, tgt = batch()
    memory, mask = model.encode(src), src != 0
    cache = model.new_cache()
    model.decode(tgt[:, :2], memory, mask, cache=cache)
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    assert cache.state[0].shape == (1, 3, 12) and cache.length == 2
    step = model.decode(tgt[index, 2:3], memory[index], mask[index], cache=cache)
    torch.testing.assert_close(step, model(src[index], tgt[index, :3])[:, 2:3], atol=1e-5, rtol=1e-5)
    empty = RNNCache()
    empty.reorder(index)  # nothing decoded yet: nothing to select
    assert empty.state is None


# ---------------------------------------------------------------- padding and masks
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("attention", [None, "dot", "additive"])
def test_extra_source_padding_does_not_change_logits(cell, attention):
    model = RNNSeq2Seq(small_cfg(cell=cell, attention=attention, bidirectional=attention == "dot")).eval()
    src, tgt = batch(b=1, s=4, lengths=(4,))
    padded = F.pad(src, (0, 5), value=0)  # the same sentence with five PAD tokens
    mixed = torch.cat([padded, torch.randint(1, V_SRC, (1, 9))])  # next to a longer sentence
    base = model(src, tgt)
    torch.testing.assert_close(model(padded, tgt), base, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(model(mixed, tgt.repeat(2, 1))[:1], base, atol=1e-6, rtol=1e-5)


def test_attention_weights_sum_to_one_over_real_tokens_and_zero_on_padding():
    model = RNNSeq2Seq(small_cfg(cell="gru", attention="additive")).eval()
    src, tgt = batch()
    _, w = model(src, tgt, return_weights=True)
    pad = (src == 0)[:, None, :].expand_as(w)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 5))
    assert torch.equal(w[pad], torch.zeros(int(pad.sum())))


def test_without_attention_the_decoder_sees_only_the_final_state():
    model = RNNSeq2Seq(small_cfg(cell="lstm", attention=None)).eval()
    assert model.attn_score is None and model.attn_combine is None
    src, tgt = batch()
    mask = src != 0
    memory = model.encode(src)
    lengths = mask.sum(1)
    scrambled = torch.randn_like(memory)  # every encoder state replaced...
    rows = torch.arange(3)
    scrambled[rows, lengths - 1] = memory[rows, lengths - 1]  # ...except the one at the last real token
    torch.testing.assert_close(model.decode(tgt, scrambled, mask), model.decode(tgt, memory, mask))
    # and an early source token does matter, through that final state
    changed = src.clone()
    changed[0, 0] = 1 + (src[0, 0] % (V_SRC - 1))
    assert not torch.allclose(model(changed, tgt)[0], model(src, tgt)[0])


# ---------------------------------------------------------------- training
def test_backward_reaches_every_parameter():
    model = RNNSeq2Seq(small_cfg(cell="lstm", attention="lowrank", rank=3, n_layers=2, bidirectional=True))
    src, tgt = batch()
    model(src, tgt).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_short_training_run_learns_a_copy_task():
    torch.manual_seed(0)
    v = 10  # 0 PAD, 1 BOS, 2 EOS, 3..9 symbols
    model = RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab_size=v, tgt_vocab_size=v, d_embed=16, d_hidden=32,
                                        cell="gru", attention="dot"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def loss_on(x):
        tgt = torch.cat([torch.ones(x.shape[0], 1, dtype=torch.long), x, torch.full_like(x[:, :1], 2)], 1)
        logits = model(x, tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, v), tgt[:, 1:].reshape(-1))

    val = torch.randint(3, v, (64, 5))
    with torch.no_grad():
        before = loss_on(val).item()
    for _ in range(60):
        loss = loss_on(torch.randint(3, v, (32, 5)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = loss_on(val).item()
    assert after < 0.3 * before, (before, after)


# ---------------------------------------------------------------- parameter counts
@pytest.mark.parametrize("attention", ATTENTION_NAMES)
def test_count_parameters_buckets(attention):
    cfg = RNNSeq2SeqConfig(src_vocab_size=40, tgt_vocab_size=40, d_embed=64, d_hidden=128, cell="lstm",
                           attention=attention)
    counts = count_parameters(RNNSeq2Seq(cfg))
    lstm = 4 * (128 * (64 + 128) + 2 * 128)
    score = {None: 0, "dot": 0, "bilinear": 128 * 128, "lowrank": 2 * 128 * 32,
             "additive": 2 * 128 * 128 + 128 + 128}[attention]
    assert counts["embeddings"] == 2 * 40 * 64
    assert counts["other"] == 2 * lstm
    assert counts["output"] == 128 * 40 + 40
    assert counts.get("attention", 0) == (0 if attention is None else score + 2 * 128 * 128)
    assert counts["total"] == sum(p.numel() for p in RNNSeq2Seq(cfg).parameters())


def test_tied_weights_share_the_target_embedding():
    model = RNNSeq2Seq(small_cfg(d_embed=12, tie_weights=True))
    assert model.lm_head.weight is model.tgt_embed.weight
    assert count_parameters(model)["output"] == V_TGT  # only the bias is new


# ---------------------------------------------------------------- bad input
def test_config_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"cell must be one of \['gru', 'lstm', 'rnn'\], got 'transformer'"):
        small_cfg(cell="transformer")
    with pytest.raises(ValueError, match=r"attention must be one of .*'additive'.*'dot'.*got 'cosine'"):
        small_cfg(attention="cosine")
    with pytest.raises(ValueError, match="src_vocab_size must be a positive int, got 0"):
        RNNSeq2SeqConfig(tgt_vocab_size=5)
    with pytest.raises(TypeError, match="d_hidden must be an int"):
        small_cfg(d_hidden=12.0)
    with pytest.raises(ValueError, match="rank must be a positive int"):
        small_cfg(attention="lowrank", rank=0)
    with pytest.raises(ValueError, match=r"dropout must be a float in \[0, 1\)"):
        small_cfg(dropout=1.5)
    with pytest.raises(ValueError, match="tie_weights needs d_embed == d_hidden"):
        small_cfg(tie_weights=True)
    with pytest.raises(TypeError, match="cfg must be an RNNSeq2SeqConfig"):
        RNNSeq2Seq({"src_vocab_size": 5})
    with pytest.raises(ValueError, match="cell must be one of"):
        make_recurrent("lstmm", 4, 4)


def test_forward_and_decode_errors_name_the_argument():
    model = RNNSeq2Seq(small_cfg(attention="dot"))
    src, tgt = batch()
    with pytest.raises(ValueError, match="src must have 2 dimensions, got 1"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match=r"tgt contains token id 11, outside the vocabulary \[0, 10\]"):
        model(src, torch.full_like(tgt, V_TGT))
    with pytest.raises(ValueError, match="src contains token id -1"):
        model(src - 1, tgt)
    with pytest.raises(TypeError, match="src must have a int dtype"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match="same batch size, got 3 and 2"):
        model(src, tgt[:2])
    with pytest.raises(ValueError, match=r"src is empty \(shape \(0, 7\)\)"):
        model(src[:0], tgt[:0])
    with pytest.raises(ValueError, match=r"src_mask must have shape \(B, S\) = \(3, 7\), got \(3, 6\)"):
        model(src, tgt, src_mask=torch.ones(3, 6, dtype=torch.bool))
    with pytest.raises(TypeError, match="src_mask must have a bool dtype"):
        model(src, tgt, src_mask=torch.ones(3, 7))
    with pytest.raises(ValueError, match="src_mask must be right-padded"):
        model(src, tgt, src_mask=torch.tensor([[False] + [True] * 6] * 3))
    with pytest.raises(ValueError, match="src_mask row 1 has no real token"):
        model(src.index_fill(0, torch.tensor([1]), 0), tgt)
    memory = model.encode(src)
    with pytest.raises(ValueError, match="memory must have last dimension 12, got 5"):
        model.decode(tgt, memory[..., :5])
    with pytest.raises(ValueError, match="memory batch size 3 differs from tgt batch size 2"):
        model.decode(tgt[:2], memory)
    with pytest.raises(TypeError, match="cache must be an RNNCache"):
        model.decode(tgt, memory, cache=model.new_cache().__dict__)
    cache = model.new_cache()
    model.decode(tgt[:, :1], memory, cache=cache)
    with pytest.raises(ValueError, match="cache holds 3 rows but tgt has batch size 2"):
        model.decode(tgt[:2, 1:2], memory[:2], cache=cache)


# ---------------------------------------------------------------- the shared decoding protocol
@pytest.mark.parametrize("cell,attention", [("lstm", "additive"), ("gru", None)])
def test_generation_decodes_the_rnn_like_the_transformer(cell, attention):
    generation = pytest.importorskip("transformer_lib.generation")
    model = RNNSeq2Seq(small_cfg(cell=cell, attention=attention)).eval()
    src, _ = batch()
    cached = generation.greedy_translate(model, src, max_len=6)
    assert cached.shape[0] == 3 and cached.shape[1] <= 6
    assert torch.equal(cached, generation.greedy_translate(model, src, max_len=6, use_cache=False))
    assert torch.equal(generation.beam_search(model, src, beam_size=1, max_len=6), cached)
    assert generation.beam_search(model, src, beam_size=3, max_len=6).shape[0] == 3


@pytest.mark.gpu
@pytest.mark.parametrize("bidirectional", [True, False])  # packed (bidirectional) and unpacked encoders on cuDNN
def test_cuda_rnn_matches_cpu_and_cache(cuda, bidirectional):
    model = RNNSeq2Seq(small_cfg(cell="lstm", attention="additive", n_layers=2, bidirectional=bidirectional)).eval()
    src, tgt = batch()
    expected = model(src, tgt)
    model = model.to(cuda)
    src, tgt = src.to(cuda), tgt.to(cuda)
    torch.testing.assert_close(model(src, tgt).cpu(), expected, atol=1e-4, rtol=1e-4)
    memory, cache = model.encode(src), model.new_cache()
    steps = [model.decode(tgt[:, i:i + 1], memory, src != 0, cache=cache) for i in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1).cpu(), expected, atol=1e-4, rtol=1e-4)
