"""Two CPU ranks (gloo, DDP) train two DAPO steps (tests/training/dapo_two_ranks.py) where rank 0 has no row with a
non-zero advantage, then fewer than rank 1: ``DapoTrainer`` must run the same forwards and collectives on both, or one
rank waits for the other forever.

``accelerate launch --multi_gpu`` starts the two processes (its torchrun launcher; ``--cpu`` would start one), and the
script's ``use_cpu`` makes each a CPU rank with the gloo backend. A hang is bounded twice: each rank exits with its
stacks after WATCHDOG_S seconds, and past TIMEOUT_S the test stops the launcher (SIGTERM: torchrun then stops the
ranks, which run in their own sessions) and fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
WATCHDOG_S = 90
TIMEOUT_S = 150


def test_a_rank_with_only_zero_advantages_does_not_hang_the_others(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    script = REPO / "tests" / "training" / "dapo_two_ranks.py"
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               str(script), str(tiny_model_dir), str(out), str(WATCHDOG_S)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output = ""
        pytest.fail(f"the two ranks did not finish two steps in {TIMEOUT_S} s:\n{output[-3000:]}")
    if "Timeout (" in output:  # a rank's watchdog: its stacks show the collective it waited in
        pytest.fail(f"a rank hung for {WATCHDOG_S} s (a collective the other rank never joined):\n{output[-6000:]}")
    assert process.returncode == 0, output[-5000:]

    ranks = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["step"] for r in ranks] == [2, 2]
    live = [[sum(a != 0 for a in step) for step in r["advantages"]] for r in ranks]
    assert live == [[0, 2], [4, 4]]  # rank 0: a uniform group, then 2 rows that train; rank 1: 4 rows twice
    # Both ranks applied the same updates, rank 1's gradient included: the parameters moved, and identically.
    assert ranks[0]["moved"] > 0 and ranks[0]["moved"] == ranks[1]["moved"]
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    # Two steps logged, the same on both ranks (step times aside); step 1 had one uniform group of two.
    logs = [[{k: v for k, v in entry.items() if k != "step_time"} for entry in r["log"]] for r in ranks]
    assert len(logs[0]) == 2 and logs[0] == logs[1]
    assert [entry["frac_reward_zero_std"] for entry in logs[0]] == [0.5, 0.0]
    assert all(entry["entropy"] > 0 for entry in logs[0])
