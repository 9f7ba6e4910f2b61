"""The gold manager's checks (synthesis.checks) are written from what a turn states, pass on every clean turn, fail
with an AssertionError on a turn that breaks the requirement, and the synthesized questions name the turns they build
on so the gold relations are inferable from the words alone."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from harness.manager.relations import infer_relations
from synthesis.checks import MAX_CHECKS, turn_checks
from synthesis.domains import DOMAINS, generate_task
from synthesis.faults import FAULT_TYPES
from synthesis.faults.verify import _write_public

TASKS = [(domain, seed) for domain in DOMAINS for seed in (0, 1)]


def _stated(turn) -> str:
    return f"{turn.question} {turn.context}"


def test_questions_name_exactly_the_turns_they_build_on_and_the_relations_follow():
    for domain, seed in TASKS:
        spec = generate_task(domain, seed, n_turns=10)
        committed = {}
        for turn in spec.turns:
            mentions = " ".join(re.findall(r"\bturns?\s+([\d, ]+)", turn.question))
            named = sorted(set(re.findall(r"\d+", mentions)), key=int)
            assert named == sorted(turn.depends_on, key=int), (domain, seed, turn.turn_id, turn.question)
            inferred = infer_relations(turn.question, turn.context, committed)
            expected = (
                [{"type": "init"}]
                if not turn.depends_on
                else [{"type": turn.relation, "related_state_id": f"S{t}"} for t in turn.depends_on]
            )
            assert inferred == expected, (domain, seed, turn.turn_id, turn.question)
            committed[turn.turn_id] = f"S{turn.turn_id}"


def test_the_values_a_check_relies_on_are_stated_in_the_turn():
    for domain, seed in TASKS:
        spec = generate_task(domain, seed, n_turns=10)
        for turn in spec.turns:
            checks = turn_checks(spec, turn)
            assert len(checks) <= MAX_CHECKS
            text = _stated(turn)
            if isinstance(turn.slots.get("filter"), dict):
                assert f"{turn.slots['filter']['value']:g}" in text, (turn.question, turn.context)
            if isinstance(turn.slots.get("sort"), dict) and turn.slots["sort"]["k"] > 1:
                assert str(turn.slots["sort"]["k"]) in text
            if "round" in turn.slots:
                assert f"{turn.slots['round']} decimals" in text
            if isinstance(turn.slots.get("exclude"), dict):
                assert str(turn.slots["exclude"]["value"]) in text
            if isinstance(turn.slots.get("param"), dict):
                assert f"{turn.slots['param']['new']:g}" in text
            for check in checks:
                compile(check.code, "<check>", "exec")
                words = f"{check.code} {check.requirement}".lower()
                assert not [name for name in FAULT_TYPES if name in words], check.code


@pytest.fixture(scope="module")
def kernel_factory(sandbox):
    return sandbox.new_kernel


def test_every_check_passes_on_the_clean_run_and_fails_when_its_requirement_is_broken(kernel_factory):
    broken = 0
    with tempfile.TemporaryDirectory() as tmp:
        for domain in ("commerce", "healthcare", "finance"):
            spec = generate_task(domain, 0, n_turns=8)
            root = Path(tmp) / domain
            root.mkdir()
            with kernel_factory(_write_public(spec, root)) as kernel:
                for turn in spec.turns:
                    assert kernel.execute(turn.code).ok
                    for check in turn_checks(spec, turn):
                        result = kernel.probe(check.code, timeout=10)
                        assert result.ok, (domain, turn.turn_id, check.requirement, result.error_message)
                    filters = turn.slots.get("filter")
                    if isinstance(filters, dict) and broken < 2:  # one row dropped from the filtered table
                        checkpoint = kernel.checkpoint()
                        kernel.execute(f"{filters['var']} = {filters['var']}.iloc[1:]")
                        check = next(c for c in turn_checks(spec, turn) if c.variable == filters["var"])
                        result = kernel.probe(check.code, timeout=10)
                        assert not result.ok and result.error_type == "AssertionError"
                        assert f"`{filters['var']}` has" in result.error_message
                        kernel.restore(checkpoint)
                        kernel.release(checkpoint)
                        broken += 1
    assert broken == 2


def test_a_malformed_slot_gets_no_check_and_a_warning_naming_it(caplog):
    from dataclasses import replace

    from synthesis.checks import slot_checks

    spec = generate_task("commerce", 0, n_turns=8)
    turn = next(t for t in spec.turns if isinstance(t.slots.get("filter"), dict))
    broken = replace(turn, slots={**turn.slots, "filter": {"var": "x"}})  # no column, op or value
    with caplog.at_level("WARNING", logger="synthesis.checks"):
        checks = slot_checks(broken)
    assert all("_meets" not in c.code for c in checks)  # the filter check is skipped, the others remain
    assert len(checks) == len(slot_checks(turn)) - 1
    assert f"turn {turn.turn_id}: no check for its 'filter' slot (KeyError" in caplog.text
