"""training.rl.sampling: the resumable start-point sampler and dynamic sampling (never raises, logs what it did)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from training.rl.rollout import Rollout, StartPoint
from training.rl.sampling import DynamicSampler, Group, StartPointSampler

POINTS = [StartPoint(f"ep-{i}", i % 3, "REPAIR" if i == 2 else None) for i in range(7)]


def _player(reward_of: Callable[[StartPoint, int], float], group_size: int = 4):
    """A fake group player: rollout ``j`` of a group from ``start`` gets ``reward_of(start, j)``."""
    played: list[StartPoint] = []

    def play(start: StartPoint) -> Group:
        played.append(start)
        rollouts = []
        for j in range(group_size):
            rollout = Rollout(start.episode_id, prompt_ids=[1, 2], activation=start.activation)
            rollout.extend([3, 4], model=True, logprobs=[-0.5, -0.25])
            rollout.env_reward = reward_of(start, j)
            rollouts.append(rollout)
        return Group(start, rollouts)

    return play, played


def test_start_points_cover_every_point_once_per_epoch_in_a_seeded_order():
    sampler = StartPointSampler(POINTS, seed=3)
    first = [sampler.next() for _ in range(7)]
    second = [sampler.next() for _ in range(7)]
    assert sorted(first, key=repr) == sorted(POINTS, key=repr) == sorted(second, key=repr)
    assert first != second  # a new permutation each epoch
    again = StartPointSampler(POINTS, seed=3)
    assert [again.next() for _ in range(7)] == first
    assert [StartPointSampler(POINTS, seed=4).next() for _ in range(7)] != first


def test_start_point_sampler_resumes_from_its_state():
    sampler = StartPointSampler(POINTS, seed=1)
    for _ in range(9):
        sampler.next()
    state = json.loads(json.dumps(sampler.state_dict()))
    expected = [sampler.next() for _ in range(10)]
    resumed = StartPointSampler(POINTS, seed=99)
    resumed.load_state_dict(state)
    assert [resumed.next() for _ in range(10)] == expected
    with pytest.raises(ValueError, match="covered 7 start points, this pool has 2"):
        StartPointSampler(POINTS[:2]).load_state_dict(state)


def test_stratified_start_points_take_the_gold_controls_in_turn_and_resume():
    points = [StartPoint(f"ep-{i}", 0, "REPAIR" if i < 2 else "FINALIZE_RELATIONS") for i in range(8)]
    sampler = StartPointSampler(points, seed=5, stratify=True)
    drawn = [sampler.next() for _ in range(12)]  # one epoch: 6 FINALIZE_RELATIONS, each paired with a REPAIR
    assert [p.gold_control for p in drawn] == ["FINALIZE_RELATIONS", "REPAIR"] * 6
    assert {p.episode_id for p in drawn} == {p.episode_id for p in points}  # every point played in the epoch
    assert sum(p.gold_control == "REPAIR" for p in drawn) == 6  # the 2 rare points repeated, 3 times each
    state = json.loads(json.dumps(sampler.state_dict()))
    expected = [sampler.next() for _ in range(5)]
    resumed = StartPointSampler(points, seed=0, stratify=True)
    resumed.load_state_dict(state)
    assert [resumed.next() for _ in range(5)] == expected
    with pytest.raises(ValueError, match="stratify=True, this run False"):
        StartPointSampler(points).load_state_dict(state)


def test_all_uniform_groups_never_raise_and_fill_the_batch():
    play, played = _player(lambda start, j: 0.5)
    sampler = DynamicSampler(StartPointSampler(POINTS), play, group_size=4, max_rounds=3)
    groups, stats = sampler.gather(2)
    assert len(groups) == 2 and all(len(g.rollouts) == 4 for g in groups)
    assert stats.rounds == 3 and stats.groups_played == 6 == len(played)
    assert stats.filtered_fraction == 1.0 and stats.uniform_in_batch == 2
    assert sampler.buffer == []


def test_uniform_groups_are_dropped_and_refilled():
    informative = {"ep-1", "ep-4"}
    play, played = _player(lambda start, j: float(j) if start.episode_id in informative else 1.0)
    sampler = DynamicSampler(StartPointSampler(POINTS, seed=0), play, group_size=4, max_rounds=10)
    groups, stats = sampler.gather(2)
    assert {g.start.episode_id for g in groups} == informative
    assert stats.uniform_in_batch == 0
    assert stats.groups_played == len(played) and stats.groups_filtered == len(played) - 2
    assert stats.filtered_fraction == pytest.approx((len(played) - 2) / len(played))


def test_oversampled_informative_groups_wait_in_the_buffer_and_survive_a_checkpoint():
    play, _ = _player(lambda start, j: float(j))  # every group informative
    sampler = DynamicSampler(StartPointSampler(POINTS, seed=2), play, group_size=4, max_rounds=1, oversample=2.0)
    groups, stats = sampler.gather(2)
    assert stats.groups_played == 4 and len(groups) == 2 and len(sampler.buffer) == 2
    state = json.loads(json.dumps(sampler.state_dict()))
    expected_points = [sampler.points.next() for _ in range(3)]

    play2, played2 = _player(lambda start, j: float(j))
    resumed = DynamicSampler(StartPointSampler(POINTS, seed=0), play2, group_size=4, max_rounds=1, oversample=2.0)
    resumed.load_state_dict(state)
    assert [g.to_dict() for g in resumed.buffer] == [g.to_dict() for g in sampler.buffer]
    groups, stats = resumed.gather(2)
    assert stats.from_buffer == 2 and stats.groups_played == 0 and played2 == []
    assert [r.completion_ids for g in groups for r in g.rollouts] == [[3, 4]] * 8
    assert [resumed.points.next() for _ in range(3)] == expected_points


def test_dynamic_sampler_settings_are_checked():
    play, _ = _player(lambda start, j: 0.0)
    with pytest.raises(ValueError, match="max_rounds=0"):
        DynamicSampler(StartPointSampler(POINTS), play, group_size=4, max_rounds=0)
    with pytest.raises(ValueError, match="oversample=0.5"):
        DynamicSampler(StartPointSampler(POINTS), play, group_size=4, oversample=0.5)


def test_playing_a_round_at_once_keeps_the_same_groups_and_stats():
    """play_many (the env workers' path) gets each round's start points in one call, in the order play would have
    played them; the batch, the buffer and the stats are those of play."""
    informative = {"ep-4"}

    def reward(start: StartPoint, j: int) -> float:
        return float(j) if start.episode_id in informative else 1.0

    play, played = _player(reward)
    one = DynamicSampler(StartPointSampler(POINTS, seed=0), play, group_size=4, max_rounds=4, oversample=1.5)
    expected, expected_stats = one.gather(2)

    play2, played2 = _player(reward)
    rounds: list[list[StartPoint]] = []

    def play_many(starts: list[StartPoint]) -> list[Group]:
        rounds.append(list(starts))
        return [play2(start) for start in starts]

    many = DynamicSampler(
        StartPointSampler(POINTS, seed=0), play, group_size=4, max_rounds=4, oversample=1.5, play_many=play_many
    )
    groups, stats = many.gather(2)
    assert [g.to_dict() for g in groups] == [g.to_dict() for g in expected]
    assert stats == expected_stats and [g.to_dict() for g in many.buffer] == [g.to_dict() for g in one.buffer]
    assert [s for r in rounds for s in r] == played2 == played and len(rounds) == stats.rounds >= 2
    assert [len(r) for r in rounds][0] == 3  # the first round: ceil(2 x 1.5) groups in one call
