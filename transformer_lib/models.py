"""Whole models: an encoder, a decoder-only language model and an encoder–decoder, each from a dataclass config.

Decoding protocol shared with the RNN baselines (:mod:`transformer_lib.rnn`) and used by
:mod:`transformer_lib.generation`:

* ``DecoderLM``: ``model(ids, cache=cache)`` -> logits, ``model.new_cache()``;
* ``EncoderDecoder``: ``memory = model.encode(src, src_mask)``,
  ``model.decode(tgt, memory, src_mask, cache=cache)`` -> logits, ``model.new_cache()``.

A cache remembers the positions already decoded, so each step feeds only the new tokens.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Dict, Optional

import torch
from torch import nn

from .checks import check_choice, check_dropout, check_ids, check_positive_int, check_tensor, deferring
from .attention import padding_mask, real_tokens
from .blocks import ACTIVATIONS, NORMS, AttentionWeights, DecoderBlock, EncoderBlock, make_norm
from .multihead import KVCache
from .positional import (POSITION_KINDS, LearnedPositionalEmbedding, SinusoidalPositionalEncoding,
                         make_attention_position)

__all__ = [
    "EncoderConfig",
    "DecoderLMConfig",
    "EncoderDecoderConfig",
    "TokenEmbedding",
    "Encoder",
    "DecoderLM",
    "EncoderDecoder",
    "count_parameters",
    "INIT_SCHEMES",
    "init_weights",
]


@dataclass
class _TransformerConfig:
    d_model: int = 128  # width of every token representation
    n_heads: int = 4  # attention heads per layer; must divide d_model
    n_layers: int = 2  # blocks in the stack (encoder side for EncoderDecoder)
    d_ff: Optional[int] = 512  # feed-forward hidden width; 0/None removes the feed-forward sub-layers
    max_len: int = 512  # longest sequence of a learned position table (and the sinusoidal cache size)
    dropout: float = 0.0  # dropout on attention weights, sub-layer outputs and embeddings
    activation: str = "relu"  # relu | gelu | gelu_tanh | silu | swiglu
    norm: Optional[str] = "layer"  # layer | rms | None
    norm_first: bool = True  # pre-norm (True) or post-norm (False, the 2017 paper)
    residual: bool = True  # residual connections around every sub-layer
    position: str = "sinusoidal"  # sinusoidal | learned | alibi | relative | rotary | none
    max_distance: int = 16  # clipping distance of relative positions
    bias: bool = True  # biases in linear layers
    final_norm: bool = True  # a norm after the last pre-norm block
    embed_scale: bool = False  # multiply token embeddings by sqrt(d_model) (the 2017 paper, Marian)
    sinusoidal_layout: str = "interleaved"  # interleaved | halves (Marian checkpoints)
    norm_eps: Optional[float] = None  # epsilon of the norms (None: LayerNorm 1e-5, RMSNorm 1e-6)

    def _validate(self) -> None:
        check_positive_int("d_model", self.d_model)
        check_positive_int("n_heads", self.n_heads)
        check_positive_int("n_layers", self.n_layers, allow_zero=True)
        check_positive_int("max_len", self.max_len)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got d_model={self.d_model}, "
                             f"n_heads={self.n_heads}")
        if self.d_ff is not None:
            check_positive_int("d_ff", self.d_ff, allow_zero=True)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("norm", self.norm, NORMS)
        check_choice("position", self.position, POSITION_KINDS)
        check_choice("sinusoidal_layout", self.sinusoidal_layout, ("interleaved", "halves"))
        check_dropout(self.dropout)

    @classmethod
    def from_dict(cls, options: Dict):
        """Build a config from a dict, rejecting unknown options by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown config option(s) {unknown} for {cls.__name__}; valid: {sorted(known)}")
        return cls(**options)

    def to_dict(self) -> Dict:
        return asdict(self)


@dataclass
class EncoderConfig(_TransformerConfig):
    """Config of :class:`Encoder` (bidirectional, BERT-style)."""

    vocab_size: int = 0  # number of token ids (required)
    pad_id: Optional[int] = 0  # padding id: keys equal to it are masked when no mask is given

    def __post_init__(self):
        check_positive_int("vocab_size", self.vocab_size)
        self._validate()


@dataclass
class DecoderLMConfig(_TransformerConfig):
    """Config of :class:`DecoderLM` (decoder-only, GPT-style)."""

    vocab_size: int = 0  # number of token ids (required)
    tie_weights: bool = True  # share the output projection with the token embedding (Press & Wolf, 2017)

    def __post_init__(self):
        check_positive_int("vocab_size", self.vocab_size)
        self._validate()


@dataclass
class EncoderDecoderConfig(_TransformerConfig):
    """Config of :class:`EncoderDecoder` (translation, T5-style)."""

    src_vocab_size: int = 0  # source token ids (required)
    tgt_vocab_size: int = 0  # target token ids (required)
    n_dec_layers: Optional[int] = None  # decoder blocks (default: n_layers)
    share_embeddings: bool = False  # one embedding table for source and target (needs equal vocabularies)
    tie_weights: bool = True  # output projection shares the target embedding
    logits_bias: bool = False  # a learned bias on the output logits (Marian's final_logits_bias)
    pad_id: Optional[int] = 0  # padding id of the source: masked when no src_mask is given

    def __post_init__(self):
        check_positive_int("src_vocab_size", self.src_vocab_size)
        check_positive_int("tgt_vocab_size", self.tgt_vocab_size)
        if self.n_dec_layers is None:
            self.n_dec_layers = self.n_layers
        check_positive_int("n_dec_layers", self.n_dec_layers, allow_zero=True)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs src_vocab_size == tgt_vocab_size, got "
                             f"{self.src_vocab_size} and {self.tgt_vocab_size}")
        self._validate()


class TokenEmbedding(nn.Module):
    """Token embedding, optional ``√d`` scale, embedding-level positions and dropout.

    Shapes:
        ids (B, T) long -> (B, T, D); ``start`` is the absolute position of ``ids[:, 0]``.
    """

    def __init__(self, vocab_size: int, cfg: _TransformerConfig, embedding: Optional[nn.Embedding] = None):
        super().__init__()
        self.vocab_size = vocab_size
        self.token = embedding if embedding is not None else nn.Embedding(vocab_size, cfg.d_model)
        self.scale = math.sqrt(cfg.d_model) if cfg.embed_scale else 1.0
        if cfg.position == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(cfg.d_model, cfg.max_len, cfg.sinusoidal_layout)
        elif cfg.position == "learned":
            self.position = LearnedPositionalEmbedding(cfg.max_len, cfg.d_model)
        else:
            self.position = None
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, ids: torch.Tensor, start: int = 0, name: str = "ids") -> torch.Tensor:
        check_tensor(name, ids, ndim=2, dtype="int")
        if ids.device != self.token.weight.device:
            raise ValueError(f"{name} is on {ids.device} but the model is on {self.token.weight.device}")
        check_ids(name, ids, self.vocab_size)
        if deferring():
            # The range check is queued (read later with the loss): keep a bad id from reaching the embedding
            # lookup, where a GPU would stop with a device-side assertion instead of the check's clear message.
            ids = ids.clamp(0, self.vocab_size - 1)
        x = self.token(ids) * self.scale
        if self.position is not None:
            x = self.position(x, start=start)
        return self.dropout(x)


def _block_kwargs(cfg: _TransformerConfig) -> Dict:
    return dict(d_ff=cfg.d_ff, dropout=cfg.dropout, activation=cfg.activation, norm=cfg.norm,
                norm_first=cfg.norm_first, residual=cfg.residual, bias=cfg.bias, norm_eps=cfg.norm_eps)


def _final_norm(cfg: _TransformerConfig) -> nn.Module:
    if not (cfg.norm_first and cfg.final_norm):
        return nn.Identity()
    return make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)


#: The initialisations of :func:`init_weights`.
INIT_SCHEMES = ("normal", "xavier")


def init_weights(module: nn.Module, scheme: str = "normal") -> nn.Module:
    """Initialise the linear and embedding weights of a model in place; biases become zero, norms are untouched.

    - ``"normal"``: N(0, 0.02), as GPT-2 (the models' default). Meant for widths in the hundreds and more: at
      d = 32 a token's embedding has norm 0.02·√32 ≈ 0.11, and activations start very small.
    - ``"xavier"``: Glorot-uniform, U(−a, a) with a = √(6 / (fan_in + fan_out)), as the original Transformer's
      reference code and the Annotated Transformer; its scale follows the width. Which of the two trains a
      small model faster depends on the model and the recipe (chapter 8 shows a case where the choice matters).

    Args:
        module: the model (or any module) to initialise.
        scheme: one of :data:`INIT_SCHEMES`.

    Returns:
        nn.Module: ``module`` itself.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"scheme must be one of {list(INIT_SCHEMES)}, got {scheme!r}")
    if scheme == "normal":
        _init_weights(module)
        return module
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.xavier_uniform_(m.weight)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
    return module


def _init_weights(module: nn.Module) -> None:
    """GPT-2-style initialisation: N(0, 0.02) for linear and embedding weights, zero biases."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)


def _key_mask(mask: Optional[torch.Tensor], ids: torch.Tensor, pad_id: Optional[int], name: str):
    """Turn a (B, S) real-token mask (or the pad id) into a (B, 1, 1, S) key mask; pass 4-D masks through."""
    if mask is None:
        real = real_tokens(ids, pad_id)
        return None if real is None else padding_mask(real=real)
    check_tensor(name, mask, dtype="bool")
    if mask.dim() == 2:
        if mask.shape != ids.shape:
            raise ValueError(f"{name} of shape {tuple(mask.shape)} must match the token ids' shape {tuple(ids.shape)}")
        return padding_mask(real=mask)
    return mask


def _through_blocks(blocks: nn.ModuleList, x: torch.Tensor, return_weights: bool, caches=None, **kwargs):
    """``x`` through each block in turn (block ``i`` with ``cache=caches[i]`` when given): the output, and the
    blocks' :class:`~transformer_lib.blocks.AttentionWeights` added up layer by layer (empty without
    ``return_weights``)."""
    weights = AttentionWeights()
    for i, block in enumerate(blocks):
        if caches is not None:
            kwargs["cache"] = caches[i]
        out = block(x, return_weights=return_weights, **kwargs)
        if return_weights:
            x, w = out
            weights += w
        else:
            x = out
    return x, weights


class Encoder(nn.Module):
    """A stack of :class:`~transformer_lib.blocks.EncoderBlock` over token embeddings (no future mask).

    Shapes:
        ids (B, S) -> hidden (B, S, D). ``mask``: (B, S) bool real-token mask, or a bool attention mask
        broadcastable to (B, H, S, S); by default keys equal to ``cfg.pad_id`` are masked. With
        ``return_weights=True``, also an :class:`~transformer_lib.blocks.AttentionWeights` (``self_attn``).
    """

    def __init__(self, cfg: EncoderConfig, embedding: Optional[TokenEmbedding] = None):
        super().__init__()
        self.cfg = cfg
        self.embed = embedding if embedding is not None else TokenEmbedding(cfg.vocab_size, cfg)
        d_head = cfg.d_model // cfg.n_heads
        self.blocks = nn.ModuleList(
            EncoderBlock(cfg.d_model, cfg.n_heads,
                         position=make_attention_position(cfg.position, cfg.n_heads, d_head, cfg.max_distance),
                         **_block_kwargs(cfg))
            for _ in range(cfg.n_layers))
        self.norm = _final_norm(cfg)
        if embedding is None:
            _init_weights(self)

    def forward(self, ids: torch.Tensor, mask: Optional[torch.Tensor] = None, return_weights: bool = False):
        return self._encode(ids, mask, return_weights)

    def _encode(self, ids, mask, return_weights, name: str = "ids", mask_name: str = "mask"):
        """:meth:`forward`, with the argument names that error messages use (``src`` in an encoder–decoder)."""
        key_mask = _key_mask(mask, ids, self.cfg.pad_id, mask_name)
        x = self.embed(ids, name=name)
        x, weights = _through_blocks(self.blocks, x, return_weights, mask=key_mask)
        x = self.norm(x)
        return (x, weights) if return_weights else x


class DecoderLM(nn.Module):
    """Decoder-only language model (GPT-style): masked self-attention blocks and a next-token head.

    Shapes:
        ids (B, T) -> logits (B, T, V). With a cache from :meth:`new_cache`, ``ids`` holds only the new tokens.
    """

    def __init__(self, cfg: DecoderLMConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = TokenEmbedding(cfg.vocab_size, cfg)
        d_head = cfg.d_model // cfg.n_heads
        self.blocks = nn.ModuleList(
            DecoderBlock(cfg.d_model, cfg.n_heads, cross_attention=False,
                         position=make_attention_position(cfg.position, cfg.n_heads, d_head, cfg.max_distance),
                         **_block_kwargs(cfg))
            for _ in range(cfg.n_layers))
        self.norm = _final_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        _init_weights(self)
        if cfg.tie_weights:
            self.lm_head.weight = self.embed.token.weight

    def new_cache(self) -> KVCache:
        """An empty key/value cache for step-by-step generation."""
        return KVCache(max(1, len(self.blocks)))

    def forward(self, ids: torch.Tensor, cache: Optional[KVCache] = None, return_weights: bool = False,
                causal: bool = True):
        """Next-token logits for every position.

        Args:
            ids: token ids.
            cache: a :class:`~transformer_lib.multihead.KVCache`; ``ids`` are then the tokens after the cached ones.
            return_weights: also return each layer's self-attention weights, an
                :class:`~transformer_lib.blocks.AttentionWeights` (``self_attn``).
            causal: apply the future mask (set False only to demonstrate what goes wrong without it).
        """
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache from model.new_cache(), got {type(cache).__name__}")
        start = cache.length if cache is not None else 0
        x = self.embed(ids, start=start)
        caches = [(c, None) for c in cache.self_attn] if cache is not None else None
        x, weights = _through_blocks(self.blocks, x, return_weights, caches, causal=causal)
        logits = self.lm_head(self.norm(x))
        return (logits, weights) if return_weights else logits


def _encoder_config(cfg: EncoderDecoderConfig) -> EncoderConfig:
    """The :class:`EncoderConfig` of an encoder–decoder's source side."""
    shared = {f.name: getattr(cfg, f.name) for f in fields(_TransformerConfig)}
    return EncoderConfig(vocab_size=cfg.src_vocab_size, pad_id=cfg.pad_id, **shared)


def _rename_flat_encoder(module, state_dict, prefix, *args) -> None:
    """Load state dicts saved before the source side became an :class:`Encoder` (``encoder_blocks.*`` and
    ``encoder_norm.*``, no ``encoder.embed.*``): rename their keys in place."""
    for key in [k for k in state_dict if k.startswith((prefix + "encoder_blocks.", prefix + "encoder_norm."))]:
        rest = key[len(prefix):]
        new = "encoder.blocks." + rest[len("encoder_blocks."):] if rest.startswith("encoder_blocks.") \
            else "encoder.norm." + rest[len("encoder_norm."):]
        state_dict[prefix + new] = state_dict.pop(key)
    for key in [k for k in state_dict if k.startswith(prefix + "src_embed.")]:
        state_dict.setdefault(prefix + "encoder.embed." + key[len(prefix + "src_embed."):], state_dict[key])


class EncoderDecoder(nn.Module):
    """Encoder–decoder Transformer (Vaswani et al., 2017): the decoder's cross-attention reads the encoder output.

    The source side is an :class:`Encoder` (``self.encoder``) reading the source embedding ``self.src_embed``;
    the target side is a stack of :class:`~transformer_lib.blocks.DecoderBlock` with cross-attention.

    Shapes:
        src (B, S), tgt (B, T) -> logits (B, T, V_tgt). ``src_mask`` (B, S) bool real-token mask; by default
        source tokens equal to ``cfg.pad_id`` are masked. With ``return_weights=True``, also an
        :class:`~transformer_lib.blocks.AttentionWeights`: ``encoder``, ``self_attn`` (the decoder's) and
        ``cross_attn``, one (B, H, ·, ·) tensor per layer each.
    """

    def __init__(self, cfg: EncoderDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.src_embed = TokenEmbedding(cfg.src_vocab_size, cfg)
        shared = self.src_embed.token if cfg.share_embeddings else None
        self.tgt_embed = TokenEmbedding(cfg.tgt_vocab_size, cfg, embedding=shared)
        d_head = cfg.d_model // cfg.n_heads

        def position():
            return make_attention_position(cfg.position, cfg.n_heads, d_head, cfg.max_distance)

        self.encoder = Encoder(_encoder_config(cfg), embedding=self.src_embed)
        self.register_load_state_dict_pre_hook(_rename_flat_encoder)
        self.decoder_blocks = nn.ModuleList(
            DecoderBlock(cfg.d_model, cfg.n_heads, cross_attention=True, position=position(), **_block_kwargs(cfg))
            for _ in range(cfg.n_dec_layers))
        self.decoder_norm = _final_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        self.logits_bias = nn.Parameter(torch.zeros(cfg.tgt_vocab_size)) if cfg.logits_bias else None
        _init_weights(self)
        if cfg.tie_weights:
            self.lm_head.weight = self.tgt_embed.token.weight

    def new_cache(self) -> KVCache:
        """An empty key/value cache (self- and cross-attention) for step-by-step decoding."""
        return KVCache(max(1, len(self.decoder_blocks)))

    def source_mask(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
        """The (B, 1, 1, S) key mask of the source."""
        return _key_mask(src_mask, src, self.cfg.pad_id, "src_mask")

    def encode(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None, return_weights: bool = False):
        """Encoder output ``memory`` (B, S, D) [, its :class:`~transformer_lib.blocks.AttentionWeights`]."""
        return self.encoder._encode(src, src_mask, return_weights, name="src", mask_name="src_mask")

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
               cache: Optional[KVCache] = None, return_weights: bool = False, src: Optional[torch.Tensor] = None):
        """Logits (B, T, V) for the target tokens ``tgt`` given the encoder ``memory``.

        ``src_mask`` is the (B, S) real-token mask of the source (or ``src`` to derive it from the pad id).
        """
        check_tensor("memory", memory, ndim=3, dtype="float", last_dim=self.cfg.d_model)
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(f"memory batch size {memory.shape[0]} differs from tgt batch size {tgt.shape[0]}")
        if src_mask is not None:
            check_tensor("src_mask", src_mask, dtype="bool")
            mem_mask = padding_mask(real=src_mask) if src_mask.dim() == 2 else src_mask
        elif src is not None:
            mem_mask = self.source_mask(src)
        else:
            mem_mask = None
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache from model.new_cache(), got {type(cache).__name__}")
        start = cache.length if cache is not None else 0
        x = self.tgt_embed(tgt, start=start, name="tgt")
        caches = list(zip(cache.self_attn, cache.cross_attn)) if cache is not None else None
        x, weights = _through_blocks(self.decoder_blocks, x, return_weights, caches, memory=memory,
                                     memory_mask=mem_mask, causal=True)
        logits = self.lm_head(self.decoder_norm(x))
        if self.logits_bias is not None:
            logits = logits + self.logits_bias
        return (logits, weights) if return_weights else logits

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                return_weights: bool = False):
        """Teacher-forced logits: ``tgt`` is the decoder input (BOS y₁ … y_{T-1})."""
        if src_mask is None:
            src_mask = real_tokens(src, self.cfg.pad_id)
        if return_weights:
            memory, enc_w = self.encode(src, src_mask, return_weights=True)
            logits, dec_w = self.decode(tgt, memory, src_mask, return_weights=True)
            return logits, AttentionWeights(encoder=enc_w.self_attn) + dec_w
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask)


_COMPONENTS = (  # first match wins: norms and positions sit inside attention / embedding modules
    ("norms", ("norm",)),
    ("positions", ("position",)),
    ("cross_attention", ("cross_attn",)),
    ("attention", ("attn",)),
    ("feed_forward", (".ff.", "ffn", "feed_forward")),
    ("embeddings", ("embed", "embedding")),
    ("output", ("lm_head", "logits_bias", "head", "out.")),
)


def count_parameters(model: nn.Module) -> Dict[str, int]:
    """Parameters by component (tied weights counted once), plus ``'total'``.

    Components: embeddings, positions, attention, cross_attention, feed_forward, norms, output and, for
    anything else (recurrent cells, score functions), ``other``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    counts: Dict[str, int] = {name: 0 for name, _ in _COMPONENTS}
    counts["other"] = 0
    seen = set()
    for name, p in model.named_parameters():  # named_parameters already skips tied duplicates
        if id(p) in seen:
            continue
        seen.add(id(p))
        full = "." + name
        for component, keys in _COMPONENTS:
            if any(k in full for k in keys):
                counts[component] += p.numel()
                break
        else:
            counts["other"] += p.numel()
    counts = {k: v for k, v in counts.items() if v}
    counts["total"] = sum(counts.values())
    return counts
