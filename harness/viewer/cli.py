"""The pages of ``stateguard view``: static HTML of episode records and training samples, written from its arguments.

:func:`add_view_parser` adds the ``view`` sub-parser with the arguments that choose the pages (the records or
samples, which of them, ``--out``); :func:`write_pages` writes them and :func:`view_command` runs it as a command
(a :class:`~harness.viewer.inputs.ViewerError` becomes one line on stderr and exit code 2). The reward panel of a
page is data the caller hands in: ``episode_reward(record)`` and ``sample_reward(row)`` return its
:class:`~harness.viewer.render.RewardView` (None: no panel). The command is registered by :mod:`synthesis.view`,
which scores a record against its fault label from the synthesis output folder (the rewards and the labels belong
to higher layers).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.cli import prepare_out_dir, prepare_out_file
from harness.tokenizer import build_qwen3_tokenizer
from harness.viewer.inputs import ViewerError, sample_meta, sample_spans, select_records, select_samples
from harness.viewer.render import RewardView, render_episode, render_index, render_sample

logger = logging.getLogger(__name__)

RewardOf = Callable[[dict[str, Any]], RewardView | None]
"""The reward panel of a page: a record (or a sample row) -> its :class:`RewardView`, or None for no panel."""


def add_view_parser(subparsers: argparse._SubParsersAction, description: str | None = None) -> argparse.ArgumentParser:
    """Add the ``view`` sub-parser with the arguments of the pages; the caller adds its own and sets ``func``."""
    parser = subparsers.add_parser(
        "view",
        help="write a static HTML page of an episode record (or a training sample's token mask)",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", type=Path, help="RECORD.jsonl (episode records), or with --sample: samples")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write (a folder with --all)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--index",
        type=int,
        default=None,
        help="0-based record (or sample) to show; negative counts from the end (default: the latest record, the "
        "first sample)",
    )
    which.add_argument("--episode-id", default=None, help="the record with this episode_id")
    which.add_argument("--all", action="store_true", help="one page per record into the --out folder, + index.html")
    parser.add_argument(
        "--sample",
        action="store_true",
        help="PATH holds training samples (a dataset folder or JSON lines: SFT messages or RL rollouts with env_mask)",
    )
    parser.add_argument("--split", default="train", help="dataset split for --sample on a DatasetDict folder")
    return parser


def view_command(
    args: argparse.Namespace, episode_reward: RewardOf | None = None, sample_reward: RewardOf | None = None
) -> int:
    """:func:`write_pages` as a command: prints the written paths (exit code 0), or the :class:`ViewerError` as one
    line on stderr (exit code 2)."""
    try:
        written = write_pages(args, episode_reward, sample_reward)
    except ViewerError as exc:
        print(f"stateguard view: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80]


def write_pages(
    args: argparse.Namespace, episode_reward: RewardOf | None = None, sample_reward: RewardOf | None = None
) -> list[Path]:
    """Write the page(s) ``args`` ask for, each with the reward panel ``episode_reward`` (or ``sample_reward``, with
    ``--sample``) gives it; return their paths (the index page first with ``--all``)."""
    if args.episode_id is not None and args.sample:
        raise ViewerError("--episode-id selects an episode record; with --sample select a sample with --index.")
    index = None
    if not args.all and args.episode_id is None:  # one page: the latest record of an appended file, the first sample
        index = args.index if args.index is not None else (0 if args.sample else -1)
    if args.all:
        prepare_out_dir(args.out)
    else:
        prepare_out_file(args.out)
    if args.sample:
        pages = _sample_pages(args, index, sample_reward)
    else:
        pages = _episode_pages(args, index, episode_reward)
    if not args.all:
        ((_, _, text, _),) = pages
        return [_write(args.out, text)]
    folder = args.out
    written = [_write(folder / name, text) for name, _, text, _ in pages]
    entries = [(name, label, summary) for name, label, _, summary in pages]
    return [_write(folder / "index.html", render_index(f"StateGuard: {args.path}", entries)), *written]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="backslashreplace")  # a lone surrogate as its escape text
    return path


def _episode_pages(
    args: argparse.Namespace, index: int | None, episode_reward: RewardOf | None
) -> list[tuple[str, str, str, str]]:
    """``[(file name, label, html, summary)]`` of the chosen records."""
    if args.path.is_dir():
        raise ViewerError(
            f"{args.path}: is a folder; pass an episode-records file (OUT/episodes/gold.jsonl), or add --sample for a "
            "dataset folder."
        )
    try:
        records = select_records(args.path, index=index, episode_id=args.episode_id)
    except UnicodeDecodeError:
        raise ViewerError(
            f"{args.path}: not a text file; pass an episode-records JSON-lines file (e.g. OUT/episodes/gold.jsonl)."
        ) from None
    pages = []
    for i, record in records:
        reward = episode_reward(record) if episode_reward else None
        config = record.get("config") or {}
        grade = record.get("grade") or {}
        total = "n/a" if reward is None or reward.total is None else f"{reward.total:.3f}"
        summary = (
            f"{record['task_id']} · {config.get('branch') or config.get('manager')} · "
            f"{len(record['activations'])} activations · {len(record['states'])} states · "
            f"grade {grade.get('score')} · reward {total}"
        )
        name = f"{i:04d}-{_slug(record['episode_id'])}.html"
        pages.append((name, record["episode_id"], render_episode(record, reward), summary))
    return pages


def _sample_pages(
    args: argparse.Namespace, index: int | None, sample_reward: RewardOf | None
) -> list[tuple[str, str, str, str]]:
    samples = select_samples(args.path, index=index, split=args.split)
    tokenizer = build_qwen3_tokenizer()
    pages = []
    for i, where, row in samples:
        if not isinstance(row, dict):
            raise ViewerError(f"{where}: expected a JSON object (a sample), got {type(row).__name__}.")
        spans, kind = sample_spans(row, where, tokenizer)
        meta: dict[str, Any] = sample_meta(row, where, kind)
        n_model = sum(s.n_tokens for s in spans if s.model)
        n_all = sum(s.n_tokens for s in spans)
        summary = f"{kind} · {meta.get('kind', '')} {meta.get('label', '')} · {n_all} tokens, {n_model} model"
        reward = sample_reward(row) if sample_reward else None
        pages.append((f"sample-{i:05d}.html", where, render_sample(spans, meta, reward), summary))
    return pages
