"""What :func:`training.rl.trainer.build_trainer` hands TRL: the ``GRPOTrainer`` subclass and the reward functions.

- :func:`dapo_trainer_class`: ``DapoTrainer``, TRL's ``GRPOTrainer`` (whose ``_compute_loss`` computes the DAPO loss
  with ``loss_type: dapo``, see :mod:`training.rl.dapo`) plus the rollout state in each checkpoint (:data:`STATE_FILE`)
  and two savings that leave the loss unchanged: rows with zero advantage are not forwarded (a micro-batch with no
  other row still forwards one, so that every rank makes one forward and the same collectives per micro-batch), and
  off CUDA in one process only the completion positions are scored. Its ``rollouts`` is the run's
  :class:`~training.rl.trainer.ManagerRollouts`, TRL's ``rollout_func``.
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
            """Off CUDA/XPU in one process, score only the completion positions, one unpadded row at a time (TRL's
            fused head scores every position there, prompt included: ~100x slower for a 3.7k-token prompt and a
            48-token completion); on CUDA/XPU or with several processes TRL's own scoring, one forward per call: DDP
            and ZeRO-3 run a collective in every forward, so every rank must make the same number of forwards
            whatever its number of rows."""
            if (
                _use_triton(input_ids.device)
                or self.accelerator.num_processes > 1
                or compute_aux_loss
                or any(v is not None for v in multimodal.values())
            ):
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                    **multimodal,
                )  # fmt: skip
            from training.rl.engines import completion_logprobs

            logps, entropy = completion_logprobs(model, input_ids, attention_mask, logits_to_keep, self.temperature)
            return logps, entropy if compute_entropy else None, None

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            """TRL's loss on every rank over the same number of rows: the rows whose advantage is not zero, padded
            with zero-advantage rows under an all-zero loss mask to the largest such count across ranks (at least 1).

            With ``beta: 0`` a zero-advantage row (a uniform group that filled the batch) adds exactly 0 to the loss
            and its gradient, and ``dapo`` divides by the batch's token count (``num_items_in_batch``, unchanged),
            so the loss is the same without its forward and backward. A padding row's loss mask (TRL's
            ``completion_mask * tool_mask``; its ``tool_mask`` set to 0) keeps it out of the loss and of the token
            sums behind TRL's entropy and clip metrics, so those are logged over the rows that train.

            Why every rank forwards, and the same number of rows: TRL's loss runs collectives (``accelerator.reduce``
            of the metric sums, ``accelerator.gather`` of one clip fraction per row, which must have the same size
            on every rank), and DDP and ZeRO-3 run collectives in every forward; a rank that skipped them, or
            gathered fewer rows, would leave the others waiting forever. One max-reduce of the live-row counts,
            called by every rank on every micro-batch before any branch, fixes the count. A rank with no live row
            returns its loss times 0 (an exact 0 whatever else TRL adds); when no rank has one, the metric entries
            of that forward (entropy and clip fractions of no token) are dropped, as if it had not run.

            The alternatives: forwarding every row on every rank needs no agreement but pays a forward and backward
            for each zero-advantage row, which dynamic sampling's filler groups make common; skipping the forward
            when no rank has a live row would leave a backward with no forward under DDP and ZeRO-3 hooks, so the
            one-row forward keeps every micro-batch on the path those run every step."""
            live = inputs["advantages"] != 0
            count = int(live.sum())
            most = int(self.accelerator.reduce(live.sum().reshape(1), reduction="max").item())
            width, rows = max(1, most), live.size(0)
            if count == rows == width:
                return super()._compute_loss(model, inputs)
            keep = live.logical_not().int().argsort(stable=True)[:width]  # the live rows first, in their order
            subset = {k: v[keep] if _is_row_tensor(v, rows) else v for k, v in inputs.items()}
            if count < width:
                completion_mask = inputs["completion_mask"]
                env_mask = inputs.get("tool_mask", completion_mask.new_ones(completion_mask.shape))
                subset["tool_mask"] = (env_mask * live[:, None])[keep]
            if count:
                return super()._compute_loss(model, subset)
            metrics = self._metrics["train" if self.model.training else "eval"]
            sizes = {key: len(values) for key, values in metrics.items()}
            loss = super()._compute_loss(model, subset) * 0.0
            if most == 0:
                for key in list(metrics):
                    del metrics[key][sizes.get(key, 0) :]
                    if not metrics[key]:
                        del metrics[key]
            return loss

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
