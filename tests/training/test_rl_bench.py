"""scripts/bench_rl.py: a small run (2 start points x 4 rollouts, one step) prints its table and, last, one JSON line
whose figures agree with each other."""

from __future__ import annotations

import json

import pytest
from rl_support import load_script

pytest.importorskip("torch")


def test_bench_prints_the_step_figures_last(sft_smoke_dir, tiny_model_dir, capsys):
    bench = load_script("bench_rl")
    argv = ["--pool", str(sft_smoke_dir), "--model", str(tiny_model_dir), "--prompts", "2", "--rollouts", "4"]
    assert bench.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    figures = json.loads(lines[-1])
    assert (figures["prompts"], figures["rollouts_per_prompt"]) == (2, 4)
    assert 0 < figures["rollout_s"] <= figures["step_s"] and 0 < figures["rollout_share"] <= 1
    assert figures["train_s"] == pytest.approx(figures["step_s"] - figures["rollout_s"], abs=0.02)
    assert figures["rollout_share"] == pytest.approx(figures["rollout_s"] / figures["step_s"], abs=0.01)
    assert figures["mean_completion_tokens"] == 32  # the random tiny model never stops: 2 responses x 16 tokens
    assert figures["tokens_per_s"] == pytest.approx(32 * 8 / figures["rollout_s"], rel=0.01)
    assert figures["ratio"] == pytest.approx(figures["tokens_per_s"] / figures["generate_tokens_per_s"], rel=0.01)
    assert ["figure", "value"] in [line.split() for line in lines]  # the table, above the JSON line
    with pytest.raises(SystemExit):
        bench.main(["--prompts", "3", "--rollouts", "3"])
