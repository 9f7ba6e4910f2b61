"""The Task object: fields, private answers per kind, folder discovery and grader references."""

from __future__ import annotations

from pathlib import Path

import pytest
from task_builders import edit_config

from harness.tasks import DEFAULT_GRADERS, TaskConfigError, TurnReference, find_task_dirs, load_task, load_tasks
from harness.tasks.grader_ref import GraderRef

REPO = Path(__file__).resolve().parents[3]


def test_closed_form_task(make_task):
    task = load_task(make_task("closed_form", answers=[("b", "2"), ("a", "")]))
    assert (task.id, task.kind, task.name) == ("toy-closed", "closed_form", "toy-closed")
    assert task.public_dir == task.root / "public" and task.private_dir == task.root / "private"
    assert task.description.startswith("# Toy task")
    assert task.answer_format == "@mean_fare[value] rounded to 2 decimals"
    assert task.submission is None and task.turns == ()
    assert task.load_answers() == [("b", "2"), ("a", "")]  # order kept, empty answers allowed
    assert str(task.grader) == DEFAULT_GRADERS["closed_form"]


def test_multi_turn_task(make_task):
    task = load_task(make_task("multi_turn"))
    assert [t.turn_id for t in task.turns] == ["1", "2", "3"]
    assert task.turns[1].precision == 2 and task.turns[0].precision is None
    assert task.turns[2].depends_on == ("1", "2") and task.turns[2].relation == "combine"
    answers = task.load_answers()
    assert answers["2"] == TurnReference(code="result = {'mean_x': 2.0}", answer={"mean_x": 2.0})


def test_artifact_task_resolves_submission(make_task):
    task = load_task(make_task("artifact"))
    sub = task.submission
    assert sub.filename == "submission.csv"
    assert sub.sample == task.public_dir / "sample_submission.csv" and sub.sample.is_absolute()
    assert sub.id_column == "id"
    assert sub.target_columns == ("label",)  # every sample column but the id column
    assert sub.metric == "accuracy" and sub.higher_is_better is True
    assert task.load_answers() == task.private_dir / "answers.csv"


@pytest.mark.parametrize(
    ("metric", "explicit", "expected"), [("rmse", None, False), ("r2", None, True), ("rmse", True, True)]
)
def test_higher_is_better_follows_the_metric_unless_set(make_task, metric, explicit, expected):
    task_dir = make_task("artifact")
    submission = {"id_column": "id", "metric": metric}
    if explicit is not None:
        submission["higher_is_better"] = explicit
    edit_config(task_dir, submission=submission)
    assert load_task(task_dir).submission.higher_is_better is expected


def test_load_answers_reports_a_file_removed_after_loading(make_task):
    task = load_task(make_task("closed_form"))
    (task.private_dir / "answers.json").unlink()
    with pytest.raises(TaskConfigError, match="private/answers.json"):
        task.load_answers()


def test_task_is_frozen(make_task):
    task = load_task(make_task("closed_form"))
    with pytest.raises(AttributeError):
        task.id = "other"


def test_builtin_task_is_valid():
    task = load_task(REPO / "harness" / "builtin_tasks" / "retail-sales")
    assert task.kind == "multi_turn" and len(task.turns) == 5
    assert [t.relation for t in task.turns] == ["init", "progress", "branch", "invalidate", "combine"]


def test_find_task_dirs_and_load_tasks(make_task, tmp_path):
    first, second = make_task("closed_form", name="a"), make_task("artifact", name="nested/b")
    assert find_task_dirs(first) == [first]
    assert find_task_dirs(tmp_path) == [first, second]
    assert [t.id for t in load_tasks(tmp_path)] == ["toy-closed", "toy-artifact"]
    make_task("closed_form", name="c")
    with pytest.raises(TaskConfigError, match="duplicate task id 'toy-closed'"):
        load_tasks(tmp_path)


def test_missing_folder_is_one_clear_error(tmp_path):
    with pytest.raises(TaskConfigError, match="does not exist or is not a folder"):
        load_task(tmp_path / "nope")


@pytest.mark.parametrize(
    ("ref", "file", "module", "function"),
    [
        ("file:grade.py:grade", "grade.py", None, "grade"),
        ("file:sub/dir/score.py:score_fn", "sub/dir/score.py", None, "score_fn"),
        ("harness.evaluation.graders:grade_dabench", None, "harness.evaluation.graders", "grade_dabench"),
    ],
)
def test_grader_reference_parsing(ref, file, module, function):
    parsed = GraderRef.parse(ref)
    assert (parsed.file, parsed.module, parsed.function) == (file, module, function)
    assert str(parsed) == ref


@pytest.mark.parametrize(
    "ref", ["grade", "file:grade.py", "file:grade.txt:grade", "pkg.mod:", "bad-mod:fn", "file::grade"]
)
def test_malformed_grader_references(ref):
    with pytest.raises(ValueError, match="is not a|not a .py file"):
        GraderRef.parse(ref)


def test_file_grader_check_does_not_run_the_file(make_task, tmp_path):
    task_dir = make_task("closed_form")
    marker = tmp_path / "ran"
    (task_dir / "grade.py").write_text(f"open({str(marker)!r}, 'w').close()\n\ndef grade(s, t):\n    return 1.0\n")
    edit_config(task_dir, grader="file:grade.py:grade")
    task = load_task(task_dir)
    assert not marker.exists()  # validation parsed the file without executing it
    assert task.grader.load(task.root)("x", task) == 1.0
    assert marker.exists()


@pytest.mark.parametrize("kind", ["closed_form", "multi_turn", "artifact"])
def test_the_contract_renders_a_loaded_task_without_private_answers(make_task, kind):
    """The Task object satisfies the contract renderer's duck-typed interface, and nothing private leaks."""
    from harness.tasks.contract import render_contract
    from harness.tasks.profile import profile_directory

    task_dir = make_task(kind, answers=[("mean_fare", "987.654")])
    if kind == "artifact":
        (task_dir / "private" / "answers.csv").write_text("id,label\n1,SECRET\n2,SECRET\n3,SECRET\n4,SECRET\n")
    task = load_task(task_dir)
    text = render_contract(task, profile_directory(task.public_dir), turn_id="2" if kind == "multi_turn" else None)
    assert task.description.strip() in text
    assert "987.654" not in text and "SECRET" not in text and "mean_x': 2.0" not in text
