"""The wave driver: every rollout of a sampling round open at once, their pending responses sampled in one call.

:func:`training.rl.rollout.drive` answers one rollout's requests one at a time, so the engine sees a batch of one.
:class:`WaveDriver` plays many rollout generators (:meth:`~training.rl.rollout.EpisodePlayer.steps`) side by side
on *lanes* (an env each: :class:`PlayerLanes` in this process, :class:`training.rl.workers.EnvWorkers`' Ray actors):

1. each lane begins a rollout of the round (a queue, in order); a lane whose rollout ended takes the next one;
2. once every lane has replied (a :class:`~training.rl.rollout.SampleRequest`, or its finished rollout), the pending
   requests form a *wave*, answered by one ``engine.generate_many(requests, sessions)`` call, in lane order;
3. each answer goes back to its lane, and so on until every rollout has ended.

**A group's shared first request.** The rollouts of a group (``group_size`` consecutive start points, the same one)
replay the same gold prefix, so their first requests carry the same context and budget. The first such request of a
group is sent as one request with ``n = group_size``; its rows go to the group's rollouts in the order they ask
(the ones in the same wave first, later ones from the rows kept). A first request with another context or budget
is sampled on its own.

**The engine.** ``generate_many`` (:class:`~training.rl.engines.TransformersEngine`,
:class:`~training.rl.vllm_engine.VLLMEngine`) gets the wave's requests and each rollout's own session (made at its
first sampled response by ``engine.session()``; None for a shared request), so an in-process engine keeps each
rollout's KV cache and feeds only the ids added since its last response. An engine without ``generate_many``
answers each request from the rollout's session (one call per request; no shared first request).

**Replay log.** Every sampled response is logged in its :class:`Slot`; a rollout begun again (its Ray actor died and
was replaced) is answered from the log until it passes the logged responses, and a replayed request with another
context than the logged one is a ``RuntimeError`` (a nondeterministic env).

With a deterministic env the waves, and so the engine's calls, are the same on every run with the same lanes; under
greedy decoding the rollouts are token for token those of :func:`~training.rl.rollout.drive` (one at a time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from training.rl.rollout import EpisodePlayer, Rollout, SampleRequest, Session, StartPoint

Reply = SampleRequest | Rollout
Row = tuple[list[int], list[float]]


@dataclass
class Slot:
    """One rollout in progress on a lane, with the log of the responses sampled for it (for a replay)."""

    index: int
    start: StartPoint
    session: Session | None = None
    log: list[tuple[int, int, int, list[int], list[float]]] = field(default_factory=list)
    position: int = 0  # requests answered in the current play of the rollout
    deaths: int = 0  # times its lane's actor died under it

    def key(self, request: SampleRequest) -> tuple[int, int, int]:
        context = request.context_ids
        return len(context), hash(tuple(context)), request.max_new_tokens

    def logged(self, request: SampleRequest) -> Row:
        """The logged response to a replayed ``request`` (``position`` < ``len(log)``)."""
        *key, ids, logprobs = self.log[self.position]
        if tuple(key) != self.key(request):
            raise RuntimeError(
                f"episode {self.start.episode_id}, start activation {self.start.activation}: the rollout replayed "
                f"after its actor died asked for another context at response {self.position} than before; the "
                "env is not deterministic, so the rollout cannot be replayed"
            )
        self.position += 1
        return ids, logprobs

    def sampled(self, request: SampleRequest, row: Row) -> Row:
        """Log ``row``, sampled for ``request``, and return it."""
        ids, logprobs = list(row[0]), list(row[1])
        self.log.append((*self.key(request), ids, logprobs))
        self.position += 1
        return ids, logprobs


class Lanes(Protocol):
    """Where rollouts are played, one at a time per lane (an env each)."""

    def __len__(self) -> int: ...

    def begin(self, lane: int, start: StartPoint) -> None:
        """Start a rollout from ``start`` on ``lane``; its first reply comes from :meth:`collect`."""

    def answer(self, lane: int, ids: list[int], logprobs: list[float]) -> None:
        """Send the response to ``lane``'s pending request; its next reply comes from :meth:`collect`."""

    def collect(self, slots: Sequence[Slot | None]) -> list[tuple[int, Reply]]:
        """The reply of every lane with a call in flight, by lane; empty when none is. A lane may begin its slot's
        rollout again (a replaced actor: ``position`` set to 0) and reply to that instead."""


class PlayerLanes:
    """Lanes over :class:`~training.rl.rollout.EpisodePlayer` s in this process (one env each); a lane steps its
    rollout generator as soon as it is begun or answered."""

    def __init__(self, players: Sequence[EpisodePlayer]):
        if not players:
            raise ValueError("PlayerLanes needs at least one player")
        self.players = list(players)
        self._steps: list[Generator[SampleRequest, Row, Rollout] | None] = [None] * len(self.players)
        self._replies: dict[int, Reply] = {}

    def __len__(self) -> int:
        return len(self.players)

    def begin(self, lane: int, start: StartPoint) -> None:
        self._steps[lane] = self.players[lane].steps(start)
        self._advance(lane, None)

    def answer(self, lane: int, ids: list[int], logprobs: list[float]) -> None:
        self._advance(lane, (ids, logprobs))

    def _advance(self, lane: int, sent: Row | None) -> None:
        steps = self._steps[lane]
        assert steps is not None
        try:
            self._replies[lane] = next(steps) if sent is None else steps.send(sent)
        except StopIteration as stop:
            self._steps[lane] = None
            self._replies[lane] = stop.value

    def collect(self, slots: Sequence[Slot | None]) -> list[tuple[int, Reply]]:
        replies, self._replies = sorted(self._replies.items()), {}
        return replies


@dataclass
class _Shared:
    """A group's shared first request: its key and the rows not yet handed out."""

    key: tuple[int, int, int] | None = None
    rows: list[Row] = field(default_factory=list)


class WaveDriver:
    """Plays rollouts on ``lanes`` in waves, sampling each wave with one ``engine.generate_many`` call (see the
    module docstring). ``group_size``: consecutive start points forming a group (1: no shared first request).

    Counters over all :meth:`play` calls: ``waves`` (waves sampled), ``calls`` (engine calls: one per wave, or one
    per request for an engine without ``generate_many``), ``requests`` and ``responses`` (rows sampled)."""

    def __init__(self, lanes: Lanes, engine: Any, group_size: int = 1):
        if group_size < 1:
            raise ValueError(f"group_size={group_size}: a group holds at least one rollout")
        self.lanes, self.engine, self.group_size = lanes, engine, group_size
        self.batched = hasattr(engine, "generate_many")
        self.waves = self.calls = self.requests = self.responses = 0

    def play(self, starts: Sequence[StartPoint]) -> list[Rollout]:
        """One rollout from each of ``starts``, in their order."""
        queue = deque(enumerate(starts))
        results: list[Rollout | None] = [None] * len(starts)
        slots: list[Slot | None] = [None] * len(self.lanes)
        groups: dict[int, _Shared] = {}

        def assign(lane: int) -> None:
            slots[lane] = None
            if queue:
                index, start = queue.popleft()
                slots[lane] = Slot(index, start)
                self.lanes.begin(lane, start)

        for lane in range(len(self.lanes)):
            assign(lane)
        pending: dict[int, SampleRequest] = {}
        while True:
            replies = self.lanes.collect(slots)
            for lane, reply in replies:
                slot = slots[lane]
                assert slot is not None
                if isinstance(reply, Rollout):
                    results[slot.index] = reply
                    assign(lane)
                elif slot.position < len(slot.log):  # a replayed rollout: the logged response
                    self.lanes.answer(lane, *slot.logged(reply))
                else:
                    pending[lane] = reply
            if replies:
                continue  # every lane replies before the wave
            if not pending:
                break
            self._wave(slots, pending, groups)
            pending = {}
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]

    def _wave(self, slots: list[Slot | None], pending: dict[int, SampleRequest], groups: dict[int, _Shared]) -> None:
        """Answer ``pending`` (lane -> request) with one engine call; a group's first requests share one request."""
        batch: list[SampleRequest] = []
        owners: list[list[int]] = []  # the lanes each batch request answers
        shared_at: dict[int, int] = {}  # group -> its shared request's place in this wave
        for lane in sorted(pending):
            request, slot = pending[lane], slots[lane]
            assert slot is not None
            if self.batched and self.group_size > 1 and not slot.log:  # the rollout's first sampled response
                group = slot.index // self.group_size
                shared = groups.setdefault(group, _Shared())
                if shared.key is None:
                    shared.key, shared_at[group] = slot.key(request), len(batch)
                    batch.append(replace(request, n=self.group_size))
                    owners.append([lane])
                    continue
                if shared.key == slot.key(request):
                    if group in shared_at:
                        owners[shared_at[group]].append(lane)
                        continue
                    if shared.rows:
                        self.lanes.answer(lane, *slot.sampled(request, shared.rows.pop(0)))
                        continue
            batch.append(request)
            owners.append([lane])
        if not batch:
            return
        answers = self._generate(batch, [slots[lanes[0]] for lanes in owners])
        self.waves += 1
        self.requests += len(batch)
        self.responses += sum(r.n for r in batch)
        for request, lanes, rows in zip(batch, owners, answers, strict=True):
            if len(rows) != request.n:
                raise RuntimeError(f"the engine gave {len(rows)} responses to a request for n={request.n}")
            rows = list(rows)
            for lane in lanes:
                slot = slots[lane]
                assert slot is not None
                self.lanes.answer(lane, *slot.sampled(pending[lane], rows.pop(0)))
            if request.n > 1:
                groups[slots[lanes[0]].index // self.group_size].rows = rows  # type: ignore[union-attr]

    def _generate(self, batch: list[SampleRequest], slots: list[Slot | None]) -> list[list[Row]]:
        sessions = [self._session(slot) if r.n == 1 else None for r, slot in zip(batch, slots, strict=True)]
        if self.batched:
            self.calls += 1
            return self.engine.generate_many(batch, sessions)
        self.calls += len(batch)
        return [[s.sample(r.context_ids, r.max_new_tokens)] for r, s in zip(batch, sessions, strict=True)]

    def _session(self, slot: Slot | None) -> Session | None:
        assert slot is not None
        if slot.session is None and hasattr(self.engine, "session"):
            slot.session = self.engine.session()
        return slot.session


def play_in_waves(
    players: Sequence[EpisodePlayer], starts: Sequence[StartPoint], engine: Any, group_size: int = 1
) -> list[Rollout]:
    """One rollout from each of ``starts`` on ``players`` (one lane each, in this process), in waves."""
    return WaveDriver(PlayerLanes(players), engine, group_size).play(starts)
