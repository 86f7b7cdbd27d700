"""Tests of transformer_lib.plotting (Agg backend): return types, data drawn, labels, shape errors."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_lib import plotting  # noqa: E402
from transformer_lib.attention import causal_mask  # noqa: E402
from transformer_lib.positional import sinusoidal_table  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_use_book_style_sets_rcparams():
    with matplotlib.rc_context():
        params = plotting.use_book_style()
        rc = matplotlib.rcParams
        assert tuple(rc["figure.figsize"]) == (6.0, 3.5) and rc["figure.dpi"] == 100
        assert rc["axes.grid"] and not rc["axes.spines.top"] and not rc["axes.spines.right"]
        assert rc["axes.prop_cycle"].by_key()["color"] == list(plotting.BOOK_COLORS)
        assert "axes.prop_cycle" in params


def test_attention_heatmap_draws_the_input_tensor():
    w = torch.softmax(torch.randn(3, 5, requires_grad=True), -1)  # a tensor with grad is accepted
    ax = plotting.attention_heatmap(w, x_labels=list("abcde"), y_labels=["x", "y", "z"], title="t")
    assert isinstance(ax, Axes)
    np.testing.assert_allclose(ax.images[0].get_array(), w.detach().numpy(), rtol=1e-6)
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    assert ax.get_title() == "t" and ax.get_xlabel() == "key" and ax.get_ylabel() == "query"


def test_attention_heatmap_numpy_annotate_and_existing_ax():
    fig, ax = plt.subplots()
    w = np.array([[0.25, 0.75], [1.0, 0.0]])
    out = plotting.attention_heatmap(w, ax=ax, annotate=True, colorbar=False)
    assert out is ax
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "1.00", "0.00"]
    np.testing.assert_array_equal(ax.images[0].get_array(), w)


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(weights=torch.rand(2, 3, 4)), ValueError, "weights must have 2 dimensions, got 3"),
    (dict(weights=torch.rand(2, 3), x_labels=["a", "b"]), ValueError,
     r"x_labels has 2 labels but the key axis \(columns\) of weights has 3"),
    (dict(weights=torch.rand(2, 3), y_labels=["a"]), ValueError,
     r"y_labels has 1 labels but the query axis \(rows\) of weights has 2"),
    (dict(weights=torch.rand(2, 3), x_labels="abc"), TypeError, "x_labels"),
    (dict(weights="not an array"), TypeError, "weights"),
    (dict(weights=torch.rand(2, 3), ax="ax"), TypeError, "ax"),
])
def test_attention_heatmap_bad_inputs(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        plotting.attention_heatmap(**kwargs)


def test_attention_heads_grid():
    w = torch.softmax(torch.randn(6, 4, 5), -1)
    fig = plotting.attention_heads(w, x_labels=list("abcde"), y_labels=list("wxyz"), ncols=4, suptitle="heads")
    assert isinstance(fig, Figure)
    panels = fig.axes[:8]  # 2 rows × 4 columns, then the colour bar
    assert sum(ax.get_visible() for ax in panels) == 6
    for h in range(6):
        np.testing.assert_allclose(panels[h].images[0].get_array(), w[h].numpy(), rtol=1e-6)
        assert panels[h].get_title() == f"head {h}"
    lims = {panels[h].images[0].get_clim() for h in range(6)}
    assert len(lims) == 1  # one shared colour scale
    with pytest.raises(ValueError, match="weights must have 3 dimensions"):
        plotting.attention_heads(w[0])
    with pytest.raises(ValueError, match="titles has 2 labels but the head axis of weights has 6"):
        plotting.attention_heads(w, titles=["a", "b"])
    with pytest.raises(ValueError, match="ncols"):
        plotting.attention_heads(w, ncols=0)


def test_mask_figure_true_is_dark():
    mask = causal_mask(4)
    ax = plotting.mask_figure(mask, x_labels=list("abcd"), y_labels=list("abcd"))
    data = np.asarray(ax.images[0].get_array())
    np.testing.assert_array_equal(data, mask.numpy().astype(float))
    im = ax.images[0]
    dark, light = im.cmap(im.norm(1.0)), im.cmap(im.norm(0.0))
    assert sum(dark[:3]) < sum(light[:3])
    with pytest.raises(ValueError, match="mask must be boolean"):
        plotting.mask_figure(torch.rand(3, 3))
    with pytest.raises(ValueError, match="mask must have 2 dimensions"):
        plotting.mask_figure(mask[None])


def test_highlight_row_outlines_one_query():
    from matplotlib.patches import Rectangle
    mask = causal_mask(5)
    for ax in (plotting.mask_figure(mask, highlight_row=3),
               plotting.attention_heatmap(torch.softmax(torch.randn(5, 6), -1), highlight_row=3, colorbar=False)):
        boxes = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
        assert len(boxes) == 1
        assert boxes[0].get_xy() == (-0.5, 2.5) and boxes[0].get_height() == 1
        assert boxes[0].get_width() == ax.images[0].get_array().shape[1]
    assert not plotting.mask_figure(mask).patches  # no highlight by default
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=r"highlight_row must be in \[0, 4\]"):
        plotting.mask_figure(mask, highlight_row=5)
    with pytest.raises(TypeError, match="highlight_row must be an int"):
        plotting.attention_heatmap(torch.rand(5, 5), highlight_row=1.0)
    assert plt.get_fignums() == before  # checked before a figure is made


def test_positional_matrix_symmetric_range():
    table = sinusoidal_table(50, 16)
    ax = plotting.positional_matrix(table, title="PE")
    np.testing.assert_allclose(ax.images[0].get_array(), table.numpy())
    lo, hi = ax.images[0].get_clim()
    assert lo == -hi and ax.get_xlabel() == "dimension" and ax.get_ylabel() == "position"


def test_plot_curves_forms_and_smoothing():
    histories = {"list": [3.0, 2.0, 1.5, 1.0], "pair": ([0, 10, 20], torch.tensor([2.0, 1.0, 0.5]))}
    ax = plotting.plot_curves(histories, logy=True)
    assert isinstance(ax, Axes) and ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.lines] == ["list", "pair"]
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), [0, 10, 20])
    smoothed = plotting.plot_curves([1.0, 3.0, 5.0, 7.0], smooth=2)
    raw, avg = smoothed.lines
    np.testing.assert_allclose(avg.get_ydata(), [1.0, 2.0, 4.0, 6.0])
    assert raw.get_alpha() < 1 and avg.get_label() == "train"
    assert raw.get_color() == avg.get_color()


def test_plot_curves_history_object():
    class FakeHistory:  # the attributes of training.History that are drawn
        steps = [0, 1, 2, 3]
        train_loss = [4.0, 3.0, 2.5, 2.0]
        eval = [(0, {"loss": 4.1}), (3, {"loss": 2.2})]

    ax = plotting.plot_curves({"model": FakeHistory()})
    assert [line.get_label() for line in ax.lines] == ["model", "model (eval)"]
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), [4.1, 2.2])
    assert ax.lines[1].get_linestyle() == "--"


def test_plot_curves_bad_inputs():
    with pytest.raises(ValueError, match="3 steps but 2 values"):
        plotting.plot_curves({"a": ([0, 1, 2], [1.0, 2.0])})
    with pytest.raises(ValueError, match="smooth"):
        plotting.plot_curves([1.0, 2.0], smooth=0)
    with pytest.raises(ValueError, match="empty"):
        plotting.plot_curves({})
    with pytest.raises(ValueError, match="must have 1 dimensions"):
        plotting.plot_curves({"a": torch.rand(2, 2)})


def test_plot_series():
    x = [64, 128, 256]
    ax = plotting.plot_series(x, {"rnn": [1.0, 2.0, 4.0], "attention": np.array([0.5, 1.0, float("nan")])},
                              xlabel="T", ylabel="seconds", logx=True, logy=True)
    assert isinstance(ax, Axes) and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.lines] == ["rnn", "attention"]
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), x)
    assert ax.get_xlabel() == "T" and ax.get_ylabel() == "seconds"
    with pytest.raises(ValueError, match=r"series\['rnn'\] has 2 values but x has 3"):
        plotting.plot_series(x, {"rnn": [1.0, 2.0]})
    with pytest.raises(TypeError, match="series"):
        plotting.plot_series(x, [1.0, 2.0, 3.0])
