"""Validity-grounded, rule-based rewards for the manager (../shared/DESIGN.md §6, issue 5 §2-3).

- :mod:`rewards.terms`: the terms (protocol, grounding, intervention, outcome, economy), pure functions over an
  :class:`~harness.manager.episode.EpisodeRecord`;
- :mod:`rewards.score`: :func:`score_episode` -> :class:`RewardBreakdown` (the weighted total and every term);
- :mod:`rewards.config`: :class:`RewardConfig` (weights, ``beta_fp > beta_fn``; configs/rewards/default.yaml);
- :mod:`rewards.faults`: :class:`FaultInfo` (what the reward knows about the injected fault) and
  :func:`fault_infos` (read from a synthesis output folder);
- :mod:`rewards.hacks`: scripted policies that try to game the reward, and the suite that scores them against
  the gold policy on the same synthesized episodes.
"""

from rewards.config import RewardConfig
from rewards.faults import FaultInfo, fault_infos
from rewards.score import TERMS, RewardBreakdown, score_episode

__all__ = ["TERMS", "FaultInfo", "RewardBreakdown", "RewardConfig", "fault_infos", "score_episode"]
