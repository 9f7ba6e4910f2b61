"""A heavier loss on the tokens that name each trained tool call's action: the decision inside the turn.

A manager turn is one tool call, ``<tool_call>\\n{"name": "REPAIR", "arguments": {...}}``. With a per-token mean
loss the one or two tokens that name the action (the decision: repair or confirm) are ~1 % of a repair turn's loss,
the rest being arguments the model copies from the evidence; a wrong decision then costs a sample almost nothing
(a 3.5-nat miss spread over ~100 tokens reads as a loss of 0.035). ``action_name_weight`` multiplies the loss of
those name tokens, so the decision carries the gradient it needs, and leaves every other token's weight at 1.

The name tokens are found from the labels alone (:func:`action_name_mask`): each run of labelled positions is
decoded token by token, each call's ``<tool_call>{"name": "..."`` is matched in that text, and every token
overlapping the name's characters is marked. Nothing outside the model's own targets is read.

:func:`weighted_trainer_class` subclasses TRL's ``SFTTrainer`` (the study's SFT launches build it through
:mod:`training.study.sft`, passing it to :func:`training.sft.run_sft` as ``trainer_class``): in training its
``compute_loss`` runs TRL's own
(which logs entropy and token accuracy from the fused LM head's outputs), captures those outputs with a forward
hook, and returns the weighted loss over the same per-token log-probabilities, normalized by the same token count
as TRL's (a weight of 1 returns TRL's loss itself). Every training step also logs ``action_name_nll``, the mean
loss of the name tokens alone: whether the decision is being learned, which the per-token mean hides. Evaluation
keeps the plain per-token loss, comparable across weights. TRL's ``nll`` and ``dft`` losses can be weighted; label
smoothing and a custom ``compute_loss_func`` (which build the loss from full logits) are refused when the weight is
not 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

NAME_PATTERN = re.compile(r'<tool_call>\s*\{\s*"name"\s*:\s*"([^"]*)"')
"""A tool call's action name: the first JSON key of the call (a ``"name"`` inside its arguments is not matched)."""


def action_name_mask(targets: torch.Tensor, piece: Callable[[int], str]) -> torch.Tensor:
    """``True`` at the next-token ``targets`` (``-100`` = no label) whose text overlaps an action name
    (``<tool_call>{"name": "<here>"``) inside a run of labelled positions.

    ``piece(token_id)`` is the token's text (the tokenizer's decode of that one id)."""
    mask = torch.zeros(targets.shape, dtype=torch.bool, device=targets.device)
    for row, ids in enumerate(targets.tolist()):
        position = 0
        while position < len(ids):
            if ids[position] == -100:
                position += 1
                continue
            start = position
            while position < len(ids) and ids[position] != -100:
                position += 1
            pieces = [piece(token) for token in ids[start:position]]
            ends, total = [], 0
            for text in pieces:
                total += len(text)
                ends.append(total)
            for match in NAME_PATTERN.finditer("".join(pieces)):
                name_start, name_end = match.span(1)
                offset = 0
                for index, end in enumerate(ends):
                    if offset < name_end and end > name_start:  # the token's characters overlap the name's
                        mask[row, start + index] = True
                    offset = end
    return mask


def weighted_trainer_class(base: type, weight: float = 1.0) -> type:
    """``base`` (TRL's ``SFTTrainer``) whose training :meth:`compute_loss` weighs the action-name tokens by
    ``weight`` (1.0 returns TRL's loss untouched) and logs their mean negative log-likelihood as ``action_name_nll``
    (the decision's loss, whatever the weight). Its constructor refuses, before any step, a loss the weighting cannot
    apply to (``check_weighting``)."""
    if not weight > 0:
        raise ValueError(f"action_name_weight={weight} must be positive; 1 leaves the loss plain")

    class ActionWeightedSFTTrainer(base):
        action_name_weight: float = weight

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.check_weighting()

        def check_weighting(self) -> None:
            """Refuse, before training, the losses this weighting cannot apply to (built from full logits, or with
            a MoE router term)."""
            if self.action_name_weight != 1.0 and (
                self.compute_loss_func is not None
                or self.args.label_smoothing_factor > 0
                or getattr(self.args, "use_liger_kernel", False)
                or self.aux_loss_enabled
            ):
                raise ValueError(
                    f"action_name_weight={self.action_name_weight} reweights TRL's fused per-token loss; it cannot "
                    "be combined with compute_loss_func, label_smoothing_factor > 0, use_liger_kernel or a MoE router "
                    "loss; set action_name_weight to 1"
                )

        def _piece(self, token: int) -> str:
            cache = self.__dict__.setdefault("_pieces", {})
            if token not in cache:
                cache[token] = self.processing_class.decode([token])
            return cache[token]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if not model.training or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            weighted = self.action_name_weight != 1.0
            captured: list[Any] = []
            handle = model.register_forward_hook(lambda module, args, output: captured.append(output))
            try:
                loss = super().compute_loss(model, inputs, False, num_items_in_batch)
            finally:
                handle.remove()
            outputs = next((o for o in reversed(captured) if getattr(o, "log_probs", None) is not None), None)
            if outputs is None:  # a loss built from full logits (label smoothing, compute_loss_func): nothing to add
                if weighted:
                    raise ValueError("action_name_weight needs TRL's fused LM head outputs (log_probs); set it to 1")
                return loss
            labels = inputs.get("shift_labels")
            names = action_name_mask(labels if labels is not None else inputs["labels"][:, 1:], self._piece)
            with torch.no_grad():
                gather = self.accelerator.gather_for_metrics
                total = gather(-outputs.log_probs.detach()[names].sum()).sum()
                count = gather(names.sum()).sum()
                if count > 0:
                    self._metrics["train"]["action_name_nll"].append(float(total / count))
            if not weighted:
                return loss
            per_token = -outputs.log_probs
            if self.args.loss_type == "dft":
                per_token = per_token * outputs.log_probs.exp().detach()
            weights = torch.where(names, float(self.action_name_weight), 1.0).to(per_token.dtype)
            num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = (per_token * weights).sum() / torch.as_tensor(num_tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            return loss

    return ActionWeightedSFTTrainer
