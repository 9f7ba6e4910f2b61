"""Unusable input files are one clear line naming the file and the fix (exit 2, no traceback): ``stateguard view`` of
a binary file or a folder, ``stateguard tasks grade --answer`` naming a missing, folder or binary file. Each case is
followed by the same command working on good input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness import cli

ROOT = Path(__file__).resolve().parents[2]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


def one_line_error(capsys, prefix: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    """An episode-records file written by ``stateguard run`` (scripted worker, about a second)."""
    out = tmp_path_factory.mktemp("run")
    argv = ["run", "--task", "retail-sales", "--isolation", ISOLATION, "--view", "quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    return out / "episodes.jsonl"


@pytest.mark.parametrize("content", [PNG, bytes(range(256))], ids=["png", "bytes"])
def test_view_of_a_binary_file_is_one_line_then_a_record_file_works(tmp_path, capsys, records, content):
    binary = tmp_path / "picture.png"
    binary.write_bytes(content)
    page = tmp_path / "page.html"
    assert cli.main(["view", str(binary), "--out", str(page)]) == 2
    line = one_line_error(capsys, f"stateguard view: {binary}: not a text file; pass an episode-records")
    assert "JSON-lines" in line and not page.exists()

    assert cli.main(["view", str(records), "--out", str(page)]) == 0
    assert capsys.readouterr().out.strip() == str(page) and page.stat().st_size > 0


def test_view_of_a_folder_without_sample_is_one_line(tmp_path, capsys):
    assert cli.main(["view", str(tmp_path), "--out", str(tmp_path / "page.html")]) == 2
    one_line_error(capsys, f"stateguard view: {tmp_path}: is a folder; pass an episode-records file")


# ---------------------------------------------------------------------------------------------------------------------
# tasks grade --answer


@pytest.fixture
def closed_form(tmp_path) -> Path:
    """A closed-form task whose answer is ``@mean_fare[34.65]``."""
    task = tmp_path / "closed"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    config = {"id": "toy-closed", "kind": "closed_form", "answer_format": "@mean_fare[value] rounded to 2 decimals"}
    (task / "config.yaml").write_text(yaml.safe_dump(config))
    (task / "description.md").write_text("# Toy\n\nThe mean fare.\n")
    (task / "public" / "data.csv").write_text("fare\n34.65\n")
    (task / "private" / "answers.json").write_text(json.dumps([["mean_fare", "34.65"]]))
    return task


def grade(task: Path, answer: str | Path) -> int:
    return cli.main(["tasks", "grade", str(task), "--answer", str(answer)])


@pytest.mark.parametrize("answer", ["missing/answer.txt", "answer.json", "./answer"])
def test_grade_a_missing_answer_file_is_one_line_then_a_file_works(closed_form, tmp_path, capsys, answer, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert grade(closed_form, answer) == 2
    line = one_line_error(capsys, f"stateguard tasks grade: error: --answer {answer}: no such file; pass ")
    assert "or the answer itself as text" in line

    response = tmp_path / "response.txt"
    response.write_text("The mean fare is @mean_fare[34.65].\n")
    assert grade(closed_form, response) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["task_id"], result["valid"], result["score"]) == ("toy-closed", True, 1.0)


def test_grade_literal_answers_that_look_like_ratios_are_still_text(closed_form, capsys):
    assert grade(closed_form, "@mean_fare[34.65/1]") == 0  # a slash in an answer is not a path
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_grade_a_multi_turn_task_with_a_missing_or_binary_file(tmp_path, capsys):
    assert grade(RETAIL, tmp_path / "answers.json") == 2
    one_line_error(capsys, f"stateguard tasks grade: error: --answer {tmp_path / 'answers.json'}: no such file")

    binary = tmp_path / "answers.bin"
    binary.write_bytes(PNG)
    assert grade(RETAIL, binary) == 2
    one_line_error(capsys, f"stateguard tasks grade: error: --answer {binary}: not a UTF-8 text file")

    assert grade(RETAIL, tmp_path) == 2
    one_line_error(capsys, f"stateguard tasks grade: error: --answer {tmp_path}: is a folder")

    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"1": 0}))
    assert grade(RETAIL, answers) == 0
    assert json.loads(capsys.readouterr().out)["task_id"] == "builtin-retail-sales"


def test_grade_through_the_standalone_tasks_command(closed_form, tmp_path, capsys):
    from harness.tasks.cli import main

    assert main(["grade", str(closed_form), "--answer", str(tmp_path / "nope.txt")]) == 2
    one_line_error(capsys, f"stateguard tasks grade: error: --answer {tmp_path / 'nope.txt'}: no such file")
