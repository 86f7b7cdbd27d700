"""Tests of transformer_lib.diagrams (Agg backend): the texts and shapes each figure teaches, a layout without
overlapping or clipped labels, rendering, determinism and argument errors."""
import io
import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

from transformer_lib import diagrams  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def x_of(fig, text):
    """The x positions (inches) of every text equal to ``text``, left to right."""
    return sorted(t.get_position()[0] for t in fig.axes[0].texts if t.get_text() == text)


def png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def layout_problems(fig):
    """Texts that overlap another text, or that stick out of the figure (clipped in a notebook without tight
    bounding boxes)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    extents = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.axes[0].texts if t.get_text().strip()]
    width, height = fig.bbox.width, fig.bbox.height
    problems = [("outside", s) for s, b in extents if b.x0 < -1 or b.y0 < -1 or b.x1 > width + 1 or b.y1 > height + 1]
    for (s1, b1), (s2, b2) in itertools.combinations(extents, 2):
        if b1.x0 < b2.x1 - 1 and b2.x0 < b1.x1 - 1 and b1.y0 < b2.y1 - 1 and b2.y0 < b1.y1 - 1:
            problems.append(("overlap", s1, s2))
    return problems


# ------------------------------------------------------------------------------------- every diagram
#: The canonical figures drawn upright like the paper's: the whole encoder–decoder and multi-head attention.
TALL = {"encoder_decoder", "multihead_heads"}


@pytest.mark.parametrize("name", diagrams.__all__)
def test_default_figure_is_a_deterministic_png_of_book_width(name):
    fig = getattr(diagrams, name)()
    assert isinstance(fig, Figure)
    width, height = fig.get_size_inches()
    assert width == 10.0 and 1.5 <= height <= (10.0 if name in TALL else 5.0)
    assert not fig.axes[0].axison  # a diagram, not a plot: no axes, ticks or grid
    first = png(fig)
    assert first.startswith(b"\x89PNG\r\n\x1a\n")
    assert png(getattr(diagrams, name)()) == first  # nothing random


LAYOUTS = {
    "rnn default": lambda: diagrams.unrolled_rnn(),
    "rnn longest, words": lambda: diagrams.unrolled_rnn(12, (3, 10), words=[f"word{i}" for i in range(12)]),
    "rnn one step": lambda: diagrams.unrolled_rnn(1),
    "seq2seq default": lambda: diagrams.seq2seq_attention(),
    "seq2seq longest": lambda: diagrams.seq2seq_attention(["source"] * 8, ["target"] * 8, step=8),
    "seq2seq shortest": lambda: diagrams.seq2seq_attention(["a"], ["b"], step=1),
    "qkv default": lambda: diagrams.self_attention_qkv(),
    "qkv longest": lambda: diagrams.self_attention_qkv("the students took the transformers course and learned"
                                                       .split(), focus=8, weights=torch.full((8,), 1 / 8)),
    "qkv shortest": lambda: diagrams.self_attention_qkv(["a", "b"], focus=1),
    "multihead default": lambda: diagrams.multihead_split_merge(),
    "multihead smallest": lambda: diagrams.multihead_split_merge(1, 1, 1),
    "multihead largest": lambda: diagrams.multihead_split_merge(24, 6, 8),
    "block both encoder": lambda: diagrams.transformer_block(),
    "block both decoder": lambda: diagrams.transformer_block("both", "decoder"),
    "architectures default": lambda: diagrams.architectures(),
    "architectures smallest": lambda: diagrams.architectures(2, 1),
    "architectures largest": lambda: diagrams.architectures(6, 6),
    "encoder-decoder post-norm": lambda: diagrams.encoder_decoder(),
    "encoder-decoder pre-norm": lambda: diagrams.encoder_decoder(12, "pre"),
    "heads default": lambda: diagrams.multihead_heads(),
    "heads one": lambda: diagrams.multihead_heads(1, 64),
    "heads many": lambda: diagrams.multihead_heads(16, 4096),
}


@pytest.mark.parametrize("case", LAYOUTS)
def test_labels_neither_overlap_nor_leave_the_figure(case):
    assert layout_problems(LAYOUTS[case]()) == []


# -------------------------------------------------------------------------------------------------- RNN
def test_unrolled_rnn_writes_the_path_length_and_numbers_its_edges():
    fig = diagrams.unrolled_rnn(8, highlight_path=(2, 7))
    written = texts(fig)
    assert any("path length 6" in t and "6 applications" in t for t in written)  # j - i + 1, not j - i
    assert [f"$h_{{{t}}}$" in written for t in range(9)] == [True] * 9  # h_0 … h_8
    assert sum(isinstance(p, Circle) for p in fig.axes[0].patches) == 6
    digits = [t for t in written if t.isdigit()]
    assert sorted(set(digits), key=int) == [str(k) for k in range(1, 9)]  # the sequential steps 1 … 8
    assert len(digits) == 8 + 6  # and the six numbered edges of the path


def test_unrolled_rnn_default_path_spans_the_sequence_and_can_be_switched_off():
    assert any("$x_{1}$ reaches $h_{5}$" in t and "path length 5" in t for t in texts(diagrams.unrolled_rnn()))
    fig = diagrams.unrolled_rnn(5, highlight_path=None, words="the chef is here now".split())
    assert not any("path length" in t for t in texts(fig))
    assert not [p for p in fig.axes[0].patches if isinstance(p, Circle)]
    assert "chef" in texts(fig)


# ----------------------------------------------------------------------------------------- seq2seq
def bars(fig):
    """The weight bars (plain rectangles), left to right."""
    found = [p for p in fig.axes[0].patches if type(p) is Rectangle]
    return sorted(found, key=lambda p: p.get_x())


def test_seq2seq_bars_draw_the_weights_of_the_step():
    weights = torch.zeros(7, 5)  # a (T, S) map, the gold alignment: step 3 ("ka") looks at source word 2
    weights[torch.arange(7), torch.tensor([0, 1, 1, 3, 4, 4, 2])] = 1.0
    weights.requires_grad_(True)
    fig = diagrams.seq2seq_attention(step=3, weights=weights)
    heights = np.array([b.get_height() for b in bars(fig)])
    np.testing.assert_allclose(heights / heights.max(), [0, 1, 0, 0, 0])
    assert texts(fig).count("1.00") == 1 and texts(fig).count("0.00") == 4
    assert "ka" in texts(fig)  # the word written at step 3
    assert "$s_{3}$" in texts(fig) and "context $a_{3}$" in texts(fig)


def test_seq2seq_uniform_weights_by_default_and_decoder_reads_previous_word():
    fig = diagrams.seq2seq_attention(["a", "b", "c", "d"], ["w", "x", "y", "z"], step=2)
    heights = [b.get_height() for b in bars(fig)]
    np.testing.assert_allclose(heights, [heights[0]] * 4)
    assert texts(fig).count("0.25") == 4
    assert ["<bos>", "w", "x", "y"] == [t for t in texts(fig) if t in ("<bos>", "w", "x", "y", "z")][:4]


# ------------------------------------------------------------------------------------- self-attention
def test_self_attention_sums_the_values_v_j_of_all_tokens():
    fig = diagrams.self_attention_qkv(["a", "b", "c"], focus=3, weights=[0.2, 0.5, 0.3])
    written = texts(fig)
    formula = [t for t in written if t.startswith("$h_{3} =")]
    assert len(formula) == 1 and "v_j" in formula[0] and "v_i" not in formula[0] and "v_{3}" not in formula[0]
    assert {f"$e_{{3,{j}}}$" for j in (1, 2, 3)} <= set(written)
    assert {f"${n}_{{{j}}}$" for n in "qkv" for j in (1, 2, 3)} <= set(written)
    assert {"$\\times\\,0.20$", "$\\times\\,0.50$", "$\\times\\,0.30$"} <= set(written)


def test_self_attention_greys_the_queries_that_other_outputs_use():
    fig = diagrams.self_attention_qkv(focus=2)
    colour = {t.get_text(): t.get_color() for t in fig.axes[0].texts}
    assert colour["$q_{2}$"] == "black" and colour["$q_{1}$"] != "black" and colour["$k_{1}$"] == "black"
    assert "$\\times\\,\\alpha_{2,4}$" in colour  # symbols when no weights are given


# ------------------------------------------------------------------------------------------ multi-head
def test_multihead_writes_every_shape():
    written = texts(diagrams.multihead_split_merge(d_model=8, n_heads=2, seq_len=3))
    for shape in ["(3, 8)", "(3, 2, 4)", "(2, 3, 4)", "(2, 3, 3)"]:
        assert shape in written
    assert written.count("(3, 8)") == 3  # XQ, concatenated, output
    written = texts(diagrams.multihead_split_merge(d_model=16, n_heads=4, seq_len=5))
    assert {"(5, 16)", "(5, 4, 4)", "(4, 5, 4)", "(4, 5, 5)"} <= set(written)


def test_multihead_cards_follow_reshape_then_transpose():
    """The colours drawn for the split equal a reshape of the colours of XQ, then a transpose (the bug of chapter
    7, reshaping straight to (H, n, d_head), would colour the cards differently)."""
    n, d, h = 3, 8, 2
    images = [im.get_array() for im in diagrams.multihead_split_merge(d, h, n).axes[0].images]
    xq = images[0]                                                   # (n, d, 3)
    split = np.stack(images[1:1 + n][::-1])                          # cards drawn back to front: (n, h, dh, 3)
    heads_first = np.stack(images[1 + n:1 + n + h][::-1])            # (h, n, dh, 3)
    np.testing.assert_array_equal(split, xq.reshape(n, h, d // h, 3))
    np.testing.assert_array_equal(heads_first, split.transpose(1, 0, 2, 3))
    assert not np.array_equal(xq[:, 0], xq[:, d // h])  # the two heads have different colours


# ------------------------------------------------------------------------------------------- the block
def test_layer_norm_comes_before_the_sublayer_in_pre_norm_and_after_the_sum_in_post_norm():
    pre, post = diagrams.transformer_block("pre"), diagrams.transformer_block("post")
    attention = "Multi-head\nself-attention"
    for fig in (pre, post):
        assert len(x_of(fig, "LayerNorm")) == 2 and len(x_of(fig, "+")) == 2
    assert x_of(pre, "LayerNorm")[0] < x_of(pre, attention)[0] < x_of(pre, "+")[0]
    assert x_of(post, attention)[0] < x_of(post, "+")[0] < x_of(post, "LayerNorm")[0]
    assert x_of(post, "LayerNorm")[-1] > x_of(post, "+")[-1]  # post-norm ends with a norm, pre-norm with a sum
    assert x_of(pre, "LayerNorm")[-1] < x_of(pre, "+")[-1]


def test_decoder_block_has_three_sublayers_and_reads_the_encoder_output():
    fig = diagrams.transformer_block("both", "decoder")
    assert len(x_of(fig, "LayerNorm")) == 6 and len(x_of(fig, "+")) == 6
    assert len(x_of(fig, "Cross-\nattention")) == 2
    assert texts(fig).count("encoder output $m$ (keys, values)") == 2
    assert any(t.startswith("Pre-norm") for t in texts(fig)) and any(t.startswith("Post-norm") for t in texts(fig))


# ------------------------------------------------------------------------------------ the architectures
@pytest.mark.parametrize("n, focus", [(4, 2), (3, 3)])
def test_architectures_draw_bidirectional_causal_and_cross_edges(n, focus):
    fig = diagrams.architectures(n, focus)
    edges = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    # encoder n², decoder n(n+1)/2, encoder–decoder n² + n(n+1)/2 + n queries + n² cross-attention
    assert len(edges) == 3 * n * n + n * (n + 1) + n
    written = texts(fig)
    assert f"token {focus} reads tokens 1–{n}" in written and f"token {focus} reads tokens 1–{focus}" in written
    assert sum(isinstance(p, FancyBboxPatch) for p in fig.axes[0].patches) == 9 * n  # 4 token rows, 5 outputs


# --------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("function, kwargs, message", [
    (diagrams.unrolled_rnn, dict(n_steps=0), r"n_steps must be in \[1, 12\].*got 0"),
    (diagrams.unrolled_rnn, dict(n_steps=13), "n_steps .*got 13"),
    (diagrams.unrolled_rnn, dict(highlight_path=(3, 2)), r"highlight_path .*got \(3, 2\)"),
    (diagrams.unrolled_rnn, dict(highlight_path=(0, 4)), r"highlight_path .*1 <= i <= j <= n_steps = 5"),
    (diagrams.unrolled_rnn, dict(words=["one"]), "words must hold between 5 and 5 words, got 1"),
    (diagrams.seq2seq_attention, dict(step=8), r"step must be in \[1, 7\].*got 8"),
    (diagrams.seq2seq_attention, dict(weights=[0.5, 0.5]), r"weights must have shape \(5,\).*got \(2,\)"),
    (diagrams.seq2seq_attention, dict(weights=[0.5, 0.6, 0, 0, 0]), "weights must .*sum to 1.*1.1000"),
    (diagrams.seq2seq_attention, dict(weights=[1.5, -0.5, 0, 0, 0]), "weights must be non-negative"),
    (diagrams.seq2seq_attention, dict(weights=[float("nan")] * 5), "weights must"),
    (diagrams.seq2seq_attention, dict(step=3, weights=torch.full((2, 5), 0.2)), "weights has 2 rows"),
    (diagrams.self_attention_qkv, dict(focus=5), r"focus must be in \[1, 4\].*got 5"),
    (diagrams.self_attention_qkv, dict(words=["alone"]), "words must hold between 2 and 8"),
    (diagrams.multihead_split_merge, dict(d_model=8, n_heads=3), "n_heads must divide d_model.*8.*3"),
    (diagrams.multihead_split_merge, dict(d_model=64), r"d_model must be in \[1, 32\].*got 64"),
    (diagrams.multihead_split_merge, dict(seq_len=0), "seq_len .*got 0"),
    (diagrams.transformer_block, dict(norm="middle"), "norm must be one of.*'post'.*'pre'.*got 'middle'"),
    (diagrams.transformer_block, dict(kind="gpt"), "kind must be one of.*got 'gpt'"),
    (diagrams.architectures, dict(n_tokens=1), r"n_tokens must be in \[2, 6\].*got 1"),
    (diagrams.architectures, dict(focus=5), r"focus must be in \[1, 4\].*got 5"),
    (diagrams.encoder_decoder, dict(n_layers=0), r"n_layers must be in \[1, 48\].*got 0"),
    (diagrams.encoder_decoder, dict(norm="sandwich"), "norm must be one of.*got 'sandwich'"),
    (diagrams.multihead_heads, dict(n_heads=3, d_model=512), "n_heads must divide d_model.*512.*3"),
    (diagrams.multihead_heads, dict(n_heads=17), r"n_heads must be in \[1, 16\].*got 17"),
])
def test_bad_arguments_raise_value_errors_that_name_them(function, kwargs, message):
    with pytest.raises(ValueError, match=message):
        function(**kwargs)


def test_wrong_types_raise_type_errors():
    with pytest.raises(TypeError, match=r"words must be a sequence of words.*\.split\(\)"):
        diagrams.self_attention_qkv("the students learned")
    with pytest.raises(TypeError, match="n_steps must be an int, got float"):
        diagrams.unrolled_rnn(5.0)



# ------------------------------------------------------------------------------ the canonical figures
def test_encoder_decoder_stacks_the_paper_s_blocks():
    post = texts(diagrams.encoder_decoder(6, "post"))
    assert post.count("6×") == 2 and post.count("Add & Norm") == 5
    for name in ("Input embedding", "Output embedding", "Multi-head\nself-attention", "Masked multi-head\nself-attention",
                 "Multi-head\ncross-attention", "Linear", "Softmax", "next-token probabilities"):
        assert name in post, name
    assert post.count("Feed-forward") == 2 and post.count("positional\nencoding") == 2
    pre = texts(diagrams.encoder_decoder(12, "pre"))
    assert "Add & Norm" not in pre and pre.count("12×") == 2
    assert pre.count("Norm") == 5 + 2           # one before each sublayer, one on top of each stack
    assert pre.count("+") == 5 + 2              # one sum per sublayer, and the positions added to the embeddings


def test_multihead_heads_writes_the_heads_and_their_width():
    t = " ".join(texts(diagrams.multihead_heads(8, 512)))
    assert "$H$ = 8 heads" in t and "= 512 / 8 = 64" in t
    for name in ("Linear $W^V_i$", "Linear $W^K_i$", "Linear $W^Q_i$", "Concatenate", "Linear $Y$"):
        assert name in t, name
    front_and_back = [p for p in diagrams.multihead_heads(2, 8).axes[0].patches if isinstance(p, Rectangle)]
    assert len(front_and_back) == 2             # one card per head, up to three
