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
  Qwen3's 151,936-token vocabulary if they were materialized; TRL's trainers compute the loss with their fused,
  chunked LM head instead (:func:`fused_head_gib`: the full logits never exist);
- **time**: ``8 * N`` FLOPs per trained token (forward 2N, backward 4N, recompute 2N) plus attention
  ``4 * L * S_mean * h`` per token per pass (x4: forward, backward x2, recompute), divided by the GPUs' peak bf16
  throughput times an assumed model-FLOPs utilization.

**A config's budget** (:func:`config_budget`, ``scripts/estimate_gpu.py --config``): the peak per GPU of one YAML
under ``configs/sft`` or ``configs/rl`` on a card of ``card_gib``, refused (``fits`` False, a one-line ``reason``)
when over it. Rows, each at the config's micro-batch (``per_device_train_batch_size``) times its longest sequence
(SFT ``max_length``; RL the context cap ``vllm_max_model_length``, which bounds prompt, responses and tool responses):

- model states: ZeRO-3 (above), or for LoRA under ZeRO-2 the frozen bf16 weights whole plus 18 B per adapter
  parameter with its gradients and Adam states sharded;
- activations as above, at ``rows x seq`` tokens (without gradient checkpointing every layer keeps its
  intermediates: ``L x`` one layer's);
- TRL's fused LM head (every TRL 1.16 trainer computes the loss with it, chunked): a ``4,096 x 32,768`` bf16 tile,
  the fp32 gradient of the head's weight, the fp32 gradient and the bf16 copy of the hidden states;
- :data:`RESERVED_GIB` for the CUDA context, NCCL buffers and allocator fragmentation.

RL with ``vllm_mode: colocate`` has two phases on each GPU. Training: the rows above; vLLM sleeps (TRL's sleep level
2 discards its weights and KV cache), so it holds nothing. Generation: the model states stay, the activations are
gone, and vLLM takes ``vllm_gpu_memory_utilization x card``: its bf16 weights, :data:`VLLM_OVERHEAD_GIB` (profiled
activations, sampler, CUDA graphs) and the KV cache, ``2 x L x kv_width x 2`` B per token; a cache smaller than one
full context is refused. ``vllm_mode: server`` generates on other GPUs: only the training phase counts here.
A config with ``use_cpu: true`` runs on CPU and is not sized against a card (``skipped`` says so).

These are estimates to plan a run, not measurements (no GPU was available to this project's CPU machines).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
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

QWEN3_1_7B = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": True,
    "max_position_embeddings": 40960,
}
"""The architecture of ``Qwen/Qwen3-1.7B`` (its published config.json)."""

SHAPES = {"qwen3-8b": QWEN3_8B, "qwen3-1.7b": QWEN3_1_7B}
"""Known architectures by the name a config's ``model_name_or_path`` contains (``Qwen/Qwen3-8B``,
``runs/sft-qwen3-8b``)."""

A100_BF16_TFLOPS = 312.0
RESERVED_GIB = 3.0
"""Per GPU outside the model's tensors: CUDA context, NCCL buffers, allocator fragmentation."""
VLLM_OVERHEAD_GIB = 2.0
"""vLLM's memory besides weights and KV cache: the profiled forward of ``max_num_batched_tokens`` (TRL sets 4,096),
the sampler, CUDA graphs."""
HEAD_TILE = (4096, 32768)
"""TRL's fused LM head tile: ``TOKEN_CHUNK_SIZE`` tokens x ``_CHUNKED_LOGPROB_CHUNK_SIZE`` vocabulary entries."""


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
    layers = states + act["checkpointed_layer_inputs_gib"] + act["recomputed_layer_gib"] + RESERVED_GIB
    peak_fused = layers + fused_head_gib(shape, seq)
    tokens = samples * mean_tokens * epochs
    return {
        "params": shape.params,
        "largest_layer": shape.largest_layer,
        "zero3_model_states_per_gpu_gib": round(states, 2),
        **{k: round(v, 2) for k, v in act.items()},
        "peak_per_gpu_fused_loss_gib": round(peak_fused, 1),
        "fused_lm_head_gib": round(fused_head_gib(shape, seq), 2),
        "reserved_gib": RESERVED_GIB,
        "peak_per_gpu_unfused_loss_gib": round(layers + act["logits_unfused_gib"], 1),
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


# ---------------------------------------------------------------- one config against one card
@dataclass
class Budget:
    """The peak per GPU of one config (:func:`config_budget`): ``rows`` in GiB, the ``phases`` they sum to, and the
    verdict (``fits``, with a one-line ``reason`` when not); ``skipped`` names why a config is not sized."""

    config: str
    kind: str  # "sft" | "rl"
    card_gib: float
    rows: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    fits: bool = True
    reason: str = ""
    skipped: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config, "kind": self.kind, "card_gib": self.card_gib, "fits": self.fits,
            "reason": self.reason, "skipped": self.skipped,
            "rows_gib": {k: round(v, 2) for k, v in self.rows.items()},
            "phases_gib": {k: round(v, 1) for k, v in self.phases.items()}, **self.facts,
        }  # fmt: skip


def shape_of(model_name: str) -> dict[str, Any]:
    """The architecture (:data:`SHAPES`) whose name ``model_name`` contains, else a one-line ``ValueError``."""
    for name, shape in SHAPES.items():
        if name in str(model_name).lower():
            return shape
    raise ValueError(
        f"model_name_or_path={model_name!r}: no known architecture in its name; use one of {sorted(SHAPES)} "
        "(or add its config.json to training.estimate.SHAPES)"
    )


def fused_head_gib(shape: Shape, tokens: int) -> float:
    """TRL's chunked LM head at ``tokens`` positions: the bf16 tile, the fp32 gradient of the head's weight, the fp32
    gradient and bf16 copy of the hidden states (the full ``tokens x vocab`` logits never exist)."""
    tile = HEAD_TILE[0] * HEAD_TILE[1] * 2
    return (tile + shape.vocab * shape.hidden * 4 + tokens * shape.hidden * (4 + 2)) / GiB


def layer_activations_gib(shape: Shape, tokens: int, checkpointing: bool) -> dict[str, float]:
    """Activations at ``tokens`` positions (``rows x seq``): checkpointed layer inputs plus the recomputed layer, or
    without checkpointing every layer's intermediates."""
    act = activations_per_gpu(shape, tokens)
    if checkpointing:
        return {k: act[k] for k in ("checkpointed_layer_inputs_gib", "recomputed_layer_gib")}
    return {"all_layer_intermediates_gib": shape.layers * act["recomputed_layer_gib"] / 2}


def lora_params(shape: Shape, rank: int, modules: list[str]) -> int:
    """Adapter parameters: ``rank x (in + out)`` per targeted projection per layer."""
    widths = {
        "q_proj": (shape.hidden, shape.q_width), "k_proj": (shape.hidden, shape.kv_width),
        "v_proj": (shape.hidden, shape.kv_width), "o_proj": (shape.q_width, shape.hidden),
        "gate_proj": (shape.hidden, shape.intermediate), "up_proj": (shape.hidden, shape.intermediate),
        "down_proj": (shape.intermediate, shape.hidden),
    }  # fmt: skip
    return shape.layers * sum(rank * sum(widths[m]) for m in modules if m in widths)


def kv_bytes_per_token(shape: Shape) -> int:
    """bf16 keys and values of every layer."""
    return 2 * shape.layers * shape.kv_width * 2


def config_budget(
    path: str | Path, *, gpus: int = 8, card_gib: float = 80.0, zero: int | None = None, shape: Shape | None = None
) -> Budget:
    """The memory budget of the SFT or RL config at ``path`` on ``gpus`` cards of ``card_gib`` (see the module
    docstring). ``zero``: the DeepSpeed stage (default 2 for LoRA, 3 otherwise, as the configs' launch lines)."""
    import yaml

    cfg = yaml.safe_load(Path(path).read_text()) or {}
    kind = "rl" if "num_generations" in cfg else "sft"
    budget = Budget(str(path), kind, card_gib)
    if cfg.get("use_cpu"):
        budget.skipped = "use_cpu: true, a CPU config: it trains on this machine's CPU, not on a card"
        return budget
    shape = shape or model_shape(shape_of(cfg.get("model_name_or_path", "")))
    rows_per_step = int(cfg.get("per_device_train_batch_size", 8))
    if kind == "rl":
        seq = int(cfg.get("vllm_max_model_length") or shape_of(cfg["model_name_or_path"])["max_position_embeddings"])
    else:
        seq = int(cfg.get("max_length", 1024))
    tokens = rows_per_step * seq
    peft = bool(cfg.get("use_peft"))
    stage = zero if zero is not None else (2 if peft else 3)
    if peft:
        adapters = lora_params(shape, int(cfg.get("lora_r", 16)), list(cfg.get("lora_target_modules") or []))
        budget.rows["model_states_gib"] = (2 * shape.params + adapters * (2 + 16 / gpus)) / GiB
    elif stage == 3:
        budget.rows["model_states_gib"] = zero3_states_per_gpu(shape, gpus)
    else:
        budget.rows["model_states_gib"] = (2 * shape.params + 16 * shape.params / gpus) / GiB
    budget.rows.update(layer_activations_gib(shape, tokens, bool(cfg.get("gradient_checkpointing", False))))
    budget.rows["fused_lm_head_gib"] = fused_head_gib(shape, tokens)
    budget.rows["reserved_gib"] = RESERVED_GIB
    budget.phases["training"] = sum(budget.rows.values())
    budget.facts.update(micro_batch_rows=rows_per_step, seq=seq, zero_stage=stage, gpus=gpus)
    colocate = kind == "rl" and cfg.get("use_vllm") and cfg.get("vllm_mode", "server") == "colocate"
    if colocate:
        share = float(cfg.get("vllm_gpu_memory_utilization", 0.3))
        vllm = share * card_gib
        weights = 2 * shape.params / GiB
        kv = vllm - weights - VLLM_OVERHEAD_GIB
        kv_tokens = int(max(kv, 0) * GiB // kv_bytes_per_token(shape))
        budget.rows.update(vllm_weights_gib=weights, vllm_overhead_gib=VLLM_OVERHEAD_GIB, vllm_kv_cache_gib=kv)
        budget.phases["generation"] = budget.rows["model_states_gib"] + vllm + RESERVED_GIB
        budget.facts.update(vllm_kv_tokens=kv_tokens, vllm_full_contexts=round(kv_tokens / seq, 2))
        if kv_tokens < seq:
            budget.fits = False
            budget.reason = (
                f"vllm_gpu_memory_utilization={share} gives vLLM {vllm:.1f} GiB: {weights:.1f} GiB of weights and "
                f"{VLLM_OVERHEAD_GIB:g} of overhead leave a KV cache of {kv_tokens} tokens, less than one "
                f"{seq}-token context; raise it (vLLM sleeps during training)"
            )
    for phase, gib in budget.phases.items():
        if budget.fits and gib > card_gib:
            budget.fits = False
            top = max(budget.rows, key=budget.rows.get)
            budget.reason = (
                f"the {phase} phase needs {gib:.1f} GiB per GPU, over the {card_gib:g} GiB card ({top} "
                f"{budget.rows[top]:.1f} GiB at {rows_per_step} rows x {seq} tokens); lower "
                "per_device_train_batch_size (raise steps_per_generation and gradient_accumulation_steps to keep the "
                "step), turn on gradient_checkpointing, or add GPUs"
            )
    return budget


def single_card_step_gib(shape: Shape, tokens: int, optimizer_bytes: int = 4) -> dict[str, float]:
    """One bf16 training step on one card, no ZeRO (what ``scripts/gpu_check.py`` measures): weights and gradients
    2 B/param each, ``optimizer_bytes`` of optimizer state per parameter (``torch.optim.AdamW`` on bf16 parameters
    keeps its two moments in bf16: 4), activations with gradient checkpointing and TRL's chunked LM head at
    ``tokens`` positions; ``peak_gib`` sums them (no reserve: this is what ``torch.cuda.max_memory_allocated``
    sees)."""
    rows = {
        "weights_gib": 2 * shape.params / GiB,
        "gradients_gib": 2 * shape.params / GiB,
        "optimizer_gib": optimizer_bytes * shape.params / GiB,
        **layer_activations_gib(shape, tokens, checkpointing=True),
        "fused_lm_head_gib": fused_head_gib(shape, tokens),
    }
    return {**rows, "peak_gib": sum(rows.values())}
