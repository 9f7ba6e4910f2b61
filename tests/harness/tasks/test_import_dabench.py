"""DABench importer on the real dev set (skipped when it is absent from ``task_builders.DABENCH_DIR``)."""

from __future__ import annotations

import json
import math

import pytest
from task_builders import DABENCH_DIR

from harness.evaluation.dabench import render_answers
from harness.tasks import grade_task, load_task
from harness.tasks.importers import ImporterError, ImportOptions, run_import

pytestmark = pytest.mark.skipif(not DABENCH_DIR.exists(), reason=f"DABench dev set not found at {DABENCH_DIR}")


@pytest.fixture(scope="session")
def dabench_tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dabench")
    report = run_import("dabench", ImportOptions(src=DABENCH_DIR, out=out))
    return [load_task(path) for path in report.written]


def _perturb(value: str) -> str:
    """A different answer: a finite number moved by 1, anything else (text, "nan", "") with a letter appended."""
    try:
        number = float(value)
    except ValueError:
        return value + "x"
    return str(number + 1) if math.isfinite(number) else value + "x"


def test_all_dev_questions_import_and_validate(dabench_tasks):
    n_questions = sum(1 for line in (DABENCH_DIR / "questions.jsonl").open() if line.strip())
    assert len(dabench_tasks) == n_questions == 257
    assert len({t.id for t in dabench_tasks}) == 257
    for task in dabench_tasks:
        assert task.kind == "closed_form" and task.answer_format
        assert task.config.metadata["license"] == "CC BY-NC 4.0"
        (table,) = list(task.public_dir.iterdir())
        assert table.name == task.config.metadata["file_name"]
    assert sum(" " in t.config.metadata["file_name"] for t in dabench_tasks) > 0  # names with spaces survive


def test_gold_answers_grade_correct_and_a_perturbed_one_wrong(dabench_tasks):
    for task in dabench_tasks:
        gold = task.load_answers()
        assert grade_task(task, render_answers(gold)).score == 1.0, task.id
        # perturb the last pair: with repeated names (id 734) the last value is the one that counts
        perturbed = [*gold[:-1], (gold[-1][0], _perturb(gold[-1][1]))]
        assert grade_task(task, render_answers(perturbed)).score == 0.0, task.id


def test_labels_are_verbatim_including_the_quirks(dabench_tasks):
    by_id = {t.id: t for t in dabench_tasks}
    labels = {row["id"]: row["common_answers"] for row in map(json.loads, (DABENCH_DIR / "labels.jsonl").open())}
    for qid in (116, 352, 473):
        answers = by_id[f"dabench-{qid}"].load_answers()
        assert [value for _, value in answers] == [""]
    assert by_id["dabench-273"].load_answers()[-1] == ("outlier_list", "[")
    assert "label_note" in by_id["dabench-273"].config.metadata
    assert (
        grade_task(by_id["dabench-273"], "@correlation_coefficient[0.922] @outlier_count[0] @outlier_list[[]]").score
        == 1.0
    )
    assert by_id["dabench-734"].load_answers() == [tuple(pair) for pair in labels[734]]


def test_ids_selection_and_no_silent_overwrite(tmp_path):
    out = tmp_path / "out"
    report = run_import("dabench", ImportOptions(src=DABENCH_DIR, out=out, ids=("0", "5")))
    assert [p.name for p in report.written] == ["dabench-0", "dabench-5"]
    assert "Calculate the mean fare" in load_task(report.written[0]).description
    with pytest.raises(ImporterError, match="--overwrite"):
        run_import("dabench", ImportOptions(src=DABENCH_DIR, out=out, ids=("5",)))
    foreign = out / "dabench-6"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ImporterError, match="not task folders"):
        run_import("dabench", ImportOptions(src=DABENCH_DIR, out=out, ids=("6",), overwrite=True))
    assert (foreign / "notes.txt").read_text() == "mine"
    with pytest.raises(ImporterError, match="--ids 99999 not found"):
        run_import("dabench", ImportOptions(src=DABENCH_DIR, out=out, ids=("99999",)))
