"""ManagerEnv: the Gymnasium contract, replay fidelity against the recorded branches, errors, recycling."""

from __future__ import annotations

import threading
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs import EpisodeError, ManagerEnv, StepAfterDoneError, StepBeforeResetError
from harness.manager.actions import make_action
from harness.manager.prompts import render_evidence
from harness.manager.wire import render_action
from harness.untrusted import neutralize
from rewards import RewardConfig, score_episode
from synthesis.gold import GoldPolicy
from tests.envs.conftest import ISOLATION

ABSTAIN = render_action(make_action("ABSTAIN", {}))


@pytest.fixture(scope="module")
def env(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION)
    yield env
    env.close()


def play(env, policy, episode_id, **reset):
    obs, info = env.reset(options={"episode_id": episode_id}, **reset)
    steps, rewards = 0, []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.respond(info["policy_input"]))
        steps += 1
        rewards.append(reward)
        if terminated or truncated:
            return obs, rewards, terminated, truncated, info, steps


class Abstain:
    name = "abstain"

    def respond(self, inp):
        return ABSTAIN


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS))
def test_check_env_passes_for_every_registered_env(env_id):
    env = gymnasium.make(env_id, isolation=ISOLATION)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [str(w.message) for w in caught] == []


def test_make_with_a_pool_folder_plays_the_replay_worker_and_passes_check_env(synth_dir, pool):
    env = gymnasium.make("stateguard/Manager-v0", pool=str(synth_dir), isolation=ISOLATION)
    assert env.unwrapped.worker == "replay" and env.unwrapped.episode_ids == pool.ids
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [str(w.message) for w in caught] == []


def test_gold_policy_reproduces_the_recorded_gold_and_clean_episodes(env, pool):
    for episode_id in pool.ids:
        entry = pool.entry(episode_id)
        obs, rewards, terminated, truncated, info, steps = play(env, entry.gold_policy(), episode_id)
        recorded = pool.record(entry, "gold" if entry.kind == "fault" else "clean")
        record = info["record"]
        assert terminated and not truncated and obs == ""
        assert record.final_answers == recorded.final_answers and record.grade == recorded.grade
        assert (
            len(record.repairs) == len(recorded.repairs) == (entry.kind == "fault" and not entry.fault_info["benign"])
        )
        assert [a["actions"][-1]["raw"] for a in record.activations] == [
            a["actions"][-1]["raw"] for a in recorded.activations
        ]
        assert steps == sum(len(a["actions"]) for a in record.activations if a["actor"] == "policy")
        expected = score_episode(record, pool.fault_info(entry), RewardConfig())
        assert rewards[:-1] == [0.0] * (steps - 1) and rewards[-1] == expected.total
        assert info["reward_terms"] == dict(expected.terms) and info["grade"] == record.grade


@pytest.mark.parametrize("make_policy", [Abstain, lambda: GoldPolicy()], ids=["abstain", "gold-without-fault"])
def test_a_manager_that_never_repairs_gets_the_recorded_faulty_continuation(env, pool, make_policy):
    fault_ids = [i for i in pool.ids if pool.entries[i].kind == "fault"]
    for episode_id in fault_ids:
        entry = pool.entry(episode_id)
        *_, info, _ = play(env, make_policy(), episode_id)
        faulty = pool.record(entry, "faulty")
        assert info["record"].repairs == []
        assert info["record"].final_answers == faulty.final_answers and info["record"].grade == faulty.grade


def test_info_reports_the_legality_and_result_of_each_action(env, pool):
    obs, info = env.reset(options={"episode_id": pool.ids[0]})
    assert obs.startswith("# Activation: turn_start") and info["episode_id"] == pool.ids[0]
    assert info["policy_input"].legal_actions and "OPEN_STATE" in info["policy_input"].legal_actions
    obs, reward, terminated, truncated, info = env.step("no tags at all")
    assert (reward, terminated, truncated, info["legal"]) == (0.0, False, False, False)
    assert (
        info["action_result"].startswith("rejected:")
        and obs == f"<tool_response>\n{neutralize(info['action_result'])}\n{render_evidence([])}\n</tool_response>"
    )
    obs, _, _, _, info = env.step(render_action(make_action("COMMIT_STATE", {})))
    assert info["legal"] is False and info["action_result"].startswith("illegal:")
    obs, _, _, _, info = env.step(render_action(make_action("load_state", {"state_id": "S9"})))
    assert info["legal"] is True and info["env_steps"] == 3
    _, _, _, _, info = env.step(ABSTAIN)  # ends the turn-start activation: the worker runs, the turn end begins
    assert info["legal"] is True and info["action_result"] == "ABSTAIN: ok"
    assert info["policy_input"].previous == ()


def test_the_episode_is_stepped_in_the_callers_thread(env, pool):
    env.reset(options={"episode_id": pool.ids[0]})
    threads = threading.active_count()  # an episode thread would be running now, and gone at the end
    *_, terminated, _, info, _ = play(env, Abstain(), pool.ids[0])
    assert terminated and threading.active_count() == threads and env._run.state == "finished"


def test_misuse_raises_typed_errors_that_name_the_fix(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION, max_env_steps=3)
    with pytest.raises(StepBeforeResetError, match=r"call env.reset\(\) first"):
        env.step(ABSTAIN)
    with pytest.raises(ValueError, match="only option is 'episode_id'"):
        env.reset(options={"episode": "x"})
    env.reset(options={"episode_id": pool.ids[0]})
    with pytest.raises(TypeError, match="model response string"):
        env.step(3)
    assert env.step("x")[3] is False and env.step("x")[3] is False
    obs, reward, terminated, truncated, info = env.step("x")
    assert truncated and not terminated and reward == 0.0 and "record" not in info
    with pytest.raises(StepAfterDoneError, match=r"call env.reset\(\)"):
        env.step(ABSTAIN)
    assert isinstance(StepAfterDoneError("x"), gymnasium.error.ResetNeeded)
    env.close()
    with pytest.raises(ValueError, match="pass pool="):
        ManagerEnv(worker="replay")
    with pytest.raises(ValueError, match="worker='bogus' is not understood"):
        ManagerEnv(worker="bogus")


def test_an_exception_in_the_episode_is_raised_by_step_with_the_episode_named(env, pool):
    env.reset(options={"episode_id": pool.ids[0]})

    def broken_step():
        raise RuntimeError("worker exploded")

    env._runtime.worker.step = broken_step
    with pytest.raises(EpisodeError, match=f"episode {pool.ids[0]} of task .*env step 1.*worker exploded") as caught:
        env.step(ABSTAIN)
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(StepAfterDoneError):
        env.step(ABSTAIN)


def test_seeded_resets_draw_episodes_reproducibly_and_recycle_one_kernel(pool):
    env = ManagerEnv(pool=pool, isolation=ISOLATION)
    drawn = [env.reset(seed=s)[1]["episode_id"] for s in range(6)]
    assert drawn == [env.reset(seed=s)[1]["episode_id"] for s in range(6)]
    assert set(drawn) <= set(pool.ids)
    sandbox = env.sandboxes.sandbox
    holder = env.sandboxes
    tasks = {pool.entry(i).task_id for i in drawn}
    assert holder.kernels_started + holder.kernels_recycled == 12 and holder.kernel is not None
    assert holder.kernels_recycled >= 12 - 2 * len(tasks)  # a reset on the same task recycles the kernel
    *_, info, _ = play(env, Abstain(), pool.ids[0])
    assert not holder.kernel.closed and holder.sandbox is sandbox  # kept for the next reset
    env.close()
    assert env.sandboxes.sandbox is None
    env.close()  # idempotent


def test_scripted_worker_with_a_faults_file(tmp_path):
    from harness.worker.faults import Fault, write_faults

    env = ManagerEnv(worker="scripted", isolation=ISOLATION)
    task = env._task
    turn = task.turns[0]
    clean_answers = play(env, GoldPolicy(), task.id)[4]["record"].final_answers
    faults = tmp_path / "faults.jsonl"
    code = task.load_answers()[turn.turn_id].code + "\nresult = 'wrong'\nprint_result(result)"
    write_faults(faults, [Fault(task.id, turn.turn_id, "manual", code, ("result",))])
    faulted = ManagerEnv(worker="scripted", faults=str(faults), isolation=ISOLATION)
    *_, info, _ = play(faulted, Abstain(), task.id)
    assert info["record"].final_answers[turn.turn_id] == "wrong" != clean_answers[turn.turn_id]
    assert faulted._resolve(task.id).fault_info.variables == ("result",)
    env.close()
    faulted.close()


def test_a_model_worker_is_built_by_harness_run_and_its_failures_surface_in_step():
    from harness.worker.react import ReActWorker

    env = ManagerEnv(worker="openai:http://127.0.0.1:9/v1", isolation=ISOLATION)  # nothing listens on port 9
    obs, info = env.reset()
    assert obs.startswith("# Activation: turn_start") and isinstance(env._runtime.worker, ReActWorker)
    with pytest.raises(EpisodeError, match="env step 1"):
        env.step(ABSTAIN)  # the worker's first chat call fails: the episode cannot go on
    env.close()


@pytest.mark.parametrize(
    ("worker", "message"),
    [
        ("openai:http://127.0.0.1:9/v1", "replays faulty code through the scripted worker"),
        ("replay", "replay takes its faults from the pool"),
    ],
)
def test_faults_need_the_scripted_worker(worker, message):
    with pytest.raises(ValueError, match=message):
        envs.ManagerEnvConfig(worker=worker, faults="faults.jsonl")
    assert envs.ManagerEnvConfig(worker="scripted", faults="faults.jsonl").faults == "faults.jsonl"
