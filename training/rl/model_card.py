"""The model card an RL run writes next to its model: ``output_dir/README.md``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.rl.rollout_groups import GROUPS_FILE, summary_lines
from training.sft import ModelArguments, settings_and_metrics

if TYPE_CHECKING:
    from trl import GRPOConfig


def write_model_card(
    out_dir: Path,
    model_args: ModelArguments,
    rl_args: Any,
    config: GRPOConfig,
    metrics: dict,
    groups: list[dict[str, Any]] | None = None,
) -> Path:
    """``out_dir/README.md``: base model, pool, the DAPO settings (``config`` and ``rl_args``, a
    :class:`~training.rl.trainer.RLArguments`), the final metrics and, given ``groups``
    (:func:`~training.rl.rollout_groups.summarize_groups` rows), what the trained groups sampled and how it was
    rewarded."""
    settings = {name: getattr(config, name) for name in (
        "loss_type", "epsilon", "epsilon_high", "beta", "num_generations", "learning_rate", "max_steps",
        "per_device_train_batch_size", "gradient_accumulation_steps", "max_completion_length", "temperature",
        "use_vllm", "seed")}  # fmt: skip
    shown = (
        "format",
        "takeover",
        "gold_controls",
        "stratify_controls",
        "overlong_buffer",
        "overlong_factor",
        "max_rounds",
        "max_new_tokens",
    )
    settings.update({name: getattr(rl_args, name) for name in shown})
    lines = [
        "# StateGuard manager (SFT + DAPO)",
        "",
        f"- base model: `{model_args.model_name_or_path}`",
        f"- replay pool: `{rl_args.pool}`; one rollout = one manager activation, the exact conversation the served "
        "`llm` policy sends (training/rl/rollout.py)",
        "- trained with TRL `GRPOTrainer` (loss_type dapo) via `scripts/rl.py`",
        "",
        *settings_and_metrics(settings, metrics),
    ]
    if groups is not None:
        lines += [
            "## What the trained groups sampled",
            "",
            "Every rollout played, by the gold's control at its start and the model's sampled decision "
            f"(`{GROUPS_FILE}` holds each group). A negative mean of reward - group mean over the trained rollouts "
            "is a push away from that decision there.",
            "",
            *summary_lines(groups),
            "",
        ]
    path = out_dir / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
