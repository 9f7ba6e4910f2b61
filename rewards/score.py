"""Score one episode: every term of :mod:`rewards.terms`, logged separately, and their weighted sum.

``total = sum(weight[t] * term[t] for t whose term is not None)``: a term that does not apply (``None``: no
manager actions, no committed state, no grade) contributes nothing, so it neither rewards nor punishes. The
metrics a trainer logs are :meth:`RewardBreakdown.metrics` (``rewards/<term>`` and ``rewards/total``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from harness.manager.episode import EpisodeRecord
from rewards import terms
from rewards.config import RewardConfig
from rewards.faults import FaultInfo

Term = Callable[[dict[str, Any], FaultInfo | None, RewardConfig], float | None]

TERMS: dict[str, Term] = {
    "protocol": terms.protocol,
    "grounding": terms.grounding,
    "intervention": terms.intervention,
    "outcome": terms.outcome,
    "economy": terms.economy,
}
"""Term name -> function; the weight of term ``t`` is ``RewardConfig.w_<t>``."""


@dataclass
class RewardBreakdown:
    total: float
    terms: dict[str, float | None]

    def metrics(self, prefix: str = "rewards") -> dict[str, float]:
        """Namespaced values for logging (terms that do not apply are left out)."""
        out = {f"{prefix}/{name}": value for name, value in self.terms.items() if value is not None}
        out[f"{prefix}/total"] = self.total
        return out


def _as_dict(record: EpisodeRecord | dict[str, Any]) -> dict[str, Any]:
    if isinstance(record, EpisodeRecord):
        return {f.name: getattr(record, f.name) for f in fields(record)}
    if isinstance(record, dict):
        return record
    raise TypeError(f"score_episode: expected an EpisodeRecord or its dict, got {type(record).__name__}.")


def score_episode(
    record: EpisodeRecord | dict[str, Any], fault: FaultInfo | None, config: RewardConfig | None = None
) -> RewardBreakdown:
    """The reward of one episode (``fault``: its injected fault, None for a clean episode)."""
    config = config or RewardConfig()
    data = _as_dict(record)
    weights = config.weights()
    values = {name: term(data, fault, config) for name, term in TERMS.items()}
    total = sum(weights[name] * value for name, value in values.items() if value is not None)
    return RewardBreakdown(total=float(total), terms=values)
