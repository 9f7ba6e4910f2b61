"""ManagerEnv with format="hier": the agent is tier 1 of the hierarchical manager. The Gymnasium contract, the gold
manager's decisions reproducing the recorded episodes through tier 0, rejected actions, errors."""

from __future__ import annotations

import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from envs import ManagerEnv, ManagerEnvConfig
from harness.manager.actions import make_action
from harness.manager.hier_prompts import DECISIONS, HIER_SYSTEM, TIER1_TOOLS, tier1_tool_schemas
from harness.manager.runtime import RuntimeConfig
from harness.manager.wire import parse_response, render_action
from rewards import RewardConfig, score_episode
from tests.envs.conftest import ISOLATION


@pytest.fixture(scope="module")
def env(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION, format="hier")
    yield env
    env.close()


def _name(action):
    return (action["parsed"] or {}).get("name")


def test_check_env_passes_in_the_hier_format(synth_dir):
    """Scripted worker on the built-in task, and the replay worker on the pool (through gymnasium.make)."""
    for kwargs in ({}, {"pool": str(synth_dir)}):
        env = gymnasium.make("stateguard/Manager-v0", format="hier", isolation=ISOLATION, **kwargs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        env.close()
        assert [str(w.message) for w in caught] == []


def without_checks(raw):
    """``raw`` with the constraints' check specs of an OPEN_STATE left out: tier 0 opens a state with the constraint
    texts (it has no model to write specs), the gold with the specs it restates them as."""
    parsed = parse_response(raw).action
    if parsed is None or parsed.name != "OPEN_STATE":
        return raw
    arguments = dict(parsed.arguments)
    arguments["constraints"] = [{"text": c["text"]} for c in arguments.get("constraints", [])]
    return render_action(make_action("OPEN_STATE", arguments))


def test_gold_decisions_through_tier0_reproduce_the_recorded_episodes(env, pool):
    """The env answers tier 0's requests; the gold answers the tier-1 ones: every recorded gold (clean) episode comes
    back action for action, the gold's tool calls and decisions of the check activations marked as tier 1's."""
    for episode_id in pool.ids:
        entry = pool.entry(episode_id)
        gold = entry.gold_policy()
        obs, info = env.reset(options={"episode_id": episode_id})
        steps, rewards, seen = 0, [], []
        while True:
            messages = info["messages"]
            assert messages[0] == {"role": "system", "content": HIER_SYSTEM} and obs == messages[-1]["content"]
            assert info["tools"] == tier1_tool_schemas()
            if len(messages) == 2:
                assert obs.startswith("# Check state") and "## Decide" in obs
            else:
                assert obs.startswith("<tool_response>") and messages[-2]["role"] == "assistant"
            seen.append(info["activation"])
            obs, reward, terminated, truncated, info = env.step(gold.respond(info["policy_input"]))
            assert info["rejected"] is None and info["legal"]
            steps += 1
            rewards.append(reward)
            if terminated or truncated:
                break
        assert terminated and not truncated and obs == "" and env.hier.rejected == []
        record = info["record"]
        recorded = pool.record(entry, "gold" if entry.kind == "fault" else "clean")
        assert record.final_answers == recorded.final_answers and record.grade == recorded.grade
        played = [a for a in record.activations if a["actor"] == "policy"]
        assert [[without_checks(x["raw"]) for x in a["actions"]] for a in played] == [
            [without_checks(x["raw"]) for x in a["actions"]] for a in recorded.activations if a["actor"] == "policy"
        ]
        tier1 = [(i, x) for i, a in enumerate(played) for x in a["actions"] if x.get("actor") == "policy"]
        assert steps == len(tier1) and sorted(set(seen)) == sorted({i for i, _ in tier1})
        assert {_name(x) for _, x in tier1} <= {*TIER1_TOOLS, *DECISIONS}
        assert all(x.get("actor") == "harness" for a in played for x in a["actions"] if x.get("actor") != "policy")
        for index in set(seen):  # a check activation: tier 0's check first, then tier 1 to the decision
            actors = [x["actor"] for x in played[index]["actions"]]
            assert actors[0] == "harness" and set(actors[1:]) == {"policy"}
            assert _name(played[index]["actions"][0]) == "check_execution"
            assert _name(played[index]["actions"][-1]) in DECISIONS
        expected = score_episode(record, pool.fault_info(entry), RewardConfig())
        assert rewards[:-1] == [0.0] * (steps - 1) and rewards[-1] == expected.total


def test_a_rejected_action_is_replaced_by_the_confirmation_and_reported(env, pool):
    obs, info = env.reset(options={"episode_id": pool.ids[0]})
    first = info["activation"]
    obs, reward, terminated, truncated, info = env.step("the state holds, I think")
    assert info["rejected"].startswith("unparseable") and info["legal"] is False
    assert info["action_result"].startswith("FINALIZE_RELATIONS")  # the confirmation's result
    assert info["activation"] > first and obs.startswith("# Check state")  # the next check activation
    (rejected,) = env.hier.rejected
    assert rejected["raw"] == "the state holds, I think" and rejected["turn_id"] == "1"
    activation = [a for a in env._runtime.record.activations if a["actor"] == "policy"][first]
    confirm = activation["actions"][-1]
    assert confirm["actor"] == "harness" and _name(confirm) == "FINALIZE_RELATIONS"
    assert parse_response(confirm["raw"]).thought.startswith("tier-1 reply rejected (unparseable")
    _, _, _, _, info = env.step(render_action(make_action("COMMIT_STATE", {})))
    assert "not a tier-1 action" in info["rejected"] and len(env.hier.rejected) == 2


def test_truncation_counts_the_agents_steps_only(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION, format="hier", max_env_steps=2)
    _, info = env.reset(options={"episode_id": pool.ids[0]})
    assert info["env_steps"] == 0 and info["activation"] == 2  # tier 0 played the turn start and the update
    assert env.step("x")[3] is False
    *_, terminated, truncated, info = env.step("x")
    assert truncated and not terminated and "record" not in info
    env.close()


def test_format_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"^format='tree' is not understood; use one of: flat, hier, hier_checks\.$"):
        ManagerEnvConfig(format="tree")
    with pytest.raises(ValueError, match="max_actions=4: tier 0 needs one check"):
        ManagerEnv(format="hier", runtime_config=RuntimeConfig(max_actions=4))
    assert ManagerEnv(format="flat").hier is None
