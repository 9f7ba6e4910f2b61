"""What DAPO trained on, one JSON line per group: the record that says why a run moved its model or did not.

The per-step means TRL logs (reward, illegal-action rate, repair recall) cannot tell *which* decisions a step pushed
up or down. :class:`~training.rl.trainer.ManagerRollouts` therefore appends every group dynamic sampling played for a
batch, trained or dropped, to ``output_dir/rollout_groups.jsonl`` (:data:`GROUPS_FILE`), a few hundred bytes per
group:

- ``step`` (the optimizer step the batch trains, 1-based), ``episode_id``, ``activation`` and ``gold_control`` (the
  control action the gold manager took at that start activation: REPAIR or FINALIZE_RELATIONS at a decision point);
- ``uniform``: the group's rewards are all equal (it adds nothing to the gradient);
- ``trained``: the group is in the batch (False: dynamic sampling dropped it, or kept it in its buffer for the next
  step); ``from_buffer``: it was played for an earlier step and is trained in this one (its line there said
  ``trained: false``), so every group is *played* once in the file;
- ``rollouts``: per rollout its ``decision`` (:func:`rollout_decision`), the sampled ``actions`` (name, legality, the
  variable a REPAIR names), ``reward`` (what the advantage sees), ``centered`` (reward minus the group's mean: the
  sign of the push DAPO gives that rollout's tokens), ``env_reward``, ``overlong``, ``harness_confirmed``,
  ``truncated``, ``stop_reason`` (``"context_cap"`` or empty) and ``model_tokens``.

:func:`summarize_groups` folds the records into one row per (gold control, sampled decision): the rollouts played,
the trained ones in informative groups, the mean reward of the played ones and the mean centered reward of the
trained ones. A decision whose centered reward is negative where the gold took it is one DAPO teaches the model to
avoid there. A resumed run first drops the lines of steps after its checkpoint
(:func:`truncate_records`), so every step is recorded once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.manager.lifecycle import CONTROL_ACTIONS
from training.rl.dapo import uniform_groups
from training.rl.sampling import Group

GROUPS_FILE = "rollout_groups.jsonl"

ILLEGAL = "illegal"
"""A rollout whose last sampled response is not a legal action."""
UNDECIDED = "undecided"
"""A rollout whose legal responses were tool calls only: the harness confirmed in its place."""


def rollout_decision(actions: Sequence[dict[str, Any]]) -> str:
    """The control action a rollout's model took (its first legal one), else :data:`UNDECIDED` when every response
    was legal, else :data:`ILLEGAL`."""
    for action in actions:
        if action["legal"] and action["name"] in CONTROL_ACTIONS:
            return str(action["name"])
    return UNDECIDED if actions and all(a["legal"] for a in actions) else ILLEGAL


def group_record(
    group: Group, step: int, atol: float = 1e-6, *, trained: bool = True, from_buffer: bool = False
) -> dict[str, Any]:
    """One line of :data:`GROUPS_FILE` for ``group``, played for (or trained at) optimizer step ``step`` (fields in
    the module docstring); rewards rounded to 6 decimals."""
    rewards = group.rewards
    mean = sum(rewards) / len(rewards)
    rollouts = [
        {
            "decision": rollout_decision(r.actions),
            "actions": [{k: a.get(k) for k in ("name", "legal", "error_variable")} for a in r.actions],
            "reward": round(r.reward, 6),
            "centered": round(r.reward - mean, 6),
            "env_reward": round(r.env_reward, 6),
            "overlong": round(r.overlong, 6),
            "harness_confirmed": r.harness_confirmed,
            "truncated": r.truncated,
            "stop_reason": r.stop_reason,
            "model_tokens": r.model_tokens,
        }
        for r in group.rollouts
    ]
    return {
        "step": step,
        "episode_id": group.start.episode_id,
        "activation": group.start.activation,
        "gold_control": group.start.gold_control,
        "uniform": uniform_groups(rewards, len(rewards), atol)[0],
        "trained": trained,
        "from_buffer": from_buffer,
        "rollouts": rollouts,
    }


def append_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` to the JSON-lines file ``path`` (created with its folder when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of ``path`` (none when it is missing); a line that is not a JSON object is a one-line
    ``ValueError`` naming the file and line."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg}); delete the file to start over") from None
        if not isinstance(record, dict) or "step" not in record:
            raise ValueError(f"{path}:{number}: not a rollout-group record (no 'step'); delete the file to start over")
        records.append(record)
    return records


def truncate_records(path: Path, last_step: int) -> int:
    """Drop the records of steps after ``last_step`` (a resumed run replays them); the number dropped."""
    records = read_records(path)
    kept = [r for r in records if r["step"] <= last_step]
    if len(kept) != len(records):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
    return len(records) - len(kept)


def summarize_groups(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (``gold_control``, ``decision``): ``played`` (rollouts, each group counted where it was played),
    ``trained_informative`` (rollouts of trained groups that were not uniform), ``mean_reward`` (over the played) and
    ``mean_centered`` (over the trained: None when none was); sorted by gold control, then decision."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        for rollout in record["rollouts"]:
            key = (str(record["gold_control"]), rollout["decision"])
            cell = cells.setdefault(key, {"played": 0, "informative": 0, "trained": 0, "reward": 0.0, "centered": 0.0})
            if not record.get("from_buffer", False):
                cell["played"] += 1
                cell["reward"] += rollout["reward"]
            if record.get("trained", True):
                cell["trained"] += 1
                cell["informative"] += not record["uniform"]
                cell["centered"] += rollout["centered"]
    return [
        {
            "gold_control": gold,
            "decision": decision,
            "played": cell["played"],
            "trained_informative": cell["informative"],
            "mean_reward": cell["reward"] / cell["played"] if cell["played"] else None,
            "mean_centered": cell["centered"] / cell["trained"] if cell["trained"] else None,
        }
        for (gold, decision), cell in sorted(cells.items())
    ]


def summary_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`summarize_groups` rows as a markdown table (no rows: one line saying so)."""
    if not rows:
        return ["(no rollout group recorded)"]
    lines = [
        "| gold control | sampled decision | played | trained, informative | mean reward | reward - group mean |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        reward = "n/a" if r["mean_reward"] is None else f"{r['mean_reward']:.3f}"
        centered = "n/a" if r["mean_centered"] is None else f"{r['mean_centered']:+.3f}"
        lines.append(
            f"| {r['gold_control']} | {r['decision']} | {r['played']} | {r['trained_informative']} | {reward} | "
            f"{centered} |"
        )
    return lines
