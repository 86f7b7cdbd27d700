"""The synthetic tasks of the book, generated from a seed: nothing is downloaded.

In the order the chapters meet them:

* :func:`make_agreement_data` — long-distance subject–verb agreement at an exact distance, after a prefix of
  random length (chapters 2 and 4).
* The translation task (chapters 3, 7 and 10), in :mod:`~transformer_lib.data.translation`: an English-like
  grammar translated into an invented verb-final language.
* :func:`make_lookback_data` — per-position "copy the token k steps back", for length extrapolation (chapter 5).
* :func:`make_retrieval_data` — key–value retrieval across a long sequence (chapter 12).

Word-level tasks are generated with Python's ``random.Random(seed)`` and tensor tasks with a seeded
``torch.Generator``, so the same seed gives the same data on every machine. Their vocabularies are
:class:`~transformer_lib.data.tokenizers.Vocab` objects. Everything here is also available as
``transformer_lib.data.<name>``.
"""
from __future__ import annotations

import random
from typing import List, Tuple

import torch

from ..checks import check_positive_int, check_seed
from .tokenizers import IGNORE_INDEX, PAD_ID, SPECIALS, Vocab
from .translation import TRANSLATION_LEXICON

# The agreement task reuses the English words of the translation task's lexicon, in its order.
_NOUNS, _PREPS = TRANSLATION_LEXICON["nouns"], TRANSLATION_LEXICON["prepositions"]
_VT, _VI = TRANSLATION_LEXICON["transitive_verbs"], TRANSLATION_LEXICON["intransitive_verbs"]
_PLURALS = [noun + "s" for noun in _NOUNS]  # "dogs"

__all__ = ["make_agreement_data", "agreement_vocab", "AGREEMENT_VERBS",
           "make_retrieval_data", "retrieval_vocab_size", "make_lookback_data"]


def _generator(seed: int) -> torch.Generator:
    check_seed(seed)
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------------------------------------------
# Agreement across a distance (chapter 2)
# ----------------------------------------------------------------------------------------------------------------
_AGR_ADVERBS = ("often", "still", "really", "never")
# Openers of the prefix before the subject: no noun and no "the", so the subject is the first noun of the row.
_AGR_OPENERS = ("and", "so", "then", "well", "now", "yes", "but", "maybe")
AGREEMENT_VERBS = ("is", "are")  # the verb each label of make_agreement_data stands for


def agreement_vocab() -> Vocab:
    """The vocabulary of :func:`make_agreement_data` (the same for every distance and prefix)."""
    words = ["the", "who"] + list(_NOUNS) + list(_PLURALS) + list(_PREPS) + list(_VT) + list(_VI)
    return Vocab(sorted(words + list(_AGR_ADVERBS) + list(_AGR_OPENERS)))


_AGR_NOUNS, _AGR_VT, _AGR_VI, _AGR_PREPS = tuple(_NOUNS), tuple(_VT), tuple(_VI), tuple(_PREPS)
_AGR_SIZES = (1, 2, 3, 3, 4, 4)  # filler pieces: adverb, "who VI", "PREP the N", "who VT the N"
_AGR_SIZES_UP_TO = {left: tuple(s for s in _AGR_SIZES if s <= left) for left in range(1, max(_AGR_SIZES) + 1)}


def _agreement_filler(rng: random.Random, distance: int, attractor_plural: bool) -> List[str]:
    def attractor():
        noun = rng.choice(_AGR_NOUNS)
        return noun + "s" if attractor_plural else noun

    out: List[str] = []
    while len(out) < distance:
        size = rng.choice(_AGR_SIZES_UP_TO[min(distance - len(out), max(_AGR_SIZES))])
        if size == 1:
            out.append(rng.choice(_AGR_ADVERBS))
        elif size == 2:
            out += ["who", rng.choice(_AGR_VI)]
        elif size == 3:
            out += [rng.choice(_AGR_PREPS), "the", attractor()]
        else:
            out += ["who", rng.choice(_AGR_VT), "the", attractor()]
    return out


def make_agreement_data(n: int, distance: int, seed: int = 0, attractors: bool = True,
                        max_prefix: int = 4) -> Tuple[torch.Tensor, torch.Tensor, Vocab]:
    """Subject–verb agreement across exactly ``distance`` words ("so the chef who saw the dogs near the cats … is").

    Each sequence is a prefix of 0 to ``max_prefix`` openers ("and", "so", "then", …; the length drawn
    uniformly), then ``the NOUN``, then ``distance`` filler words (relative clauses, prepositional phrases and
    adverbs); the verb would come next. The label is the number of the subject noun, the first noun of the
    sequence. Because the prefix length varies, the subject's position from the start varies too, so a model
    cannot find it by its position alone; its distance from the end of the sequence is always ``distance + 1``.
    With ``attractors`` every noun in the filler has the other number, so "agree with the nearest noun" is always
    wrong.

    Sequences shorter than the longest possible one are padded on the right with ``PAD_ID`` (0), so every word
    keeps its position from the start and the verb would follow the last non-padding token;
    ``(x != PAD_ID).sum(1)`` gives each length. (Moving the padding to the front would put the subject at index
    ``max_prefix + 1`` in every row and give the position away again.) ``max_prefix=0`` gives sequences of one
    length, without padding, whose subject is always the second word.

    Args:
        n: number of sequences.
        distance: words between the subject noun and the verb (0: the verb follows the noun).
        seed: the random seed.
        attractors: make every filler noun the other number (else random).
        max_prefix: the longest prefix before the subject (0: no prefix).

    Returns:
        ``(x, y, vocab)``: x (n, max_prefix + distance + 2) long token ids, padded with ``PAD_ID``;
        y (n,) long, 0 = singular ("is"), 1 = plural ("are"); the :func:`agreement_vocab`.
    """
    check_positive_int("n", n)
    check_positive_int("distance", distance, allow_zero=True)
    check_positive_int("max_prefix", max_prefix, allow_zero=True)
    check_seed(seed)
    vocab = agreement_vocab()
    stoi = vocab.stoi
    rng = random.Random(seed)
    width = max_prefix + distance + 2
    rows, labels = [], []
    for _ in range(n):
        prefix = [rng.choice(_AGR_OPENERS) for _ in range(rng.randint(0, max_prefix))] if max_prefix else []
        plural = rng.random() < 0.5
        noun = rng.choice(_AGR_NOUNS)
        attractor_plural = (not plural) if attractors else rng.random() < 0.5
        words = prefix + ["the", noun + "s" if plural else noun] + _agreement_filler(rng, distance, attractor_plural)
        ids = [stoi[w] for w in words]
        rows.append(ids + [PAD_ID] * (width - len(ids)))
        labels.append(int(plural))
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.long), vocab


# ----------------------------------------------------------------------------------------------------------------
# Long-range retrieval (chapter 12) and look-back (chapter 5)
# ----------------------------------------------------------------------------------------------------------------
_QUERY_ID = len(SPECIALS)  # the "now tell me the value of" marker


def retrieval_vocab_size(n_key_types: int = 16, n_values: int = 16, n_filler: int = 32) -> int:
    """Size of the vocabulary of :func:`make_retrieval_data`: specials, query marker, fillers, keys, values."""
    return len(SPECIALS) + 1 + n_filler + n_key_types + n_values


def make_retrieval_data(n: int, seq_len: int, seed: int = 0, n_keys: int = 4, n_key_types: int = 16,
                        n_values: int = 16, n_filler: int = 32) -> Tuple[torch.Tensor, torch.Tensor]:
    """Find the value paired with a key seen far earlier in a long sequence.

    Layout of a row (length ``seq_len``): random filler tokens with ``n_keys`` adjacent ``key value`` pairs at
    random non-overlapping positions (distinct keys), then ``QUERY key``. The label is the value that followed
    that key. Token ids: 0–3 specials, 4 = QUERY, then ``n_filler`` fillers, ``n_key_types`` keys and
    ``n_values`` values (:func:`retrieval_vocab_size`).

    Returns:
        x (n, seq_len) long; y (n,) long in ``[0, n_values)`` (the value's index; its token id is
        ``retrieval_vocab_size(...) - n_values + y``).
    """
    for name, v in (("n", n), ("seq_len", seq_len), ("n_keys", n_keys), ("n_key_types", n_key_types),
                    ("n_values", n_values), ("n_filler", n_filler)):
        check_positive_int(name, v)
    if n_keys > n_key_types:
        raise ValueError(f"n_keys must be <= n_key_types (keys in a row are distinct), got n_keys={n_keys}, "
                         f"n_key_types={n_key_types}")
    if seq_len < 2 * n_keys + 2:
        raise ValueError(f"seq_len must be >= 2 * n_keys + 2 = {2 * n_keys + 2} to hold the pairs and the query, "
                         f"got {seq_len}")
    g = _generator(seed)
    filler0 = _QUERY_ID + 1
    key0 = filler0 + n_filler
    value0 = key0 + n_key_types
    x = torch.randint(filler0, key0, (n, seq_len), generator=g)
    region = seq_len - 2  # the last two positions hold QUERY key
    # Non-overlapping starts: sorted distinct draws from range(region - n_keys), the i-th shifted by i.
    draws = torch.rand(n, region - n_keys, generator=g).argsort(dim=1)[:, :n_keys].sort(dim=1).values
    starts = draws + torch.arange(n_keys)  # (n, n_keys)
    keys = torch.rand(n, n_key_types, generator=g).argsort(dim=1)[:, :n_keys] + key0  # (n, n_keys) distinct
    values = torch.randint(0, n_values, (n, n_keys), generator=g)  # (n, n_keys)
    x.scatter_(1, starts, keys)
    x.scatter_(1, starts + 1, values + value0)
    which = torch.randint(0, n_keys, (n, 1), generator=g)  # (n, 1)
    x[:, -2] = _QUERY_ID
    x[:, -1] = keys.gather(1, which).squeeze(1)
    y = values.gather(1, which).squeeze(1)
    return x, y


def make_lookback_data(n: int, seq_len: int, lookback: int, seed: int = 0,
                       vocab_size: int = 16) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-position targets ``y[:, t] = x[:, t - lookback]``: a task where relative position is everything.

    Train a causal model at one ``seq_len`` and evaluate at 2× and 4× to test length extrapolation. Tokens are
    drawn uniformly from ``[4, vocab_size)`` (the specials are never used).

    Returns:
        x (n, seq_len) long; y (n, seq_len) long with ``IGNORE_INDEX`` (-100) where ``t < lookback``.
    """
    for name, v in (("n", n), ("seq_len", seq_len), ("lookback", lookback), ("vocab_size", vocab_size)):
        check_positive_int(name, v)
    if lookback >= seq_len:
        raise ValueError(f"lookback must be < seq_len, got lookback={lookback}, seq_len={seq_len}")
    if vocab_size < len(SPECIALS) + 2:
        raise ValueError(f"vocab_size must be >= {len(SPECIALS) + 2} (4 specials + at least 2 symbols), "
                         f"got {vocab_size}")
    x = torch.randint(len(SPECIALS), vocab_size, (n, seq_len), generator=_generator(seed))
    y = torch.full_like(x, IGNORE_INDEX)
    y[:, lookback:] = x[:, :-lookback]
    return x, y
