"""The table `stateguard evaluate` ends with: one plain-text row per arm, read from the results dict."""

from __future__ import annotations

from harness.evaluation.cli import arms_table


def variant(turn, dcr=None, n_errored=0, repairs=(None, None)):
    return {
        "n_episodes": 3, "n_errored": n_errored, "task_accuracy": 1 / 3, "turn_accuracy": turn,
        "turn_accuracy_ci95": [turn - 0.1, turn + 0.1], "dcr": dcr, "repair_precision": repairs[0],
        "repair_recall": repairs[1], "dcr_detail": None if dcr is None else {"n_clean": 14, "n_contaminated": 4},
    }  # fmt: skip


def test_one_row_per_arm_with_the_difference_versus_the_first(tmp_path):
    results = {
        "suite": {"name": "heldout-demo"},
        "simulated": True,
        "variants": {"none": variant(0.5, dcr=5 / 14), "rule": variant(0.75, n_errored=1, repairs=(1.0, 0.5))},
        "comparisons": [{"a": "none", "b": "rule", "turn_accuracy_diff": 0.25, "ci95": [0.0, 0.5]}],
    }
    (tmp_path / "report.md").write_text("r")
    assert arms_table(results, tmp_path).splitlines() == [
        "suite heldout-demo (SIMULATED worker: it replays reference programs)",
        "arm   episodes  errored  task acc  turn acc [95% CI]     DCR (n)     repair P / R   vs none [95% CI]",
        "none  3         0        0.333     0.500 [0.400, 0.600]  0.357 (18)  n/a / n/a",
        "rule  3         1        0.333     0.750 [0.650, 0.850]  n/a (n/a)   1.000 / 0.500  +0.250 [0.000, 0.500]",
        f"results: {tmp_path / 'results.json'}",
        f"report: {tmp_path / 'report.md'}",
    ]
