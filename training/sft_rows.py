"""The row transforms of the SFT data (:mod:`training.sft`): which rows are trained (:func:`select_formats`), in which
view (:func:`apply_prompt_view`), a stratified subset (:func:`stratified_subset`), one sample per assistant turn
(:func:`to_turn_prefixes`) and TRL's prompt-completion pairs (:func:`to_last_turn`)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from harness.manager.prompt_view import view

if TYPE_CHECKING:
    from datasets import Dataset


def stratified_subset(dataset: Dataset, column: str, n: int, seed: int = 0) -> Dataset:
    """``n`` rows of ``dataset`` drawn round-robin over the values of ``column`` (in sorted order), each value's rows
    in a seeded random order: every value gets an equal share, and a value with too few rows leaves the rest of
    its share to the others. The rows keep their dataset order."""
    if column not in dataset.column_names:
        raise ValueError(
            f"stratify_by={column!r} is not a column of the dataset (columns: {', '.join(dataset.column_names)}); "
            "pick one of them"
        )
    rng = random.Random(seed)
    groups: dict[Any, list[int]] = defaultdict(list)
    for index, value in enumerate(dataset[column]):
        groups[value].append(index)
    queues = []
    for value in sorted(groups, key=str):
        rows = groups[value]
        rng.shuffle(rows)
        queues.append(rows)
    picked: list[int] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        picked.extend(q[depth] for q in queues if depth < len(q))
        if len(picked) >= n:
            break
    return dataset.select(sorted(picked[:n]))


def select_formats(dataset: Dataset, formats: list[str]) -> Dataset:
    """The rows of ``dataset`` whose ``format`` is one of ``formats`` (a dataset without the column: all flat)."""
    if "format" not in dataset.column_names:
        return dataset if "flat" in formats else dataset.select([])
    wanted = set(formats)
    keep = [i for i, value in enumerate(dataset["format"]) if value in wanted]
    return dataset if len(keep) == len(dataset) else dataset.select(keep)


UNPARSED_ACTION = "unparsed"
"""The ``action`` of an assistant turn that is not one well-formed action (:func:`to_turn_prefixes`)."""


def to_turn_prefixes(dataset: Dataset) -> Dataset:
    """One row per assistant turn of each row of ``dataset``: its ``messages`` up to and including that turn, every
    other column copied, and an ``action`` column with the turn's action name (:data:`UNPARSED_ACTION` when the
    turn is not one well-formed action; ``stratify_by: action`` balances the actions). A row's last prefix is the
    row itself.
    ``n_tokens``, when present, keeps the whole row's count: an upper bound on each prefix's, so
    :func:`drop_overlong` never keeps a prefix too long, and drops a prefix only with its whole conversation.
    Samples none of which has an assistant turn are a data error; an empty split stays empty."""
    from datasets import Dataset

    from harness.manager.wire import parse_response

    rows: list[dict[str, Any]] = []
    for row in dataset:
        for index, message in enumerate(row["messages"]):
            if message["role"] != "assistant":
                continue
            parsed = parse_response(message["content"])
            action = parsed.action.name if parsed.action is not None else UNPARSED_ACTION
            rows.append({**row, "messages": row["messages"][: index + 1], "action": action})
    if not rows and len(dataset):
        raise ValueError(
            f"turn_prefixes found no assistant turn in any of {len(dataset)} samples; re-run synthesis, or turn "
            "turn_prefixes off"
        )
    if not rows:  # an empty split stays empty, with the column a stratified subset reads
        return dataset if "action" in dataset.column_names else dataset.add_column("action", [])
    return Dataset.from_list(rows)


def to_last_turn(dataset: Dataset) -> Dataset:
    """``dataset``'s rows as TRL conversational prompt-completion pairs: ``prompt`` is every message before the last,
    ``completion`` the last (an assistant turn), ``tools`` unchanged. A row that does not end in an assistant turn is
    a data error (its name and index in the message)."""
    ends = [row[-1]["role"] if row else None for row in dataset["messages"]]
    bad = [i for i, role in enumerate(ends) if role != "assistant"]
    if bad:
        raise ValueError(
            f"last_turn_only needs samples that end in an assistant turn; row {bad[0]} ends in {ends[bad[0]]!r} "
            f"({len(bad)} such rows); re-run synthesis or turn last_turn_only off"
        )

    if len(dataset) == 0:  # map adds no column to an empty dataset
        from datasets import Dataset

        return Dataset.from_dict({"prompt": [], "completion": [], "tools": []})

    def split(row: dict[str, Any]) -> dict[str, Any]:
        return {"prompt": row["messages"][:-1], "completion": row["messages"][-1:]}

    return dataset.map(split, remove_columns=["messages"]).select_columns(["prompt", "completion", "tools"])


def apply_prompt_view(dataset: Dataset, prompt_view: str) -> Dataset:
    """``dataset`` as a model sees it under ``prompt_view`` (:func:`harness.manager.prompt_view.view`): ``full`` leaves
    it as it is; ``bare`` drops every system message and the tools, and zeroes ``n_tokens`` (the rows are recounted
    by :func:`training.sft.drop_overlong`)."""
    if prompt_view == "full":
        return dataset
    recount = {"n_tokens": 0} if "n_tokens" in dataset.column_names else {}

    def viewed(row: dict[str, Any]) -> dict[str, Any]:
        messages, tools = view(row["messages"], row["tools"], prompt_view)
        return {"messages": messages, "tools": tools or [], **recount}

    return dataset.map(viewed)
