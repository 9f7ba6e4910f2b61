"""The rollout-group record of a DAPO run (training/rl/rollout_groups.py): what each trained group sampled, its rewards
centered on the group's mean, resumed runs recorded once, and the summary by gold control and sampled decision."""

from __future__ import annotations

import json

import pytest

from training.rl.rollout import Rollout, StartPoint
from training.rl.rollout_groups import (
    group_record,
    read_records,
    rollout_decision,
    summarize_groups,
    summary_lines,
    truncate_records,
)
from training.rl.sampling import Group


def act(name, legal=True, variable=None):
    return {"name": name, "legal": legal, "error_variable": variable}


def test_the_decision_is_the_first_legal_control_else_undecided_or_illegal():
    assert rollout_decision([act("run_probe"), act("REPAIR", variable="sales")]) == "REPAIR"
    assert rollout_decision([act("REPAIR", legal=False), act("FINALIZE_RELATIONS")]) == "FINALIZE_RELATIONS"
    assert rollout_decision([act("run_probe"), act("run_probe")]) == "undecided"  # the harness confirmed
    assert rollout_decision([act("run_probe"), act(None, legal=False)]) == "illegal"
    assert rollout_decision([]) == "illegal"


def group(gold, rewards, decisions, overlong=0.0):
    rollouts = []
    for reward, decision in zip(rewards, decisions, strict=True):
        r = Rollout("ep-1", activation=3, actions=[act(decision, legal=decision != "bad")], env_reward=reward)
        r.overlong = overlong
        r.extend([5, 6, 7], model=True)
        rollouts.append(r)
    return Group(StartPoint("ep-1", 3, gold), rollouts)


def test_a_group_record_centers_each_reward_on_the_group_mean():
    record = group_record(group("REPAIR", [0.9, 0.5, 0.5, 0.5], ["REPAIR"] + ["FINALIZE_RELATIONS"] * 3, -0.1), 4)
    assert (record["step"], record["episode_id"], record["activation"], record["gold_control"]) == (
        4,
        "ep-1",
        3,
        "REPAIR",
    )
    assert record["uniform"] is False and record["trained"] is True and record["from_buffer"] is False
    first = record["rollouts"][0]
    assert first["decision"] == "REPAIR" and first["reward"] == pytest.approx(0.8) and first["env_reward"] == 0.9
    assert [r["centered"] for r in record["rollouts"]] == pytest.approx([0.3, -0.1, -0.1, -0.1])
    assert first["model_tokens"] == 3 and first["actions"] == [act("REPAIR")] and first["stop_reason"] == ""
    assert json.loads(json.dumps(record)) == record  # one JSON line
    assert group_record(group("REPAIR", [0.5, 0.5], ["bad", "bad"]), 1)["uniform"] is True


def test_the_summary_says_which_decision_dapo_pushes_down_where(tmp_path):
    pushed = group("REPAIR", [0.2, 0.6, 0.6, 0.6], ["REPAIR"] + ["FINALIZE_RELATIONS"] * 3)
    records = [
        group_record(pushed, 1, trained=False),  # played for step 1, kept in the buffer
        group_record(group("FINALIZE_RELATIONS", [0.7, 0.7, 0.7, 0.7], ["FINALIZE_RELATIONS"] * 4), 1),
        group_record(group("REPAIR", [0.5] * 4, ["bad"] * 4), 1, trained=False),  # uniform: dropped
        group_record(pushed, 2, from_buffer=True),  # trained at step 2
    ]
    rows = {(r["gold_control"], r["decision"]): r for r in summarize_groups(records)}
    repair = rows[("REPAIR", "REPAIR")]
    assert (repair["played"], repair["trained_informative"]) == (1, 1)  # the buffered group counts once each way
    assert repair["mean_reward"] == pytest.approx(0.2) and repair["mean_centered"] == pytest.approx(-0.3)
    confirm = rows[("FINALIZE_RELATIONS", "FINALIZE_RELATIONS")]
    assert (confirm["played"], confirm["trained_informative"], confirm["mean_centered"]) == (4, 0, 0)
    dropped = rows[("REPAIR", "illegal")]
    assert (dropped["played"], dropped["trained_informative"], dropped["mean_centered"]) == (4, 0, None)
    table = summary_lines(summarize_groups(records))
    assert table[2] == "| FINALIZE_RELATIONS | FINALIZE_RELATIONS | 4 | 0 | 0.700 | +0.000 |"
    assert "| REPAIR | illegal | 4 | 0 | 0.500 | n/a |" in table
    assert summary_lines([]) == ["(no rollout group recorded)"]


def test_a_resumed_run_drops_the_steps_after_its_checkpoint_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "rollout_groups.jsonl"
    assert read_records(path) == [] and truncate_records(path, 0) == 0  # nothing recorded yet
    lines = [json.dumps({"step": s, "rollouts": []}) for s in (1, 1, 2, 3)]
    path.write_text("\n".join(lines) + "\n")
    assert truncate_records(path, 2) == 1
    assert [r["step"] for r in read_records(path)] == [1, 1, 2]
    path.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ValueError, match=r"rollout_groups.jsonl:2: not a JSON line"):
        read_records(path)
    path.write_text('["a list"]\n')
    with pytest.raises(ValueError, match=r":1: not a rollout-group record"):
        read_records(path)


def test_the_trainer_records_what_it_played_trained_or_dropped_and_the_buffered_groups_it_trains(tmp_path):
    from types import SimpleNamespace

    from training.rl.trainer import ManagerRollouts

    informative = group("REPAIR", [0.2, 0.6, 0.6, 0.6], ["REPAIR"] + ["FINALIZE_RELATIONS"] * 3)
    dropped = group("REPAIR", [0.5] * 4, ["bad"] * 4)
    buffered = group("FINALIZE_RELATIONS", [0.1, 0.9, 0.9, 0.9], ["REPAIR"] + ["FINALIZE_RELATIONS"] * 3)
    rollouts = SimpleNamespace(
        played=[informative, dropped], records_path=None,
        config=SimpleNamespace(output_dir=str(tmp_path)), args=SimpleNamespace(reward_atol=1e-6),
    )  # fmt: skip
    (tmp_path / "rollout_groups.jsonl").write_text(json.dumps({"step": 9, "rollouts": []}) + "\n")  # an older run's
    ManagerRollouts.record(rollouts, [buffered, informative], done_steps=2)
    records = read_records(tmp_path / "rollout_groups.jsonl")
    assert [(r["step"], r["uniform"], r["trained"], r["from_buffer"]) for r in records] == [
        (3, False, True, False),  # played and trained
        (3, True, False, False),  # played and dropped
        (3, False, True, True),  # played for an earlier step, trained now
    ]


def test_rollouts_that_stopped_at_the_context_cap_are_counted_and_recorded():
    from training.rl.metrics import rollout_metrics
    from training.rl.sampling import GatherStats

    class NoFaults:
        def entry(self, episode_id):
            return episode_id

        def fault_info(self, entry):
            return None

    played = group("REPAIR", [0.9, 0.5, 0.5, 0.5], ["REPAIR"] + ["FINALIZE_RELATIONS"] * 3)
    played.rollouts[1].stop_reason = "context_cap"
    metrics = rollout_metrics([played], GatherStats(groups_played=1, rounds=1), NoFaults())
    assert metrics["dapo/context_capped_frac"] == 0.25
    assert [r["stop_reason"] for r in group_record(played, 1)["rollouts"]] == ["", "context_cap", "", ""]
