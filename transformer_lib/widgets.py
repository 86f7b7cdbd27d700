"""Interactive explorers: ipywidgets that let a reader move one control and watch attention respond.

Every explorer comes in three layers, so that what it shows is tested and usable without a browser:

1. a *pure* function computing the numbers shown for given control values (``query_attention``,
   ``self_attention_weights``, ``position_similarity``, ``mask_for``, ``softmax_stats``, ``head_weights``,
   ``next_token_distribution``, ``attention_cost``, ``translation_rows``);
2. a ``plot_*`` function drawing them on a :class:`matplotlib.figure.Figure` built without ``pyplot`` (no global
   figure registry, so nothing leaks and any backend works);
3. an ``*_explorer`` function returning an ``ipywidgets.VBox`` of controls above an ``Output``.

The explorer renders its first view while it is being built and writes it straight into the ``Output`` widget's
``outputs`` (a PNG and a line of text). When the notebook is executed, that state is saved with the widget, so the
static HTML of the book shows the first view even though no kernel is running behind it.

ipywidgets is imported only inside the ``*_explorer`` functions: the pure and plotting functions work without it
(``pip install "transformer_lib[widgets]"`` adds it).

This module is the explorers' one namespace; they are written in three private modules by what they show
(attention weights; positions, masks and scaling; a model's outputs and costs), on shared helpers.
"""
from __future__ import annotations

from ._explore_attention import (attention_explorer, head_weights, heads_explorer, plot_head,  # noqa: F401
                                 plot_query_attention, plot_self_attention, PROJECTIONS, query_attention,
                                 self_attention_explorer, self_attention_weights)
from ._explore_models import (attention_cost, cost_explorer, next_token_distribution, plot_cost,  # noqa: F401
                              plot_next_token, sampling_explorer, translation_explorer, translation_html,
                              translation_rows)
from ._explore_scores import (MASK_KINDS, mask_explorer, mask_for, plot_mask, plot_sinusoidal,  # noqa: F401
                              plot_softmax_scaling, position_similarity, sinusoidal_explorer,
                              softmax_stats, softmax_temperature_explorer, visible_positions)

__all__ = [
    "query_attention", "plot_query_attention", "attention_explorer",
    "PROJECTIONS", "self_attention_weights", "plot_self_attention", "self_attention_explorer",
    "position_similarity", "plot_sinusoidal", "sinusoidal_explorer",
    "MASK_KINDS", "mask_for", "visible_positions", "plot_mask", "mask_explorer",
    "softmax_stats", "plot_softmax_scaling", "softmax_temperature_explorer",
    "head_weights", "plot_head", "heads_explorer",
    "next_token_distribution", "plot_next_token", "sampling_explorer",
    "attention_cost", "plot_cost", "cost_explorer",
    "translation_rows", "translation_html", "translation_explorer",
]
