"""The replay pool: the episodes a synthesis run left behind, ready to be replayed by :class:`envs.ManagerEnv`.

A synthesis output folder (``stateguard synthesize``) holds ``tasks/<task_id>/`` (the task folders) and
``episodes/index.jsonl`` (written by :func:`synthesis.export.episode_index`): one line per clean task and per kept
fault. :class:`ReplayPool` reads only that index. An episode id is the fault id for a faulted episode (its gold and
faulty records carry it as ``config["fault_id"]``) and the clean record's episode id for a clean one;
:meth:`ReplayPool.entry` also accepts the episode id of any recorded branch.

Replaying an entry means playing its task with the scripted worker carrying its fault
(``ScriptedWorker.for_task(task, kernel, {turn_id: Fault})``). The scripted worker re-runs the correct program when a
REPAIR names a corrupted variable, and keeps the faulty code otherwise, so the manager's decisions choose between the
recorded repaired branch (``gold``) and the recorded faulty continuation (``faulty``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.jsonl import iter_jsonl
from harness.manager.episode import EpisodeRecord, read_episodes
from harness.tasks import Task, load_task
from harness.worker.faults import Fault, fault_from_row

if TYPE_CHECKING:
    from synthesis.faults.model import InjectedFault

INDEX = Path("episodes") / "index.jsonl"
"""Where the pool's index lives inside a synthesis output folder."""


class PoolError(ValueError):
    """A replay pool cannot be read or an episode id is unknown; the message names the file or id and the fix."""


@dataclass(frozen=True)
class PoolEntry:
    """One replayable episode of the pool (one line of the index)."""

    id: str
    kind: str  # clean | fault
    task_id: str
    task_dir: Path
    episodes: dict[str, str]  # branch -> episode id of the recorded EpisodeRecord
    fault: Fault | None
    fault_info: dict[str, Any] | None  # FaultInfo fields: turn_id, fault_type, variables, error_variable, benign
    injected: dict[str, Any] | None  # the InjectedFault dict (evidence and gold hint), when the index holds it

    @property
    def faults(self) -> dict[str, Fault]:
        """``{turn_id: Fault}`` for the scripted worker (empty for a clean episode)."""
        return {} if self.fault is None else {self.fault.turn_id: self.fault}

    def injected_fault(self) -> InjectedFault | None:
        """The fault as :class:`~synthesis.faults.model.InjectedFault` (what :class:`synthesis.gold.GoldPolicy`
        takes); None for a clean episode. Raises :class:`PoolError` when the index predates the ``injected`` field."""
        if self.fault is None:
            return None
        if self.injected is None:
            raise PoolError(
                f"episode {self.id}: the index has no 'injected' fault (written by an older synthesis run); "
                "re-run `stateguard synthesize` into a fresh folder to get the gold policy's fault."
            )
        from synthesis.faults.model import InjectedFault

        return InjectedFault(**{**self.injected, "variables": tuple(self.injected["variables"])})

    def gold_policy(self) -> Any:
        """A fresh :class:`synthesis.gold.GoldPolicy` for this episode (the synthesis gold manager, with the checks
        :mod:`synthesis.checks` writes from the task's stated requirements; it is given no fault)."""
        from harness.tasks import load_task
        from synthesis.checks import folder_checks
        from synthesis.gold import GoldPolicy

        return GoldPolicy(checks=folder_checks(load_task(self.task_dir)))


class ReplayPool:
    """The episodes of one synthesis output folder (see the module docstring)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        index = self.root / INDEX
        if not index.is_file():
            raise PoolError(
                f"{index}: no episode index. Point the pool at a `stateguard synthesize` output folder (it writes "
                f"{INDEX}); folders written before the index existed must be synthesized again."
            )
        self.entries: dict[str, PoolEntry] = {}
        self._by_episode: dict[str, str] = {}
        for where, row in iter_jsonl(index, error=PoolError):
            fault = None if row["fault"] is None else fault_from_row(row["fault"], where)
            entry = PoolEntry(
                id=row["id"],
                kind=row["kind"],
                task_id=row["task_id"],
                task_dir=self.root / row["task_dir"],
                episodes=dict(row["episodes"]),
                fault=fault,
                fault_info=row["fault_info"],
                injected=row.get("injected"),
            )
            self.entries[entry.id] = entry
            for episode_id in entry.episodes.values():
                self._by_episode[episode_id] = entry.id
        if not self.entries:
            raise PoolError(f"{index} lists no episodes; synthesize at least one task into {self.root}.")
        self._tasks: dict[Path, Task] = {}

    @property
    def ids(self) -> list[str]:
        """Every episode id, in index order."""
        return list(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, episode_id: str) -> PoolEntry:
        """The entry of ``episode_id`` (a pool id or the episode id of one of its recorded branches)."""
        key = episode_id if episode_id in self.entries else self._by_episode.get(episode_id)
        if key is None:
            shown = ", ".join(self.ids[:5]) + (", ..." if len(self) > 5 else "")
            raise PoolError(f"episode {episode_id!r} is not in the pool at {self.root} ({len(self)} ids: {shown}).")
        return self.entries[key]

    def task(self, entry: PoolEntry) -> Task:
        """The loaded task of ``entry`` (loaded once per folder)."""
        if entry.task_dir not in self._tasks:
            self._tasks[entry.task_dir] = load_task(entry.task_dir)
        return self._tasks[entry.task_dir]

    def fault_info(self, entry: PoolEntry) -> Any:
        """``rewards.FaultInfo`` of ``entry`` (None for a clean episode)."""
        if entry.fault_info is None:
            return None
        from rewards import FaultInfo

        return FaultInfo.from_dict(entry.fault_info)

    @cached_property
    def records(self) -> dict[str, EpisodeRecord]:
        """Every recorded episode of the folder (clean, faulty, gold), by episode id (read on first use)."""
        records: dict[str, EpisodeRecord] = {}
        for branch in ("clean", "faulty", "gold"):
            path = self.root / "episodes" / f"{branch}.jsonl"
            if path.is_file():
                records.update((r.episode_id, r) for r in read_episodes(path))
        return records

    def record(self, entry: PoolEntry, branch: str) -> EpisodeRecord:
        """The recorded :class:`EpisodeRecord` of ``entry``'s ``branch`` (clean | gold | faulty)."""
        if branch not in entry.episodes:
            raise PoolError(
                f"episode {entry.id} ({entry.kind}) has no {branch!r} record; it has {sorted(entry.episodes)}."
            )
        return self.records[entry.episodes[branch]]
