"""DeepSpeed ZeRO-2 with two processes on CPU: ``torchrun`` launches ``scripts/sft.py`` twice.

``accelerate launch --cpu --num_processes 2`` would start a single process; ``torchrun --nproc_per_node 2`` starts
two, and the Trainer hands DeepSpeed the repository's ``configs/accelerate/deepspeed/zero2.json`` (its "auto"
values filled from the SFT config; bf16 stays off because the tiny config sets ``bf16: false``). On CPU DeepSpeed
uses its CPU accelerator (gloo-style collectives, a shared-memory op it compiles once into
``~/.cache/torch_extensions``) and the Trainer's torch AdamW. The run's own checkpoint proves both ranks took part:
DeepSpeed writes one optimizer partition per rank and records the data-parallel world size and ZeRO stage.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STEPS = 2


@pytest.fixture(scope="module")
def zero2_run(tmp_path_factory, tiny_model_dir, sft_short_dataset_dir) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("zero2") / "out"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        str(REPO / "scripts" / "sft.py"),
        "--config", str(REPO / "configs" / "sft" / "tiny-cpu.yaml"),
        "--deepspeed", str(REPO / "configs" / "accelerate" / "deepspeed" / "zero2.json"),
        "--model_name_or_path", str(tiny_model_dir),
        "--dataset_path", str(sft_short_dataset_dir),
        "--output_dir", str(out),
        "--max_train_samples", "4",
        "--max_eval_samples", "2",
        "--max_length", "512",
        "--max_steps", str(STEPS),
        "--save_strategy", "steps",
        "--save_steps", str(STEPS),
        "--disable_tqdm", "true",
    ]  # fmt: skip
    env = {**os.environ, "DS_BUILD_OPS": "0", "OMP_NUM_THREADS": "1"}
    process = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return out, process


def test_two_ranks_train_with_zero2_and_save(zero2_run):
    import torch

    out, process = zero2_run
    assert process.returncode == 0, process.stderr[-4000:]

    # Both ranks: one ZeRO optimizer partition each; DeepSpeed's record of the run.
    step_dir = out / f"checkpoint-{STEPS}" / f"global_step{STEPS}"
    partitions = sorted(p.name for p in step_dir.glob("zero_pp_rank_*_optim_states.pt"))
    assert partitions == ["zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    model_states = torch.load(step_dir / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)
    assert model_states["dp_world_size"] == 2
    assert model_states["ds_config"]["zero_optimization"]["stage"] == 2
    assert model_states["ds_config"]["train_batch_size"] == 2  # 1 per rank x 2 ranks, gradient accumulation 1
    optimizer = torch.load(step_dir / partitions[1], map_location="cpu", weights_only=False)["optimizer_state_dict"]
    assert int(optimizer["zero_stage"]) == 2 and set(optimizer["partition_count"]) == {2}

    # Two steps of a global batch of 2 went through the 4 samples once; the losses are finite.
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS and state["epoch"] == pytest.approx(1.0)
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == STEPS and all(math.isfinite(loss) for loss in losses)
    results = json.loads((out / "all_results.json").read_text())
    assert math.isfinite(results["eval/loss"]) and results["data/train_samples"] == 4

    # The final model is a loadable, finite Qwen3 with the tokenizer next to it.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert "{% generation %}" in AutoTokenizer.from_pretrained(out).chat_template
