import inspect

import pytest
import torch

from transformer_lib.attention import attention_reference, causal_mask, padding_mask, scaled_dot_product_attention
from transformer_lib.blocks import DecoderBlock, EncoderBlock
from transformer_lib.efficient import (LinformerAttention, SparseAttention, attention_pairs,
                                       attention_pattern_density, blocked_sparse_attention, flops_per_layer,
                                       make_attention, random_links, sparse_pattern)
from transformer_lib.multihead import LayerCache, MultiHeadAttention

D, H = 16, 4


def copy_from(mha, layer):
    missing, unexpected = layer.load_state_dict(mha.state_dict(), strict=False)
    assert not unexpected
    return set(missing)


# ---------------------------------------------------------------------------------------------------- shapes / API
def test_shapes_and_factory():
    x = torch.randn(2, 10, D)
    lin = make_attention("linformer", D, H, seq_len=12, k=5).eval()
    out, w = lin(x, return_weights=True)
    assert out.shape == (2, 10, D) and w.shape == (2, H, 10, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 10))
    sp = make_attention("sparse", D, H, window=2, n_global=1, n_random=2).eval()
    out, w = sp(x, return_weights=True)
    assert out.shape == (2, 10, D) and w.shape == (2, H, 10, 10)
    assert (w[:, :, ~sp.pattern(10)] == 0).all()  # no weight outside the pattern
    assert type(make_attention("full", D, H)) is MultiHeadAttention
    assert make_attention("sparse", D, H, impl="blocked")(x).shape == (2, 10, D)


@pytest.mark.parametrize("cls", [LinformerAttention, SparseAttention])
def test_drop_in_signature_and_weights(cls):
    assert inspect.signature(cls.forward).parameters.keys() == \
        inspect.signature(MultiHeadAttention.forward).parameters.keys()
    layer = cls(D, H, 8) if cls is LinformerAttention else cls(D, H)
    missing = copy_from(MultiHeadAttention(D, H), layer)
    assert missing == ({"E", "F"} if cls is LinformerAttention else set())


def test_blocks_accept_efficient_attention():
    x = torch.randn(2, 12, D)
    enc = EncoderBlock(D, H, 32).eval()
    enc.attn = make_attention("linformer", D, H, seq_len=12, k=4)
    assert enc(x, mask=padding_mask(lengths=torch.tensor([12, 7]))).shape == (2, 12, D)
    dec = DecoderBlock(D, H, 32, cross_attention=False).eval()
    dec.self_attn = make_attention("sparse", D, H, window=2, n_global=1, n_random=1)
    assert dec(x).shape == (2, 12, D)


# ---------------------------------------------------------------------------------------------------- Linformer
def test_linformer_identity_projection_equals_full_attention():
    n = 9
    mha = MultiHeadAttention(D, H).eval()
    lin = LinformerAttention(D, H, seq_len=n, k=n).eval()
    copy_from(mha, lin)
    with torch.no_grad():
        lin.E.copy_(torch.eye(n))  # share_kv: F is E
    assert lin.F is lin.E
    x = torch.randn(3, n, D)
    want, want_w = mha(x, return_weights=True)
    got, got_w = lin(x, return_weights=True)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_w, want_w)
    torch.testing.assert_close(lin(x), want, atol=1e-5, rtol=1e-5)  # fused path too


def test_linformer_separate_projections_and_cross_attention():
    n = 6
    mha = MultiHeadAttention(D, H).eval()
    lin = LinformerAttention(D, H, seq_len=n, k=n, share_kv=False).eval()
    copy_from(mha, lin)
    with torch.no_grad():
        lin.E.copy_(torch.eye(n))
        lin.F.copy_(torch.eye(n)[torch.randperm(n)])  # permuting values and keys alike changes nothing…
    x, ctx = torch.randn(2, 4, D), torch.randn(2, n, D)
    assert lin.F is not lin.E
    assert not torch.allclose(lin(x, context=ctx), mha(x, context=ctx))  # …but permuting values alone does
    with torch.no_grad():
        lin.F.copy_(torch.eye(n))
    torch.testing.assert_close(lin(x, context=ctx), mha(x, context=ctx))


def test_linformer_short_sequence_uses_first_columns_and_padding_is_zeroed():
    lin = LinformerAttention(D, H, seq_len=16, k=4).eval()
    x = torch.randn(2, 10, D)
    short = lin(x[:, :6])  # S = 6 < seq_len: first 6 columns of E
    mask = padding_mask(lengths=torch.tensor([6, 6]), max_len=10)
    padded = lin(x, mask=mask)
    torch.testing.assert_close(padded[:, :6], short)  # padding never reaches the projected keys
    x2 = x.clone()
    x2[:, 6:] = 100 * torch.randn(2, 4, D)
    torch.testing.assert_close(lin(x2, mask=mask)[:, :6], padded[:, :6])  # padded queries may change


@pytest.mark.parametrize("n", [16, 64])
def test_linformer_scores_are_n_by_k_against_projected_keys(n):
    """``softmax(q (E k)ᵀ / √Dh) (F v)`` with the layer's own random E ≠ F: an (n, k) score matrix per head,
    so the cost grows linearly in n for a fixed k."""
    lin = LinformerAttention(D, H, seq_len=64, k=8, share_kv=False).eval()
    x = torch.randn(2, n, D)
    out, w = lin(x, return_weights=True)
    dh = D // H
    q, k, v = (p.view(2, n, H, dh).transpose(1, 2) for p in lin.in_proj(x).split(D, dim=-1))  # (B, H, n, Dh)
    k, v = lin.E[:, :n] @ k, lin.F[:, :n] @ v  # (B, H, 8, Dh): 8 projected positions whatever n is
    want_w = torch.softmax(q @ k.transpose(-1, -2) / dh ** 0.5, dim=-1)
    assert w.shape == (2, H, n, 8)
    torch.testing.assert_close(w, want_w)
    want = lin.out_proj((want_w @ v).transpose(1, 2).reshape(2, n, D))
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lin(x), want, atol=1e-5, rtol=1e-5)  # fused path too
    assert attention_pairs("linformer", n, k=8) == 8 * n


# ---------------------------------------------------------------------------------------------------- patterns
def test_sparse_pattern_properties():
    n, w, g, r = 40, 3, 2, 3
    local_global = sparse_pattern(n, w, g)
    assert torch.equal(local_global, local_global.T)  # symmetric without random links
    assert local_global[:g].all() and local_global[:, :g].all()  # global rows and columns
    assert (local_global.sum(1) >= w + 1).all()
    i = torch.arange(n)
    assert local_global[i, i].all() and local_global[i[:-w], i[:-w] + w].all()
    assert not local_global[10, 10 + w + 1]
    full = sparse_pattern(n, w, g, r, seed=5)
    assert (full & local_global).equal(local_global)
    extra = (full & ~local_global).sum(1)
    candidates = n - local_global.sum(1)
    assert torch.equal(extra, torch.minimum(candidates, torch.tensor(r)))  # exactly r links where possible
    assert torch.equal(full, sparse_pattern(n, w, g, r, seed=5))  # deterministic
    assert not torch.equal(full, sparse_pattern(n, w, g, r, seed=6))
    idx, valid = random_links(n, w, g, r, seed=5)
    assert idx.shape == valid.shape == (n, r) and not valid[:g].any() and valid[g:].all()


def test_causal_pattern_is_lower_triangular_and_prefix_stable():
    n = 30
    p = sparse_pattern(n, 2, 1, 3, seed=1, causal=True)
    assert not (p & ~causal_mask(n)).any()
    assert ((p & ~sparse_pattern(n, 2, 1, 0, causal=True)).sum(1)[6:] == 3).all()  # links drawn from the past
    assert torch.equal(sparse_pattern(17, 2, 1, 3, seed=1, causal=True), p[:17, :17])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,w,g,r", [(1, 0, 0, 0), (25, 3, 2, 4), (25, 30, 1, 2), (40, 0, 0, 5), (33, 4, 40, 1)])
def test_pairs_count_matches_pattern(n, w, g, r, causal):
    p = sparse_pattern(n, w, g, r, causal=causal)
    assert attention_pairs("sparse", n, window=w, n_global=g, n_random=r, causal=causal) == int(p.sum())
    assert attention_pattern_density("sparse", n, window=w, n_global=g, n_random=r, causal=causal) == \
        pytest.approx(p.float().mean().item())
    assert SparseAttention(D, H, w, g, r).density(n, causal) == pytest.approx(p.float().mean().item())


# ---------------------------------------------------------------------------------------------------- sparse layer
def test_sparse_with_wide_window_equals_full_attention():
    mha = MultiHeadAttention(D, H).eval()
    sp = SparseAttention(D, H, window=12, n_global=0, n_random=0).eval()
    copy_from(mha, sp)
    x = torch.randn(2, 12, D)
    mask = padding_mask(lengths=torch.tensor([12, 8]))
    torch.testing.assert_close(sp(x, mask=mask), mha(x, mask=mask))
    torch.testing.assert_close(sp(x, return_weights=True)[1], mha(x, return_weights=True)[1])
    torch.testing.assert_close(sp(x, causal=True), mha(x, causal=True))


def test_sparse_padding_does_not_change_real_tokens():
    sp = SparseAttention(D, H, window=2, n_global=1, n_random=2).eval()
    x = torch.randn(2, 14, D)
    mask = padding_mask(lengths=torch.tensor([9, 14]))
    out = sp(x, mask=mask)
    x2 = x.clone()
    x2[0, 9:] = 50 * torch.randn(5, D)
    torch.testing.assert_close(sp(x2, mask=mask)[0, :9], out[0, :9])
    local = SparseAttention(D, H, window=2, n_global=1, n_random=0).eval()  # no length-dependent links
    torch.testing.assert_close(local(x, mask=mask)[0, :9], local(x[:1, :9])[0])


@pytest.mark.parametrize("impl", ["dense", "blocked"])
def test_causal_sparse_output_ignores_the_future(impl):
    sp = SparseAttention(D, H, window=2, n_global=2, n_random=2, impl=impl, block=4).eval()
    x = torch.randn(1, 20, D)
    out = sp(x, causal=True)
    x2 = x.clone()
    x2[:, 11:] = torch.randn(1, 9, D)
    torch.testing.assert_close(sp(x2, causal=True)[:, :11], out[:, :11])
    assert not torch.allclose(sp(x2, causal=True)[:, 11:], out[:, 11:])


@pytest.mark.parametrize("options, prompt", [
    (dict(window=2, n_global=1, n_random=2, seed=3), 4),
    (dict(window=1, n_global=0, n_random=1, seed=2, global_positions=(3,)), 5),   # a fixed global position
])
def test_sparse_kv_cache_decoding_equals_full_sequence(options, prompt):
    """A prompt of `prompt` tokens, then one token a step through the cache: the outputs of the full sequence."""
    sp = SparseAttention(D, H, **options).eval()
    x = torch.randn(2, 12, D)
    full = sp(x, causal=True)
    cache = LayerCache()
    steps = [sp(x[:, :prompt], causal=True, cache=cache)] + [sp(x[:, i:i + 1], causal=True, cache=cache)
                                                               for i in range(prompt, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("chunk", [512, 1])  # one step, or one block per step
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t,w,g,r,block", [(37, 3, 2, 4, None), (64, 16, 0, 0, 16), (50, 5, 3, 0, 8),
                                           (33, 0, 1, 5, 4), (20, 25, 2, 3, None), (5, 1, 0, 2, 2)])
def test_blocked_equals_dense_masked(t, w, g, r, block, causal, chunk):
    q, k, v = torch.randn(3, 2, 3, t, 8).unbind(0)
    mask = padding_mask(lengths=torch.tensor([t, max(1, t - 6)]), max_len=t)
    want = scaled_dot_product_attention(q, k, v, mask=sparse_pattern(t, w, g, r, seed=2, causal=causal) & mask)
    links = random_links(t, w, g, r, seed=2, causal=causal)
    got = blocked_sparse_attention(q, k, v, w, g, links=links, causal=causal, mask=mask, block=block, chunk=chunk)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_honours_a_custom_scale(causal):
    """A non-default ``scale`` reaches both the blocked rows and the dense global rows."""
    t, w, g, r = 37, 3, 2, 4
    q, k, v = torch.randn(3, 2, 3, t, 8).unbind(0)
    links = random_links(t, w, g, r, seed=2, causal=causal)
    got = blocked_sparse_attention(q, k, v, w, g, links=links, causal=causal, block=8, scale=0.9)
    want, _ = attention_reference(q, k, v, mask=sparse_pattern(t, w, g, r, seed=2, causal=causal), scale=0.9)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-5)


def test_blocked_layer_equals_dense_layer_forward_and_backward():
    dense = SparseAttention(D, H, window=3, n_global=2, n_random=2)
    blocked = SparseAttention(D, H, window=3, n_global=2, n_random=2, impl="blocked", block=4)
    copy_from(dense, blocked)
    x = torch.randn(2, 23, D, requires_grad=True)
    mask = padding_mask(lengths=torch.tensor([23, 17]))
    outs, grads = [], []
    for layer in (dense, blocked):
        out = layer(x, mask=mask)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append((x.grad.clone(), layer.in_proj.weight.grad.clone()))
        x.grad = None
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)


def test_backward_linformer():
    lin = LinformerAttention(D, H, seq_len=10, k=4, share_kv=False)
    lin(torch.randn(2, 10, D), mask=padding_mask(lengths=torch.tensor([10, 5]))).sum().backward()
    for p in (lin.E, lin.F, lin.in_proj.weight, lin.out_proj.weight):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------------------- FLOPs
def test_flops_scaling():
    d = 64
    full1, full2 = flops_per_layer("full", 512, d), flops_per_layer("full", 1024, d)
    assert full2["scores"] == 4 * full1["scores"] == 4 * 2 * 512 * 512 * d
    assert full2["projections"] == 2 * full1["projections"] == 2 * 8 * 512 * d * d
    lin1, lin2 = flops_per_layer("linformer", 512, d, k=32), flops_per_layer("linformer", 1024, d, k=32)
    assert lin2["attention"] == 2 * lin1["attention"]
    assert lin1["seq_proj"] == 4 * 32 * 512 * d
    sp1 = flops_per_layer("sparse", 512, d, window=8, n_global=2, n_random=3)
    sp2 = flops_per_layer("sparse", 1024, d, window=8, n_global=2, n_random=3)
    assert 1.9 < sp2["scores"] / sp1["scores"] < 2.1  # about linear
    f = flops_per_layer("full", 100, d, causal=True)
    assert f["total"] == f["attention"] + f["projections"] and f["scores"] == 2 * 5050 * d
    assert f["feed_forward"] == 0


@pytest.mark.parametrize("n, d, d_ff", [(16, 32, 64), (40, 24, 96), (7, 8, 8)])
def test_flops_per_layer_counts_what_torch_counts(n, d, d_ff):
    """The formula against PyTorch's own FLOP counter on a whole encoder block, and on its attention alone."""
    from torch.utils.flop_counter import FlopCounterMode

    from transformer_lib.blocks import EncoderBlock

    block = EncoderBlock(d, 4, d_ff=d_ff).eval()
    x = torch.randn(2, n, d)  # two sequences: twice the per-sequence count
    for module, want in ((block, flops_per_layer("full", n, d, d_ff=d_ff)["total"]),
                         (block.attn, flops_per_layer("full", n, d)["total"])):
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            module(x, return_weights=True)  # the reference path: every product a counted matmul
        assert counter.get_total_flops() == 2 * want, (type(module).__name__, counter.get_total_flops(), want)
    with pytest.raises(ValueError, match="d_ff must be a positive int, got 0"):
        flops_per_layer("full", n, d, d_ff=0)


# ---------------------------------------------------------------------------------------------------- bad inputs
def test_bad_inputs():
    lin = LinformerAttention(D, H, seq_len=8, k=4)
    with pytest.raises(ValueError, match="sequence length 9 is longer than .*seq_len=8"):
        lin(torch.randn(1, 9, D))
    with pytest.raises(ValueError, match="causal=True"):
        lin(torch.randn(1, 8, D), causal=True)
    with pytest.raises(ValueError, match="cache"):
        lin(torch.randn(1, 8, D), cache=LayerCache())
    with pytest.raises(ValueError, match="keys only"):
        lin(torch.randn(1, 8, D), mask=causal_mask(8))
    with pytest.raises(ValueError, match="last dimension 16"):
        lin(torch.randn(1, 8, 5))
    with pytest.raises(ValueError, match="window must be a non-negative int, got -1"):
        SparseAttention(D, H, window=-1)
    with pytest.raises(ValueError, match="n_random"):
        sparse_pattern(10, 2, n_random=-3)
    with pytest.raises(TypeError, match="n_global must be an int"):
        SparseAttention(D, H, n_global=1.5)
    with pytest.raises(ValueError, match="block must be >= window"):
        SparseAttention(D, H, window=8, block=4)
    with pytest.raises(ValueError, match="impl must be one of"):
        SparseAttention(D, H, impl="flash")
    sp = SparseAttention(D, H, window=2)
    with pytest.raises(ValueError, match="self-attention only"):
        sp(torch.randn(1, 5, D), context=torch.randn(1, 6, D))
    with pytest.raises(ValueError, match="causal=True"):
        sp(torch.randn(1, 5, D), cache=LayerCache())
    with pytest.raises(ValueError, match="does not broadcast"):
        sp(torch.randn(1, 5, D), mask=torch.ones(1, 1, 1, 6, dtype=torch.bool))
    q = torch.randn(1, 1, 6, 4)
    with pytest.raises(ValueError, match="self-attention"):
        blocked_sparse_attention(q, torch.randn(1, 1, 7, 4), torch.randn(1, 1, 7, 4), window=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_attention("performer", D, H)
    with pytest.raises(ValueError, match="needs seq_len"):
        make_attention("linformer", D, H)
    with pytest.raises(ValueError, match="needs k="):
        flops_per_layer("linformer", 10, D)
    with pytest.raises(ValueError, match="causal"):
        attention_pairs("linformer", 10, k=2, causal=True)


# ---------------------------------------------------------------------------------------- global tokens by position
def test_global_positions_pattern():
    """A global position attends to every key and is attended by every query (Longformer's task global)."""
    n, w = 20, 1
    p = sparse_pattern(n, w, n_global=1, global_positions=(-1, 7))
    for pos in (0, 7, n - 1):
        assert p[pos].all() and p[:, pos].all()
    plain = sparse_pattern(n, w, n_global=1)
    extra = p & ~plain
    i, j = extra.nonzero().unbind(1)
    assert extra.any() and all(a in (7, n - 1) or b in (7, n - 1) for a, b in zip(i.tolist(), j.tolist()))
    assert torch.equal(p, sparse_pattern(n, w, n_global=1, global_positions=(n - 1, 7, 7)))  # -1 is n - 1
    assert torch.equal(sparse_pattern(n, w, n_global=2), sparse_pattern(n, w, global_positions=(0, 1)))
    idx, valid = random_links(n, w, 1, 3, seed=4, global_positions=(-1,))
    assert not (valid & (idx == n - 1)).any()  # no random link duplicates a global key


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,w,g,r,glob", [(25, 3, 1, 4, (-1,)), (25, 2, 0, 2, (0, 12, -1)), (9, 30, 2, 1, (5,)),
                                          (40, 0, 0, 5, (-3, -2))])
def test_pairs_count_matches_pattern_with_global_positions(n, w, g, r, glob, causal):
    p = sparse_pattern(n, w, g, r, causal=causal, global_positions=glob)
    assert attention_pairs("sparse", n, window=w, n_global=g, n_random=r, causal=causal,
                           global_positions=glob) == int(p.sum())
    assert SparseAttention(D, H, w, g, r, global_positions=glob).density(n, causal) == \
        pytest.approx(p.float().mean().item())
    flops = flops_per_layer("sparse", n, D, window=w, n_global=g, n_random=r, causal=causal, global_positions=glob)
    assert flops["scores"] == 2 * int(p.sum()) * D


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t,w,g,r,glob,block", [(37, 3, 1, 4, (-1,), None), (50, 5, 0, 0, (10, -1), 8),
                                                (20, 2, 2, 3, (1, 19), 4)])
def test_blocked_equals_dense_with_global_positions(t, w, g, r, glob, block, causal):
    q, k, v = torch.randn(3, 2, 3, t, 8).unbind(0)
    mask = padding_mask(lengths=torch.tensor([t, t - 4]), max_len=t)
    pattern = sparse_pattern(t, w, g, r, seed=2, causal=causal, global_positions=glob)
    want = scaled_dot_product_attention(q, k, v, mask=pattern & mask)
    links = random_links(t, w, g, r, seed=2, causal=causal, global_positions=glob)
    got = blocked_sparse_attention(q, k, v, w, g, links=links, causal=causal, mask=mask, block=block, chunk=8,
                                   global_positions=glob)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-5)


def test_layer_with_a_global_last_token():
    """The last token made global reads the whole sequence: its output equals full attention's last row."""
    mha = MultiHeadAttention(D, H).eval()
    dense = SparseAttention(D, H, window=1, n_global=0, n_random=0, global_positions=(-1,)).eval()
    blocked = SparseAttention(D, H, window=1, n_global=0, n_random=0, global_positions=(-1,), impl="blocked").eval()
    copy_from(mha, dense)
    copy_from(mha, blocked)
    x = torch.randn(2, 30, D)
    torch.testing.assert_close(dense(x)[:, -1], mha(x)[:, -1])
    torch.testing.assert_close(blocked(x), dense(x), atol=2e-6, rtol=1e-5)
    assert not torch.allclose(dense(x)[:, 5], mha(x)[:, 5])  # other rows stay local
    assert "global_positions=(-1,)" in repr(dense)
    with pytest.raises(ValueError, match=r"global_positions must lie in \[-seq_len, seq_len\) = \[-5, 5\), got 9"):
        SparseAttention(D, H, window=1, global_positions=(9,))(torch.randn(1, 5, D))


def test_global_positions_bad_input():
    with pytest.raises(TypeError, match="global_positions must be a sequence of ints .* got int 3"):
        sparse_pattern(10, 2, global_positions=3)
    with pytest.raises(TypeError, match="global_positions must hold ints, got float 1.5"):
        SparseAttention(D, H, global_positions=(1.5,))
    with pytest.raises(ValueError, match=r"global_positions must lie in .* = \[-10, 10\), got -11"):
        attention_pairs("sparse", 10, window=1, global_positions=(-11,))
    with pytest.raises(ValueError, match="got 10"):
        random_links(10, 1, global_positions=(10,))
    with pytest.raises(ValueError, match=r"a cache needs non-negative global_positions .* got global_positions=\(-1,\)"):
        SparseAttention(D, H, window=1, global_positions=(-1,))(torch.randn(1, 4, D), causal=True, cache=LayerCache())
