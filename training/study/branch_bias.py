"""A logit bias at one point of a reply (:class:`BranchBias`): where the reply so far is a given text, e.g. the start
of a tool call before its name, so a decision's prior moves without touching any other token (OpenAI's
``logit_bias`` applies at every position, so it cannot express this). The study serves a flat model arm with the
decision bias chosen on its training rows (:func:`training.study.margin.repair_bias`) through the in-process
backend's generic hook: :func:`serve_with_bias` sets ``HFChatBackend.logits_processors``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BranchBias:
    """A logit bias at one point of a reply: when the reply so far decodes to exactly ``prefix`` (special tokens
    kept), ``bias[token_id]`` is added to that token's logit for the next token; every other position is untouched.
    Adding ``b`` to one of two candidate tokens shifts their log-odds by exactly ``b`` (a decision threshold moved
    by ``b``), and also moves that token against every other candidate.

    With ``versus`` (a rival token id; ``bias`` then names one token) only the pair's order moves: the larger of the
    two logits is kept, the winner of ``logit[token] - logit[versus] + bias`` gets it and the other sits that far
    below. Under greedy decoding whether the reply takes one of the two is then unchanged (the pair's best logit is
    the same); only which of the two it takes follows the shifted log-odds."""

    prefix: str
    bias: dict[int, float]
    versus: int | None = None

    def __post_init__(self) -> None:
        if not self.prefix:
            raise ValueError("BranchBias.prefix is empty: name the reply text after which the bias applies")
        if not self.bias:
            raise ValueError("BranchBias.bias is empty: give at least one {token_id: added logit}")
        if self.versus is not None and (len(self.bias) != 1 or self.versus in self.bias):
            raise ValueError(
                f"BranchBias.versus={self.versus} needs bias to name exactly one other token (got {sorted(self.bias)})"
            )


class BranchBiasProcessor:
    """Adds a :class:`BranchBias` to the logits of a batch-1 ``generate`` whose prompt has ``prompt_len`` ids, at the
    step where the reply so far decodes to the bias's prefix (checked only while the reply is short enough to be it:
    a token spells at least one byte)."""

    def __init__(self, tokenizer: Any, branch: BranchBias, prompt_len: int):
        import torch

        self.tokenizer, self.prefix, self.prompt_len = tokenizer, branch.prefix, prompt_len
        self.max_len = len(branch.prefix.encode("utf-8"))
        self.ids = torch.tensor(list(branch.bias), dtype=torch.long)
        self.values = torch.tensor(list(branch.bias.values()), dtype=torch.float32)
        self.versus = branch.versus

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if input_ids.shape[0] != 1:
            raise ValueError(f"a branch bias handles one sequence at a time, got {input_ids.shape[0]}")
        reply = input_ids[0, self.prompt_len :]
        if not 0 < len(reply) <= self.max_len:
            return scores
        if self.tokenizer.decode(reply.tolist(), skip_special_tokens=False) != self.prefix:
            return scores
        scores = scores.clone()
        if self.versus is None:
            scores[0, self.ids] += self.values.to(scores.device, scores.dtype)
            return scores
        token, rival = int(self.ids[0]), self.versus
        if not (torch.isfinite(scores[0, token]) and torch.isfinite(scores[0, rival])):
            return scores  # one of the two is forbidden (a grammar's -inf): there is no pair to reorder
        top = torch.maximum(scores[0, token], scores[0, rival])
        shifted = scores[0, token] - scores[0, rival] + float(self.values[0])
        scores[0, token] = top - torch.clamp(-shifted, min=0)
        scores[0, rival] = top - torch.clamp(shifted, min=0)
        return scores


def serve_with_bias(backend: Any, branch: BranchBias | None) -> None:
    """Apply ``branch`` to every later reply of ``backend`` (an :class:`harness.llm.HFChatBackend`; None removes it):
    its ``logits_processors`` become the one :class:`BranchBiasProcessor`. A token id outside the model's logits is a
    ``ValueError``."""
    if branch is None:
        backend.logits_processors = []
        return
    width = int(backend.model.get_output_embeddings().weight.shape[0])
    named = [*branch.bias, *([] if branch.versus is None else [branch.versus])]
    outside = sorted(i for i in named if not 0 <= i < width)
    if outside:
        raise ValueError(f"branch bias names token ids {outside} outside the model's {width} logits")
    backend.logits_processors = [functools.partial(BranchBiasProcessor, backend.tokenizer, branch)]
