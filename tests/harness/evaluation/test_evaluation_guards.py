"""An evaluation never reports success it did not have: a dead endpoint stops it before work, a manager backend that
fails during an episode makes the episode errored (left out of the metrics, counted, played again on resume), an
``--out`` holding another evaluation is refused naming what changed (``--overwrite`` starts fresh), two evaluations
never share an ``--out``, and an ``--out`` inside a task folder is refused."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

import pytest

from harness.evaluation.evaluate import EvaluationConfig, run_evaluation, variant_file
from harness.evaluation.resume import FINGERPRINT_FILE, ResumeMismatchError
from harness.manager.episode import read_episodes
from harness.run_guard import OutLock, OutLockedError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_llm import FakeOpenAI, completion  # noqa: E402

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening, closed: nothing answers there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def config(task, out, managers=("none",), **fields) -> EvaluationConfig:
    return EvaluationConfig(
        suite=str(task), out=str(out), managers=list(managers), isolation=ISOLATION, runtime={"max_actions": 1},
        n_resamples=200, report=False, **fields,
    )  # fmt: skip


def run_cli(capsys, *argv):
    from harness.cli import main

    rc = main(["evaluate", "--isolation", ISOLATION, "--no-report", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_dead_endpoint_stops_the_evaluation_before_any_episode(capsys, two_turn_task, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    rc, out, err = run_cli(capsys, "--suite", str(two_turn_task), "--manager", f"none,llm:{url}", "--out",
                           str(tmp_path / "o"))  # fmt: skip
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"--manager llm:{url}: the endpoint does not answer: GET {url}/models failed" in err
    assert "stateguard serve" in err
    assert not (tmp_path / "o" / "episodes").exists()  # not even the none arm ran
    rc, _, err = run_cli(capsys, "--suite", str(two_turn_task), "--worker", f"openai:{url}", "--manager", "none",
                         "--out", str(tmp_path / "w"))  # fmt: skip
    assert rc == 2 and f"--worker openai:{url}: the endpoint does not answer" in err


def test_an_endpoint_serving_no_model_is_refused(capsys, two_turn_task, tmp_path):
    with FakeOpenAI([(200, completion("x"))], models=()) as server:
        rc, _, err = run_cli(capsys, "--suite", str(two_turn_task), "--manager", f"llm:{server.url}", "--out",
                             str(tmp_path))  # fmt: skip
    assert rc == 2 and f"{server.url}/models lists no model" in err


def test_a_backend_failing_during_episodes_makes_them_errored_and_a_rerun_plays_them(capsys, two_turn_task, tmp_path):
    down = (500, {"error": {"message": "the engine died"}})
    with FakeOpenAI([down]) as server:  # /models answers (the preflight passes), every chat call fails
        spec = f"llm:{server.url}"
        argv = ["--suite", str(two_turn_task), "--manager", f"none,{spec}", "--runtime", '{"max_actions": 1}',
                "--out", str(tmp_path)]  # fmt: skip
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 4
        assert "1 episode(s) errored" in err and f"{spec}: 1" in err
        results = json.loads((tmp_path / "results.json").read_text())
        assert results["variants"][spec]["n_errored"] == 1 and results["variants"]["none"]["n_errored"] == 0
        assert results["variants"][spec]["turn_accuracy"] is None  # no episode of the arm counts
        assert out.splitlines()[-2].split()[:3] == [spec, "0", "1"]  # the table: arm, episodes, errored
        assert results["variants"][spec]["n_episodes"] == 0 and results["errored"] == {"none": 0, spec: 1}
        [record] = read_episodes(variant_file(tmp_path, spec))
        assert record.error["type"] == "ManagerBackendError" and "the engine died" in record.error["message"]
        # the endpoint is back: the errored episode is played again, the none arm is not
        server.replies[:] = [(200, completion("no action here"))]
        none_before = variant_file(tmp_path, "none").read_text()
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, err
        assert variant_file(tmp_path, "none").read_text() == none_before
        first, second = read_episodes(variant_file(tmp_path, spec))
        assert first.error is not None and second.error is None and second.grade["valid"] is True
        results = json.loads((tmp_path / "results.json").read_text())
        assert results["variants"][spec]["n_errored"] == 0 and results["variants"][spec]["turn_accuracy"] == 1.0


def test_an_exception_in_one_episode_is_recorded_and_the_evaluation_goes_on(two_turn_task, tmp_path):
    def boom(*args, **kwargs):
        raise OverflowError("int too large to convert to float")

    import harness.evaluation.evaluate as evaluate

    original = evaluate.run_episode
    calls = []

    def flaky(sandbox, task, spec, run, cfg, policy, variant):
        calls.append(variant)
        if variant == "rule":
            boom()
        return original(sandbox, task, spec, run, cfg, policy, variant)

    evaluate.run_episode = flaky
    try:
        results = run_evaluation(config(two_turn_task, tmp_path, ("none", "rule")))
    finally:
        evaluate.run_episode = original
    assert calls == ["none", "rule"]
    assert results["errored"] == {"none": 0, "rule": 1} and results["variants"]["none"]["n_episodes"] == 1
    [record] = read_episodes(variant_file(tmp_path, "rule"))
    assert record.error == {"type": "OverflowError", "message": "int too large to convert to float"}


def test_resume_with_another_faults_file_or_worker_is_refused_and_overwrite_starts_fresh(two_turn_task, tmp_path):
    from harness.tasks import load_task
    from harness.worker.faults import Fault, write_faults

    task = two_turn_task
    answer = load_task(task).load_answers()["1"].code
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # two faults files with the same episode key: turn 1's code with two variants of the same slip
    write_faults(a, [Fault("retail-2", "1", "wrong_operator", answer.replace("*", "+", 1))])
    write_faults(b, [Fault("retail-2", "1", "wrong_operator", answer.replace("*", "-", 1))])
    out = tmp_path / "out"
    run_evaluation(config(task, out, faults=str(a)))
    lines = variant_file(out, "none").read_text()
    with pytest.raises(ResumeMismatchError, match=r"the fault replayed by episode retail-2/fault-1-1-wrong_operator "
                       r"changed; pass --overwrite to discard them and start fresh, or a new --out"):  # fmt: skip
        run_evaluation(config(task, out, faults=str(b)))
    with pytest.raises(ResumeMismatchError, match=r"the runtime changed"):
        run_evaluation(config(task, out, faults=str(a), executable_constraints=True))
    assert variant_file(out, "none").read_text() == lines  # nothing written by the refused runs
    run_evaluation(config(task, out, faults=str(b), overwrite=True))
    records = list(read_episodes(variant_file(out, "none")))
    assert len(records) == 2 and variant_file(out, "none").read_text() != lines
    assert json.loads((out / FINGERPRINT_FILE).read_text())["faults"] != {}
    (out / FINGERPRINT_FILE).write_text("{not json")
    with pytest.raises(ResumeMismatchError, match=rf"{FINGERPRINT_FILE} is unreadable \(JSONDecodeError\)"):
        run_evaluation(config(task, out, faults=str(b)))


def test_a_resume_with_another_worker_names_it(capsys, two_turn_task, tmp_path):
    rc, _, _ = run_cli(capsys, "--suite", str(two_turn_task), "--manager", "none", "--out", str(tmp_path))
    assert rc == 0
    with FakeOpenAI([(200, completion("Final Answer: 1"))]) as server:
        rc, _, err = run_cli(capsys, "--suite", str(two_turn_task), "--manager", "none", "--worker",
                             f"openai:{server.url}", "--out", str(tmp_path))  # fmt: skip
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"holds episodes of another run: the worker changed ('scripted' -> 'openai:{server.url}')" in err
    assert "--overwrite" in err


def test_a_second_evaluation_on_the_same_out_is_refused(capsys, two_turn_task, tmp_path):
    with OutLock(tmp_path):  # as if another evaluation were running there
        rc, _, err = run_cli(capsys, "--suite", str(two_turn_task), "--manager", "none", "--out", str(tmp_path))
        with pytest.raises(OutLockedError):
            with OutLock(tmp_path):
                pass
    assert rc == 2 and "another run (pid" in err and "is writing to this folder" in err
    assert not (tmp_path / "episodes").exists()
    with OutLock(tmp_path):  # released when its holder ends
        pass


def test_an_out_inside_a_task_folder_is_refused(capsys, two_turn_task):
    out = two_turn_task / "public" / "runs"
    rc, _, err = run_cli(capsys, "--suite", str(two_turn_task), "--manager", "none", "--out", str(out))
    assert rc == 2 and f"lies inside the task folder {two_turn_task}" in err
    assert not out.exists()  # refused before it was created
