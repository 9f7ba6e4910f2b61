"""WorkerEnv: the agent plays the ReAct worker of a task; the reward is the task's grade."""

from __future__ import annotations

import pytest

from envs import StepAfterDoneError, StepBeforeResetError, WorkerEnv
from harness.worker.react import SYSTEM_PROMPT
from harness.worker.spec import task_contract
from tests.envs.conftest import ISOLATION


@pytest.fixture(scope="module")
def env():
    env = WorkerEnv(isolation=ISOLATION)
    yield env
    env.close()


def play(env, answer_for):
    """Per turn: one cell that runs ``answer_for(turn)``'s code, then a final answer."""
    obs, info = env.reset()
    observations, rewards = [obs], []
    for turn in env.task.turns:
        for action in (f"I compute it.\n```python\n{answer_for(turn)}\n```", "Final Answer: done"):
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs)
            rewards.append(reward)
    return observations, rewards, terminated, truncated, info


def test_reference_code_earns_the_full_grade_and_observations_follow_the_react_format(env):
    answers = env.task.load_answers()
    observations, rewards, terminated, truncated, info = play(env, lambda t: answers[t.turn_id].code)
    assert observations[0] == task_contract(env.task).strip()
    assert observations[1].startswith("Execution succeeded in ")
    assert env.task.turns[1].question in observations[2]  # the final answer ends turn 1; turn 2's question follows
    assert terminated and not truncated and observations[-1] == ""
    assert rewards[:-1] == [0.0] * (len(rewards) - 1) and rewards[-1] == 1.0 == info["grade"]["score"]
    record = info["record"]
    assert record.config["manager"] == "none" and len(record.worker_steps) == 2 * len(env.task.turns)
    assert record.final_answers == {t: a.answer for t, a in answers.items()}


def test_wrong_answers_score_zero_and_info_carries_the_conversation(env):
    obs, info = env.reset()
    assert info["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert info["messages"][-1]["content"] == obs
    *_, terminated, _, info = play(env, lambda t: "print_result({'nothing': 0})")
    assert terminated and info["grade"]["score"] == 0.0


def test_failed_cells_are_reported_and_budgets_truncate():
    env = WorkerEnv(isolation=ISOLATION, max_env_steps=2)
    with pytest.raises(StepBeforeResetError):
        env.step("Final Answer: 1")
    env.reset()
    obs, reward, terminated, truncated, _ = env.step("```python\n1 / 0\n```")
    assert obs.startswith("Execution failed") and "ZeroDivisionError" in obs and not truncated
    obs, reward, terminated, truncated, info = env.step("no code and no answer")
    assert obs.startswith("No code was run.") and truncated and not terminated and reward == 0.0
    with pytest.raises(StepAfterDoneError):
        env.step("Final Answer: 1")
    env.close()
