"""transformer_lib: the one shared library of the executable textbook on self-attention and Transformers.

Modules (one concept each): :mod:`~transformer_lib.attention` (masks, score functions, softmax attention),
:mod:`~transformer_lib.multihead`, :mod:`~transformer_lib.positional`, :mod:`~transformer_lib.blocks`,
:mod:`~transformer_lib.models`, :mod:`~transformer_lib.rnn`, :mod:`~transformer_lib.efficient`
(Linformer, sparse attention), :mod:`~transformer_lib.generation`,
:mod:`~transformer_lib.data` (tokenizers, the synthetic tasks, the corpus, batches), :mod:`~transformer_lib.training`
(the loop, losses, learning-rate search, runs side by side, data parallelism, checkpoints),
:mod:`~transformer_lib.interop` (PyTorch, Hugging Face),
:mod:`~transformer_lib.plotting`, :mod:`~transformer_lib.diagrams`, :mod:`~transformer_lib.widgets`,
:mod:`~transformer_lib.exercises`, :mod:`~transformer_lib.ledger` (the claims and their verdicts),
:mod:`~transformer_lib.notebook` (glue and CPU/GPU settings), :mod:`~transformer_lib.presets` (settings a chapter
shares with the benchmarks), and :mod:`~transformer_lib.checks` (the input checks every module uses).
"""
from importlib import import_module as _import_module

from .attention import (attention_reference, causal_mask, combine_masks, make_score, masked_softmax,
                        padding_mask, scaled_dot_product_attention)
from .blocks import AttentionWeights, DecoderBlock, EncoderBlock, FeedForward, LayerNorm, RMSNorm
from .models import (DecoderLM, DecoderLMConfig, Encoder, EncoderConfig, EncoderDecoder, EncoderDecoderConfig,
                     count_parameters, init_weights)
from .multihead import KVCache, MultiHeadAttention
from .positional import (ALiBi, LearnedPositionalEmbedding, RelativePosition, Rotary,
                         SinusoidalPositionalEncoding, sinusoidal_table)

__version__ = "0.1.0"

_SUBMODULES = ("attention", "multihead", "positional", "blocks", "models", "rnn", "efficient",
               "generation", "data", "training", "interop", "plotting", "diagrams", "widgets", "exercises", "ledger",
               "notebook", "presets", "checks")


def __getattr__(name):
    # Submodules load on first use (``tl.data``, ``tl.widgets``…) so importing the package stays light.
    if name in _SUBMODULES:
        return _import_module(f".{name}", __name__)
    raise AttributeError(f"module 'transformer_lib' has no attribute {name!r}")
