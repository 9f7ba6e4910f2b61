"""``workers``: episodes on threads give the sequential run's records, in its order, and resume as it does; models in
this process and Ray refuse more than one; scripts/bench_evaluate.py at a tiny size (its output's shape, never its
timings)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.evaluation.evaluate import EvaluationConfig, EvaluationError, run_evaluation, variant_file

REPO = Path(__file__).resolve().parents[3]
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_evaluate", REPO / "scripts" / "bench_evaluate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_bench_gives_the_sequential_results_with_workers_over_reused_connections(bench, capsys):
    assert bench.main(["--runs", "3", "--workers", "1", "3", "--latency-ms", "20", "--isolation", ISOLATION]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["identical"] is True and summary["episodes"] == 3 and summary["latency_ms"] == 20
    assert set(summary["runs"]) == {"1", "3"} and set(summary["ratio"]) == {"3"}
    one, three = summary["runs"]["1"], summary["runs"]["3"]
    assert set(one) == {"wall_s", "episodes_per_min", "requests", "connections"}
    assert one["requests"] == three["requests"] > 3  # the same manager calls, several per episode
    assert one["connections"] == 2  # the preflight's, then one kept alive for every call of the episodes
    assert 2 <= three["connections"] <= 4  # the preflight's and at most one per thread


def test_workers_resume_a_partial_run_in_episode_order(two_turn_task, tmp_path, capsys):
    config = EvaluationConfig(
        suite=str(two_turn_task), out=str(tmp_path), managers=["rule"], runs=4, workers=3, isolation=ISOLATION,
        runtime={"max_actions": 1}, n_resamples=50, report=False,
    )  # fmt: skip
    first = run_evaluation(config)
    assert "evaluate: 4/4 episodes (100%)" in capsys.readouterr().err
    path = variant_file(tmp_path, "rule")
    lines = path.read_text().splitlines()
    assert [json.loads(line)["config"]["eval"]["run"] for line in lines] == [0, 1, 2, 3]
    path.write_text(lines[0] + "\n")  # as if killed after the first episode
    again = run_evaluation(config)
    runs = [json.loads(line)["config"]["eval"]["run"] for line in path.read_text().splitlines()]
    assert runs == [0, 1, 2, 3] and "evaluate: 3/3 episodes (100%)" in capsys.readouterr().err
    assert again["variants"]["rule"]["turn_accuracy"] == first["variants"]["rule"]["turn_accuracy"]
    assert "workers" not in first["config"]  # how episodes were spread is not part of the results


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"managers": ["none", "llm-hf:/models/x"]}, r"workers=4: llm-hf:/models/x runs a model in this process"),
        ({"managers": ["hier:llm-hf:/m"]}, r"hier:llm-hf:/m runs a model in this process.*llm:URL / openai:URL"),
        ({"worker": "hf:WORKER"}, r"worker hf:\S+ runs a model in this process"),
        ({"executor": "ray"}, r"workers=4 with executor ray: Ray plays one episode per CPU itself; set workers: 1"),
        ({"workers": 0}, r"workers=0: play at least 1 episode at a time"),
    ],
)
def test_more_than_one_worker_is_refused_where_episodes_would_share_a_model_or_ray(tmp_path, fields, message):
    fields = {k: v.replace("WORKER", str(tmp_path)) if k == "worker" else v for k, v in fields.items()}
    with pytest.raises(EvaluationError, match=message):
        EvaluationConfig(suite=str(tmp_path), out=str(tmp_path / "o"), **{"workers": 4, **fields})
