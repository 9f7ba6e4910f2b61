"""Smoke test of `stateguard demo` (what `make demo` runs): built-in task, scripted worker, sandbox, grading."""

import json
import shutil

import pytest

from harness import cli


@pytest.mark.parametrize(
    "isolation",
    [pytest.param("bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap missing")), "none"],
)
def test_demo_answers_every_turn_correctly_and_writes_its_outputs(tmp_path, capsys, isolation):
    assert cli.main(["demo", "--out", str(tmp_path), "--isolation", isolation]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["simulated"] is True and summary["valid"] is True and summary["score"] == 1.0
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert [t["correct"] for t in grade["details"]["turns"].values()] == [True] * 5
    answers = json.loads((tmp_path / "answers.json").read_text())
    assert answers["1"] == {"n_orders": 240, "total_revenue": 51996.97}
    assert answers["5"]["top_region"] == "East"
    # the probe's assignment did not leak, and restoring the turn-1 checkpoint removed later variables
    assert "is still a DataFrame" in out
    assert "later variables present = []" in out
    contract = (tmp_path / "contract_turn1.md").read_text()
    assert "sales.csv" in contract and "51996.97" not in contract  # the worker prompt never holds answers
    rows = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert [r["turn_id"] for r in rows] == ["1", "2", "3", "4", "5"] and all(r["ok"] for r in rows)


def test_demo_rejects_a_non_multi_turn_task(tmp_path):
    task = tmp_path / "t"
    (task / "public").mkdir(parents=True)
    (task / "private").mkdir()
    (task / "description.md").write_text("What is 1+1?")
    (task / "config.yaml").write_text("id: t\nkind: closed_form\nanswer_format: '@x[value]'\n")
    (task / "private" / "answers.json").write_text('[["x", "2"]]')
    with pytest.raises(SystemExit, match="needs a multi_turn task"):
        cli.main(["demo", "--task", str(task), "--out", str(tmp_path / "out")])


def test_demo_without_bubblewrap_refuses_with_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    assert cli.main(["demo", "--out", str(tmp_path), "--isolation", "bwrap"]) == 2
    err = capsys.readouterr().err
    assert "isolation: none" in err
