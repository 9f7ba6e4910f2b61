"""Smoke test of scripts/bench_envs.py and envs.bench (figures present and consistent; no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from envs.bench import run_benchmark, sandbox_timer
from harness.sandbox import Kernel
from tests.envs.conftest import ISOLATION

ROOT = Path(__file__).resolve().parents[2]


def test_run_benchmark_counts_every_gold_step(pool):
    figures = run_benchmark(pool, len(pool), ISOLATION)
    recorded = 0
    for episode_id in pool.ids:
        entry = pool.entry(episode_id)
        record = pool.record(entry, "gold" if entry.kind == "fault" else "clean")
        recorded += sum(len(a["actions"]) for a in record.activations if a["actor"] == "policy")
    assert figures["episodes"] == len(pool) and figures["steps"] == recorded
    assert 0 < figures["sandbox_share"] < 1 and figures["step_ms_p50"] <= figures["step_ms_p95"]


def test_sandbox_timer_restores_the_methods():
    before = Kernel.__dict__["probe"]
    with sandbox_timer() as spent:
        assert Kernel.__dict__["probe"] is not before and spent == [0.0]
    assert Kernel.__dict__["probe"] is before


def test_script_prints_the_figures_as_its_last_line(synth_dir):
    command = [sys.executable, "scripts/bench_envs.py", "--pool", str(synth_dir), "--episodes", "1"]
    out = subprocess.run(
        [*command, "--isolation", ISOLATION], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"steps_per_s", "step_ms_p50", "step_ms_p95", "sandbox_share"} <= set(figures) and figures["episodes"] == 1
