"""A compact LM head for CPU training: score only the positions that carry a label.

TRL's trainers call ``model(..., labels=labels, fused_lm_head=True)`` (a forward that
:func:`trl.trainer.utils.add_fused_lm_head` patches in) and read per-token ``log_probs``, ``entropy`` and ``is_top1``
from the result. On devices without Triton, TRL scores *every* position in vocabulary tiles — by design, so that
accelerators such as Neuron see fixed shapes. On CPU that is the whole cost of a step for a manager sample: its
~3,200-token system turn (the tool schemas) carries no label, only the few hundred assistant tokens do, and a
151,936-word vocabulary makes each scored position expensive. Measured on the tiny Qwen3 (3,649 tokens, 249
labelled): 45 s forward + 84 s backward with TRL's CPU tiles, about 2 s in all here.

:func:`use_compact_lm_head` re-patches the model's forward so that, on CPU, the LM head runs on the labelled
positions only (``hidden[mask]``), then an ordinary ``log_softmax``; the result is the same ``FusedCausalLMOutput``
with the same values (tests/training/test_lm_head.py compares them with TRL's). Everything else — GPU devices,
pre-shifted labels (sequence parallelism), MoE router losses, scaled or soft-capped logits, more labelled positions
than :data:`MAX_COMPACT_POSITIONS` (memory) — goes to TRL's forward unchanged.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

MAX_COMPACT_POSITIONS = 8192
"""Above this many labelled positions in one forward, TRL's tiled path is used (its memory stays bounded)."""

SUPPORTED_OUTPUTS = frozenset({"log_probs", "entropy", "is_top1"})


def use_compact_lm_head(model: Any) -> bool:
    """Re-patch ``model.forward`` (already patched by TRL) with the compact CPU path; ``False`` when not applicable.

    ``model`` is the transformers model TRL patched (for a PEFT model, its base model). Models whose logits are
    scaled or soft-capped keep TRL's forward (those transforms are TRL's to apply).
    """
    text_config = model.config.get_text_config()
    exotic = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")
    if any(getattr(text_config, name, None) is not None for name in exotic):
        return False
    trl_forward = model.forward

    @functools.wraps(type(model).forward)
    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs):
        lm_head = self.get_output_embeddings()
        if (
            not fused_lm_head
            or labels is None
            or shift_labels is not None
            or lm_head.weight.device.type != "cpu"
            or getattr(text_config, "output_router_logits", False)
            or int((labels[:, 1:] != -100).sum()) > MAX_COMPACT_POSITIONS
        ):
            return trl_forward(
                *args,
                fused_lm_head=fused_lm_head,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state[:, :-1]
        return compact_scores(hidden, labels[:, 1:], lm_head, num_items_in_batch)

    model.forward = types.MethodType(forward, model)
    return True


def compact_scores(
    hidden: torch.Tensor, targets: torch.Tensor, lm_head: torch.nn.Module, num_items_in_batch: Any = None
) -> Any:
    """TRL's ``FusedCausalLMOutput`` for next-token ``targets`` (``-100`` = no label) from backbone ``hidden`` states.

    ``log_probs`` keeps its gradient; ``entropy`` and ``is_top1`` are metrics (no gradient). Positions without a label
    hold 0 / ``False``, as in TRL.
    """
    from trl.trainer.utils import FusedCausalLMOutput

    mask = targets != -100
    logits = lm_head(hidden[mask]).float()
    log_softmax = torch.log_softmax(logits, dim=-1)
    picked = log_softmax.gather(-1, targets[mask].unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(log_softmax.exp() * log_softmax).sum(-1)
        is_top1 = logits.argmax(-1) == targets[mask]
    # masked_scatter keeps the output connected to the model even when no position is labelled (a zero gradient)
    log_probs = picked.new_zeros(mask.shape).masked_scatter(mask, picked)
    denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(
        loss=-log_probs.sum() / denominator,
        log_probs=log_probs,
        entropy=entropy.new_zeros(mask.shape).masked_scatter(mask, entropy),
        log_sum_sq_probs=None,
        mean_logits=None,
        is_top1=torch.zeros_like(mask).masked_scatter(mask, is_top1),
        label_mask=mask,
        aux_loss=None,
    )
