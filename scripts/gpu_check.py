"""The GPU check: one JSON record of what one H100/H200 does with this project's shapes, in at most 8 minutes, offline.

    bash scripts/gpu_check.sh > gpu_check.json          # on the GPU machine (no network needed)
    python scripts/gpu_check.py --cpu-smoke             # tiny shapes on CPU in seconds (what the test runs)

Parts (each one a key of ``parts`` in the record; a part that cannot run says ``{"skipped": reason}``, one that
fails ``{"error": ...}``, and the others still run):

- ``sft_qwen3_8b_slice`` and ``sft_qwen3_1_7b``: two bf16 SFT steps (gradient checkpointing, ``torch.optim.AdamW``,
  the loss through TRL's fused, chunked LM head) of a Qwen3-8B-shaped slice (a few layers at 8B widths, the full
  vocabulary) and of a Qwen3-1.7B-shaped full model, random init; the second step's time and tokens/s, the peak
  memory (``torch.cuda.max_memory_allocated``) next to :func:`training.estimate.single_card_step_gib`'s prediction;
- ``decode``: greedy decoding of the 1.7B shape after a 4,096-token context at batch 1, 16 and 64 (transformers,
  KV cache): tokens/s per batch and the ratio to batch 1 (what batching rollouts buys over one request at a time);
- ``waves``: the wave driver (``training.rl.waves``) with 16 envs on the 1.7B shape against the same rollouts played
  one after another: tokens/s ratio and generate calls; skipped with the reason when the module is not there or no
  replay pool is given (``--pool``, a synthesis output folder; ``bash scripts/gpu_check.sh`` synthesizes the smoke
  pool first).

Needs torch and transformers; TRL for the fused LM head (without it the SFT parts are skipped); vLLM is not used
(``deps`` reports whether it is installed). Without CUDA only ``--cpu-smoke`` runs (tiny shapes, no memory figures).
The record's ``budget_s`` is the time limit: a part that would start after it is skipped, saying so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
import time
from typing import Any

from training.estimate import QWEN3_1_7B, QWEN3_8B, GiB, model_shape, single_card_step_gib

TINY = {**QWEN3_1_7B, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}  # fmt: skip
"""The ``--cpu-smoke`` shape; its wave part uses the Qwen3 vocabulary (the real tokenizer's ids must fit)."""
DEPS = ("torch", "transformers", "trl", "vllm", "flash_attn", "deepspeed", "ray")


def deps() -> dict[str, str | None]:
    """Installed version of each of :data:`DEPS` (None: absent)."""
    found = {}
    for name in DEPS:
        try:
            found[name] = (
                importlib.metadata.version(name.replace("_", "-")) if importlib.util.find_spec(name) else None
            )
        except importlib.metadata.PackageNotFoundError:
            found[name] = "present"
    return found


class Clock:
    """Seconds since the start and whether ``budget_s`` is spent."""

    def __init__(self, budget_s: float):
        self.start, self.budget_s = time.perf_counter(), budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def spent(self) -> bool:
        return self.elapsed() > self.budget_s


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _model(config: dict[str, Any], device: Any, dtype: Any) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    with device:
        return Qwen3ForCausalLM(Qwen3Config(**config)).to(dtype)


def sft_step(config: dict[str, Any], tokens: int, device: Any, dtype: Any) -> dict[str, Any]:
    """Two bf16 SFT steps on ``tokens`` random ids; the second one timed, the peak against the estimate."""
    import torch

    if importlib.util.find_spec("trl") is None:
        return {"skipped": "TRL is not installed: the fused LM head (trl.trainer.utils.add_fused_lm_head) is TRL's"}
    from trl.trainer.utils import add_fused_lm_head

    model = _model(config, device, dtype)
    model.config.use_cache = False
    model.gradient_checkpointing_enable()
    model.train()
    add_fused_lm_head(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(config["vocab_size"], (1, tokens), device=device)
    seconds = 0.0
    for step in range(2):
        if device.type == "cuda" and step == 1:
            torch.cuda.reset_peak_memory_stats(device)
        _sync(device)
        start = time.perf_counter()
        loss = model(input_ids=ids, labels=ids, fused_lm_head=True).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        seconds = time.perf_counter() - start
    predicted = single_card_step_gib(model_shape(config), tokens)
    measured = torch.cuda.max_memory_allocated(device) / GiB if device.type == "cuda" else None
    result = {
        "layers": config["num_hidden_layers"], "hidden": config["hidden_size"], "tokens": tokens,
        "params": sum(p.numel() for p in model.parameters()), "loss": round(loss.item(), 4),
        "step_s": round(seconds, 6), "tokens_per_s": round(tokens / seconds, 1),
        "peak_gib": None if measured is None else round(measured, 2), "predicted_gib": round(predicted["peak_gib"], 2),
        "peak_over_predicted": None if measured is None else round(measured / predicted["peak_gib"], 3),
    }  # fmt: skip
    del model, optimizer
    return result


def decode(config: dict[str, Any], context: int, batches: list[int], new_tokens: int, device, dtype) -> dict:
    """Greedy decoding of ``new_tokens`` ids after ``context`` random ids, at each batch size (KV cache)."""
    import torch

    model = _model(config, device, dtype).eval()
    rows = {}
    with torch.no_grad():
        for batch in batches:
            ids = torch.randint(config["vocab_size"], (batch, context), device=device)
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            past, last = out.past_key_values, out.logits[:, -1:].argmax(-1)
            _sync(device)
            start = time.perf_counter()
            for _ in range(new_tokens):
                out = model(input_ids=last, past_key_values=past, use_cache=True)
                past, last = out.past_key_values, out.logits[:, -1:].argmax(-1)
            _sync(device)
            rows[batch] = batch * new_tokens / (time.perf_counter() - start)
            del out, past
    base = rows[batches[0]]
    return {
        "context": context, "new_tokens": new_tokens,
        "tokens_per_s": {str(b): round(v, 1) for b, v in rows.items()},
        "ratio_to_batch_1": {str(b): round(v / base, 2) for b, v in rows.items()},
    }  # fmt: skip


def waves(config: dict[str, Any], pool: str | None, envs: int, device: Any, dtype: Any) -> dict[str, Any]:
    """The wave driver against sequential play on the same ``envs`` start points (a random model, so every response
    costs its budget)."""
    if importlib.util.find_spec("training.rl.waves") is None:
        return {"skipped": "training.rl.waves (the wave driver) is not in this checkout"}
    if pool is None:
        return {"skipped": "no replay pool given (--pool: a synthesis output folder)"}
    import shutil

    from harness.tokenizer import build_qwen3_tokenizer
    from training.rl.engines import TransformersEngine
    from training.rl.rollout import RolloutLimits, start_points
    from training.rl.waves import play_in_waves
    from training.rl.workers import EnvSpec

    tokenizer = build_qwen3_tokenizer()
    limits = RolloutLimits(max_new_tokens=32, max_completion_length=64, max_responses=2)
    isolation = "bwrap" if shutil.which("bwrap") else "none"
    spec = EnvSpec(pool, tokenizer, limits, isolation=isolation)
    players = [spec.player() for _ in range(envs)]
    try:
        points = start_points(players[0].env.pool)
        starts = [points[i % len(points)] for i in range(envs)]
        engine = TransformersEngine(_model(config, device, dtype).eval(), players[0].tokens.eos_id)
        calls = _count_calls(engine)
        timed = {}
        for name in ("sequential", "waves"):
            calls["n"] = 0
            start = time.perf_counter()
            if name == "waves":
                rollouts = play_in_waves(players, starts, engine)
            else:
                rollouts = [p.play(s, engine.session) for p, s in zip(players, starts, strict=True)]
            seconds = time.perf_counter() - start
            tokens = sum(r.model_tokens for r in rollouts)
            timed[name] = {"rollouts": len(rollouts), "model_tokens": tokens, "seconds": round(seconds, 3),
                           "tokens_per_s": round(tokens / seconds, 1), "engine_calls": calls["n"]}  # fmt: skip
    finally:
        for player in players:
            player.env.close()
    return {
        "envs": envs,
        **timed,
        "ratio": round(timed["waves"]["tokens_per_s"] / timed["sequential"]["tokens_per_s"], 2),
    }


def _count_calls(engine: Any) -> dict[str, int]:
    """Count the engine's sampling calls (``generate_many`` and session ``sample``) in place."""
    calls = {"n": 0}
    for name in ("generate_many", "sample_many"):
        method = getattr(engine, name, None)
        if method is not None:

            def counted(*args, _method=method, **kwargs):
                calls["n"] += 1
                return _method(*args, **kwargs)

            setattr(engine, name, counted)
    session = engine.session

    def counted_session():
        inner = session()
        sample = inner.sample

        def counted_sample(*args, **kwargs):
            calls["n"] += 1
            return sample(*args, **kwargs)

        inner.sample = counted_sample
        return inner

    engine.session = counted_session
    return calls


class Stopped(Exception):
    """SIGTERM (``timeout`` in scripts/gpu_check.sh) arrived during a part: it is recorded, the record still prints."""


def _stop(signum: int, frame: Any) -> None:
    raise Stopped(f"signal {signum}: the time limit of scripts/gpu_check.sh")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every part in order, each guarded (a failure is recorded, the next part runs) and within ``budget_s``; after a
    SIGTERM the running part is recorded as stopped and the others as skipped."""
    import signal

    import torch

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return _run(args, torch)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    stopped = ""

    clock = Clock(args.budget_s)
    gpu = torch.cuda.is_available() and not args.cpu_smoke
    record: dict[str, Any] = {"check": "gpu_check", "mode": "cpu-smoke" if args.cpu_smoke else "gpu",
                              "budget_s": args.budget_s, "deps": deps(), "parts": {}}  # fmt: skip
    if not gpu and not args.cpu_smoke:
        record["device"] = "cpu"
        record["parts"] = {name: {"skipped": "no CUDA device; run with --cpu-smoke for the shape check"}
                           for name in ("sft_qwen3_8b_slice", "sft_qwen3_1_7b", "decode", "waves")}  # fmt: skip
        return record
    device = torch.device("cuda" if gpu else "cpu")
    record["device"] = torch.cuda.get_device_name(device) if gpu else "cpu"
    dtype = torch.bfloat16 if gpu else torch.float32
    if gpu:
        big, slice_8b, policy = QWEN3_1_7B, {**QWEN3_8B, "num_hidden_layers": args.slice_layers}, QWEN3_1_7B
    else:
        big, slice_8b, policy = (
            TINY,
            {**TINY, "num_hidden_layers": 1},
            {**TINY, "vocab_size": QWEN3_1_7B["vocab_size"]},
        )
    tokens, context = (args.tokens, 4096) if gpu else (64, 32)
    batches, new_tokens = ([1, 16, 64], 64) if gpu else ([1, 4], 4)
    parts = {
        "sft_qwen3_8b_slice": lambda: sft_step(slice_8b, tokens, device, dtype),
        "sft_qwen3_1_7b": lambda: sft_step(big, tokens, device, dtype),
        "decode": lambda: decode(big, context, batches, new_tokens, device, dtype),
        "waves": lambda: waves(policy, args.pool, args.envs if gpu else 2, device, dtype),
    }
    for name, part in parts.items():
        if stopped or clock.spent():
            why = stopped or f"the {args.budget_s:g} s budget was spent before this part"
            record["parts"][name] = {"skipped": why}
            continue
        start = clock.elapsed()
        try:
            record["parts"][name] = part()
        except Exception as error:  # the record says what failed; the other parts still run
            message = str(error).splitlines()[0][:300] if str(error) else ""
            record["parts"][name] = {"error": f"{type(error).__name__}: {message}"}
            stopped = message if isinstance(error, Stopped) else ""
        record["parts"][name]["part_s"] = round(clock.elapsed() - start, 2)
        if gpu:
            torch.cuda.empty_cache()
    record["wall_s"] = round(clock.elapsed(), 2)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on CPU (seconds): the record's shape")
    parser.add_argument("--budget-s", type=float, default=420.0, help="no part starts after this many seconds")
    parser.add_argument("--tokens", type=int, default=16384, help="tokens of each SFT step (GPU)")
    parser.add_argument("--slice-layers", type=int, default=4, help="layers of the Qwen3-8B-shaped slice")
    parser.add_argument("--envs", type=int, default=16, help="envs of the wave part (GPU)")
    parser.add_argument("--pool", help="a synthesis output folder, the wave part's replay pool")
    record = run(parser.parse_args(argv))
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
