"""What the manager was shown, in the results: relation accuracy against the task graph (hand-computed), the view
and the rule verifier's constraints per variant, the ``oracles`` section with its held-out warning, and the
``--oracle-relations`` / ``--executable-constraints`` flags end to end on an imported LongDS-style folder."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.evaluation.cli import register
from harness.evaluation.evaluate import EvaluationConfig, EvaluationError, is_heldout, oracle_section
from harness.evaluation.report import oracle_lines
from harness.evaluation.suite import Suite
from harness.evaluation.summary import TaskInfo, relation_accuracy, summarize_variant, view_summary
from harness.manager.episode import EpisodeRecord
from harness.tasks.importers import ImportOptions, run_import

LONGDS = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "longds_shop"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"

GRAPH = TaskInfo(
    "multi_turn",
    {"1": (), "2": ("1",), "3": ("1",), "4": ("2", "3"), "5": ("2",)},
    relations={"1": "init", "2": "progress", "3": "branch", "4": "combine", "5": "invalidate"},
)


def rel(kind, *states):
    return [{"type": kind, "related_state_id": s} for s in states] or [{"type": "init", "related_state_id": None}]


def episode(key, commits, *, manager="rule", view=None, harness_turns=()):
    """``commits``: (turn, relations) in commit order; the i-th is state S<i>. A turn in ``harness_turns`` is
    committed by the harness fallback."""
    activations, states = [], []
    for index, (turn, relations) in enumerate(commits, start=1):
        actor = "harness" if turn in harness_turns else "policy"
        commit = {"parsed": {"name": "COMMIT_STATE", "arguments": {}}, "kind": "control", "legal": True}
        refused = {"parsed": {"name": "COMMIT_STATE", "arguments": {}}, "kind": "control", "legal": False}
        activations.append({"turn_id": turn, "actor": "policy", "actions": [refused]})
        activations.append({"turn_id": turn, "actor": actor, "actions": [commit]})
        states.append({"id": f"S{index}", "relations": relations})
    config = {"eval": {"key": key, "run": 0}, "manager": manager}
    if view is not None:
        config["manager_view"] = view
    return EpisodeRecord("t", key, config, True, activations=activations, states=states)


# A: every turn committed; turn 3 is related as progress where the graph says branch.
A = episode("A", [("1", rel("init")), ("2", rel("progress", "S1")), ("3", rel("progress", "S1")),
                  ("4", rel("combine", "S2", "S3")), ("5", rel("invalidate", "S2"))])  # fmt: skip
# B: turn 3 was abandoned (no state), so turn 4's gold is progress on turn 2's state alone; turn 2 says init; turn 5
# is committed by the harness fallback.
B = episode("B", [("1", rel("init")), ("2", rel("init")), ("4", rel("progress", "S2")),
                  ("5", rel("invalidate", "S2"))], harness_turns=("5",))  # fmt: skip
NONE = EpisodeRecord("t", "C", {"eval": {"key": "C", "run": 0}, "manager": "none"}, True)  # no manager: skipped


def test_relation_accuracy_per_declared_type_on_a_hand_computed_case():
    accuracy = relation_accuracy([A, B, NONE], {"t": GRAPH})
    # init: A ok, B ok; progress: A ok, B init; branch: A progress, B no state; combine: A ok, B progress on S2 (the
    # one committed upstream) ok; invalidate: A ok, B ok (harness commit) -> 7 of 10 turns
    assert accuracy == {
        "init": {"accuracy": 1.0, "n": 2},
        "progress": {"accuracy": 0.5, "n": 2},
        "branch": {"accuracy": 0.0, "n": 2},
        "invalidate": {"accuracy": 1.0, "n": 2},
        "combine": {"accuracy": 1.0, "n": 2},
        "overall": {"accuracy": 0.7, "n": 10},
    }
    assert relation_accuracy([NONE], {"t": GRAPH}) is None  # no committed state: nothing to score
    assert summarize_variant([A, B], {"t": GRAPH}, n_resamples=10)["relation_accuracy"] == accuracy


def test_the_view_and_the_rule_constraints_of_a_variant():
    text_only = {"oracle_relations": False, "executable_constraints": False}
    code = {"oracle_relations": False, "executable_constraints": True}
    rule = [episode("a", [], view=text_only), episode("b", [], view=text_only)]
    assert view_summary(rule) == {"manager_view": text_only, "rule_constraints": "text-only"}
    mixed = view_summary([episode("a", [], view=text_only), episode("b", [], view=code)])
    assert mixed == {"manager_view": {**text_only, "executable_constraints": "mixed"}, "rule_constraints": "mixed"}
    assert view_summary([episode("a", [], view=code)])["rule_constraints"] == "executable"
    assert view_summary([episode("a", [], manager="llm", view=code)])["rule_constraints"] is None
    legacy = view_summary([episode("a", [])])  # a record from before the switches
    assert legacy == {
        "manager_view": {"oracle_relations": None, "executable_constraints": None},
        "rule_constraints": None,
    }


def test_held_out_suites_and_the_oracle_warning(tmp_path):
    synthesized = tmp_path / "synth"
    synthesized.mkdir()
    (synthesized / "stats.json").write_text("{}")
    assert is_heldout("heldout-domain", Suite("heldout-domain", []))
    assert is_heldout("dabench-dev", Suite("dabench-dev", []))  # imported by name
    assert is_heldout(str(tmp_path), Suite(tmp_path.name, []))  # a folder no synthesis wrote: imported tasks
    assert not is_heldout(str(synthesized), Suite("synth", []))
    assert not is_heldout("smoke", Suite("smoke", []))
    on = SimpleNamespace(suite="heldout-seeds", oracle_relations=True, executable_constraints=False, runtime={})
    section = oracle_section(on, Suite("heldout-seeds", []), {})
    assert section["oracle_relations"] is True and section["executable_constraints"] is False
    assert section["heldout"] is True and "the task's dependency graph" in section["warning"]
    assert "constraints' code" not in section["warning"]
    lines = oracle_lines(section)
    assert lines[0].startswith("> **WARNING: ORACLES ON A HELD-OUT SUITE") and "ORACLES ON: the task graph" in lines[1]
    # an episode that ran with a switch counts even when the config (e.g. a bench's runtime dict) does not say so
    off = SimpleNamespace(suite="smoke", runtime={})
    record = EpisodeRecord("t", "e", {"executable_constraints": True, "constraint_code_public": True}, True)
    smoke = oracle_section(off, Suite("smoke", []), {"rule": [record]})
    assert smoke == {"oracle_relations": False, "executable_constraints": True, "oracle_checks": False,
                     "constraint_code_public_tasks": 1, "heldout": False, "warning": None}  # fmt: skip
    assert oracle_lines(oracle_section(off, Suite("smoke", []), {}))[0].startswith("Manager view: no oracles")


def test_the_switches_are_fields_not_runtime_options(tmp_path):
    config = EvaluationConfig(suite="smoke", out=str(tmp_path), oracle_relations=True)
    assert config.runtime_fields() == {
        "flow": None, "oracle_relations": True, "executable_constraints": False, "oracle_checks": False,
    }  # fmt: skip
    with pytest.raises(EvaluationError, match=r"set \['oracle_relations'\] with the fields of the same name"):
        EvaluationConfig(suite="smoke", out=str(tmp_path), runtime={"oracle_relations": True})


@pytest.fixture(scope="module")
def longds(tmp_path_factory):
    """The LongDS-style fixture imported as a folder suite (its graph: 2 <- 1 progress, 3 <- 1 branch, 4 <- 2
    branch, 5 <- 2, 3, 4 combine, 6 <- 2 invalidate; its questions name no earlier turn)."""
    out = tmp_path_factory.mktemp("longds")
    run_import("longds", ImportOptions(src=LONGDS, out=out, task_id="shop"))
    return out


def evaluate(capsys, suite, out, *flags):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["evaluate", "--suite", str(suite), "--manager", "rule", "--isolation", ISOLATION,
                              "--resamples", "50", "--out", str(out), *flags])  # fmt: skip
    assert args.func(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    return json.loads((out / "results.json").read_text())


def test_evaluate_flags_reach_the_episodes_and_an_imported_folder_warns(capsys, caplog, longds, tmp_path):
    with caplog.at_level("WARNING", logger="harness.evaluation.evaluate"):
        results = evaluate(capsys, longds, tmp_path / "oracles", "--oracle-relations", "--executable-constraints")
    oracles = results["oracles"]
    assert oracles["oracle_relations"] and oracles["executable_constraints"] and oracles["heldout"]
    assert "ORACLES ON A HELD-OUT SUITE" in oracles["warning"] and oracles["warning"] in caplog.text
    report = (tmp_path / "oracles" / "report.md").read_text()
    assert "> **WARNING: ORACLES ON A HELD-OUT SUITE" in report and "| rule | True | True | executable |" in report
    rule = results["variants"]["rule"]
    assert rule["manager_view"] == {"oracle_relations": True, "executable_constraints": True}
    assert rule["relation_accuracy"]["overall"] == {"accuracy": 1.0, "n": 6}  # related by the graph itself
    assert (results["config"]["oracle_relations"], results["config"]["executable_constraints"]) == (True, True)

    plain = evaluate(capsys, longds, tmp_path / "plain", "--no-report")
    assert plain["oracles"]["warning"] is None and plain["oracles"]["heldout"] is True
    rule = plain["variants"]["rule"]
    assert rule["manager_view"] == {"oracle_relations": False, "executable_constraints": False}
    assert rule["rule_constraints"] == "text-only"
    # no question names an earlier turn, so every state is init: right only for the one init turn
    accuracy = rule["relation_accuracy"]
    assert accuracy["overall"] == {"accuracy": pytest.approx(1 / 6), "n": 6} and accuracy["init"]["accuracy"] == 1.0
    assert accuracy["branch"] == {"accuracy": 0.0, "n": 2} and accuracy["combine"] == {"accuracy": 0.0, "n": 1}
