"""Checkpoint evaluation during training: each saved checkpoint becomes a `step-N` variant of one shared evaluation."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

from harness.evaluation.checkpoint import CheckpointEvalConfig, checkpoint_eval_callback, evaluate_checkpoint
from harness.evaluation.run import variant_file

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def test_checkpoints_compare_by_step(tiny, two_turn_task, tmp_path):
    out = tmp_path / "eval"
    config = CheckpointEvalConfig(
        out=str(out), suite=str(two_turn_task), isolation=ISOLATION, manager_max_tokens=4,
        runtime={"max_actions": 1}, n_resamples=200,
    )  # fmt: skip
    line = evaluate_checkpoint(tiny, 10, config)
    # the scripted worker runs the clean task right whatever the (random) manager says: SIMULATED, no difference
    assert line["variant"] == "step-10" and line["step"] == 10 and line["simulated"] is True
    assert line["turn_accuracy"] == 1.0 and line["turn_accuracy_diff"] == 0.0 and line["ci95"] == [0.0, 0.0]

    # a Trainer saving checkpoint-20 (here the same weights) triggers the next evaluation on the main process only
    trainer_out = tmp_path / "trainer"
    (trainer_out).mkdir()
    (trainer_out / "checkpoint-20").symlink_to(tiny, target_is_directory=True)
    callback = checkpoint_eval_callback(config)
    args = SimpleNamespace(output_dir=str(trainer_out))
    callback.on_save(args, SimpleNamespace(is_world_process_zero=False, global_step=20), None)
    assert len((out / "by_step.jsonl").read_text().splitlines()) == 1  # other ranks do nothing
    step_10_episodes = variant_file(out, "step-10").read_text()
    callback.on_save(args, SimpleNamespace(is_world_process_zero=True, global_step=20), None)

    lines = [json.loads(x) for x in (out / "by_step.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [10, 20]
    assert lines[1]["checkpoint"] == str(trainer_out / "checkpoint-20")
    assert variant_file(out, "step-10").read_text() == step_10_episodes  # step 10 is not re-run
    results = json.loads((out / "results.json").read_text())
    assert list(results["variants"]) == ["none", "step-10", "step-20"]
    assert [(c["a"], c["b"]) for c in results["comparisons"]] == [
        ("none", "step-10"), ("none", "step-20"), ("step-10", "step-20"),
    ]  # fmt: skip
    assert results["variants"]["step-20"]["manager"]["activations"] == 4
    assert (out / "report.md").is_file()
