"""Config and folder validation: one case per problem class, each naming the file, the field and the fix."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from task_builders import MULTI_TURN, edit_config

from harness.tasks import TaskConfig, TaskConfigError, Turn, TurnConstraint, load_task, validate_task
from harness.tasks.cli import main


def _turns(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    """The toy multi-turn turns with per-index changes, e.g. ``_turns(**{"1": {"relation": "x"}})``."""
    turns = json.loads(json.dumps(MULTI_TURN["turns"]))
    for index, change in changes.items():
        turns[int(index)].update(change)
    return turns


def _write(path: str, text: str) -> Callable[[Path], None]:
    def mutate(task_dir: Path) -> None:
        (task_dir / path).write_text(text, encoding="utf-8")

    return mutate


def _remove(path: str) -> Callable[[Path], None]:
    def mutate(task_dir: Path) -> None:
        target = task_dir / path
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return mutate


def _config(**changes: Any) -> Callable[[Path], None]:
    return lambda task_dir: edit_config(task_dir, **changes)


def _reference(data: Any) -> Callable[[Path], None]:
    return _write("private/reference.json", json.dumps(data))


# (case id, task kind, mutation, expected file, expected field, a fragment of the fix)
CASES: list[tuple[str, str, Callable[[Path], None], str, str, str]] = [
    (
        "unknown key",
        "closed_form",
        _config(answer_fromat="x"),
        "config.yaml",
        "answer_fromat",
        "did you mean 'answer_format'",
    ),
    ("missing required key", "closed_form", _config(id=...), "config.yaml", "id", "add 'id:'"),
    ("wrong type", "closed_form", _config(metadata=["a"]), "config.yaml", "metadata", "set 'metadata' to a mapping"),
    (
        "wrong type in turn",
        "multi_turn",
        _config(turns=_turns(**{"1": {"precision": "2"}})),
        "config.yaml",
        "turns[1].precision",
        "non-negative integer",
    ),
    (
        "unknown key in turn",
        "multi_turn",
        _config(turns=_turns(**{"0": {"answer": 3}})),
        "config.yaml",
        "turns[0].answer",
        "remove it",
    ),
    ("bad kind", "closed_form", _config(kind="essay"), "config.yaml", "kind", "closed_form, artifact, multi_turn"),
    (
        "bad grader_style",
        "closed_form",
        _config(grader_style="kaggle"),
        "config.yaml",
        "grader_style",
        "stateguard, mlebench",
    ),
    ("bad id", "closed_form", _config(id="has space"), "config.yaml", "id", "letters, digits"),
    (
        "malformed grader reference",
        "closed_form",
        _config(grader="grade.py"),
        "config.yaml",
        "grader",
        "'file:grade.py:grade'",
    ),
    (
        "grader file missing",
        "closed_form",
        _config(grader="file:grade.py:grade"),
        "config.yaml",
        "grader",
        "point 'grader' at an existing function",
    ),
    (
        "grader function missing",
        "closed_form",
        lambda d: (
            _write("grade.py", "def other(s, t):\n    return 1.0\n")(d),
            edit_config(d, grader="file:grade.py:grade"),
        ),
        "config.yaml",
        "grader",
        "point 'grader' at an existing function",
    ),
    (
        "grader module missing",
        "closed_form",
        _config(grader="no_such_module_xyz:grade"),
        "config.yaml",
        "grader",
        "point 'grader' at an existing function",
    ),
    (
        "grader outside task",
        "closed_form",
        _config(grader="file:../grade.py:grade"),
        "config.yaml",
        "grader",
        "point 'grader'",
    ),
    (
        "invalid yaml",
        "closed_form",
        _write("config.yaml", "id: [unclosed\n"),
        "config.yaml",
        "(file)",
        "fix the YAML syntax",
    ),
    ("missing config", "closed_form", _remove("config.yaml"), "config.yaml", "(file)", "add config.yaml"),
    (
        "missing description",
        "closed_form",
        _remove("description.md"),
        "description.md",
        "(file)",
        "write the objective",
    ),
    (
        "description outside",
        "closed_form",
        _config(description="../elsewhere.md"),
        "config.yaml",
        "description",
        "without '..'",
    ),
    ("missing public folder", "closed_form", _remove("public"), "config.yaml", "public_dir", "create it"),
    ("missing private folder", "closed_form", _remove("private"), "config.yaml", "private_dir", "create it"),
    (
        "overlapping folders",
        "closed_form",
        _config(private_dir="public"),
        "config.yaml",
        "private_dir",
        "two separate folders",
    ),
    (
        "prepare without prepare()",
        "closed_form",
        _write("prepare.py", "def setup():\n    pass\n"),
        "prepare.py",
        "prepare",
        "define prepare(raw: Path, public: Path, private: Path)",
    ),
    # closed_form
    (
        "closed_form without answer_format",
        "closed_form",
        _config(answer_format=...),
        "config.yaml",
        "answer_format",
        "add 'answer_format:'",
    ),
    (
        "answers.json missing",
        "closed_form",
        _remove("private/answers.json"),
        "private/answers.json",
        "(file)",
        "write private/answers.json",
    ),
    (
        "answers.json not JSON",
        "closed_form",
        _write("private/answers.json", "[["),
        "private/answers.json",
        "(file)",
        "fix the JSON syntax",
    ),
    (
        "answers.json bad pair",
        "closed_form",
        _write("private/answers.json", '[["a", 1]]'),
        "private/answers.json",
        "[0]",
        "[name, value] string pairs",
    ),
    (
        "answer name not a word",
        "closed_form",
        _write("private/answers.json", '[["mean fare", "1"]]'),
        "private/answers.json",
        "[0][0]",
        "rename it",
    ),
    (
        "answer value with ]",
        "closed_form",
        _write("private/answers.json", '[["x", "[1]"]]'),
        "private/answers.json",
        "[0][1]",
        "remove the brackets",
    ),
    ("turns on closed_form", "closed_form", _config(turns=_turns()), "config.yaml", "turns", "remove 'turns:'"),
    (
        "mlebench style on closed_form",
        "closed_form",
        _config(grader_style="mlebench"),
        "config.yaml",
        "grader_style",
        "'grader_style: stateguard'",
    ),
    # artifact
    (
        "artifact without submission",
        "artifact",
        _config(submission=...),
        "config.yaml",
        "submission",
        "add 'submission:'",
    ),
    (
        "sample missing",
        "artifact",
        _remove("public/sample_submission.csv"),
        "public/sample_submission.csv",
        "(file)",
        "write a sample submission",
    ),
    (
        "answers csv missing",
        "artifact",
        _remove("private/answers.csv"),
        "private/answers.csv",
        "(file)",
        "write the answers CSV",
    ),
    (
        "id column not in sample",
        "artifact",
        _config(submission={"id_column": "row_id", "sample": "sample_submission.csv"}),
        "config.yaml",
        "submission",
        "fix 'submission.id_column'",
    ),
    (
        "unknown metric",
        "artifact",
        _config(submission={"id_column": "id", "metric": "auc"}),
        "config.yaml",
        "submission.metric",
        "accuracy",
    ),
    (
        "unknown submission key",
        "artifact",
        _config(submission={"file": "x.csv"}),
        "config.yaml",
        "submission.file",
        "did you mean 'filename'",
    ),
    (
        "submission on multi_turn",
        "multi_turn",
        _config(submission={"filename": "x.csv"}),
        "config.yaml",
        "submission",
        "remove 'submission:'",
    ),
    # multi_turn
    ("no turns", "multi_turn", _config(turns=[]), "config.yaml", "turns", "add 'turns:'"),
    (
        "duplicate turn ids",
        "multi_turn",
        _config(turns=_turns(**{"1": {"turn_id": "1"}})),
        "config.yaml",
        "turns[1].turn_id",
        "unique id",
    ),
    (
        "depends on a later turn",
        "multi_turn",
        _config(turns=_turns(**{"1": {"depends_on": ["3"]}})),
        "config.yaml",
        "turns[1].depends_on",
        "earlier turns only",
    ),
    (
        "depends on an unknown turn",
        "multi_turn",
        _config(turns=_turns(**{"1": {"depends_on": ["9"]}})),
        "config.yaml",
        "turns[1].depends_on",
        "use ids of earlier turns: 1",
    ),
    (
        "depends on itself",
        "multi_turn",
        _config(turns=_turns(**{"1": {"depends_on": ["2"]}})),
        "config.yaml",
        "turns[1].depends_on",
        "remove '2' from its own depends_on",
    ),
    (
        "bad relation",
        "multi_turn",
        _config(turns=_turns(**{"1": {"relation": "extends"}})),
        "config.yaml",
        "turns[1].relation",
        "init, progress, branch, invalidate, combine",
    ),
    (
        "init with dependencies",
        "multi_turn",
        _config(turns=_turns(**{"1": {"relation": "init"}})),
        "config.yaml",
        "turns[1].relation",
        "clear depends_on",
    ),
    (
        "combine with one dependency",
        "multi_turn",
        _config(turns=_turns(**{"2": {"depends_on": ["1"]}})),
        "config.yaml",
        "turns[2].relation",
        "list every combined turn",
    ),
    (
        "progress without dependency",
        "multi_turn",
        _config(turns=_turns(**{"1": {"depends_on": []}})),
        "config.yaml",
        "turns[1].relation",
        "name the upstream turn",
    ),
    (
        "turn missing from reference",
        "multi_turn",
        _reference({"1": {"code": "", "answer": {}}, "2": {"code": "", "answer": {}}}),
        "private/reference.json",
        "3",
        'add "3"',
    ),
    (
        "reference for an unknown turn",
        "multi_turn",
        _reference({str(i): {"code": "", "answer": {}} for i in (1, 2, 3, 4)}),
        "private/reference.json",
        "4",
        "remove it or add the turn",
    ),
    (
        "malformed reference entry",
        "multi_turn",
        _reference({"1": {"code": "", "answer": 3}, "2": {"code": "", "answer": {}}, "3": {"code": "", "answer": {}}}),
        "private/reference.json",
        "1",
        "answer as a JSON object",
    ),
    (
        "reference.json missing",
        "multi_turn",
        _remove("private/reference.json"),
        "private/reference.json",
        "(file)",
        "write private/reference.json",
    ),
]


@pytest.mark.parametrize(("kind", "mutate", "file", "field", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_problem_names_file_field_and_fix(make_task, kind, mutate, file, field, fix):
    task_dir = make_task(kind)
    assert validate_task(task_dir) == []  # the unmodified folder is valid, so the mutation causes the problem
    mutate(task_dir)
    with pytest.raises(TaskConfigError) as err:
        load_task(task_dir)
    matching = [p for p in err.value.problems if p.startswith(f"{file}: {field}: ")]
    assert matching, f"no problem for {file}: {field} in {err.value.problems}"
    assert any(" Fix: " in p and fix in p.split(" Fix: ", 1)[1] for p in matching), matching
    assert str(task_dir) in str(err.value)


def test_several_problems_are_reported_in_one_error(make_task):
    task_dir = make_task("multi_turn")
    turns = _turns(**{"1": {"relation": "extends"}, "2": {"depends_on": ["9", "1"]}})
    edit_config(task_dir, kind="multi_turn", colour="red", turns=turns)
    (task_dir / "description.md").unlink()
    problems = validate_task(task_dir)
    fields = {p.split(": ")[1] for p in problems}
    assert {"colour", "turns[1].relation", "turns[2].depends_on"} <= fields
    assert any(p.startswith("description.md: (file)") for p in problems)
    with pytest.raises(TaskConfigError, match=r"\(\d+ problems\)") as err:
        load_task(task_dir)
    assert len(err.value.problems) == len(problems) >= 4


def test_type_and_semantic_problems_are_reported_together():
    data = {"id": "t", "kind": "quiz", "turns": "not a list", "name": 5}
    with pytest.raises(TaskConfigError) as err:
        TaskConfig.from_dict(data)
    fields = [p.split(": ")[1] for p in err.value.problems]
    assert fields == ["turns", "name", "kind"]


def test_direct_construction_runs_the_same_checks():
    turns = (Turn(turn_id="1", question="q"), Turn(turn_id="2", question="q", depends_on=("1",), relation="combine"))
    with pytest.raises(ValueError, match=r"turns\[1\]\.relation: 'combine' needs two or more"):
        TaskConfig(id="t", kind="multi_turn", turns=turns)
    with pytest.raises(TaskConfigError, match="answer_format"):
        TaskConfig(id="t", kind="closed_form")


def test_integer_turn_ids_become_strings():
    cfg = TaskConfig.from_dict(
        {
            "id": "t",
            "kind": "multi_turn",
            "turns": [
                {"turn_id": 1, "question": "a"},
                {"turn_id": 2, "question": "b", "depends_on": [1], "relation": "progress"},
            ],
        }
    )
    assert [t.turn_id for t in cfg.turns] == ["1", "2"]
    assert cfg.turns[1].depends_on == ("1",)


def test_to_dict_round_trips():
    cfg = TaskConfig.from_dict({**MULTI_TURN, "name": "Toy", "metadata": {"level": "easy"}})
    assert TaskConfig.from_dict(cfg.to_dict()) == cfg
    assert list(cfg.to_dict())[:2] == ["id", "kind"]


def test_validate_command_exit_codes(make_task, tmp_path, capsys):
    good = make_task("closed_form", name="good")
    assert main(["validate", str(good)]) == 0
    assert "1 valid, 0 invalid" in capsys.readouterr().out
    bad = make_task("closed_form", name="bad")
    edit_config(bad, kind="essay")
    assert main(["validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "INVALID" in out and "config.yaml: kind: 'essay' is not a task kind." in out
    # a folder of task folders: one invalid task makes the whole run invalid
    assert main(["validate", str(tmp_path)]) == 2
    assert "1 valid, 1 invalid" in capsys.readouterr().out
    shutil.rmtree(bad)
    assert main(["validate", "-q", str(tmp_path)]) == 0
    # nothing to validate is not a success
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["validate", str(empty)]) == 2
    assert "no config.yaml found" in capsys.readouterr().out


def test_validate_reports_duplicate_ids_across_folders(make_task, capsys):
    make_task("closed_form", name="a")
    second = make_task("closed_form", name="b")
    assert main(["validate", str(second.parent)]) == 2
    assert "is also the id of" in capsys.readouterr().out


def test_turn_constraints_are_parsed_validated_and_round_trip():
    turns = _turns(**{"0": {"constraints": [{"text": "x is positive", "code": "assert x > 0"}, {"text": "in words"}]}})
    cfg = TaskConfig.from_dict({**MULTI_TURN, "turns": turns})
    assert cfg.turns[0].constraints == (TurnConstraint("x is positive", "assert x > 0"), TurnConstraint("in words"))
    assert cfg.turns[1].constraints == ()
    assert TaskConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("constraints", "field", "message"),
    [
        ("not a list", "turns[0].constraints", "expected a list of {text, code} mappings"),
        (["just text"], "turns[0].constraints[0]", "expected a mapping"),
        ([{"text": ""}], "turns[0].constraints[0].text", "non-empty string"),
        ([{"text": "t", "cod": "x"}], "turns[0].constraints[0]", "unknown key(s) ['cod']"),
        ([{"text": "t", "code": "assert (x"}], "turns[0].constraints[0].code", "is not valid Python"),
    ],
)
def test_bad_turn_constraints_name_the_field_and_the_fix(constraints, field, message):
    with pytest.raises(TaskConfigError) as err:
        TaskConfig.from_dict({**MULTI_TURN, "turns": _turns(**{"0": {"constraints": constraints}})})
    matching = [p for p in err.value.problems if p.startswith(f"config.yaml: {field}: ") or f": {field}: " in p]
    assert matching and message in matching[0], err.value.problems
    assert "Fix: " in matching[0]
