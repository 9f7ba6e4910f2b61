"""The sampling temperature chosen on the training pool (training/rl/temperature.py): the probe counts legal first
responses at each temperature in the real env, the rule picks the highest that stays legal, a resumed run reuses it."""

from __future__ import annotations

import json

import pytest

from training.rl.rollout import HARNESS_CONFIRM
from training.rl.temperature import PROBE_FILE, check_grid, choose_temperature, legal_response, probe_temperatures
from training.rl.trainer import ManagerRollouts, RLArguments

ISOLATION = "none"


def _rollouts(pool_dir, tokenizer, out, **fields) -> ManagerRollouts:
    from trl import GRPOConfig

    from rewards import RewardConfig

    rl_args = RLArguments(pool=str(pool_dir), isolation=ISOLATION, prompt_view="bare", max_new_tokens=6, **fields)
    config = GRPOConfig(
        output_dir=str(out), num_generations=2, per_device_train_batch_size=2, max_completion_length=12, beta=0.0,
        report_to=[], use_cpu=True,
    )  # fmt: skip
    return ManagerRollouts(rl_args, config, tokenizer, RewardConfig(), seed=0)


class ColdIsLegal:
    """Answers a confirmation (at or below T=0.5) or prose (above), whatever the request."""

    def __init__(self, player):
        self.player, self.calls = player, []

    def sample_many(self, context_ids, n, max_new_tokens, temperature=None):
        self.calls.append((len(context_ids), n, temperature))
        text = HARNESS_CONFIRM if temperature <= 0.5 else "I think the analysis looks fine."
        ids = self.player.tokens.encode(text) + [self.player.tokens.eos_id]
        return [(ids, [0.0] * len(ids))] * n


def test_the_rule_takes_the_highest_temperature_that_stays_legal() -> None:
    table = [{"temperature": 0.4, "legal_rate": 1.0}, {"temperature": 0.7, "legal_rate": 0.85},
             {"temperature": 1.0, "legal_rate": 0.3}]  # fmt: skip
    assert choose_temperature(table, 0.8) == 0.7 and choose_temperature(table, 0.2) == 1.0
    assert choose_temperature(table, 1.0) == 0.4
    none = [{"temperature": 0.4, "legal_rate": 0.1}, {"temperature": 1.0, "legal_rate": 0.1}]
    assert choose_temperature(none, 0.8) == 1.0  # none passes: the highest rate, ties to the higher temperature
    assert check_grid([1.0, 0.3], 0.8) == [0.3, 1.0]
    with pytest.raises(ValueError, match=r"temperature_grid=\[0.0\]"):
        check_grid([0.0], 0.8)
    with pytest.raises(ValueError, match="temperature_min_legal=1.5"):
        RLArguments(pool="p", temperature_grid=[0.5], temperature_min_legal=1.5)
    with pytest.raises(ValueError, match="temperature_points=0"):
        RLArguments(pool="p", temperature_grid=[0.5], temperature_points=0)
    assert legal_response(HARNESS_CONFIRM, ["FINALIZE_RELATIONS"]) == "FINALIZE_RELATIONS"
    assert legal_response(HARNESS_CONFIRM, ["REPAIR"]) is None and legal_response("prose", ["X"]) is None
    assert legal_response(HARNESS_CONFIRM[:-5], ["FINALIZE_RELATIONS"]) is None  # cut: no action


def test_the_probe_counts_legal_first_responses_in_the_env_and_a_resumed_run_reuses_its_choice(
    sft_smoke_dir, qwen3_tokenizer, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    rollouts = _rollouts(sft_smoke_dir, qwen3_tokenizer, tmp_path / "rl", temperature_grid=[1.0, 0.5],
                         temperature_points=2, temperature_samples=3, takeover="decision", event_types=["turn_end"],
                         gold_controls=["FINALIZE_RELATIONS"])  # fmt: skip
    try:
        player = rollouts.player
        engine = ColdIsLegal(player)
        table = probe_temperatures(
            player, engine, rollouts.sampler.points.points, rollouts.args.temperature_grid, points=2, samples=3,
            max_new_tokens=6,
        )  # fmt: skip
        assert [(r["temperature"], r["legal"], r["samples"], r["points"]) for r in table] == [
            (0.5, 6, 6, 2),
            (1.0, 0, 6, 2),
        ]
        assert [c[1:] for c in engine.calls] == [(3, 0.5), (3, 1.0)] * 2  # each point: one batch per temperature
        assert all(length > 0 for length, _, _ in engine.calls)
        assert choose_temperature(table, 0.8) == 0.5
        # the real tiny model (random init): its choice by the same rule, recorded
        chosen = rollouts.choose_temperature(str(tiny_model_dir))
        record = json.loads((tmp_path / "rl" / PROBE_FILE).read_text())
        assert record["chosen"] == chosen and [r["temperature"] for r in record["table"]] == [0.5, 1.0]
        assert chosen == choose_temperature(record["table"], 0.8) and record["split"] == "training pool"

        def boom(*args, **kwargs):
            raise AssertionError("a resumed run must not probe again")

        monkeypatch.setattr("training.rl.temperature.probe_temperatures", boom)
        assert rollouts.choose_temperature(str(tiny_model_dir)) == chosen
    finally:
        rollouts.close()


def test_constrained_decoding_hands_the_action_grammar_to_the_probe_and_the_rollouts(
    sft_smoke_dir, qwen3_tokenizer, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    pytest.importorskip("llguidance")
    from transformers import AutoModelForCausalLM

    from harness.manager.actions import make_action
    from harness.manager.wire import render_action

    grammars = []

    def probe(player, engine, *args, **kwargs):
        grammars.append(engine.grammar)
        return [{"temperature": 0.5, "legal": 1, "samples": 1, "points": 1, "legal_rate": 1.0}]

    monkeypatch.setattr("training.rl.temperature.probe_temperatures", probe)
    constrained = _rollouts(sft_smoke_dir, qwen3_tokenizer, tmp_path / "c", temperature_grid=[0.5],
                            constrained_decoding=True)  # fmt: skip
    free = _rollouts(sft_smoke_dir, qwen3_tokenizer, tmp_path / "f", temperature_grid=[0.5])
    try:
        assert constrained.choose_temperature(str(tiny_model_dir)) == 0.5
        free.choose_temperature(str(tiny_model_dir))
        assert grammars[0] is not None and grammars[1] is None
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
        constrained.use_model(model)
        free.use_model(model)
        assert free.engine.grammar is None
        commit = qwen3_tokenizer.encode(render_action(make_action("COMMIT_STATE")), add_special_tokens=False)
        assert constrained.engine.grammar.accepts(commit) and not constrained.engine.grammar.accepts(commit[:-1])
        assert constrained.engine.grammar.n_vocab == model.get_output_embeddings().weight.shape[0]
    finally:
        constrained.close()
        free.close()
