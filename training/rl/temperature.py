"""The sampling temperature, chosen on the training pool: the highest one at which the model's sampled responses stay
legal.

DAPO learns from the differences between the rollouts of a group. At a low temperature a group's rollouts are nearly
the same (uniform rewards, no signal); at a high one a small model's samples stop being actions at all (unparseable
JSON, prose), and every rollout of the group is the same failure. :func:`probe_temperatures` measures that on the
training pool before any training step: for ``points`` start points (drawn by gold control in turn, with their own
seed, so the training stream is untouched) it plays the episode to the model's first request, exactly as a rollout
does (:meth:`~training.rl.rollout.EpisodePlayer.steps`), samples ``samples`` first responses at each temperature
from that context and counts the *legal* ones: the response parses as one wire-format action whose name the
lifecycle allows at that request (the runtime may still refuse its arguments); a player with its own
``legal_reply(text, legal_actions)`` judges its replies so (:class:`~training.rl.checks_rollout.ChecksPlayer`: the
reply parses as the checks object). :func:`choose_temperature` takes the
highest temperature whose legal rate is at least ``min_legal``; when none is, the one with the highest rate (ties:
the higher temperature). The probe's table is written next to the checkpoint (``temperature_probe.json``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.manager.wire import parse_response
from training.rl.sampling import StartPointSampler

if TYPE_CHECKING:
    from training.rl.rollout import EpisodePlayer, StartPoint

logger = logging.getLogger(__name__)

PROBE_FILE = "temperature_probe.json"


def check_grid(temperatures: Sequence[float], min_legal: float) -> list[float]:
    """The grid sorted, when every temperature is > 0 and ``min_legal`` in [0, 1]; else a one-line ``ValueError``."""
    grid = sorted(float(t) for t in temperatures)
    if not grid or grid[0] <= 0:
        raise ValueError(f"temperature_grid={list(temperatures)}: give one or more temperatures > 0")
    if not 0.0 <= min_legal <= 1.0:
        raise ValueError(f"temperature_min_legal={min_legal} must be in [0, 1]")
    return grid


def legal_response(text: str, legal_actions: Sequence[str]) -> str | None:
    """The action name of ``text`` when it parses as one action the lifecycle allows now, else None."""
    parsed = parse_response(text) if text.strip() else None
    if parsed is None or not parsed.ok or parsed.action is None:
        return None
    return parsed.action.name if parsed.action.name in legal_actions else None


def probe_temperatures(
    player: EpisodePlayer,
    engine: Any,
    starts: Sequence[StartPoint],
    temperatures: Sequence[float],
    *,
    points: int,
    samples: int,
    max_new_tokens: int,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per temperature: ``temperature``, ``legal_rate``, ``samples`` and the legal action names counted
    (``actions``), over ``points`` start points of ``starts`` (see the module docstring). ``engine`` samples with
    ``sample_many(context_ids, n, max_new_tokens, temperature=...)`` when it has it, else one session per sample."""
    if points < 1 or samples < 1:
        raise ValueError(f"temperature probe: points={points} and samples={samples} must be at least 1")
    stream = StartPointSampler(list(starts), seed=seed, stratify=True)
    chosen = [stream.next() for _ in range(min(points, len(starts)))]
    rows = {t: {"temperature": t, "legal": 0, "samples": 0, "actions": {}} for t in temperatures}
    for start in chosen:
        steps = player.steps(start)
        request = next(steps)  # the model's first request: the context every rollout of this point samples from
        legal_actions = player.inputs[-1].legal_actions
        steps.close()
        for t in temperatures:
            for ids, _ in _sample(
                engine, request.context_ids, samples, min(max_new_tokens, request.max_new_tokens), t
            ):
                text = player.tokens.decode(ids[:-1] if ids and ids[-1] == player.tokens.eos_id else ids)
                name = getattr(player, "legal_reply", legal_response)(text, legal_actions)
                row = rows[t]
                row["samples"] += 1
                if name is not None:
                    row["legal"] += 1
                    row["actions"][name] = row["actions"].get(name, 0) + 1
    table = []
    for t in temperatures:
        row = rows[t]
        table.append({**row, "legal_rate": row["legal"] / row["samples"], "points": len(chosen)})
        logger.info("temperature probe: T=%.2f legal %d/%d %s", t, row["legal"], row["samples"], row["actions"])
    return table


def _sample(engine: Any, context: list[int], n: int, max_new_tokens: int, temperature: float) -> list[tuple]:
    if hasattr(engine, "sample_many"):
        return engine.sample_many(context, n, max_new_tokens, temperature=temperature)
    kept = engine.temperature
    engine.temperature = temperature
    try:
        return [engine.session().sample(context, max_new_tokens) for _ in range(n)]
    finally:
        engine.temperature = kept


def choose_temperature(table: Sequence[dict[str, Any]], min_legal: float) -> float:
    """The highest temperature of ``table`` whose ``legal_rate`` is at least ``min_legal``; when none is, the one
    with the highest rate (ties: the higher temperature)."""
    if not table:
        raise ValueError("choose_temperature: the probe table is empty")
    passing = [row["temperature"] for row in table if row["legal_rate"] >= min_legal]
    if passing:
        return max(passing)
    return max(table, key=lambda row: (row["legal_rate"], row["temperature"]))["temperature"]


def write_probe(out_dir: str | Path, table: Sequence[dict[str, Any]], chosen: float, min_legal: float) -> Path:
    """``out_dir/temperature_probe.json``: the table, the rule's threshold and the chosen temperature."""
    path = Path(out_dir) / PROBE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"chosen": chosen, "min_legal": min_legal, "split": "training pool", "table": list(table)}
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
