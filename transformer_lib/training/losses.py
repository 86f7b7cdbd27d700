"""The losses every chapter trains with: next-token (language model), teacher-forced translation, classification.

Each takes ``(model, batch)`` and returns what :func:`~transformer_lib.training.loop.fit` expects: a scalar loss, or
``(loss, n_tokens)`` when the loss is a mean over tokens. Padding (the book's pad id 0) and the ignore index are
skipped. ``transformer_lib.training`` re-exports them (``tl.training.lm_loss`` works).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_tensor, deferring
from ..data import IGNORE_INDEX, PAD_ID

__all__ = ["lm_loss", "seq2seq_loss", "classification_loss"]

Batch = Sequence[torch.Tensor]


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int):
    """Token-mean cross-entropy of logits (..., V) against labels (...), and the count of counted tokens."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=ignore_index)
    n_tokens = (labels != ignore_index).sum()
    # Inside fit's deferred checks the count stays on the device and is read with the loss, every few steps.
    return loss, (n_tokens if deferring() else int(n_tokens))


def _unpack(batch, names: str) -> tuple:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        got = f"a {type(batch).__name__} of length {len(batch)}" if isinstance(batch, (tuple, list)) else type(batch).__name__
        raise ValueError(f"batch must be a pair ({names}), got {got}")
    return tuple(batch)


def lm_loss(model: nn.Module, batch: Batch):
    """Next-token cross-entropy of a language model; labels equal to -100 are ignored.

    Args:
        model: ``ids (B, T) -> logits (B, T, V)``.
        batch: ``(x, y)``, inputs and labels shifted by one.

    Shapes:
        x, y: (B, T) long.

    Returns:
        ``(loss, n_tokens)``: the mean over counted tokens and their number.
    """
    x, y = _unpack(batch, "x, y")
    check_tensor("y", y, ndim=2, dtype="int")
    logits = model(x)  # (B, T, V)
    check_tensor("logits", logits, ndim=3)
    if logits.shape[:2] != y.shape:
        raise ValueError(f"model(x) must return logits of shape (B, T, V) = {tuple(y.shape)} + (V,), got {tuple(logits.shape)}")
    return _cross_entropy(logits, y, IGNORE_INDEX)


def seq2seq_loss(model: nn.Module, batch: Batch):
    """Teacher-forced cross-entropy of an encoder-decoder; PAD (0) labels are ignored.

    Args:
        model: ``(src (B, S), tgt_in (B, T), src_mask=(B, S) bool) -> logits (B, T, V)``.
        batch: ``(src, tgt)`` with ``tgt = BOS y EOS PAD...``: input ``tgt[:, :-1]``, labels ``tgt[:, 1:]``.

    Shapes:
        src: (B, S) long; tgt: (B, T + 1) long.

    Returns:
        ``(loss, n_tokens)``.
    """
    src, tgt = _unpack(batch, "src, tgt")
    check_tensor("src", src, ndim=2, dtype="int")
    check_tensor("tgt", tgt, ndim=2, dtype="int")
    if tgt.shape[1] < 2:
        raise ValueError(f"tgt must have at least 2 positions (BOS and one label), got shape {tuple(tgt.shape)}")
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]  # (B, T) each
    logits = model(src, tgt_in, src_mask=src != PAD_ID)  # (B, T, V)
    check_tensor("logits", logits, ndim=3)
    if logits.shape[:2] != labels.shape:
        raise ValueError(f"model must return logits of shape {tuple(labels.shape)} + (V,), got {tuple(logits.shape)}")
    return _cross_entropy(logits, labels, PAD_ID)


def classification_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Cross-entropy of a classifier: ``model(x)`` gives logits (B, C) for labels y (B,) (or (..., C) for (...)).

    Returns:
        The mean loss over examples (a scalar tensor).
    """
    x, y = _unpack(batch, "x, y")
    check_tensor("y", y, dtype="int")
    logits = model(x)  # (B, C)
    if logits.shape[:-1] != y.shape:
        raise ValueError(f"model(x) must return logits of shape {tuple(y.shape)} + (C,), got {tuple(logits.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
