"""The wave driver (training.rl.waves) and the engines' generate_many.

- On the real ManagerEnv (smoke pool) with the tiny Qwen3 sampling near-greedily, rollouts played in waves on several
  envs are token for token those of ``drive`` (one at a time): ids, masks, actions, rewards.
- With recording stand-ins for vLLM's ``LLM`` (colocate) and TRL's ``VLLMClient`` (server), scripted multi-turn
  rollouts (16 rollouts x 4 responses, groups of 4) take one generate call per wave: at most responses + 1 calls, not
  rollouts x responses, and a group's shared first context is one prompt with ``n = 4``.
- The transformers engine's padded batch gives each row what it gives alone (near-greedy ids, log-probabilities).
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from training.rl.engines import TransformersEngine, sequence_logprobs  # noqa: E402
from training.rl.rollout import Rollout, SampleRequest, StartPoint, drive  # noqa: E402
from training.rl.vllm_engine import VLLMEngine  # noqa: E402
from training.rl.waves import PlayerLanes, WaveDriver  # noqa: E402

ROLLOUTS, RESPONSES, GROUP = 16, 4, 4


# ---------------------------------------------------------------- scripted multi-turn rollouts
class ScriptedPlayer:
    """A player whose rollout asks for RESPONSES responses: the first context is the start's (the same for a group),
    each later one the previous context, the response and a "tool response" that depends on the rollout."""

    def steps(self, start: StartPoint):
        rollout = Rollout(start.episode_id, prompt_ids=[1, 2, start.activation + 3])
        for turn in range(RESPONSES):
            ids, logprobs = yield SampleRequest(rollout.prompt_ids + rollout.completion_ids, 3)
            rollout.extend(ids, model=True, logprobs=logprobs)
            rollout.extend([50 + turn, int(start.episode_id)], model=False)
        rollout.env_reward = float(sum(rollout.completion_ids) % 7)
        return rollout


def _starts() -> list[StartPoint]:
    """ROLLOUTS / GROUP groups of GROUP rollouts: the same start within a group, another activation per group."""
    return [StartPoint(str(i), i // GROUP) for i in range(ROLLOUTS)]


def _sample(context: list[int], k: int) -> tuple[list[int], list[float]]:
    """A deterministic "sample" of row ``k`` after ``context``."""
    ids = [(sum(context) + k) % 97 + 100, len(context) + k, 9]
    return ids, [-0.5, -0.25, -0.125]


class RecordingLLM:
    """``vllm.LLM`` stand-in: records each ``generate`` call's prompts and SamplingParams."""

    def __init__(self):
        self.calls: list[list[tuple[list[int], dict]]] = []

    def generate(self, prompts, params, use_tqdm):
        params = params if isinstance(params, list) else [params] * len(prompts)
        self.calls.append([(list(p.prompt_token_ids), q.kwargs) for p, q in zip(prompts, params, strict=True)])
        outputs = []
        for prompt, param in zip(prompts, params, strict=True):
            samples = []
            for k in range(param.kwargs["n"]):
                ids, lps = _sample(prompt.prompt_token_ids, k)
                logprobs = [{t: SimpleNamespace(logprob=lp)} for t, lp in zip(ids, lps, strict=True)]
                samples.append(SimpleNamespace(token_ids=ids, logprobs=logprobs))
            outputs.append(SimpleNamespace(outputs=samples))
        return outputs


class RecordingClient:
    """TRL ``VLLMClient`` stand-in: records each ``generate`` call; completions prompt-major, n per prompt."""

    def __init__(self):
        self.calls: list[dict] = []

    def generate(self, prompts, n, temperature, max_tokens, logprobs):
        self.calls.append(dict(prompts=[list(p) for p in prompts], n=n, max_tokens=max_tokens))
        rows = [_sample(p, k) for p in prompts for k in range(n)]
        return {"completion_ids": [ids for ids, _ in rows], "logprobs": [[[lp] for lp in lps] for _, lps in rows]}


def _vllm_engine(mode: str, backend) -> VLLMEngine:
    generation = SimpleNamespace(llm=backend, vllm_client=backend)
    trainer = SimpleNamespace(vllm_generation=generation, accelerator=None, args=SimpleNamespace(vllm_mode=mode))
    return VLLMEngine(trainer, eos_id=9, temperature=0.8)


def _reference(engine) -> list[Rollout]:
    """The rollouts one at a time (``drive``), a group's rows given out in order as a shared request would."""
    rollouts = []
    for index, start in enumerate(_starts()):
        row = index % GROUP

        class Session:
            first = True

            def sample(self, context, budget, row=row):
                k, self.first = (row if self.first else 0), False
                return _sample(context, k)

        rollouts.append(drive(ScriptedPlayer().steps(start), Session))
    return rollouts


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_a_wave_is_one_generate_call_and_a_group_shares_its_first_context(fake_vllm, mode):
    backend = RecordingLLM() if mode == "colocate" else RecordingClient()
    driver = WaveDriver(PlayerLanes([ScriptedPlayer() for _ in range(ROLLOUTS)]), _vllm_engine(mode, backend), GROUP)
    rollouts = driver.play(_starts())

    assert len(backend.calls) == driver.waves == RESPONSES <= RESPONSES + 1  # not ROLLOUTS x RESPONSES (64)
    if mode == "colocate":
        first = backend.calls[0]
        assert [p for p, _ in first] == [[1, 2, g + 3] for g in range(ROLLOUTS // GROUP)]  # one prompt per group
        assert [q["n"] for _, q in first] == [GROUP] * (ROLLOUTS // GROUP)
        assert [len(c) for c in backend.calls[1:]] == [ROLLOUTS] * (RESPONSES - 1)
        assert all(q == dict(n=1, temperature=0.8, max_tokens=3, logprobs=0) for c in backend.calls[1:] for _, q in c)
    else:
        first = backend.calls[0]
        assert first["prompts"] == [[1, 2, g + 3] for g in range(ROLLOUTS // GROUP)] and first["n"] == GROUP
        assert [(len(c["prompts"]), c["n"]) for c in backend.calls[1:]] == [(ROLLOUTS, 1)] * (RESPONSES - 1)
    # each rollout of a group got its own row of the shared request, and the rollouts are drive's
    firsts = [r.completion_ids[:3] for r in rollouts]
    assert all(len({tuple(f) for f in firsts[g : g + GROUP]}) == GROUP for g in range(0, ROLLOUTS, GROUP))
    expected = _reference(None)
    assert [(r.completion_ids, r.env_mask, r.logprobs, r.env_reward) for r in rollouts] == [
        (r.completion_ids, r.env_mask, r.logprobs, r.env_reward) for r in expected
    ]
    assert (driver.requests, driver.responses) == (ROLLOUTS // GROUP + ROLLOUTS * (RESPONSES - 1), 64)


def test_server_mode_sends_one_call_per_budget_and_n(fake_vllm):
    client = RecordingClient()
    requests = [SampleRequest([1, 2], 5), SampleRequest([3], 7), SampleRequest([4, 5, 6], 5), SampleRequest([7], 5, 2)]
    rows = _vllm_engine("server", client).generate_many(requests)
    assert [(c["prompts"], c["max_tokens"], c["n"]) for c in client.calls] == [
        ([[1, 2], [4, 5, 6]], 5, 1), ([[3]], 7, 1), ([[7]], 5, 2)
    ]  # fmt: skip
    expected = [[_sample([1, 2], 0)], [_sample([3], 0)], [_sample([4, 5, 6], 0)], [_sample([7], 0), _sample([7], 1)]]
    assert rows == expected


def test_fewer_lanes_than_rollouts_still_batch_and_an_engine_without_generate_many_answers_one_by_one(fake_vllm):
    llm = RecordingLLM()
    driver = WaveDriver(PlayerLanes([ScriptedPlayer() for _ in range(GROUP)]), _vllm_engine("colocate", llm), GROUP)
    rollouts = driver.play(_starts())
    assert len(llm.calls) == (ROLLOUTS // GROUP) * RESPONSES  # one group per wave here: four lanes
    assert [r.completion_ids for r in rollouts] == [r.completion_ids for r in _reference(None)]

    class OneByOne:
        def session(self):
            return SimpleNamespace(sample=lambda context, budget: _sample(context, 0))

    lone = WaveDriver(PlayerLanes([ScriptedPlayer() for _ in range(ROLLOUTS)]), OneByOne(), GROUP)
    lone.play(_starts())
    assert (lone.waves, lone.calls) == (RESPONSES, ROLLOUTS * RESPONSES)  # no shared first request either


# ---------------------------------------------------------------- the transformers engine's padded batch
@pytest.fixture(scope="module")
def small_model():
    from training.models import TinyQwen3Config, init_tiny_qwen3

    return init_tiny_qwen3(TinyQwen3Config(num_hidden_layers=2, intermediate_size=256), seed=0)


@pytest.mark.parametrize("cached_prefix", [True, False])
def test_the_padded_batch_gives_each_row_what_it_gives_alone(small_model, cached_prefix):
    prefix = list(range(1000, 1020))
    contexts = [prefix + list(range(2000, 2000 + k)) for k in (5, 17, 9)]
    engine = TransformersEngine(small_model, eos_id=-1, prefix_ids=prefix if cached_prefix else [], temperature=1e-4)
    requests = [SampleRequest(contexts[0], 6), SampleRequest(contexts[1], 4, n=2), SampleRequest(contexts[2], 8)]
    got = engine.generate_many(requests)
    alone = [[engine.session().sample(r.context_ids, r.max_new_tokens) for _ in range(r.n)] for r in requests]
    assert [[ids for ids, _ in rows] for rows in got] == [[ids for ids, _ in rows] for rows in alone]
    assert [len(rows[0][0]) for rows in got] == [6, 4, 8]  # each row stops at its own budget
    engine.temperature = 1.0  # sampled: each row's log-probabilities are the model's for its own context
    for request, rows in zip(requests, engine.generate_many(requests), strict=True):
        for ids, logprobs in rows:
            assert logprobs == pytest.approx(sequence_logprobs(small_model, request.context_ids, ids), abs=1e-4)
    with pytest.raises(ValueError, match="non-empty contexts, n >= 1 and max_new_tokens >= 1"):
        engine.generate_many([SampleRequest([1], 2), SampleRequest([], 2)])


def test_with_sessions_each_row_feeds_only_its_new_ids_and_the_sessions_go_on(small_model):
    prefix = list(range(1000, 1020))
    engine = TransformersEngine(small_model, eos_id=-1, prefix_ids=prefix, temperature=1e-4)
    first, other = engine.session(), engine.session()
    earlier, _ = first.sample(prefix + [5, 6, 7], 4)  # a rollout's earlier response: its cache holds it
    requests = [SampleRequest(prefix + [5, 6, 7] + earlier + [8, 9], 6), SampleRequest(prefix + [40] * 13, 4)]
    got = engine.generate_many(requests, [first, other])
    alone = [engine.session().sample(r.context_ids, r.max_new_tokens) for r in requests]
    assert [rows[0][0] for rows in got] == [ids for ids, _ in alone]
    assert [first.fed, other.fed] == [r.context_ids for r in requests]  # each cache now holds its context
    after = requests[0].context_ids + got[0][0][0] + [11]
    assert first.sample(after, 3)[0] == engine.session().sample(after, 3)[0]  # and goes on from there
    engine.temperature = 1.0
    for request, rows in zip(requests, engine.generate_many(requests), strict=True):  # sampled, no sessions
        assert rows[0][1] == pytest.approx(sequence_logprobs(small_model, request.context_ids, rows[0][0]), abs=1e-4)


# ---------------------------------------------------------------- the real env
def test_waves_on_the_real_env_give_drives_rollouts(sft_smoke_dir, qwen3_tokenizer, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from envs import ReplayPool
    from training.rl.rollout import RolloutLimits, start_points
    from training.rl.workers import EnvSpec

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    pool = ReplayPool(sft_smoke_dir)
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    spec = EnvSpec(str(sft_smoke_dir), qwen3_tokenizer, RolloutLimits(6, 12, 2), prompt_view="bare",
                   isolation=isolation)  # fmt: skip
    players = [spec.player(pool) for _ in range(3)]  # three lanes: one takes a second rollout
    try:
        points = start_points(pool)
        starts = [s for s in (points[1], points[-1]) for _ in range(2)]  # two groups of two
        engine = TransformersEngine(model, players[0].tokens.eos_id, temperature=1e-4)  # near-greedy
        expected = [players[0].play(start, engine.session) for start in starts]
        driver = WaveDriver(PlayerLanes(players), engine, group_size=2)
        got = driver.play(starts)
    finally:
        for player in players:
            player.env.close()
    fields = ("episode_id", "activation", "prompt_ids", "completion_ids", "env_mask", "actions", "truncated",
              "env_reward", "reward_terms", "harness_confirmed", "episode_activations")  # fmt: skip
    assert [[getattr(r, f) for f in fields] for r in got] == [[getattr(r, f) for f in fields] for r in expected]
    assert all(r.model_tokens > 0 and 0 in r.env_mask and r.reward_terms for r in got)
    assert driver.waves <= 2 * 2  # two responses per rollout; three of the four rollouts side by side
    assert driver.responses == sum(len(r.actions) for r in got)  # every sampled response, once
    assert driver.requests == driver.responses - 2  # each group's two first responses: one request with n=2
