"""Teacher-forced decision margins: how much a model prefers ``REPAIR`` to confirming at a check activation's decision.

For each flat sample of a synthesis split whose gold control action is ``REPAIR`` or ``FINALIZE_RELATIONS`` (the
decision that ends a check activation), the model reads the gold context (every message before the decision, in the
asked prompt view) and the start of the reply the two decisions share, ``<tool_call>\\n{"name": "``, tokenized as the
model writes it. The sample's margin is the log-odds of the two decisions' first differing tokens there
(``RE`` against ``FI`` for SmolLM2): the very token greedy decoding branches on, so a positive margin is a greedy
REPAIR whenever these two are the model's top candidates (the log-probabilities of the whole names are not what
greedy decoding compares, and their sum can favour either name). A model that reads the evidence (a failed
check or probe) has higher margins at repair samples than at confirm samples whatever its threshold, so :func:`auc`
(the probability that a random repair sample's margin exceeds a random confirm sample's; 0.5 is no separation) shows
a recipe that moves the preference before it flips the greedy decision. Run it on a training split's validation rows
to compare SFT recipes without held-out data:

    python -m training.study.margin_cli --model runs/study-smollm2/arms/sft-lora/merged \\
        --data runs/study-smollm2/data/train-bare --split validation --out margins.json

The study scores every flat model arm this way after training (:func:`arm_margins`, ``margin_split`` in its config),
so its report shows what each recipe does to the decision on the split it was chosen on.

A recipe can rank the rows well (AUC near 1) and still put its threshold on one side of them. :func:`calibrate`
chooses, on those same training rows, the constant added to every margin that best separates them (balanced
accuracy; the smallest shift among the best), and :func:`repair_bias` turns it into the
:class:`.BranchBias` that adds it to the REPAIR branching token's logit when the model serves: the
decision threshold, chosen on training data as a classifier's would be.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.manager.prompt_view import view
from training.study.branch_bias import BranchBias
from training.study.decisions import DECISION_CONTROLS as DECISIONS  # a repair (the positive) and the confirmation


def decision_text(name: str) -> str:
    """The start of a control action's wire text as :func:`harness.manager.wire.render_action` writes it: the
    quoted name and what follows it, so the name's tokens are the ones the model generates."""
    return '<tool_call>\n{"name": "' + name + '", "arguments": '


def branch_ids(tokenizer: Any) -> tuple[list[int], dict[str, int]]:
    """The ids the decisions' wire texts share (the reply up to the name) and each decision's first own id."""
    texts = {name: tokenizer(decision_text(name), add_special_tokens=False)["input_ids"] for name in DECISIONS}
    first, *others = texts.values()
    shared = 0
    while all(shared < len(ids) for ids in texts.values()) and all(ids[shared] == first[shared] for ids in others):
        shared += 1
    if any(shared >= len(ids) for ids in texts.values()):
        raise ValueError(f"the decisions {list(DECISIONS)} tokenize to one prefix of another: no branching token")
    return first[:shared], {name: ids[shared] for name, ids in texts.items()}


def decision_samples(dataset_dir: str | Path, split: str, prompt_view: str, limit: int | None = None) -> list[dict]:
    """The flat samples of ``split`` that end in one of :data:`DECISIONS`, as ``{messages, tools, gold, task_id,
    content_hash}`` with the gold context (the final message dropped) in ``prompt_view``; with ``limit``, at most that
    many, taken alternately from the repair and the confirm samples in dataset order."""
    from datasets import load_from_disk

    from training.sft import resolve_dataset_dir

    splits = load_from_disk(str(resolve_dataset_dir(dataset_dir)))
    if split not in splits:
        raise ValueError(f"{dataset_dir} has no split {split!r} (it has {list(splits)}); pick one of them")
    queues: dict[str, list[dict[str, Any]]] = {name: [] for name in DECISIONS}
    for row in splits[split]:
        if row.get("format", "flat") != "flat" or row.get("control") not in DECISIONS:
            continue
        tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
        messages, tools = view(row["messages"][:-1], tools, prompt_view)
        queues[row["control"]].append(
            {
                "messages": messages,
                "tools": tools,
                "gold": row["control"],
                "task_id": row["task_id"],
                "content_hash": row["content_hash"],
            }
        )
    chosen: list[dict[str, Any]] = []
    while any(queues.values()) and (limit is None or len(chosen) < limit):
        for name in DECISIONS:
            if queues[name] and (limit is None or len(chosen) < limit):
                chosen.append(queues[name].pop(0))
    return chosen


def margins(model: Any, tokenizer: Any, samples: Sequence[dict[str, Any]], progress: bool = True) -> list[dict]:
    """Each sample with the log-probability of each decision's branching token (``logprob_<decision>``, after the
    context and the shared reply start :func:`branch_ids`) and ``margin`` (repair minus confirm): one forward each."""
    import torch
    from tqdm import tqdm

    shared, branch = branch_ids(tokenizer)
    rows = []
    for sample in tqdm(samples, desc="decision margins", unit="sample", disable=not progress):
        prompt = tokenizer.apply_chat_template(
            sample["messages"], tools=sample["tools"] or None, add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt_ids + shared]), logits_to_keep=1).logits[0, -1]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        scores = {name: float(logprobs[token]) for name, token in branch.items()}
        rows.append(
            {
                "task_id": sample["task_id"],
                "content_hash": sample["content_hash"],
                "gold": sample["gold"],
                "prompt_tokens": len(prompt_ids),
                **{f"logprob_{name}": value for name, value in scores.items()},
                "margin": scores["REPAIR"] - scores["FINALIZE_RELATIONS"],
            }
        )
    return rows


def auc(rows: Sequence[dict[str, Any]]) -> float | None:
    """The probability that a repair row's margin exceeds a confirm row's (ties count half); None without both."""
    positive = [r["margin"] for r in rows if r["gold"] == "REPAIR"]
    negative = [r["margin"] for r in rows if r["gold"] != "REPAIR"]
    if not positive or not negative:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """AUC, and per gold decision: the count, the mean margin and how many rows prefer REPAIR (margin > 0: the
    decision greedy decoding starts on)."""
    out: dict[str, Any] = {"samples": len(rows), "auc": auc(rows)}
    for name in DECISIONS:
        values = [r["margin"] for r in rows if r["gold"] == name]
        out[f"n_{name}"] = len(values)
        out[f"mean_margin_{name}"] = sum(values) / len(values) if values else None
        out[f"prefers_repair_{name}"] = sum(value > 0 for value in values)
    return out


def balanced_accuracy(rows: Sequence[dict[str, Any]], bias: float = 0.0) -> float | None:
    """The mean of the REPAIR rows' and the confirm rows' accuracy when a row decides REPAIR iff ``margin + bias >
    0``; None without both kinds of row."""
    positive = [r["margin"] + bias > 0 for r in rows if r["gold"] == "REPAIR"]
    negative = [r["margin"] + bias <= 0 for r in rows if r["gold"] != "REPAIR"]
    if not positive or not negative:
        return None
    return (sum(positive) / len(positive) + sum(negative) / len(negative)) / 2


def calibrate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The decision bias chosen on ``rows`` (margins of one model): the constant ``bias`` whose rule ``margin + bias >
    0`` has the highest balanced accuracy. Between two neighbouring distinct margins the rule does not change, so
    the candidates are those gaps; among the best, a gap holding 0 keeps ``bias`` 0 (the model's own threshold),
    otherwise the gap nearest 0 is taken and the threshold set at its middle. ``bias`` is 0 too when no gap beats
    0.5 (the rows are not separated) or when one kind of row is missing. Returns ``{bias, balanced_accuracy,
    balanced_accuracy_unbiased, n_REPAIR, n_confirm}``."""
    values = sorted({float(r["margin"]) for r in rows})
    out = {
        "n_REPAIR": sum(r["gold"] == "REPAIR" for r in rows),
        "n_confirm": sum(r["gold"] != "REPAIR" for r in rows),
        "balanced_accuracy_unbiased": balanced_accuracy(rows),
    }
    if out["balanced_accuracy_unbiased"] is None:
        return {"bias": 0.0, "balanced_accuracy": None, **out}
    # the rule "margin > t" is constant for t in [values[i], values[i + 1]); the open ends decide all one way (0.5)
    gaps = [(low, high) for low, high in zip(values, values[1:], strict=False)]
    scored = [(balanced_accuracy(rows, -(low + high) / 2), low, high) for low, high in gaps]
    best = max([score for score, _, _ in scored], default=0.5)
    if best <= 0.5 or best <= out["balanced_accuracy_unbiased"]:
        return {"bias": 0.0, "balanced_accuracy": out["balanced_accuracy_unbiased"], **out}
    _, low, high = min((s for s in scored if s[0] == best), key=lambda s: min(abs(s[1]), abs(s[2])))
    bias = -(low + high) / 2
    return {"bias": round(bias, 4), "balanced_accuracy": balanced_accuracy(rows, round(bias, 4)), **out}


def repair_bias(tokenizer: Any, bias: float, pairwise: bool = True) -> BranchBias:
    """The :class:`.BranchBias` that moves REPAIR's branching token (:func:`branch_ids`) by ``bias`` right
    after the reply start the decisions share: every margin at serving time moves by ``bias``. ``pairwise`` (the
    default) moves it against the confirmation's token only (``versus``), so the bias chooses between the two
    decisions and never whether to decide: at that same point the model also chooses between deciding and another
    probe, which the training rows the bias is chosen on do not measure. Without it the bias is added to REPAIR's
    logit outright and raises REPAIR against every other action too."""
    shared, branch = branch_ids(tokenizer)
    return BranchBias(
        prefix=tokenizer.decode(shared, skip_special_tokens=False),
        bias={branch["REPAIR"]: bias},
        versus=branch["FINALIZE_RELATIONS"] if pairwise else None,
    )


def score_model(model_dir: str | Path, samples: Sequence[dict[str, Any]], progress: bool = True) -> list[dict]:
    """:func:`margins` of the saved model (and its tokenizer) in ``model_dir``, in float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    return margins(model, tokenizer, samples, progress=progress)


MARGINS_FILE = "margins.json"
"""A study arm's decision margins on the training split (in its arm folder)."""


def arm_margins(study: Any, arm: str) -> dict[str, Any]:
    """The decision margins of a study arm's model on the ``margin_split`` rows of the training data it was trained
    on (as the arms see it: the study's prompt view), at most ``margin_limit`` of them: ``{model, data, split,
    summary, rows}``, kept in the arm's :data:`MARGINS_FILE` (a resumed study reuses it)."""
    from training.study.data import sft_dataset

    config = study.config
    path = study.arm_dir(arm) / MARGINS_FILE
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    data = sft_dataset(study)  # already in the prompt view
    samples = decision_samples(data, config.margin_split, "full", config.margin_limit)
    rows = score_model(study.model_dir(arm), samples) if samples else []
    result = {
        "model": str(study.model_dir(arm)),
        "data": str(data),
        "split": config.margin_split,
        "summary": summary(rows),
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
