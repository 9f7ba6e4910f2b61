"""Resume: a CPU run killed after its step-2 checkpoint and resumed ends bitwise where an uninterrupted
run ends.

Both runs go through ``scripts/sft.py`` with deterministic settings (``full_determinism``: seed and
``torch.use_deterministic_algorithms``; dataloader workers 0): 4 steps of batch 1 on 3 samples, so step 4 starts a
second epoch (a fresh shuffle), under a linear learning-rate decay, checkpoints every 2 steps. The interrupted run is
a subprocess that gets SIGKILL as soon as ``checkpoint-2`` is complete (its ``trainer_state.json``, written last,
parses); it is resumed in another with ``--resume_from_checkpoint true`` (the latest checkpoint). Every run is its own
process (see :func:`_run`). Equal final weights (``torch.equal`` on every tensor) need the model, the AdamW moments,
the scheduler and the data position restored; the per-step losses and learning rates after the resume are compared
too. (The tiny Qwen3 has no dropout, so the restored RNG state shows only through the data order.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOTAL_STEPS, KILL_AFTER = 4, 2


def _argv(model_dir: Path, dataset_dir: Path, output_dir: Path) -> list[str]:
    return [
        "--config", str(REPO / "configs" / "sft" / "tiny-cpu.yaml"),
        "--model_name_or_path", str(model_dir),
        "--dataset_path", str(dataset_dir),
        "--output_dir", str(output_dir),
        "--max_train_samples", "3",
        "--max_eval_samples", "1",
        "--max_length", "512",
        "--max_steps", str(TOTAL_STEPS),
        "--lr_scheduler_type", "linear",
        "--save_strategy", "steps",
        "--save_steps", str(KILL_AFTER),
        "--full_determinism", "true",
        "--dataloader_num_workers", "0",
        "--disable_tqdm", "true",
    ]  # fmt: skip


def _kill_after_checkpoint(argv: list[str], checkpoint: Path, timeout_s: float = 120.0) -> int:
    """Run scripts/sft.py in a subprocess; SIGKILL it once ``checkpoint`` is complete. Returns its exit code."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "sft.py"), *argv],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and process.poll() is None:
            try:
                json.loads((checkpoint / "trainer_state.json").read_text())
                break
            except (FileNotFoundError, json.JSONDecodeError):
                time.sleep(0.05)
    finally:
        process.kill()  # SIGKILL
    return process.wait()


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _steps(folder: Path) -> dict[int, tuple[float, float]]:
    """step -> (loss, learning rate) from a run's trainer_state.json."""
    history = json.loads((folder / "trainer_state.json").read_text())["log_history"]
    return {entry["step"]: (entry["loss"], entry["learning_rate"]) for entry in history if "loss" in entry}


def _run(argv: list[str]) -> None:
    """scripts/sft.py in a fresh process, like the killed run: a bitwise comparison needs the same torch threading in
    all three runs, and this pytest process may not have it (any earlier ``torch.set_num_threads`` call — an
    in-process RL test sets 1 — changes the gradients' summation order for good, even set back to the same count)."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "sft.py"), *argv], cwd=REPO, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, sft_short_dataset_dir):
    """(uninterrupted output dir, killed-and-resumed output dir, the killed process's exit code, resume metrics)."""
    root = tmp_path_factory.mktemp("resume")
    straight, resumed = root / "straight", root / "resumed"
    _run(_argv(tiny_model_dir, sft_short_dataset_dir, straight))
    argv = _argv(tiny_model_dir, sft_short_dataset_dir, resumed)
    return_code = _kill_after_checkpoint(argv, resumed / f"checkpoint-{KILL_AFTER}")
    _run([*argv, "--resume_from_checkpoint", "true"])
    metrics = json.loads((resumed / "all_results.json").read_text())
    return straight, resumed, return_code, metrics


def test_killed_run_resumes_to_the_uninterrupted_weights_bitwise(runs):
    import torch

    straight, resumed, return_code, metrics = runs
    # The kill was real: SIGKILL before the run finished (no later checkpoint, no final model of its own).
    assert return_code == -signal.SIGKILL
    assert sorted(p.name for p in resumed.glob("checkpoint-*")) == [
        f"checkpoint-{KILL_AFTER}",
        f"checkpoint-{TOTAL_STEPS}",
    ]
    assert json.loads((resumed / "trainer_state.json").read_text())["global_step"] == TOTAL_STEPS
    assert metrics["train/epoch"] == pytest.approx(TOTAL_STEPS / 3)

    final, reference = _weights(resumed), _weights(straight)
    assert final.keys() == reference.keys() and len(final) > 10
    unequal = [name for name in reference if not torch.equal(final[name], reference[name])]
    assert unequal == []
    # ... and training moved them: the checkpoint at the kill differs from the end.
    at_kill = _weights(resumed / f"checkpoint-{KILL_AFTER}")
    assert not torch.equal(at_kill["model.embed_tokens.weight"], reference["model.embed_tokens.weight"])


def test_resumed_steps_match_the_uninterrupted_run(runs):
    straight, resumed, _, _ = runs
    reference, after = _steps(straight), _steps(resumed)
    assert sorted(reference) == list(range(1, TOTAL_STEPS + 1))
    assert sorted(after) == sorted(reference)  # steps 1-2 from the checkpoint's history, 3-4 trained after the resume
    assert after == reference
    # The linear decay continued from step 2 (the scheduler was restored, not restarted).
    learning_rates = [reference[step][1] for step in sorted(reference)]
    assert learning_rates == sorted(learning_rates, reverse=True) and len(set(learning_rates)) == TOTAL_STEPS
    assert len({reference[step][0] for step in reference}) == TOTAL_STEPS


def test_resume_flag_values():
    from training.sft import resolve_resume

    assert resolve_resume("true") is True and resolve_resume("True") is True
    assert resolve_resume(None) is None and resolve_resume("false") is None
    assert resolve_resume("runs/x/checkpoint-2") == "runs/x/checkpoint-2"
