"""Runs of a training function: a learning-rate search (:func:`tune_lr`) and independent runs side by side on the
cores of a CPU (:func:`map_runs`)."""
from __future__ import annotations

import math
import os
import random
import sys
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch

from ..checks import check_finite_above, check_positive_int


# ------------------------------------------------------------------------------------- learning-rate search
def tune_lr(train: Callable[[float], dict], lr_start: float, factor: float = 10 ** 0.5,
            max_runs: int = 6) -> tuple:
    """Search a geometric grid of peak learning rates until the best one has a worse rate on each side.

    The rates are ``lr_start * factor**k``. The search trains ``k = 0`` and ``k = 1``, then walks from the better of
    the two towards lower loss (down the grid if ``k = 0`` was at least as good, up otherwise) and stops at the
    first rate that is not better, or after ``max_runs`` runs. A rate at which training diverges (``train`` raises
    ``FloatingPointError``, as :func:`~transformer_lib.training.loop.fit` does on a non-finite loss or gradient)
    counts as worse than any other.

    Args:
        train: ``train(lr)`` trains one model at peak rate ``lr`` and returns a dict with its final ``"loss"``
            (lower is better); the dict is kept, so it may hold anything else of the run.
        lr_start: the first rate tried (> 0).
        factor: the ratio of neighbouring rates (> 1).
        max_runs: the most runs the search may make (>= 2).

    Returns:
        ``(best_lr, runs, inside)``: the chosen rate; every run's dict by its rate, in increasing order of rate;
        and whether the chosen rate has a tried rate on each side (``False``: it lies at an end of the rates tried,
        and a rate beyond them might do better still).
    """
    if not callable(train):
        raise TypeError(f"train must be a function of the learning rate, got {type(train).__name__} {train!r}")
    check_finite_above("lr_start", lr_start, 0.0)
    check_finite_above("factor", factor, 1.0)
    check_positive_int("max_runs", max_runs)
    if max_runs < 2:
        raise ValueError(f"max_runs must be at least 2 (the search compares two rates first), got {max_runs}")
    runs = {}

    def loss(k):
        if k not in runs:
            try:
                run = train(lr_start * factor ** k)
            except FloatingPointError:
                run = {"loss": math.inf}
            if not isinstance(run, dict) or "loss" not in run:
                raise TypeError(f"train must return a dict with a 'loss', got {type(run).__name__} {run!r}")
            runs[k] = run
        return runs[k]["loss"]

    best = 0 if loss(0) <= loss(1) else 1
    direction = -1 if best == 0 else 1
    while len(runs) < max_runs and loss(best + direction) < loss(best):
        best += direction
    inside = best - 1 in runs and best + 1 in runs
    return lr_start * factor ** best, {lr_start * factor ** k: runs[k] for k in sorted(runs)}, inside


# ------------------------------------------------------------------------------- independent runs, side by side
_RUNS_FN: Optional[Callable] = None      # what map_runs' workers call: set before they are forked, never pickled
_RUNS_ITEMS: Sequence = ()


def _random_state() -> tuple:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _set_random_state(state: tuple) -> None:
    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])


def _run_one(index: int) -> bytes:
    """One call of map_runs in a worker: its result (or exception), random state and printed text, pickled."""
    import io
    import pickle
    import traceback

    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err      # the caller prints this text, in the order of the items
    try:
        result = _RUNS_FN(_RUNS_ITEMS[index])
        return pickle.dumps((True, result, _random_state(), out.getvalue(), err.getvalue()))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller, who raises it
        text = traceback.format_exc()
        try:
            return pickle.dumps((False, exc, text, out.getvalue(), err.getvalue()))
        except Exception:  # an exception that cannot be pickled goes back as its text
            return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}"), text, out.getvalue(),
                                 err.getvalue()))


def _silence_worker() -> None:
    """A forked worker writes nothing to the streams it inherited (a notebook kernel's belong to the kernel)."""
    import io

    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()


def map_runs_processes(n_items: int, processes: Optional[int] = None) -> int:
    """How many worker processes :func:`map_runs` uses for ``n_items`` calls (1: the calls run in this process).

    Args:
        n_items: the number of calls.
        processes: as for :func:`map_runs`.
    """
    check_positive_int("n_items", n_items, allow_zero=True)
    if processes is not None:
        check_positive_int("processes", processes)
    else:
        raw = os.environ.get("BOOK_PROCESSES", "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"BOOK_PROCESSES must be a positive integer, got {raw!r}")
            processes = int(raw)
        else:
            processes = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    import multiprocessing

    if (not sys.platform.startswith("linux")            # fork is the start method that needs no pickled function
            or torch.cuda.is_available()                # a GPU trains one run at a time; a forked child cannot use it
            or multiprocessing.current_process().daemon):  # already inside a worker
        return 1
    return max(1, min(processes, n_items))


def map_runs(fn: Callable, items: Iterable, *, processes: Optional[int] = None) -> list:
    """``[fn(item) for item in items]``, the calls spread over worker processes when the CPU has several cores.

    Made for independent training runs (seeds, model variants, learning rates). The chapters run PyTorch on one
    thread, which keeps their numbers reproducible, so on a CPU with two cores one core would idle: here each
    run gets a core of its own. The workers are forked from this process, so ``fn`` may be defined in a notebook,
    be a closure or a lambda, and read any variable that exists when ``map_runs`` is called.

    The results equal the loop's, bit for bit, when every call seeds its own randomness (``set_seed``,
    ``fit(seed=...)``) and passes everything it produces through its return value: a change that a call makes
    to a variable of the caller stays in its worker. Afterwards the random state of Python, NumPy and PyTorch is
    the one the last call left, as after the loop. What a call prints is printed here once it returns, in the
    order of ``items``. An exception in a call is raised here with the worker's traceback attached as a note.

    The calls run one after another, in this process, when ``processes`` is 1 or there is one item; where fork
    is not the safe way to start a process (only Linux is trusted); when a GPU is present (it runs one model at
    a time; a forked process cannot use CUDA); and inside a worker of another ``map_runs``.

    Args:
        fn: called as ``fn(item)``; its result must be picklable (tensors, modules of importable or notebook
            classes, numbers, containers, ``History``).
        items: the arguments, one per call.
        processes: the most worker processes (a positive int); None: the environment variable
            ``BOOK_PROCESSES`` if set, else the CPU cores this process may use.

    Returns:
        The list of results, in the order of ``items``.
    """
    global _RUNS_FN, _RUNS_ITEMS
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__} {fn!r}")
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(f"items must be an iterable of arguments for fn (a list, a tuple, a range ...), "
                        f"got {type(items).__name__} {items!r}")
    items = list(items)
    n_processes = map_runs_processes(len(items), processes)
    if n_processes == 1:
        return [fn(item) for item in items]

    import multiprocessing
    import pickle
    import warnings

    results, state = [], None
    _RUNS_FN, _RUNS_ITEMS = fn, items
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns when a process with threads (a notebook kernel's) forks; the workers touch none
            # of those threads' objects: they write to their own streams and return through a pipe.
            warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)
            pool = multiprocessing.get_context("fork").Pool(n_processes, initializer=_silence_worker)
        with pool:
            for payload in pool.imap(_run_one, range(len(items)), chunksize=1):
                ok, value, extra, out, err = pickle.loads(payload)
                sys.stdout.write(out)
                sys.stderr.write(err)
                if not ok:
                    if hasattr(value, "add_note"):
                        value.add_note(f"raised in a worker process of map_runs:\n{extra}")
                    raise value
                results.append(value)
                state = extra
    finally:
        _RUNS_FN, _RUNS_ITEMS = None, ()
    _set_random_state(state)
    return results
