"""The GPU plan's arithmetic: the meta-device parameter count equals Qwen3-8B's by hand, ZeRO-3 model states equal
DeepSpeed's own estimator, and the activation formulas give the hand-computed values. Every SFT and RL config is sized
against an 80 GB card (the CPU ones are skipped by rule), the script refuses one over the card in one line, and the
numbers docs/gpu-recipe.md quotes are the configs'."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from training.estimate import (
    QWEN3_8B,
    RESERVED_GIB,
    activations_per_gpu,
    config_budget,
    deepspeed_model_states,
    kv_bytes_per_token,
    model_shape,
    zero3_states_per_gpu,
)

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs" / "rl").glob("*.yaml")) + sorted((REPO / "configs" / "sft").glob("*.yaml"))


@pytest.fixture(scope="module")
def shape():
    return model_shape()


def test_the_parameter_count_equals_qwen3_8b_by_hand(shape):
    h, i, v, layers = QWEN3_8B["hidden_size"], QWEN3_8B["intermediate_size"], QWEN3_8B["vocab_size"], 36
    q, kv = 32 * 128, 8 * 128
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * 128  # q,k,v,o, MLP, 2 norms, q/k norms
    assert shape.params == 2 * v * h + layers * per_layer + h == 8_190_735_360
    assert shape.largest_layer == v * h


def test_zero3_model_states_match_deepspeeds_estimator(shape):
    table = deepspeed_model_states(shape, 3, gpus=8)
    options = "offload_param=none, offload_optimizer=none, zero_init=1"
    row = next(line for line in table.splitlines() if options in line)
    per_gpu = float(re.findall(r"([\d.]+)GB", row)[1])
    assert zero3_states_per_gpu(shape, 8) == pytest.approx(per_gpu, abs=0.01)


def test_activation_arithmetic(shape):
    act = activations_per_gpu(shape, 40960)
    assert act["checkpointed_layer_inputs_gib"] == pytest.approx(36 * 40960 * 4096 * 2 / 2**30)
    assert act["logits_unfused_gib"] == pytest.approx(40960 * 151936 * 6 / 2**30)
    assert act["logits_unfused_gib"] > 30  # why the loss must be fused (TRL's chunked LM head)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_config_fits_an_80_gb_card_or_is_a_cpu_config(path, shape):
    cfg = yaml.safe_load(path.read_text())
    is_8b = "qwen3-8b" in cfg["model_name_or_path"].lower()
    budget = config_budget(path, card_gib=80.0, shape=shape if is_8b else None)
    if cfg.get("use_cpu"):  # CPU configs train on this machine: no card to size them against
        assert budget.skipped.startswith("use_cpu: true") and not budget.rows
        return
    assert budget.fits, budget.reason
    assert budget.phases and max(budget.phases.values()) <= 80.0
    assert budget.phases["training"] == pytest.approx(sum(v for k, v in budget.rows.items() if "vllm" not in k))
    if budget.kind == "rl":
        assert budget.facts["vllm_full_contexts"] >= 1  # vLLM's KV cache holds at least one whole context


def test_the_rl_row_arithmetic(shape):
    budget = config_budget(REPO / "configs" / "rl" / "qwen3-8b.yaml", card_gib=80.0, shape=shape)
    cfg = yaml.safe_load((REPO / "configs" / "rl" / "qwen3-8b.yaml").read_text())
    rows, seq = cfg["per_device_train_batch_size"], cfg["vllm_max_model_length"]
    assert budget.rows["checkpointed_layer_inputs_gib"] == pytest.approx(36 * rows * seq * 4096 * 2 / 2**30)
    assert budget.rows["fused_lm_head_gib"] == pytest.approx(
        (4096 * 32768 * 2 + 151936 * 4096 * 4 + rows * seq * 4096 * 6) / 2**30
    )
    assert kv_bytes_per_token(shape) == 2 * 36 * 8 * 128 * 2
    share = cfg["vllm_gpu_memory_utilization"]
    assert budget.phases["generation"] == pytest.approx(zero3_states_per_gpu(shape, 8) + share * 80 + RESERVED_GIB)
    kv = share * 80 - 2 * shape.params / 2**30 - budget.rows["vllm_overhead_gib"]
    assert budget.facts["vllm_kv_tokens"] == int(kv * 2**30 // kv_bytes_per_token(shape))


def _estimate_main():
    spec = importlib.util.spec_from_file_location("estimate_gpu", REPO / "scripts" / "estimate_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"per_device_train_batch_size": 8}, r"the training phase needs 2\d\d\.\d GiB per GPU, over the 80 GiB card"),
        ({"vllm_gpu_memory_utilization": 0.2}, r"KV cache of 0 tokens, less than one 40960-token context"),
    ],
)
def test_the_script_refuses_a_config_over_the_card_in_one_line(tmp_path, capsys, change, reason):
    cfg = yaml.safe_load((REPO / "configs" / "rl" / "qwen3-8b.yaml").read_text())
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump({**cfg, **change}))
    assert _estimate_main()(["--config", str(path), str(REPO / "configs" / "rl" / "tiny-cpu.yaml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"REFUSED {path}: ") and re.search(reason, err[0]), err


def test_the_gpu_recipe_quotes_the_configs():
    text = (REPO / "docs" / "gpu-recipe.md").read_text()
    rl = yaml.safe_load((REPO / "configs" / "rl" / "qwen3-8b.yaml").read_text())
    number = lambda pattern: int(re.search(pattern, text).group(1).replace(",", ""))  # noqa: E731
    assert number(r"up to ([\d,]+) model tokens") == rl["max_completion_length"]
    assert number(r"context capped at ([\d,]+)\s+tokens") == rl["vllm_max_model_length"]
    groups = rl["per_device_train_batch_size"] * rl["gradient_accumulation_steps"] * 8 // rl["num_generations"]
    assert number(r"per step (\d+) start points") == groups == 64
    assert number(r"start points × (\d+) rollouts") == rl["num_generations"]
    assert f"vllm_gpu_memory_utilization: {rl['vllm_gpu_memory_utilization']}" in text
    assert f"`per_device_train_batch_size: {rl['per_device_train_batch_size']}`" in text
    budget = config_budget(REPO / "configs" / "rl" / "qwen3-8b.yaml", card_gib=80.0)
    for phase, gib in budget.phases.items():
        assert f"**{phase} phase**" in text and f"**{gib:.1f} GiB**" in text
