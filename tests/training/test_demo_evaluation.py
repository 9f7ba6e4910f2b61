"""The evaluation of ``make demo`` (configs/pipeline/demo.yaml), without a model: the same suite, task and fault
selection, played by the scripted worker under the ``none`` and ``rule`` managers. The faults it keeps are held out
and spread to scored turns, so the DCR is defined; the ``none`` numbers are counted by hand below. One slow test runs
the demo's training stages for real. Both check the summary rows against tests/training/expected/demo_summary.txt."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.evaluation.evaluate import run_evaluation
from harness.evaluation.suite import resolve_suite, task_dependents
from harness.manager.episode import read_episodes
from training import pipeline
from training.pipeline import (
    PipelineConfig,
    evaluate_row,
    evaluation_config,
    evaluation_figures,
    run_pipeline,
    stage_rows,
    summary_table,
    write_eval_suite,
)

ROOT = Path(__file__).resolve().parents[2]
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"
EXPECTED = Path(__file__).parent / "expected" / "demo_summary.txt"
TRAINING = ("synthesize", "sft", "rl")


def expected_rows() -> tuple[dict[str, str], list[str]]:
    """The committed summary: the training stages' rows (``STAGE: ROW`` lines) as ``{stage: row}``, and the lines of
    the evaluate rows (the other lines), comments and blank lines left out."""
    lines = [line for line in EXPECTED.read_text().splitlines() if line and not line.startswith("#")]
    training = [line.split(": ", 1) for line in lines if line.split(": ", 1)[0] in TRAINING]
    return dict(training), [line for line in lines if line.split(": ", 1)[0] not in TRAINING]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    config = PipelineConfig.from_yaml(ROOT / "configs" / "pipeline" / "demo.yaml", isolation=ISOLATION)
    out, cache = tmp_path_factory.mktemp("eval"), tmp_path_factory.mktemp("suites")
    write_eval_suite(config.eval_suite, cache)  # what the pipeline's evaluate stage writes before it evaluates
    evaluation = evaluation_config(config, out, ["none", "rule"], ["none", "rule"], cache)
    return config, evaluation, run_evaluation(evaluation)


def verdicts(out: str, variant: str) -> dict[str, str]:
    """Episode (``clean``, ``fault-N-TURN-TYPE``) -> its turns' 0/1 verdicts as a string, turn 1 first."""
    records = read_episodes(Path(out) / "episodes" / f"{variant}.jsonl")
    return {
        r.config["eval"]["key"].split("/")[1]: "".join(
            str(int(t["correct"])) for t in r.grade["details"]["turns"].values()
        )
        for r in records
    }


def test_the_demo_plays_held_out_faults_that_reach_scored_turns(demo):
    from synthesis.config import SynthesisConfig

    config, evaluation, _ = demo
    suite = resolve_suite(
        evaluation.suite,
        cache=evaluation.cache,
        limit=evaluation.limit,
        fault_limit=evaluation.fault_limit,
        fault_order=evaluation.fault_order,
    )
    assert (config.eval_fault_limit, config.eval_fault_order) == (2, "dependents")
    [task_dir] = suite.task_dirs
    training = SynthesisConfig.from_yaml(config.path(config.synthesis))  # what the demo trains on
    training_seeds = range(training.seed, training.seed + training.tasks_per_domain)
    assert task_dir.name == "syn-finance-1000-8" and 1000 not in training_seeds  # held out: its seed
    assert "finance" not in training.domains  # and its domain, for the demo's training data
    reach = task_dependents(task_dir)
    assert [(f.turn_id, f.fault_type) for f in suite.faults] == [("2", "wrong_column"), ("2", "execution_error")]
    assert reach["2"] == {"3", "4", "5", "7", "8"}
    every = resolve_suite(evaluation.suite, cache=evaluation.cache).faults  # the other four reach fewer turns
    assert sorted(len(reach[f.turn_id]) for f in every) == [0, 2, 2, 4, 5, 5]


def test_dcr_is_defined_and_matches_the_hand_count(demo):
    """syn-finance-1000-8: turn 2 <- 1, 3 <- 2, 4 <- 3, 5 <- 3, 7 <- 5 and 6, 8 <- 5 (turns 1 and 6 have no upstream:
    excluded). ``none``:

    - clean, 11111111: the six turns with an upstream are clean and right;
    - wrong column at turn 2, 10111111: clean 2 (wrong: the fault), 4, 5, 7, 8; contaminated 3 (right: the wrong
      column does not reach it);
    - execution error at turn 2, 10001111: clean 2 (wrong), 7, 8; contaminated 3, 4 (wrong) and 5 (right).

    Clean: 14 turns, 2 wrong; contaminated: 4 turns, 2 wrong. DCR = 2/4 - 2/14 = 5/14, over n = 18 turns."""
    _, evaluation, results = demo
    assert verdicts(evaluation.out, "none") == {
        "clean": "11111111",
        "fault-1-2-wrong_column": "10111111",
        "fault-2-2-execution_error": "10001111",
    }
    none, rule = results["variants"]["none"], results["variants"]["rule"]
    detail = none["dcr_detail"]
    assert (detail["n_clean"], detail["n_contaminated"], detail["n_excluded"], detail["n_unscored"]) == (14, 4, 6, 0)
    assert detail["clean_error"] == pytest.approx(2 / 14) and detail["contaminated_error"] == pytest.approx(2 / 4)
    assert none["dcr"] == pytest.approx(5 / 14) and none["turn_accuracy"] == pytest.approx(20 / 24)
    # rule's check_execution sees the failed cell of turn 2 and its repair makes turn 2 right; the wrong column runs
    # without an error, rule does not see it, and it stays
    rule_verdicts = verdicts(evaluation.out, "rule")
    assert rule_verdicts["fault-1-2-wrong_column"] == "10111111"
    assert rule_verdicts["fault-2-2-execution_error"][:2] == "11" and rule["repair_detail"]["true_positives"] == 1
    assert rule["turn_accuracy"] > none["turn_accuracy"]
    assert rule["dcr"] is not None and rule["dcr"] < none["dcr"]
    assert rule["dcr_detail"]["n_clean"] + rule["dcr_detail"]["n_contaminated"] == 18

    figures = evaluation_figures(results)
    assert figures["baseline"] == "none" and figures["episodes"] == 3
    assert "vs_baseline" not in figures["variants"]["none"]
    [comparison] = results["comparisons"]
    paired = figures["variants"]["rule"]["vs_baseline"]
    assert paired["turn_accuracy_diff"] == comparison["turn_accuracy_diff"] > 0
    assert paired["p_nonpositive"] == comparison["p_nonpositive"] and paired["ci95"] == comparison["ci95"]
    row = evaluate_row({**figures, "report": "R"}, lambda v: "n/a" if v is None else f"{v:.3f}")
    assert row.splitlines()[0] == "none: turn acc 0.833, DCR 0.357 (n=18, 4 contaminated)"
    assert row.splitlines()[1].startswith(f"rule: turn acc {rule['turn_accuracy']:.3f} (+")
    assert "vs none, 95% CI [" in row and "P(diff<=0) " in row
    assert row.endswith("(3 episodes, SIMULATED worker) report R")
    report = (Path(evaluation.out) / "report.md").read_text()
    assert "| DCR | DCR n |" in report and "| 0.357 | 18 |" in report  # none's DCR and its n


def test_the_summary_rows_match_the_expected_file(demo):
    """The evaluate lines of tests/training/expected/demo_summary.txt are the summary's evaluate rows of none and
    rule, as `make demo` prints them (the same episodes, the same per-comparison bootstrap seed as with its four
    managers)."""
    _, _, results = demo
    _, expected = expected_rows()
    assert len(expected) == 3
    row = evaluate_row({**evaluation_figures(results), "report": "R"}).splitlines()
    assert row[-1].endswith(" report R")
    assert [*row[:-1], row[-1].removesuffix(" report R")] == expected


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~2.5 min on an idle 2-core machine: the tiny model, the smoke synthesis, SFT, DAPO
def test_the_training_stages_print_the_expected_summary_rows(tmp_path, monkeypatch):
    """The stages model, synthesize, sft and rl of configs/pipeline/demo.yaml run for real through the pipeline driver
    (the evaluate stage, which serves the checkpoints, is replaced by nothing); their rows of the summary table, made
    by the table's own code, are the ``STAGE: ROW`` lines of the expected file."""
    config = PipelineConfig.from_yaml(ROOT / "configs" / "pipeline" / "demo.yaml", report_to="none")
    monkeypatch.setattr(pipeline, "STAGE_FUNCTIONS", {**pipeline.STAGE_FUNCTIONS, "evaluate": lambda ctx: {}})
    summary = run_pipeline(config, tmp_path / "demo")
    rows = stage_rows(summary["stages"])
    expected, _ = expected_rows()
    assert list(expected) == list(TRAINING)
    assert {stage: rows[stage] for stage in TRAINING} == expected
    assert rows["model"] == f"tiny Qwen3 at {tmp_path / 'demo' / 'model' / 'tiny-qwen3'}"
    table = summary_table(summary)
    assert all(row in table for row in expected.values())


def test_a_bad_fault_order_is_refused_when_the_config_loads(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("eval_fault_order: most\n")
    with pytest.raises(ValueError, match="eval_fault_order='most'.*file, dependents"):
        PipelineConfig.from_yaml(path)


def test_the_summary_row_reads_a_marker_written_before_it_had_the_comparison():
    old = {"report": "R", "variants": {"none": {"turn_accuracy": 0.9, "dcr": None}}}
    row = evaluate_row(old, lambda v: "n/a" if v is None else f"{v:.3f}")
    assert row == "none: turn acc 0.900, DCR n/a (n=n/a)\n(SIMULATED worker) report R"
