"""ManagerEnv with format="hier_checks": the agent writes each state's checks, tier 0 runs them and decides, and the
step's reward is the validity-grounded check-writing reward (a catch on the faulted turn against its clean twin, a
false alarm, the protocol term)."""

from __future__ import annotations

import json
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from envs import ManagerEnv
from harness.manager.hier_checks import render_checks_reply
from harness.manager.hier_prompts import CHECKS_SYSTEM
from rewards import CheckRewardConfig, score_checks
from synthesis.checks import folder_checks
from tests.envs.conftest import ISOLATION

EMPTY = '{"checks": []}'
ALARM = json.dumps({"checks": [{"kind": "param", "variable": "result", "value": -98765}]})
"""A check that fails on every turn (``result`` is never -98765): a false alarm wherever the state is clean."""


@pytest.fixture(scope="module")
def env(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION, format="hier_checks")
    yield env
    env.close()


def _to_turn(env, episode_id, turn_id):
    """Reset to ``episode_id`` and answer ``{"checks": []}`` until the agent is asked for ``turn_id``'s checks."""
    obs, info = env.reset(options={"episode_id": episode_id})
    while info["policy_input"].turn.turn_id != turn_id:
        obs, reward, terminated, truncated, info = env.step(EMPTY)
        assert not (terminated or truncated) and info["reward_terms"]["false_alarm"] in (0.0, None)
    return obs, info


def _gold_reply(pool, entry, turn_id):
    checks = folder_checks(pool.task(entry))[turn_id]
    return render_checks_reply([c.spec for c in checks if c.spec is not None])


def test_check_env_passes_in_the_hier_checks_format():
    env = gymnasium.make("stateguard/Manager-v0", format="hier_checks", isolation=ISOLATION)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [str(w.message) for w in caught] == []


def test_the_agent_is_asked_once_per_state_with_the_checks_conversation(env, pool):
    obs, info = env.reset(options={"episode_id": pool.ids[0]})
    assert info["messages"][0] == {"role": "system", "content": CHECKS_SYSTEM} and info["tools"] == []
    assert obs == info["messages"][-1]["content"] and "Turn 1" in obs
    turns, terminated = [info["policy_input"].turn.turn_id], False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(EMPTY)
        assert info["checks"]["decision"] == "FINALIZE_RELATIONS" and info["checks"]["here"] == []
        assert reward == pytest.approx(0.2) and info["reward_terms"] == {"protocol": 1.0, "catch": None,
                                                                         "false_alarm": 0.0}  # fmt: skip
        if not terminated:
            turns.append(info["policy_input"].turn.turn_id)
    assert turns == [t.turn_id for t in pool.task(pool.entry(pool.ids[0])).turns]
    assert info["record"].repairs == [] and set(info["episode_reward_terms"]) >= {"protocol", "outcome"}


def test_a_check_that_fails_on_the_faulted_turn_and_passes_on_its_clean_twin_earns(env, pool):
    caught = 0
    for entry in (e for e in pool.entries.values() if e.kind == "fault" and not e.fault_info["benign"]):
        turn = entry.fault_info["turn_id"]
        reply = _gold_reply(pool, entry, turn)
        _to_turn(env, entry.id, turn)
        obs, reward, terminated, truncated, info = env.step(reply)
        checks, terms = info["checks"], info["reward_terms"]
        assert checks["label"] == "faulted" and len(checks["clean"]) == len(checks["here"]) > 0
        assert checks["clean"] == [True] * len(checks["here"])  # the gold's checks pass on the clean twin
        if terms["catch"] == 1.0:
            caught += 1
            assert checks["decision"] == "REPAIR" and False in checks["here"] and terms["false_alarm"] == 0.0
            assert reward == pytest.approx(0.2 * terms["protocol"] + 1.0)
            assert any(r["turn_id"] == turn for r in env._runtime.record.repairs)
        # the same checks on the clean twin's turn, played: they pass, tier 0 confirms, no cost
        clean = next(e for e in pool.entries.values() if e.kind == "clean" and e.task_id == entry.task_id)
        _to_turn(env, clean.id, turn)
        obs, reward, terminated, truncated, info = env.step(reply)
        assert info["checks"]["label"] == "clean" and info["checks"]["decision"] == "FINALIZE_RELATIONS"
        assert info["reward_terms"]["false_alarm"] == 0.0 and reward == pytest.approx(0.2 * terms["protocol"])
    assert caught >= 1
    assert env.twins is not None and env.twins.built >= 1


def test_a_check_that_fails_on_a_clean_state_costs_a_false_alarm(env, pool):
    fault = next(e for e in pool.entries.values() if e.kind == "fault" and not e.fault_info["benign"])
    clean = next(e for e in pool.entries.values() if e.kind == "clean" and e.task_id == fault.task_id)
    turn = fault.fault_info["turn_id"]
    _to_turn(env, clean.id, turn)
    obs, reward, terminated, truncated, info = env.step(ALARM)
    assert info["checks"]["label"] == "clean" and info["checks"]["here"] == [False]
    assert info["checks"]["decision"] == "REPAIR" and info["reward_terms"]["false_alarm"] == 1.0
    assert reward == pytest.approx(0.2 - 1.0)
    # on the faulted turn the same check fails on the clean twin too: no catch, a false alarm
    _to_turn(env, fault.id, turn)
    obs, reward, terminated, truncated, info = env.step(ALARM)
    assert info["checks"]["clean"] == [False] and info["reward_terms"] == {"protocol": 1.0, "catch": 0.0,
                                                                          "false_alarm": 1.0}  # fmt: skip


def test_an_unparseable_reply_costs_the_protocol_term_and_tier0_confirms(env, pool):
    obs, info = env.reset(options={"episode_id": pool.ids[0]})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "REPAIR"}</tool_call>')
    assert info["legal"] is False and info["rejected"].startswith("unparseable")
    assert info["checks"]["parsed"] is False and info["checks"]["decision"] == "FINALIZE_RELATIONS"
    assert info["reward_terms"] == {"protocol": 0.0, "catch": None, "false_alarm": 0.0} and reward == 0.0
    # a dropped spec costs its share of the protocol term
    obs, reward, terminated, truncated, info = env.step(json.dumps({"checks": [{"kind": "no_such_kind"}]}))
    assert info["checks"]["kept"] == 0 and info["checks"]["dropped"] == 1 and reward == pytest.approx(0.0)


def test_score_checks_by_hand():
    config = CheckRewardConfig()
    assert score_checks(True, 2, 0, [False, True], [True, True], "faulted", config).total == pytest.approx(1.2)
    assert score_checks(True, 1, 1, [True], [True], "faulted", config).terms == {
        "protocol": 0.5, "catch": 0.0, "false_alarm": 0.0}  # fmt: skip
    assert score_checks(True, 1, 0, [None], None, "clean", config).total == pytest.approx(0.2)  # could not run
    assert score_checks(True, 1, 0, [False], None, None, config).terms["false_alarm"] is None
    with pytest.raises(ValueError, match="w_false_alarm"):
        CheckRewardConfig(w_catch=2.0, w_false_alarm=1.0)
