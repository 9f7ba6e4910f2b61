"""The check-writing reward: what the checks a manager wrote for one state earn, grounded in the state's validity.

The hier manager's tier 1 writes ``{"checks": [spec, ...]}`` for a state; tier 0 runs each spec in the clean verifier
and repairs iff one fails. The reward of that reply (:func:`score_checks`) reads the specs' verdicts on the state the
manager saw (``here``: ``passed`` True, False or None = could not run, one per spec run) and on the clean state of
the same turn (``clean``): for a clean turn that is ``here`` itself, for a faulted turn the verdicts of the same specs
on the clean twin's state of that turn (the task's reference programs up to that turn, run by the env), so the
reward needs no label beyond which turn holds the fault.

- ``protocol`` in [0, 1]: 0 for a reply that is not the checks object (unparseable: the state gets no check); else
  the share of the reply's specs that were kept (a spec the parser refused, repeated or over the room is dropped);
  1 for ``{"checks": []}``.
- ``catch`` in {0, 1}, faulted turns only: 1 when a spec fails here and passes on the clean twin (it caught the
  fault and nothing else); 0 otherwise, also for a reply with no failing check. ``None`` on other turns.
- ``false_alarm`` in {0, 1}: 1 when a spec fails on the turn's clean state (a clean turn: tier 0 repairs a correct
  state; a faulted turn: the spec would fail on the clean twin too, so it is no evidence of the fault). ``None`` on a
  turn that is neither clean nor faulted (a benign fault's turn, a turn after the fault).

``total = w_protocol * protocol + w_catch * catch - w_false_alarm * false_alarm`` over the terms that apply
(:meth:`CheckRewardConfig.weights` gives ``false_alarm`` its negative weight, so a trainer that sums weighted terms
gets this total). A false alarm costs at least what a catch earns (``w_false_alarm >= w_catch``, enforced): a false
repair makes the worker redo a correct turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.yaml_config import load_yaml_config

TURN_LABELS = ("faulted", "clean")
"""The turns the validity terms grade (any other turn, ``None``, gets the protocol term only)."""

CHECK_TERMS = ("protocol", "catch", "false_alarm")
"""The check-writing reward's terms, in the order trainers log them."""


@dataclass
class CheckRewardConfig:
    w_protocol: float = field(
        default=0.2, metadata={"help": "Weight of the protocol term (the reply parsed, its specs kept)."}
    )
    w_catch: float = field(
        default=1.0,
        metadata={"help": "Credit of a check that fails on the faulted turn and passes on its clean twin."},
    )
    w_false_alarm: float = field(
        default=1.0, metadata={"help": "Cost of a check that fails on the turn's clean state (a false repair)."}
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"CheckRewardConfig.{f.name}={getattr(self, f.name)} is negative; use a value >= 0.")
        if self.w_false_alarm < self.w_catch:
            raise ValueError(
                f"CheckRewardConfig: w_false_alarm={self.w_false_alarm} is below w_catch={self.w_catch}: a check that "
                "fails everywhere would then pay on faulted turns; raise w_false_alarm to at least w_catch."
            )

    def weights(self) -> dict[str, float]:
        """Term name -> signed weight (``false_alarm`` costs)."""
        return {"protocol": self.w_protocol, "catch": self.w_catch, "false_alarm": -self.w_false_alarm}

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> CheckRewardConfig:
        """Load ``path`` (keys = field names), then apply ``overrides``."""
        return load_yaml_config(cls, path, "check reward", "a YAML of w_protocol, w_catch, w_false_alarm", **overrides)


@dataclass(frozen=True)
class CheckReward:
    """The reward of one checks reply: its weighted ``total`` and every term (None where it does not apply)."""

    total: float
    terms: dict[str, float | None]


def check_label(label: str | None) -> str | None:
    if label is not None and label not in TURN_LABELS:
        raise ValueError(f"turn label {label!r} is not understood; use one of {', '.join(TURN_LABELS)}, or None.")
    return label


def score_checks(
    parsed: bool,
    kept: int,
    dropped: int,
    here: Sequence[bool | None],
    clean: Sequence[bool | None] | None,
    label: str | None,
    config: CheckRewardConfig | None = None,
) -> CheckReward:
    """The reward of one checks reply (see the module docstring). ``parsed``: the reply was the checks object;
    ``kept`` / ``dropped``: its specs kept and dropped; ``here``: the verdicts of the specs run on the state (in
    order); ``clean``: the same specs' verdicts on the turn's clean state (a faulted turn's twin; None on a clean
    turn, where it is ``here``); ``label``: ``faulted``, ``clean`` or None (neither)."""
    config = config or CheckRewardConfig()
    label = check_label(label)
    protocol = 0.0 if not parsed else (kept / (kept + dropped) if kept + dropped else 1.0)
    terms: dict[str, float | None] = {"protocol": protocol, "catch": None, "false_alarm": None}
    if label == "faulted":
        if clean is None or len(clean) != len(here):
            raise ValueError(f"a faulted turn needs one clean-twin verdict per spec run: {len(here)} here, {clean}")
        terms["catch"] = float(any(h is False and c is True for h, c in zip(here, clean, strict=True)))
        terms["false_alarm"] = float(any(c is False for c in clean))
    elif label == "clean":
        terms["false_alarm"] = float(any(h is False for h in here))
    weights = config.weights()
    total = sum(weights[name] * value for name, value in terms.items() if value is not None)
    return CheckReward(float(total), terms)
