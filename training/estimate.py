"""Memory and time expectations of the full-scale runs, with the arithmetic shown.

Everything is computed on CPU without downloading weights: the parameter count comes from instantiating the model
architecture on PyTorch's ``meta`` device from a config (``Qwen/Qwen3-8B``'s published shape is built in, so no hub
access is needed), the model-state memory from DeepSpeed's own estimators
(``estimate_zero{2,3}_model_states_mem_needs_all_cold``), and the rest from formulas printed next to the numbers:

- **activations** with gradient checkpointing, per GPU, micro-batch 1, sequence ``S``, bf16: the checkpointed input
  of every layer (``L * S * h * 2`` bytes) plus the recomputed layer in flight during its backward (projections
  ``S * (q + k + v + o widths) * 2``, MLP ``4 * S * i * 2``, norms/residual ``2 * S * h * 2``; doubled for its
  gradients); flash attention keeps no ``S x S`` matrix;
- **logits**: ``S * V * (2 + 4)`` bytes (bf16 logits and their fp32 upcast in the loss) — 35 GiB at 40,960 tokens for
  Qwen3's 151,936-token vocabulary if materialized; TRL's trainers never do: they score through TRL's fused LM head
  (labelled positions only, in tiles), so the fused-loss peak leaves them out;
- **time**: ``8 * N`` FLOPs per trained token (forward 2N, backward 4N, recompute 2N) plus attention
  ``4 * L * S_mean * h`` per token per pass (x4: forward, backward x2, recompute), divided by the GPUs' peak bf16
  throughput times an assumed model-FLOPs utilization.

These are estimates to plan a run, not measurements (no GPU was available to this project's CPU machines).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Any

GiB = 2**30  # what DeepSpeed's estimators print as "GB"; an "80 GB" A100 holds 80 GiB

QWEN3_8B = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
}
"""The architecture of ``Qwen/Qwen3-8B`` (its published config.json), so the estimate needs no hub access."""

A100_BF16_TFLOPS = 312.0


@dataclass(frozen=True)
class Shape:
    params: int
    largest_layer: int
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    q_width: int
    kv_width: int


def model_shape(config: dict[str, Any] | None = None) -> Shape:
    """Parameter count of the Qwen3 architecture built on the ``meta`` device (no memory, no weights)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(**(config or QWEN3_8B))
    with torch.device("meta"):
        model = Qwen3ForCausalLM(cfg)
    params = sum(p.numel() for p in model.parameters())
    largest = max(p.numel() for p in model.parameters())
    head_dim = cfg.head_dim
    return Shape(
        params=params,
        largest_layer=largest,
        layers=cfg.num_hidden_layers,
        hidden=cfg.hidden_size,
        intermediate=cfg.intermediate_size,
        vocab=cfg.vocab_size,
        q_width=cfg.num_attention_heads * head_dim,
        kv_width=cfg.num_key_value_heads * head_dim,
    )


def deepspeed_model_states(shape: Shape, stage: int, gpus: int, nodes: int = 1) -> str:
    """DeepSpeed's own table of model-state memory (params, gradients, Adam states) per GPU and per CPU node."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        if stage == 3:
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold

            estimate_zero3_model_states_mem_needs_all_cold(
                total_params=shape.params,
                largest_layer_params=shape.largest_layer,
                num_gpus_per_node=gpus,
                num_nodes=nodes,
            )
        else:
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold

            estimate_zero2_model_states_mem_needs_all_cold(
                total_params=shape.params, num_gpus_per_node=gpus, num_nodes=nodes
            )
    return buffer.getvalue().strip()


def zero3_states_per_gpu(shape: Shape, gpus: int, nodes: int = 1) -> float:
    """ZeRO-3, nothing offloaded: 18 bytes per parameter (bf16 weights and gradients, fp32 master weights and two
    Adam moments) sharded over every GPU, plus the largest layer gathered in full (DeepSpeed's formula)."""
    return (18 * shape.params / (gpus * nodes) + 4 * shape.largest_layer) / GiB


def activations_per_gpu(shape: Shape, seq: int) -> dict[str, float]:
    checkpoints = shape.layers * seq * shape.hidden * 2
    projections = seq * (2 * shape.q_width + 2 * shape.kv_width) * 2
    mlp = 4 * seq * shape.intermediate * 2
    norms = 2 * seq * shape.hidden * 2
    return {
        "checkpointed_layer_inputs_gib": checkpoints / GiB,
        "recomputed_layer_gib": 2 * (projections + mlp + norms) / GiB,
        "logits_unfused_gib": seq * shape.vocab * 6 / GiB,
    }


def train_time_hours(shape: Shape, tokens: float, mean_seq: float, gpus: int, mfu: float) -> float:
    per_token = 8 * shape.params + 4 * 4 * shape.layers * mean_seq * shape.hidden
    return tokens * per_token / (gpus * A100_BF16_TFLOPS * 1e12 * mfu) / 3600


def plan(
    gpus: int = 8, seq: int = 40960, samples: int = 13_441, mean_tokens: float = 10_000, epochs: int = 3, mfu=0.35
) -> dict[str, Any]:
    """The numbers of the README's table: Qwen3-8B SFT on 8x A100 80 GB with ZeRO-3."""
    shape = model_shape()
    act = activations_per_gpu(shape, seq)
    states = zero3_states_per_gpu(shape, gpus)
    peak_fused = states + act["checkpointed_layer_inputs_gib"] + act["recomputed_layer_gib"]
    tokens = samples * mean_tokens * epochs
    return {
        "params": shape.params,
        "largest_layer": shape.largest_layer,
        "zero3_model_states_per_gpu_gib": round(states, 2),
        **{k: round(v, 2) for k, v in act.items()},
        "peak_per_gpu_fused_loss_gib": round(peak_fused, 1),
        "peak_per_gpu_unfused_loss_gib": round(peak_fused + act["logits_unfused_gib"], 1),
        "sft_tokens": tokens,
        "sft_hours": round(train_time_hours(shape, tokens, mean_tokens, gpus, mfu), 1),
        "assumptions": {
            "gpus": gpus,
            "seq": seq,
            "samples": samples,
            "mean_tokens": mean_tokens,
            "epochs": epochs,
            "mfu": mfu,
            "peak_tflops": A100_BF16_TFLOPS,
        },  # fmt: skip
    }
