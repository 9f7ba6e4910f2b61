"""The paper's definitions on hand-built records: DCR skips unscored turns; comparisons report the share of
non-positive bootstrap resamples and the task-macro difference, in ``results.json`` and in the report."""

from __future__ import annotations

import pytest

from harness.evaluation.report import render_report
from harness.evaluation.summary import TaskInfo, compare_variants, summarize_variant, turn_scores
from harness.manager.episode import EpisodeRecord

CHAIN = TaskInfo("multi_turn", {"1": (), "2": ("1",), "3": ("2",), "4": ("1", "3")})


def record(task_id, key, verdicts=None, *, valid=True, score=None):
    """``verdicts``: turn -> a turn's grade entry (a bool is ``{"correct": bool}``); a turn left out is not graded."""
    details = {}
    if verdicts is not None:
        details = {"turns": {t: {"correct": v} if isinstance(v, bool) else v for t, v in verdicts.items()}}
        score = sum(v is True for v in verdicts.values()) / len(verdicts)  # the structured grader's score
    grade = {"task_id": task_id, "valid": valid, "score": score, "details": details if valid else {"error": "bad"}}
    return EpisodeRecord(task_id, key, {"eval": {"key": key, "run": 0}}, True, grade=grade)


def test_turn_scores_are_0_1_or_none():
    graded = record("c", "c/1", {"1": True, "2": {"correct": None}, "3": {"correct": 1}, "4": {"score": 1.0}})
    assert turn_scores(graded, CHAIN) == {"1": True, "2": None, "3": True, "4": None}
    odd = record("c", "c/2", {"1": {"correct": 0.5}, "2": {"correct": "yes"}, "3": {"correct": 0}})
    assert turn_scores(odd, CHAIN) == {"1": None, "2": None, "3": False, "4": None}  # "4" not graded at all
    assert turn_scores(record("c", "c/3", valid=False), CHAIN) == dict.fromkeys("1234")  # invalid is not wrong
    assert turn_scores(record("d", "d/1", score=1.0), TaskInfo("closed_form")) == {"main": True}
    assert turn_scores(record("d", "d/2", valid=False), TaskInfo("closed_form")) == {"main": None}


def test_dcr_skips_unscored_turns_as_units_and_as_upstream():
    # turn 1 has no upstream; 2 <- 1; 3 <- 2; 4 <- 1, 3.  None / {} / a turn left out: not scored.
    records = [
        # A: 2 (up 1 = F) contaminated wrong; 3 unscored; 4 (up 1 = F, 3 = -) contaminated right
        record("c", "A", {"1": False, "2": False, "3": {"correct": None}, "4": True}),
        # B: 2 (up T) clean right; 3 (up T) clean right; 4 not graded: unscored
        record("c", "B", {"1": True, "2": True, "3": True}),
        # C: 1 unscored; 2 (up 1 = -) no observed upstream, excluded; 3 (up F) contaminated wrong; 4 (-, F) too
        record("c", "C", {"1": {}, "2": False, "3": False, "4": False}),
        # D: an invalid submission: all 4 turns unscored
        record("c", "D", valid=False),
        # E: 2 (up T) clean right; 3 unscored; 4 (up 1 = T, 3 = -): the unscored upstream is no error, clean wrong
        record("c", "E", {"1": True, "2": True, "3": {"correct": None}, "4": False}),
    ]
    summary = summarize_variant(records, {"c": CHAIN}, n_resamples=50)
    detail = summary["dcr_detail"]
    assert (detail["n_clean"], detail["n_contaminated"]) == (4, 4)  # clean B2 B3 E2 E4; contaminated A2 A4 C3 C4
    assert (detail["n_excluded"], detail["n_unscored"]) == (4, 8)  # excluded A1 B1 C2 E1; unscored A3 B4 C1 D* E3
    assert detail["clean_error"] == 0.25 and detail["contaminated_error"] == 0.75
    assert summary["dcr"] == 0.5
    # accuracy is unchanged: an unscored turn counts as a wrong turn (6 right of 20)
    assert summary["turn_accuracy"] == pytest.approx(6 / 20)


def test_dcr_of_unscored_episodes_only_is_undefined():
    records = [record("c", "D", valid=False), record("c", "F", {"1": {"correct": None}})]
    summary = summarize_variant(records, {"c": CHAIN}, n_resamples=50)
    assert summary["dcr"] is None
    assert summary["dcr_detail"]["n_unscored"] == 8 and summary["dcr_detail"]["n_excluded"] == 0
    assert summary["turn_accuracy"] == 0.0


TASKS = {
    "t1": TaskInfo("multi_turn", {"1": (), "2": ("1",), "3": ("2",)}),
    "t2": TaskInfo("closed_form"),
    "t3": TaskInfo("multi_turn", {"1": (), "2": ("1",)}),
}
# per-turn differences b - a: t1 [1, 1, 0], t2 [-1], t3 [1, 0]
A = [
    record("t1", "t1/clean", {"1": False, "2": False, "3": True}),
    record("t2", "t2/clean", score=1.0),
    record("t3", "t3/clean", {"1": False, "2": False}),
]
B = [
    record("t1", "t1/clean", {"1": True, "2": True, "3": True}),
    record("t2", "t2/clean", score=0.0),
    record("t3", "t3/clean", {"1": True, "2": False}),
]


def test_comparison_reports_task_macro_diff_and_p_nonpositive():
    comparison = compare_variants(A, B, TASKS)
    assert comparison["turn_accuracy_diff"] == pytest.approx(2 / 6)  # pooled over 6 turns
    assert comparison["task_macro_diff"] == pytest.approx((2 / 3 - 1 + 1 / 2) / 3)  # 1/18: each task weighs 1/3
    assert comparison["p_nonpositive"] == pytest.approx(7 / 27, abs=0.02)  # see test_stats: 7 of 27 task triples
    assert comparison["task_accuracy_diff"] == 0.0  # solved: a {t2}, b {t1}
    low, high = comparison["ci95"]
    assert low <= comparison["turn_accuracy_diff"] <= high
    assert compare_variants(A, B, TASKS) == comparison  # seeded
    assert compare_variants(B, A, TASKS)["task_macro_diff"] == pytest.approx(-1 / 18)


def _results(comparisons):
    variants = {name: summarize_variant(recs, TASKS, n_resamples=50) for name, recs in (("a", A), ("b", B))}
    return {
        "suite": {"name": "hand", "source": "hand-built", "tasks": 3, "faults": 0},
        "config": {"worker": "scripted", "runs": 1, "n_resamples": 50, "seed": 0},
        "variants": variants,
        "comparisons": comparisons,
        "simulated": True,
        "versions": {"numpy": "x"},
    }


def test_report_shows_the_new_comparison_columns():
    comparison = {"a": "a", "b": "b", **compare_variants(A, B, TASKS)}
    text = render_report(_results([comparison]))
    table = text.split("## Paired comparisons (b - a)\n")[1]
    header, _rule, row = table.strip().splitlines()[:3]
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|")), strict=True))
    assert cells["task-macro diff"] == "0.056" and cells["turn acc diff"] == "0.333"
    assert cells["P(diff <= 0)"] == f"{comparison['p_nonpositive']:.3f}"
    assert "one-sided p-value" in table
    # results.json written before these keys existed still renders
    old = {k: v for k, v in comparison.items() if k not in ("p_nonpositive", "task_macro_diff")}
    assert "| n/a | n/a |" in render_report(_results([old]))
