"""Where a study run keeps each piece (:class:`Study`), and how it launches a training script.

Kept apart from :mod:`training.study.driver` (which builds it) so that the stages' modules take a typed ``Study``
without importing the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.tracking import resolve_report_to, trainer_flags
from training.pipeline import launch_training


@dataclass
class Study:
    """A study run: its config (a :class:`training.study.driver.StudyConfig`), output folder and where each piece
    lives."""

    config: Any
    out: Path

    def data_dir(self, split: str) -> Path:
        return self.out / "data" / split

    def heldout_splits(self) -> list[str]:
        """The held-out splits: ``heldout`` (the held-out fault types) and, when configured, ``heldout-seen`` (held-out
        tasks with the training fault types)."""
        return ["heldout", *(["heldout-seen"] if self.config.heldout_seen_synthesis else [])]

    def eval_suite(self) -> Path:
        """The suite the episodes are played on: the ``eval_split`` held-out split, or its tasks' first ``eval_turns``
        turns (with ``eval_faulted_only``: the tasks with a harmful fault there)."""
        split = self.config.eval_split
        if self.config.eval_turns is None:
            return self.data_dir(split)
        faulted = "-faulted" if self.config.eval_faulted_only else ""
        return self.out / "data" / f"{split}-first-{self.config.eval_turns}{faulted}"

    def arm_dir(self, arm: str) -> Path:
        return self.out / "arms" / arm

    def model_dir(self, arm: str) -> Path:
        """The checkpoint a model arm is evaluated with."""
        if arm in ("prompt", "windowed"):  # SmolLM2 as converted
            return self.config.path(self.config.smollm2_dir)
        return self.arm_dir(arm) / ("merged" if arm in ("sft-lora", "hier") else "model")

    def launch(self, arm: str, script: str, config: str, args: list[str]) -> None:
        self.arm_dir(arm).mkdir(parents=True, exist_ok=True)
        tracking = trainer_flags(resolve_report_to(self.config.report_to), f"{self.out.name}-{arm}")
        launch_training(
            script,
            self.config.path(config),
            [*tracking, *args],
            accelerate_config=self.config.path(self.config.accelerate_config),
            log=self.arm_dir(arm) / "log.txt",
            what=f"arm {arm}",
        )
