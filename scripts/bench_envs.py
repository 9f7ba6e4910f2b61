"""Benchmark ManagerEnv with the replay worker against its target: >= 200 manager steps/s on one core.

    python scripts/bench_envs.py                      # synthesizes configs/synthesis/smoke.yaml into a temp folder
    python scripts/bench_envs.py --pool runs/synth --episodes 200
    python scripts/bench_envs.py --profile            # also print the top of a cProfile of the run

The gold policy drives the env through ``info["policy_input"]`` (its own time is excluded; see :mod:`envs.bench`).
The process (and the sandbox it forks) is pinned to one CPU core. The LAST line printed is one JSON object:
steps_per_s, step_ms_p50, step_ms_p95, sandbox_share (plus reset_ms_p50, episodes, steps).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.bench import run_benchmark  # noqa: E402
from envs.pool import ReplayPool  # noqa: E402
from synthesis.config import SynthesisConfig  # noqa: E402
from synthesis.driver import synthesize  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default=None, help="a synthesis output folder (default: synthesize --config)")
    parser.add_argument("--config", default="configs/synthesis/smoke.yaml", help="synthesis config without --pool")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--isolation", choices=["bwrap", "none"], default=None)
    parser.add_argument("--profile", action="store_true", help="print the 25 costliest functions (cumulative)")
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, inherited by the sandbox's processes
    with tempfile.TemporaryDirectory(prefix="bench-envs-") as tmp:
        root = args.pool
        if root is None:
            root = Path(tmp) / "synth"
            synthesize(SynthesisConfig.from_yaml(args.config, workers=1), root, progress=False)
        pool = ReplayPool(root)
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        figures = run_benchmark(pool, args.episodes, args.isolation)
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    print(f"{figures['steps']} manager steps in {figures['episodes']} episodes ({len(pool)} distinct) on one core")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
