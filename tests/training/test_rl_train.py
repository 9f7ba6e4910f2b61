"""scripts/rl.py end to end on CPU (accelerate launch, the tiny config, real env, real TRL trainer): it completes its
steps, logs the training signal, saves a servable model, and a run resumed from a checkpoint continues it exactly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rl_support import sft_tiny_dir  # noqa: E402, F401  (a fixture)

from training.rl.rollout_groups import GROUPS_FILE, read_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
TINY = REPO / "configs" / "rl" / "tiny-cpu.yaml"


def _launch(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
               str(REPO / "configs" / "accelerate" / "cpu.yaml"), str(REPO / "scripts" / "rl.py"), *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done


def _common(model: Path, pool: Path, out: Path) -> list[str]:
    return ["--config", str(TINY), "--model_name_or_path", str(model), "--pool", str(pool),
            "--output_dir", str(out), "--isolation", ISOLATION, "--disable_tqdm", "true"]  # fmt: skip


@pytest.fixture(scope="module")
def rl_run(sft_smoke_dir, tiny_model_dir, tmp_path_factory):
    """The tiny config from the random tiny model, one sampling round per step (its groups are all uniform)."""
    out = tmp_path_factory.mktemp("rl") / "out"
    _launch(*_common(tiny_model_dir, sft_smoke_dir, out), "--max_rounds", "1")
    return out


def _history(out: Path) -> list[dict]:
    return json.loads((out / "trainer_state.json").read_text())["log_history"]


def test_tiny_config_completes_its_steps_and_logs_the_training_signal(rl_run):
    steps = [e for e in _history(rl_run) if "reward" in e]
    assert [e["step"] for e in steps] == [1, 2]
    for entry in steps:
        for key in ("rewards/protocol/mean", "rewards/outcome/mean", "rewards/overlong/mean", "frac_reward_zero_std",
                    "completions/mean_length",
                    "dapo/filtered_groups_frac", "dapo/sampling_rounds", "dapo/rollout_share", "dapo/rollout_s",
                    "manager/illegal_action_rate", "manager/activations_per_episode", "manager/decided_rate",
                    "manager/harness_confirmed_rate"):  # fmt: skip
            assert key in entry, key
        assert entry["manager/decided_rate"] == 0 and entry["manager/illegal_action_rate"] == 1  # never a legal action
        # the random tiny model never ends a response: every group is uniform, filtered, and nothing is trained
        filtered, uniform = entry["dapo/filtered_groups_frac"], entry["frac_reward_zero_std"]
        assert filtered == uniform == entry["dapo/sampling_rounds"] == 1
        assert entry["loss"] == 0 and "clip_ratio/low_mean" not in entry  # no row was forwarded
        assert 0 < entry["dapo/rollout_share"] < 1
        assert entry["completions/mean_length"] <= 32  # model tokens per rollout (max_completion_length)
        # the logged reward is the weighted sum of the terms (RewardConfig defaults) plus the overlong shaping
        weights = {"protocol": 0.2, "grounding": 0.2, "intervention": 0.4, "outcome": 0.4, "economy": 0.1}
        total = sum(w * (entry.get(f"rewards/{t}/mean") or 0.0) for t, w in weights.items())
        assert entry["reward"] == pytest.approx(total + entry["rewards/overlong/mean"], abs=1e-4)
    # the rollout-group record holds the batch each step trained: 2 uniform groups of 4 illegal rollouts
    records = read_records(rl_run / GROUPS_FILE)
    assert [r["step"] for r in records] == [1, 1, 2, 2] and all(r["uniform"] and r["trained"] for r in records)
    for entry, pair in zip(steps, (records[:2], records[2:]), strict=True):
        rollouts = [x for r in pair for x in r["rollouts"]]
        assert len(rollouts) == 8 and {x["decision"] for x in rollouts} == {"illegal"}
        assert sum(x["reward"] for x in rollouts) / 8 == pytest.approx(entry["reward"], abs=1e-4)
        assert all(x["centered"] == 0 for x in rollouts)


def test_the_trained_model_is_saved_servable(rl_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert AutoModelForCausalLM.from_pretrained(rl_run).config.model_type == "qwen3"
    assert "{% generation %}" in AutoTokenizer.from_pretrained(rl_run).chat_template
    card = (rl_run / "README.md").read_text()
    assert "- loss_type: dapo" in card and "- epsilon_high: 0.28" in card
    rows = [line.split(" | ") for line in card.split("## What the trained groups sampled")[1].splitlines()]
    rows = [row for row in rows if len(row) == 6 and row[2].isdigit()]  # the table's data rows
    assert {row[1] for row in rows} == {"illegal"} and sum(int(row[2]) for row in rows) == 16  # 2 steps x 8
    results = json.loads((rl_run / "all_results.json").read_text())
    assert results["rl/reward_first_step"] == next(e["reward"] for e in _history(rl_run) if "reward" in e)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # an SFT run and several DAPO steps on CPU
def test_resume_continues_from_the_saved_position(sft_tiny_dir, sft_smoke_dir, tmp_path):  # noqa: F811
    """From the SFT model at temperature 0.5 (groups differ, so the weights move): a run resumed from checkpoint-1
    plays the start points the uninterrupted run played in step 2, gets its rewards and ends with its weights (model,
    optimizer, scheduler and RNG from the Trainer; sampler position and buffer from rl_state-0.json)."""
    from safetensors.torch import load_file

    settings = ["--temperature", "0.5", "--max_rounds", "1", "--save_strategy", "steps", "--save_steps", "1"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    _launch(*_common(sft_tiny_dir, sft_smoke_dir, whole), *settings)
    first = json.loads((whole / "checkpoint-1" / "rl_state-0.json").read_text())
    second = json.loads((whole / "checkpoint-2" / "rl_state-0.json").read_text())
    position = lambda s: s["points"]["epoch"] * s["points"]["n_points"] + s["points"]["cursor"]  # noqa: E731
    assert position(first) == 2 and position(second) == 4  # 2 groups per step, one round
    rewards = [e["reward"] for e in _history(whole) if "reward" in e]
    trained = [e for e in _history(whole) if e.get("frac_reward_zero_std", 1) < 1]
    assert trained and all({"clip_ratio/low_mean", "clip_ratio/high_mean", "entropy"} <= e.keys() for e in trained)

    _launch(*_common(sft_tiny_dir, sft_smoke_dir, resumed), *settings,
            "--resume_from_checkpoint", str(whole / "checkpoint-1"))  # fmt: skip
    assert [e["reward"] for e in _history(resumed) if "reward" in e] == rewards  # step 1 from the checkpoint
    assert json.loads((resumed / "checkpoint-2" / "rl_state-0.json").read_text()) == second
    step_2 = [r for r in read_records(whole / GROUPS_FILE) if r["step"] == 2]
    assert step_2 and read_records(resumed / GROUPS_FILE) == step_2  # the same groups, recorded once
    ours, theirs = load_file(resumed / "model.safetensors"), load_file(whole / "model.safetensors")
    start = load_file(sft_tiny_dir / "model.safetensors")
    assert any(not torch.equal(theirs[name], start[name]) for name in theirs)  # training moved the weights
    for name in theirs:
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=1e-6)
