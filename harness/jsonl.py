"""JSON-lines files: reading with errors that name the file and line (faults, episode records, imported benchmarks),
durable appends, and resuming after a run killed mid-append (a torn last line is dropped with a warning); and the
JSON text rules every record writer and every parser of untrusted JSON (model replies, worker answers) share.

**Lone surrogates.** A model can write the JSON escape ``\\udc00`` inside a string; decoded, that is a lone
surrogate, which no UTF-8 file can hold. Records never hold one: :func:`dumps` (and :func:`append_jsonl`,
:func:`escape_surrogates` for JSON text made elsewhere) write each as its escape *text* ``\\udc00`` (six characters,
what ``errors="backslashreplace"`` writes, and what the sandbox's wire protocol does), and :func:`iter_jsonl` turns a
lone surrogate decoded from a file written elsewhere into the same text. Reading back what was written gives the
value written, with each lone surrogate replaced by its escape text (a second write and read changes nothing).

**Untrusted JSON.** :func:`loads_untrusted` parses text a model or worker wrote: nesting deeper than
:data:`MAX_JSON_DEPTH` is refused by a pre-scan before the decoder runs (``json`` recurses once per level, so
100,000 ``[`` would raise ``RecursionError``), and every failure (bad JSON, too deep, an integer of more than 4300
digits) is one ``ValueError``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects :func:`loads_untrusted` reads (a manager call or an answer needs < 10)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape that may decode to a lone surrogate
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]')
"""A JSON string (maybe unterminated) or a bracket; possessive, so a long string needs no backtracking memory."""


def escape_surrogates(json_text: str) -> str:
    """JSON text with every lone surrogate (only ever inside a string literal) written as the JSON of its escape
    text (``"\\\\udc00"``), so the text encodes as UTF-8 and reads back as ``\\udc00``."""
    if not _LONE_SURROGATE.search(json_text):
        return json_text
    return _LONE_SURROGATE.sub(lambda match: f"\\\\u{ord(match.group()):04x}", json_text)


def without_surrogates(value: Any) -> Any:
    """Decoded JSON with every lone surrogate in its strings and keys replaced by its escape text ``\\udc00``."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8") if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(key): without_surrogates(item) for key, item in value.items()}
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kwargs)`` with lone surrogates written as escape text (module
    docstring): the text always encodes as UTF-8."""
    return escape_surrogates(json.dumps(value, ensure_ascii=False, **kwargs))


def loads(text: str | bytes) -> Any:
    """``json.loads`` with every lone surrogate decoded from a ``\\udc00`` escape turned into its escape text."""
    value = json.loads(text)
    found = _SURROGATE_ESCAPE.search(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    return without_surrogates(value) if found else value


def json_depth_error(text: str, start: int = 0, max_depth: int = MAX_JSON_DEPTH) -> int | None:
    """The offset in ``text`` where the JSON value starting at ``start`` nests deeper than ``max_depth`` arrays and
    objects, or None when it does not. Brackets inside strings do not count; the scan stops where the first value
    closes. Linear in the length of that value."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text, start):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        elif token in "]}":
            depth -= 1
            if depth <= 0:
                return None
    return None


def too_deep(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether decoded JSON (lists and dicts) nests deeper than ``max_depth`` (an iterative walk: never recurses)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def loads_untrusted(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """:func:`loads` of text a model or worker wrote: nesting deeper than ``max_depth`` is refused before decoding;
    every failure is a ``ValueError`` (``json.JSONDecodeError`` for bad JSON) whose message says why."""
    position = json_depth_error(text, 0, max_depth)
    if position is not None:
        raise ValueError(f"JSON nested deeper than {max_depth} levels (at character {position})")
    try:
        return loads(text)
    except RecursionError:  # a guard behind the pre-scan: never escapes as RecursionError
        raise ValueError(f"JSON nested deeper than this interpreter can decode (limit {max_depth})") from None


def iter_jsonl(path: str | Path, *, error: type[ValueError] = ValueError) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, value)`` for each non-blank line, ``where`` being ``"path:line"``; a lone surrogate decoded from
    a ``\\udc00`` escape becomes its escape text (module docstring).

    A line that is not JSON raises ``error`` with ``where``, the decoder's message and the fix.
    """
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                value = loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise error(f"{where}: not JSON ({exc.msg} at column {exc.colno}); fix or remove that line.") from None
            except (ValueError, RecursionError) as exc:  # an integer over 4300 digits; nesting beyond the stack
                raise error(f"{where}: not readable JSON ({type(exc).__name__}); fix or remove that line.") from None
            yield where, value


def append_jsonl(path: str | Path, value: Any) -> None:
    """Append ``value`` (a JSON-able value, or its JSON text) as one JSON line (lone surrogates as escape text, see
    the module docstring), durably: one ``write`` of the whole line to a file opened ``O_APPEND``,
    then ``fsync``. A process killed mid-write leaves at most a torn *last* line, which :func:`drop_torn_tail`
    removes on resume. The folder and file are created when missing."""
    line = (escape_surrogates(value) if isinstance(value, str) else dumps(value)).rstrip("\n") + "\n"
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
