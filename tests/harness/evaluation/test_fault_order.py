"""Which faults ``fault_limit`` keeps: the ``dependents`` order on hand-made task graphs, and through
``resolve_suite`` on the built-in five-turn task."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.evaluation.suite import FAULT_ORDERS, resolve_suite, scored_dependents, select_faults, task_dependents
from harness.worker.faults import Fault, write_faults

RETAIL = Path(__file__).resolve().parents[3] / "harness" / "builtin_tasks" / "retail-sales"

# 1 <- 2 <- 3 <- 5 -> 4, and 6 <- 4: turn 6 is not scored (no reference answer), turn 7 depends on nothing
GRAPH = {"1": (), "2": ("1",), "3": ("2",), "4": (), "5": ("3", "4"), "6": ("4",), "7": ()}
SCORED = {"1", "2", "3", "4", "5", "7"}


def fault(turn: str, task: str = "t", kind: str = "wrong_column") -> Fault:
    return Fault(task, turn, kind, f"x = {turn}")


def test_scored_dependents_are_transitive_and_skip_unscored_turns():
    assert scored_dependents(GRAPH, SCORED) == {
        "1": {"2", "3", "5"},
        "2": {"3", "5"},
        "3": {"5"},
        "4": {"5"},  # 6 depends on 4 but has no score
        "5": set(),
        "6": set(),
        "7": set(),
    }
    assert scored_dependents(GRAPH, set()) == dict.fromkeys(GRAPH, frozenset())
    assert scored_dependents({"1": ("1", "9"), "2": ("1",)}, {"1", "2"}) == {"1": {"2"}, "2": set()}


def test_dependents_order_keeps_the_faults_that_reach_most_scored_turns_in_file_order():
    dependents = {"t": scored_dependents(GRAPH, SCORED)}
    faults = [fault("5"), fault("4"), fault("3"), fault("1"), fault("2"), fault("2", kind="execution_error")]
    # reach: 5 -> 0, 4 -> 1, 3 -> 1, 1 -> 3, 2 -> 2, 2 -> 2
    assert select_faults(faults, 1, "dependents", dependents) == [faults[3]]
    assert select_faults(faults, 3, "dependents", dependents) == [faults[3], faults[4], faults[5]]  # file order
    assert select_faults(faults, 4, "dependents", dependents) == [faults[1], *faults[3:]]  # 4 before 3
    assert select_faults(faults, 2, "file", dependents) == faults[:2]
    assert select_faults(faults, None, "dependents", dependents) == faults
    assert select_faults(faults, 0, "dependents", dependents) == []
    # a task (or turn) the map does not know has no dependents: ranked last, in file order
    other = [fault("1", task="u"), fault("5"), fault("1")]
    assert select_faults(other, 1, "dependents", dependents) == [other[2]]
    assert select_faults(other, 2, "dependents", {}) == other[:2]


def test_an_unknown_order_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid fault orders: dependents, file"):
        select_faults([fault("1")], 1, "random")
    with pytest.raises(ValueError, match="unknown fault order 'depends'"):
        resolve_suite(str(RETAIL), fault_limit=1, fault_order="depends")
    assert set(FAULT_ORDERS) == {"file", "dependents"}


def test_resolve_suite_plays_the_chosen_faults_in_file_order(tmp_path):
    """Retail: 1 <- 2 <- 4 <- 5 and 1 <- 3 <- 5; every turn has a reference answer."""
    assert task_dependents(RETAIL) == {"1": {"2", "3", "4", "5"}, "2": {"4", "5"}, "3": {"5"}, "4": {"5"}, "5": set()}
    faults = [fault(t, task="builtin-retail-sales") for t in ("5", "3", "2", "1")]
    path = tmp_path / "faults.jsonl"
    write_faults(path, faults)
    chosen = resolve_suite(str(RETAIL), faults=path, fault_limit=2, fault_order="dependents")
    assert chosen.faults == [faults[2], faults[3]]
    assert [s.key for s in chosen.episodes()] == [
        "builtin-retail-sales/clean",
        "builtin-retail-sales/fault-1-2-wrong_column",
        "builtin-retail-sales/fault-2-1-wrong_column",
    ]
    assert resolve_suite(str(RETAIL), faults=path, fault_limit=2).faults == faults[:2]  # the default: file order
    assert resolve_suite(str(RETAIL), faults=path, fault_order="dependents").faults == faults  # no limit: all
