"""The GPU plan's arithmetic: the meta-device parameter count equals Qwen3-8B's by hand, ZeRO-3 model states equal
DeepSpeed's own estimator, and the activation formulas give the hand-computed values."""

from __future__ import annotations

import re

import pytest

from training.estimate import QWEN3_8B, activations_per_gpu, deepspeed_model_states, model_shape, zero3_states_per_gpu


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
    assert act["logits_unfused_gib"] > 30  # why the loss goes through TRL's fused LM head
