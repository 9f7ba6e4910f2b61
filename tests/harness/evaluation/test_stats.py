"""Evaluation statistics on hand-computed values: DCR (incl. unscored turns, undefined), repair P/R, bootstraps,
quantiles."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from harness.evaluation.stats import (
    BootstrapCI,
    Unit,
    aggregate_quantile_scores,
    cluster_bootstrap_ci,
    dependency_contamination_rate,
    paired_cluster_bootstrap,
    quantile_score,
    repair_precision_recall,
)


def test_dcr_is_the_excess_error_of_contaminated_units():
    units = [
        Unit(True, (True,)),  # clean, right
        Unit(True, (True, True)),  # clean, right
        Unit(True, (True,)),  # clean, right
        Unit(False, (True,)),  # clean, wrong      -> clean error 1/4
        Unit(False, (False,)),  # contaminated, wrong
        Unit(True, (True, False)),  # contaminated (one wrong upstream), right -> contaminated error 1/2
        Unit(False, ()),  # no observed upstream: excluded
        Unit(True, ()),  # excluded
    ]
    dcr = dependency_contamination_rate(units)
    assert dcr.clean_error == 0.25 and dcr.contaminated_error == 0.5
    assert dcr.value == pytest.approx(0.25)
    assert (dcr.n_clean, dcr.n_contaminated, dcr.n_excluded) == (4, 2, 2)


def test_dcr_can_be_negative():
    dcr = dependency_contamination_rate([Unit(False, (True,)), Unit(True, (False,))])
    assert dcr.value == -1.0


@pytest.mark.parametrize(
    "units, n_clean, n_contaminated",
    [
        ([], 0, 0),  # nothing at all
        ([Unit(False, ())], 0, 0),  # only units without upstream
        ([Unit(True, (True,)), Unit(False, (True,))], 2, 0),  # no contaminated unit
        ([Unit(False, (False,)), Unit(False, (True, False))], 0, 2),  # no clean unit
    ],
)
def test_dcr_is_undefined_not_zero_when_a_group_is_empty(units, n_clean, n_contaminated):
    dcr = dependency_contamination_rate(units)
    assert dcr.value is None
    assert (dcr.n_clean, dcr.n_contaminated) == (n_clean, n_contaminated)


def test_dcr_skips_a_unit_without_a_score():
    units = [
        Unit(None, (False,)),  # not scored: skipped, whatever its upstream
        Unit(None, (True,)),  # skipped
        Unit(False, (False,)),  # contaminated, wrong -> contaminated error 1/1
        Unit(True, (True,)),  # clean, right
        Unit(False, (True,)),  # clean, wrong -> clean error 1/2
    ]
    dcr = dependency_contamination_rate(units)
    assert (dcr.clean_error, dcr.contaminated_error, dcr.value) == (0.5, 1.0, 0.5)
    assert (dcr.n_clean, dcr.n_contaminated, dcr.n_excluded, dcr.n_unscored) == (2, 1, 0, 2)


def test_dcr_drops_an_unscored_upstream():
    units = [
        Unit(False, (None,)),  # its only upstream unscored: no observed upstream, excluded (not clean, not an error)
        Unit(True, (None, False)),  # the scored upstream is wrong: contaminated, right -> contaminated error 0
        Unit(False, (None, True)),  # the unscored upstream is no error: clean, wrong
        Unit(True, (True,)),  # clean, right -> clean error 1/2
    ]
    dcr = dependency_contamination_rate(units)
    assert (dcr.clean_error, dcr.contaminated_error, dcr.value) == (0.5, 0.0, -0.5)
    assert (dcr.n_clean, dcr.n_contaminated, dcr.n_excluded, dcr.n_unscored) == (2, 1, 1, 0)


def test_dcr_of_unscored_turns_only_is_undefined():
    dcr = dependency_contamination_rate([Unit(None, (None,)), Unit(None, (False,)), Unit(None, ())])
    assert dcr.value is None and dcr.clean_error is None and dcr.contaminated_error is None
    assert (dcr.n_clean, dcr.n_contaminated, dcr.n_excluded, dcr.n_unscored) == (0, 0, 0, 3)


def test_dcr_zero_when_both_groups_err_alike():
    dcr = dependency_contamination_rate([Unit(True, (True,)), Unit(True, (False,))])
    assert dcr.value == 0.0 and dcr.clean_error == 0.0 and dcr.contaminated_error == 0.0


def test_repair_precision_recall():
    faulted = {("e1", "2"), ("e2", "4"), ("e3", "1")}
    repaired = {("e1", "2"), ("e2", "5"), ("e4", "3"), ("e3", "1")}
    score = repair_precision_recall(repaired, faulted)
    assert score.precision == 0.5 and score.recall == pytest.approx(2 / 3)
    assert (score.true_positives, score.repaired, score.faulted) == (2, 4, 3)


def test_repair_precision_recall_undefined_cases():
    no_repair = repair_precision_recall([], [("e1", "2")])
    assert no_repair.precision is None and no_repair.recall == 0.0
    no_fault = repair_precision_recall([("e1", "2")], [])
    assert no_fault.precision == 0.0 and no_fault.recall is None
    nothing = repair_precision_recall([], [])
    assert nothing.precision is None and nothing.recall is None


def test_cluster_bootstrap_keeps_clusters_whole():
    # cluster A: 3 turns all +1; cluster B: 1 turn 0. Pooled mean 3/4. Every resample draws two clusters:
    # {A, A} -> 1, {A, B} -> 3/4, {B, B} -> 0 (B's single turn is never diluted by A's turns in {B, B}).
    ci = cluster_bootstrap_ci([[1.0, 1.0, 1.0], [0.0]], n_resamples=10_000, seed=0)
    assert ci.estimate == 0.75
    assert (ci.low, ci.high) == (0.0, 1.0)
    assert (ci.n_clusters, ci.n_values, ci.n_resamples) == (2, 4, 10_000)
    # were the turns resampled independently, the mean of 4 draws could be 0.25 or 0.5; whole clusters never are
    narrow = cluster_bootstrap_ci([[1.0, 1.0, 1.0], [0.0]], n_resamples=10_000, seed=0, confidence=0.4)
    assert narrow.low in (0.0, 0.75, 1.0) and narrow.high in (0.0, 0.75, 1.0)


def test_cluster_bootstrap_degenerate_and_seeded():
    same = cluster_bootstrap_ci([[0.5, 0.5], [0.5]], n_resamples=100, seed=3)
    assert (same.estimate, same.low, same.high) == (0.5, 0.5, 0.5)
    one = cluster_bootstrap_ci([[1.0, 0.0, 0.0, 0.0]])
    assert (one.estimate, one.low, one.high) == (0.25, 0.25, 0.25)
    values = [[1.0, 0.0], [0.0], [1.0, 1.0, 0.0], [0.0, 0.0], [1.0]]
    assert cluster_bootstrap_ci(values, seed=7) == cluster_bootstrap_ci(values, seed=7)
    assert cluster_bootstrap_ci(values, seed=7).n_resamples == 10_000


def test_cluster_bootstrap_bad_input():
    with pytest.raises(ValueError, match="no clusters"):
        cluster_bootstrap_ci([])
    with pytest.raises(ValueError, match=r"clusters \[1\] hold no value"):
        cluster_bootstrap_ci([[1.0], []])
    with pytest.raises(ValueError, match="confidence"):
        cluster_bootstrap_ci([[1.0]], confidence=1.0)


def test_paired_bootstrap_is_the_bootstrap_of_the_differences():
    a = {"t1": [1.0, 0.0, 0.0], "t2": [0.0]}  # baseline: 1 of 4 turns right
    b = {"t1": [1.0, 1.0, 1.0], "t2": [0.0]}  # variant: 3 of 4 right; differences t1 [0, 1, 1], t2 [0]
    ci = paired_cluster_bootstrap(a, b)
    assert ci.estimate == 0.5  # 3/4 - 1/4
    # resamples: {t1, t1} -> 2/3, {t1, t2} -> 2/4, {t2, t2} -> 0
    assert (ci.low, ci.high) == (0.0, pytest.approx(2 / 3))
    pooled = cluster_bootstrap_ci([[0.0, 1.0, 1.0], [0.0]])  # the same resamples: the same interval
    assert {f.name: getattr(ci, f.name) for f in fields(BootstrapCI)} == asdict(pooled)


def test_paired_bootstrap_task_macro_diff_and_p_nonpositive():
    # differences b - a: t1 [1, 1, 0] (mean 2/3), t2 [-1] (mean -1), t3 [1, 0] (mean 1/2)
    a = {"t1": [0.0, 0.0, 1.0], "t2": [1.0], "t3": [0.0, 0.0]}
    b = {"t1": [1.0, 1.0, 1.0], "t2": [0.0], "t3": [1.0, 0.0]}
    ci = paired_cluster_bootstrap(a, b, seed=0)
    assert ci.estimate == pytest.approx(2 / 6)  # pooled over 6 turns: (2 - 1 + 1) / 6
    assert ci.task_macro_diff == pytest.approx((2 / 3 - 1 + 1 / 2) / 3)  # = 1/18, every task weighs 1/3
    # a resample draws 3 of the 27 ordered task triples; its summed difference (t1 2, t2 -1, t3 1) is <= 0 only for
    # {t2, t2, t2} (1 triple), {t2, t2, t1} (3, a tie at 0 counts) and {t2, t2, t3} (3): 7/27 of the mass
    assert ci.p_nonpositive == pytest.approx(7 / 27, abs=0.02)
    assert ci == paired_cluster_bootstrap(a, b, seed=0)  # seeded: deterministic
    assert paired_cluster_bootstrap(a, b, seed=1).p_nonpositive != ci.p_nonpositive  # another seed, other draws


def test_paired_bootstrap_p_nonpositive_bounds():
    better = paired_cluster_bootstrap(
        {"t1": [0.0, 0.0], "t2": [0.0]}, {"t1": [1.0, 0.0], "t2": [1.0]}, n_resamples=500
    )
    assert better.p_nonpositive == 0.0  # every turn's difference >= 0, every task's > 0: every resample favours b
    worse = paired_cluster_bootstrap({"t1": [1.0, 0.0], "t2": [1.0]}, {"t1": [0.0, 0.0], "t2": [1.0]}, n_resamples=500)
    assert worse.p_nonpositive == 1.0  # every difference <= 0 (ties included)
    assert worse.task_macro_diff == pytest.approx(-0.25)  # t1 -1/2, t2 0
    same = paired_cluster_bootstrap({"t1": [1.0]}, {"t1": [1.0]}, n_resamples=50)
    assert (same.estimate, same.p_nonpositive, same.task_macro_diff) == (0.0, 1.0, 0.0)  # no gain is not a gain


def test_paired_bootstrap_refuses_unpaired_runs():
    with pytest.raises(ValueError, match="in one run only"):
        paired_cluster_bootstrap({"t1": [1.0]}, {"t2": [1.0]})
    with pytest.raises(ValueError, match="different number of values"):
        paired_cluster_bootstrap({"t1": [1.0]}, {"t1": [1.0, 0.0]})


def test_quantile_score():
    board = [0.9, 0.8, 0.7]  # with the submission, n = 4 entries
    assert quantile_score(0.95, board) == 1.0  # top
    assert quantile_score(0.9, board) == 1.0  # a tie counts in the submission's favour
    assert quantile_score(0.75, board) == 0.5  # rank 3 of 4 -> (4 - 3 + 1) / 4
    assert quantile_score(0.1, board) == 0.25  # worst -> 1/n
    assert quantile_score(None, board) == 0.0  # failed submission
    assert quantile_score(0.05, [0.1, 0.2], higher_is_better=False) == 1.0  # an error metric: lower is better
    assert quantile_score(0.3, [0.1, 0.2], higher_is_better=False) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="leaderboard is empty"):
        quantile_score(0.5, [])


def test_quantile_aggregation_challenge_domain_overall():
    scores = {("retail", "c1"): 1.0, ("retail", "c2"): 0.5, ("health", "c3"): 0.0}
    result = aggregate_quantile_scores(scores)
    assert result == {"domains": {"health": 0.0, "retail": 0.75}, "overall": 0.375}
