"""Validity-grounded, rule-based rewards for the manager.

Pure functions of the episode record; this package imports only the harness.

- :mod:`rewards.terms`: the terms (protocol, grounding, intervention, outcome, economy), pure functions over an
  :class:`~harness.manager.episode.EpisodeRecord`;
- :mod:`rewards.score`: :func:`score_episode` -> :class:`RewardBreakdown` (the weighted total and every term);
- :mod:`rewards.config`: :class:`RewardConfig` (weights, ``beta_fp > beta_fn``; configs/rewards/default.yaml);
- :mod:`rewards.faults`: :class:`FaultInfo` (what the reward knows about the injected fault; the synthesis layer
  reads it from its output folder with :func:`synthesis.labels.fault_infos`);
- :mod:`rewards.checks`: :func:`score_checks` -> :class:`CheckReward`, the reward of one checks reply of the hier
  manager's tier 1 (protocol, catch, false_alarm; :class:`CheckRewardConfig`);
- :mod:`rewards.hacks`: scripted policies that try to game the reward (the suite that scores them against the gold
  policy on synthesized episodes is :mod:`synthesis.hack_suite`).
"""

from rewards.checks import CHECK_TERMS, CheckReward, CheckRewardConfig, score_checks
from rewards.config import RewardConfig
from rewards.faults import FaultInfo
from rewards.score import TERMS, RewardBreakdown, score_episode

__all__ = [
    "CHECK_TERMS",
    "TERMS",
    "CheckReward",
    "CheckRewardConfig",
    "FaultInfo",
    "RewardBreakdown",
    "RewardConfig",
    "score_checks",
    "score_episode",
]
