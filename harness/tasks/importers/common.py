"""Shared machinery of the importers: options, report, safe output folders, writing and validating task folders."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from tqdm import tqdm

from harness.jsonl import dumps, iter_jsonl
from harness.tasks.checks import TASK_ID_PATTERN
from harness.tasks.config import CONFIG_FILE, TaskConfig
from harness.tasks.task import ANSWERS_FILE, REFERENCE_FILE, Task, load_task

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ImporterError(ValueError):
    """The importer's input or output is unusable; the message names the path or flag and the fix."""


@dataclass(frozen=True)
class ImportOptions:
    """Inputs of one import run (each importer uses the fields it needs and names any missing flag)."""

    src: Path = field(metadata={"help": "Source folder (or file) of the benchmark to import."})
    out: Path = field(metadata={"help": "Folder the task folders are written into (one sub-folder per task)."})
    ids: tuple[str, ...] | None = field(default=None, metadata={"help": "Only import these source ids."})
    raw: Path | None = field(default=None, metadata={"help": "mlebench: the competition's raw data folder."})
    context: Path | None = field(default=None, metadata={"help": "dabstep: folder of context documents/tables."})
    task_id: str | None = field(default=None, metadata={"help": "longds/mlebench: id of the written task."})
    overwrite: bool = field(default=False, metadata={"help": "Replace existing, non-empty task folders."})

    def __post_init__(self) -> None:
        if self.ids is not None and not self.ids:
            raise ValueError("ImportOptions.ids is an empty selection; pass at least one id or None for all.")

    def require(self, name: str, flag: str, importer: str) -> Path:
        """The path option ``name``; ``ImporterError`` naming ``flag`` when it was not given or does not exist."""
        value = getattr(self, name)
        if value is None:
            raise ImporterError(f"the {importer} importer needs {flag} DIR; pass it.")
        if not Path(value).exists():
            raise ImporterError(f"{flag} {value} does not exist; pass an existing path.")
        return Path(value)


@dataclass
class ImportReport:
    """What an import run wrote and skipped."""

    kind: str
    out: Path
    written: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{self.kind}: imported {len(self.written)} task(s) into {self.out}"
        if self.skipped:
            reasons = "; ".join(f"{sid}: {why}" for sid, why in self.skipped[:5])
            more = f" (+{len(self.skipped) - 5} more)" if len(self.skipped) > 5 else ""
            text += f", skipped {len(self.skipped)} ({reasons}{more})"
        return text


def progress(items: Sequence[T], desc: str) -> Iterator[T]:
    """A tqdm progress bar for many items (hidden for a single item and when stderr is not a terminal)."""
    return iter(tqdm(items, desc=desc, unit="task", disable=True if len(items) < 2 else None))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; ``ImporterError`` naming the line for a bad one."""
    rows = []
    for where, row in iter_jsonl(path, error=ImporterError):
        if not isinstance(row, dict):
            raise ImporterError(f"{where} is not a JSON object; each line must be one object.")
        rows.append(row)
    return rows


def select(rows: Sequence[T], ids: Iterable[str] | None, key: Any, source: str) -> list[T]:
    """The rows whose ``key(row)`` is in ``ids`` (all rows when ids is None); unknown ids are an error."""
    if ids is None:
        return list(rows)
    wanted = [str(i) for i in ids]
    by_id = {str(key(row)): row for row in rows}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        sample = ", ".join(list(by_id)[:10])
        raise ImporterError(f"--ids {', '.join(unknown)} not found in {source}; valid ids include: {sample} ...")
    return [by_id[i] for i in dict.fromkeys(wanted)]


MAX_TASK_ID_CHARS = 128


def check_task_id(task_id: str) -> str:
    """``task_id`` when it is a safe folder name (:data:`~harness.tasks.checks.TASK_ID_PATTERN`: letters, digits,
    ``.``, ``_``, ``-``, starting with a letter or digit, so no path separator, no ``..`` and no leading dot; at most
    :data:`MAX_TASK_ID_CHARS` characters), else ``ImporterError`` naming it."""
    if not isinstance(task_id, str) or not TASK_ID_PATTERN.match(task_id) or len(task_id) > MAX_TASK_ID_CHARS:
        raise ImporterError(
            f"task id {str(task_id)[:200]!r} is not a safe folder name (letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit, at most {MAX_TASK_ID_CHARS} characters); fix the source id or pass --task-id."
        )
    return task_id


def check_outputs(out: Path, task_ids: Iterable[str], overwrite: bool) -> list[Path]:
    """The task folders ``out/<id>`` of ``task_ids``, checked before anything is written: every id must be a safe
    folder name (:func:`check_task_id`, so no folder outside ``out`` is ever touched), and existing non-empty outputs
    are refused without ``overwrite``, as is anything that is not a task folder."""
    task_dirs = [Path(out) / check_task_id(task_id) for task_id in task_ids]
    busy = [d for d in task_dirs if d.exists() and (not d.is_dir() or any(d.iterdir()))]
    foreign = [d for d in busy if not (d / CONFIG_FILE).is_file()]
    if foreign:
        raise ImporterError(
            f"{len(foreign)} output path(s) exist and are not task folders, e.g. {foreign[0]}; "
            "move them away or choose another --out (they are never deleted)."
        )
    if busy and not overwrite:
        raise ImporterError(
            f"{len(busy)} output task folder(s) already exist and are not empty, e.g. {busy[0]}; "
            "pass --overwrite to replace them or choose another --out."
        )
    return task_dirs


def fresh_task_dir(task_dir: Path) -> Path:
    """An empty ``task_dir`` (one of :func:`check_outputs`'s folders) with ``public/`` and ``private/``; an existing
    task folder is replaced.

    Callers run :func:`check_outputs` first, which guarantees that an existing folder is a task folder that the user
    allowed us to overwrite.
    """
    check_task_id(task_dir.name)
    if task_dir.exists():
        shutil.rmtree(task_dir)
    (task_dir / "public").mkdir(parents=True)
    (task_dir / "private").mkdir()
    return task_dir


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (no extra disk), copying when linking is impossible (other filesystem)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path) -> int:
    """Hard-link (or copy) every regular file below ``src`` into ``dst``; symlinks are skipped. Returns the count."""
    count = 0
    for current, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = Path(current) / name
            if path.is_symlink() or not path.is_file():
                logger.warning("skipping %s: not a regular file", path)
                continue
            link_or_copy(path, dst / path.relative_to(src))
            count += 1
    return count


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data, indent=2) + "\n", encoding="utf-8")  # a lone surrogate as its escape text


def write_task(
    task_dir: Path,
    config: TaskConfig,
    description: str,
    *,
    answers: list[list[str]] | None = None,
    reference: dict[str, Any] | None = None,
) -> Task:
    """Write ``config.yaml``, ``description.md`` and the private answers, then load (validate) the folder."""
    text = yaml.safe_dump(config.to_dict(), sort_keys=False, allow_unicode=True, width=119)
    (task_dir / CONFIG_FILE).write_text(text, encoding="utf-8")
    (task_dir / config.description).write_text(description.rstrip() + "\n", encoding="utf-8")
    if answers is not None:
        write_json(task_dir / config.private_dir / ANSWERS_FILE, answers)
    if reference is not None:
        write_json(task_dir / config.private_dir / REFERENCE_FILE, reference)
    return load_task(task_dir)
