"""Process-tree helpers shared by the episode init and the kernel: find and kill stray processes, reap children."""

from __future__ import annotations

import os
import signal


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] in (b"Z", b"X")
    except (OSError, ValueError):
        return True


def descendants(root: int) -> set[int]:
    """All live (non-zombie) descendants of ``root`` (via /proc/<pid>/task/<tid>/children)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        for child in _children(stack.pop()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return {p for p in seen if not _is_zombie(p)}


def reap_children(statuses: dict[int, int] | None = None) -> None:
    """Reap every exited child without blocking; record ``pid -> wait status`` when a dict is given."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if statuses is not None:
            if len(statuses) > 4096:
                statuses.pop(next(iter(statuses)))
            statuses[pid] = status


_ANCESTORS: dict[int, set[int]] = {}
FAST_PATH_UNKNOWN = 16
"""At most this many unexplained pids in /proc are checked one by one before falling back to the tree walk."""


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _ancestors(pid: int) -> set[int]:
    """``pid``'s ancestors as visible in /proc (cached: the root of a process tree keeps its parents)."""
    if pid not in _ANCESTORS:
        seen: set[int] = set()
        parent = _parent(pid)
        while parent and parent not in seen:
            seen.add(parent)
            parent = _parent(parent)
        _ANCESTORS[pid] = seen
    return _ANCESTORS[pid]


def _nothing_to_kill(root: int, keep: set[int], exiting: set[int]) -> bool:
    """True when every live process in /proc is known: ``keep``, ``root``, its ancestors or this process.

    In the sandbox's own PID namespace /proc lists only the episode's processes, so one ``listdir`` replaces walking
    the tree of every held checkpoint (which costs milliseconds per cell with dozens of checkpoints). Outside one (or
    with anything unexplained) the caller walks the tree as before."""
    try:
        visible = {int(name) for name in os.listdir("/proc") if name.isdigit()}
    except OSError:
        return False
    unknown = visible - keep - exiting - {root, os.getpid()} - _ancestors(root)
    if len(unknown) > FAST_PATH_UNKNOWN:
        return False
    return all(_is_zombie(pid) for pid in unknown)


def kill_strays(root: int, keep: set[int], *, rounds: int = 200, exiting: set[int] = frozenset()) -> int:
    """SIGKILL every descendant of ``root`` not in ``keep`` (repeat until none are left: a fork bomb races us).

    Descendants of a kept process are strays too unless kept themselves. ``exiting``: processes already sent SIGKILL
    (not waited for); they do not count as unexplained. Returns the number of kill calls made.
    """
    if _nothing_to_kill(root, keep, set(exiting)):
        reap_children()
        return 0
    killed = 0
    for _ in range(rounds):
        strays = descendants(root) - keep - {root, os.getpid()}
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        reap_children()
    reap_children()
    return killed


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by signal {sig} ({name})"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"
