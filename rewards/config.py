"""``RewardConfig``: the weights of the reward terms and the intervention coefficients (configs/rewards/*.yaml).

The method's coefficients are not published; the defaults below are our choice, with the reasoning:

- ``w_intervention`` and ``w_outcome`` (0.4 each) carry most of the reward: catching a real fault and the turns
  being right afterwards are what the manager is for. ``w_protocol`` and ``w_grounding`` (0.2 each) shape the
  form: a manager that cannot speak the protocol or records unsupported claims must not win on luck.
  ``w_economy`` (0.1) is a small tie-breaker against tool-call spam beyond what the evidence needs.
- ``beta_fp`` (1.0) > ``beta_fn`` (0.5): a false repair costs the worker a retry of a correct turn and can break
  it (a heavy repair deletes variables); a missed fault costs the outcome term as well, so the intervention
  term need not punish it as hard. ``__post_init__`` enforces ``beta_fp > beta_fn``.
- a repair on the faulted turn earns ``repair_localized`` (0.5) when it names a corrupted variable,
  ``repair_evidence`` (0.25) more when the cited evidence came from a tool result of that activation that showed
  the violation, and up to ``repair_restored`` (0.25) more by the share of turns from the faulted one on that are
  graded correct: 1.0 for the gold decision. ``repair_unlocalized`` (0.0) is the credit of a repair on the right
  turn naming a wrong variable: no reward, but no false-alarm penalty either (the turn was faulty).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.yaml_config import load_yaml_config


@dataclass
class RewardConfig:
    w_protocol: float = field(default=0.2, metadata={"help": "Weight of the protocol term (legal, parsed, budgets)."})
    w_grounding: float = field(default=0.2, metadata={"help": "Weight of the grounding term (claims vs evidence)."})
    w_intervention: float = field(default=0.4, metadata={"help": "Weight of the intervention term (repair quality)."})
    w_outcome: float = field(default=0.4, metadata={"help": "Weight of the outcome term (turns graded correct)."})
    w_economy: float = field(default=0.1, metadata={"help": "Weight of the economy term (tool calls per activation)."})
    beta_fp: float = field(default=1.0, metadata={"help": "Penalty per false repair (clean or benign turn)."})
    beta_fn: float = field(default=0.5, metadata={"help": "Penalty for a harmful fault left unrepaired."})
    repair_localized: float = field(
        default=0.5, metadata={"help": "Credit of a repair on the faulted turn naming a corrupted variable."}
    )
    repair_evidence: float = field(
        default=0.25, metadata={"help": "Bonus when the repair cites a tool result that revealed the violation."}
    )
    repair_restored: float = field(
        default=0.25, metadata={"help": "Bonus times the share of turns from the faulted one on graded correct."}
    )
    repair_unlocalized: float = field(
        default=0.0, metadata={"help": "Credit of a repair on the faulted turn naming a variable it did not corrupt."}
    )
    overrun_penalty: float = field(
        default=1.0, metadata={"help": "Protocol: subtracted times the share of activations that overran the budget."}
    )
    tool_allowance: int = field(
        default=4, metadata={"help": "Economy: tool calls per activation that cost nothing (gold uses at most 3)."}
    )
    evidence_overlap: float = field(
        default=0.5, metadata={"help": "Share of a tool result's error tokens the repair evidence must quote."}
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise ValueError(f"RewardConfig.{f.name}={value} is negative; use a value >= 0.")
        if self.beta_fp <= self.beta_fn:
            raise ValueError(
                f"RewardConfig: beta_fp={self.beta_fp} must be greater than beta_fn={self.beta_fn}: a false repair "
                "costs the worker a retry of a correct turn, so it must cost more than a miss. Raise beta_fp."
            )
        if not 0 < self.evidence_overlap <= 1:
            raise ValueError(f"RewardConfig.evidence_overlap={self.evidence_overlap}: use a share in (0, 1].")
        if self.tool_allowance < 1:
            raise ValueError(f"RewardConfig.tool_allowance={self.tool_allowance}: allow at least 1 tool call.")

    def weights(self) -> dict[str, float]:
        """Term name -> weight (the ``w_`` fields)."""
        return {f.name[2:]: getattr(self, f.name) for f in fields(self) if f.name.startswith("w_")}

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> RewardConfig:
        """Load ``path`` (keys = field names; unknown keys are an error naming them), then apply ``overrides``."""
        return load_yaml_config(cls, path, "reward", "configs/rewards/default.yaml", **overrides)
