"""The claims ledger: how a chapter records a checkable claim, its measured figure, its verdict and, for a claim
judged on trained models, the check that those models were trained enough to test it.

A chapter calls :func:`record_claim` in the cell that measured the claim. The values are glued into the executed
notebook (myst-nb ``glue``) under the keys ``claim_<id>_text``, ``claim_<id>_value``, ``claim_<id>_verdict`` and,
for a claim that rests on trained models, ``claim_<id>_adequacy``; the ledger page pastes them from there
(``booktools/build_ledger.py`` writes the page), so a changed result in a chapter changes the ledger when the book is
rebuilt. The chapter also places the MyST label ``(claim-<id with dashes>)=`` above the section that tests the
claim, which the ledger links to.

Errata are not claims. A slip in the lecture's material (a formula typed wrongly on one slide, a number shifted
in a transcription) is recorded with :func:`record_erratum`: where it is, what is written, what is right and the
evidence; the ledger page lists errata in a section of their own. The verdict *corrected* is kept for claims the
lecture makes and a measurement contradicts.

The adequacy rule. A verdict about trained models is only as good as the training: a model stopped before it
learned the task tells nothing about the architecture. So every claim names its adequacy (``adequacy=``): either
:data:`TRAINS_NOTHING` (shapes, FLOP counts, exact identities, timings of untrained layers) or an :class:`Adequacy`,
the stated check and its measured value, built with :func:`beats_baseline`, :func:`loss_flattened`,
:func:`accuracy_saturated` or by hand, and combined with ``&``. When the check fails, the verdict is recorded as
:data:`NOT_TESTABLE` ("not testable at this budget"), whatever the chapter's measurement suggested.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .checks import check_number

__all__ = ["VERDICTS", "NOT_TESTABLE", "TRAINS_NOTHING", "Adequacy", "Text", "accuracy_saturated", "adequacy_key",
           "beats_baseline", "claim_keys", "claim_label", "erratum_keys", "erratum_label", "find_claims",
           "find_errata", "late_improvement", "loss_flattened", "mean_sd", "record_claim", "record_erratum", "welch_t"]

#: The verdict recorded when the models behind a claim fail their adequacy check (or the task cannot tell).
NOT_TESTABLE = "not testable at this budget"
#: The four verdicts of the ledger.
VERDICTS = ("confirmed", "nuanced", "corrected", NOT_TESTABLE)
#: ``adequacy=`` of a claim that trains no model (shapes, FLOP counts, exact identities, untrained timings).
TRAINS_NOTHING = "trains nothing"
_ID = re.compile(r"^\d\d_[a-z0-9_]+$")


class Text:
    """A string that displays without quotes, as plain text and as Markdown (for ``{glue:text}`` / ``{glue:md}``)."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


@dataclass(frozen=True)
class Adequacy:
    """The check that the models behind a claim were trained enough to test it, and what it measured.

    Attributes:
        check: what is required, in words (e.g. ``'every model ≥ 0.10 nats below the counted bigram (2.369)'``).
        measured: the measured value (e.g. ``'smallest margin 0.42 nats (one head)'``).
        passed: whether the measured value meets the check.

    ``a & b`` is the check that both hold; it keeps its parts, so that the ledger can show each measured value
    beside its own requirement. ``str(a)`` is the line the ledger shows: ``'✓ check: measured'`` or
    ``'✗ check: measured'``; for ``a & b``, ``'✓ check a: measured a; check b: measured b'`` and, when it failed,
    each part followed by ``(met)`` or ``(not met)``.
    """

    check: str
    measured: str
    passed: bool
    parts: Tuple["Adequacy", ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        for name in ("check", "measured"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Adequacy.{name} must be a non-empty str, got {value!r}")
        if not isinstance(self.passed, bool):
            raise TypeError(f"Adequacy.passed must be a bool, got {type(self.passed).__name__} {self.passed!r}")

    def _leaves(self) -> Tuple["Adequacy", ...]:
        return self.parts or (self,)

    def __and__(self, other: "Adequacy") -> "Adequacy":
        if not isinstance(other, Adequacy):
            return NotImplemented
        return Adequacy(f"{self.check}; {other.check}", f"{self.measured}; {other.measured}",
                        self.passed and other.passed, parts=self._leaves() + other._leaves())

    def __str__(self) -> str:
        mark = "✓" if self.passed else "✗"
        if not self.parts:
            return f"{mark} {self.check}: {self.measured}"
        met = {True: "", False: ""} if self.passed else {True: " (met)", False: " (not met)"}
        return f"{mark} " + "; ".join(f"{p.check}: {p.measured}{met[p.passed]}" for p in self.parts)

    def unnamed(self, check: Optional[str] = None) -> "Adequacy":
        """This check without the name of its worst model, ``'smallest margin 0.39'`` for ``'smallest margin 0.39
        (seed 2)'``: which model is worst can change from one CPU to another while the verdict does not. ``check``
        rewords the requirement in the claim's own words (default: as it is)."""
        if self.parts and check is None:                          # a combined check: each part without its name
            combined = self.parts[0].unnamed()
            for part in self.parts[1:]:
                combined = combined & part.unnamed()
            return combined
        return Adequacy(self.check if check is None else check, self.measured.split(" (")[0], self.passed)


def _models_checked(values, items) -> str:
    """'every model' for a plain list; for named models, which ones were checked (the check holds for them only)."""
    if not isinstance(values, Mapping):
        return "every model"
    names = " / ".join(name for name, _ in items) if len(items) <= 3 else f"{len(items)} runs"
    return f"every model checked ({names})"


def _named_values(values: Union[Mapping[str, float], Sequence[float]], argument: str) -> List[Tuple[str, float]]:
    if isinstance(values, Mapping):
        items = [(str(k), v) for k, v in values.items()]
    elif isinstance(values, (list, tuple)):
        items = [(f"#{i}", v) for i, v in enumerate(values)]
    else:
        raise TypeError(f"{argument} must be a mapping name -> number or a list of numbers, "
                        f"got {type(values).__name__}")
    if not items:
        raise ValueError(f"{argument} must hold at least one value, got none")
    out = []
    for name, v in items:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise TypeError(f"{argument}[{name!r}] must be a number, got {type(v).__name__} {v!r}") from None
        if not math.isfinite(f):
            raise ValueError(f"{argument}[{name!r}] must be finite, got {f}")
        out.append((name, f))
    return out


def mean_sd(values: Iterable[float]) -> Tuple[float, float]:
    """The mean and the sample standard deviation of ``values`` (e.g. a figure over seeds); the deviation of a
    single value is 0.

    Raises:
        ValueError: if ``values`` is empty or holds a value that is not a finite number.
    """
    xs = [v for _, v in _named_values(list(values), "values")]
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def welch_t(a: Iterable[float], b: Iterable[float]) -> float:
    """Welch's t statistic of two samples (e.g. one figure of two models over their seeds): how many standard
    errors the mean of ``a`` lies above the mean of ``b``. With no spread at all it is 0 for equal means and
    ±inf otherwise.

    Raises:
        ValueError: if either sample is empty or holds a value that is not a finite number.
    """
    a, b = list(a), list(b)
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    se = math.sqrt(sa ** 2 / len(a) + sb ** 2 / len(b))
    return (ma - mb) / se if se > 0 else (0.0 if ma == mb else math.copysign(math.inf, ma - mb))


def beats_baseline(losses: Union[Mapping[str, float], Sequence[float]], baseline: float, margin: float,
                   baseline_name: str = "the counted bigram", unit: str = "nats",
                   checked: Optional[str] = None) -> Adequacy:
    """Every model's loss is at least ``margin`` below a baseline's (e.g. a counted n-gram model).

    Args:
        losses: the final validation loss of each model (name -> loss, or a list; several seeds may be listed).
        baseline: the baseline's loss on the same data.
        margin: how far below the baseline the worst model must be (≥ 0).
        baseline_name: the baseline in words.
        unit: the loss's unit in words.
        checked: what the losses cover, in words, where the default (``'every model checked (5 runs)'``) would
            mislead, e.g. ``'every run (the worst seed of each of 5 rungs)'`` when each value is already a maximum
            over seeds.

    Returns:
        Adequacy: passed when ``max(losses) <= baseline - margin``; ``measured`` names the worst model's margin. With
        named losses the check names the models it covers (up to three; a count beyond), so that a reader does not
        take it for a statement about models shown beside it that were not checked.
    """
    items = _named_values(losses, "losses")
    baseline = check_number("baseline", baseline, low=-math.inf)
    margin = check_number("margin", margin)
    worst_name, worst = max(items, key=lambda kv: kv[1])
    gap = baseline - worst
    where = f" ({worst_name})" if isinstance(losses, Mapping) and len(items) > 1 else ""
    if checked is not None and (not isinstance(checked, str) or not checked.strip()):
        raise ValueError(f"checked must be a non-empty str (what the losses cover) or None, got {checked!r}")
    covered = _models_checked(losses, items) if checked is None else checked
    return Adequacy(f"{covered} ≥ {margin:.2f} {unit} below {baseline_name} ({baseline:.3f})",
                    f"smallest margin {gap:.2f}{where}", gap >= margin)


def late_improvement(curve: Sequence[float], fraction: float = 0.2) -> float:
    """How much a loss curve fell over its last ``fraction``: its value at the last point before that tail minus its
    smallest value in the tail (negative when it went up). :func:`loss_flattened` compares it with a tolerance.

    Args:
        curve: losses in training order, evenly spaced, at least 3.
        fraction: the tail of the curve examined, in (0, 1).
    """
    values = [float(v) for v in curve]
    if len(values) < 3:
        raise ValueError(f"curve must hold at least 3 losses to show a tail, got {len(values)}")
    start = min(len(values) - 2, int(math.floor((len(values) - 1) * (1 - fraction))))
    return values[start] - min(values[start + 1:])


def loss_flattened(curves: Union[Mapping[str, Sequence[float]], Sequence[float]], tolerance: float,
                   fraction: float = 0.2, unit: str = "nats") -> Adequacy:
    """Training has flattened: over the last ``fraction`` of each curve the loss improved by less than ``tolerance``.

    The points are taken as evenly spaced in training; the improvement is the curve's value at the last point
    before its final ``fraction`` minus its smallest value after that point (a curve that goes up counts as flat).

    Args:
        curves: one loss curve (a list, in training order) or several (name -> list), e.g. validation losses
            measured at regular steps.
        tolerance: the largest improvement over the last ``fraction`` that still counts as flat (> 0).
        fraction: the tail of the curve examined, in (0, 1).
        unit: the loss's unit in words.

    Returns:
        Adequacy: passed when every curve's improvement is below ``tolerance``; ``measured`` names the largest. A
        curve of fewer than 3 points (a run capped to a few steps) cannot show that it flattened: the check fails.
    """
    if isinstance(curves, Mapping):
        named = list(curves.items())
    elif isinstance(curves, (list, tuple)):
        named = [("", curves)]
    else:
        raise TypeError(f"curves must be a list of losses or a mapping name -> list, got {type(curves).__name__}")
    if not named:
        raise ValueError("curves must hold at least one curve, got none")
    tolerance = check_number("tolerance", tolerance, strict=True)
    fraction = check_number("fraction", fraction, strict=True)
    if fraction >= 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    worst_name, worst = "", -math.inf
    for name, curve in named:
        values = [v for _, v in _named_values(list(curve), f"curves[{name!r}]" if name else "curves")]
        if len(values) < 3:                        # too short to tell a plateau from a slope: the check fails
            return Adequacy(f"the last {fraction:.0%} of training improves the loss by < {tolerance:g} {unit}",
                            f"{len(values)} point(s){f' ({name})' if name else ''}, too few to tell", False)
        improvement = late_improvement(values, fraction)
        if improvement > worst:
            worst_name, worst = name, improvement
    where = f" ({worst_name})" if len(named) > 1 else ""
    percent = f"{fraction:.0%}"
    return Adequacy(f"the last {percent} of training improves the loss by < {tolerance:g} {unit}",
                    f"largest improvement {max(worst, 0.0):.3f}{where}", worst < tolerance)


def accuracy_saturated(accuracies: Union[Mapping[str, float], Sequence[float]], threshold: float,
                       what: str = "accuracy", percent: bool = False) -> Adequacy:
    """Every model has reached ``threshold`` (e.g. 0.95 training or validation accuracy on the task it learns).

    Args:
        accuracies: each model's accuracy in [0, 1] (name -> accuracy, or a list).
        threshold: the accuracy every model must reach, in (0, 1].
        what: which accuracy, in words (e.g. ``'validation accuracy at the training lengths'``).
        percent: state the threshold and the lowest accuracy in percent (``≥ 90 %: lowest 98.0 %``), for a chapter
            whose prose gives accuracies in percent; the default states fractions (``≥ 0.90: lowest 0.980``).

    Returns:
        Adequacy: passed when ``min(accuracies) >= threshold``; ``measured`` names the lowest.
    """
    items = _named_values(accuracies, "accuracies")
    for name, a in items:
        if not 0 <= a <= 1:
            raise ValueError(f"accuracies[{name!r}] must be in [0, 1], got {a}")
    threshold = check_number("threshold", threshold, strict=True)
    if threshold > 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if not isinstance(percent, bool):
        raise TypeError(f"percent must be True or False, got {type(percent).__name__} {percent!r}")
    low_name, low = min(items, key=lambda kv: kv[1])
    where = f" ({low_name})" if isinstance(accuracies, Mapping) and len(items) > 1 else ""
    which = f"{_models_checked(accuracies, items)}: {what}" if isinstance(accuracies, Mapping) else f"every model's {what}"
    if percent:
        return Adequacy(f"{which} ≥ {100 * threshold:g} %", f"lowest {100 * low:.1f} %{where}", low >= threshold)
    return Adequacy(f"{which} ≥ {threshold:.2f}", f"lowest {low:.3f}{where}", low >= threshold)


def claim_keys(claim_id: str) -> Tuple[str, str, str]:
    """The three glue keys every claim has: text, value and verdict (a trained claim adds ``_adequacy``)."""
    return tuple(f"claim_{claim_id}_{part}" for part in ("text", "value", "verdict"))


def adequacy_key(claim_id: str) -> str:
    """The glue key of a claim's adequacy check, e.g. ``'claim_10_long_range_adequacy'``."""
    return f"claim_{claim_id}_adequacy"


def claim_label(claim_id: str) -> str:
    """The MyST label of the section that tests a claim, e.g. ``'02_grad_decay'`` -> ``'claim-02-grad-decay'``."""
    return "claim-" + claim_id.replace("_", "-")


def record_claim(claim_id: str, claim: str, value: str, verdict: str, *,
                 adequacy: Union[Adequacy, str], glue: bool = True) -> None:
    """Record a claim for the ledger and print a one-line summary.

    It returns nothing, so that a cell ending with it shows the summary once (a returned string would be shown a
    second time, in quotes).

    Args:
        claim_id: ``'NN_short_name'``: the two-digit chapter number and a short snake_case name.
        claim: the claim in the book's own words.
        value: the measured figure, formatted (e.g. ``'Var(qᵀk)/d_k = 1.02 at d_k = 512'``).
        verdict: ``'confirmed'``, ``'nuanced'``, ``'corrected'`` or ``'not testable at this budget'``
            (:data:`NOT_TESTABLE`).
        adequacy: for a claim judged on trained models, the :class:`Adequacy` check that they were trained enough
            to test it; :data:`TRAINS_NOTHING` for a claim that trains no model. If the check failed, the verdict
            recorded is :data:`NOT_TESTABLE`, whatever ``verdict`` says.
        glue: glue the values into the notebook (requires myst-nb; off outside notebooks).
    """
    if not isinstance(claim_id, str) or not _ID.match(claim_id):
        raise ValueError(f"claim_id must look like 'NN_short_name' (two digits, underscore, snake_case), "
                         f"got {claim_id!r}")
    for name, v in (("claim", claim), ("value", value)):
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{name} must be a non-empty str, got {v!r}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    if not (isinstance(adequacy, Adequacy) or adequacy == TRAINS_NOTHING):
        raise TypeError(f"adequacy must be an Adequacy (a claim judged on trained models) or "
                        f"ledger.TRAINS_NOTHING, got {type(adequacy).__name__} {adequacy!r}")
    trained = isinstance(adequacy, Adequacy)
    if trained and not adequacy.passed:
        verdict = NOT_TESTABLE
    keys = list(claim_keys(claim_id))
    texts = [claim, value, verdict]
    if trained:
        keys.append(adequacy_key(claim_id))
        texts.append(str(adequacy))
    if glue:
        from .notebook import glue as _glue

        for key, text in zip(keys, texts):
            _glue(key, Text(text), display=False)
    summary = f"[{verdict}] {claim} — measured: {value}"
    if trained:
        summary += f" — trained enough? {adequacy}"
    print(summary)


_ERRATUM_PARTS = ("where", "written", "correct", "evidence")


def erratum_keys(erratum_id: str) -> Tuple[str, str, str, str]:
    """The four glue keys of an erratum: where, written, correct and evidence."""
    return tuple(f"erratum_{erratum_id}_{part}" for part in _ERRATUM_PARTS)


def erratum_label(erratum_id: str) -> str:
    """The MyST label of the section that shows an erratum, e.g. ``'08_ln_mean'`` -> ``'erratum-08-ln-mean'``."""
    return "erratum-" + erratum_id.replace("_", "-")


def record_erratum(erratum_id: str, where: str, written: str, correct: str, evidence: str,
                   glue: bool = True) -> None:
    """Record an erratum of the lecture's material (not a claim) for the ledger's errata section; print a line.

    Like :func:`record_claim`, it returns nothing: a cell ending with it shows the line once.

    Args:
        erratum_id: ``'NN_short_name'``: the two-digit chapter number and a short snake_case name.
        where: where the slip is, e.g. ``'lecture slide on layer normalization'``.
        written: what is written there.
        correct: what is right.
        evidence: what the chapter computed to show it, formatted.
        glue: glue the four values into the notebook (requires myst-nb; off outside notebooks).
    """
    if not isinstance(erratum_id, str) or not _ID.match(erratum_id):
        raise ValueError(f"erratum_id must look like 'NN_short_name' (two digits, underscore, snake_case), "
                         f"got {erratum_id!r}")
    values = (where, written, correct, evidence)
    for name, v in zip(_ERRATUM_PARTS, values):
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{name} must be a non-empty str, got {v!r}")
    if glue:
        from .notebook import glue as _glue

        for key, text in zip(erratum_keys(erratum_id), values):
            _glue(key, Text(text), display=False)
    print(f"[erratum] {where}: written {written}; correct {correct} — shown by: {evidence}")


def _recorded_ids(notebook: dict, prefix: str, first_part: str) -> List[str]:
    """Ids recorded under glue keys ``<prefix>_<id>_<first_part>`` in an executed notebook, in order."""
    key_re = re.compile(rf"^{prefix}_(\d\d_[a-z0-9_]+)_{first_part}$")
    ids: List[str] = []
    for cell in notebook.get("cells", []):
        for out in cell.get("outputs", []):
            m = key_re.match(out.get("metadata", {}).get("scrapbook", {}).get("name", ""))
            if m and m.group(1) not in ids:
                ids.append(m.group(1))
    return ids


def find_errata(notebook: dict) -> List[str]:
    """Erratum ids recorded in an executed notebook (parsed JSON), in order of appearance."""
    return _recorded_ids(notebook, "erratum", "where")


def find_claims(notebook: dict) -> List[str]:
    """Claim ids recorded in an executed notebook (parsed JSON), in order of appearance."""
    return _recorded_ids(notebook, "claim", "text")
