"""What :func:`training.rl.trainer.build_trainer` hands TRL: the ``GRPOTrainer`` subclass and the reward functions.

- :func:`dapo_trainer_class`: ``DapoTrainer``, TRL's ``GRPOTrainer`` (whose ``_compute_loss`` computes the DAPO loss
  with ``loss_type: dapo``, see :mod:`training.rl.dapo`) plus the rollout state in each checkpoint (:data:`STATE_FILE`)
  and two savings that leave the loss unchanged: rows with zero advantage are not forwarded, and off CUDA only the
  completion positions are scored. Its ``rollouts`` is the run's :class:`~training.rl.trainer.ManagerRollouts`,
  TRL's ``rollout_func``.
- :func:`reward_functions`: one TRL reward function per term of the composed reward, plus ``overlong``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

STATE_FILE = "rl_state-{process}.json"
"""The rollout state saved in each checkpoint folder, one file per process."""


def reward_functions(weights: dict[str, float]) -> tuple[list[Any], list[float]]:
    """TRL reward functions for every term of ``weights`` plus ``overlong``, and their weights."""
    funcs = [_term_reward(name) for name in weights]
    return [*funcs, _overlong_reward], [*weights.values(), 1.0]


def _term_reward(name: str) -> Any:
    def reward(prompts: list[Any], completions: list[Any], reward_terms: list[dict], **_: Any) -> list[float | None]:
        return [terms.get(name) for terms in reward_terms]

    reward.__name__ = reward.__qualname__ = name
    return reward


def _overlong_reward(prompts: list[Any], completions: list[Any], overlong: list[float], **_: Any) -> list[float]:
    return list(overlong)


_overlong_reward.__name__ = "overlong"


def dapo_trainer_class() -> type:
    """``DapoTrainer``: built on first use so that importing this module loads neither TRL nor transformers."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
    from trl import GRPOTrainer
    from trl.kernels.chunked_logprob import _use_triton  # the device test TRL's fused head uses

    class DapoTrainer(GRPOTrainer):
        """TRL's ``GRPOTrainer`` plus the rollout state (sampler position, dynamic-sampling buffer) in checkpoints,
        and completion-only scoring off CUDA."""

        def __init__(self, *args: Any, rollouts: Any, **kwargs: Any):
            self.rollouts = rollouts
            super().__init__(*args, rollout_func=rollouts, **kwargs)

        def _get_per_token_logps_and_entropies(
            self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, batch_size: int | None = None,
            compute_entropy: bool = False, compute_aux_loss: bool = False, **multimodal: Any,
        ) -> tuple[Any, Any, Any]:  # fmt: skip
            """Off CUDA/XPU, score only the completion positions, one unpadded row at a time (TRL's fused head scores
            every position there, prompt included: ~100x slower for a 3.7k-token prompt and a 48-token completion);
            on CUDA/XPU TRL's own fused, compact scoring."""
            if _use_triton(input_ids.device) or compute_aux_loss or any(v is not None for v in multimodal.values()):
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                    **multimodal,
                )  # fmt: skip
            from training.rl.engines import completion_logprobs

            logps, entropy = completion_logprobs(model, input_ids, attention_mask, logits_to_keep, self.temperature)
            return logps, entropy if compute_entropy else None, None

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            """TRL's loss over the rows whose advantage is not zero only: with ``beta: 0`` a zero-advantage row (a
            uniform group that filled the batch) adds exactly 0 to the loss and its gradient, and ``dapo`` divides by
            the batch's token count (``num_items_in_batch``, unchanged), so the loss is the same without its forward
            and backward. Entropy and clip fractions are then logged over the rows that train."""
            live = inputs["advantages"] != 0
            if bool(live.all()):
                return super()._compute_loss(model, inputs)
            if not bool(live.any()):  # nothing to learn from this batch: a zero loss on the graph, no forward
                return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
            rows = inputs["advantages"].size(0)
            subset = {k: v[live] if _is_row_tensor(v, rows) else v for k, v in inputs.items()}
            return super()._compute_loss(model, subset)

        def _state_path(self, folder: str | os.PathLike) -> Path:
            return Path(folder) / STATE_FILE.format(process=self.accelerator.process_index)

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            super()._save_checkpoint(model, trial)
            folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            self._state_path(folder).write_text(json.dumps(self.rollouts.sampler.state_dict()), encoding="utf-8")

        def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
            super()._load_optimizer_and_scheduler(checkpoint)
            if checkpoint is None:
                return
            path = self._state_path(checkpoint)
            if not path.is_file():
                raise FileNotFoundError(
                    f"{path}: the checkpoint has no rollout state; resume from a scripts/rl.py run"
                )
            self.rollouts.sampler.load_state_dict(json.loads(path.read_text(encoding="utf-8")))
            logger.info("resumed the rollout state from %s", path)

    return DapoTrainer


def _is_row_tensor(value: Any, rows: int) -> bool:
    """Whether ``value`` is a tensor with one entry per batch row (what a row subset must slice)."""
    return hasattr(value, "dim") and value.dim() > 0 and value.size(0) == rows
