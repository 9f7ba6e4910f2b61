"""LongDS importer, end to end on the fixture in fixtures/longds_shop (import, validate, grade)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from task_builders import FIXTURES

from harness.tasks import TaskConfigError, grade_task, load_task
from harness.tasks.importers import ImporterError, ImportOptions, run_import

SRC = FIXTURES / "longds_shop"


@pytest.fixture
def imported(tmp_path):
    report = run_import("longds", ImportOptions(src=SRC, out=tmp_path / "out", task_id="shop"))
    return load_task(report.written[0])


def test_fixture_reference_code_reproduces_its_answers():
    """The fixture is honest: running its turns in one namespace prints exactly the stored answers."""
    namespace: dict = {"BASE_PATH": str(SRC)}
    printed: list = []
    namespace["print_result"] = printed.append
    turns = json.loads((SRC / "task.json").read_text())
    for turn in turns:
        exec(turn["code"], namespace)  # our own fixture code
        assert printed.pop() == turn["answer"], f"turn {turn['turn_id']}"


def test_import_structure(imported):
    task = imported
    assert (task.id, task.kind) == ("shop", "multi_turn")
    assert sorted(p.name for p in (task.public_dir / "data").iterdir()) == ["customers.csv", "orders.csv"]
    assert not any(task.public_dir.rglob("*.json"))  # no reference material leaks into public/
    relations = [(t.turn_id, t.depends_on, t.relation) for t in task.turns]
    assert relations == [
        ("1", (), "init"),  # "Tasks below reuse" names no number
        ("2", ("1",), "progress"),  # "Continue from Task 1"
        ("3", ("1",), "branch"),  # "(T1)"; "Task 5 will compare" is a later turn
        ("4", ("2",), "branch"),  # "Task 4:" is the turn itself; "from Task 2" is not the previous turn
        ("5", ("2", "3", "4"), "combine"),  # "Tasks 2--4"
        ("6", ("2",), "invalidate"),  # explicit relation and depends_on in task.json win over the comments
    ]
    reference = task.load_answers()
    assert reference["6"].answer == {"total_valid": 1014.92}
    assert "print_result(result)" in reference["1"].code
    assert "print_result" in task.description


def test_import_grades_its_own_reference(imported):
    reference = imported.load_answers()
    gold = {turn_id: ref.answer for turn_id, ref in reference.items()}
    assert grade_task(imported, gold).score == 1.0
    stale = dict(gold, **{"6": {"total_valid": 1914.02}})  # the pre-correction total: the contamination case
    result = grade_task(imported, stale)
    assert result.score == pytest.approx(5 / 6) and result.details["turns"]["6"]["correct"] is False
    assert grade_task(imported, ["not", "a", "dict"]).valid is False


def test_default_task_id_and_overwrite(tmp_path):
    out = tmp_path / "out"
    first = run_import("longds", ImportOptions(src=SRC, out=out))
    assert first.written == [out / "longds-longds_shop"]
    with pytest.raises(ImporterError, match="--overwrite"):
        run_import("longds", ImportOptions(src=SRC, out=out))
    again = run_import("longds", ImportOptions(src=SRC, out=out, overwrite=True))
    assert load_task(again.written[0]).id == "longds-longds_shop"


def test_an_inconsistent_explicit_relation_is_rejected_before_writing(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(SRC, src)
    turns = json.loads((src / "task.json").read_text())
    turns[1]["relation"] = "combine"  # one dependency only
    (src / "task.json").write_text(json.dumps(turns))
    with pytest.raises(TaskConfigError, match=r"turns\[1\]\.relation"):
        run_import("longds", ImportOptions(src=src, out=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_non_dict_answers_are_wrapped(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    turns = [{"turn_id": 1, "context": "", "question": "How many?", "code": "print_result(3)", "answer": 3}]
    (src / "task.json").write_text(json.dumps({"name": "Tiny", "turns": turns, "domain": "test"}))
    task = load_task(run_import("longds", ImportOptions(src=src, out=tmp_path / "out")).written[0])
    assert task.load_answers()["1"].answer == {"result": 3}
    assert task.config.metadata["domain"] == "test" and task.name == "Tiny"
    assert '{"result": value}' in task.description


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "task.json is missing"), ("[]", "non-empty list"), ('[{"turn_id": 1}]', "lacks"), ("{", "not valid JSON")],
)
def test_bad_sources(tmp_path, content, message):
    src = tmp_path / "src"
    src.mkdir()
    if content is not None:
        (src / "task.json").write_text(content)
    with pytest.raises(ImporterError, match=message):
        run_import("longds", ImportOptions(src=src, out=tmp_path / "out"))


def test_missing_src_names_the_flag(tmp_path):
    with pytest.raises(ImporterError, match="--src .* does not exist"):
        run_import("longds", ImportOptions(src=Path(tmp_path / "absent"), out=tmp_path))
