"""The gold manager's checks (synthesis.checks) are typed specs written from what a turn states: every slot kind maps
to its spec kind (by hand-written expectations), public constraints are restated as specs where one states them, the
compiled checks pass on every clean turn and fail on a turn that breaks the requirement, and the synthesized questions
name the turns they build on so the gold relations are inferable from the words alone."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from harness.checks.compile import compile_check
from harness.checks.spec import parse_spec
from harness.manager.relations import infer_relations
from synthesis.checks import MAX_CHECKS, constraint_checks, slot_checks, task_checks, turn_checks
from synthesis.domains import DOMAINS, generate_task
from synthesis.domains.base import TaskSpec, TurnSpec
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
                assert parse_spec(check.spec.to_dict()) == check.spec  # a valid spec that round-trips as JSON
                assert check.variable == check.spec.variable
                words = f"{json.dumps(check.spec.to_dict())} {check.requirement}".lower()
                assert not [name for name in FAULT_TYPES if name in words], check.spec


@pytest.fixture(scope="module")
def kernel_factory(sandbox):
    return sandbox.new_kernel


def test_every_check_passes_on_the_clean_run_and_fails_when_its_requirement_is_broken(kernel_factory):
    """Every compiled check (the stated requirements' and the restated constraints') passes on every clean turn of
    three tasks and of a task with monthly totals in thousands; a filtered table missing a row and monthly totals
    in the wrong unit fail with an AssertionError that names the variable."""
    tasks = (generate_task("commerce", seed, n_turns=10) for seed in range(6))
    monthly = next(s for s in tasks if any("unit" in t.slots for t in s.turns))
    specs = [generate_task(domain, 0, n_turns=8) for domain in ("commerce", "healthcare", "finance")] + [monthly]
    broken, kinds = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            root = Path(tmp) / f"{spec.domain}-{spec.seed}-{len(spec.turns)}"
            root.mkdir()
            checks = task_checks(spec)
            with kernel_factory(_write_public(spec, root)) as kernel:
                for turn in spec.turns:
                    assert kernel.execute(turn.code).ok
                    for check in checks[turn.turn_id]:
                        kinds.add(check.spec.kind)
                        result = kernel.probe(compile_check(check.spec), timeout=10)
                        assert result.ok, (spec.domain, turn.turn_id, check.spec, result.error_message)
                    for key, edit, revealing in (
                        ("filter", "{v} = {v}.iloc[1:]", {"filter"}),
                        ("unit", "{v} = {v} * 1000", {"resample", "unit_scale"}),
                    ):
                        slot = turn.slots.get(key)
                        if not isinstance(slot, dict) or key in broken:
                            continue
                        checkpoint = kernel.checkpoint()
                        kernel.execute(edit.format(v=slot["var"]))
                        failed = {
                            c.spec.kind: kernel.probe(compile_check(c.spec), timeout=10)
                            for c in checks[turn.turn_id]
                            if c.variable == slot["var"] and c.spec.kind in revealing
                        }
                        assert set(failed) == revealing, (key, failed)
                        for result in failed.values():
                            assert not result.ok and result.error_type == "AssertionError"
                            assert f"`{slot['var']}`" in result.error_message
                        kernel.restore(checkpoint)
                        kernel.release(checkpoint)
                        broken.append(key)
    assert sorted(broken) == ["filter", "unit"]
    assert {"resample", "unit_scale", "filter", "group_aggregate", "rounded", "corrected_cell"} <= kinds


def test_a_malformed_slot_gets_no_check_and_a_warning_naming_it(caplog):
    from dataclasses import replace

    from synthesis.checks import slot_checks

    spec = generate_task("commerce", 0, n_turns=8)
    turn = next(t for t in spec.turns if isinstance(t.slots.get("filter"), dict))
    broken = replace(turn, slots={**turn.slots, "filter": {"var": "x"}})  # no column, op or value
    with caplog.at_level("WARNING", logger="synthesis.checks"):
        checks = slot_checks(broken)
    assert "filter" not in [c.spec.kind for c in checks]  # the filter check is skipped, the others remain
    assert len(checks) == len(slot_checks(turn)) - 1
    assert f"turn {turn.turn_id}: no check for its 'filter' slot (KeyError" in caplog.text


def _turn(slots, *, turn_id="1", relation="init", constraints=(), writes=()):
    return TurnSpec(turn_id, "q", "c", "", (), relation, 2, constraints, writes, slots)


def test_every_slot_kind_is_translated_to_its_spec_kind():
    slots = {
        "filter": {"var": "big", "source": "orders", "column": "price", "op": ">=", "value": 50},
        "agg": "mean",
        "round": 2,
        "total": {"var": "big_total", "source": "big", "column": "revenue"},
        "groupby": {"var": "by_format", "source": "joined", "by": "format", "column": "revenue"},
        "join": {"var": "by_format", "left": "orders", "right": "stores", "on": "store_id", "how": "left"},
        "sort": {"var": "top3", "source": "by_format", "ascending": False, "k": 3},
        "share": {"var": "frac", "source": "by_format"},
        "dropna": {"var": "clean", "source": "orders", "subset": ["revenue", "region"]},
        "normalize": {"var": "clean", "column": "region", "synonyms": {"west ": "West", "N.": "North"}},
        "outlier": {"var": "high", "source": "orders", "column": "revenue", "k": 1.5},
        "missing": {"var": "nans", "source": "orders"},
        "overlap": {"var": "both", "left": "top3", "right": "high"},
        "resample": {"var": "monthly_k", "source": "clean", "column": "date", "measure": "revenue", "rule": "MS"},
        "unit": {"var": "monthly_k", "factor": 1000},
    }
    got = [c.spec.to_dict() for c in slot_checks(_turn(slots))]
    assert got == [
        {"kind": "filter", "variable": "big", "source": "orders", "column": "price", "op": ">=", "value": 50},
        {"kind": "aggregate", "variable": "big_total", "source": "big", "column": "revenue", "agg": "mean",
         "decimals": 2},
        {"kind": "group_aggregate", "variable": "by_format", "source": "orders", "by": "format", "column": "revenue",
         "agg": "mean", "decimals": 2, "join_right": "stores", "join_on": "store_id", "join_how": "left"},
        {"kind": "top_k", "variable": "top3", "source": "by_format", "k": 3, "order": "largest", "column": None},
        {"kind": "share", "variable": "frac"},
        {"kind": "complete_rows", "variable": "clean", "source": "orders", "columns": ["revenue", "region"]},
        {"kind": "normalized", "variable": "clean", "column": "region", "variants": ["N.", "west "]},
        {"kind": "iqr_outliers", "variable": "high", "source": "orders", "column": "revenue", "k": 1.5,
         "decimals": 2},
        {"kind": "nan_counts", "variable": "nans", "source": "orders"},
        {"kind": "overlap", "variable": "both", "left": "top3", "right": "high"},
        {"kind": "resample", "variable": "monthly_k", "source": "clean", "date_column": "date", "column": "revenue",
         "agg": "sum", "rule": "MS", "factor": 1000, "decimals": 2},
        {"kind": "rounded", "variable": "result", "decimals": 2},
    ]  # fmt: skip
    # a join of its own, a unit on a variable that is not resampled, a bottom-k, an ungrouped groupby source
    alone = {
        "join": {"var": "matched", "left": "orders", "right": "stores", "on": "store_id", "how": "inner"},
        "unit": {"var": "total_k", "factor": 1000, "source": "orders", "column": "revenue"},
        "sort": {"var": "low2", "source": "by_format", "ascending": True, "k": 2},
        "groupby": {"var": "by_region", "source": "clean", "by": "region", "column": "revenue"},
        "agg": "count",
    }
    got = [c.spec.to_dict() for c in slot_checks(_turn(alone))]
    assert got == [
        {"kind": "group_aggregate", "variable": "by_region", "source": "clean", "by": "region", "column": "revenue",
         "agg": "count", "decimals": 2, "join_right": None, "join_on": None, "join_how": None},
        {"kind": "top_k", "variable": "low2", "source": "by_format", "k": 2, "order": "smallest", "column": None},
        {"kind": "join_rows", "variable": "matched", "left": "orders", "right": "stores", "on": "store_id",
         "how": "inner"},
        {"kind": "unit_scale", "variable": "total_k", "source": "orders", "column": "revenue", "factor": 1000},
    ]  # fmt: skip
    assert slot_checks(_turn({"groupby": alone["groupby"], "agg": "max"})) == []  # no group kind states a max here


def test_revisions_stand_on_the_variables_they_rederive_and_constraints_become_specs():
    load = _turn(
        {"round": 2},
        writes=("orders", "rate"),
        constraints=(("Derived.", "assert (orders['x'] - 1).abs().max() < 1e-9"),),
    )
    total = _turn(
        {"total": {"var": "t", "source": "orders", "column": "x"}, "agg": "sum", "round": 2},
        turn_id="2",
        relation="progress",
        writes=("t",),
        constraints=(("Round every value to 2 decimals.", "assert all(abs(v - round(v, 2)) < 1e-9 for v in t)"),),
    )
    revision = _turn(
        {
            "param": {"var": "rate", "old": 0.1, "new": 0.08},
            "correction": {"var": "orders", "column": "x", "key_column": "id", "key": 7, "old": 50, "new": 5},
            "exclude": {"var": "orders", "column": "store", "value": "S10"},
            "recompute": ["orders", "t"],
        },
        turn_id="3",
        relation="invalidate",
        constraints=(
            ("rate is 0.08.", "assert rate == 0.08"),
            ("No row has store S10.", "assert (orders['store'] != 'S10').all()"),
            ("Round every value to 2 decimals.", "assert all(abs(v - round(v, 2)) < 1e-9 for v in t)"),
        ),
    )
    task = TaskSpec("t", "x", 0, "t", "", {}, (load, total, revision))
    checks = task_checks(task)
    assert [(c.spec.kind, c.variable) for c in checks["3"] if not c.constraint] == [
        ("aggregate", "t"),  # turn 2's requirement, on the re-derived total
        ("param", "rate"),
        ("corrected_cell", "orders"),
        ("corrected_cell", "t"),
        ("excluded_rows", "orders"),
    ]
    stated = [(c.constraint, c.spec.to_dict()) for c in checks["3"] if c.constraint]
    assert stated == [
        ("rate is 0.08.", {"kind": "param", "variable": "rate", "value": 0.08}),
        ("No row has store S10.", {"kind": "excluded_rows", "variable": "orders", "column": "store", "value": "S10"}),
        ("Round every value to 2 decimals.", {"kind": "rounded", "variable": "t", "decimals": 2}),
    ]
    assert [c.constraint for c in checks["1"] if c.constraint] == []  # a derived-column rule: no spec states it
    correction = next(c for c in checks["3"] if c.spec.kind == "corrected_cell")
    assert correction.spec.to_dict() == {
        "kind": "corrected_cell", "variable": "orders", "column": "x", "key": 7, "value": 5, "key_column": "id"
    }  # fmt: skip


def test_a_monthly_turn_checks_its_months_and_its_unit_and_skipped_kinds_leave_the_constraint_its_code():
    spec = next(
        s for s in (generate_task("commerce", seed, n_turns=10) for seed in range(6))
        if any("unit" in t.slots for t in s.turns)
    )  # fmt: skip
    turn = next(t for t in spec.turns if "unit" in t.slots)
    var = turn.slots["unit"]["var"]
    kinds = {c.spec.kind: c for c in turn_checks(spec, turn)}
    assert kinds["resample"].spec.factor == 1000 and kinds["resample"].variable == var
    assert kinds["resample"].spec.column == turn.slots["resample"]["measure"]
    unit = [c for c in constraint_checks(turn) if c.spec.kind == "unit_scale"]
    assert [(c.constraint, c.spec.variable, c.spec.factor) for c in unit] == [
        ("Monthly amounts are in thousands.", var, 1000)
    ]
    skipped = ("unit_scale", "resample")
    assert not [
        c for c in turn_checks(spec, turn, skipped) + constraint_checks(turn, skipped) if c.spec.kind in skipped
    ]
    assert [c.spec.kind for c in constraint_checks(turn, skipped)] == ["rounded"]  # the unit constraint keeps its code
