"""The host side of a kernel's probes: the kernel exports the variables a probe reads, the clean verifier runs it.

:meth:`harness.sandbox.client.Kernel.probe` hands the probe's code to :meth:`ProbeHost.verify`: the code is parsed
(``ast``) for the names it reads and the columns it reads of them (:mod:`.probes`); the kernel exports those
variables (``runtime/export.py``: data and file descriptors, never code); the episode's verifier
(``runtime/verifier.py``, forked from the episode init) runs the probe over them and returns the verdict. Exports
are cached until the kernel runs anything (its namespace *generation* changes). Everything the kernel sends is
untrusted: a malformed export reply raises ``ProtocolError`` (the kernel is then restarted by the caller), a failing
verifier makes a failed probe (``ProbeFailed``) and is replaced by a fresh one at the next probe.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.pyast import parse_python

from .channels import Channel, SandboxError, request
from .probes import MAX_EXPORTED, names_read, projections
from .runtime.protocol import DeadlineExceeded, ProtocolError, recv_msg, send_msg

if TYPE_CHECKING:
    from .config import SandboxConfig

Export = tuple[dict[str, Any], int | None] | str | None
"""One exported name: (entry, file descriptor or None) | the reason it is unavailable | None (not defined)."""


class ProbeHost:
    """The export cache and the verifier of one kernel. ``kernel`` returns the live kernel process's channel (starting
    one when none runs), ``generation`` the kernel's namespace generation, ``spawn_verifier`` forks a fresh verifier,
    ``sweep(exiting=pids)`` kills those processes of the episode."""

    def __init__(
        self,
        config: SandboxConfig,
        max_reply: int,
        kernel: Callable[[], Channel],
        generation: Callable[[], int],
        spawn_verifier: Callable[[], Channel],
        sweep: Callable[..., None],
    ) -> None:
        self.config = config
        self._max_reply = max_reply
        self._kernel = kernel
        self._generation = generation
        self._spawn_verifier = spawn_verifier
        self._sweep = sweep
        self.verifier: Channel | None = None  # the episode's clean verifier, started lazily
        # variables exported at one generation: name -> (what the kernel exported, the column labels a projected frame
        # holds or None: the whole value)
        self.exports: dict[str, tuple[Export, frozenset[str] | None]] = {}
        self.exports_generation = -1

    def verify(self, code: str, timeout: float) -> dict[str, Any]:
        """The raw reply of a probe: its variables exported by the kernel (cached until the kernel runs anything),
        its code run by the verifier over them."""
        try:
            tree = parse_python(code, "<probe>", "exec")
            names, hard = names_read(tree)
            columns = projections(tree, names[:MAX_EXPORTED])
        except (SyntaxError, ValueError, RecursionError):
            names, hard, columns = [], [], {}  # the verifier reports the error as the kernel would
        unavailable = {n: f"the probe reads more than {MAX_EXPORTED} variables" for n in names[MAX_EXPORTED:]}
        variables, fds, notes = {}, [], []
        for name, item in self.exported(names[:MAX_EXPORTED], columns).items():
            if isinstance(item, str):
                unavailable[name] = item
            elif item is not None:
                entry, fd = item
                if isinstance(entry.get("converted"), str):
                    notes.append(f"[sandbox] {name}: {entry['converted']}\n")
                if fd is not None:
                    entry = {**entry, "fd": len(fds)}
                    fds.append(fd)
                variables[name] = entry
        msg = {"op": "check", "code": code, "timeout": timeout, "variables": variables}
        msg.update(unavailable=unavailable, hard=hard)
        try:
            raw = request(
                self._verifier_channel(),
                msg,
                fds=tuple(fds),
                timeout=timeout + 2 * self.config.grace_s,
                max_bytes=self._max_reply,
            )
            if raw.get("error_type") == "KernelInternalError":
                raise ProtocolError(str(raw.get("error_message"))[:500])
        except (ProtocolError, SandboxError, OSError) as exc:
            self._drop_verifier()
            timed_out = isinstance(exc, DeadlineExceeded)
            raw = {"ok": False, "error_type": "ProbeFailed", "error_message": f"the verifier failed: {exc}"}
            raw.update(timed_out=timed_out, stdout="", stderr="", results=[], duration_s=0.0)
        raw.update(changes=[], unavailable=unavailable)
        if notes and isinstance(raw.get("stderr"), str):
            raw["stderr"] = "".join(notes) + raw["stderr"]
        return raw

    def exported(self, names: list[str], columns: dict[str, list[str]] | None = None) -> dict[str, Export]:
        """``names`` as the kernel exports them now (``runtime/export.py``); ``columns``: name -> the column labels
        the probe reads of it (:func:`.probes.projections`; a name absent from it is wanted whole). Asks the kernel
        only for names not exported since it last ran anything, or exported projected to columns that do not cover
        the ones wanted now (then to both sets). Raises ``ProtocolError`` when the kernel fails."""
        columns = columns or {}
        if self.exports_generation != self._generation():
            self.clear_exports()
            self.exports_generation = self._generation()
        asked: dict[str, list[str]] = {}
        wanted = []
        for name in names:
            want = None if name not in columns else frozenset(columns[name])
            cached = self.exports.get(name, ("absent", frozenset()))[1]
            if name in self.exports and (cached is None or (want is not None and want <= cached)):
                continue
            wanted.append(name)
            if want is not None:
                asked[name] = sorted(want | (cached or frozenset()))
        if wanted:
            sock = self._kernel().sock
            send_msg(sock, {"op": "export", "names": wanted, "columns": asked})
            deadline = time.monotonic() + self.config.cell_timeout_s + self.config.grace_s
            reply, fds, _ = recv_msg(sock, max_bytes=self._max_reply, deadline=deadline)
            try:
                self._take(wanted, reply, fds, asked)
            finally:
                kept = {v[0][1] for v in self.exports.values() if isinstance(v[0], tuple)}
                for fd in fds:
                    if fd not in kept:
                        os.close(fd)
        return {n: self.exports[n][0] if n in self.exports else None for n in names}

    def _take(self, wanted: list[str], reply: dict[str, Any], fds: list[int], asked: dict[str, list[str]]) -> None:
        """Validate an export reply (untrusted: the kernel runs worker code) into the cache, replacing (and closing)
        an entry exported before with other columns. An entry the kernel says is ``projected`` holds the columns
        ``asked`` for it (a projected entry that holds others is refused); any other entry is the whole value."""
        variables, unavailable, missing = reply.get("variables"), reply.get("unavailable"), reply.get("missing")
        if not (isinstance(variables, dict) and isinstance(unavailable, dict) and isinstance(missing, list)):
            raise ProtocolError(f"bad export reply {str(reply)[:300]}")
        converted = reply.get("converted") if isinstance(reply.get("converted"), dict) else {}
        for name in wanted:
            entry = variables.get(name)
            item: Export
            holds: frozenset[str] | None = None
            if isinstance(entry, dict):
                index = entry.get("fd")
                if index is not None and not (isinstance(index, int) and 0 <= index < len(fds)):
                    raise ProtocolError(f"export of {name!r} names no file descriptor")
                if entry.get("projected") is not None:
                    if entry.get("projected") is not True or name not in asked:
                        raise ProtocolError(f"export of {name!r} is projected though no projection was asked")
                    holds = frozenset(asked[name])
                note = converted.get(name)
                if isinstance(note, str):
                    entry = {**entry, "converted": note[:500]}
                item = (entry, None if index is None else fds[index])
            elif isinstance(unavailable.get(name), str):
                item = str(unavailable[name])[:1000]
            else:
                item = None
            self._close_export(name)
            self.exports[name] = (item, holds)

    def clear_exports(self) -> None:
        for name in list(self.exports):
            self._close_export(name)
        self.exports = {}

    def _close_export(self, name: str) -> None:
        item = self.exports.pop(name, (None, None))[0]
        if isinstance(item, tuple) and item[1] is not None:
            with contextlib.suppress(OSError):
                os.close(item[1])

    def _verifier_channel(self) -> Channel:
        if self.verifier is None:
            self.verifier = self._spawn_verifier()
        return self.verifier

    def _drop_verifier(self) -> None:
        """Kill the verifier (a late or garbled reply); the next probe starts a fresh one."""
        chan, self.verifier = self.verifier, None
        if chan is None:
            return
        chan.close()
        with contextlib.suppress(ProtocolError, SandboxError, OSError):
            self._sweep(exiting=[chan.pid])

    def close(self) -> None:
        """Close every exported descriptor and the verifier's channel (the episode is being torn down)."""
        self.clear_exports()
        if self.verifier is not None:
            self.verifier.close()
            self.verifier = None
