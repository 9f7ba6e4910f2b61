"""The decision pilots' data (docs/study/decision-pilots/): the study's training rows whose gold decision is REPAIR
or FINALIZE_RELATIONS (flat format), as is (pilot A) and with an evidence digest appended to the last tool result
(pilot B). The digest reads only the activation's own tool results.

    python scripts/pilot_decision_digest.py --source runs/study-smollm2/data/train-bare --out runs/pilot-decisions

writes ``OUT/data`` (pilot A) and ``OUT/data-digest`` (pilot B) and prints, per split, the rows by gold control and
whether their digest names a failure.
"""

from __future__ import annotations

import argparse
import collections
import json

from datasets import DatasetDict, load_from_disk


def digest(messages: list[dict]) -> str:
    """The evidence line of the pilots: the count of failed probes and non-verified checks and the first failure."""
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


def add_digest(row: dict) -> dict:
    context, last = row["messages"][:-1], row["messages"][-1]
    context = [dict(m) for m in context]
    context[-1]["content"] = context[-1]["content"] + digest(context)
    return {"messages": context + [last]}


def is_decision(row: dict) -> bool:
    return row["format"] == "flat" and row["control"] in ("REPAIR", "FINALIZE_RELATIONS")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="runs/study-smollm2/data/train-bare", help="the study's bare data")
    parser.add_argument("--out", default="runs/pilot-decisions", help="writes OUT/data and OUT/data-digest")
    args = parser.parse_args(argv)
    plain = DatasetDict({k: v.filter(is_decision) for k, v in load_from_disk(args.source).items()})
    plain.save_to_disk(f"{args.out}/data")
    out = DatasetDict({k: v.map(add_digest) for k, v in plain.items()})
    out.save_to_disk(f"{args.out}/data-digest")
    for k, v in out.items():
        counts = collections.Counter((r["control"], "failed:" in r["messages"][-2]["content"][-300:]) for r in v)
        print(k, counts)


if __name__ == "__main__":
    main()
