"""Checkpoint evaluation during training: the same evaluation on a small fixed suite, one variant per checkpoint.

:func:`evaluate_checkpoint` runs the checkpoint as the in-process ``llm-hf:PATH`` manager next to a baseline
(default ``none``) on a fixed suite (default ``smoke``, the scripted worker, so the numbers are SIMULATED and
deterministic) into ONE output folder shared by all checkpoints of a run. Each checkpoint is a variant labelled
``step-N``; the baseline's episodes and earlier checkpoints' episodes are kept (resume), so every call rewrites
``results.json`` / ``report.md`` comparing the baseline and all steps so far (deleted checkpoint folders are fine:
their episodes are already recorded). A line per call is appended to ``OUT/by_step.jsonl``::

    {"step": 100, "checkpoint": "...", "variant": "step-100", "task_accuracy": ..., "turn_accuracy": ..., "dcr": ...,
     "repair_precision": ..., "repair_recall": ..., "turn_accuracy_diff": ..., "ci95": [lo, hi], "simulated": true}

(``turn_accuracy_diff``/``ci95``: against the baseline.) SFT and RL runs pointed at the same suite compare by step.

:func:`checkpoint_eval_callback` wraps it as a ``transformers.TrainerCallback`` that evaluates each saved
``OUTPUT_DIR/checkpoint-STEP`` on the main process (``on_save``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.evaluation.run import EvaluationConfig, run_evaluation
from harness.jsonl import append_jsonl

logger = logging.getLogger(__name__)

STEPS_FILE = "checkpoints.json"
BY_STEP_FILE = "by_step.jsonl"


@dataclass
class CheckpointEvalConfig:
    out: str = field(metadata={"help": "Folder shared by every checkpoint of the run (results.json, by_step.jsonl)."})
    suite: str = field(default="smoke", metadata={"help": "A small fixed suite (name or folder)."})
    baseline: str = field(default="none", metadata={"help": "Manager variant every checkpoint is compared with."})
    worker: str = field(default="scripted", metadata={"help": "Worker spec (scripted: simulated, deterministic)."})
    limit: int | None = field(default=None, metadata={"help": "Only the first N tasks of the suite."})
    manager_max_tokens: int | None = field(default=256, metadata={"help": "Cap on one manager reply (tokens)."})
    cache: str = field(default="runs/eval-suites", metadata={"help": "Where named suites are built."})
    isolation: str = field(default="bwrap", metadata={"help": "Sandbox isolation: bwrap | none."})
    runtime: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "More RuntimeConfig fields (e.g. max_actions) for every episode."}
    )
    n_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples."})


def evaluate_checkpoint(checkpoint: str | Path, step: int, config: CheckpointEvalConfig) -> dict[str, Any]:
    """Evaluate ``checkpoint`` as variant ``step-STEP`` (see the module docstring); returns its ``by_step`` line."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    steps_path = out / STEPS_FILE
    known: dict[str, str] = json.loads(steps_path.read_text()) if steps_path.is_file() else {}
    label = f"step-{step}"
    known[label] = f"llm-hf:{checkpoint}"
    steps_path.write_text(json.dumps(known, indent=2) + "\n", encoding="utf-8")
    results = run_evaluation(
        EvaluationConfig(
            suite=config.suite,
            out=str(out),
            worker=config.worker,
            managers=[config.baseline, *known.values()],
            labels=[config.baseline, *known],
            limit=config.limit,
            cache=config.cache,
            isolation=config.isolation,
            manager_max_tokens=config.manager_max_tokens,
            runtime=config.runtime,
            n_resamples=config.n_resamples,
        )
    )
    variant = results["variants"][label]
    comparison = next(c for c in results["comparisons"] if c["a"] == config.baseline and c["b"] == label)
    line = {
        "step": step,
        "checkpoint": str(checkpoint),
        "variant": label,
        **{k: variant[k] for k in ("task_accuracy", "turn_accuracy", "dcr", "repair_precision", "repair_recall")},
        "turn_accuracy_diff": comparison["turn_accuracy_diff"],
        "ci95": comparison["ci95"],
        "simulated": variant["simulated"],
    }
    append_jsonl(out / BY_STEP_FILE, line)
    logger.info("checkpoint %s: %s", label, line)
    return line


def checkpoint_eval_callback(config: CheckpointEvalConfig) -> Any:
    """A ``transformers.TrainerCallback`` running :func:`evaluate_checkpoint` on every saved checkpoint."""
    from transformers import TrainerCallback

    class CheckpointEvalCallback(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not state.is_world_process_zero:
                return
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if checkpoint.is_dir():
                evaluate_checkpoint(checkpoint, state.global_step, config)
            else:
                logger.warning("no checkpoint folder %s after a save; nothing to evaluate", checkpoint)

    return CheckpointEvalCallback()
