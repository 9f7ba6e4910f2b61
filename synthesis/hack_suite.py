"""The hack suite: the gold policy and every reward hack of :data:`rewards.hacks.HACK_POLICIES`, played on the same
synthesized episodes and scored with :func:`~rewards.score.score_episode`.

:func:`suite_episodes` reads the episodes of a synthesis output folder (every task clean, and with each kept fault);
:func:`run_suite` plays each policy on each of them with :func:`synthesis.runs.play` (scripted worker, the real
:class:`~harness.manager.runtime.ManagerRuntime`, a fresh kernel) and returns a :class:`SuiteResult`: per policy,
the reward of every episode, with the means per term as a table (``scripts/bench_rewards.py`` prints it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.tasks import Task, load_task
from rewards.config import RewardConfig
from rewards.faults import FaultInfo
from rewards.hacks import HACK_POLICIES
from rewards.score import TERMS, RewardBreakdown, score_episode
from synthesis.checks import folder_checks
from synthesis.faults.model import InjectedFault
from synthesis.gold import GoldPolicy
from synthesis.labels import synthesized_shards
from synthesis.runs import play

if TYPE_CHECKING:
    from harness.sandbox import Sandbox

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SuiteEpisode:
    """One synthesized episode to play: a task and its injected fault (None: the clean episode)."""

    task: Task
    fault: InjectedFault | None

    @property
    def info(self) -> FaultInfo | None:
        f = self.fault
        return None if f is None else FaultInfo(f.turn_id, f.fault_type, f.variables, f.error_variable, f.benign)


def suite_episodes(synthesis_out: str | Path) -> list[SuiteEpisode]:
    """Every task of a synthesis output folder, clean and with each kept fault.

    The faults are the shard outcomes' ``injected`` dicts (the full :class:`~synthesis.faults.model.InjectedFault`
    the gold policy needs: evidence probe and hint); a shard written before they were kept is an error naming the
    fix. Tasks whose synthesis failed (the shard's ``error``) are skipped."""
    out = Path(synthesis_out)
    episodes: list[SuiteEpisode] = []
    for shard in synthesized_shards(out):
        if shard.get("error"):
            continue
        task = load_task(out / "tasks" / shard["task_id"])
        episodes.append(SuiteEpisode(task, None))
        for outcome in shard.get("outcomes") or []:
            if not outcome["kept"]:
                continue
            injected = outcome.get("injected")
            if injected is None:
                raise ValueError(
                    f"{out}: shard of {shard['task_id']}, fault {outcome['fault_id']} has no 'injected' fault (an "
                    "older shard); re-run `stateguard synthesize` with this version to play the gold policy on it."
                )
            fault = InjectedFault(**{**injected, "variables": tuple(injected["variables"])})
            episodes.append(SuiteEpisode(task, fault))
    if not episodes:
        raise ValueError(f"{out}: every shard holds a failed task; there is nothing to play.")
    return episodes


@dataclass
class SuiteResult:
    """Per policy, the reward of every episode (in the order of the episodes)."""

    scores: dict[str, list[RewardBreakdown]] = field(default_factory=dict)

    def mean(self, policy: str, term: str = "total") -> float | None:
        """Mean of ``term`` over the episodes where it applies (None where it never does)."""
        values = [b.total if term == "total" else b.terms[term] for b in self.scores[policy]]
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    def table(self) -> str:
        """Mean reward per policy and per term, one row per policy ('-': the term never applied)."""
        columns = ["total", *TERMS]
        head = f"{'policy':<20}" + "".join(f"{c:>14}" for c in columns)
        rows = [head, "-" * len(head)]
        for policy in self.scores:
            cells = [self.mean(policy, c) for c in columns]
            rows.append(f"{policy:<20}" + "".join(f"{'-' if v is None else f'{v:.3f}':>14}" for v in cells))
        return "\n".join(rows)

    def totals(self) -> dict[str, float]:
        return {policy: round(self.mean(policy) or 0.0, 4) for policy in self.scores}


def run_suite(
    episodes: Sequence[SuiteEpisode],
    sandbox: Sandbox,
    policies: Sequence[str] | None = None,
    config: RewardConfig | None = None,
) -> SuiteResult:
    """Play ``gold`` and the named hacks (default: all of :data:`HACK_POLICIES`) on every episode with
    :func:`synthesis.runs.play` (scripted worker, real runtime, fresh kernel) and score each record."""
    names = list(HACK_POLICIES) if policies is None else list(policies)
    unknown = [n for n in names if n not in HACK_POLICIES]
    if unknown:
        raise ValueError(f"unknown hack policy(ies) {unknown}; valid names: {', '.join(HACK_POLICIES)}.")
    result = SuiteResult()
    for policy_name in ["gold", *names]:
        scores = result.scores.setdefault(policy_name, [])
        for episode in episodes:
            if policy_name == "gold":
                policy = GoldPolicy(checks=folder_checks(episode.task))
            else:
                policy = HACK_POLICIES[policy_name]()
            run = play(episode.task, sandbox, policy, episode.fault, policy_name)
            scores.append(score_episode(run.record, episode.info, config))
        logger.info("%s: mean reward %.3f", policy_name, result.mean(policy_name))
    return result
