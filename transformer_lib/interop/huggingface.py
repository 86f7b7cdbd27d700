"""Hugging Face: its GPT-2 and Marian models as the library's, weight for weight, and their attention weights.

:func:`from_hf` turns ``transformers.GPT2LMHeadModel`` into a :class:`~transformer_lib.models.DecoderLM` and
``transformers.MarianMTModel`` into an :class:`~transformer_lib.models.EncoderDecoder` computing the same function;
:func:`weights_from_hf` reads a Hugging Face output's attention weights in the library's
:class:`~transformer_lib.blocks.AttentionWeights`, so the two can be compared head for head. The pretrained loaders
download checkpoints (Colab); nothing here touches the network otherwise. ``transformers`` is imported only when
a function needs it (``pip install "transformer_lib[hf]"``).

Hugging Face's ``attention_mask`` (B, S) with 1 = real token has the library's meaning: pass
``attention_mask.bool()`` as ``src_mask``. The package :mod:`~transformer_lib.interop` exports
everything public here.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import socket
from typing import Tuple
from urllib.parse import urlparse

import torch
from torch import nn

from ._weight_copy import _copy, _copy_linear, _copy_norm, _like, _norm_eps, _same_tensor
from ..blocks import AttentionWeights
from ..models import DecoderLM, DecoderLMConfig, EncoderDecoder, EncoderDecoderConfig
from ..multihead import MultiHeadAttention
from ..positional import sinusoidal_table

__all__ = [
    "SUPPORTED_HF",
    "from_hf",
    "weights_from_hf",
    "hub_available",
    "load_pretrained_gpt2",
    "load_pretrained_marian",
]

SUPPORTED_HF = ("transformers.GPT2LMHeadModel", "transformers.MarianMTModel")
_HF_EXTRA = 'pip install "transformer_lib[hf]"'


_HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh",
                   "gelu_fast": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_python_tanh": "gelu_tanh",
                   "silu": "silu", "swish": "silu"}


def _require_transformers(caller: str):
    try:
        return importlib.import_module("transformers")
    except ImportError as err:
        raise ImportError(f"{caller} needs Hugging Face transformers, which is not installed: {_HF_EXTRA}") from err


def _hf_activation(name: str) -> str:
    if name not in _HF_ACTIVATIONS:
        raise ValueError(f"activation_function={name!r} is not supported; expected one of "
                         f"{sorted(_HF_ACTIVATIONS)}")
    return _HF_ACTIVATIONS[name]


def _gpt2(hf) -> DecoderLM:
    c = hf.config
    if not c.scale_attn_weights:
        raise ValueError("scale_attn_weights=False (unscaled dot products) is not supported: the library always "
                         "scales scores by 1/sqrt(d_head)")
    if c.scale_attn_by_inverse_layer_idx:
        raise ValueError("scale_attn_by_inverse_layer_idx=True is not supported: the library scales every layer's "
                         "scores by 1/sqrt(d_head) only")
    if c.add_cross_attention:
        raise ValueError("add_cross_attention=True is not supported: a GPT-2 with cross-attention is not a DecoderLM")
    # reorder_and_upcast_attn only changes where the scale is applied and upcasts to float32: same function.
    tr = hf.transformer
    tied = _same_tensor(hf.lm_head.weight, tr.wte.weight)
    cfg = DecoderLMConfig(vocab_size=tr.wte.num_embeddings, d_model=c.n_embd, n_heads=c.n_head, n_layers=c.n_layer,
                          d_ff=c.n_inner or 4 * c.n_embd, max_len=tr.wpe.num_embeddings, dropout=c.resid_pdrop,
                          activation=_hf_activation(c.activation_function), norm="layer", norm_first=True,
                          position="learned", bias=True, final_norm=True, embed_scale=False,
                          norm_eps=c.layer_norm_epsilon, tie_weights=tied)
    ours = _like(DecoderLM(cfg), hf)
    _copy(ours.embed.token.weight, tr.wte.weight, "wte.weight")
    _copy(ours.embed.position.weight, tr.wpe.weight, "wpe.weight")
    for i, (blk, h) in enumerate(zip(ours.blocks, tr.h)):
        # Conv1D stores weights as (in, out): transpose into nn.Linear's (out, in). c_attn's columns are q | k | v.
        _copy_norm(blk.self_sub.norm, h.ln_1, f"h.{i}.ln_1")
        _copy_linear(blk.self_attn.in_proj, h.attn.c_attn.weight.t(), h.attn.c_attn.bias, f"h.{i}.attn.c_attn")
        _copy_linear(blk.self_attn.out_proj, h.attn.c_proj.weight.t(), h.attn.c_proj.bias, f"h.{i}.attn.c_proj")
        _copy_norm(blk.ff_sub.norm, h.ln_2, f"h.{i}.ln_2")
        _copy_linear(blk.ff.w1, h.mlp.c_fc.weight.t(), h.mlp.c_fc.bias, f"h.{i}.mlp.c_fc")
        _copy_linear(blk.ff.w2, h.mlp.c_proj.weight.t(), h.mlp.c_proj.bias, f"h.{i}.mlp.c_proj")
    _copy_norm(ours.norm, tr.ln_f, "ln_f")
    if not tied:
        _copy(ours.lm_head.weight, hf.lm_head.weight, "lm_head.weight")
    return ours


def _marian_attention(dst: MultiHeadAttention, a, name: str) -> None:
    # Marian multiplies q by d_head^-0.5 after the projection, inside attention: the library's 1/sqrt(d_head).
    w = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])  # rows q | k | v
    b = None if a.q_proj.bias is None else torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias])
    _copy_linear(dst.in_proj, w, b, f"{name}.q|k|v_proj")
    _copy_linear(dst.out_proj, a.out_proj.weight, a.out_proj.bias, f"{name}.out_proj")


def _check_marian_positions(table: torch.Tensor, name: str) -> None:
    ours = sinusoidal_table(table.shape[0], table.shape[1], layout="halves").to(table.device)
    err = (table.float() - ours).abs().max().item()
    if err > 1e-4:
        raise ValueError(f"{name} differs from the sinusoidal 'halves' table by {err:.3g}; "
                         "only Marian's fixed sinusoidal positions are supported")


def _marian(hf) -> EncoderDecoder:
    c = hf.config
    enc, dec = hf.model.encoder, hf.model.decoder
    for option, a, b in (("encoder_attention_heads/decoder_attention_heads", c.encoder_attention_heads,
                          c.decoder_attention_heads),
                         ("encoder_ffn_dim/decoder_ffn_dim", c.encoder_ffn_dim, c.decoder_ffn_dim)):
        if a != b:
            raise ValueError(f"{option} = {a}/{b}: the library's EncoderDecoder uses one value for both")
    if getattr(c, "normalize_before", False):
        raise ValueError("normalize_before=True is not supported for Marian (its blocks are post-norm)")
    for module, name in ((enc, "encoder"), (dec, "decoder")):
        for extra in ("layernorm_embedding", "layer_norm"):  # BART/MBart have these; Marian does not
            if getattr(module, extra, None) is not None:
                raise ValueError(f"{name}.{extra} is not supported: Marian has no embedding or final layer norm")
        _check_marian_positions(module.embed_positions.weight, f"{name}.embed_positions")
    share = _same_tensor(enc.embed_tokens.weight, dec.embed_tokens.weight)
    tied = _same_tensor(hf.lm_head.weight, dec.embed_tokens.weight)
    norms = [n for layer in list(enc.layers) + list(dec.layers) for n in layer.modules() if isinstance(n, nn.LayerNorm)]
    cfg = EncoderDecoderConfig(
        src_vocab_size=enc.embed_tokens.num_embeddings, tgt_vocab_size=dec.embed_tokens.num_embeddings,
        d_model=c.d_model, n_heads=c.encoder_attention_heads, n_layers=c.encoder_layers,
        n_dec_layers=c.decoder_layers, d_ff=c.encoder_ffn_dim, max_len=c.max_position_embeddings,
        dropout=c.dropout, activation=_hf_activation(c.activation_function), norm="layer", norm_first=False,
        position="sinusoidal", sinusoidal_layout="halves", bias=True, final_norm=False,
        embed_scale=bool(c.scale_embedding), norm_eps=_norm_eps(*norms) if norms else None,
        share_embeddings=share, tie_weights=tied, logits_bias=True, pad_id=c.pad_token_id)
    ours = _like(EncoderDecoder(cfg), hf)
    _copy(ours.src_embed.token.weight, enc.embed_tokens.weight, "encoder.embed_tokens.weight")
    if not share:
        _copy(ours.tgt_embed.token.weight, dec.embed_tokens.weight, "decoder.embed_tokens.weight")
    for i, (blk, layer) in enumerate(zip(ours.encoder.blocks, enc.layers)):
        _marian_attention(blk.attn, layer.self_attn, f"encoder.layers.{i}.self_attn")
        _copy_norm(blk.attn_sub.norm, layer.self_attn_layer_norm, f"encoder.layers.{i}.self_attn_layer_norm")
        _copy_linear(blk.ff.w1, layer.fc1.weight, layer.fc1.bias, f"encoder.layers.{i}.fc1")
        _copy_linear(blk.ff.w2, layer.fc2.weight, layer.fc2.bias, f"encoder.layers.{i}.fc2")
        _copy_norm(blk.ff_sub.norm, layer.final_layer_norm, f"encoder.layers.{i}.final_layer_norm")
    for i, (blk, layer) in enumerate(zip(ours.decoder_blocks, dec.layers)):
        _marian_attention(blk.self_attn, layer.self_attn, f"decoder.layers.{i}.self_attn")
        _copy_norm(blk.self_sub.norm, layer.self_attn_layer_norm, f"decoder.layers.{i}.self_attn_layer_norm")
        _marian_attention(blk.cross_attn, layer.encoder_attn, f"decoder.layers.{i}.encoder_attn")
        _copy_norm(blk.cross_sub.norm, layer.encoder_attn_layer_norm, f"decoder.layers.{i}.encoder_attn_layer_norm")
        _copy_linear(blk.ff.w1, layer.fc1.weight, layer.fc1.bias, f"decoder.layers.{i}.fc1")
        _copy_linear(blk.ff.w2, layer.fc2.weight, layer.fc2.bias, f"decoder.layers.{i}.fc2")
        _copy_norm(blk.ff_sub.norm, layer.final_layer_norm, f"decoder.layers.{i}.final_layer_norm")
    if not tied:
        _copy(ours.lm_head.weight, hf.lm_head.weight, "lm_head.weight")
    _copy(ours.logits_bias, hf.final_logits_bias.reshape(-1), "final_logits_bias")
    return ours


@torch.no_grad()
def from_hf(model: nn.Module) -> nn.Module:
    """The library model that computes what a Hugging Face model computes, with its weights copied.

    * ``GPT2LMHeadModel`` -> :class:`~transformer_lib.models.DecoderLM`: learned positions (``max_len`` =
      ``n_positions``), pre-norm LayerNorm with ``layer_norm_epsilon``, final norm, ``gelu_new`` as ``'gelu_tanh'``,
      head tied to the token embedding. ``hf(ids).logits`` equals ``ours(ids)``.
    * ``MarianMTModel`` -> :class:`~transformer_lib.models.EncoderDecoder`: post-norm blocks, ``'swish'`` as
      ``'silu'``, ``scale_embedding`` as ``embed_scale``, sinusoidal positions in the ``'halves'`` layout, shared
      embeddings, ``final_logits_bias`` as ``logits_bias``, ``pad_token_id`` as ``pad_id``.
      ``hf(input_ids=src, attention_mask=a, decoder_input_ids=tgt).logits`` equals
      ``ours(src, tgt, src_mask=a.bool())``. (Without ``attention_mask`` Hugging Face attends to padding;
      the library masks ``pad_id`` by default.)

    Args:
        model: one of :data:`SUPPORTED_HF`.

    Returns:
        The library model in evaluation mode, on the source's device and dtype.

    Raises:
        ImportError: transformers is not installed.
        TypeError: another model class.
        ValueError: a config option the library cannot express (named in the message).
    """
    transformers = _require_transformers("from_hf")
    converters = ((transformers.GPT2LMHeadModel, _gpt2), (transformers.MarianMTModel, _marian))
    convert = next((c for cls, c in converters if isinstance(model, cls)), None)
    if convert is None:
        raise TypeError(f"from_hf supports {', '.join(SUPPORTED_HF)}; got {type(model).__name__}")
    return convert(model).eval()


# Hugging Face's output field -> AttentionWeights field
_HF_WEIGHTS = (("attentions", "self_attn"), ("decoder_attentions", "self_attn"),
               ("cross_attentions", "cross_attn"), ("encoder_attentions", "encoder"))


def weights_from_hf(outputs) -> AttentionWeights:
    """The attention weights of a Hugging Face model's output, as the library returns them.

    GPT-2's ``attentions`` become ``self_attn``; Marian's ``encoder_attentions``, ``decoder_attentions`` and
    ``cross_attentions`` become ``encoder``, ``self_attn`` and ``cross_attn``: one (B, H, T, S) tensor per layer,
    as :func:`from_hf`'s model returns with ``return_weights=True``.

    Args:
        outputs: the output of a model called with ``output_attentions=True``. Hugging Face's fused (SDPA)
            attention returns no weights: build or load the model with ``attn_implementation="eager"``.

    Raises:
        ValueError: the output holds no attention weights.
    """
    found = {}
    for theirs, ours in _HF_WEIGHTS:
        value = getattr(outputs, theirs, None)
        if value is not None and len(value) and all(isinstance(w, torch.Tensor) for w in value):
            found[ours] = tuple(value)
    if not found:
        raise ValueError(f"outputs ({type(outputs).__name__}) holds no attention weights: call the model with "
                         "output_attentions=True, built or loaded with attn_implementation='eager'")
    return AttentionWeights(**found)


# ----------------------------------------------------------------------------------------------------------------
# Pretrained checkpoints (Colab; the chapters skip these cells offline)
# ----------------------------------------------------------------------------------------------------------------
def hub_available(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face Hub looks reachable: a TCP connection to huggingface.co:443 within ``timeout``.

    Returns False at once when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set, and False on any error.
    """
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
           for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except Exception:  # DNS failure, refused, timed out…: all mean "not now"
        return False


def load_pretrained_gpt2(name: str = "gpt2", **kwargs) -> Tuple[DecoderLM, object]:
    """Download a GPT-2 checkpoint from the Hub and return ``(our DecoderLM, its tokenizer)``.

    Args:
        name: Hub model id (``'gpt2'``, ``'distilgpt2'``, ``'gpt2-medium'``…).
        **kwargs: passed to ``GPT2LMHeadModel.from_pretrained``.
    """
    transformers = _require_transformers("load_pretrained_gpt2")
    hf = transformers.GPT2LMHeadModel.from_pretrained(name, **kwargs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    return from_hf(hf), tokenizer


def load_pretrained_marian(name: str = "Helsinki-NLP/opus-mt-en-de", **kwargs) -> Tuple[EncoderDecoder, object]:
    """Download a Marian translation checkpoint from the Hub and return ``(our EncoderDecoder, its tokenizer)``.

    Marian's tokenizer needs ``sentencepiece``. Decoding starts from ``pad_token_id`` (Marian's
    ``decoder_start_token_id``), not from the library's BOS.

    Args:
        name: Hub model id (``'Helsinki-NLP/opus-mt-en-de'``, ``'Helsinki-NLP/opus-mt-fr-en'``…).
        **kwargs: passed to ``MarianMTModel.from_pretrained``.
    """
    transformers = _require_transformers("load_pretrained_marian")
    if importlib.util.find_spec("sentencepiece") is None:
        raise ImportError("load_pretrained_marian needs sentencepiece for Marian's tokenizer: "
                          f"pip install sentencepiece (or {_HF_EXTRA})")
    hf = transformers.MarianMTModel.from_pretrained(name, **kwargs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    return from_hf(hf), tokenizer
