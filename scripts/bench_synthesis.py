"""Benchmark the synthesis pipeline against its target: 3,000 trajectories in <= 600 s on this machine.

    python scripts/bench_synthesis.py                       # the default config (configs/synthesis/default.yaml)
    python scripts/bench_synthesis.py --trajectories 300    # scale tasks_per_domain down to about N trajectories

Prints the summary table, then as the LAST line one JSON object: trajectories, wall_s, trajectories_per_min,
fault_types, domains, target_ratio (measured trajectories/min over the target's 300/min), reference (below),
per_episode_s, cpu_s (CPU time of this process and every process it started — workers, sandboxes, kernels,
probes —, read from a cgroup v1 ``cpuacct`` group the benchmark puts itself in; null where that is not possible) and
cpu_bound_per_min (trajectories per minute if that CPU time were spread over this machine's cores with nothing else
running). Wall-clock figures are only meaningful on an otherwise idle machine; the CPU-time figure is far less
sensitive to other load.

``reference`` is measured in the same run, before the main one, because this machine's speed drifts by up to 2x within
hours: the runs of the first ``--reference-tasks`` tasks (default 3), in this process, once with the pipeline's sandbox
settings and once with the plain ones (every probe forked, every runtime checkpoint a restorable snapshot, no faulted
run joining a clean run's recording), task by task in turn. Its ``speedup`` (plain seconds over pipeline seconds) is
the part of the figure that does not depend on the hour; ``--reference-tasks 0`` skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthesis.config import SynthesisConfig  # noqa: E402
from synthesis.driver import summary_table, synthesize  # noqa: E402

TARGET_TRAJECTORIES, TARGET_S = 3000, 600.0
TRAJECTORIES_PER_TASK = 40  # rough yield of one default task; used only to scale --trajectories


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/synthesis/default.yaml")
    parser.add_argument("--trajectories", type=int, default=None, help="scale the task count to about N")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--reference-tasks", type=int, default=3, help="tasks of the same-run reference (0: none)")
    args = parser.parse_args()
    config = SynthesisConfig.from_yaml(args.config, workers=args.workers)
    if args.trajectories is not None:
        per_domain = math.ceil(args.trajectories / TRAJECTORIES_PER_TASK / max(len(config.domains), 1))
        config = replace(config, tasks_per_domain=max(per_domain, 1))
    ref = None
    if args.reference_tasks > 0:
        with tempfile.TemporaryDirectory(prefix="bench-synth-ref-") as tmp:
            ref = reference(config, args.reference_tasks, Path(tmp))
        print(f"reference (same run, {ref['tasks']} tasks, one process): {json.dumps(ref)}")
    with cpu_accounting() as cpu_s, tempfile.TemporaryDirectory(prefix="bench-synth-") as tmp:
        result = synthesize(config, args.out or tmp, progress=True)
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
    print(json.dumps(line))
    return 0


def reference(config: SynthesisConfig, n_tasks: int, out: Path) -> dict[str, object]:
    """The first ``n_tasks`` tasks' runs with the pipeline's sandbox settings and with the plain ones, alternating
    per task (see the module docstring); wall seconds of ``synthesis.runs.run_task`` in this process."""
    from harness.manager.runtime import RuntimeConfig
    from synthesis.driver import open_sandbox, plan_jobs, prepare_job
    from synthesis.runs import run_task

    jobs = plan_jobs(config)[0][:n_tasks]
    seconds = {"pipeline": 0.0, "plain": 0.0}
    trajectories = 0
    with open_sandbox(config.isolation) as fast, open_sandbox(config.isolation, inline_probes=False) as plain:
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
