"""Supervised fine-tuning of the manager: parse a config, call ``training.sft.run_sft``.

CPU, the embedded tiny Qwen3 on the smoke synthesis run (the default)::

    stateguard synthesize --config configs/synthesis/smoke.yaml --out runs/synth-smoke
    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/sft.py --config configs/sft/tiny-cpu.yaml

Qwen3-8B, full fine-tune on 8x A100 80 GB with DeepSpeed ZeRO-3::

    accelerate launch --config_file configs/accelerate/zero3.yaml scripts/sft.py --config configs/sft/qwen3-8b.yaml

Qwen3-8B with LoRA adapters (ZeRO-2); ``output_dir`` then holds the merged model (``merge_lora: true``, the default)
and the adapter in ``output_dir/adapter``::

    accelerate launch --config_file configs/accelerate/zero2.yaml \
        scripts/sft.py --config configs/sft/qwen3-8b-lora.yaml

Resume a run from its latest checkpoint (needs ``--save_strategy steps``; model, optimizer, scheduler, RNG and
data position are restored)::

    accelerate launch --config_file configs/accelerate/cpu.yaml scripts/sft.py --config configs/sft/tiny-cpu.yaml \
        --save_strategy steps --save_steps 4 --resume_from_checkpoint true

Two CPU processes with DeepSpeed ZeRO-2 (a smoke test of the distributed path; ``accelerate launch --cpu
--num_processes 2`` would start only one process, torchrun starts two)::

    DS_BUILD_OPS=0 torchrun --standalone --nproc_per_node 2 scripts/sft.py --config configs/sft/tiny-cpu.yaml \
        --deepspeed configs/accelerate/deepspeed/zero2.json --max_steps 2

The YAML keys are the fields of ``training.sft.ModelArguments``, ``training.sft.DataArguments`` and TRL's
``SFTConfig``; any of them can be overridden on the command line (``--max_steps 2``).
"""

from __future__ import annotations

import logging


def make_parser():
    from trl import SFTConfig, TrlParser

    from training.sft import DataArguments, ModelArguments

    return TrlParser((ModelArguments, DataArguments, SFTConfig))


def main(argv: list[str] | None = None) -> dict:
    from harness.yaml_config import parse_checked
    from training.sft import run_sft

    model_args, data_args, sft_config = parse_checked(make_parser(), argv, "scripts/sft.py")
    return run_sft(model_args, data_args, sft_config)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main()
