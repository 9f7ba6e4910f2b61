"""A plain-tensor copy of the DAPO loss that TRL computes, for the tests to pin it.

The loss that trains is TRL's ``GRPOTrainer._compute_loss`` with ``loss_type: dapo`` (:mod:`training.rl.dapo` says
where); ``test_dapo.py`` checks :func:`policy_loss` on hand-computed values and TRL's loss against it, and
:func:`clip_fractions` on the values TRL logs as ``clip_ratio/low_mean`` and ``clip_ratio/high_mean``.
"""

from __future__ import annotations

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
