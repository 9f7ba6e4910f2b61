"""Score the gold policy and every reward hack on the same synthesized episodes.

    python scripts/bench_rewards.py                                          # configs/synthesis/smoke.yaml
    python scripts/bench_rewards.py --config configs/synthesis/smoke.yaml --rewards configs/rewards/default.yaml
    python scripts/bench_rewards.py --policies always_abstain tool_spam --out runs/synth-smoke   # reuse a folder

Synthesizes the tasks and faults of ``--config`` into a temporary folder (or ``--out``), plays ``gold`` and each
policy of :data:`rewards.hacks.HACK_POLICIES` on every clean and kept faulted episode in the real runtime, and prints
the table of mean reward per policy and per term. The LAST line is one JSON object ``{"gold": mean, "<hack>": mean,
...}`` of the mean total reward. ``--out`` with a folder already synthesized from the same config reuses its shards
(synthesis resumes).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from harness.sandbox import Sandbox
from rewards import RewardConfig
from synthesis.config import SynthesisConfig
from synthesis.driver import open_sandbox, synthesize
from synthesis.hack_suite import run_suite, suite_episodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/synthesis/smoke.yaml", help="synthesis config (the episodes)")
    parser.add_argument("--rewards", default="configs/rewards/default.yaml", help="reward config")
    parser.add_argument("--out", default=None, help="synthesis output folder (default: a temporary one)")
    parser.add_argument("--policies", nargs="+", default=None, help="hack policies to run (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = SynthesisConfig.from_yaml(args.config, workers=1)
    rewards = RewardConfig.from_yaml(args.rewards)
    with tempfile.TemporaryDirectory(prefix="bench-rewards-") as tmp:
        out = Path(args.out or tmp)
        synthesize(config, out, progress=False)
        episodes = suite_episodes(out)
        sandbox: Sandbox = open_sandbox(config.isolation)
        try:
            result = run_suite(episodes, sandbox, args.policies, rewards)
        finally:
            sandbox.close()
    clean = sum(e.fault is None for e in episodes)
    print(f"{len(episodes)} episodes ({clean} clean, {len(episodes) - clean} faulted) per policy")
    print(result.table())
    print(json.dumps(result.totals()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
