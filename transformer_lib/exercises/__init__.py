"""Self-checking exercises: ``available()`` lists them, ``check(exercise_id, solution)`` checks one.

``check`` runs the student's function on stored cases (shapes, masks, dtypes, edge cases) and compares its outputs
with the stored expected outputs. When an answer is wrong it compares it with the outputs of known mistakes (missing
``1/√d_k``, softmax over the wrong axis, mask inverted or applied after the softmax, ε outside the square root,
heads merged in the wrong order, causal mask off by one, …) and names the one it matches; otherwise it shows the
first mismatching case. It never raises: a wrong signature, a wrong shape, NaNs or an exception inside the solution
are reported plainly. A function that calls the library's own answer to the exercise (``tl.causal_mask`` for the
causal mask, …) gets no credit, and the message says why.

This is the students' self-check. Grades come from the grader (``booktools/grade.py``), which runs the submitted
notebook in a separate process on cases drawn from a seed the students do not see and compares in its own
process; the reference solutions are not part of this library. The package's modules:
:mod:`~transformer_lib.exercises.catalogue` (each exercise's contract, hints and forbidden library calls),
:mod:`~transformer_lib.exercises.engine` (comparing outputs, explaining a failure) and
:mod:`~transformer_lib.exercises.guard` (refusing code that calls the library's own answer).

Example::

    from transformer_lib import exercises
    exercises.available()                      # {'04-self-attention': 'Scaled dot-product self-attention…', …}
    exercises.check("06-causal-mask", my_causal_mask)   # prints ✓ … or ✗ … once
    exercises.check("06-causal-mask", my_causal_mask, verbose=False).passed   # True / False
"""
from __future__ import annotations

import textwrap
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import torch

from . import engine, guard
from .catalogue import EXERCISES, Exercise
from .engine import CheckResult

__all__ = ["CheckResult", "Exercise", "available", "check", "starter_code", "describe", "EXERCISES"]

# Where the stored cases and expected outputs of the self-check live (written by the grader's
# ``booktools/exercise_references.py --write-selfcheck``).
SELFCHECK_DATA = Path(__file__).resolve().parent / "data" / "selfcheck.pt"
_DATA: Optional[Dict[str, Any]] = None


def available(chapter: Optional[int] = None) -> Dict[str, str]:
    """Exercise ids with one-line descriptions (all of them, or one chapter's)."""
    return {k: e.description for k, e in EXERCISES.items() if chapter is None or k.startswith(f"{chapter:02d}-")}


class Description(str):
    """Text that shows as itself: as the last expression of a notebook cell it displays its lines, not a quoted
    string with ``\\n`` escapes; it is a ``str`` for everything else."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


def describe(exercise_id: str) -> str:
    """The signature and contract of an exercise, and the functions whose use gets no credit, as text that shows as such: ``tl.exercises.describe(id)`` at the
    end of a notebook cell displays the signature and the contract line by line (``print`` it anywhere else).

    Raises:
        KeyError: naming the unknown id and the valid ones.
    """
    ex = _get(exercise_id)
    text = f"{ex.signature}\n{textwrap.indent(ex.contract, '    ')}"
    banned = [guard.display_name(q) for q in ex.forbidden if not q.rsplit(".", 1)[-1].startswith("_")]
    banned += [q for q, _ in ex.forbidden_torch]
    if banned:
        text += "\nNo credit for calling: " + ", ".join(f"`{name}`" for name in dict.fromkeys(banned)) + \
            " (the library's or torch's own version of this exercise)."
    return Description(text)


def starter_code(exercise_id: str) -> str:
    """Source of the starter cell: the signature, the contract as docstring, ``raise NotImplementedError``."""
    ex = _get(exercise_id)
    doc = textwrap.indent(ex.contract, "    ")
    return f'{ex.signature}\n    """{doc.strip()}\n    """\n    raise NotImplementedError("Exercise {ex.id}: write your solution here")\n'


def _get(exercise_id: str) -> Exercise:
    if exercise_id not in EXERCISES:
        raise KeyError(f"unknown exercise id {exercise_id!r}; valid ids: {', '.join(EXERCISES)}")
    return EXERCISES[exercise_id]


def _selfcheck_data() -> Dict[str, Any]:
    global _DATA
    if _DATA is None:
        _DATA = torch.load(SELFCHECK_DATA, weights_only=True)
    return _DATA


def check(exercise_id: str, solution: Callable, seed: int = 0, verbose: bool = True) -> CheckResult:
    """Check ``solution`` for ``exercise_id``; print the verdict once and return it. Never raises.

    Args:
        exercise_id: an id from :func:`available`.
        solution: the student's function (see :func:`describe` for its contract).
        seed: kept for compatibility; the self-check has one stored set of cases (seed 0).
        verbose: print the message.

    Returns:
        a :class:`~transformer_lib.exercises.engine.CheckResult` (truthy when passed). It shows nothing as a notebook cell's value, so the message
        appears once.
    """
    result = _check(exercise_id, solution, seed)
    if verbose:
        print(result.message)
    return result


def _check(exercise_id: str, solution: Callable, seed: int) -> CheckResult:
    if exercise_id not in EXERCISES:
        return CheckResult(str(exercise_id), False,
                           f"✗ Unknown exercise id {exercise_id!r}. Valid ids:\n"
                           + "\n".join(f"  {k}: {d}" for k, d in available().items()))
    ex = EXERCISES[exercise_id]
    if not callable(solution):
        return CheckResult(ex.id, False, f"✗ {ex.id}: expected a function, got {type(solution).__name__}.")
    if seed not in (0, None):
        return CheckResult(ex.id, False, f"✗ {ex.id}: the self-check has one stored set of cases; call "
                                         "check(exercise_id, solution) without a seed.")
    params = engine.params_of(solution)
    shown = f"{getattr(solution, '__name__', 'function')}({', '.join(n for n, _ in params or [])})"
    problem = engine.signature_problem(ex, params, shown)
    if problem:
        return CheckResult(ex.id, False, problem)
    try:
        data = _selfcheck_data()["exercises"][ex.id]
    except (OSError, KeyError, RuntimeError) as exc:
        return CheckResult(ex.id, False, f"✗ {ex.id}: the stored cases of the self-check cannot be read "
                                         f"({type(exc).__name__}); reinstall transformer_lib.")
    findings = guard.function_findings(ex, solution)
    calls: list = []
    outcomes = []
    restore = guard.install_tripwires(engine.guarded_names(ex), calls.append)
    try:
        for case in data["cases"]:
            inputs = engine.clone_inputs(engine.decode_case(case))
            try:
                value = solution(**inputs)
            except NotImplementedError:
                outcomes.append({"status": "not_implemented"})
                break
            except guard.ForbiddenCall:
                outcomes.append({"status": "error", "error": "a call of a forbidden function"})
                break
            except Exception as err:  # noqa: BLE001 - any error in student code is reported, never raised
                outcomes.append({"status": "error",
                                 "error": traceback.format_exception_only(type(err), err)[-1].strip()})
                break
            outcomes.append({"status": "ok", "value": engine.portable(value)})
    finally:
        restore()
    findings += [engine.call_finding(ex, name) for name in dict.fromkeys(calls)]
    if findings:
        return engine.no_credit(ex, findings)
    return engine.judge(ex, data["cases"], data["expected"], outcomes, data["mistakes"])
