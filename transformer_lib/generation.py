"""Decoding: turning next-token distributions into sequences — sampling, greedy search, beam search, KV cache.

Two model families share one protocol (see :mod:`transformer_lib.models`):

* decoder-only language models: ``logits = model(ids, cache=cache)`` and ``cache = model.new_cache()``;
* sequence-to-sequence models (Transformer or RNN): ``memory = model.encode(src, src_mask)``,
  ``cache = model.new_cache()`` (an object with ``.length`` and ``.reorder(index)``) and
  ``logits = model.decode(tgt, memory, src_mask=src_mask, cache=cache)``.

With a cache every step feeds only the newest token, and the keys/values (or recurrent state) of the earlier
positions are reused; without one the whole prefix is re-run at every step. Both give the same tokens — the cache
only removes repeated work — and the tests check it for every position scheme.

Sampling draws **one uniform number per row and step** from the ``torch.Generator`` and inverts the cumulative
distribution, so the random stream depends neither on the vocabulary size nor on the device, and a seeded run
is reproducible with or without the cache.

Shape legend: B batch, T length, V vocabulary, K beam size, S source length, L output length.
"""
from __future__ import annotations

import contextlib
import math
from numbers import Real
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .checks import check_positive_int, check_tensor
from .attention import real_tokens

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "sample_top_k",
    "generate",
    "greedy_translate",
    "beam_search",
    "sequence_logprob",
]


# ------------------------------------------------------------------------------------------------ helpers
def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, Real):
        raise TypeError(f"temperature must be a positive number, got {type(temperature).__name__} {temperature!r}")
    if not temperature > 0 or math.isinf(temperature):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}; "
                         "for deterministic argmax decoding pass greedy=True instead")
    return float(temperature)


def _check_top_k(k, vocab_size: Optional[int]) -> None:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"top_k must be an int or None, got {type(k).__name__} {k!r}")
    if k < 1 or (vocab_size is not None and k > vocab_size):
        upper = f"the vocabulary size {vocab_size}" if vocab_size is not None else "the vocabulary size"
        raise ValueError(f"top_k must be between 1 and {upper}, got {k}")


def _check_logits(logits) -> None:
    check_tensor("logits", logits, ndim=2, dtype="float")


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by the temperature ``τ``: ``softmax(z / τ)`` is sharper for τ < 1 and flatter for τ > 1.

    Args:
        logits: unnormalised scores.
        temperature: ``τ > 0`` (τ → 0 approaches argmax; use greedy decoding for that).

    Shapes:
        logits (..., V) -> (..., V).

    Returns:
        The scaled logits.
    """
    check_tensor("logits", logits, dtype="float")
    return logits / _check_temperature(temperature)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row and set the others to ``-inf`` (Fan et al., 2018).

    Entries tied with the k-th largest value are kept too, so a row may keep more than ``k`` entries only when
    logits are exactly equal.

    Args:
        logits: unnormalised scores.
        k: how many entries to keep, ``1 <= k <= V``.

    Shapes:
        logits (..., V) -> (..., V).

    Returns:
        A new tensor; softmax of it puts zero probability outside the top ``k``.
    """
    check_tensor("logits", logits, dtype="float")
    _check_top_k(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def _sample(probs: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    """Inverse-CDF sampling: one uniform number per row. probs (B, V) -> ids (B,)."""
    b, v = probs.shape
    gen_device = generator.device if generator is not None else probs.device
    u = torch.rand(b, 1, generator=generator, device=gen_device, dtype=torch.float64).to(probs.device)  # (B, 1)
    cdf = probs.double().cumsum(-1)  # (B, V)
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)  # first index with cdf > u·total
    # Rounding can push u·total onto the total: fall back to the last token with non-zero probability.
    last_nonzero = torch.where(probs > 0, torch.arange(v, device=probs.device), 0).amax(-1)
    return torch.minimum(idx, last_nonzero)


def sample_top_k(logits: torch.Tensor, k: Optional[int] = None, temperature: float = 1.0,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Draw one token per row from ``softmax(top_k(logits) / temperature)``.

    Args:
        logits: next-token logits.
        k: sample only among the ``k`` most likely tokens (None: the whole vocabulary).
        temperature: ``τ > 0``.
        generator: a ``torch.Generator`` for reproducible draws (any device; one number per row is drawn).

    Shapes:
        logits (B, V) -> ids (B,) long.

    Returns:
        The sampled token ids.
    """
    _check_logits(logits)
    logits = apply_temperature(logits, temperature)
    if k is not None:
        logits = top_k_filter(logits, k)
    probs = torch.softmax(logits.float(), dim=-1)
    return _sample(probs, generator)


def _check_ids(name: str, ids) -> torch.Tensor:
    check_tensor(name, ids, ndim=2, dtype="int")
    return ids.long()


@contextlib.contextmanager
def _inference(model: nn.Module):
    """Evaluation mode (no dropout) and no autograd while decoding; the model's mode is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _check_position_limit(model: nn.Module, n_positions: int, what: str) -> None:
    """A learned position table cannot go past ``cfg.max_len``: say so before decoding starts."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or getattr(cfg, "position", None) != "learned":
        return
    max_len = cfg.max_len
    if n_positions > max_len:
        raise ValueError(f"{what} needs {n_positions} positions, but the model's learned position table has "
                         f"max_len={max_len}; learned positions cannot extrapolate — generate fewer tokens, use a "
                         "shorter prompt, or use a model with sinusoidal/rotary/ALiBi/relative positions")


# ------------------------------------------------------------------------------------- decoder-only LMs
def generate(model: nn.Module, ids: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: Optional[int] = None, greedy: bool = False, use_cache: bool = True,
             eos_id: Optional[int] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Continue a prompt with a decoder-only language model, one token at a time.

    Each step takes the logits of the last position, then either the argmax (``greedy=True``) or a sample from
    ``softmax(top_k(logits) / temperature)``. With ``use_cache=True`` the prompt is fed once and then only the new
    token per step (the KV cache keeps the keys and values of earlier positions); with ``use_cache=False`` the
    whole sequence is re-run every step. Both give identical tokens. The model runs in eval mode without
    gradients; its training flag is restored afterwards.

    Args:
        model: a :class:`~transformer_lib.models.DecoderLM` (or any model with ``model(ids, cache=...)`` and
            ``new_cache()``).
        ids: the prompt, at least one token per row.
        max_new_tokens: how many tokens to append (0 returns the prompt).
        temperature: ``τ > 0`` for sampling (ignored when ``greedy``).
        top_k: sample among the ``k`` most likely tokens only (None: all).
        greedy: take the argmax instead of sampling.
        use_cache: decode with the KV cache.
        eos_id: once a row produces this id it is finished: later positions are filled with ``eos_id``, and
            generation stops early when every row has finished (the result may then be shorter).
        generator: ``torch.Generator`` for reproducible sampling.

    Shapes:
        ids (B, T0) long -> (B, T0 + n) long with ``n <= max_new_tokens`` (``n == max_new_tokens`` unless every
        row reached ``eos_id``).

    Returns:
        The prompt followed by the generated tokens.
    """
    ids = _check_ids("ids", ids)
    check_positive_int("max_new_tokens", max_new_tokens, allow_zero=True)
    vocab_size = getattr(getattr(model, "cfg", None), "vocab_size", None)
    if not greedy:
        _check_temperature(temperature)
        if top_k is not None:
            _check_top_k(top_k, vocab_size)
    if eos_id is not None:
        check_positive_int("eos_id", eos_id, allow_zero=True)
    # The last generated token is never fed back, so the model sees at most T0 + max_new_tokens - 1 positions.
    _check_position_limit(model, ids.shape[1] + max(max_new_tokens - 1, 0), "generate(ids, max_new_tokens)")
    if max_new_tokens == 0:
        return ids.clone()

    out = ids
    finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # (B,)
    with _inference(model):
        cache = model.new_cache() if use_cache else None
        step_input = ids  # with the cache: the prompt first, then one token per step
        for _ in range(max_new_tokens):
            if use_cache:
                logits = model(step_input, cache=cache)[:, -1]  # (B, V)
            else:
                logits = model(out)[:, -1]  # (B, V): re-run the whole prefix
            if greedy:
                nxt = logits.argmax(-1)  # (B,)
            else:
                nxt = sample_top_k(logits, top_k, temperature, generator)  # (B,)
            if eos_id is not None:
                nxt = nxt.masked_fill(finished, eos_id)
                finished = finished | (nxt == eos_id)
            out = torch.cat([out, nxt[:, None]], dim=1)  # (B, T + 1)
            step_input = nxt[:, None]  # (B, 1)
            if eos_id is not None and bool(finished.all()):
                break
    return out


# ------------------------------------------------------------------------------------------ seq2seq
def _prepare_seq2seq(model: nn.Module, src, src_mask, pad_id: Optional[int], max_len: int):
    for method in ("encode", "decode", "new_cache"):
        if not callable(getattr(model, method, None)):
            raise TypeError(f"model must follow the seq2seq decoding protocol (encode, decode, new_cache); "
                            f"{type(model).__name__} has no {method}()")
    src = _check_ids("src", src)
    check_positive_int("max_len", max_len)
    if src_mask is None:
        src_mask = real_tokens(src, pad_id)
    else:
        check_tensor("src_mask", src_mask, ndim=2, dtype="bool")
        if src_mask.shape != src.shape:
            raise ValueError(f"src_mask of shape {tuple(src_mask.shape)} must match src's shape {tuple(src.shape)}")
    # The decoder is fed BOS plus at most max_len - 1 generated tokens.
    _check_position_limit(model, max_len, f"decoding with max_len={max_len}")
    return src, src_mask


def _check_special(**ids) -> None:
    for name, value in ids.items():
        if value is not None:
            check_positive_int(name, value, allow_zero=True)


def _decode_last(model, tokens, memory, src_mask, cache) -> torch.Tensor:
    """Logits of the last position: feed only the newest token with a cache, the whole prefix without."""
    inp = tokens[:, -1:] if cache is not None else tokens
    return model.decode(inp, memory, src_mask=src_mask, cache=cache)[:, -1]  # (B, V)


def _check_suppress(suppress_ids) -> Tuple[int, ...]:
    """``suppress_ids`` validated: a sequence of ids >= 0 (their upper bound is checked against the logits)."""
    if isinstance(suppress_ids, (str, bytes)) or not isinstance(suppress_ids, Sequence):
        raise TypeError(f"suppress_ids must be a sequence of token ids (e.g. [pad_id]), got "
                        f"{type(suppress_ids).__name__} {suppress_ids!r}")
    for i in suppress_ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"suppress_ids must hold token ids (ints >= 0), got {list(suppress_ids)!r}")
    return tuple(suppress_ids)


def _suppress(logits: torch.Tensor, ids: Tuple[int, ...]) -> torch.Tensor:
    """``logits`` (..., V) with the entries ``ids`` of the last axis set to -inf: those tokens get probability 0 and the softmax
    spreads their share over the others."""
    if not ids:
        return logits
    if max(ids) >= logits.shape[-1]:
        raise ValueError(f"suppress_ids must be token ids below the vocabulary size {logits.shape[-1]}, got "
                         f"{list(ids)!r}")
    return logits.index_fill(-1, torch.tensor(ids, device=logits.device), float("-inf"))


def greedy_translate(model: nn.Module, src: torch.Tensor, max_len: int, bos_id: int = 1, eos_id: int = 2,
                     pad_id: int = 0, src_mask: Optional[torch.Tensor] = None, use_cache: bool = True,
                     suppress_ids: Sequence[int] = ()) -> torch.Tensor:
    """Greedy decoding for any seq2seq model: at each step append the most likely next token.

    Args:
        model: a model with ``encode``, ``decode`` and ``new_cache`` (Transformer or RNN).
        src: source ids, padded with ``pad_id``.
        max_len: most tokens to generate per row (EOS included).
        bos_id: the first decoder input.
        eos_id: a row stops after producing it.
        pad_id: fills each row after its EOS; also defines the default ``src_mask``.
        src_mask: (B, S) bool, True = real source token (default ``src != pad_id``).
        use_cache: feed one token per step through ``model.new_cache()`` instead of re-running the prefix.
        suppress_ids: token ids never generated (Hugging Face's ``bad_words_ids`` of single tokens), e.g. Marian's
            pad id, which starts its decoder and is never an output word.

    Shapes:
        src (B, S) long -> (B, L) long, ``L <= max_len``.

    Returns:
        torch.Tensor: the output tokens without BOS, ``y₁ … EOS PAD …`` per row (the layout of the labels ``tgt[:, 1:]``). A
        row that never produced EOS holds ``max_len`` tokens. ``L`` is the length of the longest row.
    """
    _check_special(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    suppress_ids = _check_suppress(suppress_ids)
    src, src_mask = _prepare_seq2seq(model, src, src_mask, pad_id, max_len)
    b = src.shape[0]
    tokens = torch.full((b, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    with _inference(model):
        memory = model.encode(src, src_mask)
        cache = model.new_cache() if use_cache else None
        for _ in range(max_len):
            nxt = _suppress(_decode_last(model, tokens, memory, src_mask, cache), suppress_ids).argmax(-1)  # (B,)
            nxt = nxt.masked_fill(finished, pad_id)
            finished = finished | (nxt == eos_id)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            if bool(finished.all()):
                break
    return tokens[:, 1:]


def beam_search(model: nn.Module, src: torch.Tensor, beam_size: int = 4, max_len: int = 64,
                length_penalty: float = 1.0, bos_id: int = 1, eos_id: int = 2, pad_id: int = 0,
                src_mask: Optional[torch.Tensor] = None, return_scores: bool = False,
                suppress_ids: Sequence[int] = ()) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Batched beam search for any seq2seq model (Sutskever et al., 2014; Wu et al., 2016).

    Every row keeps the ``K = beam_size`` most likely partial translations (by summed log-probability). At each
    step all ``K·V`` one-token extensions are scored and the best are kept; an extension that ends in EOS among
    the ``K`` best is set aside as a completed hypothesis. A row stops when it has ``K`` completed hypotheses
    before ``max_len`` tokens (after ``max_len`` tokens, its unfinished beams join the pool) -- the stopping rule of
    fairseq's sequence generator and of Hugging Face's ``generate(..., num_beams=K, early_stopping=True)``, whose
    outputs it reproduces (tests/test_interop.py); a search that went on could still find a hypothesis that scores
    better. The answer is the hypothesis with the
    best length-normalised score ``log p(y) / |y|^α`` (α = ``length_penalty``; 0 compares raw log-probabilities,
    larger values favour longer outputs). With ``beam_size=1`` this is exactly greedy decoding.

    The source is expanded to ``B·K`` rows and encoded once; the decoder cache follows the surviving beams with
    ``cache.reorder(index)``.

    Args:
        model: a model with ``encode``, ``decode`` and ``new_cache`` (the cache must have ``reorder``).
        src: source ids, padded with ``pad_id``.
        beam_size: ``K >= 1``.
        max_len: most tokens per hypothesis (EOS included).
        length_penalty: the exponent α of the length normalisation.
        bos_id, eos_id, pad_id: special ids (PAD fills each row after its EOS).
        src_mask: (B, S) bool, True = real source token (default ``src != pad_id``).
        return_scores: also return the log-probability of each returned hypothesis.
        suppress_ids: token ids never generated: their logits are set to -inf before the softmax, so the other
            tokens' probabilities are renormalised (Hugging Face's ``bad_words_ids`` of single tokens with
            ``renormalize_logits=True``); e.g. Marian's pad id, which starts its decoder and is never an output word.

    Shapes:
        src (B, S) long -> (B, L) long; scores (B,) float.

    Returns:
        The best hypothesis per row without BOS (``y₁ … EOS PAD …``, as :func:`greedy_translate`), and with
        ``return_scores`` its summed log-probability ``log p(y | x)`` (EOS included, no length normalisation).
    """
    if isinstance(beam_size, bool) or not isinstance(beam_size, int):
        raise TypeError(f"beam_size must be an int, got {type(beam_size).__name__} {beam_size!r}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, Real):
        raise TypeError(f"length_penalty must be a number, got {type(length_penalty).__name__} {length_penalty!r}")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be finite (0 = raw log-probabilities), got {length_penalty!r}")
    _check_special(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    suppress_ids = _check_suppress(suppress_ids)
    src, src_mask = _prepare_seq2seq(model, src, src_mask, pad_id, max_len)
    b, k, device = src.shape[0], beam_size, src.device
    alpha = float(length_penalty)

    def normalise(score: float, length: int) -> float:
        return score / (length ** alpha)

    # Expand the source so that row r's beams sit at r·K … r·K + K-1, then encode once.
    src_k = src.repeat_interleave(k, dim=0)  # (B·K, S)
    mask_k = src_mask.repeat_interleave(k, dim=0) if src_mask is not None else None
    tokens = torch.full((b * k, 1), bos_id, dtype=torch.long, device=device)  # (B·K, 1)
    # All beams start identical: only beam 0 may expand on the first step.
    beam_scores = torch.full((b, k), float("-inf"), device=device)  # (B, K)
    beam_scores[:, 0] = 0.0
    completed = [[] for _ in range(b)]  # per row: (normalised score, log-prob, tokens without BOS)
    done = [False] * b
    row_offset = (torch.arange(b, device=device) * k)[:, None]  # (B, 1)

    with _inference(model):
        memory = model.encode(src_k, mask_k)
        cache = model.new_cache()
        for step in range(1, max_len + 1):
            logits = _suppress(_decode_last(model, tokens, memory, mask_k, cache), suppress_ids)  # (B·K, V)
            logp = torch.log_softmax(logits.float(), dim=-1)
            v = logp.shape[-1]
            cand = (beam_scores.view(b * k, 1) + logp).view(b, k * v)  # (B, K·V)
            # 2K candidates leave at least K that do not end in EOS (each beam has one EOS extension).
            n_cand = min(2 * k, k * v)
            cand_scores, cand_idx = cand.topk(n_cand, dim=-1)  # (B, 2K)
            cand_beam, cand_tok = cand_idx // v, cand_idx % v  # (B, 2K)
            is_eos = cand_tok == eos_id

            # Completed hypotheses: EOS extensions ranked among the K best candidates of a row still searching.
            for r, j in (is_eos[:, :k] & torch.isfinite(cand_scores[:, :k])).nonzero().tolist():
                if done[r]:
                    continue
                score = float(cand_scores[r, j])
                hyp = torch.cat([tokens[r * k + int(cand_beam[r, j]), 1:], tokens.new_tensor([eos_id])])
                completed[r].append((normalise(score, step), score, hyp))
                if len(completed[r]) >= k and step < max_len:  # at max_len the unfinished beams compete too
                    done[r] = True
            if all(done):
                break

            # Survivors: the K best extensions that do not end in EOS.
            alive = cand_scores.masked_fill(is_eos, float("-inf"))
            keep_scores, keep = alive.topk(k, dim=-1)  # (B, K) positions within the 2K candidates
            beam_scores = keep_scores
            src_rows = (row_offset + cand_beam.gather(1, keep)).view(-1)  # (B·K,) rows to continue from
            new_tok = cand_tok.gather(1, keep).view(-1, 1)  # (B·K, 1)
            tokens = torch.cat([tokens.index_select(0, src_rows), new_tok], dim=1)  # (B·K, step + 1)
            cache.reorder(src_rows)

        # Rows that ran out of length: their unfinished beams compete with the completed ones.
        for r in range(b):
            if done[r]:
                continue
            for j in range(k):
                score = float(beam_scores[r, j])
                if math.isfinite(score):
                    hyp = tokens[r * k + j, 1:]
                    completed[r].append((normalise(score, hyp.numel()), score, hyp))

    best = [max(c, key=lambda h: h[0]) for c in completed]
    length = max(h[2].numel() for h in best)
    out = torch.full((b, length), pad_id, dtype=torch.long, device=device)  # (B, L)
    for r, (_, _, hyp) in enumerate(best):
        out[r, : hyp.numel()] = hyp
    if return_scores:
        return out, torch.tensor([h[1] for h in best], device=device)
    return out


def sequence_logprob(model: nn.Module, src: torch.Tensor, hyp: torch.Tensor, bos_id: int = 1, eos_id: int = 2,
                     pad_id: int = 0, src_mask: Optional[torch.Tensor] = None,
                     suppress_ids: Sequence[int] = ()) -> torch.Tensor:
    """Log-probability ``log p(y | x) = Σ_t log p(y_t | y_<t, x)`` of given outputs under a seq2seq model.

    Tokens up to and including each row's first EOS count (the whole row if it has no EOS), so the outputs of
    :func:`greedy_translate` and :func:`beam_search` can be scored directly.

    Args:
        model: a model with ``encode`` and ``decode``.
        src: source ids.
        hyp: output ids without BOS (``y₁ … EOS PAD …``).
        bos_id, eos_id, pad_id: special ids.
        src_mask: (B, S) bool, True = real source token (default ``src != pad_id``).
        suppress_ids: score under the distribution a decoder with these ``suppress_ids`` draws from (the
            others renormalised), as :func:`beam_search` reports its scores.

    Shapes:
        src (B, S), hyp (B, L) -> (B,) float.

    Returns:
        The summed log-probability of each row.
    """
    _check_special(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    suppress_ids = _check_suppress(suppress_ids)
    hyp = _check_ids("hyp", hyp)
    src, src_mask = _prepare_seq2seq(model, src, src_mask, pad_id, hyp.shape[1])
    if hyp.shape[0] != src.shape[0]:
        raise ValueError(f"hyp has {hyp.shape[0]} rows but src has {src.shape[0]}")
    bos = torch.full_like(hyp[:, :1], bos_id)
    tgt_in = torch.cat([bos, hyp[:, :-1]], dim=1)  # (B, L): teacher forcing
    # Count positions up to the first EOS: EOS seen strictly before position t means t is padding.
    after_eos = (hyp == eos_id).long().cumsum(1) - (hyp == eos_id).long() > 0  # (B, L)
    with _inference(model):
        memory = model.encode(src, src_mask)
        logits = _suppress(model.decode(tgt_in, memory, src_mask=src_mask), suppress_ids)  # (B, L, V)
        logp = torch.log_softmax(logits.float(), dim=-1)
    token_logp = logp.gather(-1, hyp[..., None]).squeeze(-1)  # (B, L)
    return token_logp.masked_fill(after_eos, 0.0).sum(1)
