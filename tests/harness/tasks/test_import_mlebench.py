"""MLE-bench importer, end to end on fixtures/mlebench (prepare, validate, grade with the competition's grade.py)."""

from __future__ import annotations

import shutil
import sys

import pandas as pd
import pytest
from task_builders import FIXTURES

from harness.tasks import grade_task, load_task
from harness.tasks.importers import ImporterError, ImportOptions, run_import

SRC = FIXTURES / "mlebench" / "tiny-spaceship"
RAW = FIXTURES / "mlebench" / "raw"


@pytest.fixture
def task(tmp_path):
    report = run_import("mlebench", ImportOptions(src=SRC, raw=RAW, out=tmp_path / "out"))
    return load_task(report.written[0])


def test_prepare_ran_and_the_task_is_an_artifact_task(task):
    assert (task.id, task.kind) == ("mlebench-tiny-spaceship", "artifact")
    assert sorted(p.name for p in task.public_dir.iterdir()) == ["sample_submission.csv", "test.csv", "train.csv"]
    assert sorted(p.name for p in task.private_dir.iterdir()) == ["test.csv"]
    public_test = pd.read_csv(task.public_dir / "test.csv")
    assert "Transported" not in public_test.columns and len(public_test) == 10  # 25% of 40 rows held out
    assert task.config.grader == "file:grade.py:grade" and task.config.grader_style == "mlebench"
    sub = task.submission
    assert (sub.filename, sub.id_column, sub.target_columns, sub.metric) == (
        "submission.csv",
        "PassengerId",
        ("Transported",),
        "accuracy",
    )
    assert (task.root / "grade.py").is_file() and (task.root / "prepare.py").is_file()
    assert "## Submission" in task.description and "Tiny Spaceship" in task.description
    assert "mlebench" not in sys.modules


def test_grading_with_the_competitions_grader(task, tmp_path):
    answers = pd.read_csv(task.load_answers())
    perfect = tmp_path / "submission.csv"
    answers[["PassengerId", "Transported"]].to_csv(perfect, index=False)
    assert grade_task(task, str(perfect)).score == 1.0
    flipped = answers[["PassengerId", "Transported"]].assign(Transported=~answers["Transported"])
    flipped.to_csv(perfect, index=False)
    assert grade_task(task, str(perfect)).score == 0.0
    baseline = grade_task(task, str(task.submission.sample))  # all False
    assert baseline.score == pytest.approx((~answers["Transported"]).mean())
    answers[["PassengerId"]].assign(Transported=None).to_csv(perfect, index=False)
    invalid = grade_task(task, str(perfect))
    assert (invalid.valid, invalid.score) == (False, None)
    assert "missing values" in invalid.details["error"]


def test_raw_is_required_and_a_failing_preparer_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ImporterError, match="needs --raw DIR"):
        run_import("mlebench", ImportOptions(src=SRC, out=out))
    empty_raw = tmp_path / "raw"
    empty_raw.mkdir()
    with pytest.raises(ImporterError, match="prepare.py.*failed"):
        run_import("mlebench", ImportOptions(src=SRC, raw=empty_raw, out=out))
    assert not (out / "mlebench-tiny-spaceship").exists()


def test_not_a_competition_folder(tmp_path):
    src = tmp_path / "comp"
    shutil.copytree(SRC, src)
    (src / "grade.py").unlink()
    with pytest.raises(ImporterError, match="grade.py is missing"):
        run_import("mlebench", ImportOptions(src=src, raw=RAW, out=tmp_path / "out"))
