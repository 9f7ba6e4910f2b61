"""Structured-answer comparison for multi-turn (LongDS-style) tasks.

A turn's reference answer is a JSON-like value (usually a dict of named fields). :func:`compare_structured` walks the
*reference* and checks each of its leaves against the prediction at the same path:

* **Only reference fields count.** Extra predicted fields are ignored; a missing field is wrong. A dict key is looked
  up exactly first, then by its normalised label (case, whitespace and punctuation ignored), so ``"Mean Price"``
  finds ``"mean_price"``.
* **Ordered lists** (``list``/``tuple``) are compared element-wise and only when the lengths agree; a length mismatch
  makes every leaf of that list wrong. Sets compare as unordered collections of normalised scalars (one leaf).
* **Nested dicts** recurse. Leaves are keyed by their dotted path (``"stats.mean"``, ``"top.0.name"``); a scalar
  reference at the root is keyed ``""``. Keys containing dots are not escaped. An empty reference dict is one leaf
  that any predicted dict matches; an empty reference list is one leaf that only an empty list matches.
* **Numbers** (and numeric strings such as ``"3.5"``, read by :func:`harness.evaluation.numbers.parse_number`)
  are rounded on both sides to ``precision`` decimals (default 4, the turn's precision when it states one) and then
  must be equal. Two integers compare exactly, at any size (``10**400`` equals only ``10**400``); an integer beyond
  the float range against a float compares exactly too (so it never equals one). ``inf`` equals only ``inf`` of the
  same sign; ``-0`` equals ``0``. Digits of any script are digits (``"٢٤٠"`` is 240) and an underscore between
  digits groups them (``"1_000"`` is 1000, ``"51_996.97"`` is 51996.97), as Python's ``int()``/``float()`` read
  them; ``"1,000"``, ``"35%"`` and an out-of-range text such as ``"1e400"`` are not numbers (compared as labels).
* **Labels** (strings) are compared after case-folding, replacing punctuation by spaces and collapsing whitespace
  runs, so ``" Non-Significant "`` equals ``"non significant"``.
* **Booleans**: ``True`` matches ``True``, ``"true"`` and ``"yes"`` (any case); ``False`` matches ``False``,
  ``"false"`` and ``"no"``; two such words on both sides compare as booleans (``"yes"`` equals ``"true"``).
  Numbers are never booleans (``1`` does not match ``True``), because a count of 1 is not a yes.
* **Missing values**: ``None``, NaN (float or ``pandas.NA``) and the strings ``""``, ``"nan"`` (signed too),
  ``"none"``, ``"null"`` (any case) are all "missing" and match each other, and nothing else. So a NaN reference is
  matched by a NaN or ``None`` prediction, never by ``0``.

``score`` is the fraction of reference leaves matched; ``correct`` means all leaves matched. No predicted value
makes the comparison raise or the answer invalid: every leaf is right or wrong.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.evaluation.numbers import parse_number

DEFAULT_PRECISION = 4
"""Decimals numbers are rounded to when the turn does not state a precision."""

_MISSING_WORDS = frozenset({"", "nan", "none", "null"})
_TRUE_WORDS = frozenset({"true", "yes"})
_FALSE_WORDS = frozenset({"false", "no"})
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class StructuredScore:
    """The verdict for one structured answer: ``fields`` maps every reference leaf's dotted path to its match."""

    correct: bool
    score: float
    fields: dict[str, bool] = field(default_factory=dict)


def _text(value: Any) -> str:
    """``str(value)``, or a short stand-in for a number too long for Python's int-to-text limit (4,300 digits)."""
    try:
        return str(value)
    except ValueError:
        return f"<{type(value).__name__} beyond {sys.get_int_max_str_digits()} digits>"


def normalize_label(text: object) -> str:
    """Case-folded text, punctuation replaced by spaces, whitespace runs collapsed (``" A-b. "`` -> ``"a b"``)."""
    folded = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in _text(text).casefold())
    return _WHITESPACE.sub(" ", folded).strip()


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, str):
        word = value.strip().casefold()
        return word in _MISSING_WORDS or word.lstrip("+-") == "nan"
    if isinstance(value, numbers.Integral):  # never NaN; float() of a huge int would overflow
        return False
    if isinstance(value, numbers.Real) and not isinstance(value, np.bool_):
        number = parse_number(value)
        return number is not None and math.isnan(number)
    return False


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().casefold()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def _numbers_match(pred: int | float, ref: int | float, precision: int) -> bool:
    if isinstance(pred, int) and isinstance(ref, int):
        return pred == ref
    try:
        pred_float, ref_float = float(pred), float(ref)
    except OverflowError:  # an int beyond the float range: exact comparison (never equal to a float)
        return pred == ref
    if math.isinf(pred_float) or math.isinf(ref_float):
        return pred_float == ref_float
    return round(pred_float, precision) == round(ref_float, precision)


def scalars_match(predicted: Any, reference: Any, *, precision: int = DEFAULT_PRECISION) -> bool:
    """Whether one predicted leaf matches one reference leaf (rules in the module docstring)."""
    if _is_missing(reference) or _is_missing(predicted):
        return _is_missing(reference) and _is_missing(predicted)

    pred_bool, ref_bool = _as_bool(predicted), _as_bool(reference)
    either_is_bool = isinstance(predicted, (bool, np.bool_)) or isinstance(reference, (bool, np.bool_))
    if either_is_bool or (pred_bool is not None and ref_bool is not None):
        return pred_bool is not None and pred_bool == ref_bool

    pred_num, ref_num = parse_number(predicted), parse_number(reference)
    if pred_num is not None and ref_num is not None:
        return _numbers_match(pred_num, ref_num, precision)
    if isinstance(predicted, numbers.Real) or isinstance(reference, numbers.Real):
        return False  # a number against a non-numeric string

    if isinstance(predicted, str) and isinstance(reference, str):
        pred_label, ref_label = normalize_label(predicted), normalize_label(reference)
        if not pred_label and not ref_label:  # all punctuation: compare the raw text
            return predicted.strip() == reference.strip()
        return pred_label == ref_label
    return False


def _set_key(value: Any, precision: int) -> Any:
    if _is_missing(value):
        return ("missing",)
    as_bool = _as_bool(value)
    if as_bool is not None:
        return ("bool", as_bool)
    as_number = parse_number(value)
    if as_number is not None:
        return ("number", round(as_number, precision))
    if isinstance(value, numbers.Number):  # e.g. a Fraction beyond the float range: equal only to itself
        return ("exact", value)
    return ("label", normalize_label(value))


def _join(path: str, key: Any) -> str:
    return f"{path}.{_text(key)}" if path else _text(key)


def _leaf_paths(reference: Any, path: str) -> list[str]:
    """Dotted paths of every leaf of ``reference`` (used to mark a whole subtree wrong)."""
    if isinstance(reference, Mapping) and reference:
        return [p for key, sub in reference.items() for p in _leaf_paths(sub, _join(path, key))]
    if isinstance(reference, (list, tuple)) and reference:
        return [p for i, sub in enumerate(reference) for p in _leaf_paths(sub, _join(path, i))]
    return [path]


def _lookup(predicted: Mapping, key: Any) -> tuple[bool, Any]:
    if key in predicted:
        return True, predicted[key]
    wanted = normalize_label(key)
    for pred_key, value in predicted.items():
        if normalize_label(pred_key) == wanted:
            return True, value
    return False, None


def _compare(predicted: Any, reference: Any, path: str, precision: int, out: dict[str, bool]) -> None:
    if isinstance(reference, Mapping):
        if not isinstance(predicted, Mapping):
            out.update(dict.fromkeys(_leaf_paths(reference, path), False))
            return
        if not reference:
            out[path] = True
            return
        for key, sub_reference in reference.items():
            found, sub_predicted = _lookup(predicted, key)
            if found:
                _compare(sub_predicted, sub_reference, _join(path, key), precision, out)
            else:
                out.update(dict.fromkeys(_leaf_paths(sub_reference, _join(path, key)), False))
    elif isinstance(reference, (list, tuple)):
        if not isinstance(predicted, (list, tuple)) or len(predicted) != len(reference):
            out.update(dict.fromkeys(_leaf_paths(reference, path), False))
        elif not reference:
            out[path] = True
        else:
            for index, (sub_predicted, sub_reference) in enumerate(zip(predicted, reference, strict=True)):
                _compare(sub_predicted, sub_reference, _join(path, index), precision, out)
    elif isinstance(reference, (set, frozenset)):
        if not isinstance(predicted, (set, frozenset, list, tuple)):
            out[path] = False
        else:
            out[path] = {_set_key(v, precision) for v in predicted} == {_set_key(v, precision) for v in reference}
    else:
        out[path] = scalars_match(predicted, reference, precision=precision)


def compare_structured(
    predicted: Any, reference: Any, *, precision: int | None = DEFAULT_PRECISION
) -> StructuredScore:
    """Compare a predicted structured answer with the reference (rules in the module docstring).

    ``precision`` is the number of decimals numbers are rounded to; ``None`` means :data:`DEFAULT_PRECISION`.
    """
    if precision is None:
        precision = DEFAULT_PRECISION
    if isinstance(precision, bool) or not isinstance(precision, int) or precision < 0:
        raise ValueError(
            f"precision={precision!r} is not a number of decimals; pass a non-negative int (e.g. 2) or None for the "
            f"default {DEFAULT_PRECISION}."
        )
    fields: dict[str, bool] = {}
    _compare(predicted, reference, "", precision, fields)
    n_matched = sum(fields.values())
    return StructuredScore(correct=n_matched == len(fields), score=n_matched / len(fields), fields=fields)
