"""`stateguard run`: one episode from the command line — live/log view, the record, the grade, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main
from harness.live import EpisodeView, grade_rows, short
from harness.manager.episode import read_episodes
from harness.tasks import load_task
from harness.worker.faults import Fault, write_faults

ROOT = Path(__file__).resolve().parents[2]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="module")
def faults_file(tmp_path_factory):
    task = load_task(RETAIL)
    code = task.load_answers()["1"].code.replace(
        "sales['quantity'] * sales['unit_price']", "sales['quantity'] + sales['unit_price']"
    )
    path = tmp_path_factory.mktemp("faults") / "faults.jsonl"
    write_faults(path, [Fault(task.id, "1", "wrong_operator", code)])
    return path


def run_cli(capsys, *argv):
    rc = main(["run", "--isolation", ISOLATION, *argv])
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1]) if rc == 0 else None
    return rc, out, err, summary


def test_rule_repairs_the_fault_and_the_record_is_written(capsys, tmp_path, faults_file):
    rc, out, _, summary = run_cli(
        capsys, "--task", "retail-sales", "--manager", "rule", "--faults", str(faults_file),
        "--out", str(tmp_path), "--view", "log", "--executable-constraints",
    )  # fmt: skip
    assert rc == 0
    assert summary["score"] == 1.0 and summary["simulated"] is True and summary["repairs"] == 1
    assert summary["states"] == 5 and summary["manager"] == "rule"
    # the log view shows the turn, the worker's steps, the manager's actions, the repair and the commits
    assert "── turn 1:" in out and "repair attempt 1 (light) on sales" in out
    assert "committed S1" in out and "committed S5" in out and "COMMIT_STATE" in out
    assert "SIMULATED" in out  # the grade table says the worker was simulated
    records = list(read_episodes(tmp_path / "episodes.jsonl"))
    assert len(records) == 1 and records[0].episode_id == summary["episode_id"]
    assert records[0].grade["score"] == 1.0 and records[0].config["faults"] == {"1": "wrong_operator"}
    assert records[0].config["manager_view"] == {"oracle_relations": False, "executable_constraints": True}


def test_the_sample_faults_file_of_the_readme(capsys, tmp_path):
    """configs/faults/retail-sales.jsonl: a silent wrong operator at turn 1 and a crash at turn 2. Unmanaged, turns
    1-3 are wrong; rule repairs the crash, and the silent fault only when it sees the constraint code."""
    sample = ROOT / "configs" / "faults" / "retail-sales.jsonl"
    argv = ["--task", "retail-sales", "--worker", "scripted", "--faults", str(sample), "--out", str(tmp_path)]
    rc, _, _, summary = run_cli(capsys, *argv, "--manager", "none", "--view", "quiet")
    assert rc == 0 and summary["score"] == pytest.approx(0.4)
    rc, _, _, summary = run_cli(capsys, *argv, "--manager", "rule", "--view", "quiet")
    assert rc == 0 and summary["score"] == pytest.approx(0.4) and summary["repairs"] == 1
    rc, _, _, summary = run_cli(capsys, *argv, "--manager", "rule", "--view", "quiet", "--executable-constraints")
    assert rc == 0 and summary["score"] == 1.0 and summary["repairs"] == 2
    configs = [r.config["faults"] for r in read_episodes(tmp_path / "episodes.jsonl")]
    assert configs == [{"1": "wrong_operator", "2": "execution_error"}] * 3


def test_without_the_constraint_code_rule_has_no_evidence_for_a_silent_fault(capsys, tmp_path, faults_file):
    argv = ["--task", "retail-sales", "--faults", str(faults_file), "--out", str(tmp_path), "--view", "quiet"]
    rc, _, _, summary = run_cli(capsys, *argv)
    assert rc == 0 and summary["repairs"] == 0 and summary["score"] < 1.0
    record = next(read_episodes(tmp_path / "episodes.jsonl"))
    assert (record.config["oracle_relations"], record.config["executable_constraints"]) == (False, False)


def test_none_lets_the_fault_through_and_runs_append(capsys, tmp_path, faults_file):
    argv = ["--task", str(RETAIL), "--manager", "none", "--faults", str(faults_file), "--out", str(tmp_path)]
    rc, out, _, summary = run_cli(capsys, *argv, "--view", "quiet")
    assert rc == 0 and summary["activations"] == 0 and summary["repairs"] == 0
    assert summary["score"] == pytest.approx(0.4)  # turns 1-3 inherit the fault; 4 and 5 do not depend on it
    assert "manager #" not in out  # quiet: no event lines
    rc, *_ = run_cli(capsys, *argv, "--view", "quiet")
    assert rc == 0 and len(list(read_episodes(tmp_path / "episodes.jsonl"))) == 2


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--task", "no-such-task"], ["--task", "retail-sales"]),
        (["--task", "retail-sales", "--manager", "oracle"], ["--manager", "rule"]),
        (["--task", "retail-sales", "--worker", "gpt"], ["--worker", "openai:URL"]),
        (["--task", "retail-sales", "--worker", "hf:/nonexistent/ckpt"], ["/nonexistent/ckpt", "stateguard model"]),
        (["--task", "retail-sales", "--manager", "rule", "--constrained-decoding"], ["llm:URL", "not to rule"]),
        (["--task", "retail-sales", "--legal-actions-only"], ["--legal-actions-only", "add --constrained-decoding"]),
    ],
)
def test_bad_input_is_one_clear_error(capsys, tmp_path, argv, names):
    rc, _, err, _ = run_cli(capsys, *argv, "--out", str(tmp_path))
    assert rc == 2
    assert all(name in err for name in names), err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_faults_need_the_scripted_worker(capsys, tmp_path, faults_file):
    rc, _, err, _ = run_cli(
        capsys, "--task", "retail-sales", "--worker", "openai:http://127.0.0.1:9/v1", "--faults", str(faults_file),
        "--out", str(tmp_path),
    )  # fmt: skip
    assert rc == 2 and "--faults" in err and "scripted" in err


def test_a_malformed_faults_file_names_the_file(capsys, tmp_path):
    bad = tmp_path / "faults.jsonl"
    bad.write_text('{"task_id": "retail-sales"}\n')
    rc, _, err, _ = run_cli(capsys, "--task", "retail-sales", "--faults", str(bad), "--out", str(tmp_path))
    assert rc == 2 and str(bad) in err


def test_the_live_view_renders_the_episode(capsys, tmp_path, faults_file):
    rc, *_ = run_cli(
        capsys, "--task", "retail-sales", "--faults", str(faults_file), "--out", str(tmp_path), "--view", "quiet",
        "--executable-constraints",
    )  # fmt: skip
    assert rc == 0
    record = next(read_episodes(tmp_path / "episodes.jsonl"))
    view = EpisodeView("retail-sales · rule", simulated=True)
    for step in record.worker_steps:
        view.on_event("worker_step", step)
    for activation in record.activations:
        view.on_event("activation", activation)
    for state in record.states:
        view.on_event("commit", state)
    for repair in record.repairs:
        view.on_event("repair", repair)
    view.on_event("episode_end", {"grade": record.grade})
    console = Console(record=True, width=200)
    console.print(view.render())
    text = console.export_text()
    assert "SIMULATED (scripted worker)" in text and "committed states" in text
    assert all(s["id"] in text for s in record.states)
    illegal = sum(1 for a in record.activations for x in a["actions"] if not x["legal"])
    assert f"activations {len(record.activations)}" in text and f"(illegal {illegal})" in text
    assert "repairs 1" in text and "score 1.0" in text


def test_short_and_grade_rows():
    assert short("a" * 100, 10) == "a" * 9 + "…"
    assert short("first\nsecond") == "first …"
    assert short(None) == ""
    assert grade_rows({"details": {"turns": {"1": {"correct": True}, "2": {"correct": False}}}}) == [
        ("1", "true"),
        ("2", "false"),
    ]
    assert grade_rows({"score": 0.5, "details": {}}) == [("score", "0.5")]
    assert grade_rows(None) == []


def test_a_model_worker_starts_from_the_task_contract():
    from harness.worker.spec import task_contract

    task = load_task(RETAIL)
    text = task_contract(task)
    assert text.startswith(f"# Task {task.id}")
    assert "## Data" in text and task.turns[0].question.strip() in text
    assert "private" not in text.lower()


def test_a_dead_endpoint_is_one_line_before_the_episode(capsys, tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    rc, out, err, _ = run_cli(capsys, "--task", "retail-sales", "--manager", f"llm:{url}", "--out", str(tmp_path))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and out == ""
    assert f"--manager llm:{url}: the endpoint does not answer: GET {url}/models failed" in err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_a_backend_failing_during_the_episode_is_an_error_not_a_score(capsys, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_llm import FakeOpenAI

    with FakeOpenAI([(503, {"error": {"message": "engine overloaded"}})]) as server:
        rc, _, err, _ = run_cli(capsys, "--task", "retail-sales", "--manager", f"llm:{server.url}", "--view", "quiet",
                                "--max-turn-end-activations", "1", "--out", str(tmp_path))  # fmt: skip
    assert rc == 4 and "the episode errored (ManagerBackendError" in err and "engine overloaded" in err
    [record] = read_episodes(tmp_path / "episodes.jsonl")
    assert record.error["type"] == "ManagerBackendError"


def test_an_out_inside_the_task_folder_is_refused(capsys, tmp_path):
    task = tmp_path / "retail"
    shutil.copytree(RETAIL, task)
    rc, _, err, _ = run_cli(capsys, "--task", str(task), "--out", str(task / "public" / "runs"))
    assert rc == 2 and f"lies inside the task folder {task}" in err
    assert not (task / "public" / "runs").exists()
