"""Interoperability: turn PyTorch's and Hugging Face's Transformer modules into the library's, weight for weight.

The converted module computes the same function as the original (in evaluation mode, up to float rounding), so a
chapter can check the library against code that millions of people use, and can load a pretrained checkpoint
(GPT-2, a Marian translation model) into the classes it has built.

Conventions at the boundary — read these before passing masks across:

* **Masks.** The library's masks are boolean with ``True`` = *may attend* (the convention of
  :func:`torch.nn.functional.scaled_dot_product_attention`). ``torch.nn.MultiheadAttention`` and
  ``nn.Transformer*Layer`` use the opposite: ``key_padding_mask`` ``True`` = *ignore this key*, a boolean
  ``attn_mask`` ``True`` = *not allowed*, and a float ``attn_mask`` is *added* to the scores (``-inf`` = not
  allowed). :func:`mask_from_torch` converts. Hugging Face's ``attention_mask`` (B, S) with 1 = real token already
  has the library's meaning: pass ``attention_mask.bool()`` as ``src_mask``.
* **Layout.** The library is batch-first. A module converted from ``batch_first=False`` takes (B, T, D): transpose
  its (T, B, D) inputs.
* **Causality.** ``nn.TransformerDecoderLayer`` is causal only when given a ``tgt_mask``; the library's
  :class:`~transformer_lib.blocks.DecoderBlock` is causal by default (``causal=True``).
* **Fully masked rows.** A query with no key left gives NaN in PyTorch and zeros in the library.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import socket
from typing import Optional, Tuple
from urllib.parse import urlparse

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_positive_int, check_tensor
from .attention import combine_masks
from .blocks import DecoderBlock, EncoderBlock
from .models import DecoderLM, DecoderLMConfig, EncoderDecoder, EncoderDecoderConfig
from .multihead import MultiHeadAttention
from .positional import sinusoidal_table

__all__ = [
    "SUPPORTED_TORCH",
    "SUPPORTED_HF",
    "mask_from_torch",
    "from_torch",
    "to_torch",
    "from_hf",
    "hub_available",
    "load_pretrained_gpt2",
    "load_pretrained_marian",
]

SUPPORTED_TORCH = ("torch.nn.MultiheadAttention", "torch.nn.TransformerEncoderLayer",
                   "torch.nn.TransformerDecoderLayer")
SUPPORTED_HF = ("transformers.GPT2LMHeadModel", "transformers.MarianMTModel")
_HF_EXTRA = 'pip install "transformer_lib[hf]"'


# ----------------------------------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------------------------------
def _allowed(name: str, mask: torch.Tensor) -> torch.Tensor:
    """PyTorch's "blocked" mask (bool True = blocked, or additive float with -inf) -> library's "allowed" mask."""
    if mask.dtype == torch.bool:
        return ~mask
    if not mask.is_floating_point():
        raise TypeError(f"{name} must be a bool or float tensor (PyTorch convention), got {mask.dtype}")
    blocked = mask <= torch.finfo(mask.dtype).min  # -inf, or the dtype's minimum (Hugging Face style)
    soft = ~(blocked | (mask == 0))
    if soft.any():
        raise ValueError(f"{name} is an additive float mask holding values other than 0 and -inf "
                         f"(e.g. {mask[soft][0].item():.4g}); only 0 (attend) and -inf (blocked) convert to a "
                         "boolean mask — pass a soft bias to attention as bias= instead")
    return ~blocked


def mask_from_torch(attn_mask: Optional[torch.Tensor] = None, key_padding_mask: Optional[torch.Tensor] = None,
                    n_heads: Optional[int] = None) -> Optional[torch.Tensor]:
    """Convert PyTorch's masks (True = *ignore*) into one library mask (True = *may attend*).

    Args:
        attn_mask: ``torch.nn.MultiheadAttention``'s ``attn_mask``: bool with True = *not allowed*, or float added
            to the scores with ``-inf`` = not allowed (``nn.Transformer.generate_square_subsequent_mask``).
        key_padding_mask: bool (B, S) with True = *padding, ignore this key* (or float with ``-inf``).
        n_heads: needed only for a per-head 3-D ``attn_mask`` of shape (B·H, T, S).

    Shapes:
        attn_mask (T, S) or (B·H, T, S); key_padding_mask (B, S) -> bool (1, 1, T, S), (B, 1, 1, S),
        (B, 1, T, S) or (B, H, T, S), broadcastable against scores (B, H, T, S); None if both are None.
    """
    parts = []
    if attn_mask is not None:
        check_tensor("attn_mask", attn_mask, ndim=(2, 3))
        allowed = _allowed("attn_mask", attn_mask)
        if allowed.dim() == 2:
            allowed = allowed[None, None]  # (1, 1, T, S)
        else:
            if n_heads is None:
                raise ValueError(f"a 3-D attn_mask of shape {tuple(attn_mask.shape)} is per head (B·H, T, S): "
                                 "pass n_heads= to split it")
            check_positive_int("n_heads", n_heads)
            bh, t, s = allowed.shape
            if bh % n_heads:
                raise ValueError(f"attn_mask's first dimension {bh} must be B·n_heads, not divisible by "
                                 f"n_heads={n_heads}")
            allowed = allowed.view(bh // n_heads, n_heads, t, s)  # (B, H, T, S)
        parts.append(allowed)
    if key_padding_mask is not None:
        check_tensor("key_padding_mask", key_padding_mask, ndim=2)
        if parts and parts[0].shape[-1] != key_padding_mask.shape[-1]:
            raise ValueError(f"key_padding_mask has S={key_padding_mask.shape[-1]} keys but attn_mask has "
                             f"S={parts[0].shape[-1]}")
        parts.append(_allowed("key_padding_mask", key_padding_mask)[:, None, None, :])  # (B, 1, 1, S)
    return combine_masks(*parts)


# ----------------------------------------------------------------------------------------------------------------
# Copying weights
# ----------------------------------------------------------------------------------------------------------------
def _copy(dst: Optional[torch.Tensor], src: Optional[torch.Tensor], name: str) -> None:
    """dst <- src; a missing source bias means zero (PyTorch's bias=False), a missing norm weight means one."""
    if dst is None:
        if src is not None:
            raise ValueError(f"cannot copy {name}: the library module has no such parameter")
        return
    if src is None:
        if name.endswith("bias"):
            nn.init.zeros_(dst)
        else:
            nn.init.ones_(dst)
        return
    if dst.shape != src.shape:
        raise ValueError(f"cannot copy {name}: shape {tuple(src.shape)} into {tuple(dst.shape)}")
    dst.copy_(src)


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: Optional[torch.Tensor], name: str) -> None:
    _copy(dst.weight, weight, f"{name}.weight")
    _copy(dst.bias, bias, f"{name}.bias")


def _copy_norm(dst: nn.Module, src: nn.LayerNorm, name: str) -> None:
    _copy(dst.weight, src.weight, f"{name}.weight")
    _copy(dst.bias, src.bias, f"{name}.bias")


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Tied weights: one tensor, or equal values (tying them keeps the function)."""
    return a is b or (a.shape == b.shape and (a.data_ptr() == b.data_ptr() or torch.equal(a, b)))


def _like(module: nn.Module, source: nn.Module) -> nn.Module:
    """Move ``module`` to the source's device and floating dtype (before copying, so nothing is rounded)."""
    p = next((p for p in source.parameters() if p.is_floating_point()), None)
    return module if p is None else module.to(device=p.device, dtype=p.dtype)


def _norm_eps(*norms: nn.LayerNorm) -> float:
    eps = {n.eps for n in norms}
    if len(eps) > 1:
        raise ValueError(f"the layer norms of one layer must share eps to convert, got {sorted(eps)}")
    return eps.pop()


# ----------------------------------------------------------------------------------------------------------------
# PyTorch
# ----------------------------------------------------------------------------------------------------------------
def _torch_activation(act) -> str:
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu:
        return "gelu"
    if isinstance(act, nn.GELU):
        return "gelu" if act.approximate == "none" else "gelu_tanh"
    if act is F.silu or isinstance(act, nn.SiLU):
        return "silu"
    raise ValueError(f"activation {act!r} is not supported; expected relu, gelu (exact or tanh) or silu")


def _check_torch_mha(m: nn.MultiheadAttention, name: str) -> None:
    if not m._qkv_same_embed_dim:
        raise ValueError(f"{name}: kdim={m.kdim} and vdim={m.vdim} must equal embed_dim={m.embed_dim} (one "
                         "in_proj for q, k and v); separate key/value sizes are not supported")
    if m.bias_k is not None:
        raise ValueError(f"{name}: add_bias_kv=True is not supported")
    if m.add_zero_attn:
        raise ValueError(f"{name}: add_zero_attn=True is not supported")


def _copy_torch_mha(dst: MultiHeadAttention, m: nn.MultiheadAttention, name: str) -> None:
    _copy_linear(dst.in_proj, m.in_proj_weight, m.in_proj_bias, f"{name}.in_proj")  # rows q | k | v in both
    _copy_linear(dst.out_proj, m.out_proj.weight, m.out_proj.bias, f"{name}.out_proj")


def _mha_from_torch(m: nn.MultiheadAttention) -> MultiHeadAttention:
    _check_torch_mha(m, "MultiheadAttention")
    ours = _like(MultiHeadAttention(m.embed_dim, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None), m)
    _copy_torch_mha(ours, m, "self_attn")
    return ours


def _encoder_layer_from_torch(layer: nn.TransformerEncoderLayer) -> EncoderBlock:
    _check_torch_mha(layer.self_attn, "self_attn")
    ours = EncoderBlock(layer.self_attn.embed_dim, layer.self_attn.num_heads, d_ff=layer.linear1.out_features,
                        dropout=layer.dropout.p, activation=_torch_activation(layer.activation),
                        norm_first=layer.norm_first, bias=layer.linear1.bias is not None,
                        norm_eps=_norm_eps(layer.norm1, layer.norm2))
    ours = _like(ours, layer)
    _copy_torch_mha(ours.attn, layer.self_attn, "self_attn")
    _copy_norm(ours.attn_sub.norm, layer.norm1, "norm1")
    _copy_linear(ours.ff.w1, layer.linear1.weight, layer.linear1.bias, "linear1")
    _copy_linear(ours.ff.w2, layer.linear2.weight, layer.linear2.bias, "linear2")
    _copy_norm(ours.ff_sub.norm, layer.norm2, "norm2")
    return ours


def _decoder_layer_from_torch(layer: nn.TransformerDecoderLayer) -> DecoderBlock:
    _check_torch_mha(layer.self_attn, "self_attn")
    _check_torch_mha(layer.multihead_attn, "multihead_attn")
    ours = DecoderBlock(layer.self_attn.embed_dim, layer.self_attn.num_heads, d_ff=layer.linear1.out_features,
                        dropout=layer.dropout.p, activation=_torch_activation(layer.activation),
                        norm_first=layer.norm_first, bias=layer.linear1.bias is not None, cross_attention=True,
                        norm_eps=_norm_eps(layer.norm1, layer.norm2, layer.norm3))
    ours = _like(ours, layer)
    _copy_torch_mha(ours.self_attn, layer.self_attn, "self_attn")
    _copy_norm(ours.self_sub.norm, layer.norm1, "norm1")
    _copy_torch_mha(ours.cross_attn, layer.multihead_attn, "multihead_attn")
    _copy_norm(ours.cross_sub.norm, layer.norm2, "norm2")
    _copy_linear(ours.ff.w1, layer.linear1.weight, layer.linear1.bias, "linear1")
    _copy_linear(ours.ff.w2, layer.linear2.weight, layer.linear2.bias, "linear2")
    _copy_norm(ours.ff_sub.norm, layer.norm3, "norm3")
    return ours


@torch.no_grad()
def from_torch(module: nn.Module) -> nn.Module:
    """The library module that computes what a PyTorch built-in computes, with its weights copied.

    * ``nn.MultiheadAttention`` -> :class:`~transformer_lib.multihead.MultiHeadAttention`
      (``in_proj_weight``/``in_proj_bias`` map onto ``in_proj``, rows q | k | v; ``out_proj`` onto ``out_proj``).
      ``torch_mha(q, kv, kv)`` equals ``ours(q, context=kv)`` and ``torch_mha(x, x, x)`` equals ``ours(x)``.
    * ``nn.TransformerEncoderLayer`` -> :class:`~transformer_lib.blocks.EncoderBlock`
      (``norm_first`` either way; relu, gelu or silu; ``norm1.eps`` becomes ``norm_eps``).
    * ``nn.TransformerDecoderLayer`` -> :class:`~transformer_lib.blocks.DecoderBlock` with cross-attention.

    Masks: ``torch_layer(x, src_mask=m, src_key_padding_mask=p)`` equals
    ``ours(x, mask=mask_from_torch(m, p))``. The result is batch-first whatever ``batch_first`` the source had.

    Args:
        module: one of :data:`SUPPORTED_TORCH`.

    Returns:
        The library module, in evaluation mode, on the source's device and dtype.

    Raises:
        TypeError: for another module type.
        ValueError: for an option the library cannot express (``kdim``/``vdim`` different from ``embed_dim``,
            ``add_bias_kv``, ``add_zero_attn``, another activation).
    """
    if isinstance(module, nn.TransformerEncoderLayer):
        ours = _encoder_layer_from_torch(module)
    elif isinstance(module, nn.TransformerDecoderLayer):
        ours = _decoder_layer_from_torch(module)
    elif isinstance(module, nn.MultiheadAttention):
        ours = _mha_from_torch(module)
    else:
        raise TypeError(f"from_torch supports {', '.join(SUPPORTED_TORCH)}; got {type(module).__name__}")
    return ours.eval()


@torch.no_grad()
def to_torch(mha: MultiHeadAttention, batch_first: bool = True) -> nn.MultiheadAttention:
    """The inverse of :func:`from_torch` for multi-head attention: a ``torch.nn.MultiheadAttention`` with our weights.

    Args:
        mha: a library :class:`~transformer_lib.multihead.MultiHeadAttention` without a position module.
        batch_first: layout of the PyTorch module.

    Returns:
        ``nn.MultiheadAttention`` in evaluation mode on ``mha``'s device and dtype.
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"to_torch expects a transformer_lib MultiHeadAttention, got {type(mha).__name__}")
    if mha.position is not None:
        raise ValueError(f"to_torch cannot express position={type(mha.position).__name__}: "
                         "torch.nn.MultiheadAttention has no attention-level positions")
    theirs = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, bias=mha.in_proj.bias is not None,
                                   batch_first=batch_first)
    theirs = _like(theirs, mha)
    _copy(theirs.in_proj_weight, mha.in_proj.weight, "in_proj_weight")
    _copy(theirs.out_proj.weight, mha.out_proj.weight, "out_proj.weight")
    if mha.in_proj.bias is not None:
        _copy(theirs.in_proj_bias, mha.in_proj.bias, "in_proj_bias")
        _copy(theirs.out_proj.bias, mha.out_proj.bias, "out_proj.bias")
    return theirs.eval()


# ----------------------------------------------------------------------------------------------------------------
# Hugging Face
# ----------------------------------------------------------------------------------------------------------------
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
    if isinstance(model, transformers.GPT2LMHeadModel):
        ours = _gpt2(model)
    elif isinstance(model, transformers.MarianMTModel):
        ours = _marian(model)
    else:
        raise TypeError(f"from_hf supports {', '.join(SUPPORTED_HF)}; got {type(model).__name__}")
    return ours.eval()


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
