"""``executor: ray`` on two Ray nodes (``ray.cluster_utils.Cluster``: a head and a worker node, each a raylet with one
CPU of its own, one cluster for the module): the smoke synthesis writes the local executor's bytes, also when a worker
process is killed in the middle of a unit (Ray runs the unit again); a resumed run runs only the missing unit; a small
evaluation records the local executor's episodes; and ``stateguard synthesize --executor ray`` without an address
starts a local Ray for the run and prints the local run's progress and summary. Bad input is tested without a cluster
(tests/harness/test_executors.py)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from harness.cli import main
from harness.evaluation.evaluate import EvaluationConfig, run_evaluation, variant_file
from harness.executors import ExecutorOptions, check_executor
from synthesis.driver import SynthesisResult, summary_table, synthesize
from synthesis.shards import episodes_path, shard_path
from tests.synthesis.test_pipeline import ISOLATION, small_config, tree_digest

ray = pytest.importorskip("ray")

TIMINGS = ("episode_id", "duration_s", "latency_s")
"""Record fields that differ between any two runs (a random id, wall-clock times), whatever the executor."""


def without(value: Any, keys: tuple[str, ...]) -> Any:
    """``value`` with every dict entry named in ``keys`` removed, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without(v, keys) for v in value]
    return value


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def local_synthesis(tmp_path_factory) -> SynthesisResult:
    out = tmp_path_factory.mktemp("local") / "synth"
    return synthesize(small_config(), out, progress=False)


class UnitKiller(threading.Thread):
    """SIGKILLs the first Ray worker process seen running a unit (its title is ``ray::_run_unit``), once, after
    ``delay_s`` of its run."""

    def __init__(self, delay_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.delay_s, self.killed, self.done = delay_s, [], threading.Event()

    def run(self) -> None:
        import psutil

        while not self.done.is_set() and not self.killed:
            for proc in psutil.process_iter(["pid", "cmdline"]):
                title = " ".join(proc.info["cmdline"] or [])
                if title.startswith("ray::") and "_run_unit" in title:
                    time.sleep(self.delay_s)
                    proc.kill()
                    self.killed.append(proc.info["pid"])
                    return
            time.sleep(0.05)


def test_the_cluster_has_two_nodes_of_one_cpu(cluster):
    check_executor(ExecutorOptions(executor="ray", address=cluster.address))  # its GCS answers the HTTP/2 probe
    ray.init(address=cluster.address)
    try:
        nodes = [node for node in ray.nodes() if node["Alive"]]
        assert len(nodes) == 2 and all(node["Resources"]["CPU"] == 1 for node in nodes)
    finally:
        ray.shutdown()


def test_a_killed_worker_is_retried_and_the_outputs_equal_the_local_bytes(cluster, local_synthesis, tmp_path):
    out = tmp_path / "ray"
    config = small_config(executor="ray", address=cluster.address)
    killer = UnitKiller()
    killer.start()
    try:
        result = synthesize(config, out, progress=False)
    finally:
        killer.done.set()
        killer.join()
    assert killer.killed, "no worker process was seen running a unit"
    assert result.stats["tasks"]["ok"] == 2
    assert tree_digest(out) == tree_digest(local_synthesis.out)

    # Resume: the shard of one task gone (as if killed before the parent wrote it): only that unit runs again.
    task_id = json.loads((out / "stats.json").read_text())["tasks"]["validation"][0]
    shard_path(out, task_id).unlink()
    episodes_path(out, task_id).unlink()
    seen: list[dict[str, Any]] = []
    synthesize(config, out, progress=False, on_shard=seen.append)
    assert [summary["task_id"] for summary in seen] == [task_id]
    assert tree_digest(out) == tree_digest(local_synthesis.out)


def test_an_evaluation_on_the_cluster_records_the_local_episodes(cluster, local_synthesis, tmp_path):
    base = dict(suite=str(local_synthesis.out), managers=["rule"], limit=1, fault_limit=1, isolation=ISOLATION)
    results = {}
    for name, extra in (("local", {}), ("ray", {"executor": "ray", "address": cluster.address})):
        config = EvaluationConfig(out=str(tmp_path / name), report=False, **base, **extra)
        results[name] = run_evaluation(config)
    lines = {
        name: [json.loads(line) for line in variant_file(tmp_path / name, "rule").read_text().splitlines()]
        for name in results
    }
    assert len(lines["local"]) == 2 and without(lines["ray"], TIMINGS) == without(lines["local"], TIMINGS)
    local, remote = (without({**results[name], "config": None}, TIMINGS) for name in ("local", "ray"))
    assert remote == local and results["ray"]["config"]["out"] == str(tmp_path / "ray")


def test_the_command_starts_a_local_ray_for_the_run_with_the_local_progress_and_summary(
    local_synthesis, tmp_path, capsys
):
    out = tmp_path / "synth"
    flags = [
        "--domains", "commerce", "energy", "--tasks_per_domain", "1", "--n_turns", "6", "6",
        "--max_faults_per_task", "3", "--workers", "1", "--validation_fraction", "0.5", "--isolation", ISOLATION,
    ]  # fmt: skip
    assert main(["synthesize", "--out", str(out), *flags, "--executor", "ray", "--ray_num_cpus", "2"]) == 0
    captured = capsys.readouterr()
    assert not ray.is_initialized()  # the Ray started for the run is stopped with it
    assert "synthesize: 100%" in captured.err and "2/2" in captured.err  # the same bar: 2 tasks
    printed, expected = captured.out.strip().splitlines(), summary_table(local_synthesis).splitlines()
    assert printed[0].startswith(f"synthesis into {out}: {local_synthesis.trajectories} trajectories in ")
    assert printed[1:] == expected[1:]
    assert tree_digest(out) == tree_digest(local_synthesis.out)
