"""Teacher-forced exact match: the held-out atomic samples a model arm is scored on, and the scoring.

Each sample is the gold context of one activation; the arm gives the next response, which matches when its control
action name equals the gold one. Scores are appended per sample to ``OUT/arms/<arm>/exact_match.jsonl``, so a killed
study resumes where it stopped.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from harness.jsonl import append_jsonl, read_jsonl_resumable
from harness.manager.prompt_view import view
from training.study.layout import Study

EXACT_FILE = "exact_match.jsonl"


def exact_match_samples(study: Study, tokenizer: Any) -> list[dict[str, Any]]:
    """The held-out atomic samples scored for exact match: those that fit ``max_prompt_tokens`` (counted with
    ``tokenizer``), round-robin over labels (repair samples are rare) in a seeded order, at most
    ``exact_match_samples``."""
    from datasets import load_from_disk

    from harness.manager.wire import parse_response
    from training.sft import count_tokens

    split = load_from_disk(str(study.data_dir("heldout") / "dataset"))["train"]
    rows = [row for row in split if row["kind"] == "atomic" and row.get("format", "flat") == "flat"]
    random.Random(study.config.seed).shuffle(rows)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    chosen: list[dict[str, Any]] = []
    queues = [by_label[label] for label in sorted(by_label)]
    while queues and len(chosen) < study.config.exact_match_samples:
        queue = queues.pop(0)
        row = queue.pop(0)
        messages, tools = view(row["messages"], row["tools"], study.config.prompt_view)
        if count_tokens(tokenizer, {"messages": messages, "tools": tools}) <= study.config.max_prompt_tokens:
            gold = parse_response(row["messages"][-1]["content"])
            chosen.append({**row, "gold": gold.action.name if gold.ok else None})
        if queue:
            queues.append(queue)
    return chosen


def score_exact_match(study: Study, arm: str, samples: list[dict[str, Any]], policy: Any) -> list[dict[str, Any]]:
    """Each sample's gold context (all but the last message), the arm's next response, and whether its action name
    equals the gold control action's. Appended per sample to ``OUT/arms/<arm>/exact_match.jsonl`` (resumable)."""
    from tqdm import tqdm

    from harness.manager.llm_policy import reply_to_text
    from harness.manager.wire import parse_response

    path = study.arm_dir(arm) / EXACT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    done = read_jsonl_resumable(path)  # a torn last row of a killed run is dropped and played again
    seen = {row["content_hash"] for row in done}
    todo = [sample for sample in samples if sample["content_hash"] not in seen]
    wanted = {sample["content_hash"] for sample in samples}
    bar = tqdm(total=len(samples), initial=len(samples) - len(todo), desc=f"exact match {arm}", unit="sample")
    with bar:
        for sample in todo:
            tools = sample["tools"]
            tools = json.loads(tools) if isinstance(tools, str) else tools
            messages, tools = view(sample["messages"][:-1], tools, study.config.prompt_view)
            start = time.perf_counter()
            reply = policy.backend.chat(messages, tools=tools)
            parsed = parse_response(reply_to_text(reply))
            predicted = parsed.action.name if parsed.ok else None
            row = {
                "content_hash": sample["content_hash"],
                "task_id": sample["task_id"],
                "label": sample["label"],
                "gold": sample["gold"],
                "predicted": predicted,
                "parsed": parsed.ok,
                "match": predicted is not None and predicted == sample["gold"],
                "completion_tokens": reply.completion_tokens,
                "seconds": round(time.perf_counter() - start, 3),
            }
            append_jsonl(path, row)
            done.append(row)
            bar.update()
            bar.set_postfix(matched=sum(r["match"] for r in done if r["content_hash"] in wanted))
    return [row for row in done if row["content_hash"] in wanted]
