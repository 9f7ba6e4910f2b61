"""The output-folder guards (harness/run_guard.py) and the errored-episode rules (harness/evaluation/errored.py) on
hand-built inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.evaluation.errored import backend_failures, policy_failure
from harness.manager.episode import EpisodeRecord
from harness.run_guard import check_out_outside, tree_digest


def test_tree_digest_follows_contents_and_ignores_bytecode(tmp_path):
    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "a.csv").write_text("x\n1\n")
    before = tree_digest(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "grader.cpython-312.pyc").write_bytes(b"\0")
    assert tree_digest(tmp_path) == before
    (tmp_path / "public" / "a.csv").write_text("x\n2\n")
    assert tree_digest(tmp_path) != before


def test_an_out_inside_an_input_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"--out .*/task/public/runs: lies inside the task folder .*/task"):
        check_out_outside(tmp_path / "task" / "public" / "runs", [tmp_path / "task"], "--out")
    check_out_outside(tmp_path / "out", [tmp_path / "task"], "--out")  # beside it: fine


def test_a_failed_backend_call_of_any_manager_makes_the_episode_errored():
    record = EpisodeRecord("t", "e", {}, True)
    record.activations = [{"actions": [{"result": "rejected: no action"}]}]
    assert policy_failure(record, 0) is None  # an unparseable reply is the manager's own decision
    hier = SimpleNamespace(stats=SimpleNamespace(failures=2))  # tier 1 fell back twice
    windowed = SimpleNamespace(failures=1)  # one hint left out
    assert backend_failures(hier) == 2 and backend_failures(windowed) == 1 and backend_failures(object()) == 0
    assert policy_failure(record, 2)["type"] == "ManagerBackendError"
    record.activations[0]["actions"].append(
        {"result": "rejected: the policy failed to respond (ConnectionError: chat endpoint down)"}
    )
    error = policy_failure(record, 0)
    assert "1 time(s)" in error["message"] and "ConnectionError: chat endpoint down" in error["message"]
