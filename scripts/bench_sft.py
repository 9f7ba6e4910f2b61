"""Benchmark ``scripts/sft.py``'s training path against a bare TRL ``SFTTrainer`` call, on the same data and model.

    python scripts/bench_sft.py                          # smoke synthesis into a temp dir, tiny model, 4 steps each
    python scripts/bench_sft.py --dataset runs/synth-smoke --steps 6 --max_length 8192 --model runs/tiny-qwen3

Both runs take the settings of ``configs/sft/tiny-cpu.yaml`` (overridden: ``--steps``, ``--max_length``, no eval or
checkpoints during training, per-step logs with token counts) and the same length-filtered train split. Ours is
``training.sft.run_sft`` (what ``scripts/sft.py`` runs); the reference is ``SFTTrainer(model, args=SFTConfig(...),
train_dataset=..., processing_class=tokenizer)`` with a copy of the same ``SFTConfig``. Throughput is
``training.sft.steady_tokens_per_second`` for both: non-padding training tokens over wall time from the end of
step 1 (the warm-up step, excluded) to the end of the last step. Ours runs first, so any warm-up left in the
process counts against it.

Prints a small table, then one JSON line (the last line) with ``tokens_per_s``, ``bare_trl_tokens_per_s`` and
``ratio`` (ours / bare; the target is >= 0.9).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import shutil
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def smoke_dataset(out: Path) -> Path:
    """A fresh ``configs/synthesis/smoke.yaml`` run into ``out`` (about 10 s); returns ``out``."""
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    isolation = "bwrap" if shutil.which("bwrap") else "none"
    config = SynthesisConfig.from_yaml(REPO / "configs" / "synthesis" / "smoke.yaml", isolation=isolation)
    synthesize(config, out, progress=False)
    return out


def bare_trl_tokens_per_second(model_path: str, data_args, sft_config) -> float:
    """The reference: a plain ``SFTTrainer`` on the split ``run_sft`` trains on, with the same ``SFTConfig``."""
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from training.sft import load_sft_splits, steady_tokens_per_second

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    splits, _ = load_sft_splits(data_args, sft_config.max_length, tokenizer)
    trainer = SFTTrainer(model_path, args=sft_config, train_dataset=splits["train"], processing_class=tokenizer)
    trainer.train()
    return steady_tokens_per_second(trainer.state.log_history)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", help="a synthesis output folder (default: a smoke synthesis into a temp dir)")
    parser.add_argument("--steps", type=int, default=4, help="training steps per run, the first one untimed (4)")
    parser.add_argument("--max_length", type=int, default=4096, help="longest sample kept, in tokens (4096)")
    parser.add_argument("--model", help="model folder or hub id (default: the config's, the embedded tiny Qwen3)")
    parser.add_argument("--config", default=str(REPO / "configs" / "sft" / "tiny-cpu.yaml"), help="SFT config")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error(f"--steps must be >= 2 (step 1 is the untimed warm-up), got {args.steps}")
    logging.basicConfig(level=logging.WARNING)

    with tempfile.TemporaryDirectory(prefix="bench-sft-") as tmp:
        dataset = args.dataset or str(smoke_dataset(Path(tmp) / "synth"))
        overrides = {
            "dataset_path": dataset,
            "max_steps": args.steps,
            "max_length": args.max_length,
            "max_eval_samples": 1,
            "eval_strategy": "no",
            "save_strategy": "no",
            "logging_steps": 1,
            "assistant_only_loss": "true",
            "disable_tqdm": "true",
        }
        if args.model:
            overrides["model_name_or_path"] = args.model
        argv = ["--config", args.config, *(f"--{key}={value}" for key, value in overrides.items())]
        model_args, data_args, sft_config = _script_parser().parse_args_and_config(argv)
        sft_config.include_num_input_tokens_seen = "non_padding"  # as run_sft sets it (the CLI takes only a bool)
        bare_config = copy.deepcopy(sft_config)
        sft_config.output_dir = str(Path(tmp) / "ours")
        bare_config.output_dir = str(Path(tmp) / "bare")

        from training.sft import resolve_model, run_sft

        ours = run_sft(model_args, data_args, sft_config)["train/tokens_per_second_after_first_step"]
        bare_config.model_init_kwargs = sft_config.model_init_kwargs  # as run_sft set them (dtype)
        bare = bare_trl_tokens_per_second(resolve_model(model_args), data_args, bare_config)

    result = {"tokens_per_s": round(ours, 1), "bare_trl_tokens_per_s": round(bare, 1), "ratio": round(ours / bare, 3)}
    print(f"{'run':<28}{'tokens/s':>12}")
    print(f"{'scripts/sft.py (run_sft)':<28}{ours:>12.1f}")
    print(f"{'bare SFTTrainer':<28}{bare:>12.1f}")
    print(f"{'ratio':<28}{ours / bare:>12.3f}   (steps {args.steps}, step 1 untimed; max_length {args.max_length})")
    print(json.dumps(result))
    return 0


def _script_parser():
    """``scripts/sft.py``'s ``TrlParser`` (scripts/ is not a package: load the file)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sft_script", REPO / "scripts" / "sft.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_parser()


if __name__ == "__main__":
    raise SystemExit(main())
