"""The per-step metrics of a DAPO run besides TRL's own, and the callback that times each step.

TRL logs ``reward``, ``completions/*``, ``clip_ratio/low_mean`` and ``high_mean``, ``frac_reward_zero_std`` and
``entropy``. :class:`~training.rl.trainer.ManagerRollouts` adds, per gathered batch (:func:`rollout_metrics`):
``dapo/filtered_groups_frac``, ``dapo/sampling_rounds``, ``dapo/groups_played``, ``dapo/buffered_groups``,
``dapo/uniform_groups_in_batch``, ``dapo/truncated_frac``, ``dapo/context_capped_frac`` (rollouts that stopped at
the context cap), ``dapo/rollout_s``, ``manager/illegal_action_rate`` (over
the sampled responses), ``manager/decided_rate`` (rollouts whose model took a legal control action),
``manager/harness_confirmed_rate`` (rollouts left undecided, confirmed by the harness), ``manager/repair_precision``,
``manager/repair_recall``, ``manager/false_repair_rate`` (:func:`repair_metrics`: against the gold decision of the
start activation and the pool's known fault), ``manager/activations_per_episode``, ``manager/responses_per_rollout``;
with ``executor: ray`` ``dapo/env_actors_replaced``; with vLLM ``dapo/weight_sync_gap`` every ``weight_sync_steps``
steps. :func:`rollout_share_callback` logs ``dapo/rollout_share`` (rollout seconds over step seconds) and
``dapo/step_s``.
"""

from __future__ import annotations

import time
from typing import Any

from training.rl.rollout import Rollout, StartPoint, decided
from training.rl.sampling import GatherStats, Group


def rollout_metrics(groups: list[Group], stats: GatherStats, pool: Any) -> dict[str, float]:
    """The per-step training signal of a gathered batch (names in the module docstring)."""
    rollouts = [(g.start, r) for g in groups for r in g.rollouts]
    actions = [a for _, r in rollouts for a in r.actions]
    metrics = {
        "dapo/filtered_groups_frac": stats.filtered_fraction,
        "dapo/sampling_rounds": float(stats.rounds),
        "dapo/groups_played": float(stats.groups_played),
        "dapo/buffered_groups": float(stats.from_buffer),
        "dapo/uniform_groups_in_batch": float(stats.uniform_in_batch),
        "dapo/truncated_frac": sum(r.truncated for _, r in rollouts) / len(rollouts),
        "dapo/context_capped_frac": sum(r.stop_reason == "context_cap" for _, r in rollouts) / len(rollouts),
        "manager/activations_per_episode": sum(r.episode_activations for _, r in rollouts) / len(rollouts),
        "manager/responses_per_rollout": len(actions) / len(rollouts),
        "manager/decided_rate": sum(decided(r.actions) for _, r in rollouts) / len(rollouts),
        "manager/harness_confirmed_rate": sum(r.harness_confirmed for _, r in rollouts) / len(rollouts),
    }
    if actions:
        metrics["manager/illegal_action_rate"] = sum(not a["legal"] for a in actions) / len(actions)
    metrics.update(repair_metrics(rollouts, pool))
    return metrics


def repair_metrics(rollouts: list[tuple[StartPoint, Rollout]], pool: Any) -> dict[str, float]:
    """Repairs made by the model against the truth of each start activation: a repair is correct when the gold
    manager repaired there too and the named variable is one the pool's fault corrupts. Metrics whose denominator
    is empty in this batch are left out."""
    repairs = correct = warranted = unwarranted = false = 0
    for start, rollout in rollouts:
        fault = pool.fault_info(pool.entry(start.episode_id))
        variables = set(fault.variables) if fault is not None else set()
        made = [a for a in rollout.actions if a["name"] == "REPAIR" and a["legal"]]
        repairs += len(made)
        if start.gold_control == "REPAIR":
            warranted += 1
            correct += any(a["error_variable"] in variables for a in made)
        else:
            unwarranted += 1
            false += bool(made)
    out = {}
    if repairs:
        out["manager/repair_precision"] = correct / repairs
    if warranted:
        out["manager/repair_recall"] = correct / warranted
    if unwarranted:
        out["manager/false_repair_rate"] = false / unwarranted
    return out


def rollout_share_callback(rollouts: Any) -> Any:
    """A ``TrainerCallback`` that logs ``dapo/rollout_share`` and ``dapo/step_s`` each step; ``rollouts`` is the
    run's :class:`~training.rl.trainer.ManagerRollouts` (its ``seconds`` count the time spent in rollouts). Set the
    callback's ``trainer`` once the trainer exists."""
    from transformers import TrainerCallback

    class RolloutShare(TrainerCallback):
        """``dapo/rollout_share``: the rollout seconds of a step over the step's seconds (logged with the step)."""

        trainer: Any = None

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started, self.rollout_before = time.perf_counter(), rollouts.seconds

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = time.perf_counter() - self.started
            metrics = self.trainer._metrics["train"]
            metrics["dapo/rollout_share"].append((rollouts.seconds - self.rollout_before) / step)
            metrics["dapo/step_s"].append(step)

    return RolloutShare()
