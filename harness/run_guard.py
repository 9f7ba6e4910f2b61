"""What keeps a resumable output folder to one run: an exclusive lock, a fingerprint of its inputs, and its place.

- :class:`OutLock`: an exclusive ``fcntl.flock`` on ``OUT/.lock`` held for the whole run; a second run on the same
  folder is refused at once with :class:`OutLockedError` (naming the folder and the holder's pid). The lock dies with
  its process, so a killed run never leaves a stale lock behind.
- :func:`code_version`: the package version and, in a git checkout, the commit (``0.1.0+git.1a2b3c4d5e6f``); part of
  every fingerprint, so outputs of other code are not mixed in.
- :func:`file_digest` / :func:`tree_digest` / :func:`value_digest`: sha256 of a file, of a folder's files (relative
  paths and contents, links not followed) and of a JSON value, for fingerprints of input files, task folders and
  records.
- :func:`changed_fields`: the first fields on which a stored fingerprint and the current one differ, for the one-line
  refusal that names what changed.
- :func:`check_out_outside`: an output folder inside an input folder (a task folder a worker reads) is refused;
  :func:`enclosing_task_folder` finds a task folder above a path before the suite is resolved.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness import __version__

LOCK_FILE = ".lock"
CHUNK = 1 << 20


class OutLockedError(ValueError):
    """Another run holds the output folder's lock; the message names the folder, the holder and the fix."""


class OutLock:
    """An exclusive, non-blocking ``flock`` on ``out/.lock`` (the folder is created); use as a context manager.
    ``flag`` names the option in the message (``--out``)."""

    def __init__(self, out: str | os.PathLike[str], flag: str = "--out"):
        self.out, self.flag = Path(out), flag
        self._fd: int | None = None

    def __enter__(self) -> OutLock:
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise OutLockedError(
                f"{self.flag} {self.out}: another run (pid {holder}) is writing to this folder; wait for it to "
                "finish or pass another --out."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


_CODE_VERSION: str | None = None


def code_version() -> str:
    """``<package version>`` plus ``+git.<commit>`` when the package runs from a git checkout (cached)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        root = Path(__file__).resolve().parents[1]
        commit = ""
        if (root / ".git").exists():
            try:
                done = subprocess.run(
                    ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                    capture_output=True, text=True, timeout=10, check=False,
                )  # fmt: skip
                commit = done.stdout.strip() if done.returncode == 0 else ""
            except (OSError, subprocess.TimeoutExpired):
                commit = ""
        _CODE_VERSION = f"{__version__}+git.{commit}" if commit else __version__
    return _CODE_VERSION


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 (hex, 16 characters) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def tree_digest(folder: str | os.PathLike[str], *, skip: Iterable[str] = ()) -> str:
    """sha256 (hex, 16 characters) of every regular file under ``folder`` (relative path and bytes, sorted; links
    are hashed as their target text, never followed); top-level names in ``skip`` and ``__pycache__`` folders (written
    by importing a task's own grader) are left out."""
    root = Path(folder)
    skipped = set(skip)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in skipped or "__pycache__" in rel.parts:
            continue
        digest.update(str(rel).encode(errors="surrogateescape") + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode(errors="surrogateescape"))
        elif path.is_file():
            digest.update(file_digest(path).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def value_digest(value: Any) -> str:
    """sha256 (hex, 16 characters) of ``value`` as JSON with sorted keys (what is not JSON is written as ``str``)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def changed_fields(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ between two fingerprints (a key missing on one side differs)."""
    return [key for key in dict.fromkeys([*stored, *current]) if stored.get(key) != current.get(key)]


def enclosing_task_folder(path: str | os.PathLike[str]) -> Path | None:
    """The nearest folder at or above ``path`` that is a task folder (holds ``config.yaml`` and ``public/``), or
    None: checked before an output folder is created, whatever the suite."""
    resolved = Path(path).resolve()
    for folder in (resolved, *resolved.parents):
        if (folder / "config.yaml").is_file() and (folder / "public").is_dir():
            return folder
    return None


def check_out_outside(out: str | os.PathLike[str], folders: Iterable[str | os.PathLike[str]], flag: str) -> None:
    """Refuse (``ValueError``) an output folder that is, or lies inside, one of ``folders`` (e.g. the task folders
    of the run, whose files a worker reads: its records and grades must not be among them)."""
    resolved = Path(out).resolve()
    for folder in folders:
        inside = Path(folder).resolve()
        if resolved == inside or inside in resolved.parents:
            raise ValueError(
                f"{flag} {out}: lies inside the task folder {folder}, which the worker reads (it would see the "
                "records and grades); pass an --out outside every task folder of the run."
            )
