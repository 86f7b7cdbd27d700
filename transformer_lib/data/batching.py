"""Batches for training: padded seq2seq batches of the translation task and the language-model corpus.

* Seq2seq batching (chapters 3 and 10): :func:`pad_sequences`, :class:`Seq2SeqBatch`, :func:`make_seq2seq_batch`,
  :func:`batches_by_length`, :func:`iterate_batches`.
* The language-model corpus (chapter 11): :func:`load_corpus` (shipped with Python, no downloads),
  :func:`lm_splits`, :func:`lm_batch`, :func:`lm_batches`.
"""
from __future__ import annotations

import random
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch

from ..checks import check_positive_int, check_seed, check_tensor
from ..attention import real_tokens
from .tasks import _generator
from .tokenizers import PAD_ID, Vocab, _check_text

__all__ = ["load_corpus", "lm_splits", "lm_batch", "lm_batches", "bigram_loss",
           "pad_sequences", "Seq2SeqBatch", "make_seq2seq_batch", "iterate_batches", "batches_by_length"]


# ----------------------------------------------------------------------------------------------------------------
# Seq2seq batching
# ----------------------------------------------------------------------------------------------------------------
def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-pad id lists to one (B, L) long tensor, L the longest length."""
    if isinstance(sequences, torch.Tensor) or not isinstance(sequences, (list, tuple)):
        raise TypeError(f"sequences must be a list of id lists, got {type(sequences).__name__}")
    if not sequences:
        raise ValueError("sequences is empty; expected at least one id list")
    length = max(len(s) for s in sequences)
    out = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    for b, s in enumerate(sequences):
        if len(s):
            out[b, :len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


class Seq2SeqBatch(NamedTuple):
    """A padded translation batch; unpacks as ``src, tgt = batch``.

    Shapes:
        src (B, S) long, PAD-padded. tgt (B, T+2) long = BOS y EOS PAD… (T the longest target).
        Teacher forcing feeds ``tgt_in = tgt[:, :-1]`` and scores ``tgt_out = tgt[:, 1:]``.
    """

    src: torch.Tensor
    tgt: torch.Tensor

    @property
    def src_mask(self) -> torch.Tensor:
        """(B, S) bool, True on real source tokens."""
        return real_tokens(self.src, PAD_ID)

    @property
    def tgt_in(self) -> torch.Tensor:
        return self.tgt[:, :-1]

    @property
    def tgt_out(self) -> torch.Tensor:
        return self.tgt[:, 1:]


def _check_pairs(pairs) -> None:
    if not isinstance(pairs, (list, tuple)):
        raise TypeError(f"pairs must be a list of (src_tokens, tgt_tokens), got {type(pairs).__name__}")
    if not pairs:
        raise ValueError("pairs is empty; expected at least one (src_tokens, tgt_tokens) pair")
    first = pairs[0]
    if not (isinstance(first, (list, tuple)) and len(first) == 2):
        raise TypeError(f"pairs must hold (src_tokens, tgt_tokens) pairs, got {first!r:.80}")


def _encode_pairs(pairs, src_vocab: Vocab, tgt_vocab: Vocab) -> List[Tuple[List[int], List[int]]]:
    for name, v in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if not isinstance(v, Vocab):
            raise TypeError(f"{name} must be a Vocab, got {type(v).__name__}")
    return [(src_vocab.encode(s), tgt_vocab.encode(t, add_bos=True, add_eos=True)) for s, t in pairs]


def make_seq2seq_batch(pairs, src_vocab: Vocab, tgt_vocab: Vocab) -> Seq2SeqBatch:
    """Encode and pad a list of ``(src_tokens, tgt_tokens)`` pairs into a :class:`Seq2SeqBatch`."""
    _check_pairs(pairs)
    enc = _encode_pairs(pairs, src_vocab, tgt_vocab)
    return Seq2SeqBatch(pad_sequences([s for s, _ in enc]), pad_sequences([t for _, t in enc]))


def batches_by_length(pairs, batch_size: int, seed: int = 0) -> List[List[int]]:
    """Index batches of similar source length (less padding), in a seeded random order.

    Pairs are sorted by source length (ties in random order), cut into batches of ``batch_size`` and the
    batches shuffled. Returns lists of indices into ``pairs``.
    """
    _check_pairs(pairs)
    check_positive_int("batch_size", batch_size)
    check_seed(seed)
    rng = random.Random(seed)
    keys = [(len(s), rng.random(), i) for i, (s, _) in enumerate(pairs)]
    order = [i for _, _, i in sorted(keys)]
    batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def iterate_batches(pairs, src_vocab: Vocab, tgt_vocab: Vocab, batch_size: int = 64, shuffle: bool = True,
                    seed: int = 0, by_length: bool = False, n_batches: Optional[int] = None,
                    drop_last: bool = False) -> Iterator[Seq2SeqBatch]:
    """Yield :class:`Seq2SeqBatch` es over ``pairs``.

    Args:
        pairs: ``(src_tokens, tgt_tokens)`` pairs.
        src_vocab, tgt_vocab: the vocabularies to encode with.
        batch_size: pairs per batch.
        shuffle: a new seeded order every epoch (epoch e uses ``seed + e``).
        seed: the random seed.
        by_length: group pairs of similar source length (:func:`batches_by_length`).
        n_batches: yield exactly this many batches, going through as many epochs as needed;
            ``None``: one epoch.
        drop_last: skip a final batch smaller than ``batch_size``.
    """
    _check_pairs(pairs)
    check_positive_int("batch_size", batch_size)
    check_seed(seed)
    if n_batches is not None:
        check_positive_int("n_batches", n_batches)
    enc = _encode_pairs(pairs, src_vocab, tgt_vocab)
    if drop_last and len(enc) < batch_size:
        raise ValueError(f"batch_size {batch_size} with drop_last=True is larger than the {len(enc)} pairs")
    return _batch_stream(pairs, enc, batch_size, shuffle, seed, by_length, n_batches, drop_last)


def _batch_stream(pairs, enc, batch_size, shuffle, seed, by_length, n_batches, drop_last):
    # A separate generator so that iterate_batches checks its arguments when called, not at the first batch.
    done, epoch = 0, 0
    while True:
        if by_length:
            groups = batches_by_length(pairs, batch_size, seed + epoch)
        else:
            order = list(range(len(enc)))
            if shuffle:
                random.Random(seed + epoch).shuffle(order)
            groups = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
        for g in groups:
            if drop_last and len(g) < batch_size:
                continue
            yield Seq2SeqBatch(pad_sequences([enc[i][0] for i in g]), pad_sequences([enc[i][1] for i in g]))
            done += 1
            if n_batches is not None and done == n_batches:
                return
        epoch += 1
        if n_batches is None:
            return


# ----------------------------------------------------------------------------------------------------------------
# The language-model corpus (chapter 11)
# ----------------------------------------------------------------------------------------------------------------
def load_corpus() -> str:
    """The help-topic text shipped with every Python (``pydoc_data.topics``), ~465,000 characters.

    Topics are joined in sorted-key order with a blank line between them, so every machine sees the same text
    for a given Python version.
    """
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))


def lm_splits(text: str, tokenizer, valid_fraction: float = 0.1) -> Tuple[torch.Tensor, torch.Tensor]:
    """Encode ``text`` and split it into training ids (the first part) and validation ids (the last part).

    Returns:
        ``(train, valid)``: 1-D long tensors.
    """
    _check_text("text", text)
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must have an encode(str) method, got {type(tokenizer).__name__}")
    if not isinstance(valid_fraction, (int, float)) or not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction!r}")
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    n_valid = max(1, int(round(len(ids) * valid_fraction)))
    if n_valid >= len(ids):
        raise ValueError(f"text encodes to {len(ids)} tokens, too few to split with valid_fraction={valid_fraction}")
    return ids[:-n_valid], ids[-n_valid:]


def lm_batch(data: torch.Tensor, batch_size: int, block_size: int,
             generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a token stream: x (B, T) and the next tokens y (B, T) (``y[:, t] == x[:, t + 1]``).

    Args:
        data: 1-D long tensor of token ids.
        batch_size: B.
        block_size: T; ``data`` needs at least ``T + 1`` tokens.
        generator: a seeded ``torch.Generator`` for reproducible windows.
    """
    check_tensor("data", data, ndim=1, dtype="int")
    check_positive_int("batch_size", batch_size)
    check_positive_int("block_size", block_size)
    if block_size + 1 > len(data):
        raise ValueError(f"block_size {block_size} is too long for data of {len(data)} tokens "
                         f"(need block_size + 1 <= len(data))")
    starts = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size + 1)
    windows = data[starts[:, None] + offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def lm_batches(data: torch.Tensor, batch_size: int, block_size: int, n_batches: Optional[int] = None,
               seed: int = 0) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """Yield :func:`lm_batch` windows from one seeded generator; ``n_batches=None`` never stops."""
    check_tensor("data", data, ndim=1, dtype="int")
    check_positive_int("batch_size", batch_size)
    check_positive_int("block_size", block_size)
    if n_batches is not None:
        check_positive_int("n_batches", n_batches)
    g = _generator(seed)
    lm_batch(data, 1, block_size, torch.Generator())  # checks block_size against the data now, not later
    return _lm_stream(data, batch_size, block_size, n_batches, g)


def _lm_stream(data, batch_size, block_size, n_batches, g):
    k = 0
    while n_batches is None or k < n_batches:
        yield lm_batch(data, batch_size, block_size, g)
        k += 1


def bigram_loss(train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab_size: int,
                alphas: Sequence[float] = (0.01, 0.1, 1.0)) -> float:
    """The validation loss (nats per token) of the best add-α bigram model counted on the training ids.

    The counted baseline a trained language model must beat before its verdicts mean anything (the adequacy rule
    of :mod:`transformer_lib.ledger`): p(b | a) = (N(a, b) + α) / (N(a) + α·V), the best α of ``alphas`` chosen on
    the validation ids (a choice that favours the baseline).

    Args:
        train_ids: (N,) token ids the counts come from.
        valid_ids: (M,) token ids the loss is measured on, M ≥ 2.
        vocab_size: V; every id must be in [0, V).
        alphas: add-α smoothing constants to try, each > 0.

    Returns:
        float: the smallest validation cross-entropy over ``alphas``.
    """
    for name, ids, least in (("train_ids", train_ids, 2), ("valid_ids", valid_ids, 2)):
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
            raise TypeError(f"{name} must be a 1-D torch.long tensor, got "
                            f"{type(ids).__name__}{'' if not isinstance(ids, torch.Tensor) else f' of dtype {ids.dtype} and shape {tuple(ids.shape)}'}")
        if len(ids) < least:
            raise ValueError(f"{name} must hold at least {least} ids, got {len(ids)}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    for name, ids in (("train_ids", train_ids), ("valid_ids", valid_ids)):
        if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
            raise ValueError(f"{name} must lie in [0, vocab_size={vocab_size}), got ids from {int(ids.min())} "
                             f"to {int(ids.max())}")
    alphas = list(alphas)
    if not alphas or any(isinstance(a, bool) or not isinstance(a, (int, float)) or not a > 0 for a in alphas):
        raise ValueError(f"alphas must be a non-empty list of numbers > 0, got {alphas!r}")
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                      accumulate=True)
    losses = []
    for a in alphas:
        probs = (counts + a) / (counts.sum(1, keepdim=True) + a * vocab_size)
        losses.append(-probs[valid_ids[:-1], valid_ids[1:]].log().mean().item())
    return min(losses)
