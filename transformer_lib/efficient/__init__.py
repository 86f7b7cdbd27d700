"""Cheaper attention for long sequences: Linformer and sparse (BigBird-style) attention (chapter 12).

Full attention scores every (query, key) pair: ``n²`` scores per head, ``O(n² d)`` compute and an ``(n, n)``
weight matrix. Two ways to spend less, both drop-in replacements for
:class:`~transformer_lib.multihead.MultiHeadAttention` (same forward signature, same ``in_proj``/``out_proj``
parameters, so ``layer.load_state_dict(mha.state_dict(), strict=False)`` copies the shared weights):

* :class:`~transformer_lib.efficient.linformer.LinformerAttention` (Wang et al., 2020, "Linformer: Self-Attention
  with Linear Complexity"): keys and values are projected *along the sequence axis* from ``n`` positions to ``k``
  with learned ``E, F ∈ R^{k×n}``, so each query scores ``k`` projected positions: ``(B, H, T, k)`` instead of
  ``(B, H, T, S)``.
* :class:`~transformer_lib.efficient.sparse.SparseAttention` (Zaheer et al., 2020, "Big Bird: Transformers for
  Longer Sequences"): each query attends to a local window ``|i - j| <= window``, to the first ``n_global`` tokens
  (which themselves attend to everything) and to ``n_random`` random keys.
  :func:`~transformer_lib.efficient.sparse.sparse_pattern` builds the pattern as an ``(n, n)`` boolean mask
  (exact, but the dense kernel still pays for ``n²`` scores);
  :func:`~transformer_lib.efficient.sparse.blocked_sparse_attention` computes the same function block by block in ``O(n · (window + n_global + n_random))`` memory.

The package's modules: :mod:`~transformer_lib.efficient.linformer`, :mod:`~transformer_lib.efficient.sparse` and
:mod:`~transformer_lib.efficient.kinds` (the kinds by name: :func:`~transformer_lib.efficient.kinds.attention_pairs`,
:func:`~transformer_lib.efficient.kinds.attention_pattern_density` and
:func:`~transformer_lib.efficient.kinds.flops_per_layer` count what each computes for the chapter's tables,
:func:`~transformer_lib.efficient.kinds.make_attention` builds a layer). Every public name is importable from the
package (``tl.efficient.SparseAttention``). Shapes use the legend of :mod:`transformer_lib.attention` (B batch,
T query length, S key length, D d_model, H heads, Dh head size).
"""
from .kinds import ATTENTION_KINDS, attention_pairs, attention_pattern_density, flops_per_layer, make_attention
from .linformer import LinformerAttention
from .sparse import SparseAttention, blocked_sparse_attention, random_links, sparse_pattern

__all__ = ["ATTENTION_KINDS", "LinformerAttention", "SparseAttention", "attention_pairs", "attention_pattern_density",
           "blocked_sparse_attention", "flops_per_layer", "make_attention", "random_links", "sparse_pattern"]
