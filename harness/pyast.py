"""``ast.parse`` that is safe to call from several threads of one process (:func:`parse_python`).

CPython 3.11 converts a parsed tree to Python objects with a recursion counter kept per interpreter, not per call
(fixed upstream in later releases, gh-106905): two threads parsing at once can raise ``SystemError: AST constructor
recursion depth mismatch`` at random. The host parses code from threads (``stateguard evaluate --workers N``, a
synthesis with ``teacher_workers``), so every host-side parse goes through one re-entrant lock here; a parse takes
well under a millisecond for the code a turn holds, so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.RLock()


def parse_python(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs: Any) -> Any:
    """``ast.parse(source, filename, mode, **kwargs)`` under the process-wide parse lock."""
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)
