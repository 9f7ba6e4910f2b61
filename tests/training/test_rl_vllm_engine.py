"""training.rl.vllm_engine.VLLMEngine without vLLM: its two modes driven through stand-ins of TRL's vLLM backend.

vLLM does not run on CPU. What is tested here is the engine's side of the contract: in ``server`` mode a
``VLLMClient``-shaped object whose "server" is a real transformers model (so the log-probabilities it reports are a
model's, and a stale copy of the weights really differs), in ``colocate`` mode a fake ``vllm`` module and ``LLM``
that record the sampling parameters and the sleep / wake-up calls. The real vLLM paths need a GPU machine.
"""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from training.rl import vllm_engine  # noqa: E402
from training.rl.engines import TransformersEngine, sequence_logprobs  # noqa: E402
from training.rl.vllm_engine import VLLMEngine, check_weight_sync  # noqa: E402

EOS = 151645


@pytest.fixture(scope="module")
def small_model():
    from training.models import TinyQwen3Config, init_tiny_qwen3

    return init_tiny_qwen3(TinyQwen3Config(num_hidden_layers=2, intermediate_size=256), seed=0)


@pytest.fixture(autouse=True)
def vllm_installed(monkeypatch):
    monkeypatch.setattr(vllm_engine, "require", lambda name: None)


class ModelServer:
    """A ``VLLMClient`` stand-in whose server computes with a transformers model: ``generate`` samples (token ids and
    their log-probabilities, TRL's ``(seq, 1)`` layout), ``get_sequence_logprobs`` scores given completions."""

    def __init__(self, model, base_url: str = "", connection_timeout: float = 0.0):
        self.model, self.base_url, self.connection_timeout = model, base_url, connection_timeout
        self.requests: list[dict] = []

    def generate(self, prompts, n, temperature, max_tokens, logprobs):
        self.requests.append(dict(kind="generate", prompts=prompts, n=n, temperature=temperature, logprobs=logprobs))
        ids, lps = (
            TransformersEngine(self.model, EOS, temperature=temperature).session().sample(prompts[0], max_tokens)
        )
        return {"prompt_ids": prompts, "completion_ids": [ids], "logprobs": [[[lp] for lp in lps]]}

    def get_sequence_logprobs(self, sequences, prompt_lengths, top_logprobs, temperature):
        self.requests.append(dict(kind="score", sequences=sequences, prompt_lengths=prompt_lengths, top=top_logprobs))
        scored = [
            sequence_logprobs(self.model, s[:k], s[k:], temperature)
            for s, k in zip(sequences, prompt_lengths, strict=True)
        ]
        return {"actual_logprobs": [[[lp] for lp in row] for row in scored]}


class Accelerator:
    def __init__(self):
        self.barriers = 0

    def wait_for_everyone(self):
        self.barriers += 1


def server_trainer(client=None):
    generation = SimpleNamespace(server_base_url=None, server_host="10.0.0.2", server_port=8001, server_timeout=240.0)
    if client is not None:
        generation.vllm_client = client  # TRL connects the main process only
    args = SimpleNamespace(vllm_mode="server", vllm_enable_sleep_mode=False)
    return SimpleNamespace(vllm_generation=generation, accelerator=Accelerator(), args=args)


def test_server_mode_samples_and_scores_through_the_client(small_model):
    server = ModelServer(small_model)
    trainer = server_trainer(server)
    engine = VLLMEngine(trainer, EOS, temperature=0.7)
    assert engine.client is server
    engine.refresh()
    assert trainer.accelerator.barriers == 1  # nobody samples before the main process pushed the weights
    torch.manual_seed(0)
    context = [5, 6, 7, 8]
    ids, lps = engine.session().sample(context, 6)
    assert len(ids) == 6 and lps == pytest.approx(sequence_logprobs(small_model, context, ids, 0.7), abs=1e-4)
    assert server.requests[0] == dict(kind="generate", prompts=[context], n=1, temperature=0.7, logprobs=0)

    scored = engine.score([1, 2, 3], [9, 10])
    assert server.requests[1] == dict(kind="score", sequences=[[1, 2, 3, 9, 10]], prompt_lengths=[3], top=0)
    assert scored == pytest.approx(sequence_logprobs(small_model, [1, 2, 3], [9, 10], 1.0), abs=1e-5)
    engine.release()  # nothing to release in server mode


def test_server_mode_off_the_main_process_opens_its_own_http_client(small_model):
    made = []

    def factory(**kwargs):
        made.append(kwargs)
        return ModelServer(small_model, **kwargs)

    engine = VLLMEngine(server_trainer(client=None), EOS, client_factory=factory)
    assert made == [dict(base_url="http://10.0.0.2:8001", connection_timeout=240.0)]
    assert engine.client.base_url == "http://10.0.0.2:8001"


def test_weight_sync_check_in_server_mode_catches_a_server_with_stale_weights(small_model, caplog):
    trained = copy.deepcopy(small_model)
    engine = VLLMEngine(server_trainer(ModelServer(small_model)), EOS, temperature=0.7)
    prompt, completion = [10, 11, 12, 13], [20, 21, 22, EOS]

    def trainer_score(p, c):
        return sequence_logprobs(trained, p, c, 1.0)

    with caplog.at_level(logging.WARNING, logger="training.rl.vllm_engine"):
        assert check_weight_sync(trainer_score, engine.score, prompt, completion, threshold=1e-3) < 1e-5
    assert not caplog.records
    with torch.no_grad():  # an optimizer step the server never received
        for p in trained.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    with caplog.at_level(logging.WARNING, logger="training.rl.vllm_engine"):
        assert check_weight_sync(trainer_score, engine.score, prompt, completion, threshold=1e-3) > 1e-3
    assert any("WEIGHT SYNC CHECK FAILED" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- colocate, with a fake vllm module
class LLM:
    """Records what the engine asks of ``vllm.LLM``; answers with fixed tokens and log-probabilities."""

    def __init__(self):
        self.calls: list[tuple] = []

    def wake_up(self, tags):
        self.calls.append(("wake_up", tuple(tags)))

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def generate(self, prompts, params, use_tqdm):
        ids = prompts[0].prompt_token_ids
        self.calls.append(("generate", tuple(ids), params.kwargs))
        lp = SimpleNamespace
        if params.kwargs.get("prompt_logprobs") == 0:  # vLLM: None for the first position, then {id: Logprob}
            prompt_logprobs = [None] + [{t: lp(logprob=-0.1 * t)} for t in ids[1:]]
            return [SimpleNamespace(prompt_logprobs=prompt_logprobs, outputs=[])]
        sample = SimpleNamespace(
            token_ids=[7, 8], logprobs=[{7: lp(logprob=-0.5)}, {8: lp(logprob=-1.5), 3: lp(logprob=-0.2)}]
        )
        return [SimpleNamespace(outputs=[sample])]


def colocate_trainer(sleep_mode: bool):
    synced = []
    generation = SimpleNamespace(llm=LLM(), _llm_weights_sleeping=sleep_mode, sync_weights=lambda: synced.append(1))
    args = SimpleNamespace(vllm_mode="colocate", vllm_enable_sleep_mode=sleep_mode)
    return SimpleNamespace(vllm_generation=generation, accelerator=Accelerator(), args=args), synced


def test_colocate_sleep_mode_wakes_the_cache_resyncs_discarded_weights_and_sleeps_after(fake_vllm):
    trainer, synced = colocate_trainer(sleep_mode=True)
    llm = trainer.vllm_generation.llm
    engine = VLLMEngine(trainer, EOS, temperature=0.9)
    engine.refresh()
    assert synced == [1] and llm.calls == [("wake_up", ("kv_cache",))]
    ids, lps = engine.session().sample([1, 2, 3], 4)
    assert (ids, lps) == ([7, 8], [-0.5, -1.5])  # each sampled id's own log-probability, not the top entry
    assert llm.calls[-1] == ("generate", (1, 2, 3), dict(n=1, temperature=0.9, max_tokens=4, logprobs=0))
    assert engine.score([4, 5], [6, 7]) == pytest.approx([-0.6, -0.7])
    assert llm.calls[-1] == ("generate", (4, 5, 6, 7), dict(n=1, temperature=1.0, max_tokens=1, prompt_logprobs=0))
    engine.release()
    assert llm.calls[-1] == ("sleep", 2) and trainer.vllm_generation._llm_weights_sleeping is True
    engine.refresh()  # the next call: the weights were discarded by the level-2 sleep
    assert synced == [1, 1]


def test_colocate_without_sleep_mode_leaves_the_engine_awake(fake_vllm):
    trainer, synced = colocate_trainer(sleep_mode=False)
    engine = VLLMEngine(trainer, EOS)
    engine.refresh()
    engine.release()
    assert trainer.vllm_generation.llm.calls == [] and synced == []
