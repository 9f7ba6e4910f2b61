"""`stateguard evaluate`: summary numbers on hand-built records, then a real run (smoke suite, none vs rule)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.evaluation import suite as suite_module
from harness.evaluation.cli import register
from harness.evaluation.evaluate import (
    EvaluationConfig,
    EvaluationError,
    run_evaluation,
    variant_file,
)
from harness.evaluation.suite import (
    SuiteError,
    SuiteSpec,
    SuiteUnavailableError,
    missing_synthesized_suite,
    resolve_suite,
)
from harness.evaluation.suite_names import ROOT, SUITES
from harness.evaluation.summary import TaskInfo, compare_variants, summarize_variant
from harness.evaluation.tracked import track_results, tracked_metrics
from harness.manager.episode import EpisodeRecord, read_episodes
from harness.worker.faults import write_faults

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
REQUIRED = ("task_accuracy", "turn_accuracy", "dcr", "repair_precision", "repair_recall", "simulated")

# ---------------------------------------------------------------------------------------------- hand-built records

TASKS = {
    "t1": TaskInfo("multi_turn", {"1": (), "2": ("1",), "3": ("1", "2")}),
    "t2": TaskInfo("closed_form"),
}


def record(task_id, key, turns=None, score=None, fault_turn=None, repairs=()):
    if turns is not None:
        details = {"turns": {t: {"correct": ok} for t, ok in turns.items()}}
        score = sum(turns.values()) / len(turns)
    else:
        details = {}
    return EpisodeRecord(
        task_id=task_id,
        episode_id=key,
        config={"eval": {"key": key, "run": 0, "fault_turn": fault_turn}},
        simulated=True,
        repairs=[{"turn_id": t, "mode": m} for t, m in repairs],
        grade={"task_id": task_id, "valid": True, "score": score, "details": details},
    )


BASELINE = [
    record("t1", "t1/clean", {"1": True, "2": True, "3": True}),
    record("t1", "t1/fault-1", {"1": False, "2": False, "3": True}, fault_turn="1"),
    record("t2", "t2/clean", score=0.0),
]
MANAGED = [
    record("t1", "t1/clean", {"1": True, "2": True, "3": True}, repairs=[("2", "heavy")]),  # a false repair
    record("t1", "t1/fault-1", {"1": True, "2": True, "3": True}, fault_turn="1", repairs=[("1", "light")]),
    record("t2", "t2/clean", score=1.0),
]


def test_summary_of_hand_built_records():
    base = summarize_variant(BASELINE, TASKS, n_resamples=200)
    # units with observed upstream: clean episode t2 (up T) right, t3 (T, T) right -> clean error 0;
    # faulted episode t2 (up F) wrong, t3 (F, F) right -> contaminated error 1/2; turn 1 and t2/main are excluded
    assert base["dcr"] == 0.5
    assert base["dcr_detail"]["n_clean"] == 2 and base["dcr_detail"]["n_contaminated"] == 2
    assert base["dcr_detail"]["n_excluded"] == 3
    assert base["turn_accuracy"] == pytest.approx(4 / 7) and base["task_accuracy"] == pytest.approx(1 / 3)
    assert base["repair_precision"] is None and base["repair_recall"] == 0.0  # no repair: precision undefined
    managed = summarize_variant(MANAGED, TASKS, n_resamples=200)
    assert managed["dcr"] is None  # every upstream right: no contaminated unit, DCR undefined (not 0)
    assert managed["turn_accuracy"] == 1.0 and managed["task_accuracy"] == 1.0
    assert managed["repair_precision"] == 0.5 and managed["repair_recall"] == 1.0
    assert managed["manager"]["repairs"] == {"light": 1, "heavy": 1}
    assert managed["simulated"] is True
    assert base["dabench"] is None  # no episode graded by the dabench grader


def test_dabench_official_scoring_of_records():
    def graded(task_id, per_answer):
        n_correct = sum(per_answer.values())
        details = {"per_answer": per_answer, "n_correct": n_correct, "n_total": len(per_answer)}
        score = float(n_correct == len(per_answer))
        grade = {"valid": True, "score": score, "details": details}
        return EpisodeRecord(task_id, f"{task_id}/clean", {"eval": {"key": f"{task_id}/clean"}}, False, grade=grade)

    graded = [graded("d1", {"a": True, "b": True}), graded("d2", {"a": True, "b": False, "c": False})]
    summary = summarize_variant(graded, {"d1": TaskInfo("closed_form"), "d2": TaskInfo("closed_form")})
    assert summary["dabench"]["accuracy"] == 0.5  # 1 of 2 questions fully right
    assert summary["dabench"]["sub_accuracy"] == 0.6  # 3 of 5 sub-answers
    assert summary["dabench"]["sub_accuracy_proportional"] == pytest.approx((1 + 1 / 3) / 2)
    assert summary["task_accuracy"] == 0.5 and summary["turn_accuracy"] == 0.5 and summary["simulated"] is False
    assert summary["dcr"] is None  # single-question tasks have no upstream


def test_paired_comparison_of_hand_built_records():
    # differences b - a per turn: t1 [0, 0, 0, 1, 1, 0], t2 [1] -> 3/7; resamples {t1,t1} 2/6, {t1,t2} 3/7, {t2,t2} 1
    comparison = compare_variants(BASELINE, MANAGED, TASKS)
    assert comparison["turn_accuracy_diff"] == pytest.approx(3 / 7)
    assert comparison["ci95"] == [pytest.approx(1 / 3), 1.0]
    assert comparison["task_accuracy_diff"] == pytest.approx(2 / 3)
    assert (comparison["n_episodes"], comparison["n_tasks"], comparison["n_turns"]) == (3, 2, 7)
    assert compare_variants(BASELINE, [], TASKS) is None


# ---------------------------------------------------------------------------------------------- a real evaluation


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("suites")


@pytest.fixture(scope="module")
def smoke(cache):
    from harness.cli import main

    missing = missing_synthesized_suite("smoke", cache)
    assert missing is not None  # not written yet
    config, folder = missing
    command = SUITES["smoke"].synthesize_command(folder).split()  # what a missing suite's error tells the user
    assert command[:3] == ["stateguard", "synthesize", "--config"] and (ROOT / command[3]) == config
    assert main([*command[1:], "--no-progress"]) == 0
    return resolve_suite("smoke", cache=cache)


@pytest.fixture(scope="module")
def evaluated(smoke, cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    config = EvaluationConfig(
        suite="smoke",
        out=str(out),
        managers=["none", "rule"],
        cache=str(cache),
        isolation=ISOLATION,
        report_to="tensorboard",
    )
    return config, run_evaluation(config)


def test_a_named_suite_is_the_folder_its_synthesis_command_writes(smoke, cache):
    assert [p.name for p in smoke.task_dirs] == ["syn-commerce-1000-6"]
    assert smoke.faults and all(f.task_id == "syn-commerce-1000-6" for f in smoke.faults)
    assert (cache / "smoke" / "stats.json").is_file() and missing_synthesized_suite("smoke", cache) is None
    again = resolve_suite("smoke", cache=cache)
    assert again.task_dirs == smoke.task_dirs and again.faults == smoke.faults


def test_a_missing_synthesized_suite_names_its_folder_and_command(tmp_path, capsys):
    folder = tmp_path / "suites" / "heldout-demo"
    command = f"stateguard synthesize --config configs/synthesis/heldout-demo.yaml --out {folder}"
    with pytest.raises(SuiteUnavailableError) as info:
        resolve_suite("heldout-demo", cache=tmp_path / "suites")
    assert (
        str(info.value) == f"suite heldout-demo: its task folder {folder} is not written yet; write it with: {command}"
    )
    rc, _, err = run_cli(capsys, "--suite", "heldout-demo", "--manager", "none", "--out", str(tmp_path / "o"),
                         "--cache", str(tmp_path / "suites"))  # fmt: skip
    assert rc == 3 and err.strip().endswith(command) and len(err.strip().splitlines()) == 1


def test_fault_limit_keeps_the_first_faults_and_every_clean_episode(smoke, cache):
    assert len(smoke.faults) >= 2
    one = resolve_suite("smoke", cache=cache, fault_limit=1)
    assert one.faults == smoke.faults[:1] and one.task_dirs == smoke.task_dirs
    assert [spec.fault for spec in one.episodes()] == [None, smoke.faults[0]]
    assert [spec.fault for spec in resolve_suite("smoke", cache=cache, fault_limit=0).episodes()] == [None]
    with pytest.raises(SuiteError, match="--fault_limit -1"):
        resolve_suite("smoke", cache=cache, fault_limit=-1)


def test_results_have_the_issue_keys_and_are_labelled_simulated(evaluated, smoke):
    config, results = evaluated
    assert set(results["variants"]) == {"none", "rule"}
    for variant in results["variants"].values():
        assert set(REQUIRED) <= set(variant)
        assert variant["simulated"] is True
        assert variant["n_episodes"] == 1 + len(smoke.faults)
    assert results["simulated"] is True
    assert results["config"]["managers"] == ["none", "rule"] and "numpy" in results["versions"]
    [comparison] = results["comparisons"]
    assert (comparison["a"], comparison["b"]) == ("none", "rule")
    low, high = comparison["ci95"]
    assert low <= comparison["turn_accuracy_diff"] <= high
    assert comparison["n_resamples"] == 10_000
    written = json.loads((Path(config.out) / "results.json").read_text())
    assert written["comparisons"] == results["comparisons"]


def test_numbers_match_the_episode_records(evaluated):
    config, results = evaluated
    for name in ("none", "rule"):
        records = list(read_episodes(variant_file(Path(config.out), name)))
        verdicts = [t["correct"] for r in records for t in r.grade["details"]["turns"].values()]
        assert results["variants"][name]["turn_accuracy"] == pytest.approx(sum(verdicts) / len(verdicts))
        keys = {r.config["eval"]["key"] for r in records}
        assert len(keys) == len(records)  # every episode once
    none = results["variants"]["none"]
    assert none["manager"]["activations"] == 0 and none["repair_precision"] is None
    assert none["repair_recall"] == 0.0  # faults exist, none repaired
    assert results["variants"]["rule"]["manager"]["activations"] > 0


def test_the_summary_metrics_and_plots_are_read_back_from_the_trackers(evaluated):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from trackio.sqlite_storage import SQLiteStorage

    config, results = evaluated
    out = Path(config.out)
    metrics = tracked_metrics(results)
    rule = results["variants"]["rule"]
    assert metrics["eval/rule/turn_accuracy"] == rule["turn_accuracy"] and metrics["eval/none/n_episodes"] > 0
    assert (
        0 < metrics["eval/rule/manager/legal_action_rate"] <= 1
        and "eval/none/manager/legal_action_rate" not in metrics
    )
    assert metrics["eval/rule_vs_none/turn_accuracy_diff"] == results["comparisons"][0]["turn_accuracy_diff"]
    # tensorboard (the run's report_to): OUT/tb holds every scalar and the report's four plots
    events = EventAccumulator(str(out / "tb"), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    assert {tag: events.Scalars(tag)[-1].value for tag in metrics} == pytest.approx(metrics)
    assert set(events.Tags()["images"]) == {
        f"eval/plots/{name}" for name in ("accuracy", "dcr", "relation_mix", "repairs")
    }
    # trackio: the same numbers in a local run (the SQLite file under $TRACKIO_DIR)
    track_results(out, results, dataclasses.replace(config, report_to="trackio", project="stateguard-tests"))
    rows = SQLiteStorage.get_logs("stateguard-tests", f"eval-{out.name}")
    [row] = [r for r in rows if "eval/rule/turn_accuracy" in r]
    assert {tag: row[tag] for tag in metrics} == pytest.approx(metrics)


def test_resume_runs_only_missing_episodes(evaluated, caplog):
    config, results = evaluated
    path = variant_file(Path(config.out), "rule")
    lines = path.read_text().splitlines()
    torn = lines[-1][: len(lines[-1]) // 2]
    path.write_text("\n".join(lines[:-1]) + "\n" + torn)  # as if killed while appending the last episode
    with caplog.at_level("WARNING", logger="harness.jsonl"):
        again = run_evaluation(config)
    assert f"dropped a torn last line ({len(torn)} bytes)" in caplog.text
    relines = path.read_text().splitlines()
    assert len(relines) == len(lines) and relines[:-1] == lines[:-1]
    assert json.loads(relines[-1])["config"]["eval"]["key"] == json.loads(lines[-1])["config"]["eval"]["key"]
    assert json.loads(relines[-1])["episode_id"] != json.loads(lines[-1])["episode_id"]  # re-run, not copied
    for name in ("none", "rule"):
        for key in REQUIRED:
            assert again["variants"][name][key] == results["variants"][name][key]


def test_report_renders_with_plots(evaluated):
    config, _ = evaluated
    out = Path(config.out)
    report = (out / "report.md").read_text()
    assert report.startswith("# Evaluation (SIMULATED: scripted worker)")
    assert "| none | True |" in report and "| rule | True |" in report and "| none | rule |" in report
    for name in ("accuracy.png", "dcr.png", "relation_mix.png", "repairs.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
        assert f"({name})" in report


def run_cli(capsys, *argv):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["evaluate", *argv])
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_replays_a_faults_file(capsys, smoke, cache, tmp_path):
    faults = tmp_path / "faults.jsonl"
    write_faults(faults, smoke.faults[:1])
    rc, out, _ = run_cli(
        capsys, "--suite", "smoke", "--cache", str(cache), "--manager", "none", "--faults", str(faults),
        "--isolation", ISOLATION, "--out", str(tmp_path / "out"), "--no-report",
    )  # fmt: skip
    assert rc == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["variants"]["none"]["simulated"] is True and results["comparisons"] == []
    assert out.splitlines()[-1] == f"results: {tmp_path / 'out' / 'results.json'}"  # no report: --no-report
    records = list(read_episodes(variant_file(tmp_path / "out", "none")))
    assert [r.config["eval"]["fault_turn"] for r in records] == [None, smoke.faults[0].turn_id]
    assert not (tmp_path / "out" / "report.md").exists()


def test_cli_bad_input(capsys, tmp_path, monkeypatch):
    rc, _, err = run_cli(capsys, "--suite", str(tmp_path), "--manager", "none", "--out", str(tmp_path / "o"))
    assert rc == 2 and "holds no task folder" in err
    rc, _, err = run_cli(capsys, "--suite", "nope", "--manager", "none", "--out", str(tmp_path / "o"))
    assert rc == 2 and "unknown suite 'nope'" in err and "heldout-seeds" in err
    rc, _, err = run_cli(capsys, "--suite", "smoke", "--manager", "none,rulez", "--out", str(tmp_path / "o"))
    assert rc == 2 and "unknown variant(s) ['rulez']" in err
    missing = SuiteSpec("DABench dev", import_from=tmp_path / "missing")
    monkeypatch.setitem(suite_module.SUITES, "dabench-dev", missing)
    rc, _, err = run_cli(capsys, "--suite", "dabench-dev", "--worker", "openai:http://localhost:1/v1",
                         "--manager", "none", "--out", str(tmp_path / "o"))  # fmt: skip
    assert rc == 3 and "suite unavailable" in err and str(tmp_path / "missing") in err


def test_faults_need_the_scripted_worker(tmp_path):
    with pytest.raises(EvaluationError, match="--faults replays faulty code through the scripted worker"):
        EvaluationConfig(suite="smoke", out=str(tmp_path), worker="openai:http://x/v1", faults="f.jsonl")
    with pytest.raises(EvaluationError, match="--worker 'gpt' is not understood"):
        EvaluationConfig(suite="smoke", out=str(tmp_path), worker="gpt")
    with pytest.raises(EvaluationError, match="listed twice"):
        EvaluationConfig(suite="smoke", out=str(tmp_path), managers=["rule", "rule"])
    with pytest.raises(SuiteError, match="--limit 0"):
        resolve_suite(str(Path(__file__).resolve().parents[3] / "harness" / "builtin_tasks"), limit=0)


def test_constrained_decoding_is_for_action_models_in_process_and_on_endpoints(tmp_path):
    """Endpoint action managers decode under the grammar too (vLLM guided decoding); legal_actions_only needs
    constrained_decoding; prose managers (windowed, freeform) and model-free ones are left as they are."""
    from harness.evaluation.evaluate import make_policy
    from harness.evaluation.resume import evaluation_fingerprint

    managers = ["rule", "windowed:3:http://x/v1", "freeform:http://x/v1", "llm:http://x/v1", "hier:llm:http://y/v1"]
    config = EvaluationConfig(
        suite="smoke", out=str(tmp_path), managers=managers, constrained_decoding=True, legal_actions_only=True
    )
    flat, hier = make_policy("llm:http://x/v1", config), make_policy("hier:llm:http://y/v1", config)
    assert flat.backend.grammar is not None and flat.before_reply is not None  # the grammar follows the legal actions
    assert hier.tier1.grammar is not None and make_policy("freeform:http://x/v1", config).backend.grammar is None
    assert evaluation_fingerprint(config, [])["runtime"]["legal_actions_only"] is True
    plain = EvaluationConfig(suite="smoke", out=str(tmp_path), managers=["llm:http://x/v1"])
    assert "legal_actions_only" not in evaluation_fingerprint(plain, [])["runtime"]  # off: older folders still match
    with pytest.raises(EvaluationError, match=r"^legal_actions_only=true narrows the action grammar"):
        EvaluationConfig(suite="smoke", out=str(tmp_path), managers=["llm:http://x/v1"], legal_actions_only=True)


def test_quantile_scores_for_tasks_with_a_leaderboard():
    tasks = {
        "a": TaskInfo("artifact", leaderboard=(0.9, 0.5), domain="x"),
        "b": TaskInfo("artifact", leaderboard=(0.2, 0.4), domain="x", higher_is_better=False),
        "c": TaskInfo("artifact", leaderboard=(0.5,), domain="y"),
        "d": TaskInfo("artifact"),  # no leaderboard: not quantile-scored
    }

    def graded(task_id, score):
        grade = {"valid": score is not None, "score": score, "details": {}}
        return EpisodeRecord(task_id, task_id, {"eval": {"key": task_id}}, True, grade=grade)

    records = [graded("a", 1.0), graded("b", 0.3), graded("c", None), graded("d", 0.1)]
    quantile = summarize_variant(records, tasks, n_resamples=100)["quantile"]
    # a: top of 3 -> 1; b (an error metric): one reference is better, rank 2 of 3 -> 2/3; c failed -> 0
    assert quantile["domains"] == {"x": pytest.approx(5 / 6), "y": 0.0}
    assert quantile["overall"] == pytest.approx(5 / 12)
    assert summarize_variant(records[3:], tasks, n_resamples=100)["quantile"] is None
