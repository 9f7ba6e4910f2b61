"""The gold manager's check specs of a synthesized task, read from its private folder.

Synthesis writes the specs its gold manager runs at each turn end into ``private/synthesis.json`` ->
``turns.<turn id>.checks`` (a list of spec objects). They are private: evaluation scores a manager's specs against
them (:mod:`harness.evaluation.spec_metrics`), and the oracle arm ``hier-checks:gold`` runs them when the run sets
``oracle_checks`` (:class:`~harness.manager.policy_types.ManagerView`); no other manager ever sees them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.checks.spec import CheckSpec, CheckSpecError, parse_spec

logger = logging.getLogger(__name__)

GOLD_CHECKS_FILE = "synthesis.json"
"""The private file of a synthesized task folder that may hold the gold's specs."""
GOLD_CHECKS_KEY = "checks"
"""``turns.<turn id>.<GOLD_CHECKS_KEY>`` of :data:`GOLD_CHECKS_FILE`: the gold's specs of the turn (spec objects)."""


def distinct_specs(specs: Sequence[CheckSpec]) -> list[CheckSpec]:
    """``specs`` without repeats (equal JSON), in their first order."""
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
        out[str(turn_id)] = tuple(distinct_specs(specs))
    return out
