"""DAPO's additions to GRPO, one small pure function each.

DAPO (Yu et al., 2025) changes four things in GRPO; the trainer (:mod:`training.rl.trainer`, TRL's
``GRPOTrainer`` with ``loss_type: dapo``) gets each of them from here or from TRL, never from a copy:

- **Clip-higher**: the ratio is clipped to ``[1 - eps_low, 1 + eps_high]`` with ``eps_high > eps_low`` (0.2 / 0.28),
  so low-probability tokens can still grow. TRL's ``epsilon`` / ``epsilon_high``.
- **Token-level loss**: the clipped surrogate is averaged over every unmasked token of the batch, not per sequence
  first, so long rollouts weigh by their length. :func:`policy_loss` is the reference implementation on plain
  tensors; ``tests/training/test_dapo.py`` pins it on hand-computed values and against TRL's own ``dapo`` loss.
- **Overlong reward shaping**: :func:`overlong_penalty`, a linear penalty over the last ``buffer`` tokens of the
  maximum completion length (soft overlong punishment); masking truncated completions out of the loss is an option
  of the rollout (``mask_truncated``).
- **Dynamic sampling**: groups whose rollouts all got the same reward carry no advantage; :func:`uniform_groups`
  finds them and :class:`training.rl.sampling.DynamicSampler` drops and refills them within a budget of rounds.

No KL term (``beta: 0``) and no reference model. Everything here is torch or plain Python; nothing is imported at
module level beyond the standard library, so importing this module is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def _per_token_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """Advantages ``(batch,)`` as ``(batch, 1)`` so they broadcast over tokens; ``(batch, seq_len)`` unchanged."""
    return advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> torch.Tensor:
    """DAPO's token-level clipped surrogate loss (a scalar to minimise).

    Args:
        logprobs: log-probabilities of the sampled tokens under the current policy, ``(batch, seq_len)``.
        old_logprobs: the same under the policy that sampled them, ``(batch, seq_len)``.
        advantages: one per rollout ``(batch,)`` or one per token ``(batch, seq_len)``.
        mask: 1 for tokens that carry loss (model-generated), 0 for prompt, environment and padding tokens,
            ``(batch, seq_len)``.
        eps_low, eps_high: the ratio is clipped to ``[1 - eps_low, 1 + eps_high]``.

    Returns ``-sum(min(r * A, clip(r) * A) * mask) / sum(mask)`` with ``r = exp(logprobs - old_logprobs)``: the mean
    over all unmasked tokens of the batch (0 when no token is unmasked).
    """
    ratio = (logprobs - old_logprobs).exp()
    adv = _per_token_advantages(advantages)
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    per_token = -(ratio * adv).minimum(clipped * adv)
    weights = mask.to(per_token.dtype)
    return (per_token * weights).sum() / weights.sum().clamp(min=1.0)


def clip_fractions(
    ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.28
) -> tuple[float, float]:
    """The shares of unmasked tokens whose gradient the clip removes: ``(low, high)``.

    Low: ``r < 1 - eps_low`` with a negative advantage; high: ``r > 1 + eps_high`` with a positive one (TRL's
    ``clip_ratio/low_mean`` and ``clip_ratio/high_mean``). Shapes as in :func:`policy_loss`.
    """
    adv = _per_token_advantages(advantages)
    weights = mask.to(ratio.dtype)
    total = weights.sum().clamp(min=1.0)
    low = (((ratio < 1.0 - eps_low) & (adv < 0)).to(ratio.dtype) * weights).sum() / total
    high = (((ratio > 1.0 + eps_high) & (adv > 0)).to(ratio.dtype) * weights).sum() / total
    return float(low), float(high)


def overlong_penalty(length: int, max_length: int, buffer: int, factor: float = 1.0) -> float:
    """DAPO's soft overlong punishment of a completion of ``length`` model tokens (0 or negative).

    0 up to ``max_length - buffer`` tokens, then falling linearly to ``-factor`` at ``max_length``, and ``-factor``
    beyond. ``buffer`` 0 gives the hard form (``-factor`` only past ``max_length``).
    """
    if buffer < 0 or buffer > max_length:
        raise ValueError(f"overlong buffer={buffer} must lie in [0, max_length={max_length}]; pick a smaller buffer")
    if length > max_length:
        return -factor
    expected = max_length - buffer
    if length <= expected or buffer == 0:
        return 0.0
    return (expected - length) / buffer * factor


def uniform_groups(rewards: Sequence[float], group_size: int, atol: float = 1e-6) -> list[bool]:
    """One flag per group of ``group_size`` consecutive rewards: True when they all lie within ``atol`` of each other.

    Such a group has zero advantage for every rollout (GRPO normalises within the group), so it teaches nothing;
    dynamic sampling drops it.
    """
    if group_size < 1 or len(rewards) % group_size:
        raise ValueError(
            f"{len(rewards)} rewards do not split into groups of {group_size}; pass whole groups (num_generations)"
        )
    groups = [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]
    return [max(group) - min(group) <= atol for group in groups]
