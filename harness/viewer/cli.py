"""``stateguard view``: static HTML pages of episode records and training samples.

    stateguard view runs/synth/episodes/gold.jsonl --out episode.html        # the first record
    stateguard view runs/synth/episodes/gold.jsonl --index 2 --out episode.html
    stateguard view runs/synth/episodes/gold.jsonl --episode-id 5e496098ae55 --out episode.html
    stateguard view runs/synth/episodes/gold.jsonl --all --out pages/        # pages/index.html + one page per record
    stateguard view runs/synth/dataset --sample --index 0 --out sample.html  # the token mask of an SFT sample
    stateguard view rollouts.jsonl --sample --all --out rollouts/            # RL rollouts with env_mask

Each page is one self-contained HTML file (see :mod:`harness.viewer.render`): open it in any browser, offline. The
reward terms of a faulted record are scored against its fault label from the synthesis output folder (``--pool``;
found automatically for ``OUT/episodes/*.jsonl``). ``--out`` is checked first (a file path whose folder is writable,
created when missing; a writable folder with ``--all``). Bad input (a missing or binary file, a line that is not a
record, an out-of-range index, an unusable ``--out``) prints one line: what is wrong, where, and the fix, and exits
with code 2.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import Any

from harness.cli import prepare_out_dir, prepare_out_file
from harness.viewer.inputs import (
    ViewerError,
    default_pool,
    episode_reward,
    sample_meta,
    sample_reward,
    sample_spans,
    select_records,
    select_samples,
)
from harness.viewer.render import render_episode, render_index, render_sample

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view",
        help="write a static HTML page of an episode record (or a training sample's token mask)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", type=Path, help="RECORD.jsonl (episode records), or with --sample: samples")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write (a folder with --all)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--index", type=int, default=None, help="0-based record (or sample) to show (default: 0)")
    which.add_argument("--episode-id", default=None, help="the record with this episode_id")
    which.add_argument("--all", action="store_true", help="one page per record into the --out folder, + index.html")
    parser.add_argument(
        "--sample",
        action="store_true",
        help="PATH holds training samples (a dataset folder or JSON lines: SFT messages or RL rollouts with env_mask)",
    )
    parser.add_argument("--split", default="train", help="dataset split for --sample on a DatasetDict folder")
    parser.add_argument(
        "--pool", type=Path, default=None, help="synthesis output folder holding the fault labels (default: found)"
    )
    parser.add_argument("--reward-config", type=Path, default=None, help="RewardConfig YAML (default weights)")
    parser.set_defaults(func=view_command)


def view_command(args: argparse.Namespace) -> int:
    try:
        written = write_pages(args)
    except ViewerError as exc:
        print(f"stateguard view: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80]


def write_pages(args: argparse.Namespace) -> list[Path]:
    """Write the page(s) ``args`` ask for; return their paths (the index page first with ``--all``)."""
    if args.episode_id is not None and args.sample:
        raise ViewerError("--episode-id selects an episode record; with --sample select a sample with --index.")
    if args.index is not None and args.index < 0:
        raise ViewerError(f"{args.path}: --index {args.index} is negative; pass a 0-based index.")
    index = None if args.all or args.episode_id is not None else (args.index or 0)
    if args.all:
        prepare_out_dir(args.out)
    else:
        prepare_out_file(args.out)
    pages = _sample_pages(args, index) if args.sample else _episode_pages(args, index)
    if not args.all:
        ((_, _, text, _),) = pages
        return [_write(args.out, text)]
    folder = args.out
    written = [_write(folder / name, text) for name, _, text, _ in pages]
    entries = [(name, label, summary) for name, label, _, summary in pages]
    return [_write(folder / "index.html", render_index(f"StateGuard: {args.path}", entries)), *written]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _episode_pages(args: argparse.Namespace, index: int | None) -> list[tuple[str, str, str, str]]:
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
    pool = args.pool or default_pool(args.path)
    if args.pool is not None and not args.pool.is_dir():
        raise ViewerError(f"--pool {args.pool}: no such folder; pass the output folder of `stateguard synthesize`.")
    pages = []
    for i, record in records:
        reward = episode_reward(record, pool, args.reward_config)
        config = record.get("config") or {}
        grade = record.get("grade") or {}
        total = "n/a" if reward.total is None else f"{reward.total:.3f}"
        summary = (
            f"{record['task_id']} · {config.get('branch') or config.get('manager')} · "
            f"{len(record['activations'])} activations · {len(record['states'])} states · "
            f"grade {grade.get('score')} · reward {total}"
        )
        name = f"{i:04d}-{_slug(record['episode_id'])}.html"
        pages.append((name, record["episode_id"], render_episode(record, reward), summary))
    return pages


def _sample_pages(args: argparse.Namespace, index: int | None) -> list[tuple[str, str, str, str]]:
    from training.tokenizer import build_qwen3_tokenizer

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
        pages.append((f"sample-{i:05d}.html", where, render_sample(spans, meta, sample_reward(row)), summary))
    return pages
