"""Benchmark grammar-constrained decoding on CPU: the same greedy replies with and without the action grammar.

    python scripts/bench_grammar.py                          # runs/models/smollm2-135m (or SmolLM2 from the cache)
    python scripts/bench_grammar.py --model DIR --replies 6 --tokens 96

Both backends (``harness.llm.HFChatBackend``, prefix cache off so every reply prefills its prompt the same way) answer
the same ``--replies`` prompts, a manager-style request each, with at most ``--tokens`` new tokens. Figures:

- ``free_s`` / ``constrained_s``: seconds for all replies (the free backend is the reference);
- ``free_ms_per_token`` / ``constrained_ms_per_token``: those seconds over the tokens each generated;
- ``ratio`` = ``constrained_ms_per_token / free_ms_per_token`` (the grammar's cost per token; 1.0 is free);
- ``mask_ms_per_token``: llguidance's mask alone, timed over the constrained replies' own tokens;
- ``parsed_free`` / ``parsed_constrained``: replies that parse as one action.

The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DEFAULT_MODEL = REPO / "runs" / "models" / "smollm2-135m"

ISSUES = [
    "How many orders are there, and what is the total revenue?",
    "Clean the data: how many shipments remain and which service levels are there?",
    "Which 3 zones have the highest cost sum, in descending order?",
    "What is the mean delivery time per depot, rounded to 2 decimals?",
    "How many patients were readmitted within 30 days?",
    "Which month had the largest energy consumption?",
]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="causal LM folder (default: runs/models/smollm2-135m)")
    parser.add_argument("--replies", type=int, default=6, help="prompts answered by each backend")
    parser.add_argument("--tokens", type=int, default=96, help="new tokens at most per reply")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    return parser


def prompts(n: int) -> list[list[dict[str, str]]]:
    system = "You are the state manager. Answer with exactly one <tool_call> holding one action."
    return [
        [{"role": "system", "content": system}, {"role": "user", "content": f"Turn start. Open a state: {issue}"}]
        for issue in (ISSUES * (n // len(ISSUES) + 1))[:n]
    ]


def model_dir(given: str | None) -> str:
    if given is not None:
        return given
    if DEFAULT_MODEL.is_dir():
        return str(DEFAULT_MODEL)
    from training.smollm2 import build_smollm2, cached_smollm2_dir

    return str(build_smollm2(cached_smollm2_dir()))


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    import torch

    from harness.llm import HFChatBackend
    from harness.manager.wire import call_grammar, parse_response

    if args.threads:
        torch.set_num_threads(args.threads)
    path = model_dir(args.model)
    figures: dict[str, float | int] = {}
    replies: dict[str, list] = {}
    for mode, grammar in (("free", None), ("constrained", call_grammar)):
        backend = HFChatBackend(path, max_new_tokens=args.tokens, prefix_cache=False, grammar=grammar)
        backend.chat(prompts(1)[0])  # warm-up (allocations, the grammar's first masks)
        began = time.perf_counter()
        replies[mode] = [backend.chat(messages) for messages in prompts(args.replies)]
        seconds = time.perf_counter() - began
        tokens = sum(r.completion_tokens for r in replies[mode])
        figures[f"{mode}_s"] = round(seconds, 3)
        figures[f"{mode}_ms_per_token"] = round(1000 * seconds / max(tokens, 1), 2)
        figures[f"parsed_{mode}"] = sum(parse_response(r.text).ok for r in replies[mode])
        if grammar is not None:
            ids = [backend.tokenizer(r.text, add_special_tokens=False)["input_ids"] for r in replies[mode]]
            logits = torch.zeros(backend.grammar.n_vocab)
            began, count = time.perf_counter(), 0
            for reply in ids:
                matcher = backend.grammar.matcher()
                for token in reply:
                    backend.grammar.mask(matcher, logits)
                    backend.grammar.advance(matcher, [token])
                    count += 1
            figures["mask_ms_per_token"] = round(1000 * (time.perf_counter() - began) / max(count, 1), 3)
    figures["ratio"] = round(figures["constrained_ms_per_token"] / figures["free_ms_per_token"], 3)
    print(
        f"free {figures['free_ms_per_token']} ms/token, constrained {figures['constrained_ms_per_token']} ms/token "
        f"(ratio {figures['ratio']}; the mask alone {figures['mask_ms_per_token']} ms/token); replies that parse: "
        f"{figures['parsed_free']} free, {figures['parsed_constrained']} constrained, of {args.replies}"
    )
    print(json.dumps({"model": path, **figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
