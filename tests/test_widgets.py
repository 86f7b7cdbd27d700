"""Tests for transformer_lib.widgets: the numbers each explorer shows, and that each widget builds its first view."""
import base64
import math
import sys

import numpy as np
import pytest
import torch

from transformer_lib import widgets as W
from transformer_lib.attention import causal_mask
from transformer_lib.blocks import AttentionWeights
from transformer_lib.positional import sinusoidal_table

ipywidgets = pytest.importorskip("ipywidgets")

TOKENS = "the students took the course and learned".split()
T = len(TOKENS)


def _weights(*shape):
    return torch.softmax(torch.randn(*shape), dim=-1)


def _kinds(box):
    """MIME types / stream names of the explorer's current view."""
    kinds = []
    for out in box.out.outputs:
        kinds += list(out["data"]) if out["output_type"] == "display_data" else [out["name"]]
    return kinds


def _png(box) -> bytes:
    return next(base64.b64decode(o["data"]["image/png"]) for o in box.out.outputs if "data" in o
                and "image/png" in o["data"])


def _text(box) -> str:
    return "".join(o.get("text", "") for o in box.out.outputs)


def _assert_first_view(box, text=True):
    assert isinstance(box, ipywidgets.VBox)
    assert box.children[-1] is box.out and isinstance(box.out, ipywidgets.Output)
    assert list(box.children[:-1]) == list(box.controls.values())
    assert len(box.out.outputs) >= 1
    assert _png(box).startswith(b"\x89PNG")
    if text:
        assert "stdout" in _kinds(box) and _text(box).strip()


# ---------------------------------------------------------------------------------------------------------------
# 1. query attention
# ---------------------------------------------------------------------------------------------------------------
def test_query_attention_picks_one_row_that_sums_to_one():
    w = _weights(3, T, T)
    row = W.query_attention(w, 2, head=1)
    assert row.shape == (T,)
    np.testing.assert_allclose(row, w[1, 2].double().numpy())
    assert row.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(W.query_attention(w[0].numpy(), 4), w[0, 4].double().numpy(), rtol=1e-6)


def test_query_attention_rejects_bad_input():
    w = _weights(2, T, T)
    with pytest.raises(ValueError, match="query_index"):
        W.query_attention(w, T)
    with pytest.raises(ValueError, match="head"):
        W.query_attention(w, 0, head=2)
    with pytest.raises(ValueError, match="weights must have 2 or 3 dimensions"):
        W.query_attention(w[None], 0)
    with pytest.raises(TypeError, match="weights must be a torch.Tensor, a numpy array or a .* sequence of numbers"):
        W.query_attention([[1.0], [0.5, 0.5]], 0)
    with pytest.raises(TypeError, match="weights must hold real numbers, got dtype torch.bool"):
        W.query_attention(torch.ones(2, 2, dtype=torch.bool), 0)
    np.testing.assert_array_equal(W.query_attention([[1.0, 0.0], [0.5, 0.5]], 1), [0.5, 0.5])  # nested lists too


def test_attention_explorer_controls_and_first_view():
    w = _weights(4, T, T)
    box = W.attention_explorer(TOKENS, w)
    _assert_first_view(box)
    query, head = box.controls["query"], box.controls["head"]
    assert isinstance(query, ipywidgets.Dropdown) and isinstance(head, ipywidgets.IntSlider)
    assert [v for _, v in query.options] == list(range(T)) and query.options[1][0] == "1: students"
    assert (head.min, head.max) == (0, 3)
    first = _png(box)
    query.value = T - 1
    assert _png(box) != first and "strongest key" in _text(box)


def test_attention_explorer_2d_and_cross_attention():
    box = W.attention_explorer(TOKENS, _weights(T, T))
    assert list(box.controls) == ["query"]
    cross = W.attention_explorer(TOKENS, _weights(T, 3), key_tokens=["a", "b", "c"])
    _assert_first_view(cross)
    with pytest.raises(ValueError, match="key_tokens"):
        W.attention_explorer(TOKENS, _weights(T, 3))
    with pytest.raises(ValueError, match="tokens has 6 tokens but the query axis of weights has 7"):
        W.attention_explorer(TOKENS[:-1], _weights(T, T))


# ---------------------------------------------------------------------------------------------------------------
# 2. bare self-attention
# ---------------------------------------------------------------------------------------------------------------
def _hand_made(seed=0):
    # Unrelated words: nearly orthogonal directions, so x_i·x_i (a squared norm) beats every x_i·x_j.
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, 16, generator=g) * 0.6


def test_self_attention_identity_puts_most_weight_on_the_diagonal():
    x = _hand_made()
    identity = W.self_attention_weights(x, "identity")
    assert identity.shape == (T, T)
    np.testing.assert_allclose(identity.sum(-1), 1.0)
    assert np.diag(identity).mean() > 0.5
    assert (identity.argmax(-1) == np.arange(T)).all()
    random = np.mean([np.diag(W.self_attention_weights(x, "random", seed=s)).mean() for s in range(5)])
    assert random < np.diag(identity).mean()
    sharper = W.self_attention_weights(x, "identity", scale=3.0)
    assert np.diag(sharper).mean() > np.diag(identity).mean()
    again = W.self_attention_weights(x, "random", seed=3)
    np.testing.assert_allclose(W.self_attention_weights(x, "random", seed=3), again)


def test_self_attention_weights_matches_the_formula():
    x = _hand_made().double()
    expected = torch.softmax(0.5 * x @ x.T, dim=-1).numpy()
    np.testing.assert_allclose(W.self_attention_weights(x, scale=0.5), expected)


def test_self_attention_weights_rejects_bad_input():
    with pytest.raises(ValueError, match="projection"):
        W.self_attention_weights(_hand_made(), "learned")
    with pytest.raises(ValueError, match="scale"):
        W.self_attention_weights(_hand_made(), scale=0.0)
    with pytest.raises(ValueError, match="embeddings must have 2 dimensions"):
        W.self_attention_weights(torch.randn(T), scale=1.0)


def test_self_attention_explorer():
    box = W.self_attention_explorer(TOKENS, _hand_made())
    _assert_first_view(box)
    assert box.controls["word"].value == T - 1
    assert [v for _, v in box.controls["projection"].options] == ["identity", "random"]
    scale = box.controls["scale"]
    assert isinstance(scale, ipywidgets.FloatLogSlider) and (scale.min, scale.max) == (-1, 1)
    assert "on itself" in _text(box)
    box.controls["projection"].value = "random"
    assert "on itself" in _text(box)
    with pytest.raises(ValueError, match="tokens has"):
        W.self_attention_explorer(TOKENS[:3], _hand_made())


# ---------------------------------------------------------------------------------------------------------------
# 3. sinusoidal positions
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0, 7, 31])
def test_position_similarity_peaks_at_p(p):
    sims = W.position_similarity(32, 16, p)
    assert sims.shape == (32,)
    assert int(sims.argmax()) == p
    assert sims[p] == pytest.approx(8.0)  # d/2: each (sin, cos) pair contributes 1
    table = sinusoidal_table(32, 16).double()
    np.testing.assert_allclose(sims, (table @ table[p]).numpy())
    assert W.position_similarity(32, 16, p, normalize=True)[p] == pytest.approx(1.0)


def test_position_similarity_depends_only_on_the_offset():
    a, b = W.position_similarity(40, 32, 5), W.position_similarity(40, 32, 15)
    np.testing.assert_allclose(a[5:25], b[15:35], atol=1e-9)
    with pytest.raises(ValueError, match="p must be in"):
        W.position_similarity(10, 8, 10)
    with pytest.raises(ValueError, match="even"):
        W.position_similarity(10, 7, 1)


def test_sinusoidal_explorer_keeps_p_within_length():
    box = W.sinusoidal_explorer(max_len=40, max_d=33)
    _assert_first_view(box)
    d_model, length, p = (box.controls[k] for k in ("d_model", "length", "p"))
    assert (d_model.min, d_model.max, d_model.step) == (2, 32, 2)
    assert (length.max, p.max) == (40, length.value - 1)
    p.value = 39
    length.value = 10
    assert p.max == 9 and p.value == 9
    assert "PE[9]·PE[9] = " in _text(box)


# ---------------------------------------------------------------------------------------------------------------
# 4. masks
# ---------------------------------------------------------------------------------------------------------------
def test_mask_for_kinds():
    n = 6
    assert torch.equal(W.mask_for("causal", n), torch.ones(n, n, dtype=torch.bool).tril())
    assert torch.equal(W.mask_for("causal", n), causal_mask(n))
    assert W.mask_for("none", n).all()
    pad = W.mask_for("padding", n, length=4)
    assert pad.shape == (n, n) and pad[:, :4].all() and not pad[:, 4:].any()
    assert torch.equal(W.mask_for("causal+padding", n, length=4), pad & causal_mask(n))
    sliding = W.mask_for("sliding", n, window=2)
    assert [W.visible_positions(sliding, i) for i in (0, 3)] == [[0], [2, 3]]
    local = W.mask_for("local", n, window=1)
    assert W.visible_positions(local, 3) == [2, 3, 4] and torch.equal(local, local.T)


def test_mask_for_rejects_bad_input():
    with pytest.raises(ValueError, match="kind"):
        W.mask_for("future", 4)
    with pytest.raises(ValueError, match="needs length"):
        W.mask_for("padding", 4)
    with pytest.raises(ValueError, match="needs window"):
        W.mask_for("sliding", 4)
    with pytest.raises(ValueError, match="at most n"):
        W.mask_for("padding", 4, length=5)


def test_visible_positions():
    mask = causal_mask(5)
    assert [W.visible_positions(mask, i) for i in range(5)] == [list(range(i + 1)) for i in range(5)]
    with pytest.raises(ValueError, match="i must be in"):
        W.visible_positions(mask, 5)
    with pytest.raises(TypeError, match="bool"):
        W.visible_positions(mask.float(), 0)


def test_mask_for_windows_are_the_sparse_patterns():
    from transformer_lib.efficient import sparse_pattern
    for n in (1, 5, 9):
        for window in (1, 2, 4, n + 1):
            assert torch.equal(W.mask_for("local", n, window=window), sparse_pattern(n, window))
            assert torch.equal(W.mask_for("sliding", n, window=window), sparse_pattern(n, window - 1, causal=True))


def test_plot_mask_draws_the_mask_with_its_query_row_outlined():
    from matplotlib.patches import Rectangle
    mask = W.mask_for("causal+padding", 5, length=3)
    ax = W.plot_mask(mask, 2, list("abcde"), "title").axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), mask.numpy().astype(float))
    boxes = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert [(b.get_xy(), b.get_width()) for b in boxes] == [((-0.5, 1.5), 5)]
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("title", "key j", "query i")
    with pytest.raises(ValueError, match="i must be in"):
        W.plot_mask(mask, 5)


def test_mask_explorer():
    box = W.mask_explorer(tokens=TOKENS)
    _assert_first_view(box)
    kind, length, window, i = (box.controls[k] for k in ("kind", "length", "window", "i"))
    assert list(kind.options) == list(W.MASK_KINDS)
    assert (length.min, length.max, i.max) == (1, T, T - 1)
    assert length.disabled and window.disabled
    assert f"sees {T} of {T} keys" in _text(box)
    kind.value = "causal+padding"
    assert not length.disabled and window.disabled
    length.value = 3
    assert "sees 3 of 7 keys: [0, 1, 2]" in _text(box) and "the students took" in _text(box)
    assert W.mask_explorer(n=4).controls["i"].max == 3


# ---------------------------------------------------------------------------------------------------------------
# 5. softmax scaling
# ---------------------------------------------------------------------------------------------------------------
def test_softmax_stats_basic():
    stats = W.softmax_stats(64, scaled=True, n_keys=10, seed=1)
    assert stats["weights"].shape == (10,) and stats["weights"].sum() == pytest.approx(1.0)
    assert stats["max_weight"] == pytest.approx(stats["weights"].max())
    assert 0 <= stats["entropy"] <= math.log(10)
    raw = W.softmax_stats(64, scaled=False, n_keys=10, seed=1)
    np.testing.assert_allclose(raw["scores"] / 8.0, stats["scores"])


def test_unscaled_softmax_saturates_with_d_k_scaled_does_not():
    seeds = range(20)

    def mean(key, d_k, scaled):
        return np.mean([W.softmax_stats(d_k, scaled, 16, s)[key] for s in seeds])

    assert mean("max_weight", 4, False) < mean("max_weight", 64, False) < mean("max_weight", 1024, False)
    assert mean("max_weight", 1024, False) > 0.9 and mean("entropy", 1024, False) < 0.3
    for d_k in (4, 64, 1024):
        assert mean("max_weight", d_k, True) < 0.5
        assert mean("entropy", d_k, True) > 1.5
    # Var(qᵀk) = d_k without scaling, 1 with it.
    raw = np.concatenate([W.softmax_stats(256, False, 16, s)["scores"] for s in seeds])
    assert raw.var() == pytest.approx(256, rel=0.3)


def test_softmax_temperature_explorer():
    box = W.softmax_temperature_explorer(n_keys=8, max_d_k=256)
    _assert_first_view(box)
    assert list(box.controls["d_k"].options) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    box.controls["d_k"].value = 256
    assert "d_k = 256" in _text(box)


# ---------------------------------------------------------------------------------------------------------------
# 6. heads
# ---------------------------------------------------------------------------------------------------------------
def test_head_weights_from_a_tensor_and_from_a_model():
    w = _weights(2, 3, T, T)
    np.testing.assert_allclose(W.head_weights(w, 1, 2), w[1, 2].double().numpy())
    from transformer_lib.models import Encoder, EncoderConfig
    model = Encoder(EncoderConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=2, d_ff=32)).eval()
    with torch.no_grad():
        _, layers = model(torch.randint(4, 20, (1, T)), return_weights=True)
    grid = W.head_weights(layers, 1, 1)
    np.testing.assert_allclose(grid, layers.self_attn[1][0, 1].double().numpy())
    np.testing.assert_allclose(grid.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(W.head_weights(list(layers.self_attn), 1, 1), grid)
    with pytest.raises(ValueError, match="batch size 2"):
        W.head_weights([torch.cat([layers.self_attn[0]] * 2)], 0, 0)
    both = AttentionWeights(self_attn=layers.self_attn, cross_attn=layers.self_attn)
    with pytest.raises(ValueError, match=r"2 kinds of attention \(self_attn, cross_attn\); pass one"):
        W.head_weights(both, 0, 0)
    with pytest.raises(ValueError, match="layer must be in"):
        W.head_weights(w, 2, 0)


def test_heads_explorer():
    box = W.heads_explorer(TOKENS, _weights(3, 4, T, T))
    _assert_first_view(box)
    layer, head = box.controls["layer"], box.controls["head"]
    assert (layer.max, head.max) == (2, 3)
    first = _png(box)
    head.value = 3
    assert _png(box) != first
    with pytest.raises(ValueError, match="tokens has"):
        W.heads_explorer(TOKENS[:2], _weights(3, 4, T, T))


# ---------------------------------------------------------------------------------------------------------------
# 7. sampling
# ---------------------------------------------------------------------------------------------------------------
def test_next_token_distribution_top_k_and_temperature():
    logits = torch.randn(50)
    probs = W.next_token_distribution(logits, 0.7, top_k=5)
    assert probs.sum() == pytest.approx(1.0) and (probs > 0).sum() == 5
    top = torch.topk(logits, 5).indices
    expected = torch.softmax(logits.double()[top] / 0.7, dim=0).numpy()
    np.testing.assert_allclose(probs[top.numpy()], expected)
    np.testing.assert_allclose(W.next_token_distribution(logits), torch.softmax(logits.double(), 0).numpy())
    assert (W.next_token_distribution(logits, 1.0, 0) > 0).all()  # 0 = no restriction
    greedy = W.next_token_distribution(logits, 0.0)
    assert greedy[int(logits.argmax())] == 1.0 and greedy.sum() == 1.0
    cold = W.next_token_distribution(logits, 1e-3)
    np.testing.assert_allclose(cold, greedy, atol=1e-6)
    hot = W.next_token_distribution(logits, 1e4, top_k=4)
    assert np.allclose(hot[hot > 0], 0.25, atol=1e-3)


def test_next_token_distribution_matches_generation_sampling():
    gen = pytest.importorskip("transformer_lib.generation")
    if not all(hasattr(gen, f) for f in ("apply_temperature", "top_k_filter", "sample_top_k")):
        pytest.skip("generation.py does not expose apply_temperature / top_k_filter / sample_top_k")
    logits = torch.randn(12, dtype=torch.float64)
    probs = W.next_token_distribution(logits, 0.8, top_k=4)
    filtered = gen.top_k_filter(gen.apply_temperature(logits[None], 0.8), 4)
    np.testing.assert_allclose(probs, torch.softmax(filtered, dim=-1)[0].numpy(), atol=1e-12)
    draws = gen.sample_top_k(logits.float().expand(20000, 12), 4, 0.8, torch.Generator().manual_seed(0))
    freq = np.bincount(draws.numpy(), minlength=12) / 20000
    np.testing.assert_allclose(freq, probs, atol=0.015)


def test_next_token_distribution_rejects_bad_input():
    with pytest.raises(ValueError, match="temperature"):
        W.next_token_distribution(torch.randn(5), -1.0)
    with pytest.raises(ValueError, match="top_k"):
        W.next_token_distribution(torch.randn(5), 1.0, -2)
    with pytest.raises(ValueError, match="logits must have 1 dimensions"):
        W.next_token_distribution(torch.randn(2, 5))


def test_sampling_explorer():
    vocab = list("abcdefghij")
    box = W.sampling_explorer(torch.randn(10), vocab)
    _assert_first_view(box)
    temperature, top_k = box.controls["temperature"], box.controls["top_k"]
    assert (temperature.min, temperature.max, temperature.value) == (0.0, 3.0, 1.0)
    assert (top_k.min, top_k.max) == (0, 10)
    top_k.value = 3
    assert "3 of 10 tokens can be drawn" in _text(box)
    temperature.value = 0.0
    assert "p = 1.00" in _text(box)
    with pytest.raises(ValueError, match="vocab has 9"):
        W.sampling_explorer(torch.randn(10), vocab[:9])


# ---------------------------------------------------------------------------------------------------------------
# 8. cost
# ---------------------------------------------------------------------------------------------------------------
def test_attention_cost_is_quadratic_in_n():
    a, b = W.attention_cost(512, 256), W.attention_cost(1024, 256)
    assert b["score_bytes"] == 4 * a["score_bytes"] and b["score_flops"] == 4 * a["score_flops"]
    assert b["projection_flops"] == 2 * a["projection_flops"] and b["ffn_flops"] == 2 * a["ffn_flops"]
    assert W.attention_cost(512, 512, n_heads=8)["score_bytes"] == 8 * 512 * 512 * 4  # 8 MiB in float32
    assert W.attention_cost(512, 512, bytes_per=2)["score_bytes"] == 512 * 512 * 2
    c = W.attention_cost(100, 64)
    assert c["ffn_flops"] == 4 * 100 * 64 * 256  # d_ff defaults to 4d
    assert c["total_flops"] == c["attention_flops"] + c["ffn_flops"]
    n = c["crossover_n"]
    at = W.attention_cost(n, 64)
    assert at["score_flops"] + at["mix_flops"] == at["projection_flops"] + at["ffn_flops"]
    assert W.attention_cost(4 * n, 64)["quadratic_share"] > 0.5 > W.attention_cost(n // 4, 64)["quadratic_share"]
    with pytest.raises(ValueError, match="n must be a positive int"):
        W.attention_cost(0, 64)


def test_cost_explorer():
    box = W.cost_explorer()
    _assert_first_view(box)
    assert list(box.controls["n"].options) == [2 ** i for i in range(4, 18)]
    assert box.controls["d"].value == 512
    box.controls["n"].value = 2 ** 16
    assert "float16" in _text(box) and "GiB" in _text(box)


# ---------------------------------------------------------------------------------------------------------------
# 9. translations
# ---------------------------------------------------------------------------------------------------------------
SOURCES = ["the cat sleeps", "the dogs that bark run"]
REFS = ["die katze schläft", "die hunde die bellen laufen"]
OUTS = {"rnn": ["die katze schläft", "die hunde laufen"], "transformer": [["die", "katze", "schläft"], REFS[1]]}


def test_translation_rows():
    rows = W.translation_rows(SOURCES, OUTS, 1, REFS)
    assert [r[0] for r in rows] == ["source", "reference", "rnn", "transformer"]
    assert [r[2] for r in rows] == [None, None, False, True]
    assert W.translation_rows(SOURCES, OUTS, 0, REFS)[3] == ("transformer", "die katze schläft", True)
    assert [r[2] for r in W.translation_rows(SOURCES, OUTS, 0)] == [None, None, None]
    assert "&lt;b&gt;" in W.translation_html([("source", "<b>", None)])
    with pytest.raises(ValueError, match="outputs_by_model\\['rnn'\\]"):
        W.translation_rows(SOURCES, {"rnn": ["x"]}, 0)
    with pytest.raises(ValueError, match="references"):
        W.translation_rows(SOURCES, OUTS, 0, REFS[:1])
    with pytest.raises(ValueError, match="index"):
        W.translation_rows(SOURCES, OUTS, 2)
    with pytest.raises(TypeError, match="sources must be a list"):
        W.translation_rows("the cat", OUTS, 0)
    with pytest.raises(ValueError, match="sources is empty"):
        W.translation_explorer([], {})


def test_translation_explorer():
    box = W.translation_explorer(SOURCES, OUTS, REFS)
    assert isinstance(box, ipywidgets.VBox) and len(box.out.outputs) == 1
    assert [v for _, v in box.controls["example"].options] == [0, 1]
    data = box.out.outputs[0]["data"]
    assert "die katze schläft" in data["text/html"] and "✓" in data["text/plain"]
    box.controls["example"].value = 1
    assert "bellen" in box.out.outputs[0]["data"]["text/html"]


# ---------------------------------------------------------------------------------------------------------------
# Cross-cutting
# ---------------------------------------------------------------------------------------------------------------
def test_plots_return_figures_and_leak_no_pyplot_figures():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    before = plt.get_fignums()
    figs = [W.plot_query_attention(TOKENS, _weights(T, T), 0), W.plot_self_attention(TOKENS, _hand_made(), 1),
            W.plot_sinusoidal(16, 8, 2), W.plot_mask(causal_mask(4), 1), W.plot_softmax_scaling(8),
            W.plot_head(TOKENS, _weights(1, 1, T, T), 0, 0), W.plot_next_token(torch.randn(5), list("abcde")),
            W.plot_cost(256, 128)]
    assert all(isinstance(f, Figure) for f in figs)
    W.cost_explorer()
    assert plt.get_fignums() == before


# Every check an explorer's public functions run: none may run again when a control moves.
_CHECKS = ("as_tensor", "as_numpy", "check_labels", "check_index", "check_number", "check_choice",
           "check_positive_int", "check_tensor", "_stack_layers", "_check_vocab", "_check_translations")


@pytest.mark.parametrize("build, moves", [
    (lambda: W.attention_explorer(TOKENS, _weights(3, T, T)), [("query", 2), ("head", 1)]),
    (lambda: W.self_attention_explorer(TOKENS, torch.randn(T, 4)),
     [("word", 1), ("projection", "random"), ("scale", 2.0)]),
    (lambda: W.sinusoidal_explorer(max_len=32, max_d=16), [("d_model", 8), ("length", 10), ("p", 3)]),
    (lambda: W.mask_explorer(tokens=TOKENS), [("kind", "padding"), ("length", 3), ("kind", "sliding"), ("i", 2)]),
    (lambda: W.softmax_temperature_explorer(n_keys=8), [("d_k", 256), ("seed", 3)]),
    (lambda: W.heads_explorer(TOKENS, [_weights(1, 2, T, T) for _ in range(3)]), [("layer", 2), ("head", 1)]),
    (lambda: W.sampling_explorer(torch.randn(10), list("abcdefghij")), [("temperature", 0.5), ("top_k", 3)]),
    (lambda: W.cost_explorer(), [("n", 4096), ("d", 64), ("n_heads", 1)]),
    (lambda: W.translation_explorer(["a b", "c"], {"m": ["x", "y"]}, ["x", "z"]), [("example", 1)]),
])
def test_a_redraw_runs_no_checks(monkeypatch, build, moves):
    """An explorer checks its inputs once, when it is built; a control's move redraws through unchecked internals
    (the pattern of :mod:`~transformer_lib.attention`), plotting's included."""
    from transformer_lib import plotting
    from transformer_lib.widgets import outputs, scores, weights
    box = build()

    def refuse(*args, **kwargs):
        raise AssertionError("a redraw checked its inputs again")

    for module in (weights, scores, outputs, plotting):
        for name in _CHECKS:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    for control, value in moves:
        first = _png(box) if "image/png" in _kinds(box) else None
        box.controls[control].value = value
        assert "stderr" not in _kinds(box), _text(box)
        assert first is None or _png(box) != first


def test_a_redraw_draws_what_the_public_function_draws():
    """The explorers' unchecked redraws and the checked plot_* functions give the same picture."""
    w = _weights(3, 2, T, T)
    box = W.heads_explorer(TOKENS, w)
    box.controls["layer"].value, box.controls["head"].value = 2, 1
    buffer = __import__("io").BytesIO()
    W.plot_head(TOKENS, w, 2, 1).savefig(buffer, format="png", dpi=90)
    assert _png(box) == buffer.getvalue()


def test_all_lists_the_explorers_and_the_building_blocks_stay_importable():
    assert set(W.__all__) == {name for name in dir(W) if name.endswith("_explorer")}
    for name in ("query_attention", "self_attention_weights", "position_similarity", "mask_for", "visible_positions",
                 "softmax_stats", "head_weights", "next_token_distribution", "attention_cost", "translation_rows",
                 "translation_html", "MASK_KINDS", "PROJECTIONS", "plot_query_attention", "plot_self_attention",
                 "plot_sinusoidal", "plot_mask", "plot_softmax_scaling", "plot_head", "plot_next_token", "plot_cost"):
        assert hasattr(W, name), name


def test_errors_during_interaction_are_shown_not_raised():
    box = W.mask_explorer(n=4)
    box.refresh({"new": None}, name="kind")  # a normal change re-renders
    assert "sees" in _text(box)
    box = W.sinusoidal_explorer(max_len=16, max_d=8)
    box.controls["d_model"].value = 3  # off the slider's steps: the library's table refuses it during the redraw
    assert box.out.outputs[0]["name"] == "stderr" and "even" in box.out.outputs[0]["text"]


def test_missing_ipywidgets_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match=r'pip install "transformer_lib\[widgets\]"'):
        W.cost_explorer()
    assert W.attention_cost(8, 8)["score_elements"] == 64  # the pure functions still work
