"""Hier samples from gold runs: tier 1's conversation is the one the ``hier`` policy sends at inference, byte for byte;
the actors are the policy's own; the samples filter, count and export like the flat ones."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from harness.llm import ChatReply
from harness.manager.actions import make_action
from harness.manager.hier import HIER_SYSTEM, HierPolicy
from harness.manager.hier_checks import render_checks_reply
from harness.manager.hier_prompts import CHECKS_SYSTEM, tier1_tool_schemas
from harness.manager.wire import render_action
from synthesis.config import SynthesisConfig
from synthesis.gold import GoldPolicy
from synthesis.runs import play
from synthesis.samples import (
    build_samples,
    exact_token_count,
    filter_samples,
    hier_part,
    split_activations,
    token_counter,
)

REGION_SPEC = {
    "kind": "group_aggregate", "variable": "by_region", "source": "clean", "by": "region", "column": "revenue",
    "agg": "sum", "decimals": 2,
}  # fmt: skip
"""The spec of the check turn 2 states (the ``region_checks`` fixture)."""
META = {"task_id": "builtin-retail-sales", "domain": "retail", "fault_type": "x", "fault_id": "f", "source": "t"}


class Replay:
    """A tier-1 backend that answers with given replies in order and records the conversations it is asked with."""

    def __init__(self, replies):
        self.replies, self.asked = list(replies), []

    def chat(self, messages, tools=None):
        self.asked.append((messages, tools))
        return ChatReply(self.replies.pop(0))


@pytest.fixture(scope="module")
def fault(candidates):
    """A fault that only the revealing check catches (turn 1's constraint, a bare assert, would catch one there)."""
    return next(f for f in candidates if f.turn_id == "2" and f.fault_type == "wrong_column")


@pytest.fixture(scope="module")
def gold_runs(sandbox, task, fault, region_checks):
    checks = region_checks  # the check turn 2 states: fails on the faulted state only
    clean = play(task, sandbox, GoldPolicy(checks=checks), None, "clean")
    faulted = play(task, sandbox, GoldPolicy(checks=checks), fault, "gold")
    return {None: clean, fault: faulted}


def _hier(run, fault_turn):
    drops = Counter()
    samples = build_samples(
        run.log, META, fault_turn=fault_turn, benign=False, kinds=["atomic"], formats=["hier"], drops=drops
    )
    return samples, drops


def test_hier_samples_equal_what_the_hier_policy_sends(sandbox, task, fault, gold_runs):
    """Play the hier policy whose tier 1 answers with the gold's tier-1 responses in order: every conversation it is
    asked with is a prefix of a hier sample (the decision's is the sample without its last message)."""
    labels = set()
    for injected, run in gold_runs.items():
        samples, drops = _hier(run, None if injected is None else injected.turn_id)
        assert samples and not drops
        labels |= {s["label"] for s in samples}
        expected = []
        for sample in samples:
            assert sample["format"] == "hier" and sample["kind"] == "atomic"
            assert sample["tools"] == tier1_tool_schemas() and sample["messages"][0]["content"] == HIER_SYSTEM
            messages = sample["messages"]
            expected += [messages[:k] for k, m in enumerate(messages) if m["role"] == "assistant"]
        replies = [m["content"] for s in samples for m in s["messages"] if m["role"] == "assistant"]
        backend = Replay(replies)
        policy = HierPolicy(backend)
        play(task, sandbox, policy, injected, "hier")
        assert not backend.replies and not policy.rejected
        assert [messages for messages, _ in backend.asked] == expected
        assert all(tools == tier1_tool_schemas() for _, tools in backend.asked)
    assert labels == {"clean", "repair", "post_repair"}


def test_the_policy_attributes_the_actors(sandbox, task, candidates, gold_runs, fault):
    """Tier 0: open, update, commit and the check activation's check_execution of the latest step (also after a
    repair); tier 1: the rest of the check activation, its probes and the decision; a failed execution is tier 0's
    to repair."""
    activations = split_activations(gold_runs[fault].log, fault.turn_id, benign=False)
    for activation in activations:
        part = hier_part(activation)
        if activation.start_phase != "updated":
            assert part is None, (activation.turn_id, activation.start_phase, activation.label)
            continue
        start, conversations = part
        assert start == 1 and len(conversations) == len(activation.entries) - 1
    assert {a.label for a in activations if a.start_phase == "updated"} == {"clean", "repair", "post_repair"}
    repair = next(a for a in activations if a.label == "repair")
    names = [e.response for e in repair.entries]
    assert '"check_execution"' in names[0] and '"run_check"' in names[1] and '"REPAIR"' in names[-1]
    # the decision's conversation holds tier 1's check and its result, not tier 0's check_execution
    builder = HierPolicy(None)
    messages = builder.tier1_messages(repair.entries[-1].inp)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "run_check" in messages[2]["content"] and messages[3]["content"].startswith("<tool_response>")
    assert builder.tier1_messages(repair.entries[0].inp) is None  # tier 0's check_execution
    # a cell that raised: the gold's REPAIR is tier 0's, no hier sample
    crash = next(f for f in candidates if f.turn_id == "2" and f.fault_type == "execution_error")
    run = play(task, sandbox, GoldPolicy(), crash, "gold")
    failed = next(a for a in split_activations(run.log, crash.turn_id, benign=False) if a.label == "repair")
    assert hier_part(failed) is None


def test_a_gold_response_tier1_would_reject_is_counted_not_sampled(gold_runs, fault):
    activations = split_activations(gold_runs[fault].log, fault.turn_id, benign=False)
    repair = next(a for a in activations if a.label == "repair")
    hunch = render_action(
        make_action(
            "REPAIR",
            {
                "analytical_evidence": "the total looks too small to me",
                "error_hint": {"error_variable": "result", "faulty_reasoning": "the total seems off"},
            },
        )
    )
    unsupported = replace(repair, entries=(*repair.entries[:-1], replace(repair.entries[-1], response=hunch)))
    assert hier_part(unsupported) == "hier: tier 1 would not take the gold response (REPAIR without evidence)"
    log = [e for a in activations for e in (unsupported if a is repair else a).entries]
    drops = Counter()
    samples = build_samples(
        log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic"], formats=["hier"], drops=drops
    )
    assert drops == {"hier: tier 1 would not take the gold response (REPAIR without evidence)": 1}
    assert "repair" not in {s["label"] for s in samples}


def test_hier_samples_filter_and_count_with_their_own_tools(gold_runs, fault, qwen3_tokenizer, qwen3_tiktoken):
    run = gold_runs[fault]
    both = build_samples(run.log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic", "full"],
                         formats=["flat", "hier"])  # fmt: skip
    flat_only = build_samples(run.log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic", "full"])
    hier = [s for s in both if s["format"] == "hier"]
    assert [s for s in both if s["format"] == "flat"] and len(both) == len(flat_only) + len(hier)
    assert {s["format"] for s in flat_only} == {"flat"}
    count = token_counter(qwen3_tokenizer, qwen3_tiktoken)
    kept, dropped = filter_samples(both, count, max_tokens=40960)
    assert not dropped and len(kept) == len(both)
    for sample in kept:
        assert sample["n_tokens"] == exact_token_count(qwen3_tokenizer, sample), sample["format"]
    flat_tokens = max(s["n_tokens"] for s in kept if s["format"] == "flat" and s["kind"] == "atomic")
    assert max(s["n_tokens"] for s in kept if s["format"] == "hier") < flat_tokens
    # an illegal hier sample (its activation replayed twice: two control actions) is dropped like a flat one
    rebuilt = build_samples(run.log, META, fault_turn=fault.turn_id, benign=False, kinds=[], formats=["hier"])
    first = next(s for s in rebuilt if s["label"] == "repair")
    activation = first["_activations"][0]
    broken = dict(first, _activations=[replace(activation, entries=activation.entries * 2)])
    assert filter_samples([broken], None, 40960)[1] == {"illegal sequence": 1}


def test_hier_checks_samples_are_what_the_check_writer_is_sent_and_replay_the_gold_decisions(sandbox, task, gold_runs):
    """Tier 1 of ``hier`` writing checks, answered with the hier_checks samples' replies in order: it is asked with
    exactly the samples' conversations, and tier 0 running those checks repairs what the gold repaired."""
    for injected, run in gold_runs.items():
        fault_turn = None if injected is None else injected.turn_id
        samples = build_samples(run.log, META, fault_turn=fault_turn, benign=False, kinds=[], formats=["hier_checks"])
        assert len(samples) == len(task.turns) and {s["format"] for s in samples} == {"hier_checks"}
        assert all(s["tools"] == [] and s["messages"][0]["content"] == CHECKS_SYSTEM for s in samples)
        replies = [s["messages"][-1]["content"] for s in samples]
        assert replies[1] == render_checks_reply([REGION_SPEC]) and replies[0] == '{"checks": []}'
        backend = Replay(replies)
        policy = HierPolicy(backend, writes="checks")
        record = play(task, sandbox, policy, injected, "hier").record
        assert not backend.replies and not policy.rejected
        assert [messages for messages, _ in backend.asked] == [s["messages"][:-1] for s in samples]
        gold = run.record
        assert [(r["turn_id"], r["variable"]) for r in record.repairs] == [
            (r["turn_id"], r["variable"]) for r in gold.repairs
        ]
        assert record.final_answers == gold.final_answers
    assert {s["label"] for s in samples} == {"clean", "repair"}


def test_the_formats_field_is_validated_and_changes_the_fingerprint():
    from synthesis.driver import config_fingerprint

    assert SynthesisConfig().formats == ["flat", "hier", "hier_checks"]
    with pytest.raises(
        ValueError, match=r"^formats=\['tree'\]: use a non-empty subset of \['flat', 'hier', 'hier_checks'\]\.$"
    ):
        SynthesisConfig(formats=["tree"])
    with pytest.raises(ValueError, match="formats=\\[\\]"):
        SynthesisConfig(formats=[])
    assert config_fingerprint(SynthesisConfig(formats=["flat"])) != config_fingerprint(SynthesisConfig())


def test_the_synthesis_exports_both_formats(synthesized):
    from datasets import load_from_disk

    stats = json.loads((synthesized / "stats.json").read_text())
    rows = [r for split in load_from_disk(str(synthesized / "dataset")).values() for r in split]
    by_format = Counter(r["format"] for r in rows)
    assert stats["samples"]["by_format"] == dict(sorted(by_format.items()))
    assert set(by_format) == {"flat", "hier", "hier_checks"}
    writer = [r for r in rows if r["format"] == "hier_checks"]
    assert all(r["tools"] == [] and r["messages"][0]["content"] == CHECKS_SYSTEM for r in writer)
    assert all(isinstance(json.loads(r["messages"][-1]["content"])["checks"], list) for r in writer)
    assert any(json.loads(r["messages"][-1]["content"])["checks"] for r in writer)  # the gold's specs as targets
    hier = [r for r in rows if r["format"] == "hier"]
    assert all(r["tools"] == tier1_tool_schemas() and r["kind"] == "atomic" for r in hier)
    assert all(r["messages"][0]["content"] == HIER_SYSTEM for r in hier)
    assert {r["control"] for r in hier} <= {"FINALIZE_RELATIONS", "REPAIR"}
    assert "Samples by format" in (synthesized / "README.md").read_text()
