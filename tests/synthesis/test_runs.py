"""Counterfactual runs and their validation on the built-in retail task: a fault that changes nothing is dropped,
kept faults reproduce the clean answers after repair, and checkpoint reuse gives the same episodes as a full replay."""

import re

import pytest

from synthesis.faults import InjectedFault
from synthesis.runs import episode_id, run_task


@pytest.fixture(scope="module")
def faults(candidates):
    by_type = {}
    for fault in candidates:
        by_type.setdefault(fault.fault_type, fault)
    return list(by_type.values())


def _no_op_fault(task, real: InjectedFault) -> InjectedFault:
    """A "fault" whose code is the reference code with a comment: it changes nothing."""
    turn = next(t for t in task.turns if t.turn_id == real.turn_id)
    code = "# rewritten\n" + task.load_answers()[turn.turn_id].code
    return InjectedFault(**{**real.__dict__, "fault_type": "wrong_column", "code": code})


def test_validation_drops_a_fault_that_changes_nothing(sandbox, task, faults):
    real = next(f for f in faults if not f.benign and f.evidence_tool == "run_probe")
    runs = run_task(task, [_no_op_fault(task, real), real], sandbox)
    no_op, kept = runs.outcomes
    assert no_op.kept is False and no_op.reason == "changes nothing"
    assert no_op.gold is None  # decided by the faulty run alone: the gold run is not played
    assert kept.kept is True and kept.reason is None


def test_kept_faults_change_answers_and_the_repair_reproduces_the_clean_ones(sandbox, task, faults):
    runs = run_task(task, faults, sandbox)
    clean = runs.clean.record.final_answers
    kept = [o for o in runs.outcomes if o.kept]
    assert {o.fault.fault_type for o in kept if o.detectable} >= {"execution_error"}
    for outcome in kept:
        if outcome.detectable is False:  # no check of the gold manager reveals it: committed, counted
            assert outcome.gold.record.repairs == [] and outcome.gold.record.final_answers != clean
            continue
        assert outcome.gold.record.final_answers == clean, outcome.fault.fault_type
        if outcome.fault.fault_type == "execution_error":  # what revealed it at its turn: the failed step
            assert outcome.revealed_by[0] == "check_execution"
        assert bool(outcome.revealed_by) == bool(outcome.detectable)
        if outcome.fault.benign:
            assert outcome.gold.record.repairs == []
        else:
            assert outcome.faulty.record.final_answers != clean, outcome.fault.fault_type
            assert len(outcome.gold.record.repairs) == 1
            assert outcome.faulty.record.activations == []  # the unmanaged continuation
    for outcome in runs.outcomes:
        assert outcome.kept == (outcome.reason is None)


def test_records_are_simulated_with_stable_ids_and_zeroed_durations(sandbox, task, faults):
    runs = run_task(task, faults[:2], sandbox)
    record = runs.outcomes[0].gold.record
    assert record.simulated is True
    assert record.episode_id == episode_id(task.id, "gold", faults[0])
    assert record.duration_s == 0.0
    assert all(a["latency_s"] == 0.0 for a in record.activations)
    assert all(s["duration_s"] == 0.0 for s in record.worker_steps)
    assert record.config["branch"] == "gold" and record.config["fault_id"].startswith(task.id)


def _strip(record):
    """What must match between a full replay and checkpoint reuse (the shared kernel's checkpoint ids may not)."""
    states = [{k: v for k, v in s.items() if k != "checkpoint_id"} for s in record.states]
    actions = [[(a["raw"], re.sub(r"cp\d+", "cp", a["result"])) for a in act["actions"]] for act in record.activations]
    return record.final_answers, states, actions, record.worker_steps, record.repairs


def test_checkpoint_reuse_equals_a_full_replay(sandbox, task, faults):
    reused = run_task(task, faults, sandbox, reuse_checkpoints=True)
    replayed = run_task(task, faults, sandbox, reuse_checkpoints=False)
    assert _strip(reused.clean.record) == _strip(replayed.clean.record)
    for a, b in zip(reused.outcomes, replayed.outcomes, strict=True):
        assert a.reason == b.reason
        assert _strip(a.faulty.record) == _strip(b.faulty.record), a.fault.fault_type
        assert (a.gold is None) == (b.gold is None)
        if a.gold is not None:
            assert _strip(a.gold.record) == _strip(b.gold.record), a.fault.fault_type
            assert [e.response for e in a.gold.log] == [e.response for e in b.gold.log]


def test_the_card_counts_detectability_by_fault_type_and_what_only_the_new_kinds_revealed():
    from synthesis.export import _detectability, _detectability_table

    kept = [
        {"fault_type": "rounding", "benign": False, "detectable": True, "revealed_by": ["resample"]},
        {"fault_type": "rounding", "benign": False, "detectable": True, "revealed_by": ["resample", "constraint"]},
        {"fault_type": "rounding", "benign": False, "detectable": False, "revealed_by": []},
        {"fault_type": "unit_slip", "benign": False, "detectable": True, "revealed_by": ["unit_scale", "resample"]},
        {"fault_type": "benign_rewrite", "benign": True, "detectable": None},
    ]
    table = _detectability(kept)
    assert table == {
        "benign_rewrite": {"detectable": 0, "undetectable": 0, "benign": 1, "new_kinds_only": 0},
        "rounding": {"detectable": 2, "undetectable": 1, "benign": 0, "new_kinds_only": 1},
        "unit_slip": {"detectable": 1, "undetectable": 0, "benign": 0, "new_kinds_only": 1},
    }
    card = _detectability_table(table, ["unit_scale", "resample"])
    assert "| rounding | 2 | 1 | 1 | 0 |" in card and "| **all** | 3 | 2 | 1 | 1 |" in card
    assert "This run skipped the check kinds ['unit_scale', 'resample']" in card
