"""Benchmark the synthesis pipeline against its target: 3,000 trajectories in <= 600 s on this machine.

    python scripts/bench_synthesis.py                       # the default config (configs/synthesis/default.yaml)
    python scripts/bench_synthesis.py --trajectories 300    # scale tasks_per_domain down to about N trajectories
    python scripts/bench_synthesis.py --trajectories 300 --executor ray   # then the same config on Ray: the ratio

Prints the summary table, then as the LAST line one JSON object: trajectories, wall_s, trajectories_per_min,
fault_types, domains, target_ratio (measured trajectories/min over the target's 300/min), reference (below),
per_episode_s, cpu_s (CPU time of this process and every process it started — workers, sandboxes, kernels,
probes —, read from a cgroup v1 ``cpuacct`` group the benchmark puts itself in; null where that is not possible) and
cpu_bound_per_min (trajectories per minute if that CPU time were spread over this machine's cores with nothing else
running). Wall-clock figures are only meaningful on an otherwise idle machine; the CPU-time figure is far less
sensitive to other load.

``--executor ray`` runs the same config a second time with ``executor: ray`` (on a local Ray started by the benchmark
with as many CPUs as the local run's workers, or ``--ray-num-cpus``; or on the cluster at ``--address``) and adds to
the JSON line ``ray``: its trajectories_per_min, wall_s (the synthesis alone), start_s (starting or joining Ray),
cpus and nodes; ``ray_over_local`` (Ray's throughput over the local one's, same run); ``overhead_per_task_s`` (the
wall-time difference per task, times the parallel units: the per-unit cost of going through Ray); and
``identical_outputs`` (every output file byte-equal to the local run's). ``cpu_s`` counts the local run only.

``--nodes 1 2`` (with ``--executor ray``) then runs the same config on a ``ray.cluster_utils.Cluster`` of each node
count (``--cpus-per-node`` CPUs per node, default 1; the nodes are local raylets, so on one machine they share its
cores) and measures Ray's per-unit cost with units that do nothing but return a payload of the mean size of one
task's files (``--overhead-units``, default 40): ``unit_s`` (one at a time on one CPU: scheduling, the transfer and
the parent's share, in series with the work) and ``driver_s`` (all CPUs busy: the parent's serial cost per unit, the
ceiling of any cluster at ``1 / driver_s`` units/s). From the 1-node run's time per task ``task_s`` (the work plus
``unit_s``) the JSON line's ``scaling`` holds, per node count, the measured trajectories/min and the model's
``predicted``: ``min(N * cpus_per_node / task_s, 1 / driver_s)`` tasks/s times the trajectories per task; and
``predicted_per_min`` for 4, 8 and 16 nodes of the same kind.

``reference`` is measured in the same run, before the main one, because this machine's speed drifts by up to 2x within
hours: the runs of the first ``--reference-tasks`` tasks (default 3), in this process, once with the pipeline's sandbox
settings and once with the plain ones (every runtime checkpoint a restorable snapshot, no faulted run joining a clean
run's recording; probes run in the clean verifier in both), task by task in turn. Its ``speedup`` (plain seconds over
pipeline seconds) is the part of the figure that does not depend on the hour; ``--reference-tasks 0`` skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from synthesis.config import SynthesisConfig
from synthesis.driver import summary_table, synthesize

TARGET_TRAJECTORIES, TARGET_S = 3000, 600.0
TRAJECTORIES_PER_TASK = 40  # rough yield of one default task; used only to scale --trajectories


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/synthesis/default.yaml")
    parser.add_argument("--trajectories", type=int, default=None, help="scale the task count to about N")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--reference-tasks", type=int, default=3, help="tasks of the same-run reference (0: none)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="ray: then the same on Ray")
    parser.add_argument("--address", default=None, help="--executor ray: a running cluster (default: a local Ray)")
    parser.add_argument("--ray-num-cpus", type=int, default=None, help="CPUs of the local Ray (default: workers)")
    parser.add_argument("--nodes", type=int, nargs="*", default=[], help="--executor ray: scaling over node counts")
    parser.add_argument("--cpus-per-node", type=int, default=1, help="--nodes: CPUs of each local Ray node")
    parser.add_argument("--overhead-units", type=int, default=40, help="--nodes: no-op units measuring Ray's cost")
    args = parser.parse_args()
    if args.nodes and args.executor != "ray":
        parser.error("--nodes measures Ray's scaling: add --executor ray.")
    if any(n < 1 for n in args.nodes) or args.cpus_per_node < 1 or args.overhead_units < 1:
        parser.error("--nodes, --cpus-per-node and --overhead-units take counts of 1 or more.")
    config = SynthesisConfig.from_yaml(args.config, workers=args.workers)
    if args.trajectories is not None:
        per_domain = math.ceil(args.trajectories / TRAJECTORIES_PER_TASK / max(len(config.domains), 1))
        config = replace(config, tasks_per_domain=max(per_domain, 1))
    ref = None
    if args.reference_tasks > 0:
        with tempfile.TemporaryDirectory(prefix="bench-synth-ref-") as tmp:
            ref = reference(config, args.reference_tasks, Path(tmp))
        print(f"reference (same run, {ref['tasks']} tasks, one process): {json.dumps(ref)}")
    with contextlib.ExitStack() as stack:
        local_out = Path(args.out or stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-synth-")))
        with cpu_accounting() as cpu_s:
            result = synthesize(config, local_out, progress=True)
        ray_line = None if args.executor == "local" else ray_run(config, args, result, local_out)
        if args.nodes:
            ray_line["scaling"] = scaling(config, args, result, local_out)
    print(summary_table(result))
    stats = result.stats
    per_min = 60.0 * result.trajectories / max(result.wall_s, 1e-9)
    episodes = stats["tasks"]["ok"] * 2 + 2 * sum(
        v for k, v in stats["faults"]["by_outcome"].items()
    )  # clean gold + clean unmanaged per task, two runs per candidate fault
    line = {
        "trajectories": result.trajectories,
        "wall_s": round(result.wall_s, 1),
        "trajectories_per_min": round(per_min, 1),
        "fault_types": len([k for k in stats["trajectories_by_fault_type"] if k != "none"]),
        "domains": len(stats["trajectories_by_domain"]),
        "target_ratio": round(per_min / (60.0 * TARGET_TRAJECTORIES / TARGET_S), 3),
        "reference": ref,
        "per_episode_s": round(result.wall_s * config.n_workers / max(episodes, 1), 3),
        "cpu_s": None if cpu_s() is None else round(cpu_s(), 1),
        "cpu_bound_per_min": None
        if cpu_s() is None
        else round(60.0 * result.trajectories / max(cpu_s() / (os.cpu_count() or 1), 1e-9), 1),
    }
    if ray_line is not None:
        line.update(ray_line)
    print(json.dumps(line))
    return 0


def ray_run(config: SynthesisConfig, args: argparse.Namespace, local: Any, local_out: Path) -> dict[str, Any]:
    """The same synthesis with ``executor: ray`` (see the module docstring); the JSON line's Ray fields."""
    import ray

    start = time.perf_counter()
    if args.address is None:
        ray.init(address="local", num_cpus=args.ray_num_cpus or config.n_workers, include_dashboard=False)
    else:
        ray.init(address=args.address)
    start_s = time.perf_counter() - start
    try:
        cpus, nodes = int(ray.cluster_resources().get("CPU", 0)), len([n for n in ray.nodes() if n["Alive"]])
        with tempfile.TemporaryDirectory(prefix="bench-synth-ray-") as tmp:
            result = synthesize(replace(config, executor="ray"), tmp, progress=True)  # on the Ray started above
            identical = tree_digest(Path(tmp)) == tree_digest(local_out)
    finally:
        ray.shutdown()
    per_min = 60.0 * result.trajectories / max(result.wall_s, 1e-9)
    local_per_min = 60.0 * local.trajectories / max(local.wall_s, 1e-9)
    tasks = max(result.stats["tasks"]["ok"] + len(result.stats["errors"]), 1)
    print(f"ray: {result.trajectories} trajectories in {result.wall_s:.1f} s on {nodes} node(s), {cpus} CPUs")
    return {
        "ray": {
            "trajectories_per_min": round(per_min, 1),
            "wall_s": round(result.wall_s, 1),
            "start_s": round(start_s, 1),
            "cpus": cpus,
            "nodes": nodes,
        },
        "ray_over_local": round(per_min / max(local_per_min, 1e-9), 3),
        "overhead_per_task_s": round((result.wall_s - local.wall_s) * min(cpus, config.n_workers) / tasks, 3),
        "identical_outputs": identical,
    }


def scaling(config: SynthesisConfig, args: argparse.Namespace, local: Any, local_out: Path) -> dict[str, Any]:
    """The same synthesis on a local Ray cluster of each of ``args.nodes`` node counts, Ray's per-unit cost, and the
    model that predicts N nodes (see the module docstring)."""
    import ray
    from ray.cluster_utils import Cluster

    tasks = max(local.stats["tasks"]["ok"] + len(local.stats["errors"]), 1)
    per_task = local.trajectories / tasks
    payload = sum(p.stat().st_size for d in ("shards", "tasks") for p in (local_out / d).rglob("*") if p.is_file())
    payload = max(payload // tasks, 1)
    cpn = args.cpus_per_node
    rows: list[dict[str, Any]] = []
    overhead: dict[str, float] = {}
    for nodes in sorted(set(args.nodes)):
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpn, "include_dashboard": False})
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpn)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)
        try:
            if nodes == 1:
                overhead["unit_s"] = noop_units(args.overhead_units, payload, in_flight=1)
            overhead["driver_s"] = noop_units(args.overhead_units, payload, in_flight=nodes * cpn * 4)
            with tempfile.TemporaryDirectory(prefix=f"bench-synth-{nodes}n-") as tmp:
                result = synthesize(replace(config, executor="ray"), tmp, progress=True)
                identical = tree_digest(Path(tmp)) == tree_digest(local_out)
        finally:
            ray.shutdown()
            cluster.shutdown()
        per_min = 60.0 * result.trajectories / max(result.wall_s, 1e-9)
        rows.append({"nodes": nodes, "cpus": nodes * cpn, "wall_s": round(result.wall_s, 1),
                     "trajectories_per_min": round(per_min, 1), "identical_outputs": identical})  # fmt: skip
        print(f"ray, {nodes} node(s) x {cpn} CPU: {per_min:.1f} trajectories/min ({result.wall_s:.1f} s)")
    line: dict[str, Any] = {"cpus_per_node": cpn, "payload_bytes": payload, "rows": rows}
    line.update({key: round(value, 4) for key, value in overhead.items()})
    one = next((row for row in rows if row["nodes"] == 1), None)
    if one is not None:
        task_s = one["wall_s"] * cpn / tasks  # the work of one task plus Ray's per-unit cost, on one CPU

        def predicted(n: int) -> float:
            tasks_per_s = min(n * cpn / task_s, 1.0 / max(overhead["driver_s"], 1e-9))
            return round(60.0 * tasks_per_s * per_task, 1)

        line["task_s"] = round(task_s, 3)
        line["unit_share"] = round(overhead["unit_s"] / task_s, 4)  # Ray's part of a task's time on one CPU
        for row in rows:
            row["predicted"] = predicted(row["nodes"])
        line["predicted_per_min"] = {str(n): predicted(n) for n in (4, 8, 16)}
    print("nodes | CPUs | trajectories/min | predicted")
    for row in rows:
        print(f"{row['nodes']:>5} | {row['cpus']:>4} | {row['trajectories_per_min']:>16} | {row.get('predicted')}")
    return line


def _noop(size: int) -> bytes:
    """A unit that does nothing but hand back ``size`` bytes (the mean size of one task's files)."""
    return bytes(size)


def noop_units(units: int, payload: int, *, in_flight: int) -> float:
    """Seconds per unit of ``units`` no-op units through the ray executor, ``in_flight`` submitted at a time."""
    from harness.executors import ExecutorOptions, RayExecutor, Work

    executor = RayExecutor(ExecutorOptions(executor="ray"))
    list(executor.imap(Work(_noop), [payload] * in_flight))  # warm: the worker processes started
    start = time.perf_counter()
    for first in range(0, units, in_flight):
        list(executor.imap(Work(_noop), [payload] * min(in_flight, units - first)))
    return (time.perf_counter() - start) / units


def tree_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def reference(config: SynthesisConfig, n_tasks: int, out: Path) -> dict[str, object]:
    """The first ``n_tasks`` tasks' runs with the pipeline's sandbox settings and with the plain ones, alternating
    per task (see the module docstring); wall seconds of ``synthesis.runs.run_task`` in this process."""
    from harness.manager.runtime import RuntimeConfig
    from synthesis.driver import open_sandbox, plan_jobs, prepare_job
    from synthesis.runs import run_task

    jobs = plan_jobs(config)[0][:n_tasks]
    seconds = {"pipeline": 0.0, "plain": 0.0}
    trajectories = 0
    with open_sandbox(config.isolation) as fast, open_sandbox(config.isolation) as plain:
        for job in jobs:
            _, task, faults = prepare_job(job, config, out, fast)
            for name, sandbox, runtime in (("pipeline", fast, None), ("plain", plain, RuntimeConfig())):
                start = time.perf_counter()
                runs = run_task(task, faults, sandbox, runtime=runtime, join_runs=name == "pipeline")
                seconds[name] += time.perf_counter() - start
            trajectories += 0 if runs.clean is None else 1 + sum(o.kept for o in runs.outcomes)
    return {
        "tasks": len(jobs),
        "trajectories": trajectories,
        "pipeline_s": round(seconds["pipeline"], 2),
        "plain_s": round(seconds["plain"], 2),
        "speedup": round(seconds["plain"] / max(seconds["pipeline"], 1e-9), 3),
    }


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


@contextlib.contextmanager
def cpu_accounting():
    """Yield a function returning the CPU seconds used so far by this process and everything it starts (a cgroup v1
    ``cpuacct`` group made for the run: forked processes stay in their parent's group, which the sandbox never
    changes for this controller), or None where the group cannot be made (no cgroup v1 cpuacct, not root)."""
    group = CPUACCT / f"stateguard-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        yield lambda: None
        return
    final: list[float] = []  # read once the run is over, before the group is removed

    def used() -> float:
        return final[0] if final else int((group / "cpuacct.usage").read_text()) / 1e9

    try:
        yield used
    finally:
        final.append(used())
        with contextlib.suppress(OSError):
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()


if __name__ == "__main__":
    sys.exit(main())
