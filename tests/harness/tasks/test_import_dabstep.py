"""DABstep importer, end to end on fixtures/dabstep_mini (import, validate, grade)."""

from __future__ import annotations

import pytest
from task_builders import FIXTURES

from harness.evaluation.dabench import render_answers
from harness.tasks import grade_task, load_task
from harness.tasks.importers import ImporterError, ImportOptions, run_import

SRC = FIXTURES / "dabstep_mini"


@pytest.fixture
def report(tmp_path):
    return run_import("dabstep", ImportOptions(src=SRC, out=tmp_path / "out"))


def test_rows_become_closed_form_tasks(report):
    assert [p.name for p in report.written] == ["dabstep-1", "dabstep-2", "dabstep-3", "dabstep-4"]
    assert [sid for sid, _ in report.skipped] == ["5", "6"]
    assert "']'" in report.skipped[0][1] and "empty answer" in report.skipped[1][1]
    assert "skipped 2" in report.summary()
    task = load_task(report.written[1])
    assert task.kind == "closed_form"
    assert task.answer_format.startswith("@answer[value]") and "rounded to 2 decimals" in task.answer_format
    assert task.load_answers() == [("answer", "74.10")]
    assert sorted(p.name for p in task.public_dir.iterdir()) == ["manual.md", "payments.csv"]
    assert "`payments.csv`" in task.description and "average transaction amount" in task.description
    assert task.config.metadata == {"source": "DABstep-style jsonl", "dabstep_id": "2", "level": "easy"}


def test_gold_answers_grade_correct_and_others_wrong(report):
    for task_dir in report.written:
        task = load_task(task_dir)
        gold = task.load_answers()
        assert grade_task(task, f"The answer is {render_answers(gold)}").score == 1.0, task.id
        assert grade_task(task, "@answer[Not Applicable]").score == 0.0, task.id
    numeric = load_task(report.written[1])
    assert grade_task(numeric, "@answer[74.1]").score == 1.0  # numbers compare as numbers
    assert load_task(report.written[0]).load_answers() == [("answer", "10")]  # JSON number -> string


def test_ids_selection_and_context_flag(tmp_path):
    out = tmp_path / "out"
    report = run_import(
        "dabstep", ImportOptions(src=SRC / "tasks.jsonl", out=out, ids=("3",), context=SRC / "context")
    )
    assert [p.name for p in report.written] == ["dabstep-3"]
    with pytest.raises(ImporterError, match="--ids 42 not found"):
        run_import("dabstep", ImportOptions(src=SRC, out=out, ids=("42",)))
    with pytest.raises(ImporterError, match="pass --context DIR"):
        run_import("dabstep", ImportOptions(src=SRC, out=out, context=tmp_path / "nope"))


def test_rows_missing_fields_are_reported(tmp_path):
    src = tmp_path / "tasks.jsonl"
    src.write_text('{"task_id": "1", "question": "q"}\n')
    (tmp_path / "context").mkdir()
    with pytest.raises(ImporterError, match=r"missing \['answer', 'guidelines'\]"):
        run_import("dabstep", ImportOptions(src=src, out=tmp_path / "out"))
