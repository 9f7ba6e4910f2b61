"""The small-model study (third design): config checks, the frozen test set, the per-arm evaluate commands, and the
miniature study end to end (slow: it converts SmolLM2 once, synthesizes, trains the SFT arm a few steps and plays
every arm's episodes through ``stateguard evaluate``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from training.study.arms import ARMS
from training.study.config import StudyConfig
from training.study.driver import evaluate_command
from training.study.layout import Study
from training.study.testset import FrozenTestsetError, draw_faults, draw_testset, folder_hash

REPO = Path(__file__).resolve().parents[3]
STUDY_CONFIGS = sorted((REPO / "training" / "study" / "configs").glob("*.yaml"))


def test_study_configs_load() -> None:
    """Each study config loads through the study's command line, the files it names exist, and the design holds:
    a test domain and question writer no training data uses, every arm of the design in the full config."""
    from harness.config_cli import parse_config
    from training.study.cli import make_parser

    assert [p.name for p in STUDY_CONFIGS] == ["smollm2-mini.yaml", "smollm2.yaml"]
    for path in STUDY_CONFIGS:
        (config,) = parse_config(make_parser().parse_args(["--config", str(path)]))
        assert config == StudyConfig.from_yaml(path)
        for name in (config.sft_config, config.rl_config, config.accelerate_config):
            assert config.path(name).is_file(), f"{path}: {name} does not exist"
        assert config.testset["domains"] == ["logistics"] and config.testset["question_writer"] == "b"
        assert (
            "logistics" not in config.train_synthesis["domains"] and config.train_synthesis["question_writer"] == "a"
        )
    full = StudyConfig.from_yaml(REPO / "training" / "study" / "configs" / "smollm2.yaml")
    assert full.arms == list(ARMS) and full.testset_record == "docs/study/testset.json"
    assert (full.min_faulted, full.min_clean, full.testset["n_turns"]) == (30, 15, [6, 6])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"arms": ["none", "oracle"]}, "unknown arm(s) ['oracle']"),
        ({"arms": ["none", "sft-dapo"]}, "sft-dapo is trained from sft; add sft to arms"),
        ({"testset": {"domains": ["commerce"], "question_writer": "b"}}, "none of the training domains"),
        ({"testset": {"domains": ["logistics"], "question_writer": "a"}}, "the other writer"),
        ({"testset": {"domains": ["logistics"], "question_writer": "b", "tasks": 3}}, "testset: unknown key(s)"),
        ({"choices": {"sft_steps": "test"}}, "choices: {'sft_steps': 'test'} name no allowed split"),
        ({"primary_metrics": ["accuracy"]}, "primary_metrics: unknown ['accuracy']"),
        ({"test_fault_types": ["typo"]}, "test_fault_types: unknown ['typo']"),
        ({"model_tasks": 0}, "model_tasks=0 must be at least 1"),
    ],
)
def test_bad_study_configs_name_the_fix(overrides: dict, message: str) -> None:
    base = {"testset": {"domains": ["logistics"], "question_writer": "b"}}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        StudyConfig(**{**base, **overrides})


def _fake_split(root: Path, faults: list[dict]) -> Path:
    """A synthesized split in miniature: task folders (one file each) and faults.jsonl."""
    for task_id in sorted({f["task_id"] for f in faults}):
        (root / "tasks" / task_id).mkdir(parents=True)
        (root / "tasks" / task_id / "config.yaml").write_text(f"id: {task_id}\n")
    (root / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in faults))
    return root


FAULTS = [
    {"task_id": "t1", "turn_id": "2", "fault_type": "rounding", "detectable": True},
    {"task_id": "t1", "turn_id": "3", "fault_type": "wrong_topk", "detectable": True},
    {"task_id": "t1", "turn_id": "4", "fault_type": "rounding", "detectable": False},
    {"task_id": "t1", "turn_id": "5", "fault_type": "execution_error", "detectable": True},
    {"task_id": "t2", "turn_id": "1", "fault_type": "wrong_column", "detectable": True},
    {"task_id": "t3", "turn_id": "1", "fault_type": "benign_rewrite", "detectable": None},
]


def test_the_fault_draw_keeps_detectable_faults_of_the_named_types_per_task() -> None:
    types = ["rounding", "wrong_topk", "wrong_column"]
    drawn = draw_faults(FAULTS, 1, types, seed=0)
    assert [f["task_id"] for f in drawn] == ["t1", "t2"]  # one per task; t3 has none eligible
    assert drawn[0] in FAULTS[:2] and drawn[1] == FAULTS[4]
    assert draw_faults(FAULTS, 1, types, seed=0) == drawn  # seeded
    assert draw_faults(FAULTS, 5, types, seed=0) == [FAULTS[0], FAULTS[1], FAULTS[4]]  # file order, cap per task
    assert draw_faults(FAULTS, 5, None, seed=0) == [FAULTS[0], FAULTS[1], FAULTS[3], FAULTS[4]]


def test_the_test_set_is_frozen_at_its_first_draw(tmp_path: Path) -> None:
    """The first draw writes the record; a later edition drawing the same set is added to it; a changed task or a
    changed draw stops with the difference named; too few episodes stop before anything is written."""
    split = _fake_split(tmp_path / "test", FAULTS)
    record_path = tmp_path / "docs" / "testset.json"

    def config(**changes):
        fields = dict(testset={"domains": ["logistics"], "question_writer": "b", "seed": 7}, min_faulted=3,
                      min_clean=2, test_fault_types=None, test_faults_per_task=2, edition=11)  # fmt: skip
        return StudyConfig(**{**fields, **changes})

    record = draw_testset(config(), split, tmp_path / "suite", record_path)
    assert record["episodes"] == {"faulted": 3, "clean": 2} and record["seen_by_editions"] == [11]
    assert [t["task_id"] for t in record["tasks"]] == ["t1", "t2"]
    assert record["tasks"][0]["sha256"] == folder_hash(split / "tasks" / "t1")
    assert sorted(p.name for p in (tmp_path / "suite" / "tasks").iterdir()) == ["t1", "t2"]
    suite_faults = (tmp_path / "suite" / "faults.jsonl").read_text().splitlines()
    assert len(suite_faults) == 3 and all(json.loads(x)["detectable"] for x in suite_faults)
    again = draw_testset(config(edition=12), split, tmp_path / "suite", record_path)
    assert again["seen_by_editions"] == [11, 12] and again["drawn_in_edition"] == 11
    with pytest.raises(FrozenTestsetError, match="tasks: 1 frozen entries not drawn"):
        (split / "tasks" / "t2" / "config.yaml").write_text("id: t2\nedited: true\n")
        draw_testset(config(), split, tmp_path / "suite", record_path)
    with pytest.raises(FrozenTestsetError, match="seed: frozen 0, drawn 1"):
        draw_testset(config(seed=1), split, tmp_path / "suite", record_path)
    with pytest.raises(ValueError, match="3 faulted and 2 clean episodes drawn, the design asks for at least 30"):
        draw_testset(config(min_faulted=30), split, tmp_path / "suite", tmp_path / "other.json")
    assert not (tmp_path / "other.json").exists()


def test_every_arm_is_played_by_the_evaluate_command_a_user_types(tmp_path: Path) -> None:
    config = StudyConfig(testset={"domains": ["logistics"], "question_writer": "b"}, model_tasks=3, workers=2)
    study = Study(config, tmp_path)
    gold = evaluate_command(study, "gold-specs")
    assert gold[gold.index("--managers") + 1] == "hier-checks:gold" and gold[-1] == "--oracle_checks"
    assert "--limit" not in gold and gold[gold.index("--workers") + 1] == "2"
    sft = evaluate_command(study, "sft")
    assert sft[sft.index("--managers") + 1] == f"hier:llm-hf:{tmp_path / 'arms' / 'sft' / 'model'}"
    assert sft[sft.index("--limit") + 1] == "3" and "--oracle_checks" not in sft
    assert sft[sft.index("--suite") + 1] == str(tmp_path / "data" / "test-suite")
    assert [evaluate_command(study, a)[evaluate_command(study, a).index("--managers") + 1] for a in ("none", "rule",
            "read")] == ["none", "rule", "read"]  # fmt: skip


def test_a_resume_with_another_config_stops_naming_the_change(tmp_path: Path) -> None:
    from training.study.driver import StudyStageError, check_resume

    config = StudyConfig(testset={"domains": ["logistics"], "question_writer": "b"}, model_tasks=3)
    check_resume(Study(config, tmp_path))
    check_resume(Study(config, tmp_path))  # the same config: a resume
    check_resume(Study(StudyConfig(**{**config.__dict__, "report_to": "none"}), tmp_path))  # no number changes
    changed = StudyConfig(**{**config.__dict__, "model_tasks": 4})
    with pytest.raises(StudyStageError, match=r"model_tasks: 3 -> 4.*use another --out"):
        check_resume(Study(changed, tmp_path))


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~4 min on the idle machine (the study, then its resume)
def test_miniature_study(tmp_path: Path) -> None:
    """training/study/configs/smollm2-mini.yaml end to end: every arm played by ``stateguard evaluate`` on the
    frozen test set, the model arms served from their checkpoint's manager.json; a re-run resumes everything."""
    pytest.importorskip("gguf", reason="the SmolLM2 conversion needs the train extra (gguf)")
    from training.smollm2 import build_smollm2, cached_smollm2_dir

    model = build_smollm2(cached_smollm2_dir())
    config = yaml.safe_load((REPO / "training" / "study" / "configs" / "smollm2-mini.yaml").read_text())
    config.update(smollm2_dir=str(model), isolation="bwrap" if shutil.which("bwrap") else "none",
                  testset_record=str(tmp_path / "testset.json"), report_to="none")  # fmt: skip
    config_path = tmp_path / "mini.yaml"
    config_path.write_text(yaml.safe_dump(config))
    out = tmp_path / "study"
    command = [sys.executable, "-m", "training.study", "--config", str(config_path), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert list(results["arms"]) == config["arms"] and results["simulated"] is True
    frozen = json.loads((tmp_path / "testset.json").read_text())
    assert frozen["seen_by_editions"] == [1] and frozen["episodes"] == {"faulted": 1, "clean": 1}
    for arm, entry in results["arms"].items():
        metrics, settings = entry["metrics"], entry["settings"]
        assert metrics["episodes"] == 2 and (metrics["faulted_episodes"], metrics["clean_episodes"]) == (1, 1), arm
        assert settings["command"].startswith("stateguard evaluate --suite ") and settings["exit_code"] == 0
        assert (entry["kind"] == "oracle") == (arm == "gold-specs") and ("--oracle_checks" in settings["command"]) == (
            arm == "gold-specs"
        )
        if ARMS[arm].model:  # served as a user serves the checkpoint: hier:llm-hf:DIR and its manager.json
            assert f"--managers hier:llm-hf:{out / 'arms' / arm / 'model'}" in settings["command"]
            served = settings["manager.json"]
            assert (served["policy"], served["writes"], served["prompt_view"]) == ("hier", "checks", "bare")
            assert served["max_new_tokens"] == config["manager_max_tokens"] and served["constrained_decoding"]
    none = results["arms"]["none"]["metrics"]["counts"]
    assert none["true_positive"] == none["false_positive"] == 0  # no manager, no repair
    assert results["arms"]["gold-specs"]["metrics"]["counts"]["true_positive"] == 1  # the oracle catches it
    records = [json.loads(x) for x in (out / "eval" / "sft" / "episodes" / "sft.jsonl").read_text().splitlines()]
    assert all(r["config"]["manager_settings"]["prompt_view"] == "bare" for r in records)
    notes = [a["raw"] for r in records for act in r["activations"] for a in act["actions"] if "tier-1" in a["raw"]]
    assert notes and all("tier-1 checks: " in n or "tier-1 reply rejected" in n for n in notes)
    decisions = results["decisions"]
    assert set(decisions) == {"rule", "digest-rule"} and decisions["digest-rule"]["points"] == 2
    assert decisions["digest-rule"]["repair_f1"]["value"] == 1.0  # the digest of the gold's checks decides alone
    report = (out / "report.md").read_text()
    for arm in config["arms"]:
        assert f"| {arm}" in report, arm
    assert "ORACLE upper bound" in report and "SIMULATED" in report
    for plot in ("repair_f1.png", "false_repairs.png", "dcr.png"):
        assert (out / plot).stat().st_size > 1000
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(summary) >= {"total_s", "targets", "none", "sft"}
    timing = json.loads((out / "timing.json").read_text())
    assert timing["train/sft"] == json.loads((out / "arms" / "sft" / "train.json").read_text())["seconds"]
    # a re-run resumes everything: nothing is trained or played again, the numbers are the same
    kept = {
        p: p.read_text() for p in [out / "arms" / "sft" / "train.json", *(out / "eval").glob("*/episodes/*.jsonl")]
    }
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert {p: p.read_text() for p in kept} == kept
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["arms"] == results["arms"] and resumed["testset"]["seen_by_editions"] == [1]
    # an interim record while arms are still running: the finished ones, the others listed as not played yet
    (out / "eval" / "sft" / "done.json").unlink()
    interim = subprocess.run([*command, "--record_only", "true"], cwd=REPO, capture_output=True, text=True)
    assert interim.returncode == 0, interim.stdout[-3000:] + interim.stderr[-3000:]
    partial = json.loads((out / "results.json").read_text())
    assert partial["interim"] and "sft" not in partial["arms"] and "sft" in partial["unavailable"]
    assert partial["arms"]["read"] == results["arms"]["read"]
    assert "**INTERIM RECORD**" in (out / "report.md").read_text()
