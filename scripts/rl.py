"""DAPO reinforcement learning of the manager: parse a config, call ``training.rl.trainer.run_rl``.

CPU, the embedded tiny Qwen3 on the smoke synthesis run (the default; add ``--model_name_or_path OUT/sft`` to start
from an SFT checkpoint)::

    stateguard synthesize --config configs/synthesis/smoke.yaml --out runs/synth-smoke
    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/rl.py --config configs/rl/tiny-cpu.yaml

The hierarchical format (the model is tier 1 of the ``hier`` manager, ``format: hier``)::

    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/rl.py --config configs/rl/tiny-cpu-hier.yaml

The check-writing format (the model is tier 1 of the check-writing hier manager and writes a turn's checks; the
reward is validity-grounded, ``rewards.score_checks``; ``--model_name_or_path`` a hier_checks SFT checkpoint, whose
``manager.json`` sets the rollouts' view, grammar and token cap and is copied to the output)::

    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/rl.py \
        --config configs/rl/smollm2-checks-cpu.yaml --model_name_or_path runs/sft-smollm2-checks

Qwen3-8B on 8x A100 80 GB, vLLM colocated, DeepSpeed ZeRO-3::

    accelerate launch --config_file configs/accelerate/zero3.yaml scripts/rl.py --config configs/rl/qwen3-8b.yaml

vLLM as a separate server on GPU 7, training on the other seven (``vllm serve`` in dev mode with the flags TRL's
weight sync needs, ``training.rl.vllm_engine.vllm_serve_command``; the deprecated ``trl vllm-serve`` runs the
same)::

    CUDA_VISIBLE_DEVICES=7 VLLM_SERVER_DEV_MODE=1 vllm serve runs/sft-qwen3-8b --port 8000 --tensor-parallel-size 1 \
        --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --config_file configs/accelerate/zero3.yaml \
        --num_processes 7 scripts/rl.py --config configs/rl/qwen3-8b.yaml --vllm_mode server

Resume from the latest checkpoint (model, optimizer, scheduler, RNG, start-point position, dynamic-sampling buffer)::

    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/rl.py --config configs/rl/tiny-cpu.yaml \
        --save_strategy steps --save_steps 1 --resume_from_checkpoint true

The YAML keys are the fields of ``training.sft.ModelArguments``, ``training.rl.trainer.RLArguments`` and TRL's
``GRPOConfig``; any of them can be overridden on the command line (``--max_steps 4``).
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL


def make_parser():
    from trl import GRPOConfig, TrlParser

    from training.rl.trainer import RLArguments
    from training.sft import ModelArguments

    return TrlParser((ModelArguments, RLArguments, GRPOConfig))


def main(argv: list[str] | None = None) -> dict:
    from harness.yaml_config import parse_checked
    from training.rl.trainer import run_rl

    model_args, rl_args, config = parse_checked(make_parser(), argv, "scripts/rl.py")
    return run_rl(model_args, rl_args, config)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main()
