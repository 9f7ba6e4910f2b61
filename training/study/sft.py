"""The study's SFT launch: ``scripts/sft.py``'s arguments plus ``--action_name_weight``, run by
:func:`training.sft.run_sft` with the action-name-weighted trainer (:mod:`training.study.action_weight`).

    accelerate launch --config_file configs/accelerate/cpu.yaml -m training.study.sft \\
        --config configs/sft/smollm2-lora-cpu.yaml --action_name_weight 2 ...
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field


@dataclass
class StudySFTArguments:
    """The study's own SFT knob."""

    action_name_weight: float = field(
        default=1.0,
        metadata={
            "help": "Training-loss weight of the tokens that name each trained tool call's action (the decision, "
            "e.g. REPAIR vs FINALIZE_RELATIONS), every other token weighing 1; 1 is TRL's plain per-token loss "
            "(training.study.action_weight)."
        },
    )

    def __post_init__(self) -> None:
        if not self.action_name_weight > 0:
            raise ValueError(f"action_name_weight={self.action_name_weight} must be positive; 1 leaves the loss plain")


def make_parser():
    from trl import SFTConfig, TrlParser

    from training.sft import DataArguments, ModelArguments

    return TrlParser((ModelArguments, DataArguments, StudySFTArguments, SFTConfig))


def main(argv: list[str] | None = None) -> dict:
    from trl import SFTTrainer

    from harness.yaml_config import parse_checked
    from training.sft import run_sft
    from training.study.action_weight import weighted_trainer_class

    model_args, data_args, study_args, sft_config = parse_checked(make_parser(), argv, "training.study.sft")
    trainer_class = weighted_trainer_class(SFTTrainer, study_args.action_name_weight)
    return run_sft(model_args, data_args, sft_config, trainer_class=trainer_class)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main()
