"""What the viewer reads: episode records and training samples; and the token mask it computes from a sample.

- :func:`select_records`: the chosen lines of a ``RECORD.jsonl`` (every line is checked as an
  :class:`~harness.manager.episode.EpisodeRecord`; errors name the file and line);
- :func:`select_samples` and :func:`sample_spans`: training samples (a ``dataset/`` folder saved by ``stateguard
  synthesize``, or a JSON-lines file) and their token mask. Two sample formats:

  - SFT (TRL conversational: ``messages`` and ``tools``): rendered by the tokenizer's chat template with
    ``return_assistant_tokens_mask=True`` (the template's ``{% generation %}`` markers), exactly the mask SFT trains
    with: assistant tokens are the model's, the rest (system, tools, observations, tool results) the environment's;
  - RL rollouts (``prompt_ids``, ``completion_ids``, ``env_mask``: the fields of :class:`training.rl.rollout.Rollout`):
    the prompt is the environment's, each completion id is the model's where ``env_mask`` is 1.

The tokenizer is the caller's (``harness.tokenizer``, loaded only for samples), so ``stateguard view`` of a record
needs neither transformers nor torch. The reward terms shown with a record are computed by the caller
(:mod:`synthesis.view`) and handed to the page as a :class:`~harness.viewer.render.RewardView`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from harness.jsonl import iter_jsonl
from harness.manager.episode import EpisodeRecord, EpisodeRecordError
from harness.viewer.render import TokenSpan


class ViewerError(ValueError):
    """Input the viewer cannot show; the message names the file (and line) and the fix."""


def _check_file(path: Path, what: str) -> None:
    if not path.exists():
        raise ViewerError(f"{path}: no such file; pass the path of {what}.")


def select_records(
    path: str | Path, *, index: int | None = None, episode_id: str | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """``[(line index, record dict)]``: every record, or the one at ``index`` (0-based over the records; a negative
    index counts from the end, -1 is the latest), or the one whose ``episode_id`` matches. Each line read is
    validated as an :class:`EpisodeRecord`."""
    path = Path(path)
    _check_file(path, "an episode-records file (JSON lines, e.g. OUT/episodes/gold.jsonl)")
    chosen: list[tuple[int, dict[str, Any]]] = []
    ids: list[str] = []
    try:
        for i, (where, data) in enumerate(iter_jsonl(path, error=EpisodeRecordError)):
            record = EpisodeRecord.from_dict(data, where)
            top = {f.name: getattr(record, f.name) for f in fields(record)}
            ids.append(record.episode_id)
            if episode_id is not None and record.episode_id == episode_id:
                return [(i, top)]
            if index is not None and i == index:
                return [(i, top)]
            if episode_id is None and (index is None or index < 0):
                chosen.append((i, top))
    except EpisodeRecordError as exc:
        raise ViewerError(f"{exc} (Pass a file of episode records; for training samples add --sample.)") from None
    if episode_id is not None:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise ViewerError(f"{path}: no episode with id {episode_id!r} among its {len(ids)} records ({shown}).")
    if not chosen or (index is not None and not -len(chosen) <= index < 0):
        raise ViewerError(_out_of_range(path, index, len(ids), "records"))
    return chosen if index is None else [chosen[index]]


def _out_of_range(path: Path, index: int | None, n: int, what: str) -> str:
    if n == 0:
        return f"{path}: holds no {what}."
    return (
        f"{path}: --index {index} is out of range; it holds {n} {what}, so pass --index 0..{n - 1} "
        f"(or -{n}..-1 from the end)."
    )


def select_samples(
    path: str | Path, *, index: int | None = None, split: str = "train"
) -> list[tuple[int, str, dict[str, Any]]]:
    """``[(row index, where, row)]`` of a samples source: a ``datasets`` folder (``split`` of a ``DatasetDict``) or a
    JSON-lines file; every row, or the one at ``index`` (negative: from the end)."""
    path = Path(path)
    _check_file(path, "a dataset folder (OUT/dataset) or a samples JSON-lines file")
    if path.is_dir():
        rows = [(f"{path}[{split}] row {i}", row) for i, row in enumerate(_dataset_rows(path, split))]
    else:
        try:
            rows = list(iter_jsonl(path, error=ViewerError))
        except UnicodeDecodeError:
            message = f"{path}: not a text file; pass a samples JSON-lines file or a dataset folder."
            raise ViewerError(message) from None
    if index is not None:
        if not -len(rows) <= index < len(rows):
            raise ViewerError(_out_of_range(path, index, len(rows), "samples"))
        return [(index % len(rows), *rows[index])]
    if not rows:
        raise ViewerError(_out_of_range(path, index, 0, "samples"))
    return [(i, where, row) for i, (where, row) in enumerate(rows)]


def _dataset_rows(path: Path, split: str) -> Any:
    """The rows of a ``save_to_disk`` folder: a ``Dataset``, or one split of a ``DatasetDict`` (loaded alone: a
    ``DatasetDict`` with an empty split, as a one-task synthesis run writes, cannot be loaded whole)."""
    from harness.import_utils import require

    require("datasets")
    from datasets import Dataset

    splits_file = path / "dataset_dict.json"
    if splits_file.is_file():
        splits = json.loads(splits_file.read_text())["splits"]
        if split not in splits:
            raise ViewerError(f"{path}: no split {split!r}; pass --split with one of {sorted(splits)}.")
        path = path / split
    try:
        return Dataset.load_from_disk(str(path))
    except FileNotFoundError as exc:
        message = f"{path}: not a saved dataset ({exc}); pass OUT/dataset of `stateguard synthesize`."
        raise ViewerError(message) from None


def _runs(ids: Sequence[int], mask: Sequence[int], tokenizer: Any) -> list[TokenSpan]:
    """Consecutive ids with the same mask value, decoded together (a lone id can be half of a UTF-8 character)."""
    spans = []
    for model, group in itertools.groupby(zip(ids, mask, strict=True), key=lambda pair: bool(pair[1])):
        run = [token for token, _ in group]
        spans.append(TokenSpan(text=tokenizer.decode(run, skip_special_tokens=False), model=model, n_tokens=len(run)))
    return spans


def sample_spans(row: dict[str, Any], where: str, tokenizer: Any) -> tuple[list[TokenSpan], str]:
    """The token mask of one sample as runs of model / environment tokens, and the sample's format name."""
    if {"prompt_ids", "completion_ids", "env_mask"} <= set(row):
        prompt, completion, env_mask = row["prompt_ids"], row["completion_ids"], row["env_mask"]
        if len(completion) != len(env_mask):
            raise ViewerError(
                f"{where}: completion_ids has {len(completion)} ids but env_mask {len(env_mask)}; a rollout needs one "
                "mask value per completion id."
            )
        return _runs(list(prompt) + list(completion), [0] * len(prompt) + list(env_mask), tokenizer), "rl-rollout"
    if "messages" in row:
        rendered = tokenizer.apply_chat_template(
            row["messages"],
            tools=row.get("tools") or None,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        return _runs(rendered["input_ids"], rendered["assistant_masks"], tokenizer), "sft-conversational"
    raise ViewerError(
        f"{where}: not a training sample (keys {sorted(row)[:8]}); a sample has 'messages' (SFT, TRL conversational "
        "format) or 'prompt_ids', 'completion_ids' and 'env_mask' (an RL rollout). For episode records drop --sample."
    )


def sample_meta(row: dict[str, Any], where: str, kind: str) -> dict[str, Any]:
    """What the sample page lists above the token stream."""
    keys = (
        "kind",
        "label",
        "task_id",
        "turn_id",
        "domain",
        "fault_type",
        "fault_id",
        "n_tokens",
        "episode_id",
        "env_reward",
        "truncated",
    )
    meta: dict[str, Any] = {"sample": where, "format": kind}
    meta.update({k: row[k] for k in keys if row.get(k) not in (None, "")})
    return meta
