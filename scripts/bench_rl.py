"""Benchmark one DAPO step of ``scripts/rl.py`` on CPU: seconds per step, the rollout share, sampling throughput.

    python scripts/bench_rl.py                        # smoke synthesis into a temp dir, tiny model, 8 x 8 rollouts
    python scripts/bench_rl.py --pool runs/synth-smoke --prompts 8 --rollouts 8 --steps 2

The run is ``training.rl.trainer.run_rl`` on ``configs/rl/tiny-cpu.yaml`` with ``--prompts`` start points of
``--rollouts`` rollouts per step (8 x 8 = 64 rollouts; micro-batches of 8, so ``gradient_accumulation_steps`` is
``prompts * rollouts / 8``), one dynamic-sampling round (a fixed amount of work per step), no checkpoints.
Figures, from the trainer's per-step logs (the last step; the first step warms up when there are several):

- ``step_s``: seconds of the optimizer step, rollouts included (``dapo/step_s``);
- ``rollout_share``: the rollouts' seconds over ``step_s`` (``dapo/rollout_share``); ``train_s`` the rest of the
  step; ``trained_rows_frac`` the share of rollouts in groups that differ (only those are forwarded and trained: a
  random tiny model never ends a response, its groups are uniform and nothing is trained; pass an SFT checkpoint and
  ``--temperature 0.5`` to time a step that trains);
- ``tokens_per_s``: model tokens sampled per rollout second (``completions/mean_length`` x rollouts /
  ``dapo/rollout_s``): env time (sandbox, reference manager, reward) counts against it;
- reference ``generate_tokens_per_s``: the same model's plain ``transformers`` ``generate`` (sampling, batch 1,
  ``max_new_tokens`` tokens, no stop) on one rollout prompt, measured in the same process after training, and
  ``ratio`` = ``tokens_per_s / generate_tokens_per_s``.

- ``train_tokens_per_s``: prompt and completion tokens of the trained rows (TRL's ``num_tokens`` for the step times
  ``trained_rows_frac``) per second of the step outside the rollouts.

GPU (a lent machine only; not run on this CPU machine): ``--shape qwen3-1.7b --device cuda`` builds a random-init
model of Qwen3-1.7B's shape (:data:`SHAPES`, Qwen3 tokenizer) and trains in bf16 with transformers generation: the
tokens/s of rollout and of training on a 1.7B-shaped model::

    python scripts/bench_rl.py --shape qwen3-1.7b --device cuda --prompts 8 --rollouts 8 --steps 2

The last line is one JSON object with these figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MICRO_BATCH = 8
SHAPES = {
    "qwen3-1.7b": {  # Qwen/Qwen3-1.7B config.json; tied embedding, 1.72 B parameters
        "hidden_size": 2048, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 6144,
    },
}  # fmt: skip
DEVICE_OVERRIDES = {"cpu": {"use_cpu": True, "bf16": False}, "cuda": {"use_cpu": False, "bf16": True}}


def shaped_model(shape: str, out: Path) -> str:
    """A random-init Qwen3 of ``shape`` (a :data:`SHAPES` name) with the Qwen3 tokenizer, built into ``out``."""
    from training.models import build_tiny_qwen3

    return str(build_tiny_qwen3(out, seed=0, **SHAPES[shape]))


def step_figures(history: list[dict], rollouts: int) -> dict:
    """The figures of the last logged step of a ``trainer_state.json`` ``log_history`` (see the module docstring)."""
    steps = [e for e in history if "dapo/step_s" in e]
    last = steps[-1]
    step_tokens = last["num_tokens"] - (steps[-2]["num_tokens"] if len(steps) > 1 else 0)
    trained = 1 - last["frac_reward_zero_std"]
    train_s = last["dapo/step_s"] - last["dapo/rollout_s"]
    return {
        "step_s": round(last["dapo/step_s"], 2),
        "rollout_s": round(last["dapo/rollout_s"], 2),
        "rollout_share": round(last["dapo/rollout_share"], 3),
        "train_s": round(train_s, 2),
        "trained_rows_frac": round(trained, 3),
        "tokens_per_s": round(last["completions/mean_length"] * rollouts / last["dapo/rollout_s"], 1),
        "train_tokens_per_s": round(step_tokens * trained / train_s, 1) if train_s > 0 else None,
        "mean_completion_tokens": last["completions/mean_length"],
    }


def generate_tokens_per_second(
    model_dir: str, prompt_ids: list[int], new_tokens: int, repeats: int = 3, device: str = "cpu"
) -> float:
    """Plain ``model.generate`` throughput (sampling, no early stop) on ``prompt_ids``, best of ``repeats``."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device).eval()
    ids = torch.tensor([prompt_ids], device=device)
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                ids, do_sample=True, max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0
            )
        best = max(best, (out.shape[1] - ids.shape[1]) / (time.perf_counter() - started))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", help="a synthesis output folder (default: a smoke synthesis into a temp dir)")
    parser.add_argument("--model", default="tiny", help="model folder or 'tiny' (default)")
    parser.add_argument("--prompts", type=int, default=8, help="start points per step")
    parser.add_argument("--rollouts", type=int, default=8, help="rollouts per start point (num_generations)")
    parser.add_argument("--steps", type=int, default=1, help="DAPO steps (figures from the last)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="random-init model of this shape (instead of --model)")
    parser.add_argument("--device", choices=sorted(DEVICE_OVERRIDES), default="cpu", help="cuda: bf16 on a GPU")
    args = parser.parse_args(argv)
    if (args.prompts * args.rollouts) % MICRO_BATCH:
        parser.error(f"--prompts x --rollouts must be a multiple of {MICRO_BATCH} (the micro-batch)")

    from scripts.bench_sft import smoke_dataset
    from scripts.rl import make_parser
    from training.rl.rollout import EpisodeTokens
    from training.rl.trainer import run_rl

    with tempfile.TemporaryDirectory(prefix="bench-rl-") as tmp:
        pool = args.pool or str(smoke_dataset(Path(tmp) / "synth"))
        out = Path(tmp) / "rl"
        model = shaped_model(args.shape, Path(tmp) / args.shape) if args.shape else args.model
        overrides = {
            **DEVICE_OVERRIDES[args.device],
            "model_name_or_path": model, "pool": pool, "output_dir": str(out), "max_steps": args.steps,
            "num_generations": args.rollouts, "per_device_train_batch_size": MICRO_BATCH,
            "gradient_accumulation_steps": args.prompts * args.rollouts // MICRO_BATCH, "max_rounds": 1,
            "save_strategy": "no", "disable_tqdm": True, "temperature": args.temperature,
        }  # fmt: skip
        argv_rl = ["--config", str(REPO / "configs" / "rl" / "tiny-cpu.yaml")]
        for key, value in overrides.items():
            argv_rl += [f"--{key}", str(value)]
        model_args, rl_args, config = make_parser().parse_args_and_config(argv_rl)
        run_rl(model_args, rl_args, config)
        history = json.loads((out / "trainer_state.json").read_text())["log_history"]
        from transformers import AutoTokenizer

        tokens = EpisodeTokens(AutoTokenizer.from_pretrained(out))
        prompt = tokens.prompt("# Activation: turn_end\n## Observation\n{}")
        reference = generate_tokens_per_second(str(out), prompt, rl_args.max_new_tokens, device=args.device)

    rollouts = args.prompts * args.rollouts
    step = step_figures(history, rollouts)
    figures = {
        "model": args.shape or args.model,
        "device": args.device,
        "prompts": args.prompts,
        "rollouts_per_prompt": args.rollouts,
        **step,
        "generate_tokens_per_s": round(reference, 3),
        "ratio": round(step["tokens_per_s"] / reference, 3),
    }
    print(f"{'figure':<24} value")
    for key, value in figures.items():
        print(f"{key:<24} {value}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
