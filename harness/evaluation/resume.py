"""Which evaluation an output folder holds: its fingerprint, checked before a run adds episodes to it.

``OUT/fingerprint.json`` records what determines the episodes in ``OUT/episodes``:

- ``code``: the package version and git commit (:func:`harness.run_guard.code_version`);
- ``worker``: the worker spec; ``runtime``: the RuntimeConfig fields of every episode, the manager's reply cap,
  constrained decoding and (when on) legal actions only;
- ``variants``: variant name -> manager spec;
- ``tasks``: task id -> digest of its folder (config, public data, private reference); ``faults``: episode key ->
  digest of the fault it replays (so another faults file under the same keys is seen).

A run into a folder that holds episodes compares the two: ``code``, ``worker`` and ``runtime`` must be equal, and
every variant, task and episode key present in both must match (new variants, tasks and faults are added: a larger
``--limit`` or another variant extends the run). A mismatch raises :class:`ResumeMismatchError` naming what changed
and the fix (``--overwrite`` or a new ``--out``); a folder with episodes but no fingerprint (or an unreadable one) is
refused the same way. ``--overwrite`` (:func:`clear_outputs`) removes the evaluation's own outputs first.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.manager.checkpoint_settings import saved_settings
from harness.run_guard import code_version, tree_digest, value_digest

FINGERPRINT_FILE = "fingerprint.json"
SCALARS = ("code", "worker", "runtime")
MAPS = {"variants": "manager spec of variant", "tasks": "task folder", "faults": "fault replayed by episode"}
FIX = "pass --overwrite to discard them and start fresh, or a new --out"


class ResumeMismatchError(ValueError):
    """The output folder holds episodes of another evaluation; the message names what changed and the fix."""


def evaluation_fingerprint(config: Any, episodes: list[Any]) -> dict[str, Any]:
    """The fingerprint of evaluation ``config`` on ``episodes`` (:class:`~harness.evaluation.suite.EpisodeSpec`)."""
    runtime = {
        **config.runtime_fields(),
        "manager_max_tokens": config.manager_max_tokens,
        "constrained_decoding": config.constrained_decoding,
        **({"legal_actions_only": True} if config.legal_actions_only else {}),  # absent when off: older folders match
        **({"manager_settings": saved} if (saved := saved_settings(config.managers)) else {}),  # their manager.json
    }
    folders = {spec.task_id: spec.task_dir for spec in episodes}
    tasks = {task_id: tree_digest(folder) for task_id, folder in folders.items()}  # each folder once
    faults = {spec.key: value_digest(spec.fault.to_dict()) for spec in episodes if spec.fault is not None}
    return {
        "code": code_version(),
        "worker": config.worker,
        "runtime": json.loads(json.dumps(runtime, sort_keys=True, default=str)),
        "variants": dict(zip(config.variant_names, config.managers, strict=True)),
        "tasks": tasks,
        "faults": faults,
    }


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between a stored fingerprint and the current one, in words (empty: the run may resume)."""
    changed = [
        f"the {key} changed ({_short(stored.get(key))} -> {_short(current.get(key))})"
        for key in SCALARS
        if stored.get(key) != current.get(key)
    ]
    for key, what in MAPS.items():
        old, new = stored.get(key) or {}, current.get(key) or {}
        for name in [n for n in new if n in old and old[n] != new[n]][:3]:
            shown = f" ({_short(old[name])} -> {_short(new[name])})" if key == "variants" else ""
            changed.append(f"the {what} {name} changed{shown}")
    return changed


def has_episodes(folder: Path) -> bool:
    """Whether ``folder`` holds a non-empty ``*.jsonl`` file."""
    return folder.is_dir() and any(p.stat().st_size > 0 for p in folder.glob("*.jsonl"))


def check_and_record(out: Path, current: dict[str, Any], episodes: Path, flag: str = "--out") -> None:
    """Compare ``current`` with ``OUT/fingerprint.json`` and raise :class:`ResumeMismatchError` on a mismatch (or
    when the folder ``episodes`` holds records but there is no fingerprint); else write the merged fingerprint (the
    stored one extended by the current variants, tasks and faults)."""
    path = out / FINGERPRINT_FILE
    stored: dict[str, Any] | None = None
    if path.is_file():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResumeMismatchError(f"{flag} {out}: {path} is unreadable ({type(exc).__name__}); {FIX}.") from None
        if not isinstance(stored, dict) or not all(isinstance(stored.get(k), dict) for k in MAPS):
            raise ResumeMismatchError(f"{flag} {out}: {path} is not a fingerprint object; {FIX}.")
    elif has_episodes(episodes):
        raise ResumeMismatchError(
            f"{flag} {out}: holds episodes but no {FINGERPRINT_FILE}, so what produced them is unknown; {FIX}."
        )
    if stored is not None:
        changed = differences(stored, current)
        if changed:
            raise ResumeMismatchError(f"{flag} {out} holds episodes of another run: {'; '.join(changed)}; {FIX}.")
        current = {**current, **{key: {**stored[key], **current[key]} for key in MAPS}}
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def clear_outputs(out: Path, names: Iterable[str]) -> None:
    """Remove the files and folders ``names`` of ``out`` (an evaluation's own outputs) and its fingerprint."""
    for name in (*names, FINGERPRINT_FILE):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
