"""The study's episode metrics, targets and record (training/study/episode_metrics.py, study_targets.py, record.py)
on a tiny hand-built case: two 3-turn tasks (turn 2 depends on turn 1), a clean and a faulted episode each."""

from __future__ import annotations

import json

import pytest

from harness.evaluation.summary import TaskInfo
from harness.manager.episode import EpisodeRecord
from training.study.episode_metrics import arm_facts, arm_metrics, compare, downstream
from training.study.record import arm_settings, build_results, load_arm_records, write_record
from training.study.study_targets import targets

N = 300
GRAPH = {"1": (), "2": ("1",), "3": ()}
TASKS = {t: TaskInfo("multi_turn", GRAPH) for t in ("T1", "T2")}


def _record(task, fault=None, repairs=(), wrong=(), error=None):
    key = f"{task}/clean" if fault is None else f"{task}/fault-1-{fault}-wrong_topk"
    turns = {t: {"correct": t not in wrong} for t in GRAPH}
    return EpisodeRecord(
        task_id=task,
        episode_id=key,
        config={"eval": {"key": key, "run": 0, "fault_turn": fault, "fault_detectable": fault is not None}},
        simulated=True,
        repairs=[{"turn_id": t, "mode": "light"} for t in repairs],
        grade={"valid": True, "score": 0.0, "details": {"turns": turns}},
        error=error,
    )


def _none():
    return [_record("T1"), _record("T1", "1", wrong=("1", "2")), _record("T2"), _record("T2", "3", wrong=("3",))]


def _sft():
    # T1 clean: a false repair of turn 3; T1 fault at 1: repaired (and turn 2, downstream: neither way);
    # T2 fault at 3: missed. TP 1, FP 1, FN 1.
    return [
        _record("T1", repairs=("3",)),
        _record("T1", "1", repairs=("1", "2"), wrong=("1",)),
        _record("T2"),
        _record("T2", "3", wrong=("3",)),
        _record("T2", "3", error={"type": "RuntimeError", "message": "x"}),  # errored: not an episode
    ]


def test_downstream_follows_the_declared_graph_transitively() -> None:
    assert downstream("1", {"1": (), "2": ("1",), "3": ("2",), "4": ()}) == {"2", "3"}
    assert downstream("3", GRAPH) == set()


def test_arm_metrics_on_the_tiny_case() -> None:
    m = arm_metrics(arm_facts(_sft(), TASKS), seed=0, n_resamples=N)
    assert (m["episodes"], m["tasks"], m["faulted_episodes"], m["clean_episodes"]) == (4, 2, 2, 2)
    assert m["counts"] == {"true_positive": 1, "false_positive": 1, "false_negative": 1, "clean_turns": 9}
    assert (m["repair_precision"], m["repair_recall"], m["repair_f1"]["value"]) == (0.5, 0.5, 0.5)
    assert m["false_repair_rate"]["value"] == pytest.approx(1 / 9)
    assert m["turn_accuracy"]["value"] == pytest.approx(10 / 12)
    assert m["dcr"]["value"] == 0.0  # turn 2 after a wrong turn 1 was right: contaminated error 0, clean error 0
    # rewards (TP - FP) / 3: -1/3, +1/3, 0, 0
    assert m["episode_reward"]["value"] == pytest.approx(0.0)
    for name in ("repair_f1", "false_repair_rate", "turn_accuracy", "episode_reward"):
        low, high = m[name]["ci95"]
        assert low <= m[name]["value"] <= high
    base = arm_metrics(arm_facts(_none(), TASKS), seed=0, n_resamples=N)
    assert base["repair_f1"]["value"] == 0.0 and base["false_repair_rate"]["value"] == 0.0
    assert base["dcr"]["value"] == 1.0 and base["turn_accuracy"]["value"] == 0.75


def test_paired_differences_pair_only_the_shared_episodes() -> None:
    diff = compare(arm_facts(_none(), TASKS), arm_facts(_sft(), TASKS), seed=0, n_resamples=N)
    assert (diff["episodes"], diff["tasks"]) == (4, 2)
    assert diff["repair_f1"]["diff"] == 0.5 and (diff["repair_f1"]["a"], diff["repair_f1"]["b"]) == (0.0, 0.5)
    assert diff["false_repair_rate"]["diff"] == pytest.approx(1 / 9)
    assert diff["turn_accuracy"]["diff"] == pytest.approx(1 / 12)
    assert diff["dcr"]["diff"] == -1.0 and diff["dcr"]["ci95"] == [-1.0, -1.0]
    assert diff["episode_reward"]["diff"] == pytest.approx(0.0)
    for name in ("repair_f1", "false_repair_rate", "turn_accuracy", "episode_reward"):
        low, high = diff[name]["ci95"]
        assert low <= diff[name]["diff"] <= high
    # a model arm that played T1 only: paired on T1's two episodes
    subset = compare(arm_facts(_none(), TASKS), arm_facts(_sft()[:2], TASKS), seed=0, n_resamples=N)
    assert (subset["episodes"], subset["tasks"]) == (2, 1)
    assert subset["repair_f1"]["diff"] == pytest.approx(2 / 3)  # 2TP/(2TP+FP+FN) = 2/3 against 0
    assert compare(arm_facts(_none()[:2], TASKS), arm_facts(_sft()[2:], TASKS), n_resamples=N) is None


def _results(tmp_path, arms=("none", "rule", "read", "gold-specs", "prompt", "sft", "sft-dapo")):
    records = {arm: _sft() if arm.startswith(("sft", "gold")) else _none() for arm in arms}
    checkpoint = tmp_path / "sft"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "manager.json").write_text(json.dumps({"stateguard_manager": 1, "policy": "hier"}))
    settings = {arm: arm_settings(arm) for arm in arms} | {
        "sft": arm_settings(f"hier:llm-hf:{checkpoint}", checkpoint)
    }
    return build_results(
        records,
        TASKS,
        question="Does SFT teach SmolLM2 to write the checks a turn needs?",
        testset={"id": "testset-1", "sha256": "ab" * 32, "editions_seen": 1},
        settings=settings,
        timing={"evaluate": 12.5, "total": 12.5},  # a resumed study reads back its last total: not summed again
        decisions={
            "digest-rule": [
                {"key": "p", "task_id": "T1", "gold": "REPAIR", "repaired": True, "actions": [], "reward": 1.0}
            ]
        },  # fmt: skip
        n_resamples=N,
    )


def test_the_record_is_written_with_every_arm_the_oracle_label_and_the_targets(tmp_path) -> None:
    folder = tmp_path / "eval" / "episodes"
    folder.mkdir(parents=True)
    (folder / "hier_llm-hf.jsonl").write_text("".join(r.to_json() + "\n" for r in _sft()))
    assert len(arm_facts(load_arm_records(tmp_path / "eval", "hier:llm-hf"), TASKS)) == 4  # errored one dropped
    results = _results(tmp_path)
    assert list(results["arms"]) == ["none", "rule", "read", "gold-specs", "prompt", "sft", "sft-dapo"]
    assert results["arms"]["sft"]["settings"]["manager.json"] == {"stateguard_manager": 1, "policy": "hier"}
    assert results["timing"] == {"evaluate": 12.5, "total": 12.5}
    assert results["testset"]["episodes"] == 4 and results["testset"]["faulted_episodes"] == 2
    pairs = [(c["a"], c["b"]) for c in results["comparisons"]]
    assert pairs[:6] == [("none", a) for a in ("rule", "read", "gold-specs", "prompt", "sft", "sft-dapo")]
    assert pairs[6:] == [("prompt", "sft"), ("read", "sft"), ("gold-specs", "sft"), ("sft", "sft-dapo")]
    status = {t["id"]: t["status"] for t in results["targets"]}
    assert status["false-repairs-sft"] == "missed"  # 1/9 > 5 %
    assert status["f1-sft-gold"] == "met"  # same episodes: gap 0
    assert status["dcr-sft-none"] == "met"  # sft - none DCR -1, CI [-1, -1]
    f1 = next(t for t in results["targets"] if t["id"] == "f1-sft-prompt")
    assert (f1["status"], f1["value"]["diff"], f1["reason"]) == ("missed", 0.5, "the CI includes 0")  # T2 alone: 0
    dapo = next(t for t in results["targets"] if t["id"] == "reward-dapo-sft")
    assert (dapo["status"], dapo["value"]["ci95"], dapo["reason"]) == ("missed", [0.0, 0.0], "the CI includes 0")
    paths = write_record(tmp_path / "record", results)
    assert sorted(p.name for p in paths) == sorted(
        ["results.json", "timing.json", "report.md", "repair_f1.png", "false_repairs.png", "dcr.png"]
    )
    report = (tmp_path / "record" / "report.md").read_text()
    for arm in ("none", "rule", "read", "prompt", "sft", "sft-dapo", "digest-rule"):
        assert f"| {arm} |" in report
    assert "| gold-specs (ORACLE upper bound) |" in report and "SIMULATED" in report
    assert "testset-1" in report and "Editions that have seen it (this one included): 1" in report
    assert json.loads((tmp_path / "record" / "results.json").read_text())["targets"] == results["targets"]


def test_targets_say_n_a_for_an_arm_that_did_not_run_and_keep_the_notes() -> None:
    sft = {"metrics": {"false_repair_rate": {"value": 0.04, "ci95": [0.0, 0.1]}}}
    results = {
        "arms": {"none": {"metrics": {}}, "prompt": {"metrics": {}}, "sft": sft},
        "comparisons": [
            {"a": "prompt", "b": "sft", "repair_f1": {"diff": 0.3, "ci95": [0.1, 0.5], "a": 0.2, "b": 0.5}},
            {"a": "sft", "b": "none", "dcr": {"diff": 0.2, "ci95": [0.05, 0.3], "a": 0.1, "b": 0.3}},
        ],
        "unavailable": {"sft-dapo": "DAPO not run: no GPU"},
    }  # fmt: skip
    rows = {t["id"]: t for t in targets(results, notes={"reward-dapo-sft": "no device"})}
    assert rows["f1-sft-prompt"]["status"] == "met" and rows["false-repairs-sft"]["status"] == "met"
    assert rows["f1-sft-read"]["status"] == "n/a" and rows["f1-sft-read"]["reason"] == "arm read did not run"
    # stored as none - sft: read back as sft - none, its CI flipped
    assert rows["dcr-sft-none"]["status"] == "met" and rows["dcr-sft-none"]["value"]["ci95"] == [-0.3, -0.05]
    dapo = rows["reward-dapo-sft"]
    assert dapo["status"] == "n/a" and "DAPO not run: no GPU" in dapo["reason"] and dapo["note"] == "no device"


def test_a_fault_not_marked_detectable_is_neither_a_hit_a_miss_nor_a_clean_turn() -> None:
    record = _record("T1", "1", repairs=("1", "3"))
    record.config["eval"]["fault_detectable"] = False
    (facts,) = arm_facts([record], TASKS)
    assert (facts.scored_fault, facts.clean_turns, facts.tp, facts.fn, facts.fp) == (None, ("3",), 0, 0, 1)
    assert facts.reward == pytest.approx(-1 / 3)


def test_testset_tasks_reads_each_tasks_graph() -> None:
    from pathlib import Path

    from harness.evaluation.suite import Suite
    from training.study.record import testset_tasks

    retail = Path(__file__).resolve().parents[3] / "harness" / "builtin_tasks" / "retail-sales"
    (info,) = testset_tasks(Suite("t", [retail])).values()
    assert info.kind == "multi_turn" and info.depends_on["5"] == ("3", "4")
    assert downstream("2", info.depends_on) == {"4", "5"}
