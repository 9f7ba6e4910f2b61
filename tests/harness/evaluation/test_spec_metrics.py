"""Spec precision/recall against the gold's specs and fault detection (harness.evaluation.spec_metrics)."""

import json
from types import SimpleNamespace

from harness.checks.spec import Filter, Rounded, TopK
from harness.evaluation.spec_metrics import (
    fault_detection,
    gold_specs_of,
    manager_specs,
    match_counts,
    spec_key,
    spec_scores,
)


def _record(task_id, turn_specs, repairs=(), actor="policy"):
    activations = [
        {
            "actor": actor,
            "turn_id": turn,
            "actions": [
                {"legal": True, "parsed": {"name": "run_check", "arguments": {"spec": s.to_dict()}}} for s in specs
            ]
            + [{"legal": False, "parsed": {"name": "run_check", "arguments": {"spec": {"kind": "share"}}}}],
        }
        for turn, specs in turn_specs.items()
    ]
    return SimpleNamespace(task_id=task_id, activations=activations, repairs=[{"turn_id": t} for t in repairs])


def test_the_match_key_ignores_sources_and_compares_numbers_as_numbers():
    assert spec_key(Filter("a", "src", "q", ">", 5)) == spec_key(Filter("a", "other", "q", ">", 5.0))
    assert spec_key(Filter("a", "src", "q", ">", 5)) != spec_key(Filter("a", "src", "q", ">=", 5))
    assert spec_key(Filter("a", "src", "q", ">", 5), strict=True) != spec_key(Filter("a", "other", "q", ">", 5), True)
    gold = [TopK("t", "s", 3, "largest"), Rounded("result", 2), Rounded("result", 2)]
    g, m, hit = match_counts([TopK("t", "x", 3, "largest"), Rounded("result", 4)], gold)
    assert (g["rounded"], m["rounded"], hit["rounded"], hit["top_k"]) == (2, 1, 0, 1)


def test_gold_specs_travel_in_the_private_synthesis_file(tmp_path):
    assert gold_specs_of(tmp_path) is None
    (tmp_path / "synthesis.json").write_text(json.dumps({"turns": {"1": {"slots": {}}}}))
    assert gold_specs_of(tmp_path) is None  # no turn carries checks: the suite has no gold specs
    turns = {"1": {"checks": [Rounded("result", 2).to_dict(), {"kind": "nope"}]}, "2": {}}
    (tmp_path / "synthesis.json").write_text(json.dumps({"turns": turns}))
    assert gold_specs_of(tmp_path) == {"1": (Rounded("result", 2),), "2": ()}


def test_spec_scores_per_kind_over_the_turns_with_gold():
    gold = {"t": {"1": (Rounded("result", 2), TopK("top", "s", 3, "largest")), "2": (Rounded("result", 4),)}}
    made = _record("t", {"1": [Rounded("result", 2), Rounded("result", 2), Filter("f", "s", "q", ">", 1)]})
    assert manager_specs(made) == {"1": [Rounded("result", 2), Filter("f", "s", "q", ">", 1)]}
    scores = spec_scores([made, _record("no-gold", {"1": [Rounded("result", 2)]})], {**gold, "no-gold": None})
    assert (scores["turns"], scores["gold"], scores["made"], scores["matched"]) == (2, 3, 2, 1)
    assert scores["per_kind"]["rounded"] == {"gold": 2, "made": 1, "matched": 1, "recall": 0.5, "precision": 1.0}
    assert scores["per_kind"]["filter"]["precision"] == 0.0 and scores["per_kind"]["top_k"]["recall"] == 0.0
    assert spec_scores([made], {"t": None}) is None


def test_fault_detection_counts_repairs_at_the_fault_turn_and_false_repairs_of_clean_turns():
    faulted = _record("t", {"1": [], "2": []}, repairs=["2"])
    missed = _record("t", {"1": [], "2": []}, repairs=["1"])
    clean = _record("t", {"1": [], "2": [], "3": []}, repairs=["3"])
    turns = {id(faulted): "2", id(missed): "2"}
    result = fault_detection([faulted, missed, clean], lambda r: turns.get(id(r)))
    assert result["faults"] == 2 and result["detected"] == 1 and result["detection_rate"] == 0.5
    assert result["clean_turns"] == 3 and result["false_repairs"] == 1 and result["detectable"] is None
    marks = {id(faulted): True, id(missed): False}
    split = fault_detection([faulted, missed, clean], lambda r: turns.get(id(r)), lambda r: marks.get(id(r)))
    assert split["detectable"] == {
        "faults": 1, "detected": 1, "detection_rate": 1.0, "undetectable_repaired": 0, "undetectable": 1
    }  # fmt: skip
