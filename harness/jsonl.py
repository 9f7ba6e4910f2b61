"""JSON-lines files: reading with errors that name the file and line (faults, episode records, imported benchmarks),
durable appends, and resuming after a run killed mid-append (a torn last line is dropped with a warning)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def iter_jsonl(path: str | Path, *, error: type[ValueError] = ValueError) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, value)`` for each non-blank line, ``where`` being ``"path:line"``.

    A line that is not JSON raises ``error`` with ``where``, the decoder's message and the fix.
    """
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield where, json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise error(f"{where}: not JSON ({exc.msg} at column {exc.colno}); fix or remove that line.") from None


def append_jsonl(path: str | Path, value: Any) -> None:
    """Append ``value`` as one JSON line, durably: one ``write`` of the whole line to a file opened ``O_APPEND``,
    then ``fsync``. A process killed mid-write leaves at most a torn *last* line, which :func:`drop_torn_tail`
    removes on resume. The folder and file are created when missing."""
    line = (value if isinstance(value, str) else json.dumps(value)).rstrip("\n") + "\n"
    if "\n" in line[:-1]:
        raise ValueError(f"{path}: a JSON line cannot hold a newline; serialise the value without indentation.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        data = memoryview(line.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_torn_tail(path: str | Path) -> int:
    """Truncate a torn last line (no final newline, or not JSON) left by a run killed while appending, with a
    warning naming the file; returns the bytes dropped (0 when the file is whole or missing). Only the last line is
    ever dropped: a bad line before it is left for the reader to report."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if not data or data.endswith(b"\n"):  # whole lines: drop the last only when it is not JSON
        start = data.rfind(b"\n", 0, len(data) - 1) + 1
        if not data[start:].strip():
            return 0
        try:
            json.loads(data[start:])
            return 0
        except (json.JSONDecodeError, UnicodeDecodeError):
            keep = start
    else:
        keep = data.rfind(b"\n") + 1
    with open(path, "r+b") as fh:
        fh.truncate(keep)
        os.fsync(fh.fileno())
    logger.warning(
        "%s: dropped a torn last line (%d bytes) left by an interrupted run; it is done again.", path, len(data) - keep
    )
    return len(data) - keep


def read_jsonl_resumable(path: str | Path, *, error: type[ValueError] = ValueError) -> list[Any]:
    """Every value of a JSON-lines file written by :func:`append_jsonl`, after :func:`drop_torn_tail`; a missing
    file is empty."""
    path = Path(path)
    if not path.is_file():
        return []
    drop_torn_tail(path)
    return [value for _, value in iter_jsonl(path, error=error)]
