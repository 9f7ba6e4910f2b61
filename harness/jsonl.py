"""Reading JSON-lines files with errors that name the file and line (faults, episode records, imported benchmarks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
