"""Two DAPO steps of ``DapoTrainer`` on two CPU ranks (gloo), one group of 4 rollouts per rank: at step 1 rank 0's
group is uniform (all its advantages 0), at step 2 two of its rows have a non-zero advantage; rank 1's four rows all
have one at both steps. Launched by tests/training/test_dapo_ranks.py.

Usage: ``dapo_two_ranks.py MODEL_DIR OUT_DIR WATCHDOG_S``. Rollouts are fixed token ids (no generation): the steps
exercise TRL's advantages, ``DapoTrainer._compute_loss`` and DDP's gradient all-reduce. Each rank writes
``OUT_DIR/rank-<r>.json``: its global step, its advantages per step, a checksum of the parameters after the steps,
how far they moved, and the logged steps. A rank still running after WATCHDOG_S seconds prints every thread's stack
and exits, so a hang in a collective ends there, with the place it waited.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from training.rl.dapo_trainer import dapo_trainer_class

GROUP = 4
RANK = int(os.environ["RANK"])
REWARDS = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 2.0]] if RANK == 0 else [[0.0, 1.0, 0.0, 1.0]] * 2  # per step


def rollouts(prompts: list, trainer) -> dict:
    gen = torch.Generator().manual_seed(RANK)
    return {
        "prompt_ids": [[11, 12, 13]] * len(prompts),
        "completion_ids": torch.randint(100, 1000, (len(prompts), 4), generator=gen).tolist(),
        "logprobs": [[-1.0] * 4] * len(prompts),
    }


def reward(prompts: list, completions: list, **_) -> list[float]:
    """This rank's rewards for the step (one call per step)."""
    return REWARDS.pop(0)


def main(model_dir: str, out: str, watchdog_s: str) -> None:
    faulthandler.dump_traceback_later(float(watchdog_s), exit=True)
    config = GRPOConfig(
        output_dir=out, use_cpu=True, bf16=False, loss_type="dapo", beta=0.0, num_generations=GROUP,
        per_device_train_batch_size=GROUP, max_completion_length=4, max_steps=2, learning_rate=1e-3,
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, seed=0,
    )  # fmt: skip
    advantages = []

    class Recording(dapo_trainer_class()):
        def _compute_loss(self, model, inputs):
            advantages.append(inputs["advantages"].tolist())
            return super()._compute_loss(model, inputs)

    trainer = Recording(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        rollouts=rollouts,
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    after = [p.detach() for p in trainer.model.parameters()]
    record = {
        "step": trainer.state.global_step,
        "advantages": advantages,
        "checksum": sum(p.double().sum().item() for p in after),
        "moved": sum((a - b).abs().sum().item() for a, b in zip(after, before, strict=True)),
        "log": [e for e in trainer.state.log_history if "loss" in e],
    }
    (Path(out) / f"rank-{RANK}.json").write_text(json.dumps(record), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
