"""SFT samples from gold runs: labels, legality filter, dedupe, the context budget and the fast token counter."""

from dataclasses import replace

import pytest

from synthesis.gold import GoldPolicy
from synthesis.runs import play
from synthesis.samples import (
    build_samples,
    content_hash,
    exact_token_count,
    filter_samples,
    legal_sequence,
    split_activations,
    token_counter,
)

META = {"task_id": "builtin-retail-sales", "domain": "retail", "fault_type": "x", "fault_id": "f", "source": "t"}


@pytest.fixture(scope="module")
def runs(sandbox, task, candidates):
    fault = next(f for f in candidates if f.turn_id == "1" and not f.benign)  # turn 1's stated constraint reveals it
    clean = play(task, sandbox, GoldPolicy(), None, "clean")
    gold = play(task, sandbox, GoldPolicy(), fault, "gold")
    return clean, gold, fault


def test_activations_are_labelled_and_legal(runs):
    clean, gold, fault = runs
    clean_acts = split_activations(clean.log, None, benign=False)
    assert {a.label for a in clean_acts} == {"clean"}
    gold_acts = split_activations(gold.log, fault.turn_id, benign=False)
    labels = [(a.turn_id, a.label) for a in gold_acts if a.label != "clean"]
    assert labels[0] == (fault.turn_id, "repair")
    assert all(turn == fault.turn_id for turn, _ in labels) and ("1", "post_repair") in labels
    assert legal_sequence(clean_acts) is None and legal_sequence(gold_acts) is None


def test_atomic_and_full_samples_end_in_the_gold_control_action(runs):
    _, gold, fault = runs
    samples = build_samples(gold.log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic", "full"])
    atomic = [s for s in samples if s["kind"] == "atomic"]
    full = [s for s in samples if s["kind"] == "full"]
    assert len(full) == 1 and full[0]["label"] == "repair"
    assert len(atomic) == len(split_activations(gold.log, fault.turn_id, benign=False))
    repair = next(s for s in atomic if s["label"] == "repair")
    assert repair["messages"][-1]["role"] == "assistant" and '"name": "REPAIR"' in repair["messages"][-1]["content"]
    # a full sample has one system message and every atomic exchange in order
    system = [m for m in full[0]["messages"] if m["role"] == "system"]
    assert len(system) == 1
    assistant_full = [m["content"] for m in full[0]["messages"] if m["role"] == "assistant"]
    assistant_atomic = [m["content"] for s in atomic for m in s["messages"] if m["role"] == "assistant"]
    assert assistant_full == assistant_atomic


def test_filter_drops_illegal_duplicate_and_overlong_samples(runs):
    clean, _, _ = runs
    samples = build_samples(clean.log, META, fault_turn=None, benign=False, kinds=["atomic"])
    first = samples[0]
    activation = first["_activations"][0]
    broken = dict(first, _activations=[replace(activation, entries=activation.entries * 2)])  # two control actions
    twin = {**samples[1], "messages": [dict(m, content=m["content"].upper()) for m in samples[1]["messages"]]}
    long_one = samples[2]
    lengths = {content_hash(s): 10 for s in samples}
    lengths[content_hash(long_one)] = 10_000

    def count(sample):
        return lengths.get(content_hash(sample), 10)

    kept, dropped = filter_samples([broken, *samples[1:], twin], count, max_tokens=5_000)
    assert dropped == {"illegal sequence": 1, "duplicate": 1, "over context budget": 1}
    assert len(kept) == len(samples) - 2 and all("_activations" not in s for s in kept)
    assert all(s["n_tokens"] == 10 and s["content_hash"] == content_hash(s) for s in kept)


def test_the_chunked_token_counter_equals_encoding_the_whole_rendering(runs):
    from harness.tokenizer import build_qwen3_tokenizer, qwen3_tiktoken_encoding

    clean, gold, fault = runs
    tokenizer = build_qwen3_tokenizer()
    count, count_tiktoken = token_counter(tokenizer), token_counter(tokenizer, qwen3_tiktoken_encoding())
    samples = build_samples(gold.log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic", "full"])
    samples += build_samples(clean.log, META, fault_turn=None, benign=False, kinds=["full"])
    unnormalized = "Cafe\u0301 \u00e9t\u00e9 \U0001f600 \u5206\u6790"  # a combining accent: NFC changes it
    samples.append({"messages": [{"role": "user", "content": unnormalized}], "tools": []})
    for sample in samples:
        assert count(sample) == count_tiktoken(sample) == exact_token_count(tokenizer, sample) > 10


class CountingTokenizer:
    """The tokenizer, counting its chat-template renderings."""

    def __init__(self, tokenizer):
        self.tokenizer, self.renders = tokenizer, 0
        self.chat_template = tokenizer.chat_template

    def apply_chat_template(self, *args, **kwargs):
        self.renders += 1
        return self.tokenizer.apply_chat_template(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.tokenizer(*args, **kwargs)


def test_the_token_counter_sums_remembered_messages_exactly_and_renders_the_rest(runs):
    """After a full sample, its atomic samples are counted from the remembered messages without a rendering, with
    the same counts as the whole rendering; samples the rule does not cover are rendered every time."""
    from harness.tokenizer import build_qwen3_tokenizer, qwen3_tiktoken_encoding

    clean, gold, fault = runs
    tokenizer = build_qwen3_tokenizer()
    samples = build_samples(gold.log, META, fault_turn=fault.turn_id, benign=False, kinds=["atomic", "full"])
    full = [s for s in samples if s["kind"] == "full"]
    atomic = [s for s in samples if s["kind"] == "atomic"]
    assert len(full) == 1 and len(atomic) >= 2
    counting = CountingTokenizer(tokenizer)
    count = token_counter(counting, qwen3_tiktoken_encoding())
    assert count(full[0]) == exact_token_count(tokenizer, full[0])
    assert counting.renders == 1
    for sample in atomic:
        assert count(sample) == exact_token_count(tokenizer, sample)
    assert counting.renders == 1  # every atomic sample's messages were in the full sample
    system, user = full[0]["messages"][:2]
    uncovered = [
        {**atomic[0], "messages": [system, {"role": "tool", "content": "out"}, user]},
        {**atomic[0], "messages": [system, {"role": "user", "content": "a <|im_start|>user\nb"}]},
        {**atomic[0], "messages": [system, {**user, "name": "x"}]},
        {**atomic[0], "messages": [system, user], "tools": [dict(t) for t in atomic[0]["tools"]]},  # same text
    ]
    for sample in uncovered:
        before = counting.renders
        assert count(sample) == exact_token_count(tokenizer, sample)
        assert count(sample) == exact_token_count(tokenizer, sample)
        assert counting.renders == before + (1 if sample is uncovered[-1] else 2)
    counting.chat_template = "{{ messages }}"  # another template: nothing is assumed about it, every sample renders
    other = token_counter(counting, qwen3_tiktoken_encoding())
    before = counting.renders
    other(full[0]), other(atomic[0])
    assert counting.renders == before + 2
