"""Benchmark ManagerEnv: manager steps per second on one core, and RL rollouts in this process against Ray env actors.

    python scripts/bench_envs.py                      # synthesizes configs/synthesis/smoke.yaml into a temp folder
    python scripts/bench_envs.py --pool runs/synth --episodes 200 --rollouts 64
    python scripts/bench_envs.py --workers 2          # the Ray side with 2 env actors
    python scripts/bench_envs.py --rollouts 0         # the step benchmark only (no Ray)
    python scripts/bench_envs.py --profile            # also print the top of a cProfile of the step benchmark

**Steps** (target >= 200 manager steps/s on one core): the gold policy drives the env through
``info["policy_input"]`` (its own time is excluded; see :mod:`envs.bench`); the process (and the sandbox it forks)
is pinned to one CPU core for this part only.

**Rollouts** (:mod:`training.rl.workers`; target: Ray within 0.9x of the local path): the same ``--rollouts`` start
points (the pool's, cycled) played as RL rollouts by :class:`~training.rl.rollout.EpisodePlayer` in this process and
through ``--workers`` Ray env actors (a local Ray started here), the two taking turns every ``--chunk`` rollouts so
that both see the same load of the machine. The "model" answers every request at once with a fixed
FINALIZE_RELATIONS call, so the time is the env's: resets, the reference manager's activations, the sandbox, the
prompt tokenization and, on Ray, the transport. Both sides first play one untimed rollout per env (sandbox start).
``env_cpu_s_per_rollout`` is the CPU seconds (user + system) spent per rollout by the env actors' processes and their
sandboxes; a step of ``--prompts`` x ``--generations`` rollouts needs that times the rollouts of CPU, so hiding it
under ``--gen-s`` seconds of generation needs ``ceil(prompts x generations x env_cpu_s_per_rollout / gen_s)`` env
workers (CPU cores) per GPU node: ``workers_per_gpu_node``. Timings are noisy on a loaded machine.

The LAST line printed is one JSON object: steps_per_s, step_ms_p50, step_ms_p95, sandbox_share, reset_ms_p50,
episodes, steps; with rollouts also local_rollouts_per_s, ray_rollouts_per_s, ray_vs_local (the ratio),
ray_within_0_9x, workers, rollouts, env_cpu_s_per_rollout (the Ray actors'), local_cpu_s_per_rollout (this process
and its sandbox), step_rollouts, gen_s, workers_per_gpu_node.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from envs.bench import run_benchmark
from envs.pool import ReplayPool
from synthesis.config import SynthesisConfig
from synthesis.driver import synthesize

RESPONSE = (
    '<tool_call>\n{"name": "FINALIZE_RELATIONS", "arguments": {"mode": "confirm", "relations": [], '
    '"conflict_evidence": ""}}\n</tool_call>'
)


class FixedSession:
    """The stand-in model: every request is answered at once with the same ids, cut to the request's budget."""

    def __init__(self, ids: list[int]):
        self.ids = ids

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        ids = self.ids[:max_new_tokens]
        return ids, [0.0] * len(ids)


def process_cpu_seconds() -> float:
    """CPU seconds of this process and its live descendants (the sandbox), reaped children included."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:4])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:4])
        except psutil.Error:
            pass
    return total


def rollout_benchmark(root: Path, args: argparse.Namespace) -> dict[str, object]:
    """The rollout figures (see the module docstring)."""
    from harness.executors import ExecutorOptions
    from harness.tokenizer import build_qwen3_tokenizer
    from training.rl.rollout import RolloutLimits, start_points
    from training.rl.workers import EnvSpec, EnvWorkers

    tokenizer = build_qwen3_tokenizer()
    spec = EnvSpec(str(root), tokenizer, RolloutLimits(), isolation=args.isolation)
    points = start_points(ReplayPool(root))
    starts = [points[(i * 7) % len(points)] for i in range(args.rollouts)]  # spread over episodes and activations
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    session = FixedSession([*tokenizer(RESPONSE, add_special_tokens=False)["input_ids"], eos])
    engine = SimpleNamespace(session=lambda: session)  # no generate_many: one call per request, as the local path

    player = spec.player()
    workers = None
    try:
        workers = EnvWorkers(spec, args.workers, ExecutorOptions(executor="ray"))
        player.play(starts[0], lambda: session)  # the sandboxes start outside the timed run
        workers.play(starts[: args.workers], engine)
        local: list = []
        remote: list = []
        local_s = ray_s = local_cpu = ray_cpu = 0.0
        size = max(args.chunk, args.workers)
        for first in range(0, len(starts), size):  # local and Ray alternate, so both see the same machine load
            chunk = starts[first : first + size]
            cpu0, t0 = process_cpu_seconds(), time.perf_counter()
            local += [player.play(start, lambda: session) for start in chunk]
            local_s, local_cpu = local_s + time.perf_counter() - t0, local_cpu + process_cpu_seconds() - cpu0
            cpu0, t0 = sum(workers.cpu_seconds()), time.perf_counter()
            remote += workers.play(chunk, engine)
            ray_s, ray_cpu = ray_s + time.perf_counter() - t0, ray_cpu + sum(workers.cpu_seconds()) - cpu0
    finally:
        player.env.close()
        if workers is not None:
            workers.close()
    if [r.completion_ids for r in remote] != [r.completion_ids for r in local]:
        raise RuntimeError("the Ray rollouts differ from the local ones; the benchmark compares equal work only")

    step_rollouts = args.prompts * args.generations
    per_rollout = round(ray_cpu / len(starts), 4)
    ratio = round((len(starts) / ray_s) / (len(starts) / local_s), 3)
    return {
        "rollouts": len(starts),
        "workers": args.workers,
        "local_rollouts_per_s": round(len(starts) / local_s, 4),
        "ray_rollouts_per_s": round(len(starts) / ray_s, 4),
        "ray_vs_local": ratio,
        "ray_within_0_9x": ratio >= 0.9,
        "env_cpu_s_per_rollout": per_rollout,
        "local_cpu_s_per_rollout": round(local_cpu / len(starts), 4),
        "step_rollouts": step_rollouts,
        "gen_s": args.gen_s,
        "workers_per_gpu_node": math.ceil(step_rollouts * per_rollout / args.gen_s),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default=None, help="a synthesis output folder (default: synthesize --config)")
    parser.add_argument("--config", default="configs/synthesis/smoke.yaml", help="synthesis config without --pool")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of the step benchmark")
    parser.add_argument("--isolation", choices=["bwrap", "none"], default=None)
    parser.add_argument("--profile", action="store_true", help="print the 25 costliest functions (cumulative)")
    parser.add_argument("--rollouts", type=int, default=24, help="rollouts per side (0: no rollout benchmark)")
    parser.add_argument("--workers", type=int, default=1, help="Ray env actors of the rollout benchmark")
    parser.add_argument("--chunk", type=int, default=4, help="rollouts per turn as local and Ray alternate")
    parser.add_argument("--prompts", type=int, default=64, help="start points per RL step, for workers_per_gpu_node")
    parser.add_argument("--generations", type=int, default=8, help="rollouts per start point, likewise")
    parser.add_argument("--gen-s", type=float, default=30.0, help="generation seconds per step the env work must fit")
    args = parser.parse_args()
    for name in ("episodes", "workers", "chunk", "prompts", "generations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: use 1 or more")
    if args.rollouts < 0 or args.gen_s <= 0:
        parser.error(f"--rollouts={args.rollouts} must be >= 0 and --gen-s={args.gen_s} > 0")
    if args.rollouts:
        from harness.executors import ExecutorOptions, check_executor

        check_executor(ExecutorOptions(executor="ray"))  # Ray missing: one line naming the install command
    cores = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="bench-envs-") as tmp:
        root = args.pool
        if root is None:
            root = Path(tmp) / "synth"
            synthesize(SynthesisConfig.from_yaml(args.config, workers=1), root, progress=False)
        pool = ReplayPool(root)
        os.sched_setaffinity(0, {min(cores)})  # one core, inherited by the sandbox's processes
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        figures = run_benchmark(pool, args.episodes, args.isolation)
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        os.sched_setaffinity(0, cores)
        print(f"{figures['steps']} manager steps in {figures['episodes']} episodes ({len(pool)} distinct) on one core")
        if args.rollouts:
            rollouts = rollout_benchmark(Path(root), args)
            figures.update(rollouts)
            print(
                f"{rollouts['rollouts']} rollouts: local {rollouts['local_rollouts_per_s']}/s, Ray "
                f"({rollouts['workers']} actor(s)) {rollouts['ray_rollouts_per_s']}/s, ratio "
                f"{rollouts['ray_vs_local']} (target >= 0.9); env CPU {rollouts['env_cpu_s_per_rollout']} s per "
                f"rollout: a {args.prompts} x {args.generations} step needs "
                f"{rollouts['workers_per_gpu_node']} env workers per GPU node to fit in {args.gen_s:g} s of generation"
            )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
