"""The gold policy replayed through ManagerEnv gets the top mean reward; every hack policy scores clearly lower."""

from __future__ import annotations

import shutil

import pytest

from envs import ManagerEnv
from rewards.hacks import HACK_POLICIES

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"

MARGIN = 0.3


def mean_reward(env, pool, make_policy) -> float:
    totals = []
    for episode_id in pool.ids:
        entry = pool.entry(episode_id)
        policy = make_policy(entry)
        _, info = env.reset(options={"episode_id": episode_id})
        while True:
            _, reward, terminated, truncated, info = env.step(policy.respond(info["policy_input"]))
            if terminated or truncated:
                totals.append(reward)
                break
    return sum(totals) / len(totals)


@pytest.fixture(scope="module")
def means(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION)
    try:
        result = {"gold": mean_reward(env, pool, lambda entry: entry.gold_policy())}
        for name, factory in HACK_POLICIES.items():
            result[name] = mean_reward(env, pool, lambda entry, factory=factory: factory())
    finally:
        env.close()
    return result


def test_gold_gets_the_top_mean_reward_through_the_env(means):
    assert max(means, key=means.get) == "gold", means


@pytest.mark.parametrize("hack", sorted(HACK_POLICIES))
def test_every_hack_scores_clearly_below_gold(means, hack):
    assert means[hack] < means["gold"] - MARGIN, means
