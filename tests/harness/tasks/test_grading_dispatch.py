"""Grading dispatch: grader resolution, result wrapping, invalid submissions and the MLE-bench style."""

from __future__ import annotations

import sys

import pytest
from task_builders import edit_config

from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.result import GradeResult
from harness.tasks import grade_task, load_task, resolve_grader
from harness.tasks.mlebench_compat import mlebench_shim


def _with_grader(make_task, kind: str, source: str, **config):
    task_dir = make_task(kind)
    (task_dir / "grade.py").write_text(source, encoding="utf-8")
    edit_config(task_dir, grader="file:grade.py:grade", **config)
    return load_task(task_dir)


def test_default_graders_per_kind(make_task, tmp_path):
    closed = load_task(make_task("closed_form", name="c", answers=[("mean_fare", "34.65"), ("n", "3")]))
    assert grade_task(closed, "@mean_fare[34.650000001] and @n[3]").score == 1.0
    assert grade_task(closed, "@mean_fare[34.65]").score == 0.0  # one sub-answer missing: wrong, not invalid
    multi = load_task(make_task("multi_turn", name="m"))
    partial = grade_task(multi, {"1": {"n": 3}, "2": {"mean_x": 2.004}})
    assert partial.valid and partial.score == pytest.approx(2 / 3)  # turn 3 is missing, so wrong
    assert partial.details["turns"]["3"]["correct"] is False
    artifact = load_task(make_task("artifact", name="a"))
    submission = tmp_path / "submission.csv"
    submission.write_text((artifact.private_dir / "answers.csv").read_text())
    result = grade_task(artifact, str(submission))
    assert result.valid and result.score == 1.0
    submission.write_text((artifact.public_dir / "sample_submission.csv").read_text())
    assert grade_task(artifact, str(submission)).score == 0.5


def test_a_float_is_wrapped(make_task):
    task = _with_grader(make_task, "closed_form", "def grade(submission, task):\n    return len(submission) / 10\n")
    result = grade_task(task, "abc")
    assert result == GradeResult(
        task_id="toy-closed",
        valid=True,
        score=0.3,
        details={"grader": "file:grade.py:grade", "grader_style": "stateguard"},
    )


def test_a_grade_result_passes_through(make_task):
    source = (
        "from harness.evaluation.result import GradeResult\n\n"
        "def grade(submission, task):\n    return GradeResult(task.id, True, 0.5, {'why': submission})\n"
    )
    task = _with_grader(make_task, "closed_form", source)
    assert grade_task(task, "x") == GradeResult("toy-closed", True, 0.5, {"why": "x"})


def test_invalid_submission_error_gives_invalid_result(make_task):
    source = (
        "from harness.evaluation.errors import InvalidSubmissionError\n\n"
        "def grade(submission, task):\n    raise InvalidSubmissionError('no answer line; add one')\n"
    )
    task = _with_grader(make_task, "closed_form", source)
    result = grade_task(task, "x")
    assert (result.valid, result.score, result.details) == (False, None, {"error": "no answer line; add one"})


@pytest.mark.parametrize(("kind", "submission"), [("closed_form", 3), ("multi_turn", "text"), ("artifact", 1.5)])
def test_wrong_submission_type_is_invalid(make_task, kind, submission):
    task = load_task(make_task(kind))
    result = grade_task(task, submission)
    assert not result.valid and result.score is None
    assert f"a {kind} submission must be" in result.details["error"]


@pytest.mark.parametrize("returned", ["None", "'high'", "float('nan')", "True"])
def test_a_grader_returning_junk_is_a_bug_not_a_grade(make_task, returned):
    task = _with_grader(make_task, "closed_form", f"def grade(submission, task):\n    return {returned}\n")
    with pytest.raises(TypeError, match="must return a GradeResult or a finite number"):
        grade_task(task, "x")


def test_other_grader_exceptions_propagate(make_task):
    task = _with_grader(make_task, "closed_form", "def grade(submission, task):\n    return 1 / 0\n")
    with pytest.raises(ZeroDivisionError):
        grade_task(task, "x")


MLEBENCH_GRADER = """
import pandas as pd
from mlebench.grade_helpers import InvalidSubmissionError
from mlebench.competitions.utils import prepare_for_accuracy_metric


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    if "label" not in submission.columns:
        raise InvalidSubmissionError("submission has no label column")
    inputs = prepare_for_accuracy_metric(submission, answers, target_column="label", id_column="id")
    return float((inputs["y_true"] == inputs["y_pred"]).mean())
"""


def test_mlebench_style_grader(make_task, tmp_path):
    task = _with_grader(make_task, "artifact", MLEBENCH_GRADER, grader_style="mlebench")
    assert "mlebench" not in sys.modules  # the shim is only active while loading/calling
    grader = resolve_grader(task)
    assert "mlebench" not in sys.modules
    sample = str(task.submission.sample)  # all "a": 2 of the 4 answers
    assert grade_task(task, sample).score == 0.5
    assert grader(str(task.private_dir / "answers.csv"), task) == 1.0
    # the competition's own InvalidSubmissionError is ours, so it yields an invalid result
    no_label = tmp_path / "no_label.csv"
    no_label.write_text("id,guess\n1,a\n2,b\n3,b\n4,a\n")
    result = grade_task(task, str(no_label))
    assert (result.valid, result.details["error"]) == (False, "submission has no label column")
    wrong_rows = tmp_path / "short.csv"
    wrong_rows.write_text("id,label\n1,a\n")
    assert "rows" in grade_task(task, str(wrong_rows)).details["error"]
    missing = grade_task(task, str(tmp_path / "nope.csv"))
    assert not missing.valid and "does not exist" in missing.details["error"]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert not grade_task(task, str(empty)).valid
    assert "mlebench" not in sys.modules


def test_shim_restores_a_previous_module(monkeypatch):
    sentinel = object()
    monkeypatch.setitem(sys.modules, "mlebench.grade_helpers", sentinel)
    with mlebench_shim():
        from mlebench.grade_helpers import InvalidSubmissionError as Shimmed

        assert Shimmed is InvalidSubmissionError
    assert sys.modules["mlebench.grade_helpers"] is sentinel
