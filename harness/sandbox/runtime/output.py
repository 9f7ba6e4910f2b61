"""Output capture with a byte cap, and conversion of results to JSON-serialisable values.

``CappedStream`` replaces ``sys.stdout``/``sys.stderr`` in the kernel: it keeps the first ``cap`` bytes and only
counts the rest, so ``print('x' * 100_000_000)`` costs no extra memory and the host receives at most ``cap`` bytes
plus the marker. Writes made directly to file descriptors 1 and 2 (C extensions, subprocesses) land in a memfd
that is read (capped the same way) and emptied after each cell.
"""

from __future__ import annotations

import io
import math
import os
from typing import Any

TRUNCATION_MARKER = "\n[... output truncated: {omitted} bytes omitted ...]\n"


class CappedStream(io.TextIOBase):
    """A text stream that keeps at most ``cap`` bytes (UTF-8) and counts the bytes it dropped."""

    def __init__(self, cap: int, name: str) -> None:
        super().__init__()
        self.cap = cap
        self.name = name
        self._parts: list[str] = []
        self._kept = 0
        self.omitted = 0

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s) if s.isascii() else len(s.encode("utf-8", "replace"))
        room = self.cap - self._kept
        if n <= room:
            self._parts.append(s)
            self._kept += n
        else:
            if room > 0:
                head = s[:room] if s.isascii() else s.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
                self._parts.append(head)
                self._kept += room
            self.omitted += n - max(room, 0)
        return len(s)

    def take(self) -> tuple[str, int]:
        """Return (captured text, omitted bytes) and reset."""
        text, omitted = "".join(self._parts), self.omitted
        self._parts, self._kept, self.omitted = [], 0, 0
        return text, omitted


def drain_fd_capture(fd: int, cap: int) -> tuple[str, int]:
    """Read up to ``cap`` bytes written to the memfd ``fd`` since the last drain, then empty it."""
    size = os.fstat(fd).st_size
    if size == 0:
        return "", 0
    data = os.pread(fd, min(size, cap), 0)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    return data.decode("utf-8", "replace"), max(size - cap, 0)


def join_capped(parts: list[tuple[str, int]], cap: int) -> tuple[str, bool]:
    """Concatenate captured pieces under one cap and append the truncation marker when anything was dropped."""
    text = "".join(p for p, _ in parts)
    omitted = sum(o for _, o in parts)
    raw = text.encode("utf-8", "replace")
    if len(raw) > cap:
        omitted += len(raw) - cap
        text = raw[:cap].decode("utf-8", "ignore")
    if omitted:
        return text + TRUNCATION_MARKER.format(omitted=omitted), True
    return text, False


def _float(x: float) -> Any:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def to_jsonable(obj: Any, *, max_items: int = 1000, depth: int = 0) -> Any:
    """Convert ``obj`` to plain JSON types.

    numpy/pandas scalars become Python scalars; NaN/NA become ``None``; +-inf become ``"inf"``/``"-inf"``;
    timestamps become ISO strings; a Series becomes ``{index: value}``; a DataFrame becomes
    ``{"columns", "index", "data"}`` (split orientation). Containers longer than ``max_items`` are cut and get a
    trailing ``"..."``; anything else falls back to ``repr`` (shortened).
    """
    if depth > 6:
        return repr(obj)[:200]
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return _float(obj)
    mod = type(obj).__module__ or ""
    if mod.startswith("numpy"):
        import numpy as np

        if isinstance(obj, np.generic):
            return to_jsonable(obj.item(), max_items=max_items, depth=depth + 1)
        if isinstance(obj, np.ndarray):
            if obj.size <= max_items:
                return to_jsonable(obj.tolist(), max_items=max_items, depth=depth + 1)
            return to_jsonable(obj.ravel()[:max_items].tolist(), max_items=max_items, depth=depth + 1) + ["..."]
    if mod.startswith("pandas"):
        import pandas as pd

        if obj is pd.NA or obj is pd.NaT:
            return None
        if isinstance(obj, (pd.Timestamp, pd.Timedelta, pd.Period)):
            return obj.isoformat()
        if isinstance(obj, pd.Series):
            head = obj.iloc[:max_items]
            out = {str(k): to_jsonable(v, max_items=max_items, depth=depth + 1) for k, v in head.items()}
            if len(obj) > max_items:
                out["..."] = f"{len(obj) - max_items} more"
            return out
        if isinstance(obj, pd.DataFrame):
            rows = max(1, max_items // max(1, obj.shape[1]))
            head = obj.iloc[:rows]
            return {
                "columns": [to_jsonable(c, depth=depth + 1) for c in head.columns],
                "index": [to_jsonable(i, depth=depth + 1) for i in head.index],
                "data": [[to_jsonable(v, depth=depth + 1) for v in row] for row in head.itertuples(index=False)],
                **({"truncated_rows": int(obj.shape[0] - rows)} if obj.shape[0] > rows else {}),
            }
        if isinstance(obj, pd.Index):
            return to_jsonable(list(obj[:max_items]), max_items=max_items, depth=depth + 1)
    if isinstance(obj, dict):
        items = list(obj.items())[:max_items]
        return {str(k): to_jsonable(v, max_items=max_items, depth=depth + 1) for k, v in items}
    if isinstance(obj, (list, tuple, set, frozenset)):
        seq = list(obj)[:max_items]
        out_list = [to_jsonable(v, max_items=max_items, depth=depth + 1) for v in seq]
        return out_list + (["..."] if len(obj) > max_items else [])
    if isinstance(obj, bytes):
        return obj[:max_items].decode("utf-8", "replace")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if isinstance(obj, complex):
        return {"real": _float(obj.real), "imag": _float(obj.imag)}
    text = repr(obj)
    return text if len(text) <= 2000 else text[:1997] + "..."
