"""The pilots' data: the study's training rows whose gold decision is REPAIR or FINALIZE_RELATIONS (flat format),
as is (``runs/pilot-decisions/data``, pilot A) and with an evidence digest appended to the last tool result
(``runs/pilot-decisions/data-digest``, pilot B). The digest reads only the activation's own tool results."""

import collections
import json

from datasets import DatasetDict, load_from_disk

SOURCE = "runs/study-smollm2/data/train-bare"


def digest(messages):
    failed = []
    for m in messages:
        text = m["content"]
        if not text.startswith("<tool_response>"):
            continue
        body = text.removeprefix("<tool_response>").removesuffix("</tool_response>").strip()
        try:
            result = json.loads(body)
        except ValueError:
            continue
        if result.get("succeeded") is False:
            failed.append(f"run_probe failed: {result.get('error_message')}")
        elif result.get("verdict") not in (None, "verified"):
            failed.append(f"check_execution verdict {result.get('verdict')}")
    if failed:
        return f"\n[evidence this activation: {len(failed)} failed: {failed[0][:200]}]"
    return "\n[evidence this activation: every check and probe passed]"


def add(row):
    context, last = row["messages"][:-1], row["messages"][-1]
    context = [dict(m) for m in context]
    context[-1]["content"] = context[-1]["content"] + digest(context)
    return {"messages": context + [last]}


def decision(row):
    return row["format"] == "flat" and row["control"] in ("REPAIR", "FINALIZE_RELATIONS")


plain = DatasetDict({k: v.filter(decision) for k, v in load_from_disk(SOURCE).items()})
plain.save_to_disk("runs/pilot-decisions/data")
out = DatasetDict({k: v.map(add) for k, v in plain.items()})
out.save_to_disk("runs/pilot-decisions/data-digest")
for k, v in out.items():
    print(k, collections.Counter((r["control"], "failed:" in r["messages"][-2]["content"][-300:]) for r in v))
