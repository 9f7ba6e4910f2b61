"""Smoke test of scripts/bench_envs.py and envs.bench (figures present and consistent; no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

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


def _run_script(synth_dir, *extra: str) -> dict:
    command = [sys.executable, "scripts/bench_envs.py", "--pool", str(synth_dir), "--episodes", "1", *extra]
    out = subprocess.run(
        [*command, "--isolation", ISOLATION], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_script_prints_the_figures_as_its_last_line(synth_dir):
    figures = _run_script(synth_dir, "--rollouts", "0")
    assert {"steps_per_s", "step_ms_p50", "step_ms_p95", "sandbox_share"} <= set(figures) and figures["episodes"] == 1
    assert "ray_vs_local" not in figures


def test_script_compares_local_and_ray_rollouts_and_sizes_the_env_workers(synth_dir):
    pytest.importorskip("ray")
    figures = _run_script(synth_dir, "--rollouts", "2", "--chunk", "1", "--gen-s", "0.001")
    assert figures["rollouts"] == 2 and figures["workers"] == 1 and figures["step_rollouts"] == 512
    assert figures["ray_vs_local"] == pytest.approx(figures["ray_rollouts_per_s"] / figures["local_rollouts_per_s"],
                                                    rel=0.05)  # fmt: skip
    assert figures["ray_within_0_9x"] == (figures["ray_vs_local"] >= 0.9)
    cost = figures["env_cpu_s_per_rollout"]
    assert cost > 0 and figures["local_cpu_s_per_rollout"] > 0
    assert figures["workers_per_gpu_node"] == math.ceil(512 * cost / 0.001)
