"""Decision points of the small-model study (training/study/decisions.py): which activations are chosen, how one is
played closed loop in the real manager env, the resumable per-arm file, and the metrics on hand-made rows."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from training.study.decision_metrics import decision_metrics, harness_confirmed, own_control
from training.study.decisions import DECISION_CONTROLS, decision_points, play_decision, point_key, score_decisions


class Silent:
    """A manager that never answers (every response empty)."""

    calls = 0

    def respond(self, inp) -> str:
        self.calls += 1
        return ""


def test_decision_points_alternate_kinds_seeded_and_spread_over_tasks(pool) -> None:
    from training.rl.rollout import start_points

    every = [p for p in start_points(pool, ("turn_end",)) if p.gold_control in DECISION_CONTROLS]
    kinds = Counter(p.gold_control for p in every)
    assert (
        kinds["REPAIR"] >= 2 and kinds["FINALIZE_RELATIONS"] > kinds["REPAIR"]
    )  # the fixture has both, repairs rarer
    points = decision_points(pool, 4, seed=0)
    assert [p.gold_control for p in points] == ["REPAIR", "FINALIZE_RELATIONS"] * 2
    assert points == decision_points(pool, 4, seed=0) and len(set(map(point_key, points))) == 4
    assert decision_points(pool, 4, seed=1) != points  # another seed, another draw
    many = decision_points(pool, 1000, seed=0)
    assert len(many) == len(every) and Counter(p.gold_control for p in many) == kinds  # all, once each
    # each kind covers every task that has one before any task gives a second point
    for control in DECISION_CONTROLS:
        tasks = [pool.entry(p.episode_id).task_id for p in many if p.gold_control == control]
        distinct = len(set(tasks))
        assert len(set(tasks[:distinct])) == distinct
    odd = decision_points(pool, 3, seed=0)
    assert Counter(p.gold_control for p in odd) == {"REPAIR": 2, "FINALIZE_RELATIONS": 1}  # REPAIR rounds up
    with pytest.raises(ValueError, match="n=0"):
        decision_points(pool, 0)


def test_the_gold_manager_at_a_decision_point_repairs_exactly_where_gold_did(pool, env) -> None:
    points = decision_points(pool, 4, seed=0)
    # the gold manager's checks take up to 7 tool calls, then it decides
    rows = [play_decision(env, p, pool.entry(p.episode_id).gold_policy(), max_responses=8) for p in points]
    for point, row in zip(points, rows, strict=True):
        assert row["control"] == point.gold_control and row["repaired"] == (point.gold_control == "REPAIR")
        assert all(a["legal"] for a in row["actions"]) and row["actions"][-1]["name"] == point.gold_control
        assert row["task_id"] == pool.entry(point.episode_id).task_id and not row["truncated"]
        assert row["context"] == [] and row["actions"][0]["name"] == "check_execution"  # it wrote its own checks
    m = decision_metrics(rows, seed=0, n=200)
    assert (m["points"], m["repair_points"]) == (4, 2)
    assert m["legal_action_rate"]["value"] == 1.0 and m["control_match"]["value"] == 1.0
    assert (m["repair_precision"], m["repair_recall"], m["repair_f1"]["value"]) == (1.0, 1.0, 1.0)
    assert m["false_repair_rate"]["value"] == 0.0
    assert m["controls"] == {"FINALIZE_RELATIONS": 2, "REPAIR": 2}
    # taking over at the gold's decision: the gold's checks are the context, the arm's one response is the decision
    for point, whole in zip(points, rows, strict=True):
        row = play_decision(env, point, pool.entry(point.episode_id).gold_policy(), 1, "decision", group="g")
        assert [a["name"] for a in row["actions"]] == [point.gold_control] and row["actions"][0]["legal"]
        assert [c["name"] for c in row["context"]] == [a["name"] for a in whole["actions"][:-1]]
        assert row["reward"] == pytest.approx(whole["reward"]) and row["key"] == f"g/{point_key(point)}"
    assert not any(row["harness_confirmed"] for row in rows)
    # a manager that says nothing: its responses count (illegal) up to the budget, then the harness confirms for it
    silent = Silent()
    row = play_decision(env, points[0], silent, max_responses=2)
    assert silent.calls == 2 and [a["legal"] for a in row["actions"]] == [False, False]
    assert row["control"] is None and not row["repaired"] and row["harness_confirmed"]
    # the gold manager's repair is worth more than the confirmation at the same point (same episode): the gold's
    # later decision at that pause is not credited to the undecided arm
    assert points[0].gold_control == "REPAIR" and rows[0]["reward"] > row["reward"]
    # the runtime's action budget ends the activation first: the harness confirms in the next activation of the pause
    silent = Silent()
    late = play_decision(env, points[0], silent, max_responses=50)
    assert silent.calls == env.runtime_config.max_actions and late["harness_confirmed"]
    for term in ("intervention", "outcome"):  # the same decision (confirm); more refused blanks cost protocol
        assert late["reward_terms"][term] == pytest.approx(row["reward_terms"][term])
    assert late["reward"] < rows[0]["reward"]
    silent = Silent()
    row = play_decision(env, points[0], silent, max_responses=1, takeover="decision")
    assert silent.calls == 1 and row["context"] and row["control"] is None and row["harness_confirmed"]
    assert row["reward"] < rows[0]["reward"]
    with pytest.raises(ValueError, match="takeover=.x. is not understood"):
        play_decision(env, points[0], silent, max_responses=1, takeover="x")


def test_score_decisions_appends_and_resumes(pool, env, tmp_path: Path) -> None:
    points = decision_points(pool, 2, seed=0)
    path = tmp_path / "arm" / "decisions.jsonl"
    first = score_decisions(path, env, points[:1], Silent(), max_responses=1)
    assert len(first) == 1 and len(path.read_text().splitlines()) == 1

    class Boom:
        def respond(self, inp):
            raise AssertionError("a played point must not be played again")

    with pytest.raises(AssertionError, match="played again"):
        score_decisions(path, env, points, Boom(), max_responses=1)  # the second point is new
    silent = Silent()
    rows = score_decisions(path, env, points, silent, max_responses=1)
    assert silent.calls == 1 and [r["key"] for r in rows] == [point_key(p) for p in points]
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == [r["key"] for r in rows]


def _row(key: str, task: str, gold: str, control: str | None, legal: list[bool], reward: float) -> dict:
    actions = [{"name": "x", "legal": v} for v in legal]
    if control is not None:
        actions[-1]["name"] = control  # the model's own control ends its actions
    return {"key": key, "task_id": task, "gold": gold, "control": control, "repaired": control == "REPAIR",
            "actions": actions, "reward": reward}  # fmt: skip


def test_decision_metrics_by_hand() -> None:
    rows = [
        _row("a@1", "t1", "REPAIR", "REPAIR", [True, True], 1.0),  # TP
        _row("b@2", "t1", "REPAIR", "FINALIZE_RELATIONS", [False, True], 0.0),  # FN
        _row("c@3", "t2", "FINALIZE_RELATIONS", "REPAIR", [True], -1.0),  # FP
        _row("d@4", "t2", "FINALIZE_RELATIONS", "FINALIZE_RELATIONS", [True], 1.0),  # TN
        _row("e@5", "t2", "FINALIZE_RELATIONS", None, [False, False], 0.5),  # TN, no control
    ]
    rows[-1]["harness_confirmed"] = True
    m = decision_metrics(rows, seed=0, n=300)
    assert m["decided"]["value"] == pytest.approx(4 / 5) and m["harness_confirmed"] == 1
    assert m["legal_action_rate"]["value"] == pytest.approx(5 / 8)
    assert m["control_match"]["value"] == pytest.approx(2 / 5)
    assert (m["repair_precision"], m["repair_recall"]) == (0.5, 0.5)
    assert m["repair_f1"]["value"] == pytest.approx(2 / (2 + 1 + 1))
    assert m["false_repair_rate"]["value"] == pytest.approx(1 / 3)
    assert m["reward_total"]["value"] == pytest.approx(1.5 / 5)
    assert m["controls"] == {"FINALIZE_RELATIONS": 2, "None": 1, "REPAIR": 2}
    lo, hi = m["repair_f1"]["ci95"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    # the hier manager's tier 0 confirming a rejected reply: the harness's confirmation, not the model's decision
    tier0 = _row("f@6", "t3", "REPAIR", None, [], 0.3)
    tier0["actions"] = [{"name": "FINALIZE_RELATIONS", "legal": True, "actor": "harness"}]
    assert own_control(tier0) is None and harness_confirmed(tier0) and not harness_confirmed(rows[0])
    assert decision_metrics([tier0], seed=0, n=50)["controls"] == {"None": 1}


def test_a_study_refuses_data_synthesized_with_another_config(tmp_path: Path) -> None:
    from training.study.data import synthesize_split
    from training.study.driver import Study, StudyConfig

    testset = {"domains": ["logistics"], "question_writer": "b", "tasks_per_domain": 6, "seed": 2000}
    study = Study(StudyConfig(arms=["none"], testset=testset), tmp_path)
    held = study.data_dir("test")
    held.mkdir(parents=True)
    (held / "stats.json").write_text(json.dumps({"config": {"tasks_per_domain": 2, "seed": 2000}}))
    with pytest.raises(ValueError, match=r"tasks_per_domain=2 vs 6.*another --out"):
        synthesize_split(study, "test")
    same = {"config": {**testset, "validation_fraction": 0.0}}
    (held / "stats.json").write_text(json.dumps(same))
    assert synthesize_split(study, "test") == same  # the same config: resumed, not re-synthesized
