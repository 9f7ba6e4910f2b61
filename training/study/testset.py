"""The frozen test set: drawn once, its task ids and content hashes committed, checked on every later run.

:func:`draw_testset` turns the synthesized test split (``OUT/data/test``: the held-out domain worded by the second
question writer, the config's own seed) into the evaluation suite ``OUT/data/test-suite``: every task folder, and a
``faults.jsonl`` holding, per task, at most ``test_faults_per_task`` of its **detectable** faults (the fault line's
``detectable``: the gold's checks reveal it at its turn) of ``test_fault_types``, drawn with the config's seed. Each
task is played once clean and once per drawn fault, so clean and faulted episodes are paired by task.

The record (:func:`testset_record`, written to ``testset_record``) holds the synthesis fields, each task's id and
the SHA-256 of its folder (every file's relative path and bytes), each drawn fault's id and hash, the episode counts
and the editions that have seen the set. When the record exists, a run must draw exactly the same tasks and faults
(:class:`FrozenTestsetError` names the first difference); its edition is added to ``seen_by_editions``.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

FAULTS_FILE = "faults.jsonl"


class FrozenTestsetError(ValueError):
    """The test set drawn now is not the frozen one (the message names the first difference and the fix)."""


def folder_hash(folder: Path) -> str:
    """SHA-256 over every file under ``folder``: its relative path and bytes, in sorted path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def fault_hash(line: dict[str, Any]) -> str:
    """SHA-256 of a fault line (its JSON with sorted keys)."""
    return hashlib.sha256(json.dumps(line, sort_keys=True).encode()).hexdigest()


def draw_faults(
    lines: list[dict[str, Any]], per_task: int, fault_types: list[str] | None, seed: int
) -> list[dict[str, Any]]:
    """Per task, at most ``per_task`` of its detectable faults of ``fault_types`` (None: any type): a seeded draw
    over the task's eligible lines in file order; the result keeps file order."""
    eligible: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        if line.get("detectable") is True and (fault_types is None or line.get("fault_type") in fault_types):
            eligible.setdefault(str(line["task_id"]), []).append(index)
    chosen: set[int] = set()
    for task_id, indices in sorted(eligible.items()):
        rng = random.Random(f"{seed}:{task_id}")
        chosen.update(rng.sample(indices, min(per_task, len(indices))))
    return [lines[i] for i in sorted(chosen)]


def testset_record(config: Any, split: Path, faults: list[dict[str, Any]]) -> dict[str, Any]:
    """The record of the test set drawn from the synthesized ``split`` (see the module docstring)."""
    tasks = sorted(p.parent for p in (split / "tasks").glob("*/config.yaml"))
    faulted = {str(f["task_id"]) for f in faults}
    return {
        "synthesis": dict(config.testset),
        "test_fault_types": config.test_fault_types,
        "test_faults_per_task": config.test_faults_per_task,
        "seed": config.seed,
        "tasks": [{"task_id": t.name, "sha256": folder_hash(t)} for t in tasks if t.name in faulted],
        "faults": [
            {
                "task_id": f["task_id"],
                "turn_id": str(f["turn_id"]),
                "fault_type": f["fault_type"],
                "sha256": fault_hash(f),
            }
            for f in faults
        ],
        "episodes": {"faulted": len(faults), "clean": len(faulted)},
    }


def _differences(frozen: dict[str, Any], drawn: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("synthesis", "test_fault_types", "test_faults_per_task", "seed", "tasks", "faults"):
        if frozen.get(key) != drawn.get(key):
            if isinstance(frozen.get(key), list) and isinstance(drawn.get(key), list):
                gone = [x for x in frozen[key] if x not in drawn[key]]
                new = [x for x in drawn[key] if x not in frozen[key]]
                problems.append(f"{key}: {len(gone)} frozen entries not drawn (first {gone[:1]}), {len(new)} new")
            else:
                problems.append(f"{key}: frozen {frozen.get(key)!r}, drawn {drawn.get(key)!r}")
    return problems


def draw_testset(config: Any, split: Path, suite: Path, record_path: Path) -> dict[str, Any]:
    """Build the evaluation suite ``suite`` from the synthesized test ``split`` and check or write the frozen record
    at ``record_path`` (see the module docstring); returns the record."""
    lines = [json.loads(x) for x in (split / FAULTS_FILE).read_text(encoding="utf-8").splitlines() if x.strip()]
    faults = draw_faults(lines, config.test_faults_per_task, config.test_fault_types, config.seed)
    drawn = testset_record(config, split, faults)
    counts = drawn["episodes"]
    if counts["faulted"] < config.min_faulted or counts["clean"] < config.min_clean:
        raise ValueError(
            f"testset: {counts['faulted']} faulted and {counts['clean']} clean episodes drawn, the design asks for "
            f"at least {config.min_faulted} and {config.min_clean}; raise testset.tasks_per_domain (before the "
            "first draw only)"
        )
    if record_path.is_file():
        frozen = json.loads(record_path.read_text(encoding="utf-8"))
        if problems := _differences(frozen, drawn):
            raise FrozenTestsetError(
                f"{record_path}: the test set drawn now is not the frozen one ({'; '.join(problems)}); a later "
                "edition reports on the frozen set: restore the testset config and code, or record a new test set "
                "under another testset_record (and say so in the report)"
            )
        seen = sorted({*frozen.get("seen_by_editions", []), config.edition})
        record = {**frozen, "seen_by_editions": seen}
    else:
        record = {**drawn, "drawn_in_edition": config.edition, "seen_by_editions": [config.edition]}
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    keep = {t["task_id"] for t in drawn["tasks"]}
    if suite.exists():
        shutil.rmtree(suite)
    (suite / "tasks").mkdir(parents=True)
    for task_id in sorted(keep):
        shutil.copytree(split / "tasks" / task_id, suite / "tasks" / task_id)
    with (suite / FAULTS_FILE).open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(f) + "\n" for f in faults)
    return record
