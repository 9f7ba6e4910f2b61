"""Benchmark a DAPO group's first responses on CPU: n responses to one context sampled one after another (one
``_CachedSession`` each, as the rollouts did) against one batched ``TransformersEngine.sample_many``.

    python scripts/bench_rl_sampling.py                                   # runs/models/smollm2-135m, else tiny Qwen3
    python scripts/bench_rl_sampling.py --model runs/models/smollm2-135m --context 2000 --n 8 --tokens 224

The context is ``--context`` seeded random ids whose first ``--prefix`` ids stand for the system turn: the engine's
prefix cache is built before the timing (once per optimizer step in training), so both ways prefill only the rest of
the context, the sequential way once per response. No id ends a response (the eos id is -1), so every response has
``--tokens`` ids either way. Figures:

- ``sequential_s``: seconds for ``--n`` sessions, each sampling ``--tokens`` ids after the context (the reference);
- ``batched_s``: seconds for one ``sample_many(context, n, tokens)``;
- ``ratio`` = ``sequential_s / batched_s`` (the speed-up), and each way's sampled tokens per second.

``--model`` is a causal LM folder (the default ``runs/models/smollm2-135m`` when it exists, else a random-init tiny
Qwen3 built in memory); ``--threads`` sets torch's CPU threads. The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DEFAULT_MODEL = REPO / "runs" / "models" / "smollm2-135m"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="causal LM folder (default: runs/models/smollm2-135m or tiny)")
    parser.add_argument("--context", type=int, default=2000, help="context ids (the group's first request)")
    parser.add_argument("--prefix", type=int, default=1500, help="of which the system turn (prefix cache)")
    parser.add_argument("--n", type=int, default=8, help="responses (num_generations)")
    parser.add_argument("--tokens", type=int, default=224, help="ids per response")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def load_model(path: str | None):
    """The causal LM at ``path`` (None: the default folder if present, else a random-init tiny Qwen3), and its name."""
    if path is None and DEFAULT_MODEL.is_dir():
        path = str(DEFAULT_MODEL)
    if path is None:
        from training.models import init_tiny_qwen3

        return init_tiny_qwen3(seed=0), "tiny-qwen3 (random init)"
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval(), path


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    if not 0 <= args.prefix < args.context:
        raise SystemExit(f"--prefix {args.prefix} must lie in [0, --context {args.context})")
    if args.n < 1 or args.tokens < 1:
        raise SystemExit(f"--n {args.n} and --tokens {args.tokens} must be at least 1")
    import torch

    from training.rl.engines import TransformersEngine

    torch.set_num_threads(args.threads)
    model, name = load_model(args.model)
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(args.seed)
    context = torch.randint(0, vocab, (args.context,), generator=generator).tolist()
    engine = TransformersEngine(model, eos_id=-1, prefix_ids=context[: args.prefix], temperature=args.temperature)
    engine.prefix_cache()  # built once per optimizer step in training: not timed
    torch.manual_seed(args.seed)

    start = time.perf_counter()
    sequential = [engine.session().sample(context, args.tokens) for _ in range(args.n)]
    sequential_s = time.perf_counter() - start
    start = time.perf_counter()
    batched = engine.sample_many(context, args.n, args.tokens)
    batched_s = time.perf_counter() - start

    tokens = args.n * args.tokens
    assert all(len(ids) == args.tokens for ids, _ in sequential + batched)
    figures = {
        "model": name, "threads": args.threads, "context": args.context, "prefix": args.prefix, "n": args.n,
        "tokens": args.tokens, "sequential_s": round(sequential_s, 3), "batched_s": round(batched_s, 3),
        "ratio": round(sequential_s / batched_s, 3), "sequential_tokens_per_s": round(tokens / sequential_s, 1),
        "batched_tokens_per_s": round(tokens / batched_s, 1),
    }  # fmt: skip
    print(f"model {name}, {args.threads} threads; context {args.context} ids ({args.prefix} cached prefix), "
          f"{args.n} responses x {args.tokens} ids")  # fmt: skip
    print(f"sequential sessions (reference): {sequential_s:.2f} s ({tokens / sequential_s:.1f} tokens/s)")
    print(f"one sample_many batch:           {batched_s:.2f} s ({tokens / batched_s:.1f} tokens/s)")
    print(f"ratio (sequential / batched):    {sequential_s / batched_s:.2f}x")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
