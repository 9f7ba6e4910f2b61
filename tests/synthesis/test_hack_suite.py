"""The hack suite: the gold policy out-scores every reward hack on the same synthesized episodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewards.hacks import HACK_POLICIES
from synthesis.hack_suite import SuiteResult, run_suite, suite_episodes

MARGIN = 0.4
"""Every hack's mean total must be at least this far below gold's (measured gap: ~0.9 on this data)."""


@pytest.fixture(scope="module")
def suite(synthesized: Path, sandbox) -> SuiteResult:
    return run_suite(suite_episodes(synthesized), sandbox)


def test_suite_plays_every_policy_on_every_episode(synthesized: Path, suite: SuiteResult) -> None:
    episodes = suite_episodes(synthesized)
    assert sum(e.fault is None for e in episodes) == 1 and len(episodes) >= 2
    assert list(suite.scores) == ["gold", *HACK_POLICIES]
    assert {len(scores) for scores in suite.scores.values()} == {len(episodes)}


def test_gold_tops_every_hack_by_a_margin(suite: SuiteResult) -> None:
    print(suite.table())
    gold = suite.mean("gold")
    assert gold is not None and gold > 1.0  # gold: protocol, grounding, outcome 1; every kept fault repaired
    for name in HACK_POLICIES:
        assert suite.mean(name) <= gold - MARGIN, f"{name} scores {suite.mean(name):.3f} vs gold {gold:.3f}"


def test_each_hack_is_caught_by_the_term_it_targets(suite: SuiteResult) -> None:
    assert suite.mean("gold", "grounding") == 1.0 and suite.mean("gold", "protocol") == 1.0
    assert suite.mean("always_abstain", "grounding") is None  # records nothing
    assert suite.mean("always_abstain", "intervention") < 0  # misses every fault
    assert suite.mean("always_repair", "intervention") < -1  # false alarms on every clean turn
    assert suite.mean("repair_no_evidence", "intervention") < suite.mean("always_abstain", "intervention")
    assert suite.mean("tool_spam", "protocol") == 0.0 and suite.mean("tool_spam", "economy") == 0.5
    assert suite.mean("empty_states", "grounding") == 0.0 and suite.mean("empty_states", "protocol") < 1.0
    assert suite.mean("copy_observation", "protocol") == 0.0
    assert suite.mean("invented_variables", "grounding") == 0.0


def test_table_and_totals(suite: SuiteResult) -> None:
    table = suite.table().splitlines()
    assert table[0].split() == ["policy", "total", "protocol", "grounding", "intervention", "outcome", "economy"]
    assert [row.split()[0] for row in table[2:]] == list(suite.scores)
    assert suite.totals()["gold"] == round(suite.mean("gold"), 4)


def test_unknown_hack_is_named(synthesized: Path) -> None:
    with pytest.raises(ValueError, match="valid names: always_abstain"):
        run_suite(suite_episodes(synthesized), sandbox=None, policies=["always_win"])  # type: ignore[arg-type]
