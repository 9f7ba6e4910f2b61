"""The statistics of an evaluation: one module, pure functions, each unit-tested on hand-computed values.

- :func:`dependency_contamination_rate` (DCR): the excess error of units whose declared upstream was wrong over
  units whose declared upstream was all right. A *unit* is one graded turn; its *upstream* are the correctness
  verdicts of the turns it declares it depends on that were observed (graded) in the same episode. Units without
  any observed upstream are excluded. With ``clean`` = units whose observed upstream are all correct and
  ``contaminated`` = units with at least one incorrect upstream::

      DCR = error_rate(contaminated) - error_rate(clean)

  It is **undefined (None), not 0**, when either group is empty: there is nothing to compare.
- :func:`repair_precision_recall`: repairs against known faults, over (episode, turn) keys. Precision = repaired
  keys that hold a fault / repaired keys; recall = faulted keys that were repaired / faulted keys; each is None
  when its denominator is 0 (no repair at all; no fault at all).
- :func:`cluster_bootstrap_ci` and :func:`paired_cluster_bootstrap`: a percentile bootstrap that resamples whole
  clusters (tasks) with replacement and keeps all their values (turns), so correlated turns of one task are never
  split. The statistic is the pooled mean over all values of the drawn clusters. Paired: the values are the per-turn
  differences ``b - a`` of two runs over the same turns, so the pooled mean is the accuracy difference. Defaults:
  10,000 resamples, a seeded :func:`numpy.random.default_rng`, 95 % interval.
- :func:`quantile_score` / :func:`aggregate_quantile_scores`: AgentDS-style scoring against a reference
  leaderboard. The submission is ranked among the ``n - 1`` leaderboard scores (``n`` entries in all, ties in its
  favour); rank 1 scores 1, rank ``n`` scores ``1/n``, linear in between (``(n - rank + 1) / n``); a failed
  submission (no valid score) scores 0. Scores are averaged per domain over its challenges, then over domains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Unit:
    """One graded unit (a turn) and the observed verdicts of the upstream units it declares."""

    correct: bool
    upstream: tuple[bool, ...]


@dataclass(frozen=True)
class DCR:
    """The Dependency Contamination Rate and its two groups; ``value`` is None when either group is empty."""

    value: float | None
    clean_error: float | None
    contaminated_error: float | None
    n_clean: int
    n_contaminated: int
    n_excluded: int


def dependency_contamination_rate(units: Iterable[Unit]) -> DCR:
    """The DCR of ``units`` (see the module docstring)."""
    clean: list[bool] = []
    contaminated: list[bool] = []
    excluded = 0
    for unit in units:
        if not unit.upstream:
            excluded += 1
        elif all(unit.upstream):
            clean.append(unit.correct)
        else:
            contaminated.append(unit.correct)

    def error(group: list[bool]) -> float | None:
        return sum(not c for c in group) / len(group) if group else None

    clean_error, contaminated_error = error(clean), error(contaminated)
    value = None if clean_error is None or contaminated_error is None else contaminated_error - clean_error
    return DCR(value, clean_error, contaminated_error, len(clean), len(contaminated), excluded)


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
    return BootstrapCI(
        estimate=float(sums.sum() / counts.sum()),
        low=float(low),
        high=float(high),
        n_clusters=len(clusters),
        n_values=int(counts.sum()),
        n_resamples=n_resamples,
        seed=seed,
    )


def paired_cluster_bootstrap(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> BootstrapCI:
    """CI of ``mean(b) - mean(a)`` over paired values, resampling clusters (tasks) and keeping their values (turns).

    ``a`` and ``b`` map each cluster id to its values in the same order (value ``i`` of ``a[c]`` and of ``b[c]``
    belong to the same turn); the clusters and their lengths must agree."""
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"paired bootstrap: clusters {only[:5]} are in one run only; pair runs on the same tasks.")
    uneven = sorted(c for c in a if len(a[c]) != len(b[c]))
    if uneven:
        raise ValueError(f"paired bootstrap: clusters {uneven[:5]} have a different number of values in a and b.")
    names = sorted(a)
    differences = [np.asarray(b[c], dtype=float) - np.asarray(a[c], dtype=float) for c in names]
    return cluster_bootstrap_ci(differences, n_resamples=n_resamples, seed=seed, confidence=confidence)


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
