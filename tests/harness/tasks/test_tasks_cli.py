"""``stateguard tasks`` sub-commands: grade (one JSON line per kind), import, show, list, and the plugin wiring."""

from __future__ import annotations

import json

import pytest
from task_builders import FIXTURES, edit_config

from harness import cli as stateguard_cli
from harness.tasks.cli import main
from harness.tasks.importers import ImporterError, ImportOptions, run_import
from harness.tasks.importers.common import check_task_id


def _grade(capsys, task_dir, answer) -> dict:
    assert main(["grade", str(task_dir), "--answer", str(answer)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


def test_grade_closed_form_literal_text_and_file(make_task, tmp_path, capsys):
    task_dir = make_task("closed_form")
    right = _grade(capsys, task_dir, "so @mean_fare[34.65]")
    assert (right["task_id"], right["valid"], right["score"]) == ("toy-closed", True, 1.0)
    assert right["details"]["per_answer"] == {"mean_fare": True}
    response = tmp_path / "response.txt"
    response.write_text("@mean_fare[30.00]")
    wrong = _grade(capsys, task_dir, response)  # an existing file is read, not taken literally
    assert (wrong["valid"], wrong["score"]) == (True, 0.0)


def test_grade_multi_turn_json(make_task, tmp_path, capsys):
    task_dir = make_task("multi_turn")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"1": {"n": 3}, "2": {"mean_x": 2.0}, "3": {"n": 4, "mean_x": 2.0}}))
    result = _grade(capsys, task_dir, answers)
    assert result["valid"] and result["score"] == pytest.approx(2 / 3)
    assert {k: v["correct"] for k, v in result["details"]["turns"].items()} == {"1": True, "2": True, "3": False}
    literal = _grade(capsys, task_dir, json.dumps({"1": {"n": 3}}))
    assert literal["score"] == pytest.approx(1 / 3)
    invalid = _grade(capsys, task_dir, "{not json")
    assert (invalid["valid"], invalid["score"]) == (False, None) and "not JSON" in invalid["details"]["error"]
    not_object = _grade(capsys, task_dir, "[1, 2]")
    assert (not_object["valid"], not_object["score"]) == (False, None)


def test_grade_artifact(make_task, tmp_path, capsys):
    task_dir = make_task("artifact")
    submission = tmp_path / "submission.csv"
    submission.write_text("id,label\n1,a\n2,b\n3,a\n4,a\n")
    result = _grade(capsys, task_dir, submission)
    assert (result["valid"], result["score"]) == (True, 0.75)
    submission.write_text("id,other\n1,a\n")
    invalid = _grade(capsys, task_dir, submission)
    assert (invalid["valid"], invalid["score"]) == (False, None) and invalid["details"]["error"]
    assert main(["grade", str(task_dir), "--answer", str(tmp_path / "absent.csv")]) == 2  # a typo, not a grade
    assert f"--answer {tmp_path / 'absent.csv'}: no such file" in capsys.readouterr().err


def test_grade_an_invalid_task_exits_2(make_task, capsys):
    task_dir = make_task("closed_form")
    edit_config(task_dir, kind="essay")
    assert main(["grade", str(task_dir), "--answer", "x"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "'essay' is not a task kind" in captured.err


def test_grade_a_crashing_grader_exits_1(make_task, capsys):
    task_dir = make_task("closed_form")
    (task_dir / "grade.py").write_text("def grade(s, t):\n    raise RuntimeError('boom')\n")
    edit_config(task_dir, grader="file:grade.py:grade")
    assert main(["grade", str(task_dir), "--answer", "x"]) == 1
    assert "RuntimeError: boom" in capsys.readouterr().err


def test_import_then_validate_list_and_show(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["import", "dabstep", "--src", str(FIXTURES / "dabstep_mini"), "--out", str(out), "--ids", "1, 3"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == f"dabstep: imported 2 task(s) into {out}"
    assert main(args) == 2  # exists already, no --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0
    assert main(["list", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()[-2:]
    assert [line.split("\t")[:2] for line in lines] == [["dabstep-1", "closed_form"], ["dabstep-3", "closed_form"]]
    assert main(["show", str(out / "dabstep-3")]) == 0
    shown = capsys.readouterr().out
    assert "id: dabstep-3" in shown and "Which card scheme" in shown
    assert "GlobalCard" not in shown  # the answer is private


def test_import_errors_exit_2(tmp_path, capsys):
    assert (
        main(["import", "mlebench", "--src", str(FIXTURES / "mlebench" / "tiny-spaceship"), "--out", str(tmp_path)])
        == 2
    )
    assert "needs --raw DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["import", "kaggle", "--src", ".", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "choose from 'dabench', 'dabstep', 'longds', 'mlebench'" in capsys.readouterr().err


def _victim(folder):
    """A task folder outside ``--out`` that an id with ``..`` would name (and ``--overwrite`` would replace)."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("id: othertask\nkind: closed_form\n")
    return folder


def test_an_id_that_leaves_out_is_refused_before_anything_is_touched(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "context").mkdir(parents=True)
    row = {"task_id": "1/../../othertask", "question": "q?", "answer": "4", "guidelines": "a number"}
    (src / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "runs" / "out"
    victim = _victim(tmp_path / "runs" / "othertask")  # out / "dabstep-1/../../othertask"
    assert main(["import", "dabstep", "--src", str(src), "--out", str(out), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'dabstep-1/../../othertask' is not a safe folder name" in err[0]
    assert (victim / "config.yaml").is_file() and not any(out.iterdir())
    for kind, options in (
        ("mlebench", {"src": FIXTURES / "mlebench" / "tiny-spaceship", "raw": FIXTURES / "mlebench" / "raw"}),
        ("longds", {"src": FIXTURES / "longds_shop"}),
    ):
        with pytest.raises(ValueError, match="othertask"):
            run_import(kind, ImportOptions(out=out, task_id="../othertask", overwrite=True, **options))
        assert (victim / "config.yaml").is_file() and not any(out.iterdir())
    for bad in (".hidden", "a" * 129, "a\\b"):
        with pytest.raises(ImporterError, match="not a safe folder name"):
            check_task_id(bad)


def test_wired_into_the_stateguard_command(make_task, capsys):
    task_dir = make_task("closed_form")
    assert stateguard_cli.main(["tasks", "validate", str(task_dir)]) == 0
    assert stateguard_cli.main(["tasks", "grade", str(task_dir), "--answer", "@mean_fare[34.65]"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["score"] == 1.0
    assert stateguard_cli.main(["tasks"]) == 2  # no action: help, exit 2
