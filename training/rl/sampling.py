"""Which start points are played, and DAPO's dynamic sampling over the groups they give.

- :class:`StartPointSampler`: the replay-pool sampler: a seeded permutation of every start point per epoch, read
  with a cursor; its ``state_dict`` (seed, epoch, cursor) is saved in each checkpoint, so a resumed run plays the
  start points an uninterrupted run would have played. With ``stratify=True`` an epoch takes the gold's control
  actions in turn (REPAIR, FINALIZE_RELATIONS, REPAIR, ...), each from its own permutation, the rarer ones
  repeated: a pool with 19 REPAIR and 228 FINALIZE_RELATIONS points still gives a REPAIR group every other draw.
- :class:`DynamicSampler`: fills a batch of groups (one start point, ``group_size`` rollouts each) with groups whose
  rewards differ (:func:`training.rl.dapo.uniform_groups`). Each round plays the missing number of groups times
  ``oversample``; uniform groups are set aside. When ``max_rounds`` rounds are spent and the batch is still short,
  the uniform groups fill it (they have zero advantage and add nothing to the gradient): it never raises for too many
  or too few groups. Informative groups beyond the batch wait in ``buffer`` for the next call (saved in checkpoints;
  they were sampled by the policy of one step earlier). Each call's :class:`GatherStats` gives the filtered
  fraction and the rounds used.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from training.rl.dapo import uniform_groups
from training.rl.rollout import Rollout, StartPoint


class StartPointSampler:
    """An endless, seeded, resumable stream of start points (see the module docstring)."""

    def __init__(self, points: Sequence[StartPoint], seed: int = 0, stratify: bool = False):
        if not points:
            raise ValueError("StartPointSampler needs at least one start point")
        self.points, self.seed, self.stratify = list(points), seed, stratify
        self.epoch, self.cursor = 0, 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        if not self.stratify:
            order = list(range(len(self.points)))
            rng.shuffle(order)
            return order
        strata: dict[str | None, list[int]] = {}
        for index, point in enumerate(self.points):
            strata.setdefault(point.gold_control, []).append(index)
        for members in strata.values():
            rng.shuffle(members)
        longest = max(len(members) for members in strata.values())
        keys = sorted(strata, key=str)
        return [strata[key][i % len(strata[key])] for i in range(longest) for key in keys]

    def next(self) -> StartPoint:
        if self.cursor == len(self._order):
            self.epoch, self.cursor = self.epoch + 1, 0
            self._order = self._permutation()
        point = self.points[self._order[self.cursor]]
        self.cursor += 1
        return point

    def state_dict(self) -> dict[str, int]:
        return {
            "seed": self.seed, "epoch": self.epoch, "cursor": self.cursor, "n_points": len(self.points),
            "stratify": self.stratify,
        }  # fmt: skip

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["n_points"] != len(self.points):
            raise ValueError(
                f"the checkpoint's sampler covered {state['n_points']} start points, this pool has "
                f"{len(self.points)}; resume with the same pool and start-point settings"
            )
        if state.get("stratify", False) != self.stratify:
            raise ValueError(
                f"the checkpoint's sampler had stratify={state.get('stratify', False)}, this run {self.stratify}; "
                "resume with the same stratify_controls setting"
            )
        self.seed, self.epoch, self.cursor = state["seed"], state["epoch"], state["cursor"]
        self._order = self._permutation()


@dataclass
class Group:
    """``group_size`` rollouts from one start point."""

    start: StartPoint
    rollouts: list[Rollout]

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.rollouts]

    def to_dict(self) -> dict[str, Any]:
        return {"start": asdict(self.start), "rollouts": [asdict(r) for r in self.rollouts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Group:
        return cls(StartPoint(**data["start"]), [Rollout(**r) for r in data["rollouts"]])


@dataclass
class GatherStats:
    groups_played: int = 0
    groups_filtered: int = 0  # played groups whose rewards were all alike
    rounds: int = 0
    uniform_in_batch: int = 0  # uniform groups that filled the batch when the rounds ran out
    from_buffer: int = 0

    @property
    def filtered_fraction(self) -> float:
        return self.groups_filtered / self.groups_played if self.groups_played else 0.0


@dataclass
class DynamicSampler:
    """DAPO's dynamic sampling (see the module docstring).

    ``play(start)`` plays one group (``group_size`` rollouts) from ``start``; ``points`` gives the start points.
    ``play_many(starts)``, when given, plays the groups of a round together (one group per start, in their order;
    e.g. on env workers that play them at once); the groups and the order they are kept in are the same.
    """

    points: StartPointSampler
    play: Callable[[StartPoint], Group]
    group_size: int
    max_rounds: int = 3
    oversample: float = 1.0
    atol: float = 1e-6
    buffer: list[Group] = field(default_factory=list)
    play_many: Callable[[list[StartPoint]], list[Group]] | None = None

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds={self.max_rounds}: the first round fills the batch; use max_rounds >= 1")
        if self.oversample < 1:
            raise ValueError(f"oversample={self.oversample} must be >= 1 (1 plays just the missing groups)")

    def gather(self, n_groups: int) -> tuple[list[Group], GatherStats]:
        """``n_groups`` groups, informative ones first (see the module docstring)."""
        stats = GatherStats()
        kept, self.buffer = self.buffer[:n_groups], self.buffer[n_groups:]
        stats.from_buffer = len(kept)
        uniform: list[Group] = []
        while len(kept) < n_groups and stats.rounds < self.max_rounds:
            stats.rounds += 1
            starts = [self.points.next() for _ in range(math.ceil((n_groups - len(kept)) * self.oversample))]
            groups = self.play_many(starts) if self.play_many is not None else [self.play(s) for s in starts]
            for group in groups:
                stats.groups_played += 1
                if uniform_groups(group.rewards, self.group_size, self.atol)[0]:
                    stats.groups_filtered += 1
                    uniform.append(group)
                else:
                    kept.append(group)
        self.buffer = kept[n_groups:] + self.buffer
        batch = kept[:n_groups]
        stats.uniform_in_batch = n_groups - len(batch)
        return batch + uniform[: stats.uniform_in_batch], stats

    def state_dict(self) -> dict[str, Any]:
        return {"points": self.points.state_dict(), "buffer": [g.to_dict() for g in self.buffer]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.points.load_state_dict(state["points"])
        self.buffer = [Group.from_dict(g) for g in state["buffer"]]
