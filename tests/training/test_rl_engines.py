"""training.rl.engines: cached CPU sampling is the model's distribution (one session, and a group's batched first
call), the weight-sync self-check (two transformers models standing in for trainer and engine), and the vLLM
configuration built without vLLM installed."""

from __future__ import annotations

import logging
import sys

import pytest

torch = pytest.importorskip("torch")

from training.rl.engines import TransformersEngine, sequence_logprobs  # noqa: E402
from training.rl.rollout import SampleRequest  # noqa: E402
from training.rl.vllm_engine import check_weight_sync, vllm_serve_command, vllm_settings  # noqa: E402


@pytest.fixture(scope="module")
def small_model():
    from training.models import TinyQwen3Config, init_tiny_qwen3

    return init_tiny_qwen3(TinyQwen3Config(num_hidden_layers=2, intermediate_size=256), seed=0)


def test_cached_sampling_logprobs_equal_a_full_forward(small_model):
    prefix = list(range(100, 140))
    engine = TransformersEngine(small_model, eos_id=151645, prefix_ids=prefix, temperature=0.7)
    torch.manual_seed(0)
    session = engine.session()
    first_context = prefix + [5, 6, 7]
    first, first_lp = session.sample(first_context, 6)
    second_context = first_context + first + [11, 12]  # the env's tokens after the response
    second, second_lp = session.sample(second_context, 5)
    assert len(first) == 6 and len(second) == 5  # a random model does not stop on <|im_end|>
    assert first_lp == pytest.approx(sequence_logprobs(small_model, first_context, first, 0.7), abs=1e-4)
    assert second_lp == pytest.approx(sequence_logprobs(small_model, second_context, second, 0.7), abs=1e-4)
    with pytest.raises(ValueError, match="must extend the ids already fed"):
        session.sample([1, 2, 3], 2)


def test_sampling_is_seeded_and_the_prefix_cache_is_rebuilt_after_refresh(small_model):
    engine = TransformersEngine(small_model, eos_id=151645, prefix_ids=[1, 2, 3])
    torch.manual_seed(1)
    a = engine.session().sample([1, 2, 3, 4], 8)
    torch.manual_seed(1)
    b = engine.session().sample([1, 2, 3, 4], 8)
    assert a == b
    cache = engine.prefix_cache()
    assert engine.prefix_cache() is cache
    engine.refresh()
    assert engine.prefix_cache() is not cache
    with pytest.raises(ValueError, match="temperature=0"):
        TransformersEngine(small_model, eos_id=1, temperature=0)


def test_sample_many_rows_are_the_model_distribution_and_stop_at_eos(small_model):
    prefix = list(range(100, 140))
    context = prefix + [5, 6, 7]
    engine = TransformersEngine(small_model, eos_id=151645, prefix_ids=prefix, temperature=0.7)
    torch.manual_seed(2)
    rows = engine.sample_many(context, 4, 6)
    assert [len(ids) for ids, _ in rows] == [6] * 4 and len({tuple(ids) for ids, _ in rows}) == 4
    eos = rows[0][0][2]  # row 0's third id now ends a response: that row stops there, the others leave the batch
    engine.eos_id = eos
    torch.manual_seed(2)
    ended = engine.sample_many(context, 4, 6)
    assert ended[0][0] == rows[0][0][:3]
    for ids, logprobs in ended:
        assert eos not in ids[:-1] and (ids[-1] == eos or len(ids) == 6)
        assert logprobs == pytest.approx(sequence_logprobs(small_model, context, ids, 0.7), abs=1e-4)
    training = small_model.training
    small_model.train()
    engine.sample_many([1, 2, 3], 2, 3, temperature=1.3)
    assert small_model.training  # eval mode while sampling, the mode restored after
    small_model.train(training)
    with pytest.raises(ValueError, match="n=0: sample_many needs at least one row"):
        engine.sample_many(context, 0, 6)
    with pytest.raises(ValueError, match="max_new_tokens=0"):
        engine.sample_many(context, 2, 0)


def test_sample_many_at_a_tiny_temperature_is_the_greedy_session(small_model):
    engine = TransformersEngine(small_model, eos_id=151645, prefix_ids=[1, 2, 3], temperature=1e-4)
    context = [1, 2, 3, 40, 41, 42, 43]
    greedy, _ = engine.session().sample(context, 8)
    assert [ids for ids, _ in engine.sample_many(context, 3, 8)] == [greedy] * 3


def test_grammar_sampling_gives_whole_actions_with_the_masked_logprobs(small_model, qwen3_tokenizer):
    pytest.importorskip("llguidance")
    from harness.grammar import TokenGrammar, added_tokens
    from harness.manager.wire import call_grammar, parse_response

    eos = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    names = ("COMMIT_STATE", "ABSTAIN", "RESUME_WORKER")
    n_vocab = int(small_model.get_output_embeddings().weight.shape[0])
    text = call_grammar(added_tokens(qwen3_tokenizer), names)
    grammar = TokenGrammar(qwen3_tokenizer, text, n_vocab=n_vocab, stop_ids=[eos])
    engine = TransformersEngine(small_model, eos_id=eos, prefix_ids=[1, 2, 3], temperature=1.0, grammar=grammar)
    context = [1, 2, 3, 4, 5]
    torch.manual_seed(0)
    rows = engine.sample_many(context, 3, 40)
    single = engine.session().sample(context, 40)
    requests = [SampleRequest(context, 40), SampleRequest([1, 2, 3, 9], 40)]  # a padded batch of two
    padded = [(r.context_ids, *got[0]) for r, got in zip(requests, engine.generate_many(requests), strict=True)]
    for asked, ids, logprobs in [*[(context, *row) for row in rows], (context, *single), *padded]:
        assert ids[-1] == eos and len(ids) < 40  # it stops: at the end only <|im_end|> is allowed
        parsed = parse_response(qwen3_tokenizer.decode(ids[:-1], skip_special_tokens=False))
        assert parsed.ok and parsed.action.name in names, parsed.error
        # the masked distribution's log-probabilities: a forced token (the one allowed) has log-probability 0
        assert max(logprobs) == pytest.approx(0.0, abs=1e-5) and all(lp <= 1e-5 for lp in logprobs)
        # ... and never below the free model's (masking only renormalizes onto the allowed tokens)
        free = sequence_logprobs(small_model, asked, ids, 1.0)
        assert all(m >= f - 1e-4 for m, f in zip(logprobs, free, strict=True)) and sum(logprobs) > sum(free) + 1
    free_ids, _ = TransformersEngine(small_model, eos_id=eos).session().sample(context, 40)
    assert not parse_response(qwen3_tokenizer.decode(free_ids, skip_special_tokens=False)).ok


def test_weight_sync_check_passes_on_equal_weights_and_warns_on_stale_ones(small_model, caplog):
    import copy

    engine_model = copy.deepcopy(small_model)
    trainer = TransformersEngine(small_model, eos_id=151645)
    engine = TransformersEngine(engine_model, eos_id=151645)
    prompt, completion = [10, 11, 12, 13], [20, 21, 22]
    with caplog.at_level(logging.WARNING, logger="training.rl.vllm_engine"):
        gap = check_weight_sync(trainer.score, engine.score, prompt, completion, threshold=1e-3)
    assert gap < 1e-5 and not caplog.records
    with torch.no_grad():  # the trainer took an optimizer step the engine never received
        for p in small_model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    with caplog.at_level(logging.WARNING, logger="training.rl.vllm_engine"):
        stale = check_weight_sync(trainer.score, engine.score, prompt, completion, threshold=1e-3)
    assert stale > 1e-3
    assert any("WEIGHT SYNC CHECK FAILED" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="score the same non-empty completion"):
        check_weight_sync(trainer.score, lambda p, c: [0.0], prompt, completion, threshold=1.0)


def _grpo(**overrides):
    from trl import GRPOConfig

    return GRPOConfig(output_dir="/tmp/unused-vllm-config", use_cpu=True, report_to="none", **overrides)


def test_vllm_settings_are_built_without_vllm():
    imported = "vllm" in sys.modules  # the settings never import vLLM (installed or not)
    assert vllm_settings(_grpo()) == {"use_vllm": False}
    server = vllm_settings(_grpo(use_vllm=True, vllm_mode="server", vllm_server_port=8123))
    assert server["vllm_mode"] == "server" and server["base_url"] == "http://0.0.0.0:8123"
    url = vllm_settings(_grpo(use_vllm=True, vllm_mode="server", vllm_server_base_url="http://gpu7:9000"))
    assert url["base_url"] == "http://gpu7:9000"
    colocate = vllm_settings(_grpo(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.4))
    assert colocate == {"use_vllm": True, "vllm_mode": "colocate", "gpu_memory_utilization": 0.4,
                        "tensor_parallel_size": 1}  # fmt: skip
    bad = _grpo(use_vllm=True)
    bad.vllm_mode = "remote"
    with pytest.raises(ValueError, match="vllm_mode='remote' is not one of server, colocate"):
        vllm_settings(bad)
    with pytest.raises(ValueError, match="vllm_tensor_parallel_size=2 with vllm_mode: colocate"):
        vllm_settings(_grpo(use_vllm=True, vllm_mode="colocate", vllm_tensor_parallel_size=2))
    assert ("vllm" in sys.modules) is imported


def test_vllm_serve_command_is_what_trl_vllm_serve_runs():
    """``vllm serve`` in dev mode with the flags TRL 1.16's deprecated ``trl vllm-serve`` adds (its build_command)."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    config = _grpo(use_vllm=True, vllm_mode="server", vllm_server_port=8001)
    command = vllm_serve_command("runs/sft", config, gpus="7")
    assert command == [
        "CUDA_VISIBLE_DEVICES=7", "VLLM_SERVER_DEV_MODE=1", "vllm", "serve", "runs/sft", "--port", "8001",
        "--tensor-parallel-size", "1", "--weight-transfer-config", '{"backend": "nccl"}',
        "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1",
    ]  # fmt: skip
    trl = build_command(ScriptArguments(model="runs/sft", port=8001))
    assert trl[trl.index("serve") + 1] == "runs/sft" and trl[-6:] == command[-6:]
    with pytest.raises(ValueError, match="vllm_mode: server"):
        vllm_serve_command("runs/sft", _grpo(use_vllm=True, vllm_mode="colocate"))


def test_vllm_engine_names_the_extra_when_vllm_is_missing():
    from training.rl.vllm_engine import VLLMEngine

    with pytest.raises(ImportError, match=r"pip install -c constraints.txt -e '\.\[vllm\]'"):
        VLLMEngine(trainer=None, eos_id=1)
