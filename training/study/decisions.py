"""Decision points: the held-out check activations where the gold manager repairs or confirms, played closed loop.

A whole faulted episode costs a model manager 25-40 calls (minutes on CPU), and the held-out fault types fire late in
their tasks (turns 5-6 of 6), so cutting episodes short drops them. A *decision point* plays only the activation
that matters: a turn-end *check activation* (the state is updated; the manager verifies it) that the synthesis gold
manager ends with ``REPAIR`` (its checks showed a violation) or with ``FINALIZE_RELATIONS`` (it confirms: a repair
there is a false one), in the real :class:`envs.ManagerEnv` over a held-out replay pool:

1. the episode is reset and the gold manager (:meth:`envs.pool.PoolEntry.gold_policy`) plays every activation before
   the point, so each arm reaches the same state and sees the same activation;
2. the arm's manager plays the point's activation closed loop: its tool calls are run by the runtime and the sandbox
   (probes included) and answered with their ``<tool_response>``, until a control action ends the activation, for at
   most ``max_responses`` *model* responses (later ones are sent empty: the runtime refuses them and its fallback
   ends the activation). A response the manager's harness wrote without a model (the ``hier`` manager's tier 0:
   ``last_actor == "harness"``, e.g. its ``check_execution`` before tier 1 decides) costs none of that budget, so
   every arm's model gets the same number of responses; the runtime's ``max_actions`` still bounds the activation.
   **Takeover** (``takeover``): ``"activation"`` gives the arm the whole activation (it writes its own checks);
   ``"decision"`` lets the gold manager run its verification procedure first (``check_execution`` and the probes it
   writes from the turn's stated requirements, :mod:`synthesis.checks`: a function of the manager's own prompt) and
   hands the arm the request at which the gold would decide (:func:`training.rl.rollout.gold_decision`), so the arm
   reads the same evidence and makes the decision: repair (naming the variable and quoting the evidence) or confirm.
   The gold's calls are kept in the row (``context``), not scored as the arm's;
3. the gold manager finishes the episode; the replay worker carries the fault, so a REPAIR naming the corrupted
   variable leads to the recorded repaired branch and anything else to the faulty continuation. The episode's reward
   (:func:`rewards.score_episode`) is the point's reward. An arm that ends its part without a legal control action
   has not decided: the harness confirms in its place at the next check request of the pause
   (:func:`training.rl.rollout.undecided_confirm`; the row's ``harness_confirmed``), so an undecided point scores as a
   confirmation and never inherits the gold's later decision at the same pause, exactly as in the RL rollouts.

:func:`decision_points` draws the points of one pool: half ``REPAIR`` (rounded up), half ``FINALIZE_RELATIONS``, each
kind spread over as many tasks as it has (one point per task in a seeded task order, then a second per task, ...).

This is how the RL rollouts are played (:mod:`training.rl.rollout`), with a manager policy instead of a sampling
session. One row per point and arm goes to ``OUT/arms/<arm>/decisions.jsonl`` (resumable): its ``group`` (the
held-out split it came from), its actions (each with its ``actor``, ``policy`` or ``harness``), the control, the
reward and the point's model usage (``model_calls``, ``prompt_tokens``, ``completion_tokens``: the differences of the
manager's counters over the activation, :func:`model_usage`; None for a manager without a model).
The metrics are in :func:`training.study.decision_metrics.decision_metrics`.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.jsonl import append_jsonl, read_jsonl_resumable
from harness.manager.hier import HARNESS, POLICY
from harness.manager.lifecycle import CONTROL_ACTIONS
from training.rl.rollout import HarnessConfirm, StartPoint, action_stats, check_takeover, gold_decision, start_points
from training.study.decision_metrics import harness_confirmed, own_control

if TYPE_CHECKING:
    from envs.manager import ManagerEnv
    from envs.pool import ReplayPool

DECISIONS_FILE = "decisions.jsonl"
DECISION_CONTROLS = ("REPAIR", "FINALIZE_RELATIONS")
"""The gold controls a decision point ends with: a repair, or the confirmation."""


def model_usage(policy: Any) -> dict[str, int] | None:
    """A model policy's usage so far: ``calls`` (model calls), ``prompt_tokens`` and ``completion_tokens`` (as its
    backend reported them; the hier manager's tier-1 :attr:`~harness.manager.hier.HierPolicy.stats`); None for a
    policy without them (no model)."""
    stats = getattr(policy, "stats", None)
    source = policy if isinstance(getattr(policy, "calls", None), int) else stats
    names = ("calls", "prompt_tokens", "completion_tokens")
    if source is None or not all(isinstance(getattr(source, name, None), int) for name in names):
        return None
    return {name: int(getattr(source, name)) for name in names}


"""The gold control actions that make a check activation a decision point: repair, or confirm (do not repair)."""


def point_key(point: StartPoint, group: str = "") -> str:
    """A point's id in the rows: ``episode@activation``, prefixed by its group (``group/episode@activation``)."""
    key = f"{point.episode_id}@{point.activation}"
    return f"{group}/{key}" if group else key


def decision_points(pool: ReplayPool, n: int, seed: int = 0) -> list[StartPoint]:
    """At most ``n`` decision points of ``pool``: ``ceil(n / 2)`` of its REPAIR check activations and the rest
    FINALIZE_RELATIONS ones (a kind that runs short leaves its share to the other), each kind spread over its tasks
    (a seeded order of the tasks, one point from each in turn); returned alternating kinds, REPAIR first."""
    if n < 1:
        raise ValueError(f"decision points: n={n} must be at least 1")
    points = [p for p in start_points(pool, ("turn_end",)) if p.gold_control in DECISION_CONTROLS]
    queues = {control: _spread(pool, [p for p in points if p.gold_control == control], f"{seed}/{control}")
              for control in DECISION_CONTROLS}  # fmt: skip
    want = {"REPAIR": min(len(queues["REPAIR"]), (n + 1) // 2)}
    want["FINALIZE_RELATIONS"] = min(len(queues["FINALIZE_RELATIONS"]), n - want["REPAIR"])
    want["REPAIR"] = min(len(queues["REPAIR"]), n - want["FINALIZE_RELATIONS"])
    kinds = [queues[c][: want[c]] for c in DECISION_CONTROLS]
    chosen: list[StartPoint] = []
    for i in range(max(map(len, kinds))):
        chosen += [kind[i] for kind in kinds if i < len(kind)]
    return chosen


def _spread(pool: ReplayPool, points: list[StartPoint], seed: str) -> list[StartPoint]:
    """``points`` in the order that covers the most tasks first: the tasks in a seeded order, each task's points in a
    seeded order, then round robin over the tasks."""
    rng = random.Random(seed)
    by_task: dict[str, list[StartPoint]] = {}
    for point in points:
        by_task.setdefault(pool.entry(point.episode_id).task_id, []).append(point)
    tasks = sorted(by_task)
    rng.shuffle(tasks)
    for task in tasks:
        rng.shuffle(by_task[task])
    ordered: list[StartPoint] = []
    while any(by_task.values()):
        ordered += [by_task[task].pop(0) for task in tasks if by_task[task]]
    return ordered


def play_decision(
    env: ManagerEnv,
    point: StartPoint,
    manager: Any,
    max_responses: int,
    takeover: str = "activation",
    group: str = "",
) -> dict[str, Any]:
    """Play ``point`` with ``manager`` (anything with ``respond(PolicyInput) -> str``; ``last_actor`` optional) as
    described in the module docstring, the arm taking over at ``takeover``; returns the point's row (``group``, the
    gold's ``context`` calls, the arm's actions, control, whether it repaired, reward, model usage)."""
    check_takeover(takeover)
    assert env.pool is not None
    entry = env.pool.entry(point.episode_id)
    reference = entry.gold_policy()
    _, info = env.reset(options={"episode_id": point.episode_id})
    activation, actions, context, seconds, answered = -1, [], [], 0.0, 0
    reward, terminated, truncated, taken = 0.0, False, False, takeover == "activation"
    confirm = HarnessConfirm()  # the harness confirms in the arm's place when it ends its part undecided
    before = model_usage(manager)
    while not (terminated or truncated):
        inp = info["policy_input"]
        activation += int(not inp.previous)
        ours = activation == point.activation
        actor, asked, gold_call = POLICY, False, False
        if activation > point.activation:  # the runtime ended the point's activation
            confirm.part_ended(actions)
        if not ours:  # the next check request of the pause is the harness's when the arm left it undecided
            response = confirm.due(inp)
            if response is None:
                response = reference.respond(inp)
        elif not taken and not gold_decision(response := reference.respond(inp)):
            gold_call = True  # the gold's verification call, run for the arm to read
        elif answered < max_responses:
            taken = True
            began = time.perf_counter()
            response = manager.respond(inp)
            seconds += time.perf_counter() - began
            actor, asked = getattr(manager, "last_actor", POLICY), True
            answered += actor != HARNESS
        else:  # over the budget: the harness confirms an undecided point, else refused (the runtime ends it)
            response = confirm.over_budget(inp, actions)
        _, reward, terminated, truncated, info = env.step(response)
        if asked:
            stats = action_stats(response, bool(info.get("legal")))
            actions.append({**stats, "actor": actor, "result": info.get("action_result")})
        elif gold_call:
            context.append({**action_stats(response, bool(info.get("legal"))), "result": info.get("action_result")})
    if activation < point.activation or not taken:
        raise RuntimeError(
            f"episode {point.episode_id} ended after {activation + 1} policy activations, before decision point "
            f"{point.activation}{'' if taken else ' was handed over (the gold never decided there)'}; the pool's gold "
            "record and its replay disagree (re-synthesize the held-out split)"
        )
    controls = [a["name"] for a in actions if a["legal"] and a["name"] in CONTROL_ACTIONS]  # the manager's, tier 0 too
    row = {
        "key": point_key(point, group),
        "group": group,
        "takeover": takeover,
        "episode_id": point.episode_id,
        "activation": point.activation,
        "task_id": entry.task_id,
        "fault_type": (entry.fault_info or {}).get("fault_type"),
        "gold": point.gold_control,
        "context": context,
        "actions": actions,
        "control": None,  # the model's own, below
        "repaired": "REPAIR" in controls,
        "harness_confirmed": confirm.confirmed,
        "reward": float(reward),
        "reward_terms": dict(info.get("reward_terms") or {}),
        "truncated": bool(truncated),
        "seconds": round(seconds, 3),
        **_usage(before, model_usage(manager)),
    }
    row["control"], row["harness_confirmed"] = own_control(row), harness_confirmed(row)
    return row


def _usage(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int | None]:
    """A point's model usage: the manager's counters after minus before (None without a model)."""
    if before is None or after is None:
        return {"model_calls": None, "prompt_tokens": None, "completion_tokens": None}
    return {
        "model_calls": after["calls"] - before["calls"],
        "prompt_tokens": after["prompt_tokens"] - before["prompt_tokens"],
        "completion_tokens": after["completion_tokens"] - before["completion_tokens"],
    }


def score_decisions(
    path: Path,
    env: ManagerEnv,
    points: list[StartPoint],
    manager: Any,
    max_responses: int,
    label: str = "",
    takeover: str = "activation",
    group: str = "",
) -> list[dict[str, Any]]:
    """Every point's row for one arm (``label``: its name on the progress bar) in one ``group``, appended to ``path``
    as it is played (a re-run plays only the missing ones; the file may hold other groups' rows)."""
    from tqdm import tqdm

    done = read_jsonl_resumable(path)  # a torn last row of a killed run is dropped and played again
    seen = {row["key"] for row in done}
    todo = [point for point in points if point_key(point, group) not in seen]
    path.parent.mkdir(parents=True, exist_ok=True)
    what = f"decision points {label}{f' ({group})' if group else ''}"
    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=what, unit="point")
    with bar:
        for point in todo:
            row = play_decision(env, point, manager, max_responses, takeover, group)
            append_jsonl(path, row)
            done.append(row)
            bar.update()
            bar.set_postfix(control=row["control"], gold=row["gold"])
    wanted = {point_key(p, group) for p in points}
    return [row for row in done if row["key"] in wanted]
