"""``stateguard view``: static HTML pages of episode records and training samples.

    stateguard view runs/run/episodes.jsonl --out episode.html               # the latest record of the file
    stateguard view runs/synth/episodes/gold.jsonl --index 2 --out episode.html  # the third (-1: the last)
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
from pathlib import Path
from typing import Any

from harness.viewer import cli as pages
from harness.viewer.inputs import ViewerError
from harness.viewer.render import RewardView
from rewards import RewardConfig, score_episode
from synthesis.labels import fault_infos
from synthesis.shards import SHARDS


def register(subparsers: argparse._SubParsersAction) -> None:
    """The ``view`` sub-command: the page arguments of :func:`harness.viewer.cli.add_view_parser`, and the fault
    labels and reward weights the reward panel is scored with."""
    parser = pages.add_view_parser(subparsers, description=__doc__)
    parser.add_argument(
        "--pool", type=Path, default=None, help="synthesis output folder holding the fault labels (default: found)"
    )
    parser.add_argument("--reward-config", type=Path, default=None, help="RewardConfig YAML (default weights)")
    parser.set_defaults(func=view_command)


def view_command(args: argparse.Namespace) -> int:
    """:func:`harness.viewer.cli.view_command` with the reward panels of :func:`episode_reward` (each record against
    its fault label from ``--pool`` or the folder the records live in) and :func:`sample_reward`."""

    def reward_of(record: dict[str, Any]) -> RewardView:
        return episode_reward(record, _pool(args), args.reward_config)

    return pages.view_command(args, episode_reward=reward_of, sample_reward=sample_reward)


def _pool(args: argparse.Namespace) -> Path | None:
    """``--pool``, checked (a folder), or else the synthesis output folder the records live in (None: none)."""
    if args.pool is not None and not args.pool.is_dir():
        raise ViewerError(f"--pool {args.pool}: no such folder; pass the output folder of `stateguard synthesize`.")
    return args.pool or default_pool(args.path)


def default_pool(record_path: str | Path) -> Path | None:
    """The synthesis output folder a record file lives in (``OUT/episodes/*.jsonl`` with ``OUT/shards/``)."""
    folder = Path(record_path).resolve().parent
    if folder.name == "episodes" and (folder.parent / SHARDS).is_dir():
        return folder.parent
    return None


def episode_reward(
    record: dict[str, Any], pool: str | Path | None, reward_config: str | Path | None = None
) -> RewardView:
    """The reward terms of ``record`` (``rewards.score_episode``). A faulted episode is scored against its fault label,
    read from the synthesis output folder ``pool``; without a label it is not scored (scoring it as clean would grade
    every repair as a false alarm), and the view's note says why and how to fix it."""
    config = RewardConfig.from_yaml(reward_config) if reward_config else RewardConfig()
    weights = config.weights()
    settings = record.get("config") or {}
    fault_id = settings.get("fault_id")
    if fault_id:
        labels = fault_infos(pool) if pool else {}
        fault = labels.get(fault_id)
        if fault is None:
            where = f"the synthesis output {pool}" if pool else "no synthesis output folder (--pool)"
            note = (
                f"Not scored: fault {fault_id} has no label in {where}; pass --pool OUT, the "
                "`stateguard synthesize` output folder of this record."
            )
            return RewardView(terms={}, weights=weights, total=None, note=note)
        note = f"Scored against fault {fault_id} ({fault.fault_type} on turn {fault.turn_id}"
        note += ", benign)." if fault.benign else ")."
    elif settings.get("faults"):
        note = (
            f"Not scored: the record injects faults {settings['faults']} but names no fault_id, so no fault label "
            "is known (records of `stateguard synthesize` carry one)."
        )
        return RewardView(terms={}, weights=weights, total=None, note=note)
    else:
        fault, note = None, "Scored as a clean episode (no fault injected)."
    breakdown = score_episode(record, fault, config)
    return RewardView(terms=dict(breakdown.terms), weights=weights, total=breakdown.total, note=note)


def sample_reward(row: dict[str, Any]) -> RewardView | None:
    """A rollout's own reward terms (``reward_terms``, ``env_reward``), when the row carries them."""
    if not row.get("reward_terms"):
        return None
    return RewardView(
        terms=dict(row["reward_terms"]),
        weights=RewardConfig().weights(),
        total=row.get("env_reward"),
        note="The rollout's recorded reward terms (default weights shown).",
    )
