"""DAPO: where each of its four changes to GRPO runs in this project's RL (:mod:`training.rl.trainer`).

DAPO (Yu et al., 2025) changes four things in GRPO. The run is TRL's ``GRPOTrainer`` (subclassed as ``DapoTrainer``
in :mod:`training.rl.dapo_trainer`) configured by ``configs/rl/*.yaml``; this module holds the two pieces TRL does
not have and points at the TRL code for the others:

- **Token-level loss**: ``loss_type: dapo`` in the config (``GRPOConfig.loss_type``). The loss that runs is TRL's
  ``GRPOTrainer._compute_loss`` (``trl/trainer/grpo_trainer.py``): the per-token ``-min(r * A, clip(r) * A)``
  summed over every unmasked token (completion mask times the environment mask, ``tool_mask``) and divided by the
  generation batch's token count (``num_items_in_batch``), not averaged per sequence first, so long rollouts weigh by
  their length. ``DapoTrainer._compute_loss`` calls it on the rows whose advantage is not zero, padded with masked
  zero-advantage rows to the same count on every rank (the same loss).
  ``tests/training/dapo_reference.py`` is a plain-tensor copy of that loss; ``tests/training/test_dapo.py`` pins the
  copy on hand-computed values and TRL's loss to the copy.
- **Clip-higher**: the ratio is clipped to ``[1 - epsilon, 1 + epsilon_high]`` with ``epsilon_high > epsilon``
  (0.2 / 0.28), so low-probability tokens can still grow: TRL's ``epsilon`` / ``epsilon_high`` in the same loss.
- **Overlong reward shaping**: :func:`overlong_penalty`, a linear penalty over the last ``buffer`` tokens of the
  maximum completion length (soft overlong punishment), the ``overlong`` reward function; masking truncated
  completions out of the loss is an option of the rollout (``mask_truncated``).
- **Dynamic sampling**: groups whose rollouts all got the same reward carry no advantage; :func:`uniform_groups`
  finds them and :class:`training.rl.sampling.DynamicSampler` drops and refills them within a budget of rounds.

No KL term (``beta: 0``, checked by :func:`training.rl.trainer.check_config`) and no reference model. Plain Python,
nothing imported beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence


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
