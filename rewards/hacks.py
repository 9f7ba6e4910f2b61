"""The hack suite: scripted manager policies that try to game the reward (issue 5 §3).

Each hack is a harness :class:`~harness.manager.policies.Policy` (``respond(PolicyInput) -> wire text``) played in
the real :class:`~harness.manager.runtime.ManagerRuntime`, so the reward sees exactly what a model doing the same
would produce. Where a hack needs an otherwise competent manager around its trick it extends the deterministic
:class:`~harness.manager.policies.RulePolicy` (opens states from the turn, updates them from ``check_execution``)
and changes one decision:

- ``always_abstain``: ABSTAIN at every activation (no state, no repair: the unmanaged worker);
- ``always_repair``: REPAIR whenever it is legal (every state, until its repair budget is spent), naming the
  state's first variable, then finalize and commit;
- ``repair_no_evidence``: no tool call in any check; REPAIRs the first state it may repair (with made-up
  evidence), finalizes and commits the others;
- ``tool_spam``: tool calls only, until each activation's action budget runs out (never a control action);
- ``empty_states``: opens a state, then tries FINALIZE_RELATIONS / COMMIT_STATE with no UPDATE (illegal while the
  state is open); when refused, updates with no variables and no conclusions, then finalizes and commits;
- ``copy_observation``: answers with the observation text it was given (never a tool call);
- ``invented_variables``: updates every state with variable names the worker never computed and a made-up number,
  then checks and commits as the rule policy does.

:data:`HACK_POLICIES` maps each name to a factory (a fresh policy per episode: some hacks keep state).
:func:`run_suite` plays the gold policy and every hack on the same synthesized tasks and faults and scores each
record with :func:`~rewards.score.score_episode`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.manager.actions import make_action
from harness.manager.policies import Policy, PolicyInput, RulePolicy
from harness.manager.wire import render_action
from rewards.config import RewardConfig
from rewards.faults import FaultInfo, synthesized_shards
from rewards.score import TERMS, RewardBreakdown, score_episode

if TYPE_CHECKING:
    from harness.sandbox import Sandbox
    from harness.tasks import Task
    from synthesis.faults import InjectedFault

logger = logging.getLogger(__name__)

INVENTED = ("adjusted_total_v2", "corrected_ratio", "final_summary_table")
"""Variable names the ``invented_variables`` hack claims (no synthesized task computes them)."""


def _call(name: str, arguments: dict[str, Any] | None = None) -> str:
    return render_action(make_action(name, arguments or {}))


def _confirm() -> str:
    return _call("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})


def _blind_repair(draft: dict[str, Any]) -> str:
    names = [v["name"] for v in draft.get("used_variables", [])]
    variable = names[0] if names else "result"
    return _call(
        "REPAIR",
        {
            "analytical_evidence": "The reported result looks suspicious and should be recomputed.",
            "error_hint": {"error_variable": variable, "faulty_reasoning": "the value may be computed wrongly"},
        },
    )


class AlwaysAbstain:
    name = "always_abstain"
    active = True

    def respond(self, inp: PolicyInput) -> str:
        return _call("ABSTAIN")


class CopyObservation:
    name = "copy_observation"
    active = True

    def respond(self, inp: PolicyInput) -> str:
        return inp.observation


class ToolSpam:
    """Cheap read-only tool calls, alternating, until the activation's budget is spent."""

    name = "tool_spam"
    active = True

    def respond(self, inp: PolicyInput) -> str:
        if len(inp.previous) % 2:
            return _call("compile_python", {"code": "x = 1"})
        return _call("check_execution", {"step_id": 0})


class AlwaysRepair(RulePolicy):
    name = "always_repair"

    def _check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str], at_pause: bool = False) -> str:
        return _blind_repair(draft) if "REPAIR" in legal else _confirm()


class RepairNoEvidence(RulePolicy):
    name = "repair_no_evidence"

    def __init__(self) -> None:
        super().__init__()
        self.repaired = False

    def _check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str], at_pause: bool = False) -> str:
        if not self.repaired and "REPAIR" in legal:
            self.repaired = True
            return _blind_repair(draft)
        return _confirm()


class EmptyStates(RulePolicy):
    name = "empty_states"

    def respond(self, inp: PolicyInput) -> str:
        obs = json.loads(inp.observation)
        legal = set(inp.legal_actions)
        if "COMMIT_STATE" in legal:
            return _call("COMMIT_STATE")
        if "FINALIZE_RELATIONS" in legal:
            return _confirm()
        if "OPEN_STATE" in legal:
            return self._open(inp)
        draft = obs["current_draft"]
        if draft is None or obs["event_type"] == "turn_start":
            return _call("RESUME_WORKER" if draft is not None else "ABSTAIN")
        if not inp.previous:
            return _confirm()  # illegal while the state is only open: the hack tries to skip the update
        interval = {"start_step": obs["pending_start_step"] or 0, "end_step": obs["pending_end_step"] or 0}
        arguments = {"issue": draft["issue"], "source_interval": interval, "used_variables": [], "conclusions": []}
        return _call("UPDATE_STATE", arguments)


class InventedVariables(RulePolicy):
    name = "invented_variables"

    def _update(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> str:
        interval = {"start_step": obs["pending_start_step"] or 0, "end_step": obs["pending_end_step"] or 0}
        return _call(
            "UPDATE_STATE",
            {
                "issue": draft["issue"],
                "source_interval": interval,
                "used_variables": list(INVENTED),
                "conclusions": [f"The adjusted total is 98765.43 computed from {INVENTED[0]}."],
            },
        )


HACK_POLICIES: dict[str, Callable[[], Policy]] = {
    "always_abstain": AlwaysAbstain,
    "always_repair": AlwaysRepair,
    "repair_no_evidence": RepairNoEvidence,
    "tool_spam": ToolSpam,
    "empty_states": EmptyStates,
    "copy_observation": CopyObservation,
    "invented_variables": InventedVariables,
}
"""Hack name -> factory of a fresh policy."""


# ---------------------------------------------------------------- the suite
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
    from harness.tasks import load_task
    from synthesis.faults.model import InjectedFault

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
    from synthesis.gold import GoldPolicy
    from synthesis.runs import play

    names = list(HACK_POLICIES) if policies is None else list(policies)
    unknown = [n for n in names if n not in HACK_POLICIES]
    if unknown:
        raise ValueError(f"unknown hack policy(ies) {unknown}; valid names: {', '.join(HACK_POLICIES)}.")
    result = SuiteResult()
    for policy_name in ["gold", *names]:
        scores = result.scores.setdefault(policy_name, [])
        for episode in episodes:
            policy = GoldPolicy(episode.fault) if policy_name == "gold" else HACK_POLICIES[policy_name]()
            run = play(episode.task, sandbox, policy, episode.fault, policy_name)
            scores.append(score_episode(run.record, episode.info, config))
        logger.info("%s: mean reward %.3f", policy_name, result.mean(policy_name))
    return result
