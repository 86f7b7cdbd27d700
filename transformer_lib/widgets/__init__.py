"""Interactive explorers: ipywidgets that let a reader move one control and watch attention respond.

Every explorer comes in three layers, so that what it shows is tested and usable without a browser:

1. a *pure* function computing the numbers shown for given control values (``query_attention``,
   ``self_attention_weights``, ``position_similarity``, ``mask_for``, ``softmax_stats``, ``head_weights``,
   ``next_token_distribution``, ``attention_cost``, ``translation_rows``);
2. a ``plot_*`` function drawing them on a :class:`matplotlib.figure.Figure` built without ``pyplot`` (no global
   figure registry, so nothing leaks and any backend works);
3. an ``*_explorer`` function returning an ``ipywidgets.VBox`` of controls above an ``Output``.

The pure and ``plot_*`` functions check their arguments, then call unchecked internals; an explorer checks its
inputs once, when it is built, and a control's move redraws through the internals only (the pattern of
:mod:`~transformer_lib.attention`).

The explorer renders its first view while it is being built and writes it straight into the ``Output`` widget's
``outputs`` (a PNG and a line of text). When the notebook is executed, that state is saved with the widget, so the
static HTML of the book shows the first view even though no kernel is running behind it.

ipywidgets is imported only inside the ``*_explorer`` functions: the pure and plotting functions work without it
(``pip install "transformer_lib[widgets]"`` adds it).

The package's modules hold the explorers by what they show: :mod:`~transformer_lib.widgets.weights` (attention
weights), :mod:`~transformer_lib.widgets.scores` (positions, masks and scaling) and
:mod:`~transformer_lib.widgets.outputs` (a model's outputs and costs), on the helpers of
:mod:`~transformer_lib.widgets.base`; every explorer and building block is importable from the package
(``tl.widgets.mask_explorer``, ``tl.widgets.mask_for``). They compute
through the library (masks from :mod:`~transformer_lib.attention` and :mod:`~transformer_lib.efficient.sparse`, FLOPs from
:func:`~transformer_lib.efficient.kinds.flops_per_layer`, sampling from :mod:`~transformer_lib.generation`) and draw their
heatmaps, masks and positional tables through :mod:`~transformer_lib.plotting`.
"""
from __future__ import annotations

from .weights import (PROJECTIONS, attention_explorer, head_weights, heads_explorer,  # noqa: F401
                                 plot_head, plot_query_attention, plot_self_attention, query_attention,
                                 self_attention_explorer, self_attention_weights)
from .outputs import (attention_cost, cost_explorer, next_token_distribution, plot_cost,  # noqa: F401
                              plot_next_token, sampling_explorer, translation_explorer, translation_html,
                              translation_rows)
from .scores import (MASK_KINDS, mask_explorer, mask_for, plot_mask, plot_sinusoidal,  # noqa: F401
                              plot_softmax_scaling, position_similarity, sinusoidal_explorer,
                              softmax_stats, softmax_temperature_explorer, visible_positions)

__all__ = [
    "attention_explorer",
    "cost_explorer",
    "heads_explorer",
    "mask_explorer",
    "sampling_explorer",
    "self_attention_explorer",
    "sinusoidal_explorer",
    "softmax_temperature_explorer",
    "translation_explorer",
]
