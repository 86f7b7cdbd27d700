"""The translation task of chapters 3, 7 and 10: an English-like grammar translated into an invented verb-final
language, generated from a seed (nothing is downloaded).

* :func:`make_translation_data` and :func:`translation_splits` sample sentence pairs (the splits keep a test set of
  longer sentences than any seen in training); :func:`make_long_range_data` samples sentences whose main verb is far
  from its subject, at the training lengths; :func:`translation_vocabs` gives the two vocabularies.
* :func:`reference_translate` is the rule that defines the target language; :func:`alignment` links each target
  word to the source words it translates (the gold standard for cross-attention); :func:`subject_verb_distance`
  measures how far the main verb's agreement reaches; :func:`describe_translation` shows the task in a few lines.

Everything public here is also available as ``transformer_lib.data.<name>``.
"""
from __future__ import annotations

import random
from typing import Iterable, List, Optional, Sequence, Tuple

import torch

from ..checks import check_positive_int, check_seed
from .tokenizers import Vocab

__all__ = ["make_translation_data", "make_long_range_data", "translation_splits", "translation_vocabs", "reference_translate", "alignment",
           "subject_verb_distance", "describe_translation", "TRANSLATION_LEXICON"]


# Source grammar (every choice random; relative clauses nest at most ``max_depth`` deep):
#   S   -> NP VP
#   VP  -> Vi | Vt NP
#   NP  -> Det [Adj] N [PP | RC]           Det agrees with N: a (sg), some (pl), the (both)
#   PP  -> P Det' Place                    "near the river" (places are singular, take no modifiers)
#   RC  -> who Vi | who Vt NP              subject relative: "the chef who saw the dogs"
#        | that NP Vt                      object relative:  "the dog that the chefs fed"
# The sampler gives the NP inside an object relative no clause of its own (no centre embedding, which a small
# model learns far more slowly); reference_translate handles centre-embedded sentences all the same.
# Verbs are in the past tense, so English shows no agreement on them; the target language does.
# Target language (head-final, SOV):
#   S'  = NP'(subject, case ka) [NP'(object, case mo)] V'(main, agreeing with the subject's number)
#   NP' = [PP' | RC'] Det' N'(+ri if plural) [Adj'] case
#   PP' = Det' Place' Postposition
#   RC' = [NP'(object, mo)] V'(relative, agreeing with the head noun)      for "who ..."
#       | NP'(subject, ka) V'(relative, agreeing with that subject)       for "that ..."
# Verb endings: main -a (sg) / -an (pl), relative -e (sg) / -en (pl).
_NOUNS = {"chef": "kuvo", "dog": "hani", "cat": "mesu", "king": "rano", "girl": "lita", "boy": "poki",
          "farmer": "tasu", "bird": "piro"}
_PLACES = {"garden": "sela", "house": "vemo", "river": "nalu", "park": "tiva"}
_ADJS = {"big": "gor", "small": "pik", "old": "sen", "young": "jun", "happy": "fel", "red": "rud"}
_DETS = {"the": "ti", "a": "na", "some": "mu"}
_PREPS = {"near": "ko", "behind": "ura", "in": "ini"}
_VT = {"saw": "mir", "chased": "zek", "liked": "lov", "helped": "hul", "fed": "fam", "found": "tov"}
_VI = {"slept": "dor", "ran": "kur", "laughed": "hah", "danced": "bal"}
_NOM, _ACC = "ka", "mo"
_PLURAL_SUFFIX = "ri"
_VERB_ENDINGS = {("main", "sg"): "a", ("main", "pl"): "an", ("rel", "sg"): "e", ("rel", "pl"): "en"}

_PLURALS = {n + "s": n for n in _NOUNS}  # "dogs" -> "dog"
_SG_DETS, _PL_DETS = ("the", "a"), ("the", "some")

TRANSLATION_LEXICON = {
    "nouns": dict(_NOUNS), "places": dict(_PLACES), "adjectives": dict(_ADJS), "determiners": dict(_DETS),
    "prepositions": dict(_PREPS), "transitive_verbs": dict(_VT), "intransitive_verbs": dict(_VI),
    "case_markers": {"subject": _NOM, "object": _ACC}, "plural_suffix": _PLURAL_SUFFIX,
    "verb_endings": {f"{k[0]}_{k[1]}": v for k, v in _VERB_ENDINGS.items()},
}


def _source_words() -> List[str]:
    words = list(_DETS) + list(_ADJS) + list(_NOUNS) + list(_PLURALS) + list(_PLACES) + list(_PREPS)
    return sorted(words + list(_VT) + list(_VI) + ["who", "that"])


def _target_words() -> List[str]:
    words = list(_DETS.values()) + list(_ADJS.values()) + list(_PLACES.values()) + list(_PREPS.values())
    words += [_NOM, _ACC] + list(_NOUNS.values()) + [n + _PLURAL_SUFFIX for n in _NOUNS.values()]
    words += [v + e for v in list(_VT.values()) + list(_VI.values()) for e in _VERB_ENDINGS.values()]
    return sorted(words)


def translation_vocabs() -> Tuple[Vocab, Vocab]:
    """The source and target vocabularies of the translation task (every word of the lexicon, sorted).

    Built from the whole lexicon, so every sentence of every split encodes without ``<unk>`` and the ids do
    not depend on the sample.
    """
    return Vocab(_source_words()), Vocab(_target_words())


def _sample_np(rng: random.Random, depth: int, max_depth: int, p: float, clause: bool = True) -> List[str]:
    plural = rng.random() < 0.5
    noun = rng.choice(list(_NOUNS))
    det = rng.choice(_PL_DETS if plural else _SG_DETS)
    out = [det]
    if rng.random() < 0.3:
        out.append(rng.choice(list(_ADJS)))
    out.append(noun + "s" if plural else noun)
    r = rng.random()
    if clause and depth < max_depth and r < p:  # a relative clause, one level deeper
        if rng.random() < 0.6:
            out.append("who")
            if rng.random() < 0.3:
                out.append(rng.choice(list(_VI)))
            else:
                out.append(rng.choice(list(_VT)))
                out += _sample_np(rng, depth + 1, max_depth, p)
        else:
            out.append("that")  # its subject takes no clause: no centre embedding ("that the cat who ran saw")
            out += _sample_np(rng, depth + 1, max_depth, p, clause=False)
            out.append(rng.choice(list(_VT)))
    elif r < p + 0.15 * (1 - p):  # a prepositional phrase
        out += [rng.choice(list(_PREPS)), rng.choice(_SG_DETS), rng.choice(list(_PLACES))]
    return out


def _sample_sentence(rng: random.Random, max_depth: int, p: float) -> List[str]:
    out = _sample_np(rng, 0, max_depth, p)
    if rng.random() < 0.3:
        out.append(rng.choice(list(_VI)))
    else:
        out.append(rng.choice(list(_VT)))
        out += _sample_np(rng, 0, max_depth, p)
    return out


class _Parser:
    """Recursive-descent parser of the source grammar; emits target words with their source positions."""

    def __init__(self, tokens: Sequence[str]):
        self.toks = list(tokens)
        self.i = 0

    def _peek(self) -> Optional[str]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _take(self, allowed, what: str) -> str:
        tok = self._peek()
        if tok not in allowed:
            got = "the end of the sentence" if tok is None else repr(tok)
            raise ValueError(f"src_tokens[{self.i}]: expected {what}, got {got} in {' '.join(self.toks)!r}")
        self.i += 1
        return tok

    def sentence(self) -> List[Tuple[str, Tuple[int, ...]]]:
        subj, num = self.np(_NOM)
        verb_i = self.i
        verb = self._take(set(_VT) | set(_VI), "a verb")
        obj = self.np(_ACC)[0] if verb in _VT else []
        if self._peek() is not None:
            raise ValueError(f"src_tokens[{self.i}]: expected the end of the sentence, got {self._peek()!r} "
                             f"in {' '.join(self.toks)!r}")
        return subj + obj + [(self._verb(verb, "main", num), (verb_i,))]

    @staticmethod
    def _verb(verb: str, kind: str, num: str) -> str:
        stem = _VT.get(verb) or _VI[verb]
        return stem + _VERB_ENDINGS[(kind, num)]

    def np(self, case: str) -> Tuple[List[Tuple[str, Tuple[int, ...]]], str]:
        det_i = self.i
        det = self._take(_DETS, "a determiner")
        adj = None
        if self._peek() in _ADJS:
            adj = (self.i, self._take(_ADJS, "an adjective"))
        noun_i = self.i
        noun = self._take(set(_NOUNS) | set(_PLURALS), "a noun")
        num = "pl" if noun in _PLURALS else "sg"
        if det not in (_PL_DETS if num == "pl" else _SG_DETS):
            raise ValueError(f"src_tokens[{det_i}]: determiner {det!r} does not agree with the {num} noun "
                             f"{noun!r}")
        stem = _NOUNS[_PLURALS.get(noun, noun)]
        modifier: List[Tuple[str, Tuple[int, ...]]] = []
        nxt = self._peek()
        if nxt in _PREPS:
            p_i = self.i
            prep = self._take(_PREPS, "a preposition")
            d_i = self.i
            d = self._take(_SG_DETS, "'the' or 'a'")
            pl_i = self.i
            place = self._take(_PLACES, "a place noun")
            modifier = [(_DETS[d], (d_i,)), (_PLACES[place], (pl_i,)), (_PREPS[prep], (p_i,))]
        elif nxt == "who":  # subject relative: the head noun is the clause's subject
            who_i = self.i
            self.i += 1
            v_i = self.i
            verb = self._take(set(_VT) | set(_VI), "a verb after 'who'")
            obj = self.np(_ACC)[0] if verb in _VT else []
            modifier = obj + [(self._verb(verb, "rel", num), (v_i, who_i))]
        elif nxt == "that":  # object relative: the head noun is the clause's (missing) object
            that_i = self.i
            self.i += 1
            subj, sub_num = self.np(_NOM)
            v_i = self.i
            verb = self._take(_VT, "a transitive verb closing the 'that' clause")
            modifier = subj + [(self._verb(verb, "rel", sub_num), (v_i, that_i))]
        out = modifier + [(_DETS[det], (det_i,)), (stem + (_PLURAL_SUFFIX if num == "pl" else ""), (noun_i,))]
        if adj is not None:
            out.append((_ADJS[adj[1]], (adj[0],)))
        out.append((case, (noun_i,)))
        return out, num


def _check_src_tokens(src_tokens) -> List[str]:
    if isinstance(src_tokens, str):
        return src_tokens.split()
    if not isinstance(src_tokens, (list, tuple)):
        raise TypeError(f"src_tokens must be a list of words or a str, got {type(src_tokens).__name__}")
    return list(src_tokens)


def reference_translate(src_tokens: Sequence[str]) -> List[str]:
    """The translation rule itself: parse the English-like sentence and emit the target words.

    Args:
        src_tokens: the source words (a list, or a string split on spaces).

    Returns:
        The target words. Raises ``ValueError`` naming the position when the sentence is not in the grammar.

    Examples (the relative clause moves before its noun, the verb goes last and agrees with its subject):

    >>> " ".join(reference_translate("the chef who saw the dogs slept"))
    'ti haniri mo mire ti kuvo ka dora'
    >>> " ".join(reference_translate("the dogs that the old king fed chased a cat"))
    'ti rano sen ka fame ti haniri ka na mesu mo zekan'
    >>> " ".join(reference_translate("a girl near the house liked some birds"))
    'ti vemo ko na lita ka mu pirori mo lova'
    """
    return [w for w, _ in _Parser(_check_src_tokens(src_tokens)).sentence()]


def alignment(src_tokens: Sequence[str]) -> torch.Tensor:
    """The gold word alignment of a sentence and its reference translation, shaped like cross-attention.

    Each target word is aligned to the source word it translates (a case marker to its noun; a relative verb
    to its verb and to ``who``/``that``).

    Returns:
        A float tensor (T, S) of zeros and ones; T target words, S source words; each row sums to at least 1.
    """
    toks = _check_src_tokens(src_tokens)
    pairs = _Parser(toks).sentence()
    a = torch.zeros(len(pairs), len(toks))
    for t, (_, srcs) in enumerate(pairs):
        a[t, list(srcs)] = 1.0
    return a


def subject_verb_distance(src_tokens: Sequence[str]) -> int:
    """How far the main verb is from the subject noun it agrees with, in source words (1 = adjacent).

    The subject's number decides the ending of the main verb, which the target puts last: the longer the
    modifiers of the subject (prepositional phrases, relative clauses), the longer the dependency.

    >>> subject_verb_distance("the chef slept")
    1
    >>> subject_verb_distance("the old chef who saw the dogs slept")
    5
    """
    toks = _check_src_tokens(src_tokens)
    verb_i = _Parser(toks).sentence()[-1][1][0]  # the target's last word is the main verb, aligned to its source
    noun_i = 2 if toks[1] in _ADJS else 1          # the sentence opens with the subject: det [adjective] noun
    return verb_i - noun_i


def _check_lengths(min_len, max_len, max_depth) -> None:
    check_positive_int("min_len", min_len)
    check_positive_int("max_len", max_len)
    check_positive_int("max_depth", max_depth, allow_zero=True)
    if max_len < min_len:
        raise ValueError(f"max_len must be >= min_len, got max_len={max_len} < min_len={min_len}")
    longest = 13 + 10 * max_depth  # two 6-word noun phrases and a verb, +5 words per clause level in each
    if min_len > longest or max_len < 3:
        raise ValueError(f"no sentence of length {min_len}..{max_len} can be generated with max_depth={max_depth} "
                         f"(sentences have 3 to {longest} words at this depth)")


def _draw_pairs(n: int, seed: int, min_len: int, max_len: int, max_depth: int, unique: bool, exclude: Iterable[str],
                keep=None, floor: Optional[float] = None) -> List[Tuple[List[str], List[str]]]:
    """Rejection sampling shared by the generators: sentences of the grammar, kept by length (and ``keep``)."""
    rng = random.Random(seed)
    seen = set(exclude)
    out = []
    # Rich sentences are needed for long ranges: raise the floor of the per-sentence modifier rate.
    lo = min(0.85, max(0.0, (min_len - 6) / 14)) if floor is None else floor
    misses = 0  # draws since the last accepted sentence: a long run means the range is exhausted
    while len(out) < n and misses < 20000:
        src = _sample_sentence(rng, max_depth, rng.uniform(lo, 0.95))
        key = " ".join(src)
        if not min_len <= len(src) <= max_len or (unique and key in seen) or (keep is not None and not keep(src)):
            misses += 1
            continue
        misses = 0
        seen.add(key)
        out.append((src, reference_translate(src)))
    return out


def make_translation_data(n: int, seed: int = 0, min_len: int = 3, max_len: int = 20, max_depth: int = 2,
                          unique: bool = True, exclude: Iterable[str] = ()) -> List[Tuple[List[str], List[str]]]:
    """``n`` sentence pairs (source words, target words) with ``min_len <= len(source) <= max_len``.

    Sentences are sampled from the grammar (with a relative-clause/modifier rate drawn per sentence, so short
    and long sentences both occur) and kept when their length is in range.

    Args:
        n: number of pairs.
        seed: the random seed (same seed, same pairs).
        min_len, max_len: the source length range, in words (the grammar's shortest sentence has 3).
        max_depth: the deepest nesting of relative clauses (0: none).
        unique: no source sentence twice.
        exclude: source sentences (space-joined strings) never to return, e.g. those of another split.

    Returns:
        A list of ``(src_tokens, tgt_tokens)`` pairs; ``tgt_tokens == reference_translate(src_tokens)``.
    """
    check_positive_int("n", n)
    check_seed(seed)
    _check_lengths(min_len, max_len, max_depth)
    out = _draw_pairs(n, seed, min_len, max_len, max_depth, unique, exclude)
    if len(out) < n:
        raise ValueError(f"could only generate {len(out)} of n={n} distinct sentences with length {min_len}.."
                         f"{max_len} and max_depth={max_depth}; widen the range or ask for fewer")
    return out


def make_long_range_data(n: int, min_distance: int, seed: int = 0, max_distance: Optional[int] = None,
                         min_len: int = 3, max_len: int = 20, max_depth: int = 2,
                         exclude: Iterable[str] = ()) -> List[Tuple[List[str], List[str]]]:
    """``n`` distinct sentence pairs whose main verb is far from its subject, at lengths seen in training.

    A test set for the agreement of the main verb across long distances: every source has
    ``min_distance <= subject_verb_distance(source) <= max_distance`` and ``min_len <= len(source) <= max_len``
    (by default the training range of :func:`translation_splits`), so a model is tested on distances, not on
    lengths it never saw. Pass the training sources as ``exclude`` to keep the split disjoint from them.

    Args:
        n: number of pairs.
        min_distance: the smallest subject–verb distance kept, in source words (1 = adjacent).
        seed: the random seed (same seed, same pairs).
        max_distance: the largest distance kept (None: no limit).
        min_len, max_len, max_depth: as in :func:`make_translation_data`.
        exclude: source sentences (space-joined strings) never to return.

    Returns:
        A list of ``(src_tokens, tgt_tokens)`` pairs.

    >>> pairs = make_long_range_data(3, min_distance=10, seed=0)
    >>> [subject_verb_distance(src) >= 10 for src, _ in pairs]
    [True, True, True]
    """
    check_positive_int("n", n)
    check_positive_int("min_distance", min_distance)
    if max_distance is not None:
        check_positive_int("max_distance", max_distance)
        if max_distance < min_distance:
            raise ValueError(f"max_distance must be >= min_distance, got max_distance={max_distance} < "
                             f"min_distance={min_distance}")
    check_seed(seed)
    _check_lengths(min_len, max_len, max_depth)
    farthest = max_len - 2  # the subject noun is word 2 at the earliest and the verb word max_len at the latest
    if min_distance > farthest:
        raise ValueError(f"min_distance must be at most max_len - 2 = {farthest} (a subject noun and its verb within "
                         f"{max_len} words), got {min_distance}")
    high = max_distance if max_distance is not None else farthest

    def keep(src: List[str]) -> bool:
        return min_distance <= subject_verb_distance(src) <= high

    # A distant subject needs modifiers on the subject: sample clause-rich sentences (the rate floor of 0.6).
    out = _draw_pairs(n, seed, min_len, max_len, max_depth, True, exclude, keep=keep, floor=0.6)
    if len(out) < n:
        raise ValueError(f"could only generate {len(out)} of n={n} distinct sentences with a subject-verb distance "
                         f"of {min_distance}..{high} words, length {min_len}..{max_len} and max_depth={max_depth}; "
                         "widen the ranges or ask for fewer")
    return out


def translation_splits(seed: int = 0, n_train: int = 20000, n_valid: int = 1000, n_test: int = 1000,
                       n_long: int = 1000, min_len: int = 3, max_len: int = 20, long_max_len: int = 30,
                       max_depth: int = 2, long_max_depth: int = 3) -> dict:
    """The translation splits used by the book.

    'train', 'valid' and 'test' share one length range (``min_len..max_len``) and no source sentence;
    'long' has sources of ``max_len + 1 .. long_max_len`` words (relative clauses up to ``long_max_depth``),
    longer than anything in training.

    Returns:
        ``{'train', 'valid', 'test', 'long'}`` lists of ``(src_tokens, tgt_tokens)``, plus ``'src_vocab'`` and
        ``'tgt_vocab'`` (:func:`translation_vocabs`: every word of every split, no ``<unk>``).
    """
    for name, v in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test), ("n_long", n_long)):
        check_positive_int(name, v)
    if long_max_len <= max_len:
        raise ValueError(f"long_max_len must be > max_len, got long_max_len={long_max_len}, max_len={max_len}")
    pool = make_translation_data(n_train + n_valid + n_test, seed, min_len, max_len, max_depth)
    rng = random.Random(seed + 1)
    rng.shuffle(pool)
    long = make_translation_data(n_long, seed + 2, max_len + 1, long_max_len, long_max_depth)
    src_vocab, tgt_vocab = translation_vocabs()
    return {"train": pool[:n_train], "valid": pool[n_train:n_train + n_valid],
            "test": pool[n_train + n_valid:], "long": long, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab}


def describe_translation(n_examples: int = 3, seed: int = 0) -> str:
    """A short description of the translation task with ``n_examples`` example pairs (for the book)."""
    lines = ["English-like source -> invented verb-final target (SOV; relative clauses and PPs before the noun;",
             "case markers ka = subject, mo = object; verb endings -a/-an main sg/pl, -e/-en relative sg/pl).", ""]
    for src, tgt in make_translation_data(n_examples, seed, min_len=6, max_len=14):
        lines += ["  " + " ".join(src), "  -> " + " ".join(tgt), ""]
    return "\n".join(lines)
