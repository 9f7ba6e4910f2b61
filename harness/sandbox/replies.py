"""How the host turns what a kernel did into an :class:`ExecutionResult`: the kernel's reply, validated field by
field as untrusted input (anything unexpected raises ``ProtocolError``, which the :class:`~.client.Kernel` handles as
a crash), and the workspace changes, which the host sees for itself by comparing listings (never following a link).
"""

from __future__ import annotations

import os
from typing import Any

from .result import ExecutionResult, FileChange, VariableChange
from .runtime.protocol import ProtocolError

CHANGE_KINDS = ("created", "changed", "deleted")


def parse_reply(raw: dict[str, Any], probe: bool) -> ExecutionResult:
    """The result a kernel's execute/probe reply describes, without its variable changes (the host versions those:
    :func:`check_change`). Raises ``ProtocolError`` on a malformed reply or a kernel-internal error."""

    def text(key: str, optional: bool = False) -> str | None:
        value = raw.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise ProtocolError(f"reply field {key!r} should be a string")
        return value

    def flag(key: str) -> bool:
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise ProtocolError(f"reply field {key!r} should be a boolean")
        return value

    if raw.get("error_type") == "KernelInternalError":
        raise ProtocolError(f"kernel internal error: {str(raw.get('error_message'))[:500]}")
    changes = raw.get("changes")
    results = raw.get("results")
    duration = raw.get("duration_s")
    if not isinstance(changes, list) or not isinstance(results, list):
        raise ProtocolError("reply fields 'changes'/'results' should be lists")
    if not isinstance(duration, (int, float)) or isinstance(duration, bool):
        raise ProtocolError("reply field 'duration_s' should be a number")
    unavailable = raw.get("unavailable", {})
    if not isinstance(unavailable, dict) or not all(isinstance(v, str) for v in unavailable.values()):
        raise ProtocolError("reply field 'unavailable' should map names to reasons")
    return ExecutionResult(
        ok=flag("ok"),
        stdout=text("stdout") or "",
        stderr=text("stderr") or "",
        display=text("display", True),
        error_type=text("error_type", True),
        error_message=text("error_message", True),
        traceback=text("traceback", True),
        timed_out=flag("timed_out"),
        memory_exceeded=flag("memory_exceeded"),
        cpu_exceeded=flag("cpu_exceeded"),
        output_truncated=flag("output_truncated"),
        duration_s=float(duration),
        results=results,
        probe=probe,
        unavailable={str(k): v for k, v in unavailable.items()},
    )


def check_change(change: Any) -> tuple[str, str, str | None, list[int] | None, str]:
    """``(name, kind, type, shape, summary)`` of one variable change of a reply; ``ProtocolError`` if malformed."""
    if not isinstance(change, dict):
        raise ProtocolError("a variable change should be an object")
    name, kind, type_, shape, summary = (change.get(k) for k in ("name", "kind", "type", "shape", "summary"))
    if not isinstance(name, str) or not name or len(name) > 1000 or kind not in CHANGE_KINDS:
        raise ProtocolError(f"bad variable change {str(change)[:200]}")
    if not isinstance(summary, str) or (type_ is not None and not isinstance(type_, str)):
        raise ProtocolError(f"bad variable change {str(change)[:200]}")
    if shape is not None and not (isinstance(shape, list) and all(isinstance(s, int) for s in shape)):
        raise ProtocolError(f"bad shape in variable change {str(change)[:200]}")
    return name, kind, type_, shape, summary


def restarted_result(
    error_type: str, reason: str, deleted: list[VariableChange], op: str, **flags: bool
) -> ExecutionResult:
    """The result of a cell whose kernel had to be restarted (``deleted``: the names the restart lost)."""
    return ExecutionResult(
        ok=False,
        error_type=error_type,
        error_message=reason,
        restarted=True,
        restart_reason=reason,
        variables=deleted,
        probe=op == "probe",
        **flags,
    )


def scan_workspace(root: str, limit: int) -> dict[str, tuple[int, ...]]:
    """``relative path -> (mode, size, mtime_ns, inode)`` of at most ``limit`` entries under ``root``; links are
    listed, never followed."""
    out: dict[str, tuple[int, ...]] = {}
    stack = [root]
    while stack and len(out) < limit:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)  # never follow links made by user code
            except OSError:
                continue
            rel = os.path.relpath(entry.path, root)
            out[rel] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            if len(out) >= limit:
                break
    return out


def workspace_changes(old: dict[str, tuple[int, ...]], new: dict[str, tuple[int, ...]]) -> list[FileChange]:
    """The files created, deleted and changed from listing ``old`` to ``new`` (a directory whose entries changed does
    not count as changed itself), sorted by path."""
    changes = [FileChange(p, "created") for p in new.keys() - old.keys()]
    changes += [FileChange(p, "deleted") for p in old.keys() - new.keys()]
    changes += [
        FileChange(p, "changed")
        for p in new.keys() & old.keys()
        if new[p] != old[p] and not (new[p][0] & 0o040000 and new[p][0] == old[p][0])
    ]
    return sorted(changes, key=lambda c: c.path)
