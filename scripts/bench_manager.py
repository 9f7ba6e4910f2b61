"""Benchmark the flat and the hierarchical manager on the synthesis episodes: model calls, tokens, wall, decisions.

    python scripts/bench_manager.py                     # synthesizes configs/synthesis/smoke.yaml into a temp folder
    python scripts/bench_manager.py --pool runs/synth-smoke

Every episode of the pool (each clean task and each kept fault) is played twice with the scripted worker in the
synthesis sandbox (:func:`synthesis.runs.play`), the gold manager deciding both times:

- **flat**: :class:`synthesis.gold.GoldPolicy` answers every action, and every response is a model call of the ``llm``
  manager: prompt ``LLMPolicy.messages(inp)`` with ``tool_schemas()``, completion the response;
- **hier**: :class:`harness.manager.hier.HierPolicy` whose tier 1 is a gold policy (:class:`GoldTier1`: it answers the
  runtime's current input as the flat gold does); only tier 1's replies are model calls: prompt the conversation the
  policy sent, with ``tier1_tool_schemas()``.

Tokens: Qwen3's tokenizer and the project's chat template (:mod:`harness.tokenizer`), counted as
:func:`synthesis.samples.token_counter` counts a sample: prompt = the rendering of the prompt with its tools plus the
generation prompt, completion = the rest of the rendering with the response appended (the response and its end of
turn). ``attributed_calls``: the tier-1 responses of the flat gold run itself (:func:`synthesis.samples.hier_part`,
what the hier samples are built from): equal to the hier run's calls when the flat gold run is a hierarchical run
with the actors attributed. Wall: seconds to play the episode (kernel, worker, runtime and the policies' own code; no
model). Decisions: each run's state decisions, ``(turn, REPAIR | FINALIZE_RELATIONS | ABANDON_STATE)`` in order;
repair F1 against the turns of the harmful faults the synthesis found detectable (a repair anywhere else is a false
positive).

The LAST line printed is one JSON object: ``{"flat": {...}, "hier": {...}, "ratio": {...}, "episodes": N,
"decisions_equal": bool}`` (per-episode means; ``ratio`` is hier / flat).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.llm import ChatReply, Message
from harness.manager.actions import tool_schemas
from harness.manager.hier import HierPolicy
from harness.manager.hier_prompts import tier1_tool_schemas
from harness.manager.policy_types import PolicyInput
from synthesis.checks import Check
from synthesis.gold import GoldPolicy
from synthesis.runs import play
from synthesis.samples import MESSAGE_BUILDER, hier_part, split_activations, token_counter

FORMATS = ("flat", "hier")
DECISIONS = ("REPAIR", "FINALIZE_RELATIONS", "ABANDON_STATE")
FLAT_TOOLS = tool_schemas()
HIER_TOOLS = tier1_tool_schemas()
FIGURES = ("calls", "prompt_tokens", "completion_tokens", "tokens", "wall_s")


class GoldTier1:
    """A tier-1 backend played by the gold policy: answers the input the runtime is asking about (``inp``, set by
    :class:`GoldHier`) as the flat gold would, and keeps each call's conversation and reply."""

    def __init__(self, gold: GoldPolicy):
        self.gold = gold
        self.inp: PolicyInput | None = None
        self.calls: list[tuple[list[Message], str]] = []

    def chat(self, messages: list[Message], tools: Any = None) -> ChatReply:
        assert self.inp is not None
        response = self.gold.respond(self.inp)
        self.calls.append((messages, response))
        return ChatReply(response)


class GoldHier:
    """The ``hier`` policy with the gold policy as tier 1 (a harness policy: ``respond`` and ``last_actor``)."""

    active = True
    name = "hier-gold"

    def __init__(self, checks: dict[str, Sequence[Check]]):
        self.tier1 = GoldTier1(GoldPolicy(checks=checks))
        self.policy = HierPolicy(self.tier1)  # type: ignore[arg-type]  # a ChatBackend by duck typing

    @property
    def last_actor(self) -> str:
        return self.policy.last_actor

    def respond(self, inp: PolicyInput) -> str:
        self.tier1.inp = inp
        return self.policy.respond(inp)


@dataclass
class Figures:
    """One format's figures for one episode."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    decisions: list[tuple[str, str]] = field(default_factory=list)
    rejected: int = 0  # tier-1 replies the hier policy rejected (the gold's: expected none)
    attributed_calls: int = 0  # hier: the flat gold run's tier-1 responses (synthesis.samples.hier_part)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens


class CallCounter:
    """Prompt and completion tokens of one model call (see the module docstring)."""

    def __init__(self, tokenizer: Any, encoding: Any = None):
        self.count = token_counter(tokenizer, encoding)
        probe: list[dict[str, str]] = [{"role": "user", "content": "x"}]
        bare = tokenizer.apply_chat_template(probe, tokenize=False)
        generation = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)[len(bare) :]
        self.generation = len(tokenizer(generation, add_special_tokens=False)["input_ids"])

    def __call__(self, messages: list[Message], tools: list[dict[str, Any]], response: str) -> tuple[int, int]:
        prompt = self.count({"messages": messages, "tools": tools})
        total = self.count({"messages": [*messages, {"role": "assistant", "content": response}], "tools": tools})
        return prompt + self.generation, total - prompt - self.generation


def decisions(record: Any) -> list[tuple[str, str]]:
    """The state decisions of an episode record: ``(turn_id, action)`` of each activation ending in one of
    :data:`DECISIONS`, in order."""
    out = []
    for activation in record.activations:
        parsed = activation["actions"][-1]["parsed"] if activation["actions"] else None
        if parsed is not None and parsed["name"] in DECISIONS:
            out.append((str(activation["turn_id"]), parsed["name"]))
    return out


def bench_episode(
    task: Any, fault: Any, sandbox: Any, checks: dict[str, Sequence[Check]], count: CallCounter
) -> dict[str, Figures]:
    """Play one episode in both formats (see the module docstring); the figures by format."""
    gold = GoldPolicy(checks=checks)
    start = time.perf_counter()
    flat_run = play(task, sandbox, gold, fault, "gold")
    flat = Figures(wall_s=time.perf_counter() - start, decisions=decisions(flat_run.record))
    for entry in flat_run.log:
        flat.add_call(*count(MESSAGE_BUILDER.messages(entry.inp), FLAT_TOOLS, entry.response))
    policy = GoldHier(checks)
    start = time.perf_counter()
    hier_run = play(task, sandbox, policy, fault, "hier")  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    hier = Figures(wall_s=wall, decisions=decisions(hier_run.record), rejected=len(policy.policy.rejected))
    parts = [hier_part(activation) for activation in split_activations(flat_run.log, None, benign=False)]
    hier.attributed_calls = sum(len(part[1]) for part in parts if isinstance(part, tuple))
    for messages, response in policy.tier1.calls:
        hier.add_call(*count(messages, HIER_TOOLS, response))
    return {"flat": flat, "hier": hier}


def repair_f1(predicted: set[tuple[str, str]], truth: set[tuple[str, str]]) -> float | None:
    """F1 of the repaired ``(episode, turn)`` pairs against the faulted ones (None: neither has any)."""
    hits = len(predicted & truth)
    denominator = len(predicted) + len(truth)
    return None if denominator == 0 else 2 * hits / denominator


def summarize(episodes: dict[str, dict[str, Figures]], truth: set[tuple[str, str]]) -> dict[str, Any]:
    """Per-episode means by format, the hier / flat ratios, each format's repair F1 against ``truth`` (``(episode
    id, turn id)`` of the harmful detectable faults) and whether the two formats decided the same."""
    n = max(len(episodes), 1)
    out: dict[str, Any] = {}
    for name in FORMATS:
        rows = [figures[name] for figures in episodes.values()]
        means = {f"{figure}_per_episode": sum(getattr(row, figure) for row in rows) / n for figure in FIGURES}
        predicted = {(eid, turn) for eid, f in episodes.items() for turn, d in f[name].decisions if d == "REPAIR"}
        out[name] = {**means, "repairs": len(predicted), "repair_f1": repair_f1(predicted, truth)}
        out[name]["tier1_rejected"] = sum(row.rejected for row in rows)
    out["hier"]["attributed_calls_per_episode"] = sum(f["hier"].attributed_calls for f in episodes.values()) / n
    out["ratio"] = {
        f"{figure}_per_episode": out["hier"][f"{figure}_per_episode"] / out["flat"][f"{figure}_per_episode"]
        if out["flat"][f"{figure}_per_episode"]
        else None
        for figure in FIGURES
    }
    out["episodes"] = len(episodes)
    out["decisions_equal"] = all(f["flat"].decisions == f["hier"].decisions for f in episodes.values())
    return out


def table(summary: dict[str, Any]) -> str:
    """The flat vs hier table (per-episode means) with the hier / flat ratio."""
    lines = [f"{'per episode':<22}{'flat':>12}{'hier':>12}{'hier/flat':>11}"]
    for figure in FIGURES:
        key = f"{figure}_per_episode"
        flat, hier, ratio = summary["flat"][key], summary["hier"][key], summary["ratio"][key]
        shown = "n/a" if ratio is None else f"{ratio:.3f}"
        digits = ".3f" if figure == "wall_s" else ".1f"
        lines.append(f"{figure:<22}{flat:>12{digits}}{hier:>12{digits}}{shown:>11}")
    for name in FORMATS:
        f1 = summary[name]["repair_f1"]
        lines.append(f"{name}: {summary[name]['repairs']} repairs, repair F1 {'n/a' if f1 is None else f'{f1:.3f}'}")
    lines.append(f"decisions equal in every episode: {summary['decisions_equal']} ({summary['episodes']} episodes)")
    return "\n".join(lines)


def run_pool(
    root: str | Path, isolation: str | None, limit: int | None = None, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Bench every episode of the synthesis output ``root`` (at most ``limit``); the summary (:func:`summarize`)."""
    from envs.pool import ReplayPool
    from harness.tasks import load_task
    from harness.tokenizer import build_qwen3_tokenizer, qwen3_tiktoken_encoding
    from synthesis.checks import folder_checks
    from synthesis.driver import open_sandbox
    from synthesis.labels import synthesized_shards

    pool = ReplayPool(root)
    outcomes = {o["fault_id"]: o for s in synthesized_shards(root) for o in s.get("outcomes") or []}
    count = CallCounter(build_qwen3_tokenizer(), qwen3_tiktoken_encoding())
    episodes: dict[str, dict[str, Figures]] = {}
    truth: set[tuple[str, str]] = set()
    with open_sandbox(isolation) as sandbox:
        for episode_id in pool.ids[:limit]:
            entry = pool.entry(episode_id)
            task = load_task(entry.task_dir)
            fault = entry.injected_fault()
            if fault is not None and not fault.benign and outcomes.get(entry.id, {}).get("detectable"):
                truth.add((entry.id, fault.turn_id))
            episodes[entry.id] = figures = bench_episode(task, fault, sandbox, folder_checks(task), count)
            flat, hier = figures["flat"], figures["hier"]
            log(
                f"{entry.id}: calls {flat.calls} / {hier.calls}, tokens {flat.tokens} / {hier.tokens}, "
                f"wall {flat.wall_s:.2f} / {hier.wall_s:.2f} s (flat / hier)"
            )
    return summarize(episodes, truth)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default=None, help="a synthesis output folder (default: synthesize --config)")
    parser.add_argument("--config", default="configs/synthesis/smoke.yaml", help="synthesis config without --pool")
    parser.add_argument("--episodes", type=int, default=None, help="bench at most this many episodes")
    parser.add_argument("--isolation", choices=["bwrap", "none"], default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-manager-") as tmp:
        root = args.pool
        if root is None:
            from synthesis.config import SynthesisConfig
            from synthesis.driver import synthesize

            root = Path(tmp) / "synth"
            config = SynthesisConfig.from_yaml(args.config, workers=1, isolation=args.isolation, formats=["flat"])
            synthesize(config, root, progress=False)
        summary = run_pool(root, args.isolation, args.episodes)
    print(table(summary))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
