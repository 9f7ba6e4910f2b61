"""Tests of the artifact metrics on hand-computed values."""

from __future__ import annotations

import math

import pytest

from harness.evaluation.dabench import values_match
from harness.evaluation.metrics import (
    METRICS,
    accuracy,
    canonical_label,
    f1_macro,
    get_metric,
    mae,
    mse,
    numeric_column_errors,
    r2,
    rmse,
)


def test_canonical_label() -> None:
    assert canonical_label("1.0") == "1"
    assert canonical_label(" 1 ") == "1"
    assert canonical_label("0.50") == "0.5"
    assert canonical_label(" cat ") == "cat"
    assert canonical_label("Cat") != canonical_label("cat")


def test_accuracy_hand_computed() -> None:
    assert accuracy(["a", "b", "1", "c"], ["a", "x", "1.0", "c"]) == pytest.approx(3 / 4)


def test_f1_macro_hand_computed() -> None:
    # labels a, b: a: TP=2 FP=1 FN=0 -> 4/5; b: TP=0 FP=0 FN=1 -> 0; mean 0.4
    assert f1_macro(["a", "a", "b"], ["a", "a", "a"]) == pytest.approx(0.4)
    # a label only predicted still counts: a: TP=1 FP=0 FN=1 -> 2/3, z: TP=0 FP=1 FN=0 -> 0
    assert f1_macro(["a", "a"], ["a", "z"]) == pytest.approx(1 / 3)
    assert f1_macro([1, 0, 1], ["1", "0", "1"]) == 1.0


def test_regression_metrics_hand_computed() -> None:
    truth, guess = ["1", "2", "3", "4"], [2.0, 2.0, 1.0, 4.0]  # errors 1, 0, -2, 0
    assert mse(truth, guess) == pytest.approx(5 / 4)
    assert rmse(truth, guess) == pytest.approx(math.sqrt(5 / 4))
    assert mae(truth, guess) == pytest.approx(3 / 4)
    # SS_tot = 2.25 + 0.25 + 0.25 + 2.25 = 5, SS_res = 5 -> r2 = 0
    assert r2(truth, guess) == pytest.approx(0.0)
    assert r2(truth, truth) == pytest.approx(1.0)
    assert r2([3, 3], [3, 3]) == 1.0
    assert r2([3, 3], [3, 4]) == 0.0


def test_metric_input_errors() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        accuracy(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        rmse([], [])


def test_get_metric_lists_valid_names() -> None:
    assert get_metric("rmse").higher_is_better is False
    assert get_metric("accuracy").numeric is False
    with pytest.raises(ValueError, match=r"unknown metric 'auc'; valid metrics: accuracy, .*rmse"):
        get_metric("auc")
    assert set(METRICS) >= {"accuracy", "rmse", "mae", "f1"}


def test_numeric_column_errors() -> None:
    assert numeric_column_errors(["1", " 2.5", "-3e2"]) == []
    assert numeric_column_errors(["1", "abc", "", "nan", "inf", "x"]) == ["abc", "", "nan"]


def test_numbers_read_one_way_in_metrics_and_dabench() -> None:
    """Digit groups and other scripts pass validation and the metric reads them (no crash after validation); an
    out-of-range text is refused by validation."""
    predictions = ["1_000", "٢٤٠", "51_996.97"]
    assert numeric_column_errors(predictions) == []
    assert get_metric("mae").fn(["1000", "240", "51996.97"], predictions) == 0.0
    assert canonical_label("1_000") == "1000" and canonical_label("1" + "0" * 30) == "1" + "0" * 30
    assert numeric_column_errors(["1e400", "1" * 400]) == ["1e400", "1" * 400]
    assert values_match("٢٤٠", "240") and values_match("1_000", "1000") and not values_match("1e400", "inf")
