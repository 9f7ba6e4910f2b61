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

    def test_suite(self) -> Path:
        """The evaluation suite of the frozen test set (:func:`training.study.testset.draw_testset`)."""
        return self.out / "data" / "test-suite"

    def arm_dir(self, arm: str) -> Path:
        return self.out / "arms" / arm

    def model_dir(self, arm: str) -> Path:
        """The checkpoint folder a model arm is served from (its ``manager.json`` beside the weights)."""
        return self.arm_dir(arm) / "model"

    def eval_dir(self, arm: str) -> Path:
        """The ``stateguard evaluate --out`` folder of ``arm``."""
        return self.out / "eval" / arm

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
