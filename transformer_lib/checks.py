"""Input validation shared by every public entry point of the library.

Each helper raises ``TypeError`` or ``ValueError`` with a message that names the argument, says what was received
and what was expected, so that a reader never meets a cryptic index error from deep inside PyTorch.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import threading
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

_DTYPE_KINDS = ("float", "int", "bool")


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype} on {x.device}"
    return f"{type(x).__name__} {x!r}"


def _check_rank(name: str, shape: Tuple[int, ...], ndim: Union[int, Iterable[int], None]) -> None:
    if ndim is None:
        return
    accepted = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if len(shape) not in accepted:
        want = " or ".join(str(a) for a in accepted)
        raise ValueError(f"{name} must have {want} dimensions, got {len(shape)} (shape {shape})")


def _check_not_empty(name: str, shape: Tuple[int, ...]) -> None:
    if 0 in shape:
        raise ValueError(f"{name} is empty (shape {shape}); expected at least one element in every dimension")


def check_tensor(
    name: str,
    x,
    ndim: Union[int, Iterable[int], None] = None,
    dtype: Union[str, torch.dtype, None] = None,
    last_dim: Optional[int] = None,
    allow_empty: bool = False,
) -> torch.Tensor:
    """Check that ``x`` is a tensor of the expected rank, dtype kind and feature size.

    Args:
        name: the argument's name, used in the error message.
        x: the value received.
        ndim: the expected rank, or a collection of accepted ranks.
        dtype: ``'float'``, ``'int'``, ``'bool'`` or an exact ``torch.dtype``.
        last_dim: the expected size of the last dimension.
        allow_empty: accept a tensor with a zero-sized dimension (an empty batch or sequence).

    Returns:
        ``x`` unchanged.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {_describe(x)}")
    _check_rank(name, tuple(x.shape), ndim)
    if dtype is not None:
        if isinstance(dtype, torch.dtype):
            ok = x.dtype == dtype
        elif dtype == "float":
            ok = x.is_floating_point()
        elif dtype == "int":
            ok = not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool
        elif dtype == "bool":
            ok = x.dtype == torch.bool
        else:  # pragma: no cover - programming error inside the library
            raise ValueError(f"dtype kind must be one of {_DTYPE_KINDS}, got {dtype!r}")
        if not ok:
            raise TypeError(f"{name} must have a {dtype} dtype, got {x.dtype}")
    if last_dim is not None and (x.dim() == 0 or x.shape[-1] != last_dim):
        got = x.shape[-1] if x.dim() else "a scalar"
        raise ValueError(f"{name} must have last dimension {last_dim}, got {got} (shape {tuple(x.shape)})")
    if not allow_empty:
        _check_not_empty(name, tuple(x.shape))
    return x


def as_numpy(name: str, x, ndim: Union[int, Iterable[int], None] = None) -> np.ndarray:
    """Numbers to draw or compute with on the host, as a NumPy array, from whatever a reader holds.

    A tensor (any device, with or without gradients) is read as float32, or as bool for a mask; a NumPy array is
    taken as it is; a (nested) sequence of numbers goes through ``np.asarray``.

    Args:
        name: the argument's name, used in the error message.
        x: the value received.
        ndim: the expected rank, or a collection of accepted ranks.

    Returns:
        the array (``x`` itself for a NumPy array), of real numbers or bools, of an accepted rank, not empty.
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        arr = x.numpy() if x.dtype == torch.bool else x.float().numpy()
    elif isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception:  # ragged lists and the like
            arr = None
        if arr is None or arr.dtype == object:
            raise TypeError(f"{name} must be a torch.Tensor, a numpy array or a (nested) sequence of numbers, got "
                            f"{type(x).__name__} that numpy cannot turn into an array of numbers")
    if arr.dtype != bool and not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    _check_rank(name, arr.shape, ndim)
    _check_not_empty(name, arr.shape)
    return arr


def as_tensor(name: str, x, ndim: Union[int, Iterable[int], None] = None) -> torch.Tensor:
    """Real numbers to compute with exactly, as a float64 CPU tensor (detached), from a tensor, a NumPy array or a
    (nested) sequence of numbers (read as by :func:`as_numpy`, without its float32 step for a tensor).

    Args:
        name: the argument's name, used in the error message.
        x: the value received.
        ndim: the expected rank, or a collection of accepted ranks.

    Returns:
        the float64 tensor, of an accepted rank and not empty (a bool or complex input is refused).
    """
    if isinstance(x, torch.Tensor):
        check_tensor(name, x, ndim=ndim)
    else:
        x = torch.from_numpy(as_numpy(name, x, ndim))
    if x.dtype == torch.bool or x.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    return x.detach().to("cpu", torch.float64)


def check_labels(name: str, labels, expected: Union[int, Tuple[int, int], None] = None, what: str = "the data",
                 noun: str = "labels") -> Optional[List[str]]:
    """Labels of the entries along one axis (tokens, words, panel titles), as a list of strings; None stays None.

    Args:
        name: the argument's name, used in the error message.
        labels: a sequence, a NumPy array or a 1-D tensor of labels (a string is refused: it would be read letter
            by letter).
        expected: how many labels the axis needs: an int, a ``(lo, hi)`` range, or None for at least one.
        what: what has ``expected`` entries, for the message (``'the key axis of weights'``).
        noun: what the labels are, for the message (``'tokens'``, ``'words'``).

    Returns:
        ``[str(label) for label in labels]``, or None.
    """
    if labels is None:
        return None
    if isinstance(labels, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of {noun}, got the string {labels!r} (use .split())")
    if isinstance(labels, (np.ndarray, torch.Tensor)) and labels.ndim == 1:
        labels = labels.tolist()
    elif not isinstance(labels, Sequence):
        raise TypeError(f"{name} must be a sequence of {noun}, got {_describe(labels)}")
    labels = [str(label) for label in labels]
    n = len(labels)
    if expected is None:
        if not n:
            raise ValueError(f"{name} has no {noun}; expected at least one")
    elif isinstance(expected, tuple):
        lo, hi = expected
        if not lo <= n <= hi:
            raise ValueError(f"{name} must hold between {lo} and {hi} {noun}, got {n}")
    elif n != expected:
        raise ValueError(f"{name} has {n} {noun} but {what} has {expected}")
    return labels


def check_same_device(**tensors) -> None:
    """Check that every tensor given (``None`` entries are ignored) lives on one device."""
    seen = {k: v.device for k, v in tensors.items() if isinstance(v, torch.Tensor)}
    if len(set(seen.values())) > 1:
        where = ", ".join(f"{k} on {d}" for k, d in seen.items())
        raise ValueError(f"tensors must be on the same device, got {where}")


def check_choice(name: str, value, choices) -> None:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(map(str, choices))}, got {value!r}")


def check_positive_int(name: str, value, allow_zero: bool = False) -> None:
    """Check that ``value`` is a (non-bool) positive integer, or non-negative with ``allow_zero``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        want = "a non-negative int" if allow_zero else "a positive int"
        raise ValueError(f"{name} must be {want}, got {value}")


def check_finite_above(name: str, value, low: float) -> None:
    """Check that ``value`` is a (non-bool) finite int or float strictly greater than ``low``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= low:
        raise ValueError(f"{name} must be a finite number > {low:g}, got {value!r}")


def check_number(name: str, value, low: float = 0.0, strict: bool = False) -> float:
    """A real number, finite and ``>= low`` (``> low`` with ``strict``), returned as a float. A bool is refused; a
    NumPy scalar or a one-element tensor is read as its number."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    f = float(value)
    if not math.isfinite(f) or f < low or (strict and f == low):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '≥'} {low:g}, got {value!r}")
    return f


def check_int_range(name: str, value, low: int, high: int, why: str = "") -> int:
    """An int (NumPy's too, not a bool) in ``[low, high]``, returned as an int; ``why`` says in the error message
    what sets the bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}]{why}, got {value}")
    return int(value)


def check_index(name: str, value, size: int, what: str) -> int:
    """An index into ``size`` items (``what``: the items, for the message): an int in ``[0, size - 1]``."""
    return check_int_range(name, value, 0, size - 1, f" ({size} {what})")


def check_dropout(value, name: str = "dropout") -> float:
    """A dropout probability: a number (not a bool) in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}")
    return float(value)


def check_seed(seed) -> None:
    """Check that a random seed is a (non-bool) int."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")


_DEFERRED = threading.local()


@contextlib.contextmanager
def deferred_checks() -> Iterator[List[Tuple[str, int, torch.Tensor]]]:
    """Within this context, value checks that would read a tensor back to the host queue it instead.

    On a GPU every such read waits for the device to finish its queued work. The training loop
    (:func:`~transformer_lib.training.loop.fit`) therefore runs its steps inside this context and reads the queued
    checks together with the losses, once every few steps (:func:`raise_deferred`); outside it (the default)
    every check reads its values at once and raises on the spot.

    Yields:
        the queue: ``(name, vocab_size, tensor([min, max]))`` per :func:`check_ids` call.
    """
    previous = getattr(_DEFERRED, "queue", None)
    _DEFERRED.queue = []
    try:
        yield _DEFERRED.queue
    finally:
        _DEFERRED.queue = previous


def deferring() -> bool:
    """Whether value checks are being queued (inside :func:`deferred_checks`)."""
    return getattr(_DEFERRED, "queue", None) is not None


def raise_deferred(name: str, vocab_size: int, lo: int, hi: int) -> None:
    """Raise the error :func:`check_ids` would have raised, from the values read back later."""
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} contains token id {bad}, outside the vocabulary [0, {vocab_size - 1}]")


def check_ids(name: str, ids, vocab_size: int) -> torch.Tensor:
    """Check a (B, T) tensor of token ids against the vocabulary size.

    Inside :func:`deferred_checks` the range is queued as a device tensor (no host read) and checked later.
    """
    check_tensor(name, ids, ndim=2, dtype="int")
    if torch.compiler.is_compiling():
        # Reading the values back is data-dependent (a graph break under torch.compile); the check runs in eager
        # mode, where a compiled model's inputs can be checked before calling it.
        return ids
    queue = getattr(_DEFERRED, "queue", None)
    if queue is not None:
        if ids.numel():
            queue.append((name, vocab_size, torch.stack([ids.min(), ids.max()])))
        return ids
    if not ids.numel():
        return ids
    lo, hi = torch.stack([ids.min(), ids.max()]).tolist()     # one read for both ends
    raise_deferred(name, vocab_size, lo, hi)
    return ids
