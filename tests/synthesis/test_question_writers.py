"""The two question writers: writer a words every task exactly as before; writer b states the same requirements (same
tables, code, slots, relations and constraint checks) in other words, which the relation reader still understands;
``question_writer`` reaches the generators from the synthesis config."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.manager.relations import infer_relations
from synthesis.config import SynthesisConfig
from synthesis.domains import DOMAINS, generate_chain_over_table, generate_task, wording
from synthesis.domains.catalog import DOMAIN_DEFS
from synthesis.domains.synthetic import derive_formula
from synthesis.domains.wording import PHRASES_A, PHRASES_B, number_words, phrase_fields

ROOT = Path(__file__).resolve().parents[2]

WRITER_A_DIGEST = "e381d5fc3d804498f76d31bf58e392c7e0625a92c9736fe48cc07a265ce8a597"
"""sha256 of writer a's words (description, questions, contexts, constraint texts) of every domain's task with seed 3
and 13 turns, as written before the writers existed: the training data's wording must not move by one byte."""

SAME_WORDS_ALLOWED = {"agg.median", "filter.subset"}
"""Phrases b words as a does: 'median' has no plainer name; the subset label differs through its condition."""

A_ONLY = [
    r"\btop \d",
    r"\bin descending order\b",
    r"\bfrom the largest down\b",
    r"\b\d+ decimals\b",
    r"\bround (?:every value |the limit |the gap |money |totals )?to\b",
    r"\bat least\b",
    r"\babove \d",
    r"\bin thousands\b",
    r"\bper month\b",
    r"\bper (?:region|zone|subject|position|channel|admission type|service level|column)\b",
    r"\busing the results? of turns?\b",
    r"\bgo back to the result\b",
    r"\bwith this revision\b",
    r"\brevised assumption\b",
    r"^correction:",
    r"\bexclude every row\b",
    r"\bis a data-entry error\b",
    r"\bwith \w+ = [\d.]+\.",
    r"\bhow many \w+ are there\b",
]
"""Requirement wordings of writer a that b must not reuse (checked on every turn where a uses them)."""


def _table(path: Path, category: bool) -> Path:
    """A small table; with ``category`` an integer column of four values that the chain groups by (else it groups
    by quartile bands)."""
    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "visit date": pd.date_range("2024-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
            "spend": np.round(rng.gamma(2.0, 40.0, n), 2),
            "items": rng.integers(1, 30, n),
        }
    )
    if category:
        frame["floor"] = rng.choice([1, 2, 3, 4], n, p=[0.4, 0.3, 0.2, 0.1])
    frame.loc[rng.random(n) < 0.05, "spend"] = np.nan
    frame.to_csv(path, index=False)
    return path


def _words(spec) -> list:
    return [spec.description] + [[t.question, t.context, [c[0] for c in t.constraints]] for t in spec.turns]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> list[tuple]:
    """(writer a's spec, writer b's spec) of a 30-turn task in every domain and of two 30-turn table chains, and the
    phrase keys the writers used for them."""
    folder = tmp_path_factory.mktemp("chain")
    tables = [_table(folder / "visits.csv", category=True), _table(folder / "plain.csv", category=False)]
    used: set[str] = set()
    say = wording.QuestionWriter.say

    def recording(self, key, /, **facts):
        used.add(key)
        return say(self, key, **facts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wording.QuestionWriter, "say", recording)
        out = [(generate_task(d, 1, 30), generate_task(d, 1, 30, question_writer="b")) for d in sorted(DOMAINS)]
        out += [
            (generate_chain_over_table(t, 0, 30), generate_chain_over_table(t, 0, 30, question_writer="b"))
            for t in tables
        ]
    return [(a, b, used) for a, b in out]


def test_writer_a_words_every_task_exactly_as_before():
    data = [_words(generate_task(d, 3, 13)) for d in sorted(DOMAINS)]
    assert hashlib.sha256(json.dumps(data).encode()).hexdigest() == WRITER_A_DIGEST
    assert generate_task("finance", 3, 13) == generate_task("finance", 3, 13, question_writer="a")


def test_the_writers_differ_in_words_only(pairs):
    used = pairs[0][2]
    assert used == set(PHRASES_A)  # every template kind, revision and lead-in was worded
    for a, b, _ in pairs:
        assert (a.task_id, a.domain, a.seed, a.title, a.description) == (
            b.task_id,
            b.domain,
            b.seed,
            b.title,
            b.description,
        )
        assert a.tables.keys() == b.tables.keys()
        for name in a.tables:
            pd.testing.assert_frame_equal(a.tables[name], b.tables[name])
        assert len(a.turns) == len(b.turns) == 30
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert [c[1:] for c in ta.constraints] == [c[1:] for c in tb.constraints]
            worded = {"question": ta.question, "context": ta.context, "constraints": ta.constraints}
            assert dataclasses.replace(tb, **worded) == ta, (a.task_id, ta.turn_id)
            assert ta.question != tb.question and ta.context != tb.context, (a.task_id, ta.turn_id)


def test_writer_b_rewords_every_requirement_phrase(pairs):
    seen = set()
    for a, b, _ in pairs:
        for ta, tb in zip(a.turns, b.turns, strict=True):
            texts_a = [ta.question, ta.context, *(c[0] for c in ta.constraints)]
            texts_b = [tb.question, tb.context, *(c[0] for c in tb.constraints)]
            for pattern in A_ONLY:
                if any(re.search(pattern, t, re.IGNORECASE | re.MULTILINE) for t in texts_a):
                    seen.add(pattern)
                    found = [t for t in texts_b if re.search(pattern, t, re.IGNORECASE | re.MULTILINE)]
                    assert not found, (pattern, a.task_id, ta.turn_id, found)
    assert seen == set(A_ONLY)  # each a wording occurs, so each check could fail
    changed = [key for key in PHRASES_A if PHRASES_A[key] != PHRASES_B[key]]
    assert set(PHRASES_A) - set(changed) == SAME_WORDS_ALLOWED


def _stated(turn) -> str:
    return f"{turn.question} {turn.context} {' '.join(c[0] for c in turn.constraints)}"


def test_writer_b_states_every_value_that_writer_a_states(pairs):
    """Each requirement value in a's words (left) is in b's words too (right), spelled out where small."""
    counts = dict.fromkeys(("filter", "sort", "round", "unit", "param", "exclude"), 0)
    for a, b, _ in pairs:
        for ta, tb in zip(a.turns, b.turns, strict=True):
            text_a, text_b, slots = _stated(ta), _stated(tb), tb.slots
            where = (b.task_id, tb.turn_id, text_b)
            if isinstance(slots.get("filter"), dict):
                value = slots["filter"]["value"]
                assert f"{value:g}" in text_a and f" {number_words(value)}" in text_b, where
                counts["filter"] += 1
            if isinstance(slots.get("sort"), dict) and slots["sort"]["k"] > 1:
                k = slots["sort"]["k"]
                assert f"Which {k} " in text_a and f"the {number_words(k)} largest" in text_b, where
                counts["sort"] += 1
            if f"{slots.get('round')} decimals" in text_a:
                p = slots["round"]
                assert f"{number_words(p)} decimal places" in text_b or f"rounded to {p} d.p." in text_b, where
                counts["round"] += 1
            if isinstance(slots.get("unit"), dict):
                factor = slots["unit"]["factor"]
                assert "in thousands" in text_a and f"in units of 1,000 (value / {factor})" in text_b, where
                counts["unit"] += 1
            if isinstance(slots.get("param"), dict):
                new = slots["param"]["new"]
                assert f"is {new!r}, not" in text_a and f"has been revised to {new!r}" in text_b, where
                counts["param"] += 1
            if isinstance(slots.get("exclude"), dict):
                value = str(slots["exclude"]["value"])
                assert value in text_a and value in text_b and "leave" in text_b.lower(), where
                counts["exclude"] += 1
    assert min(counts.values()) > 0, counts


def test_every_phrase_of_b_names_the_facts_of_its_a_phrase():
    assert PHRASES_A.keys() == PHRASES_B.keys()
    for key in PHRASES_A:
        if key != "derive.rule":  # a: the catalog's sentence; b: built from its formula and parameter (below)
            assert phrase_fields(PHRASES_B[key]) == phrase_fields(PHRASES_A[key]), key
    for d in DOMAIN_DEFS.values():
        (a_rule, b_rule) = (generate_task(d.name, 0, 6, question_writer=w).turns[0].constraints[0][0] for w in "ab")
        param, value = d.param[0], d.param[1]
        assert a_rule == d.derive_text and f"with {param} = {value!r}." in a_rule
        measure = d.measure_noun[:1].upper() + d.measure_noun[1:]
        assert b_rule == f"{measure} = {derive_formula(d)}, where {param} is {value!r}."
        assert "{" not in derive_formula(d) and all(f"'{w}'" not in b_rule for w in d.columns)


def test_numbers_and_lists_in_other_words():
    assert [number_words(n) for n in (2, 4, 10, 5.0, 1, 11, 0, 2.5, 50.0, 1.5)] == [
        "two", "four", "ten", "five", "1", "11", "0", "2.5", "50", "1.5",
    ]  # fmt: skip
    b = wording.get_writer("b")
    assert b.say("lead.combine", turns=[2, 4, 5], question="Q?") == "Combining what turns 2, 4 and 5 produced: Q?"
    assert wording.get_writer("a").say("lead.combine", turns=[2, 4, 5], question="Q?") == (
        "Using the results of turns 2, 4, 5: Q?"
    )
    with pytest.raises(KeyError, match="writer b has no phrase 'nope'; add it to both writers"):
        b.say("nope")


def test_relations_are_inferred_from_either_writer_as_the_graph_says(pairs):
    for _, b, _ in pairs:
        committed = {}
        for turn in b.turns:
            expected = (
                [{"type": "init"}]
                if not turn.depends_on
                else [{"type": turn.relation, "related_state_id": f"S{t}"} for t in turn.depends_on]
            )
            assert infer_relations(turn.question, turn.context, committed) == expected, (b.task_id, turn.question)
            committed[turn.turn_id] = f"S{turn.turn_id}"


def test_an_unknown_writer_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match=r"question_writer='c' is unknown; use one of a, b"):
        generate_task("energy", 0, 6, question_writer="c")
    with pytest.raises(ValueError, match=r"question_writer='c': use one of \['a', 'b'\]"):
        SynthesisConfig(question_writer="c")


def test_the_config_field_is_recorded_only_when_it_is_not_the_default():
    from synthesis.driver import config_fingerprint

    assert "question_writer" not in SynthesisConfig().output_dict()  # earlier runs' markers and stats stay valid
    assert SynthesisConfig(question_writer="b").output_dict()["question_writer"] == "b"
    assert config_fingerprint(SynthesisConfig(question_writer="b")) != config_fingerprint(SynthesisConfig())
    seeds = SynthesisConfig.from_yaml(ROOT / "configs" / "synthesis" / "heldout-seeds.yaml")
    worded_b = SynthesisConfig.from_yaml(ROOT / "configs" / "synthesis" / "heldout-writer-b.yaml")
    assert seeds.question_writer == "a" and worded_b == dataclasses.replace(seeds, question_writer="b")


def test_the_config_s_writer_reaches_the_task_folders_a_run_writes(tmp_path):
    from synthesis.domains.writer import open_sandbox
    from synthesis.driver import plan_jobs, prepare_job

    config = SynthesisConfig(
        domains=["commerce"], tasks_per_domain=1, n_turns=[6, 6], generate_faults=False, question_writer="b"
    )
    (job,), skipped = plan_jobs(config)
    sandbox = open_sandbox()
    try:
        spec, task, faults = prepare_job(job, config, tmp_path, sandbox)
    finally:
        sandbox.close()
    expected = generate_task("commerce", 0, 6, question_writer="b")
    assert skipped == [] and faults == [] and spec == expected
    assert [t.question for t in task.turns] == [t.question for t in expected.turns]
    assert task.turns[0].question.startswith("Read data/orders.csv. Count the orders")


def test_the_fault_library_injects_the_same_faults_whichever_the_writer(pairs):
    from synthesis.faults import candidate_faults

    for a, b, _ in pairs[:1]:
        found = [candidate_faults(spec, random.Random(0)) for spec in (a, b)]
        keys = [[(f.turn_id, f.fault_type, f.code) for f in faults] for faults in found]
        assert keys[0] == keys[1] and len(keys[0]) > 30, a.task_id
