"""A heavier loss on the tokens that name each trained tool call's action: the decision inside the turn.

A manager turn is one tool call, ``<tool_call>\\n{"name": "REPAIR", "arguments": {...}}``. With a per-token mean
loss the one or two tokens that name the action (the decision: repair or confirm) are ~1 % of a repair turn's loss,
the rest being arguments the model copies from the evidence; a wrong decision then costs a sample almost nothing
(a 3.5-nat miss spread over ~100 tokens reads as a loss of 0.035). ``action_name_weight`` multiplies the loss of
those name tokens, so the decision carries the gradient it needs, and leaves every other token's weight at 1.

The name tokens are found from the labels alone (:func:`action_name_weights`): each run of labelled positions is
decoded token by token, each call's ``<tool_call>{"name": "..."`` is matched in that text, and every token overlapping the name's
characters is weighted. Nothing outside the model's own targets is read.

:func:`weighted_trainer_class` subclasses TRL's ``SFTTrainer``: in training its ``compute_loss`` runs TRL's own
(which logs entropy and token accuracy from the fused LM head's outputs), captures those outputs with a forward
hook, and returns the weighted loss over the same per-token log-probabilities, normalized by the same token count
as TRL's (so a weight of 1 returns TRL's loss exactly). Evaluation keeps the plain per-token loss, comparable across
weights. TRL's ``nll`` and ``dft`` losses are supported; label smoothing and a custom ``compute_loss_func`` (which
build the loss from full logits) are refused when the weight is not 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

NAME_PATTERN = re.compile(r'<tool_call>\s*\{\s*"name"\s*:\s*"([^"]*)"')
"""A tool call's action name: the first JSON key of the call (a ``"name"`` inside its arguments is not matched)."""


def action_name_weights(targets: torch.Tensor, piece: Callable[[int], str], weight: float) -> torch.Tensor:
    """Per-position loss weights for next-token ``targets`` (``-100`` = no label): ``weight`` at the tokens whose
    text overlaps an action name (``<tool_call>{"name": "<here>"``) inside a run of labelled positions, 1 elsewhere.

    ``piece(token_id)`` is the token's text (the tokenizer's decode of that one id)."""
    weights = torch.ones(targets.shape, dtype=torch.float32, device=targets.device)
    rows = targets.tolist()
    for row, ids in enumerate(rows):
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
                        weights[row, start + index] = weight
                    offset = end
    return weights


def weighted_trainer_class(base: type) -> type:
    """``base`` (TRL's ``SFTTrainer``) with :meth:`compute_loss` weighting the action-name tokens by the instance's
    ``action_name_weight`` (set it after construction; 1.0 leaves TRL's loss untouched)."""

    class ActionWeightedSFTTrainer(base):
        action_name_weight: float = 1.0

        def _piece(self, token: int) -> str:
            cache = self.__dict__.setdefault("_pieces", {})
            if token not in cache:
                cache[token] = self.processing_class.decode([token])
            return cache[token]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.action_name_weight == 1.0 or not model.training or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.compute_loss_func is not None or self.args.label_smoothing_factor > 0 or self.aux_loss_enabled:
                raise ValueError(
                    "action_name_weight reweights TRL's fused per-token loss; it cannot be combined with "
                    "compute_loss_func, label_smoothing_factor > 0 or a MoE router loss; set it to 1"
                )
            captured: list[Any] = []
            handle = model.register_forward_hook(lambda module, args, output: captured.append(output))
            try:
                super().compute_loss(model, inputs, False, num_items_in_batch)
            finally:
                handle.remove()
            outputs = captured[-1]
            if getattr(outputs, "log_probs", None) is None:
                raise ValueError("action_name_weight needs TRL's fused LM head outputs (log_probs); set it to 1")
            labels = inputs.get("shift_labels")
            targets = labels if labels is not None else inputs["labels"][:, 1:]
            weights = action_name_weights(targets, self._piece, self.action_name_weight)
            per_token = -outputs.log_probs
            if self.args.loss_type == "dft":
                per_token = per_token * outputs.log_probs.exp().detach()
            num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = (per_token * weights.to(per_token.dtype)).sum() / torch.as_tensor(num_tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            return loss

    return ActionWeightedSFTTrainer
