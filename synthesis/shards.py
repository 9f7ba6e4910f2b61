"""Where a synthesis run keeps its shards: ``OUT/shards/<task_id>.json.gz`` (one per task, written last: its presence
marks the task done) and ``OUT/shards/<task_id>.episodes.jsonl.gz`` (its episode records, the branches of
:data:`EPISODE_BRANCHES` in that order). :mod:`synthesis.driver` writes them, :mod:`synthesis.export` reads them."""

from __future__ import annotations

from pathlib import Path

SHARDS = "shards"
"""The folder of the shards under a synthesis output."""

EPISODE_BRANCHES = ("clean", "faulty", "gold")
"""The branches of a shard's episode records, in file order."""


def shard_path(out: Path, task_id: str) -> Path:
    """The shard of ``task_id`` under the synthesis output ``out``."""
    return out / SHARDS / f"{task_id}.json.gz"


def episodes_path(out: Path, task_id: str) -> Path:
    """The shard's episode records: JSON lines, the clean branch, then faulty, then gold (counts in the shard)."""
    return out / SHARDS / f"{task_id}.episodes.jsonl.gz"
