"""DAPO moves the reward: on a fixed seed and a small replay pool, the mean reward after training beats the one before.

What is learnt, honestly: the tiny model, briefly SFT-trained (``rl_support.sft_tiny_dir``; RL starts from SFT as in
the pipeline), cannot write a legal manager action yet, so the reward terms that judge its decisions do not move;
what it can learn is the length side of the reward, DAPO's overlong shaping. With 2 responses of at most 16 tokens
per rollout, rollouts whose model tokens run into the last 16 of ``max_completion_length`` = 32 are penalised
linearly, so ending a turn with ``<|im_end|>`` early pays. Sampling at temperature 0.5 (the SFT model ranks
``<|im_end|>`` 6th at the start of a turn; at 1.0 its long tail hides it) gives groups whose rollouts differ. The
mean total reward (composed episode reward + overlong shaping) of the same 2 start points x 8 rollouts with the same
sampling seed is measured before and after 4 DAPO steps at a high learning rate; the test asserts a margin of 0.2.
Since the tool responses carry the evidence digest (other SFT data, other contexts) the mean reward before is 0.174;
after 3 steps at 1e-3 it is 0.362, after 3 at 2e-3 0.346, after 4 at 2e-3 -0.138 (too large a step for this model),
and these settings (4 at 1e-3) pass. The test takes about 180 s plus the SFT fixture (about 20-90 s).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rl_support import load_script, sft_tiny_dir  # noqa: E402, F401  (a fixture)

REPO = Path(__file__).resolve().parents[2]
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
SETTINGS = {
    "max_new_tokens": 16,
    "max_responses": 2,
    "max_completion_length": 32,
    "overlong_buffer": 16,
    "temperature": 0.5,
    "num_generations": 4,
    "per_device_train_batch_size": 4,
    "learning_rate": 1e-3,
    "max_steps": 4,
    "max_start_points": 2,
    "max_rounds": 2,
}
EVAL_ROLLOUTS = 8  # per start point (two groups)


def _mean_reward(rollouts, model_dir: Path, seed: int) -> float:
    """Mean reward of ``EVAL_ROLLOUTS`` rollouts per start point of ``rollouts``' sampler, sampling seeded."""
    from transformers import AutoModelForCausalLM

    rollouts.use_model(AutoModelForCausalLM.from_pretrained(model_dir).eval())
    torch.manual_seed(seed)
    rewards = []
    for point in rollouts.sampler.points.points:
        for _ in range(EVAL_ROLLOUTS // rollouts.config.num_generations):
            rewards += rollouts.play_group(point).rewards
    return sum(rewards) / len(rewards)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # an SFT run and several DAPO steps on CPU
def test_mean_reward_after_training_is_higher(sft_tiny_dir, sft_smoke_dir, tmp_path):  # noqa: F811
    from rewards import RewardConfig
    from training.rl.trainer import ManagerRollouts, run_rl

    sft_out, rl_out = sft_tiny_dir, tmp_path / "rl"
    argv = ["--config", str(REPO / "configs" / "rl" / "tiny-cpu.yaml"), "--model_name_or_path", str(sft_out),
            "--pool", str(sft_smoke_dir), "--output_dir", str(rl_out), "--isolation", ISOLATION,
            "--disable_tqdm", "true"]  # fmt: skip
    for key, value in SETTINGS.items():
        argv += [f"--{key}", str(value)]
    model_args, rl_args, config = load_script("rl").make_parser().parse_args_and_config(argv)

    from transformers import AutoTokenizer

    evaluation = ManagerRollouts(rl_args, config, AutoTokenizer.from_pretrained(sft_out), RewardConfig(), seed=0)
    try:
        before = _mean_reward(evaluation, sft_out, seed=123)
        run_rl(model_args, rl_args, config)
        after = _mean_reward(evaluation, rl_out, seed=123)
    finally:
        evaluation.close()
    assert after > before + 0.2, (before, after)
