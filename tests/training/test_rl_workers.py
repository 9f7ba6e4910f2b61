"""Env workers on Ray (training.rl.workers): the same start points played in this process and through two Ray actors
give the same token ids, masks, log-probabilities and rewards with a greedy tiny policy (also through the
transformers engine's group sessions, a group's first responses sampled as one batch); an actor killed mid-rollout
is replaced and its rollout replayed to the same result; the new RLArguments fields are checked up front.

Real Ray (a local Ray of 2 CPUs started by the workers), the real ManagerEnv over the smoke synthesis pool, the tiny
Qwen3 (random init, seed 0) sampling greedily in this process.
"""

from __future__ import annotations

import os
import shutil
import signal

import pytest

pytest.importorskip("ray")

from training.rl.trainer import ManagerRollouts, RLArguments  # noqa: E402

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
GENERATIONS = 2


class GreedyEngine:
    """The tiny model answering greedily (argmax at each id) through a KV cache; counts the sampling calls."""

    def __init__(self, model, eos_id: int):
        from training.rl.engines import TransformersEngine

        self.engine = TransformersEngine(model, eos_id)
        self.calls = 0
        self.on_call = None  # called with the call count before each sampling call

    def refresh(self) -> None: ...

    def release(self) -> None: ...

    def session(self) -> GreedySession:
        return GreedySession(self)


class GreedySession:
    def __init__(self, owner: GreedyEngine):
        self.owner, self.cache, self.fed = owner, None, []

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        import torch

        owner = self.owner
        owner.calls += 1
        if owner.on_call is not None:
            owner.on_call(owner.calls)
        assert context_ids[: len(self.fed)] == self.fed and len(context_ids) > len(self.fed)
        logits, self.cache = owner.engine.forward(context_ids[len(self.fed) :], self.cache)
        ids, logprobs = [], []
        for step in range(max_new_tokens):
            logp = torch.log_softmax(logits, dim=-1)
            token = int(torch.argmax(logp))
            ids.append(token)
            logprobs.append(float(logp[token]))
            if token == owner.engine.eos_id or step == max_new_tokens - 1:
                break
            logits, self.cache = owner.engine.forward([token], self.cache)
        self.fed = list(context_ids) + ids[:-1]
        return ids, logprobs


def _rollouts(pool_dir, tokenizer, out, **fields) -> ManagerRollouts:
    from trl import GRPOConfig

    from rewards import RewardConfig

    rl_args = RLArguments(
        pool=str(pool_dir),
        isolation=ISOLATION,
        prompt_view="bare",
        max_new_tokens=6,
        max_responses=2,
        overlong_buffer=4,
        **fields,
    )
    config = GRPOConfig(
        output_dir=str(out), num_generations=GENERATIONS, per_device_train_batch_size=GENERATIONS,
        max_completion_length=12, beta=0.0, report_to=[], use_cpu=True,
    )  # fmt: skip
    return ManagerRollouts(rl_args, config, tokenizer, RewardConfig(), seed=0)


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.fixture(scope="module")
def local(sft_smoke_dir, qwen3_tokenizer, model, tmp_path_factory):
    rollouts = _rollouts(sft_smoke_dir, qwen3_tokenizer, tmp_path_factory.mktemp("rl-local"))
    rollouts.engine = GreedyEngine(model, rollouts.tokens.eos_id)
    yield rollouts
    rollouts.close()


@pytest.fixture(scope="module")
def remote(sft_smoke_dir, qwen3_tokenizer, model, tmp_path_factory):
    rollouts = _rollouts(
        sft_smoke_dir, qwen3_tokenizer, tmp_path_factory.mktemp("rl-ray"), executor="ray", rollout_workers=2
    )
    rollouts.engine = GreedyEngine(model, rollouts.tokens.eos_id)
    yield rollouts
    rollouts.close()


def _starts(rollouts: ManagerRollouts) -> list:
    """Two start points of different episodes and event types."""
    from training.rl.rollout import start_points

    points = start_points(rollouts.pool)
    first = points[1]
    second = next(p for p in points if p.episode_id != first.episode_id and p.activation > 0)
    return [first, second]


def _fields(rollout) -> dict:
    return {name: getattr(rollout, name) for name in (
        "episode_id", "activation", "prompt_ids", "completion_ids", "env_mask", "actions", "truncated", "env_reward",
        "reward_terms", "overlong", "episode_activations")}  # fmt: skip


def _play(rollouts: ManagerRollouts, starts, together: bool = False) -> tuple[list, dict, int]:
    """The groups of ``starts`` (GENERATIONS rollouts each; ``together``: in one call, as dynamic sampling plays a
    round), TRL's batch of them, and the sampling calls made."""
    before = rollouts.engine.calls
    groups = rollouts.play_groups(starts) if together else [rollouts.play_group(start) for start in starts]
    assert [g.start for g in groups] == list(starts)
    flat = [r for g in groups for r in g.rollouts]
    return flat, rollouts.batch(flat), rollouts.engine.calls - before


def test_ray_env_actors_give_the_in_process_rollouts(local, remote):
    assert local.player is not None and local.workers is None
    assert remote.player is None and len(remote.workers.actors) == 2
    pids = remote.workers.pids()
    assert len(set(pids)) == 2 and os.getpid() not in pids  # the envs live in two other processes
    starts = _starts(local)
    expected, expected_batch, expected_calls = _play(local, starts)
    got, batch, calls = _play(remote, starts, together=True)  # 4 rollouts over 2 actors

    assert [_fields(r) for r in got] == [_fields(r) for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert {k: v for k, v in batch.items() if k != "logprobs"} == {
        k: v for k, v in expected_batch.items() if k != "logprobs"
    }
    assert calls == expected_calls >= 2 * len(got)  # two responses sampled per rollout, in both paths
    # the policy did play: model ids (mask 1) and env ids (mask 0) in every rollout, and the episode was scored
    assert all(r.model_tokens > 0 and 0 in r.env_mask and r.reward_terms for r in got)
    assert [r.episode_id for r in got] == [s.episode_id for s in starts for _ in range(GENERATIONS)]
    assert remote.workers.replaced == 0


def test_a_group_shares_its_first_request_in_process_and_on_ray(local, remote, model):
    """With the transformers engine a group's first responses are one request for GENERATIONS rows, in both paths
    (near-greedy sampling: the same rollouts); on Ray the two actors' requests are sampled in one call per wave."""
    from training.rl.engines import TransformersEngine

    saved = local.engine, remote.engine
    calls: dict[str, list] = {"local": [], "ray": []}
    try:
        for name, rollouts in (("local", local), ("ray", remote)):
            rollouts.engine = TransformersEngine(model, rollouts.tokens.eos_id, temperature=1e-4)
            generate_many = rollouts.engine.generate_many
            rollouts.engine.generate_many = lambda reqs, sessions, f=generate_many, c=calls[name]: (
                c.append([r.n for r in reqs]) or f(reqs, sessions)
            )
        starts = _starts(local)
        expected = [r for g in local.play_groups(starts) for r in g.rollouts]
        got = [r for g in remote.play_groups(starts) for r in g.rollouts]
    finally:
        local.engine, remote.engine = saved
    shared = [GENERATIONS]  # one request for the group's first responses
    assert [c for c in calls["local"] if GENERATIONS in c] == [shared] * len(starts)  # one env: one rollout a wave
    assert all(c == [1] for c in calls["local"] if GENERATIONS not in c)
    assert sum(c.count(GENERATIONS) for c in calls["ray"]) == len(starts)
    assert any(c == [1, 1] for c in calls["ray"])  # both actors' requests in one call
    assert len(calls["ray"]) < len(calls["local"])
    assert [_fields(r) for r in got] == [_fields(r) for r in expected]
    assert all(r.model_tokens > 0 for r in got)


def test_a_killed_env_actor_is_replaced_and_its_rollout_replayed(local, remote):
    starts = _starts(local)[1:]
    expected, _, expected_calls = _play(local, starts)
    assert expected_calls >= 2 * GENERATIONS  # every rollout samples at least twice: the kill falls mid-rollout
    old = remote.workers.pids()
    first = remote.engine.calls
    killed: list[int] = []

    def kill_first_actor(call: int) -> None:
        # round-robin: call 1 is rollout 0's first response (actor 0), 2 rollout 1's (actor 1), 3 rollout 0's second
        if call == first + 3:
            os.kill(old[0], signal.SIGKILL)
            killed.append(old[0])

    remote.engine.on_call = kill_first_actor
    try:
        got, _, calls = _play(remote, starts)
    finally:
        remote.engine.on_call = None

    assert killed and remote.workers.replaced == 1
    new = remote.workers.pids()
    assert new[0] != old[0] and new[1] == old[1]
    assert [_fields(r) for r in got] == [_fields(r) for r in expected]
    assert calls == expected_calls  # the replay answered the logged responses: nothing was sampled twice


def test_env_actors_take_a_fraction_of_a_cpu_and_every_process_of_a_run_joins_one_ray(remote, monkeypatch):
    from harness.executors import ExecutorOptions
    from training.rl.workers import ENV_ACTOR_CPUS, EnvWorkers, check_one_ray

    assert 0 < ENV_ACTOR_CPUS < 1
    assert remote.workers._actor._default_options["num_cpus"] == ENV_ACTOR_CPUS
    local_ray, cluster = ExecutorOptions(executor="ray"), ExecutorOptions(executor="ray", address="auto")
    check_one_ray(local_ray, world_size=1)  # one process: its own local Ray is the run's only one
    check_one_ray(cluster, world_size=8)  # every process joins the cluster started once
    monkeypatch.setenv("WORLD_SIZE", "8")  # what accelerate launch sets in each of 8 GPU processes
    with pytest.raises(ValueError, match=r"^executor ray with address null in a run of 8 processes .* address: auto"):
        EnvWorkers(remote.workers._spec, 2, local_ray)  # refused before any Ray is started or joined


def test_rl_arguments_check_the_env_worker_fields(monkeypatch):
    import training.rl.trainer as trainer
    from harness.executors import INSTALL_RAY, RayUnavailableError

    args = RLArguments()
    assert (args.executor, args.rollout_workers) == ("local", 1)
    assert RLArguments(executor="ray", rollout_workers=4).rollout_workers == 4
    with pytest.raises(ValueError, match=r"^rollout_workers=0 must be >= 1"):
        RLArguments(executor="ray", rollout_workers=0)
    with pytest.raises(ValueError, match=r"^executor='dask': use one of \['local', 'ray'\]\.$"):
        RLArguments(executor="dask")
    assert RLArguments(rollout_workers=2).rollout_workers == 2  # two envs in this process
    with pytest.raises(ValueError, match=r"^ray_num_cpus=1 is below rollout_workers=2"):
        RLArguments(executor="ray", rollout_workers=2, ray_num_cpus=1)
    monkeypatch.setattr(trainer, "is_available", lambda name: name != "ray")
    with pytest.raises(RayUnavailableError) as caught:
        RLArguments(executor="ray", rollout_workers=2)
    assert INSTALL_RAY in str(caught.value) and "\n" not in str(caught.value)
    assert RLArguments().executor == "local"  # local needs no Ray


def test_an_env_error_in_an_actor_is_raised_as_its_own_type_and_the_actors_play_on(local, remote):
    from envs.pool import PoolError
    from training.rl.rollout import StartPoint

    pids, replaced = remote.workers.pids(), remote.workers.replaced
    with pytest.raises(PoolError, match="episode 'no-such-episode' is not in the pool"):
        remote.play_groups([StartPoint("no-such-episode", 0)])
    assert remote.workers.pids() == pids and remote.workers.replaced == replaced  # no actor was replaced
    start = _starts(local)[0]
    assert [_fields(r) for r in remote.play_group(start).rollouts] == [
        _fields(r) for r in local.play_group(start).rollouts
    ]
