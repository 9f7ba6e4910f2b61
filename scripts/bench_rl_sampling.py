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

``--mode rollouts`` benchmarks multi-turn rollouts with different contexts instead: ``--rollouts`` rollouts, each
its own context (``--prefix`` shared system-turn ids, then ``--context - --prefix`` ids of its own), ask for
``--responses`` responses of ``--tokens`` ids each, a ``--tool`` -id "tool response" of their own inserted after each
(scripted players, no env: the figure is the sampling's). Both ways in the same run:

- ``sequential_s``: the rollouts one after another, each response from the rollout's own KV-cached session
  (:func:`training.rl.rollout.drive`, the reference);
- ``wave_s``: the rollouts side by side on one lane each (:class:`training.rl.waves.WaveDriver`), each wave's
  requests sampled with one ``TransformersEngine.generate_many`` padded batch;
- ``ratio`` = ``sequential_s / wave_s``, each way's tokens per second, and the engine calls per sampling round
  (``sequential_calls``: rollouts x responses; ``wave_calls``: one per wave, the responses per rollout).

    python scripts/bench_rl_sampling.py --mode rollouts --rollouts 16 --responses 4 --context 1000 --prefix 600

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
    parser.add_argument(
        "--mode",
        choices=("first", "rollouts"),
        default="first",
        help="first: a group's first responses; rollouts: multi-turn rollouts, waves vs sequential",
    )
    parser.add_argument("--rollouts", type=int, default=16, help="rollouts mode: rollouts (each its own context)")
    parser.add_argument("--responses", type=int, default=4, help="rollouts mode: responses per rollout")
    parser.add_argument("--tool", type=int, default=64, help="rollouts mode: ids inserted after each response")
    parser.add_argument("--model", default=None, help="causal LM folder (default: runs/models/smollm2-135m or tiny)")
    parser.add_argument("--context", type=int, default=2000, help="context ids (the group's first request)")
    parser.add_argument("--prefix", type=int, default=1500, help="of which the system turn (prefix cache)")
    parser.add_argument("--n", type=int, default=8, help="responses (num_generations)")
    parser.add_argument("--tokens", type=int, default=None, help="ids per response (default: 224 first, 32 rollouts)")
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
    if args.tokens is None:
        args.tokens = 224 if args.mode == "first" else 32
    if args.rollouts < 1 or args.responses < 1 or args.tool < 0:
        raise SystemExit(f"--rollouts {args.rollouts} and --responses {args.responses} must be >= 1, --tool >= 0")
    if args.n < 1 or args.tokens < 1:
        raise SystemExit(f"--n {args.n} and --tokens {args.tokens} must be at least 1")
    import torch

    from training.rl.engines import TransformersEngine

    torch.set_num_threads(args.threads)
    model, name = load_model(args.model)
    if args.mode == "rollouts":
        return rollouts_benchmark(args, model, name)
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
        "tokens": args.tokens, "sequential_s": round(sequential_s, 6), "batched_s": round(batched_s, 6),
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


class ScriptedPlayer:
    """A rollout of ``responses`` requests after its own ``context``, ``tool`` ids of its own after each response."""

    def __init__(self, context: list[int], responses: int, tokens: int, tool: list[list[int]]):
        self.context, self.responses, self.tokens, self.tool = context, responses, tokens, tool

    def steps(self, start):
        from training.rl.rollout import Rollout, SampleRequest

        rollout = Rollout(start.episode_id, prompt_ids=list(self.context))
        for turn in range(self.responses):
            ids, logprobs = yield SampleRequest(rollout.prompt_ids + rollout.completion_ids, self.tokens)
            rollout.extend(ids, model=True, logprobs=logprobs)
            if turn < self.responses - 1:
                rollout.extend(self.tool[turn], model=False)
        return rollout


def rollouts_benchmark(args: argparse.Namespace, model, name: str) -> dict:
    """``--mode rollouts``: multi-turn rollouts one after another (``drive``) and in waves, in the same run."""
    import torch

    from training.rl.engines import TransformersEngine
    from training.rl.rollout import SampleRequest, StartPoint, drive
    from training.rl.waves import PlayerLanes, WaveDriver

    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(args.seed)

    def ids(n: int) -> list[int]:
        return torch.randint(0, vocab, (n,), generator=generator).tolist()

    prefix = ids(args.prefix)
    players = [
        ScriptedPlayer(prefix + ids(args.context - args.prefix), args.responses, args.tokens,
                       [ids(args.tool) for _ in range(args.responses - 1)])
        for _ in range(args.rollouts)
    ]  # fmt: skip
    starts = [StartPoint(str(i), 0) for i in range(args.rollouts)]
    engine = TransformersEngine(model, eos_id=-1, prefix_ids=prefix, temperature=args.temperature)
    engine.prefix_cache()  # built once per optimizer step in training: not timed
    engine.session().sample(players[0].context, 2)  # warm-up of both ways, not timed
    engine.generate_many([SampleRequest(p.context, 2) for p in players[:2]])
    torch.manual_seed(args.seed)

    calls = 0

    def session():
        inner = engine.session()

        def sample(context, budget):
            nonlocal calls
            calls += 1
            return inner.sample(context, budget)

        return type("Counted", (), {"sample": staticmethod(sample)})()

    start = time.perf_counter()
    sequential = [drive(player.steps(s), session) for player, s in zip(players, starts, strict=True)]
    sequential_s = time.perf_counter() - start
    driver = WaveDriver(PlayerLanes(players), engine)
    start = time.perf_counter()
    waves = driver.play(starts)
    wave_s = time.perf_counter() - start

    tokens = args.rollouts * args.responses * args.tokens
    assert all(r.model_tokens == args.responses * args.tokens for r in sequential + waves)
    figures = {
        "mode": "rollouts", "model": name, "threads": args.threads, "rollouts": args.rollouts,
        "responses": args.responses, "context": args.context, "prefix": args.prefix, "tool": args.tool,
        "tokens": args.tokens, "sequential_s": round(sequential_s, 6), "wave_s": round(wave_s, 6),
        "ratio": round(sequential_s / wave_s, 3), "sequential_tokens_per_s": round(tokens / sequential_s, 1),
        "wave_tokens_per_s": round(tokens / wave_s, 1), "sequential_calls": calls, "wave_calls": driver.calls,
    }  # fmt: skip
    print(f"model {name}, {args.threads} threads; {args.rollouts} rollouts x {args.responses} responses x "
          f"{args.tokens} ids, contexts of {args.context} ids ({args.prefix} cached prefix), {args.tool} tool ids "
          "after each response")  # fmt: skip
    print(f"sequential (drive, reference): {sequential_s:.2f} s ({tokens / sequential_s:.1f} tokens/s, {calls} calls)")
    print(f"waves (generate_many):         {wave_s:.2f} s ({tokens / wave_s:.1f} tokens/s, {driver.calls} calls)")
    print(f"ratio (sequential / waves):    {sequential_s / wave_s:.2f}x")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
