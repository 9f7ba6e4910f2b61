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


def test_step_figures_take_the_last_step_and_its_own_tokens():
    bench = load_script("bench_rl")
    history = [
        {"dapo/step_s": 10.0, "dapo/rollout_s": 6.0, "dapo/rollout_share": 0.6, "frac_reward_zero_std": 0.5,
         "completions/mean_length": 20.0, "num_tokens": 4000},
        {"loss": 0.1},
        {"dapo/step_s": 8.0, "dapo/rollout_s": 4.0, "dapo/rollout_share": 0.5, "frac_reward_zero_std": 0.25,
         "completions/mean_length": 30.0, "num_tokens": 9000},
    ]  # fmt: skip
    figures = bench.step_figures(history, rollouts=16)
    assert figures["step_s"] == 8.0 and figures["train_s"] == 4.0
    assert figures["tokens_per_s"] == 30.0 * 16 / 4.0
    assert figures["train_tokens_per_s"] == (9000 - 4000) * 0.75 / 4.0  # this step's tokens, trained rows only
    assert bench.step_figures(history[:1], rollouts=16)["train_tokens_per_s"] == 4000 * 0.5 / 4.0


def test_the_gpu_shape_is_qwen3_1_7b():
    torch = pytest.importorskip("torch")
    from transformers import Qwen3ForCausalLM

    from training.models import TinyQwen3Config

    bench = load_script("bench_rl")
    with torch.device("meta"):  # shapes only, no memory
        model = Qwen3ForCausalLM(TinyQwen3Config.from_overrides(**bench.SHAPES["qwen3-1.7b"]).to_hf())
    assert (
        sum(p.numel() for p in model.parameters()) == 1_720_574_976
    )  # model card: 1.7 B (tied 151,936 x 2,048 embedding)
    assert bench.DEVICE_OVERRIDES["cuda"] == {"use_cpu": False, "bf16": True}
