"""The episode as a state machine (``runtime.start()``, ``next_request`` / ``answer``): the same record as ``run()``,
typed misuse errors, and ``close()`` mid-episode frees the checkpoints it took."""

import json
import shutil
import time
from pathlib import Path

import psutil
import pytest

from harness.manager.episode_loop import EpisodeStateError
from harness.manager.policy_registry import get_policy
from harness.manager.policy_types import PolicyInput
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.sandbox import Sandbox, SandboxConfig
from harness.tasks import load_task
from harness.worker import Fault, ScriptedWorker

ROOT = Path(__file__).resolve().parents[3]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
ORACLES = RuntimeConfig(oracle_relations=True, executable_constraints=True)
TIMES = ("duration_s", "latency_s")


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


@pytest.fixture(scope="module")
def task():
    return load_task(RETAIL)


def faulted_runtime(task, kernel, policy):
    """The built-in task with a turn-1 fault the rule policy repairs (given the constraint code)."""
    code = task.load_answers()["1"].code.replace("* sales['unit_price']", "+ sales['unit_price']")
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    worker = ScriptedWorker(kernel, programs, {"1": Fault(task.id, "1", "unit_slip", code)})
    return ManagerRuntime(task, kernel, worker, policy, ORACLES)


def timeless(record) -> dict:
    """The record as JSON without its episode id and wall-clock times."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMES}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    data = json.loads(record.to_json())
    data.pop("episode_id")
    return strip(data)


def descendants() -> int:
    """Live processes under this one (a released checkpoint may stay a zombie until its parent reaps it)."""
    live = 0
    for process in psutil.Process().children(recursive=True):
        try:
            live += process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            continue
    return live


def test_stepping_the_episode_records_what_run_records(sandbox, task):
    with sandbox.new_kernel(task.public_dir) as kernel:
        expected = faulted_runtime(task, kernel, get_policy("rule")).run()
    assert expected.repairs  # the REPAIR path (the worker's re-analysis inside an activation) is covered
    policy = get_policy("rule")
    with sandbox.new_kernel(task.public_dir) as kernel:
        runtime = faulted_runtime(task, kernel, policy)
        episode = runtime.start()
        requests = 0
        while (request := episode.next_request()) is not None:
            assert isinstance(request, PolicyInput) and episode.next_request() is request  # stays until answered
            episode.answer(policy.respond(request))
            requests += 1
    assert episode.done and episode.state == "finished" and episode.next_request() is None
    assert requests == sum(len(a["actions"]) for a in expected.activations if a["actor"] == "policy")
    assert timeless(episode.record) == timeless(expected)
    with pytest.raises(EpisodeStateError, match="has ended: read episode.record"):
        episode.answer("too late")
    with pytest.raises(RuntimeError, match="build a new one per episode"):
        runtime.start()


def test_answering_before_the_first_request_is_a_clear_error_and_none_asks_nothing(sandbox, task):
    with sandbox.new_kernel(task.public_dir) as kernel:
        episode = faulted_runtime(task, kernel, get_policy("rule")).start()
        with pytest.raises(EpisodeStateError, match=r"call next_request\(\) first"):
            episode.answer("x")
        episode.close()
        with pytest.raises(EpisodeStateError, match="was closed"):
            episode.answer("x")
        kernel.reset()
        plain = faulted_runtime(task, kernel, get_policy("none")).start()
        assert plain.next_request() is None and plain.record.grade is not None  # played through: no requests


def test_close_mid_episode_releases_the_checkpoints_it_took(sandbox, task):
    policy = get_policy("rule")
    with sandbox.new_kernel(task.public_dir) as kernel:
        kernel.execute("warm = 1")
        baseline = descendants()
        runtime = faulted_runtime(task, kernel, policy)
        episode = runtime.start()
        while not runtime.worker.steps:  # past the turn-1 cell: the turn-start checkpoint has been forked
            episode.answer(policy.respond(episode.next_request()))
        assert episode.next_request() is not None and kernel.checkpoints and descendants() > baseline
        episode.close()
        assert kernel.checkpoints == [] and episode.done and episode.next_request() is None
        deadline = time.monotonic() + 5.0
        while descendants() > baseline and time.monotonic() < deadline:  # killed asynchronously
            time.sleep(0.05)
        assert descendants() == baseline
        episode.close()  # idempotent


class _TierSaying:
    """The rule policy, saying that its OPEN_STATE responses are the harness's and the rest the policy's."""

    name, active = "rule-tiers", True

    def __init__(self):
        self.inner = get_policy("rule")
        self.last_actor = None

    def respond(self, inp: PolicyInput) -> str:
        response = self.inner.respond(inp)
        self.last_actor = "harness" if "OPEN_STATE" in response else "policy"
        return response


def test_a_policy_that_names_the_actor_gets_it_recorded_per_action(sandbox, task):
    def actions(policy):
        kernel = sandbox.new_kernel(public_dir=task.public_dir)
        try:
            record = faulted_runtime(task, kernel, policy).run()
        finally:
            kernel.close()
        return [a for act in record.activations if act["actor"] == "policy" for a in act["actions"]]

    named = actions(_TierSaying())
    opened = [a for a in named if a["parsed"] and a["parsed"]["name"] == "OPEN_STATE"]
    assert opened and all(a["actor"] == "harness" for a in opened)
    assert {a["actor"] for a in named} == {"harness", "policy"}
    assert all("actor" not in a for a in actions(get_policy("rule")))  # flat records are unchanged
