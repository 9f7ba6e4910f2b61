"""Tests of the built-in graders with small fake task objects (no dependency on harness.tasks)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.evaluation import GRADERS, InvalidSubmissionError, get_grader, grade
from harness.evaluation.graders import grade_csv_submission, grade_dabench, grade_structured


def _closed_form_task(labels: list[tuple[str, str]]) -> SimpleNamespace:
    return SimpleNamespace(id="q1", kind="closed_form", load_answers=lambda: labels, turns=(), submission=None)


def _multi_turn_task(answers: dict[str, dict], precisions: dict[str, int | None]) -> SimpleNamespace:
    refs = {tid: SimpleNamespace(answer=ans, code="...") for tid, ans in answers.items()}
    turns = [SimpleNamespace(turn_id=tid, precision=p) for tid, p in precisions.items()]
    return SimpleNamespace(id="mt", kind="multi_turn", load_answers=lambda: refs, turns=turns, submission=None)


def _artifact_task(
    tmp_path: Path,
    *,
    metric: str,
    answers: str,
    sample: str,
    id_column: str | None = "id",
    targets: tuple[str, ...] = ("y",),
) -> SimpleNamespace:
    (tmp_path / "public").mkdir()
    (tmp_path / "private").mkdir()
    (tmp_path / "public" / "sample_submission.csv").write_text(sample)
    (tmp_path / "private" / "answers.csv").write_text(answers)
    spec = SimpleNamespace(
        filename="submission.csv",
        sample=tmp_path / "public" / "sample_submission.csv",
        id_column=id_column,
        target_columns=targets,
        metric=metric,
        higher_is_better=None,
    )
    return SimpleNamespace(
        id="art", kind="artifact", load_answers=lambda: tmp_path / "private" / "answers.csv", turns=(), submission=spec
    )


def _submit(tmp_path: Path, text: str) -> Path:
    out = tmp_path / "work"
    out.mkdir(exist_ok=True)
    (out / "submission.csv").write_text(text)
    return out / "submission.csv"


# ---- dabench ------------------------------------------------------------------------------------------------


def test_dabench_correct_and_wrong() -> None:
    task = _closed_form_task([("mean", "2.50"), ("label", "high")])
    right = grade_dabench("so @mean[2.5] and @label[high]", task)
    assert (right.valid, right.score, right.task_id) == (True, 1.0, "q1")
    assert right.details["per_answer"] == {"mean": True, "label": True}
    wrong = grade_dabench("@mean[2.5] @label[low]", task)
    assert wrong.score == 0.0
    assert (wrong.details["n_correct"], wrong.details["n_total"]) == (1, 2)
    assert wrong.details["predicted"] == {"mean": "2.5", "label": "low"}


def test_dabench_no_answer_is_valid_but_wrong() -> None:
    result = grade_dabench("I could not compute it.", _closed_form_task([("mean", "2.5")]))
    assert result.valid is True and result.score == 0.0 and result.details["predicted"] == {}


def test_dabench_non_text_is_invalid() -> None:
    with pytest.raises(InvalidSubmissionError, match="needs the response text"):
        grade_dabench(None, _closed_form_task([("mean", "2.5")]))
    result = grade("dabench", {"mean": 2.5}, _closed_form_task([("mean", "2.5")]))
    assert (result.valid, result.score) == (False, None)
    assert "response text" in result.details["error"]


# ---- structured ---------------------------------------------------------------------------------------------


def test_structured_per_turn_scores_and_precision() -> None:
    task = _multi_turn_task(
        {"t1": {"mean": 3.14, "unit": "kg"}, "t2": {"n": 10}, "t3": {"ratio": 0.3333}},
        {"t1": 2, "t2": None, "t3": None},
    )
    submission = {"t1": {"mean": 3.1449, "unit": " KG "}, "t2": {"n": 11}, "t3": {"ratio": 0.33334}, "t9": {}}
    result = grade_structured(submission, task)
    assert result.valid is True
    assert result.score == pytest.approx(2 / 3)
    turns = result.details["turns"]
    assert turns["t1"] == {"score": 1.0, "correct": True, "fields": {"mean": True, "unit": True}}
    assert turns["t2"] == {"score": 0.0, "correct": False, "fields": {"n": False}}
    assert turns["t3"]["correct"] is True  # default precision 4: 0.33334 -> 0.3333
    assert result.details["ignored_turns"] == ["t9"]
    assert (result.details["n_correct"], result.details["n_turns"]) == (2, 3)


def test_structured_missing_and_non_dict_turns_are_wrong() -> None:
    task = _multi_turn_task({"t1": {"a": 1, "b": 2}, "t2": {"c": 3}}, {"t1": None, "t2": None})
    result = grade_structured({"t1": [1, 2]}, task)
    assert result.score == 0.0
    assert result.details["turns"]["t1"] == {"score": 0.0, "correct": False, "fields": {"a": False, "b": False}}
    assert result.details["turns"]["t2"]["missing"] is True


def test_structured_non_dict_submission_is_invalid() -> None:
    task = _multi_turn_task({"t1": {"a": 1}}, {"t1": None})
    with pytest.raises(InvalidSubmissionError, match="needs a dict turn_id -> answer dict, got list"):
        grade_structured([{"a": 1}], task)


# ---- csv_submission -----------------------------------------------------------------------------------------

SAMPLE = "id,y\na,0\nb,0\nc,0\nd,0\n"
ANSWERS = "id,y\na,1.0\nb,2.0\nc,3.0\nd,4.0\n"


def test_csv_submission_rmse_joined_on_id(tmp_path: Path) -> None:
    task = _artifact_task(tmp_path, metric="rmse", answers=ANSWERS, sample=SAMPLE)
    # shuffled rows; errors after the join on id: a 1, b 0, c -2, d 0 -> rmse sqrt(5/4)
    path = _submit(tmp_path, "y,id\n4,d\n1,c\n2,a\n2,b\n")
    result = grade_csv_submission(path, task)
    assert result.valid is True
    assert result.score == pytest.approx((5 / 4) ** 0.5)
    assert result.details["metric"] == "rmse" and result.details["higher_is_better"] is False
    assert result.details["n_rows"] == 4
    # a directory holding submission.csv grades the same
    assert grade_csv_submission(path.parent, task).score == pytest.approx(result.score)


def test_csv_submission_accuracy_by_position_and_mean_over_columns(tmp_path: Path) -> None:
    task = _artifact_task(
        tmp_path,
        metric="accuracy",
        id_column=None,
        targets=("y", "z"),
        answers="y,z\ncat,1\ndog,0\ncat,1\n",
        sample="y,z\nx,0\nx,0\nx,0\n",
    )
    result = grade_csv_submission(_submit(tmp_path, "y,z\ncat,1.0\ncat,0\ncat,0\n"), task)
    assert result.details["per_column"] == {"y": pytest.approx(2 / 3), "z": pytest.approx(2 / 3)}
    assert result.score == pytest.approx(2 / 3)


def test_csv_submission_invalid_cases(tmp_path: Path) -> None:
    task = _artifact_task(tmp_path, metric="mae", answers=ANSWERS, sample=SAMPLE)
    with pytest.raises(InvalidSubmissionError, match="non-numeric values in column 'y'"):
        grade_csv_submission(_submit(tmp_path, "id,y\na,1\nb,two\nc,3\nd,4\n"), task)
    with pytest.raises(InvalidSubmissionError, match="1 blank value"):
        grade_csv_submission(_submit(tmp_path, "id,y\na,1\nb,\nc,3\nd,4\n"), task)
    with pytest.raises(InvalidSubmissionError, match="has 3 data rows"):
        grade_csv_submission(_submit(tmp_path, "id,y\na,1\nb,2\nc,3\n"), task)
    with pytest.raises(InvalidSubmissionError, match="needs the path"):
        grade_csv_submission(42, task)
    result = grade("csv_submission", tmp_path / "work" / "missing.csv", task)
    assert result.valid is False and "missing.csv" in result.details["error"]


def test_csv_submission_unknown_metric_lists_valid_names(tmp_path: Path) -> None:
    task = _artifact_task(tmp_path, metric="auc", answers=ANSWERS, sample=SAMPLE)
    with pytest.raises(ValueError, match=r"unknown metric 'auc'; valid metrics: .*rmse"):
        grade_csv_submission(_submit(tmp_path, ANSWERS), task)


def test_csv_submission_task_higher_is_better_overrides(tmp_path: Path) -> None:
    task = _artifact_task(tmp_path, metric="f1", answers="id,y\na,1\nb,0\n", sample="id,y\na,0\nb,0\n")
    task.submission.higher_is_better = True
    result = grade_csv_submission(_submit(tmp_path, "id,y\na,1\nb,0\n"), task)
    assert result.score == 1.0 and result.details["higher_is_better"] is True


# ---- registry -----------------------------------------------------------------------------------------------


def test_registry_and_unknown_grader() -> None:
    assert set(GRADERS) == {"dabench", "structured", "csv_submission"}
    assert get_grader("structured") is grade_structured
    with pytest.raises(ValueError, match=r"unknown grader 'exact'; valid graders: csv_submission, dabench, struct"):
        get_grader("exact")


def test_grade_passes_through_task_errors() -> None:
    def broken(submission: Any, task: Any) -> Any:
        raise ValueError("task config is broken")

    with pytest.raises(ValueError, match="task config is broken"):
        grade(broken, "x", _closed_form_task([]))


def test_grade_result_is_json_serialisable(tmp_path: Path) -> None:
    task = _multi_turn_task({"t1": {"a": 1}}, {"t1": None})
    line = grade("structured", {"t1": {"a": 1}}, task).to_json()
    assert '"score": 1.0' in line and '"valid": true' in line
