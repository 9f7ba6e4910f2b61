"""The statistics of an evaluation: one module, pure functions, each unit-tested on hand-computed values.

- :func:`dependency_contamination_rate` (DCR): the excess error of units whose declared upstream was wrong over
  units whose declared upstream was all right. A *unit* is one turn with its 0/1 score (correct or not; ``None``
  when the turn has no 0/1 score, e.g. the grader did not score it or the submission was invalid); its *upstream*
  are the scores of the turns it declares it depends on in the same episode. Turns without a 0/1 score are skipped,
  both as units and as upstream:

  - a unit whose own score is ``None`` is left out of both groups (counted in ``n_unscored``);
  - an upstream whose score is ``None`` is not observed: it is not an error, and it does not make the upstream clean
    either; it is simply dropped from the unit's upstream.

  Units without any observed (scored) upstream are excluded (``n_excluded``). With ``clean`` = scored units whose
  observed upstream are all correct and ``contaminated`` = scored units with at least one incorrect upstream::

      DCR = error_rate(contaminated) - error_rate(clean)

  It is **undefined (None), not 0**, when either group is empty: there is nothing to compare (e.g. every turn is
  unscored).
- :func:`repair_precision_recall`: repairs against known faults, over (episode, turn) keys. Precision = repaired
  keys that hold a fault / repaired keys; recall = faulted keys that were repaired / faulted keys; each is None
  when its denominator is 0 (no repair at all; no fault at all).
- :func:`cluster_bootstrap_ci` and :func:`paired_cluster_bootstrap`: a percentile bootstrap that resamples whole
  clusters (tasks) with replacement and keeps all their values (turns), so correlated turns of one task are never
  split. The statistic is the pooled mean over all values of the drawn clusters. Paired: the values are the per-turn
  differences ``b - a`` of two runs over the same turns, so the pooled mean is the accuracy difference; the paired
  result also holds

  - ``p_nonpositive``: the share of resamples whose pooled mean difference is ``<= 0``, a one-sided bootstrap p-value
    for "b is better than a" (0 when every resample favours b, 1 when none does);
  - ``task_macro_diff``: the mean over clusters of each cluster's mean difference, so every task weighs equally
    (the pooled ``estimate`` weighs tasks by their number of turns).

  Defaults: 10,000 resamples, a seeded :func:`numpy.random.default_rng`, 95 % interval.
- :func:`quantile_score` / :func:`aggregate_quantile_scores`: AgentDS-style scoring against a reference
  leaderboard. The submission is ranked among the ``n - 1`` leaderboard scores (``n`` entries in all, ties in its
  favour); rank 1 scores 1, rank ``n`` scores ``1/n``, linear in between (``(n - rank + 1) / n``); a failed
  submission (no valid score) scores 0. Scores are averaged per domain over its challenges, then over domains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

N_RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Unit:
    """One unit (a turn): its 0/1 score and the scores of the upstream units it declares (``None``: not scored)."""

    correct: bool | None
    upstream: tuple[bool | None, ...]


@dataclass(frozen=True)
class DCR:
    """The Dependency Contamination Rate and its two groups; ``value`` is None when either group is empty.

    ``n_unscored``: units skipped for having no 0/1 score; ``n_excluded``: scored units without a scored upstream."""

    value: float | None
    clean_error: float | None
    contaminated_error: float | None
    n_clean: int
    n_contaminated: int
    n_excluded: int
    n_unscored: int


def dependency_contamination_rate(units: Iterable[Unit]) -> DCR:
    """The DCR of ``units``, skipping unscored turns as units and as upstream (see the module docstring)."""
    clean: list[bool] = []
    contaminated: list[bool] = []
    excluded = unscored = 0
    for unit in units:
        if unit.correct is None:
            unscored += 1
            continue
        observed = [u for u in unit.upstream if u is not None]
        if not observed:
            excluded += 1
        elif all(observed):
            clean.append(unit.correct)
        else:
            contaminated.append(unit.correct)

    def error(group: list[bool]) -> float | None:
        return sum(not c for c in group) / len(group) if group else None

    clean_error, contaminated_error = error(clean), error(contaminated)
    value = None if clean_error is None or contaminated_error is None else contaminated_error - clean_error
    return DCR(value, clean_error, contaminated_error, len(clean), len(contaminated), excluded, unscored)


@dataclass(frozen=True)
class RepairScore:
    precision: float | None
    recall: float | None
    true_positives: int
    repaired: int
    faulted: int


def repair_precision_recall(repaired: Iterable[object], faulted: Iterable[object]) -> RepairScore:
    """Precision and recall of the ``repaired`` keys against the ``faulted`` keys (see the module docstring)."""
    repaired_set, faulted_set = set(repaired), set(faulted)
    hits = len(repaired_set & faulted_set)
    precision = hits / len(repaired_set) if repaired_set else None
    recall = hits / len(faulted_set) if faulted_set else None
    return RepairScore(precision, recall, hits, len(repaired_set), len(faulted_set))


@dataclass(frozen=True)
class BootstrapCI:
    """A statistic, its percentile interval and how it was computed."""

    estimate: float
    low: float
    high: float
    n_clusters: int
    n_values: int
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class PairedBootstrapCI(BootstrapCI):
    """A paired bootstrap of ``b - a``: the interval of the pooled mean difference, plus ``p_nonpositive`` (the share
    of resamples whose mean difference is ``<= 0``) and ``task_macro_diff`` (the mean of the per-cluster means)."""

    p_nonpositive: float
    task_macro_diff: float


def _cluster_bootstrap(
    clusters: Sequence[Sequence[float]], n_resamples: int, seed: int, confidence: float
) -> tuple[BootstrapCI, np.ndarray]:
    """The interval of :func:`cluster_bootstrap_ci` and the resampled pooled means, shape (n_resamples,)."""
    if not clusters:
        raise ValueError("cluster_bootstrap_ci: no clusters; a bootstrap needs at least one cluster of values.")
    empty = [i for i, c in enumerate(clusters) if len(c) == 0]
    if empty:
        raise ValueError(f"cluster_bootstrap_ci: clusters {empty} hold no value; drop them before the bootstrap.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples}: use at least 1 (10,000 for a reported interval).")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence}: use a fraction in (0, 1), e.g. 0.95.")
    sums = np.array([float(np.sum(c)) for c in clusters])  # (n_clusters,)
    counts = np.array([len(c) for c in clusters], dtype=float)  # (n_clusters,)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(clusters), size=(n_resamples, len(clusters)))  # (n_resamples, n_clusters)
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)  # (n_resamples,)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    ci = BootstrapCI(
        estimate=float(sums.sum() / counts.sum()),
        low=float(low),
        high=float(high),
        n_clusters=len(clusters),
        n_values=int(counts.sum()),
        n_resamples=n_resamples,
        seed=seed,
    )
    return ci, means


def cluster_bootstrap_ci(
    clusters: Sequence[Sequence[float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> BootstrapCI:
    """Percentile CI of the pooled mean of all values, resampling whole clusters with replacement.

    Args:
        clusters: one sequence of values per cluster (a task's turns); every cluster needs at least one value.
        n_resamples: bootstrap resamples; each draws ``len(clusters)`` clusters.
        seed: seed of the :func:`numpy.random.default_rng` (the same inputs and seed give the same interval).
        confidence: width of the interval, in (0, 1).
    """
    return _cluster_bootstrap(clusters, n_resamples, seed, confidence)[0]


def paired_cluster_bootstrap(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> PairedBootstrapCI:
    """CI of ``mean(b) - mean(a)`` over paired values, resampling clusters (tasks) and keeping their values (turns).

    ``a`` and ``b`` map each cluster id to its values in the same order (value ``i`` of ``a[c]`` and of ``b[c]``
    belong to the same turn); the clusters and their lengths must agree. The interval is that of
    :func:`cluster_bootstrap_ci` over the differences (same seed, same resamples); ``p_nonpositive`` is the share of
    those resamples with a mean difference ``<= 0`` and ``task_macro_diff`` the mean over clusters of each cluster's
    mean difference."""
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"paired bootstrap: clusters {only[:5]} are in one run only; pair runs on the same tasks.")
    uneven = sorted(c for c in a if len(a[c]) != len(b[c]))
    if uneven:
        raise ValueError(f"paired bootstrap: clusters {uneven[:5]} have a different number of values in a and b.")
    names = sorted(a)
    differences = [np.asarray(b[c], dtype=float) - np.asarray(a[c], dtype=float) for c in names]
    ci, means = _cluster_bootstrap(differences, n_resamples, seed, confidence)
    return PairedBootstrapCI(
        **asdict(ci),
        p_nonpositive=float(np.mean(means <= 0.0)),
        task_macro_diff=float(np.mean([d.mean() for d in differences])),
    )


def quantile_score(score: float | None, leaderboard: Sequence[float], *, higher_is_better: bool = True) -> float:
    """AgentDS-style score of one submission against a reference leaderboard (see the module docstring)."""
    if score is None:
        return 0.0
    if not leaderboard:
        raise ValueError("quantile_score: the reference leaderboard is empty; a quantile needs reference scores.")
    better = sum((s > score) if higher_is_better else (s < score) for s in leaderboard)
    n = len(leaderboard) + 1
    rank = better + 1
    return (n - rank + 1) / n


def aggregate_quantile_scores(scores: Mapping[tuple[str, str], float]) -> dict[str, object]:
    """``{(domain, challenge): quantile score}`` -> ``{"domains": {domain: mean}, "overall": mean of domains}``."""
    if not scores:
        raise ValueError("aggregate_quantile_scores: no challenge scores to aggregate.")
    by_domain: dict[str, list[float]] = {}
    for (domain, _challenge), value in scores.items():
        by_domain.setdefault(domain, []).append(value)
    domains = {d: float(np.mean(v)) for d, v in sorted(by_domain.items())}
    return {"domains": domains, "overall": float(np.mean(list(domains.values())))}
