"""PyTorch's Transformer modules (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
``nn.TransformerDecoderLayer``) as the library's, weight for weight, and back (:func:`to_torch`); PyTorch's masks
in the library's convention (:func:`mask_from_torch`). The conventions at the boundary are those of the package,
:mod:`~transformer_lib.interop`.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_positive_int, check_tensor
from ._weight_copy import _copy, _copy_linear, _copy_norm, _like, _norm_eps
from ..attention import combine_masks
from ..blocks import DecoderBlock, EncoderBlock
from ..multihead import MultiHeadAttention

__all__ = ["SUPPORTED_TORCH", "mask_from_torch", "from_torch", "to_torch"]

SUPPORTED_TORCH = ("torch.nn.MultiheadAttention", "torch.nn.TransformerEncoderLayer",
                   "torch.nn.TransformerDecoderLayer")


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


def _torch_block_options(layer, *norms: nn.LayerNorm) -> dict:
    """The library block's arguments that express a ``nn.Transformer*Layer``."""
    return dict(d_model=layer.self_attn.embed_dim, n_heads=layer.self_attn.num_heads, d_ff=layer.linear1.out_features,
                dropout=layer.dropout.p, activation=_torch_activation(layer.activation), norm_first=layer.norm_first,
                bias=layer.linear1.bias is not None, norm_eps=_norm_eps(*norms))


def _copy_torch_feed_forward(ours, layer, norm: nn.LayerNorm, norm_name: str) -> None:
    _copy_linear(ours.ff.w1, layer.linear1.weight, layer.linear1.bias, "linear1")
    _copy_linear(ours.ff.w2, layer.linear2.weight, layer.linear2.bias, "linear2")
    _copy_norm(ours.ff_sub.norm, norm, norm_name)


def _encoder_layer_from_torch(layer: nn.TransformerEncoderLayer) -> EncoderBlock:
    _check_torch_mha(layer.self_attn, "self_attn")
    ours = _like(EncoderBlock(**_torch_block_options(layer, layer.norm1, layer.norm2)), layer)
    _copy_torch_mha(ours.attn, layer.self_attn, "self_attn")
    _copy_norm(ours.attn_sub.norm, layer.norm1, "norm1")
    _copy_torch_feed_forward(ours, layer, layer.norm2, "norm2")
    return ours


def _decoder_layer_from_torch(layer: nn.TransformerDecoderLayer) -> DecoderBlock:
    _check_torch_mha(layer.self_attn, "self_attn")
    _check_torch_mha(layer.multihead_attn, "multihead_attn")
    options = _torch_block_options(layer, layer.norm1, layer.norm2, layer.norm3)
    ours = _like(DecoderBlock(**options, cross_attention=True), layer)
    _copy_torch_mha(ours.self_attn, layer.self_attn, "self_attn")
    _copy_norm(ours.self_sub.norm, layer.norm1, "norm1")
    _copy_torch_mha(ours.cross_attn, layer.multihead_attn, "multihead_attn")
    _copy_norm(ours.cross_sub.norm, layer.norm2, "norm2")
    _copy_torch_feed_forward(ours, layer, layer.norm3, "norm3")
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
    converters = ((nn.TransformerEncoderLayer, _encoder_layer_from_torch),
                  (nn.TransformerDecoderLayer, _decoder_layer_from_torch), (nn.MultiheadAttention, _mha_from_torch))
    convert = next((c for cls, c in converters if isinstance(module, cls)), None)
    if convert is None:
        raise TypeError(f"from_torch supports {', '.join(SUPPORTED_TORCH)}; got {type(module).__name__}")
    return convert(module).eval()


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
