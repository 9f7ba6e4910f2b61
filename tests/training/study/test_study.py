"""The small-model study: config checks, the metric math on hand-made episodes, and the miniature study
end to end (slow: it converts SmolLM2 once, synthesizes, trains every arm a few steps and plays episodes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from training.study.driver import ARMS, StudyConfig, first_turns_suite
from training.study.report import arm_metrics, paired

REPO = Path(__file__).resolve().parents[3]
STUDY_CONFIGS = sorted((REPO / "training" / "study" / "configs").glob("*.yaml"))


def test_study_configs_load() -> None:
    """Each study config loads through the study's command line, and the configs it names exist."""
    from harness.config_cli import parse_config
    from training.study.cli import make_parser

    assert [p.name for p in STUDY_CONFIGS] == ["smollm2-mini.yaml", "smollm2.yaml"]
    for path in STUDY_CONFIGS:
        (config,) = parse_config(make_parser().parse_args(["--config", str(path)]))
        assert config == StudyConfig.from_yaml(path)
        for name in (config.sft_full_config, config.sft_lora_config, config.sft_tiny_config, config.rl_config):
            assert config.path(name).is_file(), f"{path}: {name} does not exist"
        mini = path.name == "smollm2-mini.yaml"  # without DAPO (minutes a step) and the extra SFT launches (time)
        # rl-only: left out of both for its measured reason (the full config says it)
        left_out = ("sft-full", "tiny-sft", "rl-only") + (("sft-dapo", "windowed", "hier") if mini else ())
        assert config.arms == [a for a in ARMS if a not in left_out]
        assert config.decision_takeover == "decision"
        assert config.prompt_view == "bare"  # SFT data, inference and DAPO rollouts alike
        # the SFT's loss is on each sample's control action (the decision), the checks and probes before it context
        assert config.sft_args[config.sft_args.index("--last_turn_only") + 1] == "true"
        assert config.heldout_synthesis.get("domains") is None  # the split's domain is forced to the held-out one
        assert len(config.heldout_fault_types) == 2 and "fault_types" not in config.train_synthesis  # set by the study


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"arms": ["none", "gpt"]}, "unknown arm"),
        ({"arms": ["sft-dapo"]}, "trained from sft-lora"),
        ({"decision_takeover": "x"}, "decision_takeover='x'"),
        ({"eval_split": "heldout-seen"}, "needs heldout_seen_synthesis"),
        ({"eval_faulted_only": True}, "needs eval_turns"),
        ({"heldout_fault_types": ["typo"]}, "heldout_fault_types: unknown"),
        ({"comparisons": [["none"]]}, "not a pair"),
        ({"exact_match_samples": 0}, "at least 1"),
        ({"margin_split": "heldout"}, "margin_split='heldout': use train or validation"),
        ({"margin_limit": 0}, "margin_limit=0 must be positive"),
        ({"margin_split": None, "calibrate_decisions": True}, "calibrate_decisions: true needs margin_split"),
        ({"decision_bias": "both"}, "decision_bias='both': use pair or token"),
        ({"decide_after_probe": True}, "set constrained_decoding: true"),
    ],
)
def test_bad_study_configs_name_the_fix(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StudyConfig(**overrides)


@pytest.mark.parametrize("prompt_view", ["bare", "full"])
def test_the_dapo_arm_launches_rl_with_the_study_view(tmp_path: Path, monkeypatch, prompt_view: str) -> None:
    """The rollouts see what the SFT taught and the arms serve: scripts/rl.py gets --prompt_view."""
    from training.study.driver import Study, train_dapo

    launched = []
    monkeypatch.setattr(Study, "launch", lambda self, arm, script, config, args: launched.append((script, args)))
    study = Study(StudyConfig(out=str(tmp_path), prompt_view=prompt_view, rl_args=["--max_steps", "2"]), tmp_path)
    sft = str(study.model_dir("sft-lora"))
    assert train_dapo(study, "sft-dapo") == {"checkpoint": str(study.model_dir("sft-dapo")), "start": sft}
    assert train_dapo(study, "rl-only")["start"] == str(study.model_dir("prompt"))  # SmolLM2 as converted
    (script, args), (_, rl_only) = launched
    assert script == "rl.py" and args[args.index("--prompt_view") + 1] == prompt_view
    assert args[args.index("--model_name_or_path") + 1] == sft
    assert rl_only[rl_only.index("--model_name_or_path") + 1] == str(study.model_dir("prompt"))
    # the rollouts start where the decision points do: the gold's repair-or-confirm check activations, handed over
    at = args.index("--gold_controls")
    assert args[at + 1 : at + 3] == ["REPAIR", "FINALIZE_RELATIONS"]
    assert args[args.index("--takeover") + 1] == "decision" and args[args.index("--event_types") + 1] == "turn_end"
    assert args[-2:] == ["--max_steps", "2"]


def _facts(key: str, task: str, *, legal: list[bool], repaired: list[str], faulted: str | None, total: float) -> dict:
    turns = ["1", "2", "3"]
    return {
        "task_id": task,
        "key": key,
        "legal": legal,
        "repaired": repaired,
        "faulted": faulted,
        "turns": turns,
        "correct": [True, faulted is None, True],
        "downstream": [] if faulted is None else [True, False][: 3 - turns.index(faulted)],
        "reward": {"total": total, "protocol": 1.0, "outcome": None},
    }


def test_arm_metrics_by_hand() -> None:
    facts = [
        _facts("t1/fault-1", "t1", legal=[True, True, False, True], repaired=["2"], faulted="2", total=1.0),  # TP
        _facts("t1/clean", "t1", legal=[True, True], repaired=["3"], faulted=None, total=-1.0),  # FP
        _facts("t2/fault-2", "t2", legal=[True, False], repaired=[], faulted="1", total=0.0),  # FN
        _facts("t2/clean", "t2", legal=[True, True], repaired=[], faulted=None, total=0.5),
    ]
    exact = [
        {"task_id": "t1", "match": True, "parsed": True, "gold": "REPAIR", "predicted": "REPAIR"},  # TP
        {"task_id": "t2", "match": False, "parsed": False, "gold": "REPAIR", "predicted": None},  # FN
        {"task_id": "t2", "match": True, "parsed": True, "gold": "COMMIT_STATE", "predicted": "COMMIT_STATE"},
    ]
    m = arm_metrics(facts, exact, seed=0, n=200)
    assert m["legal_action_rate"]["value"] == pytest.approx(8 / 10)
    assert m["exact_match"]["value"] == pytest.approx(2 / 3) and m["parse_rate_exact"] == pytest.approx(2 / 3)
    assert (m["repair_precision"], m["repair_recall"]) == (0.5, 0.5)
    assert m["repair_f1"]["value"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 1))  # 2TP / (2TP + FP + FN)
    assert m["false_repair_rate"]["value"] == pytest.approx(1 / 10)  # 12 turns, 2 faulted, 1 false repair
    assert m["reward"] == {"protocol": 1.0, "outcome": None, "total": pytest.approx(0.125)}
    assert m["repair_f1_exact"]["value"] == pytest.approx(2 / 3)  # teacher-forced: 2TP / (2TP + FN), no FP
    false_repair = {"task_id": "t1", "match": False, "parsed": True, "gold": "COMMIT_STATE", "predicted": "REPAIR"}
    assert arm_metrics(facts, [*exact, false_repair], seed=0, n=50)["repair_f1_exact"]["value"] == pytest.approx(0.5)
    assert arm_metrics(facts, exact[2:], seed=0, n=50)["repair_f1_exact"]["value"] is None  # no repair either side
    lo, hi = m["repair_f1"]["ci95"]
    assert 0.0 <= lo <= m["repair_f1"]["value"] <= hi <= 1.0


def test_paired_differences_match_by_id() -> None:
    a = {"x": ("t1", 0.0), "y": ("t1", 1.0), "z": ("t2", 0.0), "only-a": ("t3", 1.0)}
    b = {"x": ("t1", 1.0), "y": ("t1", 1.0), "z": ("t2", 1.0), "only-b": ("t3", 0.0)}
    result = paired(a, b, seed=0, n=500)
    assert result["diff"] == pytest.approx(2 / 3) and result["n"] == 3 and result["tasks"] == 2
    assert paired(a, {"w": ("t1", 1.0)}, seed=0, n=10) is None


def test_first_turns_suite_cuts_tasks_and_their_faults(tmp_path: Path) -> None:
    from harness.evaluation.suite import resolve_suite
    from harness.tasks import grade_task, load_task

    src = tmp_path / "suite"
    shutil.copytree(REPO / "harness" / "builtin_tasks" / "retail-sales", src / "tasks" / "retail-sales")
    whole = load_task(src / "tasks" / "retail-sales")
    faults = [{"task_id": whole.id, "turn_id": t, "fault_type": "rounding", "code": "x = 1"} for t in ("1", "4")]
    (src / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in faults))
    out = first_turns_suite(src, tmp_path / "cut", 2)
    task = load_task(out / "tasks" / "retail-sales")
    assert [t.turn_id for t in task.turns] == [t.turn_id for t in whole.turns[:2]] and len(whole.turns) > 2
    answers = task.load_answers()
    assert list(answers) == ["1", "2"]
    assert grade_task(task, {k: v.answer for k, v in answers.items()}).score == 1.0  # the references still grade
    suite = resolve_suite(str(out))
    assert [(f.task_id, f.turn_id) for f in suite.faults] == [(whole.id, "1")]  # turn 4's fault is cut away
    assert len(suite.episodes(with_faults=True)) == 2  # the clean episode and the turn-1 fault
    assert (src / "tasks" / "retail-sales" / "config.yaml").read_text() != (
        out / "tasks" / "retail-sales" / "config.yaml"
    ).read_text()
    with pytest.raises(ValueError, match="eval_turns=0"):
        StudyConfig(arms=["none"], eval_turns=0)
    # faulted_only: the tasks left with a harmful fault in the cut (a benign one does not count)
    assert (first_turns_suite(src, tmp_path / "f", 2, faulted_only=True) / "tasks" / "retail-sales").is_dir()
    benign = [{**faults[0], "fault_type": "benign_rewrite"}, faults[1]]
    (src / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in benign))
    empty = first_turns_suite(src, tmp_path / "g", 2, faulted_only=True)
    assert not list((empty / "tasks").iterdir()) and (empty / "faults.jsonl").read_text() == ""
    with pytest.raises(ValueError, match="episode_arms"):
        StudyConfig(arms=["none"], episode_arms=["rule"])


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~130 s on the idle machine (the study ~100 s, then its resume ~25 s)
def test_miniature_study(tmp_path: Path) -> None:
    """training/study/configs/smollm2-mini.yaml end to end; the numbers are real (small), the report lists every
    arm."""
    pytest.importorskip("gguf", reason="the SmolLM2 conversion needs the train extra (gguf)")
    from training.smollm2 import build_smollm2, cached_smollm2_dir

    model = build_smollm2(cached_smollm2_dir())
    config = yaml.safe_load((REPO / "training" / "study" / "configs" / "smollm2-mini.yaml").read_text())
    config.update(smollm2_dir=str(model), isolation="bwrap" if shutil.which("bwrap") else "none")
    config_path = tmp_path / "mini.yaml"
    config_path.write_text(yaml.safe_dump(config))
    out = tmp_path / "study"
    command = [sys.executable, "-m", "training.study", "--config", str(config_path), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    ran = list(results["arms"])
    assert set(ran) | set(results["unavailable"]) == set(config["arms"]) and not set(ran) & set(results["unavailable"])
    metrics = {arm: results["arms"][arm]["metrics"] for arm in ran}
    assert metrics["rule"]["legal_action_rate"]["value"] == 1.0  # the rule policy only takes legal actions
    assert metrics["none"]["legal_action_rate"]["value"] is None and metrics["none"]["repair_counts"]["repaired"] == 0
    for arm, m in metrics.items():
        for name in ("legal_action_rate", "exact_match", "repair_f1", "false_repair_rate", "turn_accuracy"):
            value = m[name]["value"]
            assert value is None or 0.0 <= value <= 1.0, (arm, name, value)
        if ARMS[arm].model:
            assert m["exact_match"]["n"] == results["heldout"]["exact_match_samples"] > 0
            assert (m["legal_action_rate"]["n"] > 0) == (arm in config["episode_arms"])
    assert metrics["prompt"]["episodes"] == 0 and metrics["prompt"]["turn_accuracy"]["value"] is None  # no episodes
    assert metrics["rule"]["turn_accuracy"]["value"] >= metrics["none"]["turn_accuracy"]["value"]
    # decision points: every manager arm on the same points (one REPAIR, one FINALIZE_RELATIONS), none not
    assert metrics["none"]["decisions"] is None and results["heldout"]["decision_points"] == 2
    for arm in (a for a in ran if a != "none"):
        decisions = metrics[arm]["decisions"]
        assert (decisions["points"], decisions["repair_points"]) == (2, 1), arm
        assert sum(decisions["controls"].values()) == 2 and 0.0 <= decisions["legal_action_rate"]["value"] <= 1.0
    assert metrics["rule"]["decisions"]["legal_action_rate"]["value"] == 1.0
    for arm in [a for a in ran if ARMS[a].train is not None]:
        curves = results["arms"][arm]["training"]["curves"]["loss"]
        assert len(curves) >= 2 and all(v > 0 for _, v in curves)
    # the SFT subset is stratified by control action: 2 samples, the first two actions in sorted order
    sft = results["arms"]["sft-lora"]["training"]["results"]
    assert {k: v for k, v in sft.items() if k.startswith("data/train_control/")} == {
        "data/train_control/COMMIT_STATE": 1,
        "data/train_control/FINALIZE_RELATIONS": 1,
    }
    # decision margins on the training data's validation rows: the flat model arms, at most margin_limit rows each
    scored = {arm for arm in ran if results["arms"][arm]["margins"]}
    assert scored == {"prompt", "sft-lora"}
    for arm in scored:
        margins = results["arms"][arm]["margins"]
        assert (
            margins["split"] == "validation"
            and margins["n_REPAIR"] + margins["n_FINALIZE_RELATIONS"] == margins["samples"] <= config["margin_limit"]
        )
    # each is served with the decision bias chosen on its own margin rows (calibrate_decisions)
    from training.study.margin import calibrate

    for arm in scored:
        rows = json.loads((out / "arms" / arm / "margins.json").read_text())["rows"]
        assert results["arms"][arm]["calibration"] == calibrate(rows)
    report = (out / "report.md").read_text()
    assert "### The decision bias (calibrate_decisions" in report
    assert "Decoding: greedy under the action grammar" in report and results["config"]["constrained_decoding"]
    records = [json.loads(line) for line in (out / "eval" / "episodes" / "sft-lora.jsonl").read_text().splitlines()]
    assert records and all(r["config"]["eval"]["constrained_decoding"] for r in records)
    replies = [a["raw"] for r in records for act in r["activations"] for a in act["actions"] if a.get("raw")]
    assert replies and all(text.startswith("<tool_call>\n{") for text in replies)  # the grammar's start, every reply
    # legal_actions_only: no reply names an action the protocol refuses at that point
    results_text = [str(a["result"]) for r in records for act in r["activations"] for a in act["actions"]]
    assert not any("is illegal in phase" in text for text in results_text)
    assert "The flat arms' grammar allows only the actions legal now" in report
    assert "| COMMIT_STATE 1, FINALIZE_RELATIONS 1 |" in report
    assert "## Decision margins on the training data (validation split" in report
    for arm in config["arms"]:
        assert f"| {arm} |" in report or f"- {arm}: " in report  # in the table, or listed as not run
    for plot in ("metrics.png", "rewards.png", "training_sft.png"):
        assert (out / plot).stat().st_size > 1000
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(summary) >= {"total_s", "unavailable", "rule"}
    # the stage times persist (OUT/timing.json); a training stage's is its launch's wall time, from the arm's marker
    timing = json.loads((out / "timing.json").read_text())
    assert results["timing"] == {**timing, "total": pytest.approx(sum(timing.values()), abs=0.1)}
    assert timing["train/sft-lora"] == json.loads((out / "arms" / "sft-lora" / "train.json").read_text())["seconds"]
    # a re-run resumes everything: nothing is trained or generated again, the numbers are the same
    files = [out / "arms" / arm / "decisions.jsonl" for arm in ran if arm != "none"]
    kept = {path: path.read_text() for path in files + [out / "arms" / arm / "margins.json" for arm in scored]}
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert {path: path.read_text() for path in kept} == kept
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["arms"] == results["arms"] and resumed["timing"]["train/sft-lora"] == timing["train/sft-lora"]
    assert all(resumed["timing"][stage] >= seconds for stage, seconds in timing.items())  # summed, never reset


def test_the_study_logs_every_arm_metric_to_the_tracker_and_reads_back(tmp_path):
    from tests.training.test_sft import read_tensorboard_scalars
    from training.study.report import study_metrics, track_study

    interval = {"value": 0.5, "ci95": [0.0, 1.0], "n": 2}
    metrics = {
        "episodes": 4,
        "repair_f1": interval,
        "exact_match": {"value": None, "ci95": None, "n": 0},  # not measured: left out
        "decisions_by_group": {"heldout": {"repair_f1": {"value": 0.25, "ci95": [0.0, 0.5], "n": 6}}},
        "reward": {"total": 0.75},
    }
    results = {"arms": {"sft-lora": {"metrics": metrics}, "none": {"metrics": {}}}, "config": {"seed": 0}}
    assert study_metrics(results) == {
        "study/sft-lora/episodes": 4.0,
        "study/sft-lora/repair_f1": 0.5,
        "study/sft-lora/decisions_by_group/heldout/repair_f1": 0.25,
        "study/sft-lora/reward/total": 0.75,
    }
    track_study(tmp_path, results, "tensorboard", "mini-study")
    assert read_tensorboard_scalars(tmp_path, "study/sft-lora/decisions_by_group/heldout/repair_f1") == [0.25]
    assert read_tensorboard_scalars(tmp_path, "study/sft-lora/repair_f1") == [0.5]
    track_study(tmp_path / "none", results, "none", "mini-study")  # none: nothing written
    assert not (tmp_path / "none").exists()
