"""Token ids and tokenizers: the vocabulary of every task of the book and the two tokenizers of chapter 11.

Token ids follow one convention in every vocabulary of the book: ``PAD=0, BOS=1, EOS=2, UNK=3``
(:data:`SPECIALS`, in id order).

* :class:`Vocab` — token strings <-> ids, the four specials first (the word-level tasks of :mod:`~transformer_lib.data.tasks`).
* :class:`CharTokenizer` and :class:`BPETokenizer` (with :func:`pretokenize`) — the language-model corpus of
  chapter 11, character by character or in byte-pair-encoded pieces.

Everything here is also available as ``transformer_lib.data.<name>``.
"""
from __future__ import annotations

import heapq
import json
import re
from collections import Counter
from typing import Dict, Iterable, List, Sequence, Tuple

import torch

from ..checks import check_positive_int, check_tensor

__all__ = ["PAD_ID", "BOS_ID", "EOS_ID", "UNK_ID", "PAD", "BOS", "EOS", "UNK", "SPECIALS", "IGNORE_INDEX",
           "Vocab", "CharTokenizer", "BPETokenizer", "pretokenize"]

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # index i holds the string of id i
IGNORE_INDEX = -100  # label value skipped by torch.nn.functional.cross_entropy


# ----------------------------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------------------------
class Vocab:
    """A token <-> id table whose first four ids are ``<pad>, <bos>, <eos>, <unk>``.

    Args:
        tokens: the ordinary tokens, in id order (ids start at 4). Duplicates and special strings are rejected.
    """

    def __init__(self, tokens: Iterable[str]):
        if isinstance(tokens, str):
            raise TypeError(f"tokens must be an iterable of token strings, got the string {tokens[:40]!r}")
        self.itos: List[str] = list(SPECIALS)
        self.stoi: Dict[str, int] = {s: i for i, s in enumerate(SPECIALS)}
        for tok in tokens:
            if not isinstance(tok, str):
                raise TypeError(f"tokens must be strings, got {type(tok).__name__} {tok!r}")
            if tok in self.stoi:
                what = "a special token" if tok in SPECIALS else "a duplicate"
                raise ValueError(f"tokens contains {what}: {tok!r}; expected distinct ordinary tokens")
            self.stoi[tok] = len(self.itos)
            self.itos.append(tok)

    @classmethod
    def from_tokens(cls, sequences: Iterable[Sequence[str]], min_freq: int = 1) -> "Vocab":
        """Build a vocabulary from token sequences, most frequent first (ties in alphabetical order).

        Args:
            sequences: an iterable of token lists, e.g. ``[["the", "dog"], ["the", "cat"]]``.
            min_freq: tokens seen fewer times are left out (they will encode as ``<unk>``).
        """
        check_positive_int("min_freq", min_freq)
        if isinstance(sequences, str):
            raise TypeError("sequences must be an iterable of token lists, got a string")
        counts: Counter = Counter()
        for seq in sequences:
            if isinstance(seq, str):
                raise TypeError(f"sequences must contain token lists, got the string {seq[:40]!r}; "
                                "split it into tokens first")
            counts.update(seq)
        for s in SPECIALS:
            counts.pop(s, None)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token) -> bool:
        return token in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        head = ", ".join(self.itos[4:12])
        return f"Vocab({len(self)} tokens: specials + {head}{', …' if len(self) > 12 else ''})"

    @property
    def tokens(self) -> List[str]:
        """The ordinary tokens (without the specials), in id order."""
        return self.itos[len(SPECIALS):]

    def encode(self, tokens: Sequence[str], strict: bool = False, add_bos: bool = False,
               add_eos: bool = False) -> List[int]:
        """Map tokens to ids; unknown tokens become ``UNK_ID``, or raise ``ValueError`` when ``strict``."""
        if isinstance(tokens, str):
            raise TypeError(f"tokens must be a list of token strings, got the string {tokens[:40]!r}; "
                            "split it first (e.g. text.split())")
        ids = [BOS_ID] if add_bos else []
        for pos, tok in enumerate(tokens):
            i = self.stoi.get(tok)
            if i is None:
                if strict:
                    raise ValueError(f"tokens[{pos}] = {tok!r} is not in the vocabulary of {len(self)} tokens "
                                     "(strict=True allows no <unk>)")
                i = UNK_ID
            ids.append(i)
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids, strip_special: bool = True) -> List[str]:
        """Map ids (a list or a 1-D tensor) back to tokens.

        With ``strip_special`` the ids of ``<pad>``, ``<bos>`` and ``<eos>`` are dropped; ``<unk>`` is kept so
        that unknown input stays visible.
        """
        if isinstance(ids, torch.Tensor):
            check_tensor("ids", ids, ndim=1, dtype="int", allow_empty=True)
            ids = ids.tolist()
        out = []
        for pos, i in enumerate(ids):
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids[{pos}] must be an int, got {type(i).__name__} {i!r}")
            if not 0 <= i < len(self.itos):
                raise ValueError(f"ids[{pos}] = {i} is outside the vocabulary [0, {len(self.itos) - 1}]")
            if strip_special and i in (PAD_ID, BOS_ID, EOS_ID):
                continue
            out.append(self.itos[i])
        return out

    def to_dict(self) -> dict:
        return {"type": "vocab", "tokens": self.tokens}

    def save(self, path) -> None:
        """Write the vocabulary as JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, ensure_ascii=False, indent=0)

    @classmethod
    def load(cls, path) -> "Vocab":
        """Read a vocabulary written by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        if not isinstance(d, dict) or "tokens" not in d:
            raise ValueError(f"{path} is not a saved Vocab (expected a JSON object with a 'tokens' list)")
        return cls(d["tokens"])


# ----------------------------------------------------------------------------------------------------------------
# Tokenizers for the language-model corpus
# ----------------------------------------------------------------------------------------------------------------
def _check_text(name: str, text) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError(f"{name} is empty; expected some text")


class _TextTokenizer:
    """What both text tokenizers share: a :class:`Vocab` (``self.vocab``), its size, and decoding to text."""

    vocab: Vocab
    kind: str  # the "type" field of the saved file

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def decode(self, ids, strip_special: bool = True) -> str:
        return "".join(self.vocab.decode(ids, strip_special=strip_special))

    @classmethod
    def _read(cls, path) -> dict:
        """The saved fields at ``path``, after checking that they describe this kind of tokenizer."""
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        if d.get("type") != cls.kind:
            raise ValueError(f"{path} holds a {d.get('type')!r} tokenizer, expected {cls.kind!r}")
        return d


class CharTokenizer(_TextTokenizer):
    """One token per character; characters not seen when fitting encode as ``<unk>``.

    Build with :meth:`fit` (``CharTokenizer.fit(text)``) or from a :class:`Vocab` of single characters.
    """

    kind = "char"

    def __init__(self, vocab: Vocab):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
        self.vocab = vocab

    @classmethod
    def fit(cls, text: str) -> "CharTokenizer":
        """The tokenizer of the sorted set of characters of ``text``."""
        _check_text("text", text)
        return cls(Vocab(sorted(set(text))))

    def encode(self, text: str) -> List[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        get = self.vocab.stoi.get
        return [get(c, UNK_ID) for c in text]

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"type": self.kind, "tokens": self.vocab.tokens}, f, ensure_ascii=False)

    @classmethod
    def load(cls, path) -> "CharTokenizer":
        return cls(Vocab(cls._read(path)["tokens"]))


# GPT-2's pre-tokenizer (Radford et al., 2019) with Python's ``re``: contractions, letters, digits, other symbols,
# each run taking the single space before it; the last alternatives keep whitespace runs. Every character matches
# some alternative, so the pieces concatenate back to the text exactly.
_PRETOKENIZE = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def pretokenize(text: str) -> List[str]:
    """Split text into the words BPE merges within (GPT-2 style: spaces stay attached to the next word)."""
    return _PRETOKENIZE.findall(text)


class BPETokenizer(_TextTokenizer):
    """Byte-pair encoding (Sennrich et al., 2016) over characters, trained from scratch in pure Python.

    The base alphabet is the set of characters of the training text; each merge joins the most frequent adjacent
    pair of symbols inside pre-tokenized words (:func:`pretokenize`). Encoding applies the merges in the order
    they were learned; characters outside the alphabet encode as ``<unk>``. ``decode(encode(text)) == text`` for
    any text made of seen characters.

    Args:
        tokens: the ordinary tokens in id order (the alphabet, then one token per merge).
        merges: the learned merges ``(left, right)`` in order.
    """

    kind = "bpe"

    def __init__(self, tokens: Sequence[str], merges: Sequence[Tuple[str, str]]):
        self.vocab = Vocab(tokens)
        self.merges: List[Tuple[str, str]] = [tuple(m) for m in merges]
        self.ranks: Dict[Tuple[str, str], int] = {}
        for r, m in enumerate(self.merges):
            self.ranks.setdefault(m, r)
        for a, b in self.merges:
            if a + b not in self.vocab:
                raise ValueError(f"merge {(a, b)!r} produces {a + b!r}, which is not among tokens")
        self._cache: Dict[str, List[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int = 512) -> "BPETokenizer":
        """Learn merges on ``text`` until the vocabulary (specials included) has ``vocab_size`` tokens.

        Fewer tokens result when no pair is left to merge. Uses the standard incremental algorithm: a table of
        word frequencies, pair counts updated only for the words that contain the merged pair, and a lazy
        max-heap of pair counts (ties broken by the smaller pair, so training is deterministic).
        """
        _check_text("text", text)
        check_positive_int("vocab_size", vocab_size)
        alphabet = sorted(set(text))
        if vocab_size < len(SPECIALS) + len(alphabet):
            raise ValueError(f"vocab_size must be at least {len(SPECIALS) + len(alphabet)} (4 specials + "
                             f"{len(alphabet)} characters of the text), got {vocab_size}")
        word_freq = Counter(pretokenize(text))
        words = [list(w) for w in word_freq]
        freqs = list(word_freq.values())
        pair_counts: Dict[Tuple[str, str], int] = Counter()
        where: Dict[Tuple[str, str], set] = {}
        for wi, (w, f) in enumerate(zip(words, freqs)):
            for p in zip(w, w[1:]):
                pair_counts[p] += f
                where.setdefault(p, set()).add(wi)
        heap = [(-c, p) for p, c in pair_counts.items()]
        heapq.heapify(heap)
        tokens, merges = list(alphabet), []
        known = set(alphabet)
        while len(SPECIALS) + len(tokens) < vocab_size and heap:
            neg, pair = heapq.heappop(heap)
            if pair_counts.get(pair, 0) != -neg or neg == 0:
                continue  # a stale heap entry: the count changed since it was pushed
            a, b = pair
            new = a + b
            merges.append(pair)
            if new not in known:  # two different merges can spell the same string; keep ids unique
                known.add(new)
                tokens.append(new)
            delta: Counter = Counter()
            for wi in sorted(where.pop(pair, ())):
                w = words[wi]
                if len(w) < 2:
                    continue
                merged, i = [], 0
                while i < len(w):
                    if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                        merged.append(new)
                        i += 2
                    else:
                        merged.append(w[i])
                        i += 1
                if len(merged) == len(w):
                    continue  # a stale index entry: the pair is no longer in this word
                f = freqs[wi]
                for p in zip(w, w[1:]):
                    delta[p] -= f
                for p in zip(merged, merged[1:]):
                    delta[p] += f
                    where.setdefault(p, set()).add(wi)
                words[wi] = merged
            for p, d in delta.items():
                if d:
                    pair_counts[p] += d
                    if pair_counts[p] > 0:
                        heapq.heappush(heap, (-pair_counts[p], p))
            pair_counts.pop(pair, None)
        return cls(tokens, merges)

    def _encode_word(self, word: str) -> List[int]:
        ids = self._cache.get(word)
        if ids is not None:
            return ids
        symbols = list(word)
        ranks = self.ranks
        while len(symbols) > 1:
            best, best_rank = None, None
            for p in zip(symbols, symbols[1:]):
                r = ranks.get(p)
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = p, r
            if best is None:
                break
            a, b = best
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        get = self.vocab.stoi.get
        ids = [get(s, UNK_ID) for s in symbols]
        self._cache[word] = ids
        return ids

    def encode(self, text: str) -> List[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        out: List[int] = []
        for word in pretokenize(text):
            out.extend(self._encode_word(word))
        return out

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"type": self.kind, "tokens": self.vocab.tokens, "merges": [list(m) for m in self.merges]},
                      f, ensure_ascii=False)

    @classmethod
    def load(cls, path) -> "BPETokenizer":
        d = cls._read(path)
        return cls(d["tokens"], [tuple(m) for m in d["merges"]])
