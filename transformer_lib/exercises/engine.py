"""The checking engine of the exercises: compare outputs, explain a failure, refuse answers the library gives.

Shared by the notebook self-check (:func:`transformer_lib.exercises.check`, in the student's kernel) and by the
grader (``booktools/grade.py``), which runs the student's code in a separate process and compares its outputs with
expected outputs computed in its own process. Nothing here knows a solution: expected outputs and the outputs of
the known mistakes come from outside (the stored self-check data, or the grader's references).

- :func:`mismatch` compares one result with the expected one; :func:`judge` turns the outcomes of the cases into
  the verdict's message (the recognised mistake, the first failing case, an exception, "not implemented yet").
- :mod:`transformer_lib.exercises.guard` (:func:`~transformer_lib.exercises.guard.static_findings`,
  :func:`~transformer_lib.exercises.guard.install_tripwires`) refuses code that calls the library's own answer to
  the exercise.
- :func:`portable` turns whatever a student's function returned into plain tensors, numbers, strings, tuples and
  lists that ``torch.load(..., weights_only=True)`` reads back safely.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .guard import torch_finding, torch_reason

__all__ = ["CheckResult", "mismatch", "short", "signature_problem", "portable", "encode_case", "decode_case", "judge",
           "NOT_IMPLEMENTED"]

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class CheckResult:
    """The verdict of a check: ``passed``, a readable ``message`` and the number of cases passed."""

    exercise_id: str
    passed: bool
    message: str
    cases: int = 0

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        # Not the message: check() has printed it already, and a console would show it twice.
        verdict = "passed" if self.passed else "failed"
        return f"<CheckResult {self.exercise_id}: {verdict}, {self.cases} case(s) passed>"

    def _ipython_display_(self) -> None:
        """Show nothing as a cell's value: ``check`` has printed the message once already."""



# ----------------------------------------------------------------------------------------------------------------
# Values: comparison, display, safe transport
# ----------------------------------------------------------------------------------------------------------------
def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _type_name(x) -> str:
    if isinstance(x, dict) and "__type__" in x:  # a value the student process could not send as it was
        return str(x["__type__"])
    return type(x).__name__


def mismatch(expected, got, atol: float, rtol: float, exact_dtype: bool = False) -> Optional[str]:
    """None if ``got`` equals ``expected`` (tensors within tolerance, other values exactly), else why not."""
    exp_t, got_t = _as_tuple(expected), _as_tuple(got)
    if len(exp_t) != len(got_t):
        return f"expected {len(exp_t)} returned value(s), got {len(got_t)}"
    for i, (e, g) in enumerate(zip(exp_t, got_t)):
        where = f"returned value {i}: " if len(exp_t) > 1 else ""
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return f"{where}expected a torch.Tensor, got {_type_name(g)}"
            if tuple(g.shape) != tuple(e.shape):
                return f"{where}expected shape {tuple(e.shape)}, got {tuple(g.shape)}"
            if e.dtype == torch.bool:
                if g.dtype != torch.bool:
                    return f"{where}expected a bool tensor, got dtype {g.dtype}"
                if not torch.equal(e, g):
                    return f"{where}{int((e != g).sum())} of {e.numel()} entries differ"
                continue
            if exact_dtype and g.dtype != e.dtype:
                return f"{where}expected dtype {e.dtype}, got {g.dtype}"
            if not (g.is_floating_point() or g.dtype in (torch.int64, torch.int32, torch.int16, torch.int8,
                                                          torch.uint8)) and e.is_floating_point():
                return f"{where}expected a floating-point tensor, got dtype {g.dtype}"
            if e.dtype in (torch.int64, torch.int32) and g.is_floating_point():
                return f"{where}expected an integer tensor, got dtype {g.dtype}"
            if g.is_floating_point() and torch.isnan(g).any() and not torch.isnan(e).any():
                return f"{where}the result contains NaN"
            g_cmp = g.to(e.dtype) if not e.is_floating_point() else g.to(torch.float64)
            e_cmp = e if not e.is_floating_point() else e.to(torch.float64)
            if e.is_floating_point():
                close = torch.isclose(g_cmp, e_cmp, atol=atol, rtol=rtol, equal_nan=True)
                if not bool(close.all()):
                    err = (g_cmp - e_cmp).abs().nan_to_num(float("inf")).max().item()
                    return f"{where}values differ (max abs difference {err:.3g})"
            elif not torch.equal(g_cmp, e_cmp):
                return f"{where}{int((g_cmp != e_cmp).sum())} of {e.numel()} entries differ"
        elif isinstance(e, bool):
            if not isinstance(g, bool) or g != e:
                return f"{where}expected {e!r}, got {g!r}"
        elif isinstance(e, (int, float)):
            if isinstance(g, torch.Tensor) and g.numel() == 1:
                g = g.item()
            if not isinstance(g, (int, float)) or isinstance(g, bool):
                return f"{where}expected a number, got {_type_name(g)}"
            if isinstance(e, int):  # counts are exact
                if not (isinstance(g, int) or (math.isfinite(g) and float(g).is_integer())) or int(g) != e:
                    return f"{where}expected {e}, got {g!r}"
            elif not math.isclose(float(g), e, rel_tol=rtol, abs_tol=atol):
                return f"{where}expected {e:.6g}, got {float(g):.6g}"
        elif e != g:
            return f"{where}expected {e!r}, got {g!r}"
    return None


def short(value, limit: int = 400) -> str:
    """A readable, length-limited rendering of a case's inputs or a result."""
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}:\n{value}"
    elif isinstance(value, dict) and "__model__" in value:
        text = f"<{value['__model__']} model>"
    elif isinstance(value, dict) and "__type__" in value:
        text = f"<{value['__type__']} object>"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}={short(v, limit // 2)}" for k, v in value.items()) + "}"
    elif isinstance(value, (tuple, list)):
        text = "(" + ", ".join(short(v, limit // 2) for v in value) + ")"
    elif isinstance(value, torch.nn.Module):
        text = f"<{type(value).__name__} model>"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " …"


def clone_inputs(case: Dict[str, Any]) -> Dict[str, Any]:
    """The case's keyword arguments, tensors cloned (a function that writes into its inputs changes nothing)."""
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}


def portable(value, depth: int = 0, max_numel: int = 20_000_000):
    """``value`` as plain tensors, numbers, strings, tuples and lists (other objects: ``{"__type__": name}``)."""
    if isinstance(value, torch.Tensor):
        try:
            t = value.detach()
            if type(t) is not torch.Tensor:
                t = t.as_subclass(torch.Tensor)
            if t.layout != torch.strided:
                t = t.to_dense()
            if t.numel() > max_numel:
                return {"__type__": f"tensor with {t.numel()} elements (too large)"}
            return t.to("cpu").clone().contiguous()
        except Exception:  # noqa: BLE001 - anything odd is described, not sent
            return {"__type__": type(value).__name__}
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, str) and len(value) > 1000:
            return value[:1000]
        if type(value) not in (bool, int, float, str, type(None)):  # subclasses of int/float/str
            for base in (bool, int, float, str):
                if isinstance(value, base):
                    return base(value)
        return value
    if isinstance(value, (tuple, list)) and depth < 4 and len(value) <= 64:
        items = [portable(v, depth + 1, max_numel) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    module = type(value).__module__
    if module == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        try:
            return portable(value.item(), depth, max_numel)
        except Exception:  # noqa: BLE001
            pass
    name = type(value).__name__
    return {"__type__": "ndarray" if name == "ndarray" else name}


def encode_case(case: Dict[str, Any]) -> Dict[str, Any]:
    """A case with its models replaced by ``{"__model__", "config", "state"}`` (storable with weights only)."""
    out = {}
    for key, value in case.items():
        if isinstance(value, torch.nn.Module) and hasattr(value, "cfg") and dataclasses.is_dataclass(value.cfg):
            state = {k: v.detach().clone() for k, v in value.state_dict().items()}
            out[key] = {"__model__": type(value).__name__, "config": dataclasses.asdict(value.cfg), "state": state}
        else:
            out[key] = value
    return out


def decode_case(case: Dict[str, Any]) -> Dict[str, Any]:
    """The inverse of :func:`encode_case`: models are rebuilt (in eval mode)."""
    out = {}
    for key, value in case.items():
        if isinstance(value, dict) and "__model__" in value:
            from .. import models

            cls = getattr(models, value["__model__"])
            config_cls = getattr(models, value["__model__"] + "Config")
            model = cls(config_cls(**value["config"]))
            model.load_state_dict(value["state"])
            out[key] = model.eval()
        else:
            out[key] = value
    return out


# ----------------------------------------------------------------------------------------------------------------
# Verdicts
# ----------------------------------------------------------------------------------------------------------------
def signature_problem(ex, params: Optional[Sequence[Tuple[str, str]]], shown: str = "") -> Optional[str]:
    """Why a function with parameters ``params`` (``(name, kind)``, kind as ``inspect.Parameter.kind.name``)
    cannot take the exercise's arguments; None if it can (or if the parameters are unknown)."""
    if params is None:
        return None
    kinds = {k for _, k in params}
    if "VAR_KEYWORD" in kinds:
        return None
    names = [n for n, k in params if k != "VAR_POSITIONAL"]
    missing = [p for p, required in ex.parameters if required and p not in names]
    if missing:
        return (f"✗ {ex.id}: wrong signature. Expected {ex.signature[4:-1]}, got {shown or '(' + ', '.join(names) + ')'}"
                f" (missing {', '.join(missing)}).")
    return None


def params_of(fn: Callable) -> Optional[List[Tuple[str, str]]]:
    try:
        return [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return None


def judge(ex, cases: Sequence[Dict[str, Any]], expected: Sequence[Any], outcomes: Sequence[Dict[str, Any]],
          mistakes: Optional[Sequence[Dict[str, Any]]] = None) -> CheckResult:
    """The verdict on a function's outcomes for ``cases``.

    Args:
        ex: the :class:`~transformer_lib.exercises.catalogue.Exercise`.
        cases: the cases' inputs (for the message).
        expected: the expected output of each case.
        outcomes: per case run, in order (a run stops at its first exception): ``{"status": "ok", "value": v}``,
            ``{"status": "not_implemented"}``, ``{"status": "error", "error": "TypeError: ..."}`` or
            ``{"status": "timeout", "error": "..."}``.
        mistakes: per case, mistake key -> that mistake's output on the case (None where it could not run).

    The first failing case decides. A wrong output that equals the output of a known mistake names the
    mistake; when several mistakes agree on that case, the one that matches the most cases is named.
    """
    total = len(cases)
    mistakes = list(mistakes or [{} for _ in cases])

    def matches(key: str, m: int) -> bool:
        wrong = mistakes[m].get(key) if m < len(mistakes) else None
        out = outcomes[m] if m < len(outcomes) else None
        return (wrong is not None and out is not None and out.get("status") == "ok"
                and mismatch(wrong, out.get("value"), ex.atol, ex.rtol, ex.exact_dtype) is None)

    for n in range(1, total + 1):
        case = cases[n - 1]
        if n > len(outcomes):
            return CheckResult(ex.id, False, f"✗ {ex.id}: no result for case {n} of {total}.", n - 1)
        outcome = outcomes[n - 1]
        status = outcome.get("status")
        if status == "not_implemented":
            return CheckResult(ex.id, False, f"… {ex.id}: {NOT_IMPLEMENTED} — replace `raise NotImplementedError` "
                                             "with your code, then run this cell again.", n - 1)
        if status == "timeout":
            return CheckResult(ex.id, False, f"✗ {ex.id}: {outcome.get('error')}", n - 1)
        if status != "ok":
            return CheckResult(ex.id, False, f"✗ {ex.id}: your function raised {outcome.get('error')}\n"
                                             f"  on case {n}: {short(case)}", n - 1)
        got = outcome.get("value")
        reason = mismatch(expected[n - 1], got, ex.atol, ex.rtol, ex.exact_dtype)
        if reason is None:
            continue
        candidates = [key for key, _ in ex.mistakes if matches(key, n - 1)]
        if candidates:
            best = max(candidates, key=lambda key: sum(matches(key, m) for m in range(total)))
            return CheckResult(ex.id, False, f"✗ {ex.id}: likely mistake — {ex.hint(best)}.\n  (case {n}: {reason})",
                               n - 1)
        return CheckResult(ex.id, False, f"✗ {ex.id}: case {n} of {total} fails — {reason}.\n  inputs: {short(case)}\n"
                                         f"  expected: {short(expected[n - 1])}\n  got: {short(got)}", n - 1)
    return passed(ex, total)


def passed(ex, total: int) -> CheckResult:
    return CheckResult(ex.id, True, f"✓ {ex.id}: all {total} cases pass.", total)


def distinct_findings(findings: Sequence[str]) -> List[str]:
    """The findings without repeats. A call read in the source ("it calls `F.layer_norm`
    (torch.nn.functional.layer_norm), which …") and the same call caught at run time ("it calls
    `torch.nn.functional.layer_norm`, which …") are one finding: the first is kept."""
    kept, seen = [], set()
    for finding in dict.fromkeys(findings):
        match = re.match(r"^it calls (?P<what>.+?), which ", finding)
        if match:
            qualified = re.search(r"\((?P<q>[\w.]+)\)$", match["what"]) or re.search(r"(?P<q>[\w.]+)", match["what"])
            if qualified["q"] in seen:
                continue
            seen.add(qualified["q"])
        kept.append(finding)
    return kept


def no_credit(ex, findings: Sequence[str]) -> CheckResult:
    """The verdict of a submission that uses the library's answer, a torch function that does the whole exercise,
    the reference, or code the grader cannot read."""
    grouped: Dict[str, List[str]] = {}   # "it calls X, which WHY": one sentence per reason
    for finding in distinct_findings(findings):
        match = re.match(r"^it calls (?P<what>.+?), which (?P<why>.+)$", finding)
        if match:
            grouped.setdefault(f"which {match['why']}", []).append(match["what"])
        else:
            grouped.setdefault(finding, [])
    listed = "; ".join(f"it calls {' and '.join(names)}, {key}" if names else key for key, names in grouped.items())
    return CheckResult(ex.id, False, f"✗ {ex.id}: no credit — {listed}. Write the function yourself from torch "
                                     "operations: a call that does the whole exercise (the library's answer, or "
                                     "torch's) earns no credit.", 0)


def guarded_names(ex) -> Tuple[str, ...]:
    """What the tripwires replace while a submission runs: the library's answers and the forbidden torch functions."""
    return tuple(ex.forbidden) + tuple(q for q, _ in getattr(ex, "forbidden_torch", ()) or ())


def call_finding(ex, name: str) -> str:
    """The finding for a tripwire's report that ``name`` was called."""
    why = torch_reason(ex, name)
    if why:
        return torch_finding(name, name, why)
    return f"it calls `{name}`, the library's own answer to this exercise"
