"""Metrics for artifact (CSV submission) tasks: one table from name to function, each unit-tested by hand.

Every metric takes two equally long 1-D sequences (answers first, then predictions) of one target column and returns a
float. *Label* metrics (``accuracy``, ``f1``) compare canonical labels: values that parse as numbers compare as numbers
(``"1"`` equals ``"1.0"``; the number rule is :mod:`harness.evaluation.numbers`), anything else as stripped text (case-
sensitive). *Numeric* metrics (``rmse``, ``mae``, ``mse``, ``r2``) need every value to parse as a finite number; the
caller validates that first (:func:`numeric_column_errors`) so a non-numeric prediction is reported as an invalid
submission, not a crash.

``f1`` is the macro F1 over every label that occurs in the answers or the predictions (sklearn's
``f1_score(average="macro")``): per label ``2·TP / (2·TP + FP + FN)``, then the unweighted mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.evaluation.numbers import as_float, parse_number
from harness.registry import lookup


@dataclass(frozen=True)
class Metric:
    """A named metric: ``fn(answers, predictions) -> float``, its direction and whether it needs numbers."""

    name: str
    fn: Callable[[Sequence[Any], Sequence[Any]], float]
    higher_is_better: bool
    numeric: bool


def canonical_label(value: Any) -> str:
    """The label a value stands for: numbers (:func:`~harness.evaluation.numbers.parse_number`) as shortest float text
    (``"1.0"`` -> ``"1"``; an exact integer as its digits), else stripped text."""
    text = str(value).strip()
    number = parse_number(text)
    if number is None:
        return text
    if isinstance(number, int):
        return str(number)
    if math.isfinite(number) and number.is_integer():
        return str(int(number))
    return repr(number)


def _as_floats(values: Sequence[Any]) -> np.ndarray:
    """The values as floats (:func:`~harness.evaluation.numbers.as_float`); one that is not a number is a
    ``ValueError`` naming it (predictions are validated before, by :func:`numeric_column_errors`)."""
    out = np.empty(len(values), dtype=float)
    for index, value in enumerate(values):
        number = as_float(str(value))
        if number is None:
            raise ValueError(f"value {str(value)[:60]!r} at row {index} is not a number; a numeric metric needs one.")
        out[index] = number
    return out


def _check_lengths(answers: Sequence[Any], predictions: Sequence[Any]) -> None:
    if len(answers) != len(predictions):
        raise ValueError(f"metric inputs differ in length: {len(answers)} answers vs {len(predictions)} predictions.")
    if len(answers) == 0:
        raise ValueError("metric inputs are empty; a metric needs at least one row.")


def accuracy(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Share of rows whose canonical labels are equal."""
    _check_lengths(answers, predictions)
    hits = sum(canonical_label(a) == canonical_label(p) for a, p in zip(answers, predictions, strict=True))
    return hits / len(answers)


def f1_macro(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Macro F1 over the labels present in the answers or the predictions."""
    _check_lengths(answers, predictions)
    truth = [canonical_label(a) for a in answers]
    guess = [canonical_label(p) for p in predictions]
    scores = []
    for label in sorted(set(truth) | set(guess)):
        tp = sum(t == label and g == label for t, g in zip(truth, guess, strict=True))
        fp = sum(t != label and g == label for t, g in zip(truth, guess, strict=True))
        fn = sum(t == label and g != label for t, g in zip(truth, guess, strict=True))
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def mse(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Mean squared error."""
    _check_lengths(answers, predictions)
    return float(np.mean((_as_floats(answers) - _as_floats(predictions)) ** 2))


def rmse(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Root mean squared error."""
    return math.sqrt(mse(answers, predictions))


def mae(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Mean absolute error."""
    _check_lengths(answers, predictions)
    return float(np.mean(np.abs(_as_floats(answers) - _as_floats(predictions))))


def r2(answers: Sequence[Any], predictions: Sequence[Any]) -> float:
    """Coefficient of determination ``1 - SS_res / SS_tot``; for constant answers (``SS_tot == 0``) it is 1.0 when
    matched exactly and 0.0 otherwise, as sklearn's ``r2_score`` (``force_finite=True``) does."""
    _check_lengths(answers, predictions)
    truth, guess = _as_floats(answers), _as_floats(predictions)
    ss_res = float(np.sum((truth - guess) ** 2))
    ss_tot = float(np.sum((truth - truth.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


METRICS: dict[str, Metric] = {
    "accuracy": Metric("accuracy", accuracy, higher_is_better=True, numeric=False),
    "f1": Metric("f1", f1_macro, higher_is_better=True, numeric=False),
    "rmse": Metric("rmse", rmse, higher_is_better=False, numeric=True),
    "mse": Metric("mse", mse, higher_is_better=False, numeric=True),
    "mae": Metric("mae", mae, higher_is_better=False, numeric=True),
    "r2": Metric("r2", r2, higher_is_better=True, numeric=True),
}


def get_metric(name: str) -> Metric:
    """The metric called ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    return lookup(METRICS, name, what="metric", fix="Fix the task's submission.metric.")


def numeric_column_errors(values: Sequence[Any], *, limit: int = 3) -> list[str]:
    """Up to ``limit`` values that are not finite numbers (blank cells included), for an error message."""
    bad = []
    for value in values:
        text = "" if value is None else str(value).strip()
        number = as_float(text)
        if number is None or not math.isfinite(number):
            bad.append(text)
            if len(bad) >= limit:
                break
    return bad
