"""Check-spec metrics of a manager: spec precision and recall against the gold's specs, and fault detection.

- **spec match** (:func:`spec_key`): a spec a manager ran matches a gold spec of the same kind when the key fields of
  that kind (:data:`KEY_FIELDS`) are equal, numbers compared as numbers and lists as sets; sources, tolerances and
  the decimals of recomputed values are left out (the same requirement read from other variables or words). Each gold
  spec is matched at most once (:func:`match_counts`).
- **spec scores** (:func:`spec_scores`): per check kind and overall, over the turns of the episodes whose task has
  gold specs: ``recall`` = matched gold specs / gold specs, ``precision`` = matched manager specs / manager specs. A
  manager's specs of a turn are the distinct specs of its legal ``run_check`` calls in the activations of that turn
  (:func:`manager_specs`). The gold's specs travel with the task: ``private/synthesis.json`` ->
  ``turns.<turn id>.checks`` (a list of spec objects, :data:`GOLD_CHECKS_KEY`), written by synthesis; a suite
  without them has no spec scores (None).
- **fault detection** (:func:`fault_detection`): in faulted episodes, the share whose fault turn the manager
  repaired (``detected``), and the same over the faults the suite marks detectable (``detectable``: the fault line's
  ``detectable``, which synthesis sets when the gold manager's checks reveal the fault at its turn; None when no
  fault line says); in clean episodes, the share of the turns it saw that it repaired (``false_repairs``, every one of
  them a false alarm).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.checks.spec import CheckSpec, CheckSpecError, parse_spec

logger = logging.getLogger(__name__)

GOLD_CHECKS_FILE = "synthesis.json"
"""The private file of a synthesized task folder that may hold the gold's specs."""
GOLD_CHECKS_KEY = "checks"
"""``turns.<turn id>.<GOLD_CHECKS_KEY>`` of :data:`GOLD_CHECKS_FILE`: the gold's specs of the turn (spec objects)."""

KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "filter": ("variable", "column", "op", "value"),
    "aggregate": ("variable", "column", "agg"),
    "group_aggregate": ("variable", "by", "column", "agg"),
    "top_k": ("variable", "k", "order"),
    "sort_order": ("variable", "ascending"),
    "join_rows": ("variable", "on", "how"),
    "complete_rows": ("variable", "columns"),
    "no_missing": ("variable", "columns"),
    "normalized": ("variable", "column"),
    "iqr_outliers": ("variable", "column", "k"),
    "nan_counts": ("variable", "source"),
    "share": ("variable",),
    "rounded": ("variable", "decimals"),
    "param": ("variable", "value"),
    "corrected_cell": ("variable", "column", "key", "value"),
    "excluded_rows": ("variable", "column", "value"),
    "overlap": ("variable",),
    "unit_scale": ("variable", "factor"),
    "resample": ("variable", "date_column"),
}
"""Check kind -> the fields that must agree for two specs to state the same requirement."""
STRICT_FIELDS = ("source", "left", "right", "join_right", "join_on", "join_how", "decimals", "date_column", "factor")
"""Fields a strict match (``strict=True``) also compares, where the kind has them: the variables a check recomputes
from and the stated rounding."""


def _key_value(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return frozenset(_key_value(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    return float(value)


def spec_key(spec: CheckSpec, strict: bool = False) -> tuple[Any, ...]:
    """The match key of ``spec``: its kind and the values of its :data:`KEY_FIELDS` (``strict``: and of the
    :data:`STRICT_FIELDS` it has)."""
    data = spec.to_dict()
    names = KEY_FIELDS.get(spec.kind, tuple(data)[1:])
    if strict:
        names = (*names, *(f for f in STRICT_FIELDS if f in data and f not in names))
    return (spec.kind, *(_key_value(data.get(f)) for f in names))


def match_counts(
    made: Sequence[CheckSpec], gold: Sequence[CheckSpec], strict: bool = False
) -> tuple[Counter, Counter, Counter]:
    """Per kind, for one turn: (gold specs, made specs, made specs that matched a gold spec not matched before)."""
    left = Counter(spec_key(s, strict) for s in gold)
    matched: Counter = Counter()
    for spec in made:
        key = spec_key(spec, strict)
        if left[key] > 0:
            left[key] -= 1
            matched[spec.kind] += 1
    return Counter(s.kind for s in gold), Counter(s.kind for s in made), matched


def _distinct(specs: Sequence[CheckSpec]) -> list[CheckSpec]:
    return list({json.dumps(s.to_dict(), sort_keys=True): s for s in specs}.values())


def gold_specs_of(private_dir: str | Path) -> dict[str, tuple[CheckSpec, ...]] | None:
    """The gold's specs per turn id from ``private_dir/synthesis.json`` (None when the file or every turn's
    ``checks`` is absent; a spec that does not parse is skipped with a warning)."""
    path = Path(private_dir) / GOLD_CHECKS_FILE
    if not path.is_file():
        return None
    turns = json.loads(path.read_text(encoding="utf-8")).get("turns", {})
    if not isinstance(turns, Mapping) or not any(
        isinstance(t, Mapping) and GOLD_CHECKS_KEY in t for t in turns.values()
    ):
        return None
    out: dict[str, tuple[CheckSpec, ...]] = {}
    for turn_id, turn in turns.items():
        specs = []
        for data in turn.get(GOLD_CHECKS_KEY, []) if isinstance(turn, Mapping) else []:
            try:
                specs.append(parse_spec(data))
            except CheckSpecError as exc:
                logger.warning("%s: turn %s: a gold spec is skipped: %s", path, turn_id, exc)
        out[str(turn_id)] = tuple(_distinct(specs))
    return out


def manager_specs(record: Any) -> dict[str, list[CheckSpec]]:
    """Turn id -> the distinct specs of the legal ``run_check`` calls the manager made in that turn's activations
    (a spec that does not parse is no spec)."""
    out: dict[str, list[CheckSpec]] = {}
    for activation in record.activations:
        if activation.get("actor") != "policy":
            continue
        for action in activation.get("actions", []):
            parsed = action.get("parsed") or {}
            if not action.get("legal") or parsed.get("name") != "run_check":
                continue
            try:
                spec = parse_spec((parsed.get("arguments") or {}).get("spec"))
            except CheckSpecError:
                continue
            out.setdefault(str(activation.get("turn_id")), []).append(spec)
    return {turn: _distinct(specs) for turn, specs in out.items()}


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def spec_scores(
    records: Sequence[Any], gold: Mapping[str, Mapping[str, Sequence[CheckSpec]] | None]
) -> dict[str, Any] | None:
    """Recall and precision per kind (``per_kind``) and overall of the managers' specs against ``gold`` (task id ->
    turn id -> the gold's specs) over the turns of the records whose task has gold specs; None when none has."""
    totals = {"gold": Counter(), "made": Counter(), "matched": Counter()}
    turns = 0
    for record in records:
        by_turn = gold.get(record.task_id)
        if not by_turn:
            continue
        made = manager_specs(record)
        for turn_id, specs in by_turn.items():
            g, m, hit = match_counts(made.get(turn_id, []), specs)
            totals["gold"] += g
            totals["made"] += m
            totals["matched"] += hit
            turns += 1
    if not turns:
        return None
    kinds = sorted(set(totals["gold"]) | set(totals["made"]))
    per_kind = {
        kind: {
            "gold": totals["gold"][kind],
            "made": totals["made"][kind],
            "matched": totals["matched"][kind],
            "recall": _ratio(totals["matched"][kind], totals["gold"][kind]),
            "precision": _ratio(totals["matched"][kind], totals["made"][kind]),
        }
        for kind in kinds
    }
    matched = sum(totals["matched"].values())
    return {
        "turns": turns,
        "gold": sum(totals["gold"].values()),
        "made": sum(totals["made"].values()),
        "matched": matched,
        "recall": _ratio(matched, sum(totals["gold"].values())),
        "precision": _ratio(matched, sum(totals["made"].values())),
        "per_kind": per_kind,
    }


def fault_detection(records: Sequence[Any], fault_turn: Any, detectable: Any = None) -> dict[str, Any]:
    """Repairs of faults and false repairs (see the module docstring); ``fault_turn(record)`` gives the injected
    fault's turn id of a faulted episode, None for a clean one; ``detectable(record)`` whether its fault is marked
    detectable (True, False or None: not marked)."""
    faults = detected = clean_turns = false_repairs = 0
    marked: Counter = Counter()
    for record in records:
        repaired = {str(r.get("turn_id")) for r in record.repairs}
        turn = fault_turn(record)
        if turn is not None:
            faults += 1
            detected += str(turn) in repaired
            flag = None if detectable is None else detectable(record)
            if flag is not None:
                marked[(bool(flag), str(turn) in repaired)] += 1
            continue
        seen = {str(a.get("turn_id")) for a in record.activations if a.get("turn_id") is not None}
        clean_turns += len(seen)
        false_repairs += len(repaired & seen) if seen else len(repaired)
    return {
        "faults": faults,
        "detected": detected,
        "detection_rate": _ratio(detected, faults),
        "clean_turns": clean_turns,
        "false_repairs": false_repairs,
        "false_repair_rate": _ratio(false_repairs, clean_turns),
        "detectable": None
        if not marked
        else {
            "faults": marked[(True, True)] + marked[(True, False)],
            "detected": marked[(True, True)],
            "detection_rate": _ratio(marked[(True, True)], marked[(True, True)] + marked[(True, False)]),
            "undetectable_repaired": marked[(False, True)],
            "undetectable": marked[(False, True)] + marked[(False, False)],
        },
    }
