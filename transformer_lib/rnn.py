"""Recurrent baselines: RNN/LSTM/GRU layers, a sequence classifier and an encoder–decoder with optional attention.

These are the models the Transformer is measured against in Part I (chapter 2: path length, sequential steps,
long-distance agreement) and Part II (chapter 3: the encoder–decoder bottleneck and attention; chapter 10: the
side-by-side comparison on the translation task).

Encoder–decoder with attention (Luong et al., 2015, "global attention" without input feeding). With encoder
states ``h_1 … h_S`` and decoder state ``s_t``:

* scores ``e^t_i = score(s_t, h_i)`` (dot, bilinear, low-rank bilinear or additive, see
  :func:`transformer_lib.attention.make_score`);
* weights ``α^t = softmax(e^t)`` over the real source tokens;
* context ``a_t = Σ_i α^t_i h_i``;
* attentional state ``h̃_t = tanh(W_c [a_t; s_t])`` and logits ``W_o h̃_t + b_o``.

Without attention the decoder starts from the encoder's final state and never sees the source again: one vector
must carry the whole sentence (the bottleneck).

Decoding protocol (shared with :class:`transformer_lib.models.EncoderDecoder`, used by
:mod:`transformer_lib.generation`)::

    memory = model.encode(src, src_mask)          # (B, S, H) tensor of encoder states
    cache = model.new_cache()                     # RNNCache: decoder hidden state, .length, .reorder(index)
    logits = model.decode(tgt, memory, src_mask, cache=cache)   # feed only the new tokens each call

``memory`` is a plain tensor, so beam search can expand or select its rows like the Transformer's. The decoder's
initial state is recomputed from ``memory`` and the source mask: it is the encoder state at the last *real* source
token (sources must be right-padded). Every decoder layer starts from that one vector; an LSTM decoder starts with
a zero memory cell.

Shape legend: B batch, S source length, T target length, E embedding size ``d_embed``, H hidden size ``d_hidden``,
L layers, V vocabulary size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .checks import check_choice, check_dropout, check_ids, check_positive_int, check_tensor
from .attention import SCORE_NAMES, make_score, masked_softmax, real_tokens

__all__ = [
    "CELLS",
    "ATTENTION_NAMES",
    "make_recurrent",
    "RNNEncoder",
    "RNNClassifier",
    "RNNSeq2SeqConfig",
    "RNNCache",
    "RNNSeq2Seq",
]

CELLS = ("rnn", "lstm", "gru")
ATTENTION_NAMES = (None,) + tuple(SCORE_NAMES)

State = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]  # (L, B, H), or (h, c) for an LSTM


def make_recurrent(cell: str, d_in: int, d_hidden: int, n_layers: int = 1, bidirectional: bool = False,
                   dropout: float = 0.0) -> nn.RNNBase:
    """A bare batch-first recurrent layer: ``nn.RNN`` (tanh), ``nn.LSTM`` or ``nn.GRU``.

    Args:
        cell: ``'rnn'``, ``'lstm'`` or ``'gru'``.
        d_in: input size.
        d_hidden: hidden size ``H`` (per direction).
        n_layers: stacked layers.
        bidirectional: also run right-to-left (outputs concatenate both directions).
        dropout: dropout between stacked layers (ignored by PyTorch for one layer, so not passed then).

    Shapes:
        the module maps x (B, T, d_in) -> (outputs (B, T, H·directions), final state (L·directions, B, H)
        or an (h, c) pair for an LSTM).

    Returns:
        The ``torch.nn`` module, ``batch_first=True``.
    """
    check_choice("cell", cell, CELLS)
    check_positive_int("d_in", d_in)
    check_positive_int("d_hidden", d_hidden)
    check_positive_int("n_layers", n_layers)
    check_dropout(dropout)
    kind = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[cell]
    return kind(d_in, d_hidden, num_layers=n_layers, batch_first=True, bidirectional=bool(bidirectional),
                dropout=dropout if n_layers > 1 else 0.0)


def _real_mask(ids: torch.Tensor, mask: Optional[torch.Tensor], pad_id: Optional[int], name: str) -> torch.Tensor:
    """The (B, S) bool real-token mask: from ``mask`` ((B, S) or (B, 1, 1, S)), else ``ids != pad_id``."""
    b, s = ids.shape
    if mask is None:
        real = real_tokens(ids, pad_id)
        return torch.ones(b, s, dtype=torch.bool, device=ids.device) if real is None else real
    return _as_2d_mask(mask, b, s, name)


def _as_2d_mask(mask: torch.Tensor, b: int, s: int, name: str) -> torch.Tensor:
    check_tensor(name, mask, ndim=(2, 4), dtype="bool")
    if mask.dim() == 4:  # the Transformer's (B, 1, 1, S) key mask
        if mask.shape[1:3] != (1, 1):
            raise ValueError(f"{name} must have shape (B, S) or (B, 1, 1, S) = ({b}, 1, 1, {s}), "
                             f"got {tuple(mask.shape)}")
        mask = mask[:, 0, 0, :]
    if tuple(mask.shape) != (b, s):
        raise ValueError(f"{name} must have shape (B, S) = ({b}, {s}), got {tuple(mask.shape)}")
    return mask


def _lengths(mask: torch.Tensor, name: str) -> torch.Tensor:
    """Number of real tokens per row of a right-padded (B, S) mask; every row needs at least one."""
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError(f"{name} must be right-padded (real tokens first, then padding), got a row with a real "
                         "token after padding")
    lengths = mask.sum(dim=1)  # (B,)
    if bool((lengths == 0).any()):
        row = int((lengths == 0).nonzero()[0])
        raise ValueError(f"{name} row {row} has no real token; every sequence needs at least one")
    return lengths


class RNNEncoder(nn.Module):
    """Token embedding + recurrent layer(s): every hidden state and the state at the last real token.

    Padding never changes a real token's state, and the final state is the one at the last real token, not after
    the padding. A left-to-right encoder gets this for free: the padding is on the right, so a real token's state
    has read no padding, and the padded batch runs as it is (one fused kernel on the CPU, cuDNN on a GPU, and no
    copy of the lengths to the host). A bidirectional encoder's right-to-left half would read the padding first, so
    there the padding is packed away (:func:`torch.nn.utils.rnn.pack_padded_sequence`). Packing would give a
    left-to-right encoder the same states, only slower: a packed batch shrinks as sentences end, and on the CPU
    it runs step by step outside the fused kernel.

    Args:
        vocab_size: number of token ids.
        d_embed: embedding size ``E``.
        d_hidden: hidden size ``H``.
        cell: ``'rnn'``, ``'lstm'`` or ``'gru'``.
        n_layers: stacked recurrent layers.
        bidirectional: read the sequence in both directions; the two halves are projected back to ``H``
            (``bridge``). The final state is then the projected state at the last real token, whose backward
            half has read only that token: pair a bidirectional encoder with attention.
        dropout: dropout on the embeddings and between stacked layers.
        pad_id: padding id, used when no mask is given (``None``: every token is real).

    Shapes:
        ids (B, S) long, mask (B, S) bool (True = real token, right-padded) -> states (B, S, H) (zeros at
        padding), final (B, H).
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, cell: str = "rnn", n_layers: int = 1,
                 bidirectional: bool = False, dropout: float = 0.0, pad_id: Optional[int] = 0):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("d_embed", d_embed)
        self.vocab_size, self.d_hidden, self.pad_id = vocab_size, d_hidden, pad_id
        self.embed = nn.Embedding(vocab_size, d_embed)
        self.rnn = make_recurrent(cell, d_embed, d_hidden, n_layers, bidirectional, dropout)
        self.bridge = nn.Linear(2 * d_hidden, d_hidden) if bidirectional else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, mask: Optional[torch.Tensor] = None,
                name: str = "ids") -> Tuple[torch.Tensor, torch.Tensor]:
        """Encode ``ids``.

        Args:
            ids: token ids, right-padded.
            mask: (B, S) bool real-token mask (default ``ids != pad_id``).
            name: the argument's name in error messages.

        Returns:
            ``(states, final)``: every top-layer state (zeros at padding) and the state at the last real token.
        """
        check_ids(name, ids, self.vocab_size)
        if ids.device != self.embed.weight.device:
            raise ValueError(f"{name} is on {ids.device} but the model is on {self.embed.weight.device}")
        mask = _real_mask(ids, mask, self.pad_id, "mask" if name == "ids" else f"{name}_mask")
        lengths = _lengths(mask, "mask" if name == "ids" else f"{name}_mask")  # (B,)
        b, s = ids.shape
        x = self.dropout(self.embed(ids))  # (B, S, E)
        if self.bridge is None:  # left to right: the states at real tokens have read no padding
            states, _ = self.rnn(x)  # (B, S, H)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            states, _ = pad_packed_sequence(out, batch_first=True, total_length=s)  # (B, S, 2H)
            states = self.bridge(states)  # (B, S, H)
        states = states * mask.unsqueeze(-1)  # padding carries nothing (the bridge's bias would leak there)
        final = states[torch.arange(b, device=ids.device), lengths - 1]  # (B, H)
        return states, final


class RNNClassifier(nn.Module):
    """Sequence classifier: :class:`RNNEncoder`, then a linear layer on the final state.

    Used for chapter 2's long-distance agreement task (the label depends on a token far from the end).

    Args:
        vocab_size: number of token ids.
        n_classes: number of labels.
        d_embed, d_hidden, cell, n_layers, bidirectional, dropout, pad_id: as in :class:`RNNEncoder`.

    Shapes:
        ids (B, S) long, mask (B, S) bool -> logits (B, n_classes).
    """

    def __init__(self, vocab_size: int, n_classes: int, d_embed: int = 64, d_hidden: int = 128, cell: str = "rnn",
                 n_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0, pad_id: Optional[int] = 0):
        super().__init__()
        check_positive_int("n_classes", n_classes)
        self.encoder = RNNEncoder(vocab_size, d_embed, d_hidden, cell, n_layers, bidirectional, dropout, pad_id)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_hidden, n_classes)

    def forward(self, ids: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Class logits from the final state (the state at the last real token)."""
        _, final = self.encoder(ids, mask)  # (B, H)
        return self.head(self.dropout(final))  # (B, n_classes)


@dataclass
class RNNSeq2SeqConfig:
    """Config of :class:`RNNSeq2Seq`."""

    src_vocab_size: int = 0  # source token ids (required)
    tgt_vocab_size: int = 0  # target token ids (required)
    d_embed: int = 64  # embedding size E of source and target tokens
    d_hidden: int = 128  # hidden size H of encoder and decoder (and of the attention context)
    n_layers: int = 1  # stacked recurrent layers, in the encoder and in the decoder
    cell: str = "rnn"  # rnn (Elman, tanh) | lstm | gru
    attention: Optional[str] = None  # None (bottleneck baseline) | dot | bilinear | lowrank | additive
    rank: Optional[int] = None  # rank k of 'lowrank' scores (None: H // 4)
    d_attn: Optional[int] = None  # hidden size of 'additive' scores (None: H)
    bidirectional: bool = False  # bidirectional encoder, projected back to H
    dropout: float = 0.0  # dropout on embeddings, between stacked layers and before the output layer
    pad_id: Optional[int] = 0  # padding id of the source: masked when no src_mask is given
    tie_weights: bool = False  # output projection shares the target embedding (needs d_embed == d_hidden)

    def __post_init__(self):
        check_positive_int("src_vocab_size", self.src_vocab_size)
        check_positive_int("tgt_vocab_size", self.tgt_vocab_size)
        check_positive_int("d_embed", self.d_embed)
        check_positive_int("d_hidden", self.d_hidden)
        check_positive_int("n_layers", self.n_layers)
        check_choice("cell", self.cell, CELLS)
        check_choice("attention", self.attention, ATTENTION_NAMES)
        for name in ("rank", "d_attn"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_dropout(self.dropout)
        if self.pad_id is not None:
            check_positive_int("pad_id", self.pad_id, allow_zero=True)
        if self.tie_weights and self.d_embed != self.d_hidden:
            raise ValueError("tie_weights needs d_embed == d_hidden (the output layer reads H-sized states), got "
                             f"d_embed={self.d_embed}, d_hidden={self.d_hidden}")


@dataclass
class RNNCache:
    """The decoder's recurrent state between calls of :meth:`RNNSeq2Seq.decode`.

    Shapes:
        state: (L, B, H), or an (h, c) pair of them for an LSTM; ``None`` before the first call.
    """

    state: Optional[State] = None
    length: int = 0  # target positions decoded so far

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search keeps the surviving hypotheses)."""
        check_tensor("index", index, ndim=1, dtype="int", allow_empty=True)
        if self.state is None:
            return
        if isinstance(self.state, tuple):
            self.state = tuple(s.index_select(1, index) for s in self.state)
        else:
            self.state = self.state.index_select(1, index)


class RNNSeq2Seq(nn.Module):
    """RNN encoder–decoder, with or without attention (Sutskever et al., 2014; Bahdanau et al., 2014;
    Luong et al., 2015).

    Parameters are named so that :func:`transformer_lib.models.count_parameters` sorts them: ``encoder.embed`` and
    ``tgt_embed`` (embeddings), ``encoder.rnn`` / ``encoder.bridge`` / ``decoder_rnn`` (other), ``attn_score`` and
    ``attn_combine`` (attention, present only with attention), ``lm_head`` (output).

    Args:
        cfg: an :class:`RNNSeq2SeqConfig`.

    Shapes:
        src (B, S), tgt (B, T) -> logits (B, T, V_tgt); alignment weights (B, T, S). ``src_mask`` (B, S) bool,
        True = real token, right-padded; by default ``src != cfg.pad_id``.
    """

    def __init__(self, cfg: RNNSeq2SeqConfig):
        super().__init__()
        if not isinstance(cfg, RNNSeq2SeqConfig):
            raise TypeError(f"cfg must be an RNNSeq2SeqConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        h = cfg.d_hidden
        self.encoder = RNNEncoder(cfg.src_vocab_size, cfg.d_embed, h, cfg.cell, cfg.n_layers, cfg.bidirectional,
                                  cfg.dropout, cfg.pad_id)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_embed)
        self.decoder_rnn = make_recurrent(cfg.cell, cfg.d_embed, h, cfg.n_layers, dropout=cfg.dropout)
        if cfg.attention is None:
            self.attn_score, self.attn_combine = None, None
        else:
            self.attn_score = make_score(cfg.attention, h, h, rank=cfg.rank, d_hidden=cfg.d_attn)
            self.attn_combine = nn.Linear(2 * h, h, bias=False)  # W_c of tanh(W_c [a_t; s_t])
        self.dropout = nn.Dropout(cfg.dropout)
        self.lm_head = nn.Linear(h, cfg.tgt_vocab_size)
        if cfg.tie_weights:
            self.lm_head.weight = self.tgt_embed.weight

    # ------------------------------------------------------------------------------------------ protocol
    def new_cache(self) -> RNNCache:
        """An empty cache for step-by-step decoding."""
        return RNNCache()

    def source_mask(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The (B, S) bool real-token mask of the source (``src != cfg.pad_id`` unless ``src_mask`` is given)."""
        check_ids("src", src, self.cfg.src_vocab_size)
        return _real_mask(src, src_mask, self.cfg.pad_id, "src_mask")

    def encode(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Encoder states ``memory`` (B, S, H), zeros at padding.

        The decoder's initial state is not returned: :meth:`decode` takes it from ``memory`` at the last real
        token of each row, so ``memory`` can be indexed like any tensor (beam search).

        Shapes:
            src (B, S) long, src_mask (B, S) bool -> memory (B, S, H).

        Returns:
            The encoder states ``h_1 … h_S``.
        """
        states, _ = self.encoder(src, src_mask, name="src")
        return states

    def initial_state(self, memory: torch.Tensor, src_mask: torch.Tensor) -> State:
        """Decoder state before the first target token: the encoder state at the last real source token.

        Shapes:
            memory (B, S, H), src_mask (B, S) bool -> (L, B, H), or (h, c) with c = 0 for an LSTM.

        Returns:
            The state every decoder layer starts from.
        """
        lengths = _lengths(src_mask, "src_mask")  # (B,)
        final = memory[torch.arange(memory.shape[0], device=memory.device), lengths - 1]  # (B, H)
        h0 = final.unsqueeze(0).expand(self.cfg.n_layers, -1, -1).contiguous()  # (L, B, H)
        return (h0, torch.zeros_like(h0)) if self.cfg.cell == "lstm" else h0

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
               cache: Optional[RNNCache] = None, return_weights: bool = False, src: Optional[torch.Tensor] = None):
        """Logits for the target tokens ``tgt`` given the encoder ``memory``.

        Args:
            tgt: decoder input ids (BOS y₁ …); with a cache, only the tokens after those already decoded.
            memory: encoder states from :meth:`encode`.
            src_mask: (B, S) or (B, 1, 1, S) bool real-token mask of the source; if None it comes from ``src``
                (``src != cfg.pad_id``), and with neither every source position is real.
            cache: an :class:`RNNCache` from :meth:`new_cache`, updated in place.
            return_weights: also return the attention weights (``None`` without attention). The decoder has one
                attention with one head, so they come as one tensor, as an attention layer returns them (a
                Transformer's blocks and models return an :class:`~transformer_lib.blocks.AttentionWeights`).
            src: the source ids, only to derive ``src_mask``.

        Shapes:
            tgt (B, t) long, memory (B, S, H) -> logits (B, t, V) [, weights (B, t, S)].

        Returns:
            ``logits``, or ``(logits, weights)`` with ``return_weights=True``. ``cache`` (if given) now holds the
            state after the last token of ``tgt`` and its ``length`` grew by ``t``.
        """
        cfg = self.cfg
        check_ids("tgt", tgt, cfg.tgt_vocab_size)
        check_tensor("memory", memory, ndim=3, dtype="float", last_dim=cfg.d_hidden)
        b, s = memory.shape[:2]
        if tgt.shape[0] != b:
            raise ValueError(f"memory batch size {b} differs from tgt batch size {tgt.shape[0]}")
        if tgt.device != self.tgt_embed.weight.device or memory.device != tgt.device:
            raise ValueError(f"tgt ({tgt.device}) and memory ({memory.device}) must be on the model's device "
                             f"({self.tgt_embed.weight.device})")
        if src_mask is not None:
            mask = _as_2d_mask(src_mask, b, s, "src_mask")
        elif src is not None:
            if tuple(src.shape) != (b, s):
                raise ValueError(f"src must have shape (B, S) = ({b}, {s}) to match memory, got {tuple(src.shape)}")
            mask = self.source_mask(src)
        else:
            mask = torch.ones(b, s, dtype=torch.bool, device=memory.device)
        if cache is not None and not isinstance(cache, RNNCache):
            raise TypeError(f"cache must be an RNNCache from model.new_cache(), got {type(cache).__name__}")

        if cache is not None and cache.state is not None:
            state = cache.state
            state_b = (state[0] if isinstance(state, tuple) else state).shape[1]
            if state_b != b:
                raise ValueError(f"cache holds {state_b} rows but tgt has batch size {b}; "
                                 "use cache.reorder(index) to select rows")
        else:
            state = self.initial_state(memory, mask)

        y = self.dropout(self.tgt_embed(tgt))  # (B, t, E)
        s_t, state = self.decoder_rnn(y, state)  # (B, t, H)
        if cache is not None:
            cache.state = state
            cache.length += tgt.shape[1]

        weights = None
        if self.attn_score is None:
            out = s_t  # the bottleneck: the source reached the decoder only through its initial state
        else:
            scores = self.attn_score(s_t, memory)  # e^t_i, (B, t, S)
            weights = masked_softmax(scores, mask.unsqueeze(1))  # α^t, (B, t, S), zero on padding
            context = weights @ memory  # a_t = Σ_i α^t_i h_i, (B, t, H)
            out = torch.tanh(self.attn_combine(torch.cat([context, s_t], dim=-1)))  # (B, t, H)
        logits = self.lm_head(self.dropout(out))  # (B, t, V)
        return (logits, weights) if return_weights else logits

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                return_weights: bool = False):
        """Teacher-forced logits: ``tgt`` is the decoder input (BOS y₁ … y_{T-1}).

        Shapes:
            src (B, S), tgt (B, T) -> logits (B, T, V) [, weights (B, T, S) or ``None`` without attention].

        Returns:
            ``logits``, or ``(logits, weights)`` with ``return_weights=True``.
        """
        check_ids("src", src, self.cfg.src_vocab_size)
        check_ids("tgt", tgt, self.cfg.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}")
        mask = self.source_mask(src, src_mask)  # (B, S)
        memory = self.encode(src, mask)
        return self.decode(tgt, memory, mask, return_weights=return_weights)
