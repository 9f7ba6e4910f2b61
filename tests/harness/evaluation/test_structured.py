"""Tests of the structured-answer comparison: hand-computed cases and Hypothesis properties."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.evaluation.graders import grade_structured
from harness.evaluation.structured import (
    StructuredScore,
    compare_structured,
    normalize_label,
    scalars_match,
)


def test_extra_fields_ignored_missing_field_wrong() -> None:
    reference = {"mean": 2.5, "label": "high", "n": 10}
    predicted = {"mean": 2.5, "label": "high", "unused": 1}
    result = compare_structured(predicted, reference)
    assert result == StructuredScore(
        correct=False, score=pytest.approx(2 / 3), fields={"mean": True, "label": True, "n": False}
    )


def test_nested_dicts_and_lists_use_dotted_paths() -> None:
    reference = {"stats": {"mean": 1.0, "std": 0.5}, "top": [{"name": "A", "v": 3}, {"name": "B", "v": 2}]}
    predicted = {"stats": {"mean": 1.0, "std": 0.6}, "top": [{"name": "a", "v": 3}, {"name": "B", "v": 2}]}
    result = compare_structured(predicted, reference)
    assert result.fields == {
        "stats.mean": True,
        "stats.std": False,
        "top.0.name": True,
        "top.0.v": True,
        "top.1.name": True,
        "top.1.v": True,
    }
    assert result.score == pytest.approx(5 / 6)
    assert result.correct is False


def test_ordered_lists_keep_order_and_length() -> None:
    assert compare_structured({"l": [1, 2, 3]}, {"l": [1, 2, 3]}).correct is True
    swapped = compare_structured({"l": [2, 1, 3]}, {"l": [1, 2, 3]})
    assert swapped.fields == {"l.0": False, "l.1": False, "l.2": True}
    longer = compare_structured({"l": [1, 2, 3, 4]}, {"l": [1, 2, 3]})
    assert longer.fields == {"l.0": False, "l.1": False, "l.2": False}
    assert compare_structured({"l": "1, 2, 3"}, {"l": [1, 2, 3]}).score == 0.0


def test_sets_are_unordered() -> None:
    assert compare_structured({"s": ["b", "A"]}, {"s": {"a", "b"}}).correct is True
    assert compare_structured({"s": ["a"]}, {"s": {"a", "b"}}).fields == {"s": False}


def test_empty_containers() -> None:
    assert compare_structured({"x": 1}, {}).fields == {"": True}
    assert compare_structured([], []).correct is True
    assert compare_structured([1], []).correct is False
    assert compare_structured("not a dict", {}).correct is False


def test_root_scalar_is_keyed_by_empty_path() -> None:
    assert compare_structured(3.14159, 3.1416).fields == {"": True}


def test_keys_found_by_normalised_label() -> None:
    result = compare_structured({"Mean Price": 3.0}, {"mean_price": 3.0})
    assert result.fields == {"mean_price": True}


@pytest.mark.parametrize(
    ("pred", "ref", "precision", "expected"),
    [
        (3.14159, 3.1416, 4, True),
        (3.14149, 3.1416, 4, False),
        (3.14149, 3.14, 2, True),
        (2.0, 2, 4, True),
        ("3.5", 3.5, 4, True),
        (3.5, "3.50", 4, True),
        (np.float64(0.25), 0.25, 4, True),
        (np.int64(7), 7, 0, True),
        (12.4, 12, 0, True),
        (12.6, 12, 0, False),
        ("1,000", 1000, 4, False),
        (float("inf"), float("inf"), 4, True),
        (float("inf"), 1e300, 4, False),
        (" Non-Significant ", "non significant", 4, True),
        ("North  America", "north america", 4, True),
        ("north-america", "northamerica", 4, False),
        ("Male", "Female", 4, False),
        (True, True, 4, True),
        ("yes", True, 4, True),
        ("TRUE", True, 4, True),
        (True, "Yes", 4, True),
        ("no", False, 4, True),
        ("yes", "true", 4, True),
        ("no", True, 4, False),
        (1, True, 4, False),
        (0, False, 4, False),
        (np.bool_(True), True, 4, True),
        (None, None, 4, True),
        (float("nan"), None, 4, True),
        (None, float("nan"), 4, True),
        ("NaN", float("nan"), 4, True),
        ("", None, 4, True),
        (0, None, 4, False),
        (None, 0, 4, False),
        (0.0, float("nan"), 4, False),
        ("-", "-", 4, True),
        ("-", "+", 4, False),
        ({"a": 1}, 1, 4, False),
        # numbers beyond floats, infinities, signed zero, other scripts, digit groups (the stated rule)
        pytest.param(10**400, 10**400, 4, True, id="huge-int-1"),
        pytest.param(10**400, 10**400 + 1, 4, False, id="huge-int-2"),
        pytest.param("1" + "0" * 400, 10**400, 4, True, id="huge-int-3"),
        pytest.param(10**400, float("inf"), 4, False, id="huge-int-4"),
        pytest.param(10**400, 1e300, 4, False, id="huge-int-5"),
        pytest.param(-(10**400), float("-inf"), 4, False, id="huge-int-6"),
        pytest.param(10**5000, 5, 4, False, id="int-of-5000-digits"),
        ("1e400", float("inf"), 4, False),
        ("1e400", "1e400", 4, True),
        ("inf", float("inf"), 4, True),
        ("-Infinity", float("-inf"), 4, True),
        (float("-inf"), float("inf"), 4, False),
        ("-0", 0, 4, True),
        (-0.0, 0, 4, True),
        ("-nan", None, 4, True),
        ("٢٤٠", 240, 4, True),
        ("２４０", 240, 4, True),
        ("1_000", 1000, 4, True),
        ("51_996.97", 51996.97, 2, True),
        ("1__000", 1000, 4, False),
        ("_1000", 1000, 4, False),
    ],
)
def test_scalars_match(pred: Any, ref: Any, precision: int, expected: bool) -> None:
    assert scalars_match(pred, ref, precision=precision) is expected


def test_normalize_label() -> None:
    assert normalize_label("  Hello,   World! ") == "hello world"
    assert normalize_label("non-significant") == "non significant"


def test_precision_none_means_default_and_bad_precision_raises() -> None:
    assert compare_structured(1.00004, 1.0, precision=None).correct is True
    assert compare_structured(1.00006, 1.0, precision=None).correct is False
    with pytest.raises(ValueError, match="precision=-1"):
        compare_structured(1, 1, precision=-1)
    with pytest.raises(ValueError, match="precision=2.5"):
        compare_structured(1, 1, precision=2.5)  # type: ignore[arg-type]


# ---- Hypothesis properties -------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**9), max_value=10**9),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.text(max_size=12),
)
_keys = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
_json_like = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json_like, st.integers(min_value=0, max_value=8))
def test_property_answer_matches_itself(value: Any, precision: int) -> None:
    result = compare_structured(value, value, precision=precision)
    assert result.correct is True
    assert result.score == 1.0


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(_keys, _json_like, min_size=1, max_size=4),
    st.dictionaries(_keys, _json_like, min_size=1, max_size=4),
    st.dictionaries(st.text(alphabet="XYZ", min_size=1, max_size=3), _scalars, min_size=1, max_size=3),
)
def test_property_extra_fields_never_change_the_verdict(predicted: dict, reference: dict, extra: dict) -> None:
    base = compare_structured(predicted, reference)
    # extra keys use an alphabet that no reference key (lower-case a-h) can normalise to
    with_extra = compare_structured({**predicted, **extra}, reference)
    assert with_extra == base


@settings(max_examples=500, deadline=None)
@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.integers(min_value=0, max_value=6),
    st.floats(min_value=-0.49, max_value=0.49),
)
def test_property_rounding_noise_below_half_unit_matches(x: float, precision: int, noise_units: float) -> None:
    reference = round(x, precision)
    predicted = reference + noise_units * 10.0**-precision
    assert compare_structured({"v": predicted}, {"v": reference}, precision=precision).correct is True


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.integers(min_value=0, max_value=6),
    st.floats(min_value=1.01, max_value=50),
)
def test_property_off_by_a_unit_or_more_does_not_match(x: float, precision: int, units: float) -> None:
    reference = round(x, precision)
    predicted = reference + units * 10.0**-precision
    assert compare_structured({"v": predicted}, {"v": reference}, precision=precision).correct is False


@settings(max_examples=300, deadline=None)
@given(_json_like, _json_like)
def test_property_score_is_a_fraction_and_correct_means_full_score(predicted: Any, reference: Any) -> None:
    result = compare_structured(predicted, reference)
    assert 0.0 <= result.score <= 1.0
    assert result.correct == (result.score == 1.0)
    assert len(result.fields) >= 1
    assert math.isclose(result.score, sum(result.fields.values()) / len(result.fields))


def test_grade_structured_never_raises_on_out_of_range_answers() -> None:
    """A worker answer ``10**400`` (and its kin) is graded, not a crash of the whole evaluation."""
    turns = [SimpleNamespace(turn_id="t1", precision=None)]
    task = SimpleNamespace(
        id="T", turns=turns, load_answers=lambda: {"t1": SimpleNamespace(answer={"a": 240, "b": 1.5, "c": "x"})}
    )
    answer = {"a": 10**400, "b": float("nan"), "c": float("-inf")}
    result = grade_structured({"t1": answer}, task)
    assert result.valid and result.score == 0.0
    assert result.details["turns"]["t1"]["fields"] == {"a": False, "b": False, "c": False}
    result = grade_structured({"t1": {"a": "٢٤٠", "b": "1_5e-1_0_0", "c": "X"}}, task)
    assert result.details["turns"]["t1"]["fields"] == {"a": True, "b": False, "c": True}


def test_numbers_beyond_the_int_to_text_limit_never_raise() -> None:
    """Python refuses ``str()`` of an int over 4,300 digits; a set member, key or Fraction that size still grades."""
    huge = Fraction(10**5000, 3)
    assert compare_structured({"s": {huge, 2}}, {"s": {2, huge}}).correct
    assert not compare_structured({"s": {huge}}, {"s": {Fraction(10**5000, 7)}}).correct
    result = compare_structured({10**5000: 1}, {10**5000: 1, "b": 2})
    assert result.fields == {"<int beyond 4300 digits>": True, "b": False}


_wild_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.from_regex(r"\A[ +\-]?[0-9٠-٩_]{0,6}[.eE_]?[0-9٠-٩_+\-]{0,5}(nan|inf|e400)?\Z"),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_wild_numbers, _json_like), st.one_of(_wild_numbers, _json_like), _wild_numbers, _wild_numbers)
def test_property_grader_never_raises_on_any_number_or_text(predicted: Any, reference: Any, x: Any, y: Any) -> None:
    result = compare_structured({"v": predicted, "s": {x}, "w": [x]}, {"v": reference, "s": {y, 1}, "w": [y]})
    assert set(result.fields) >= {"s", "w.0"} and 0.0 <= result.score <= 1.0
    assert scalars_match(x, y) is scalars_match(y, x)
