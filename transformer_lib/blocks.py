"""Building blocks: position-wise feed-forward networks, normalisation, encoder and decoder blocks.

A block is ``x + sublayer(norm(x))`` (pre-norm, Xiong et al., 2020) or ``norm(x + sublayer(x))`` (post-norm, the
original Transformer). The flags ``residual`` and ``norm=None`` exist so the book can take them away and measure
what they bring (chapters 8 and 9).

With ``return_weights=True`` an attention function or layer returns its weights as one tensor; a block, and every
model built from blocks, returns an :class:`AttentionWeights`: one tensor per layer and kind of attention, so the
same code reads the weights of one block, an encoder, a language model or an encoder–decoder.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_choice, check_positive_int, check_tensor
from .multihead import LayerCache, MultiHeadAttention

__all__ = [
    "AttentionWeights",
    "ACTIVATIONS",
    "FeedForward",
    "LayerNorm",
    "RMSNorm",
    "NORMS",
    "make_norm",
    "EncoderBlock",
    "DecoderBlock",
]

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu")
NORMS = ("layer", "rms", None)


@dataclass(frozen=True, eq=False)  # tensors have no single truth value: compare the fields
class AttentionWeights:
    """The attention weights of a block or a model: one (B, H, T, S) tensor per layer, by kind of attention.

    Fields:
        self_attn: each layer's self-attention, in order (an encoder's, or a decoder's masked self-attention).
        cross_attn: each decoder layer's cross-attention to the encoder's memory (empty without memory).
        encoder: the source side's self-attention in an encoder–decoder (empty in every other model).

    Blocks return one layer (``w.self_attn[0]``); a stack of blocks adds them up layer by layer (``w1 + w2``).

    Example::

        logits, w = model(src, tgt_in, return_weights=True)     # an EncoderDecoder
        w.cross_attn[-1][0, 2]                                  # last layer, example 0, head 2: (T, S)
    """

    self_attn: Tuple[torch.Tensor, ...] = ()
    cross_attn: Tuple[torch.Tensor, ...] = ()
    encoder: Tuple[torch.Tensor, ...] = ()

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (tuple, list)) or not all(isinstance(w, torch.Tensor) for w in value):
                raise TypeError(f"AttentionWeights.{f.name} must be a tuple of tensors (one per layer), "
                                f"got {type(value).__name__}")
            object.__setattr__(self, f.name, tuple(value))

    def __add__(self, other: "AttentionWeights") -> "AttentionWeights":
        """The weights of this stack of layers followed by ``other``'s."""
        if not isinstance(other, AttentionWeights):
            return NotImplemented
        return AttentionWeights(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def cpu(self) -> "AttentionWeights":
        """The same weights on the CPU (for plotting and counting)."""
        return AttentionWeights(**{f.name: tuple(w.cpu() for w in getattr(self, f.name)) for f in fields(self)})


def _activation(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x)
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return F.silu(x)


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``m_i = W₂ act(W₁ h_i + b₁) + b₂``, applied to each token alone.

    ``'swiglu'`` is the gated variant ``W₂ (silu(W₁ h) ⊙ W₃ h)`` (Shazeer, 2020); it has three matrices, so
    for equal parameters use ``d_ff`` about 2/3 of the ungated width.

    Args:
        d_model: width ``d``.
        d_ff: hidden width (the paper: 4d).
        activation: one of :data:`ACTIVATIONS`.
        dropout: dropout after the activation.
        bias: use biases.

    Shapes:
        x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        check_choice("activation", activation, ACTIVATIONS)
        self.d_model, self.activation = d_model, activation
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w3 = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, dtype="float", last_dim=self.d_model)
        hidden = _activation(self.activation, self.w1(x))
        if self.w3 is not None:
            hidden = hidden * self.w3(x)
        return self.w2(self.dropout(hidden))


class LayerNorm(nn.Module):
    """Layer normalisation (Ba et al., 2016): per token, subtract the mean and divide by the standard deviation
    over the ``d`` features, ``(x - μ)/√(σ² + ε) · γ + β`` with μ = (1/d)Σ x_j.

    Shapes:
        x (..., D) -> (..., D).
    """

    def __init__(self, d: int, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
        super().__init__()
        check_positive_int("d", d)
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(d)) if elementwise_affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, dtype="float", last_dim=self.d)
        return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang & Sennrich, 2019): ``x / √(mean(x²) + ε) · γ``, no centring.

    Shapes:
        x (..., D) -> (..., D).
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        check_positive_int("d", d)
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, dtype="float", last_dim=self.d)
        return F.rms_norm(x, (self.d,), self.weight, self.eps)


def make_norm(kind: Optional[str], d: int, eps: Optional[float] = None, bias: bool = True) -> nn.Module:
    """``'layer'`` -> :class:`LayerNorm` (with a bias unless ``bias=False``), ``'rms'`` -> :class:`RMSNorm`,
    None -> identity."""
    check_choice("norm", kind, NORMS)
    if kind == "layer":
        return LayerNorm(d, 1e-5 if eps is None else eps, bias=bias)
    if kind == "rms":
        return RMSNorm(d) if eps is None else RMSNorm(d, eps)
    return nn.Identity()


class _Sublayer(nn.Module):
    """One residual sub-layer: pre-norm ``x + f(norm(x))`` or post-norm ``norm(x + f(x))``."""

    def __init__(self, d_model: int, norm: Optional[str], norm_first: bool, residual: bool, dropout: float,
                 norm_eps: Optional[float], bias: bool = True):
        super().__init__()
        self.norm = make_norm(norm, d_model, norm_eps, bias)
        self.norm_first, self.residual = norm_first, residual
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, fn) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        out = fn(self.norm(x) if self.norm_first else x)
        weights = None
        if isinstance(out, tuple):
            out, weights = out
        out = self.dropout(out)
        y = x + out if self.residual else out
        return (y if self.norm_first else self.norm(y)), weights


class EncoderBlock(nn.Module):
    """Transformer encoder block: bidirectional self-attention, then the feed-forward network.

    Args:
        d_model, n_heads: width and number of heads.
        d_ff: hidden width of the feed-forward network; 0 or None drops the feed-forward sub-layer.
        dropout: dropout on attention weights and sub-layer outputs.
        activation: feed-forward activation (see :data:`ACTIVATIONS`).
        norm: ``'layer'``, ``'rms'`` or None.
        norm_first: pre-norm (True) or post-norm (False).
        residual: keep the residual connections.
        position: attention-level position module (see :mod:`transformer_lib.positional`).
        bias: biases in the linear layers.
        norm_eps: epsilon of the norms (default: the norm's own).

    Shapes:
        x (B, T, D), mask bool broadcastable to (B, H, T, T) -> (B, T, D) [, :class:`AttentionWeights` with
        ``self_attn`` = ((B, H, T, T),)].
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, dropout: float = 0.0,
                 activation: str = "relu", norm: Optional[str] = "layer", norm_first: bool = True,
                 residual: bool = True, position: Optional[nn.Module] = None, bias: bool = True,
                 norm_eps: Optional[float] = None):
        super().__init__()
        self.d_model = d_model
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, position=position)
        self.attn_sub = _Sublayer(d_model, norm, norm_first, residual, dropout, norm_eps, bias)
        self.ff = FeedForward(d_model, d_ff, activation, dropout, bias) if d_ff else None
        self.ff_sub = _Sublayer(d_model, norm, norm_first, residual, dropout, norm_eps, bias) if d_ff else None

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, return_weights: bool = False,
                causal: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, AttentionWeights]]:
        x, weights = self.attn_sub(x, lambda h: self.attn(h, mask=mask, return_weights=return_weights,
                                                          causal=causal))
        if self.ff is not None:
            x, _ = self.ff_sub(x, self.ff)
        return (x, AttentionWeights(self_attn=(weights,))) if return_weights else x


class DecoderBlock(nn.Module):
    """Transformer decoder block: masked self-attention, cross-attention to ``memory`` (when given), feed-forward.

    Without cross-attention (``cross_attention=False``) this is the GPT-style block of a decoder-only model.

    Args:
        as :class:`EncoderBlock`, plus ``cross_attention`` (build the cross-attention sub-layer).

    Shapes:
        x (B, T, D), memory (B, S, D), mask bool broadcastable to (B, H, T, T), memory_mask bool broadcastable
        to (B, H, T, S) -> (B, T, D) [, :class:`AttentionWeights` with ``self_attn`` = ((B, H, T, T),) and
        ``cross_attn`` = ((B, H, T, S),), or () without memory].
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, dropout: float = 0.0,
                 activation: str = "relu", norm: Optional[str] = "layer", norm_first: bool = True,
                 residual: bool = True, position: Optional[nn.Module] = None, bias: bool = True,
                 cross_attention: bool = True, norm_eps: Optional[float] = None):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, position=position)
        self.self_sub = _Sublayer(d_model, norm, norm_first, residual, dropout, norm_eps, bias)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias) if cross_attention else None
        self.cross_sub = _Sublayer(d_model, norm, norm_first, residual, dropout, norm_eps, bias) if cross_attention else None
        self.ff = FeedForward(d_model, d_ff, activation, dropout, bias) if d_ff else None
        self.ff_sub = _Sublayer(d_model, norm, norm_first, residual, dropout, norm_eps, bias) if d_ff else None

    def forward(self, x: torch.Tensor, memory: Optional[torch.Tensor] = None, mask: Optional[torch.Tensor] = None,
                memory_mask: Optional[torch.Tensor] = None, causal: bool = True, return_weights: bool = False,
                cache: Optional[Tuple[LayerCache, LayerCache]] = None):
        self_cache, cross_cache = cache if cache is not None else (None, None)
        x, self_w = self.self_sub(x, lambda h: self.self_attn(h, mask=mask, causal=causal, cache=self_cache,
                                                               return_weights=return_weights))
        cross_w = None
        if memory is not None:
            if self.cross_attn is None:
                raise ValueError("memory was given but this DecoderBlock was built with cross_attention=False")
            x, cross_w = self.cross_sub(x, lambda h: self.cross_attn(h, context=memory, mask=memory_mask,
                                                                     cache=cross_cache,
                                                                     return_weights=return_weights))
        if self.ff is not None:
            x, _ = self.ff_sub(x, self.ff)
        if return_weights:
            return x, AttentionWeights(self_attn=(self_w,), cross_attn=() if cross_w is None else (cross_w,))
        return x
