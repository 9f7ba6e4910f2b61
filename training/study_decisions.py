"""Decision points: the held-out activations where the gold manager commits or repairs, played closed loop.

A whole faulted episode costs a model manager 25-40 calls (minutes on CPU), and the held-out fault types fire late in
their tasks (turns 5-6 of 6), so cutting episodes short drops them. A *decision point* plays only the activation
that matters: the turn-end activation in which the synthesis gold manager ends the turn with ``REPAIR`` (a harmful
fault's turn) or with ``COMMIT_STATE`` (where a repair would be a false one), in the real
:class:`envs.ManagerEnv` over the held-out replay pool:

1. the episode is reset and the gold manager (:meth:`envs.pool.PoolEntry.gold_policy`) plays every activation before
   the point, so each arm reaches the same state and sees the same activation;
2. the arm's manager plays the point's activation closed loop: its tool calls are run by the runtime and the sandbox
   (probes included) and answered with their ``<tool_response>``, until a control action ends the activation, for at
   most ``max_responses`` *model* responses (later ones are sent empty: the runtime refuses them and its fallback
   ends the activation). A response the manager's harness wrote without a model (the ``hier`` manager's tier 0:
   ``last_actor == "harness"``, e.g. its ``check_execution`` before tier 1 decides) costs none of that budget, so
   every arm's model gets the same number of responses; the runtime's ``max_actions`` still bounds the activation;
3. the gold manager finishes the episode; the replay worker carries the fault, so a REPAIR naming the corrupted
   variable leads to the recorded repaired branch and anything else to the faulty continuation. The episode's reward
   (:func:`rewards.score_episode`) is the point's reward.

This is how the RL rollouts are played (:mod:`training.rl.rollout`), with a manager policy instead of a sampling
session. One row per point and arm goes to ``OUT/arms/<arm>/decisions.jsonl`` (resumable): its actions (each with
its ``actor``, ``policy`` or ``harness``), the control, the reward and the point's model usage (``model_calls``,
``prompt_tokens``, ``completion_tokens``: the differences of the manager's counters over the activation,
:func:`training.study_arms.model_usage`; None for a manager without a model). The metrics are in
:func:`training.study_report.decision_metrics`.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.jsonl import append_jsonl, read_jsonl_resumable
from harness.manager.hier import HARNESS, POLICY
from harness.manager.lifecycle import CONTROL_ACTIONS
from training.rl.rollout import StartPoint, action_stats, start_points
from training.study_arms import model_usage

if TYPE_CHECKING:
    from envs.manager import ManagerEnv
    from envs.pool import ReplayPool

DECISIONS_FILE = "decisions.jsonl"
DECISION_CONTROLS = ("REPAIR", "COMMIT_STATE")
"""The gold control actions that make a turn-end activation a decision point: repair, or commit (do not repair)."""


def point_key(point: StartPoint) -> str:
    return f"{point.episode_id}@{point.activation}"


def decision_points(pool: ReplayPool, n: int, seed: int = 0) -> list[StartPoint]:
    """At most ``n`` decision points of ``pool``: its REPAIR and COMMIT_STATE turn-end activations, each kind in a
    seeded order, taken alternately (REPAIR first: they are rare), so a small ``n`` still holds both kinds."""
    if n < 1:
        raise ValueError(f"decision points: n={n} must be at least 1")
    points = [p for p in start_points(pool, ("turn_end",)) if p.gold_control in DECISION_CONTROLS]
    queues = []
    for control in DECISION_CONTROLS:
        kind = [p for p in points if p.gold_control == control]
        random.Random(f"{seed}/{control}").shuffle(kind)
        if kind:
            queues.append(kind)
    chosen: list[StartPoint] = []
    while queues and len(chosen) < n:
        queue = queues.pop(0)
        chosen.append(queue.pop(0))
        if queue:
            queues.append(queue)
    return chosen


def play_decision(env: ManagerEnv, point: StartPoint, manager: Any, max_responses: int) -> dict[str, Any]:
    """Play ``point`` with ``manager`` (anything with ``respond(PolicyInput) -> str``; ``last_actor`` optional) as
    described in the module docstring; returns the point's row (actions, control, whether it repaired, reward, model
    usage)."""
    assert env.pool is not None
    entry = env.pool.entry(point.episode_id)
    reference = entry.gold_policy()
    _, info = env.reset(options={"episode_id": point.episode_id})
    activation, actions, seconds, answered = -1, [], 0.0, 0
    reward, terminated, truncated = 0.0, False, False
    before = model_usage(manager)
    while not (terminated or truncated):
        inp = info["policy_input"]
        activation += int(not inp.previous)
        ours = activation == point.activation
        actor, asked = POLICY, False
        if not ours:
            response = reference.respond(inp)
        elif answered < max_responses:
            began = time.perf_counter()
            response = manager.respond(inp)
            seconds += time.perf_counter() - began
            actor, asked = getattr(manager, "last_actor", POLICY), True
            answered += actor != HARNESS
        else:
            response = ""  # over the budget: refused, then the runtime's fallback ends the activation
        _, reward, terminated, truncated, info = env.step(response)
        if asked:
            stats = action_stats(response, bool(info.get("legal")))
            actions.append({**stats, "actor": actor, "result": info.get("action_result")})
    if activation < point.activation:
        raise RuntimeError(
            f"episode {point.episode_id} ended after {activation + 1} policy activations, before decision point "
            f"{point.activation}; the pool's gold record and its replay disagree (re-synthesize the held-out split)"
        )
    controls = [a["name"] for a in actions if a["legal"] and a["name"] in CONTROL_ACTIONS]
    return {
        "key": point_key(point),
        "episode_id": point.episode_id,
        "activation": point.activation,
        "task_id": entry.task_id,
        "fault_type": (entry.fault_info or {}).get("fault_type"),
        "gold": point.gold_control,
        "actions": actions,
        "control": controls[-1] if controls else None,
        "repaired": "REPAIR" in controls,
        "reward": float(reward),
        "reward_terms": dict(info.get("reward_terms") or {}),
        "truncated": bool(truncated),
        "seconds": round(seconds, 3),
        **_usage(before, model_usage(manager)),
    }


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
    path: Path, env: ManagerEnv, points: list[StartPoint], manager: Any, max_responses: int, label: str = ""
) -> list[dict[str, Any]]:
    """Every point's row for one arm (``label``: its name on the progress bar), appended to ``path`` as it is played
    (a re-run plays only the missing ones)."""
    from tqdm import tqdm

    done = read_jsonl_resumable(path)  # a torn last row of a killed run is dropped and played again
    seen = {row["key"] for row in done}
    todo = [point for point in points if point_key(point) not in seen]
    path.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=f"decision points {label}", unit="point")
    with bar:
        for point in todo:
            row = play_decision(env, point, manager, max_responses)
            append_jsonl(path, row)
            done.append(row)
            bar.update()
            bar.set_postfix(control=row["control"], gold=row["gold"])
    wanted = {point_key(p) for p in points}
    return [row for row in done if row["key"] in wanted]
