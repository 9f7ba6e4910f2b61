"""Host side of the channels to the sandbox's processes: the zygote, each episode's init, kernels and checkpoints.

A channel is one end of a unix socketpair; frames are length-prefixed JSON (:mod:`.runtime.protocol`), and the host
learns each peer's real pid from SCM_CREDENTIALS. A process asked to fork a new one (``spawn_via``) gets the remote end
of a fresh socketpair with SCM_RIGHTS, and the new process greets on it with its role and pid (``read_hello``). Every
reply is untrusted: sizes are capped, deadlines enforced, and a malformed reply raises ``ProtocolError``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .runtime.protocol import ProtocolError, recv_msg, send_msg

if TYPE_CHECKING:
    from collections.abc import Callable

    from .cgroups import CgroupHandle

CONTROL_TIMEOUT_S = 15.0
"""Deadline of a control exchange (a greeting, a fork, a sweep)."""


class SandboxError(RuntimeError):
    """A harness-level failure (not a user-code error): bad usage, or the sandbox machinery itself failed."""


class KernelFatal(ProtocolError):
    """The kernel answered but cannot go on (a thread user code left running could not be stopped): it exits after
    this reply and must be restarted. ``reply``: the reply it sent (the cell's output)."""

    def __init__(self, reason: str, reply: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.reply = reply


def check_fatal(reply: dict[str, Any]) -> None:
    """Raise :class:`KernelFatal` when ``reply`` says its sender is exiting."""
    fatal = reply.get("fatal")
    if fatal is not None:
        raise KernelFatal(str(fatal)[:4000], reply)


@dataclass
class Channel:
    """The host's end of one process's socketpair."""

    sock: socket.socket
    pid: int  # as seen inside the episode
    host_pid: int | None  # as seen by the host (from SCM_CREDENTIALS)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class EpisodeProcesses:
    """One episode's processes as the host holds them: the init's channel, the cgroup, pidfds of every process."""

    init: Channel
    cgroup: CgroupHandle | None
    oom_seen: int = 0
    pidfds: dict[int, int] = field(default_factory=dict)  # host pid -> pidfd (immune to pid reuse)

    def watch(self, host_pid: int | None) -> None:
        if host_pid and host_pid not in self.pidfds:
            with contextlib.suppress(OSError):
                self.pidfds[host_pid] = os.pidfd_open(host_pid)

    def prune(self) -> None:
        """Forget processes that have exited (a pidfd becomes readable when its process exits)."""
        for pid, fd in list(self.pidfds.items()):
            if select.select([fd], [], [], 0)[0]:
                os.close(fd)
                del self.pidfds[pid]

    def kill_all(self) -> None:
        for fd in self.pidfds.values():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        self.pidfds.clear()

    def sweep(self, keep: list[int], exiting: list[int]) -> None:
        """Have the init kill every process of the episode except itself and ``keep``; ``exiting``: processes to
        SIGKILL without waiting for them to finish exiting (a replaced kernel unmapping its heap)."""
        msg = {"op": "sweep", "keep": keep, "exiting": exiting}
        request(self.init, msg, timeout=CONTROL_TIMEOUT_S, max_bytes=1 << 16)
        self.prune()

    def exit_status(self, pid: int) -> str | None:
        """How process ``pid`` ended, as the init saw it (a short text), or None when the init does not answer or has
        not seen it end within ~0.1 s."""
        for _ in range(20):
            try:
                reply = request(self.init, {"op": "status", "pid": pid}, timeout=2.0, max_bytes=1 << 16)
            except ProtocolError:
                return None
            if isinstance(reply.get("status"), str):
                return reply["status"][:200]
            time.sleep(0.005)
        return None

    def oom_happened(self) -> bool:
        """Whether the episode's cgroup counted an out-of-memory kill since the last call."""
        if self.cgroup is None:
            return False
        count = self.cgroup.oom_kills()
        seen, self.oom_seen = self.oom_seen, count
        return count > seen

    def shutdown(self) -> None:
        """Ask the init to exit, kill every process of the episode and remove its cgroup."""
        with contextlib.suppress(OSError, ProtocolError):
            send_msg(self.init.sock, {"op": "exit"})
        self.init.close()
        self.kill_all()  # in bwrap mode the init's death alone kills the whole PID namespace
        if self.cgroup is not None:
            self.cgroup.remove()


def new_channel() -> tuple[socket.socket, socket.socket]:
    """A socketpair ``(host end, remote end)``; the host end receives the peer's credentials."""
    host, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    return host, remote


def request(
    chan: Channel | socket.socket, msg: dict[str, Any], *, timeout: float, max_bytes: int, fds: tuple[int, ...] = ()
) -> dict[str, Any]:
    """Send ``msg`` and return the peer's reply (at most ``max_bytes``, within ``timeout`` seconds).

    Raises ``ProtocolError`` (``DeadlineExceeded`` on timeout; :class:`KernelFatal` when the peer is exiting)."""
    sock = chan.sock if isinstance(chan, Channel) else chan
    try:
        send_msg(sock, msg, fds)
    except OSError as exc:
        raise ProtocolError(f"cannot send to the peer: {exc}") from exc
    reply, extra, _ = recv_msg(sock, max_bytes=max_bytes, deadline=time.monotonic() + timeout)
    for fd in extra:
        os.close(fd)
    check_fatal(reply)
    return reply


def read_hello(sock: socket.socket, role: str, timeout: float) -> Channel:
    """Read a new process's greeting (its ``role`` and pid) and return its channel."""
    msg, extra, host_pid = recv_msg(sock, max_bytes=1 << 16, deadline=time.monotonic() + timeout, want_creds=True)
    for fd in extra:
        os.close(fd)
    if msg.get("error"):
        raise SandboxError(f"{role} failed to start: {str(msg['error'])[:2000]}")
    pid = msg.get("pid")
    if msg.get("role") != role or not isinstance(pid, int) or isinstance(pid, bool):
        raise ProtocolError(f"expected a hello from the {role}, got {str(msg)[:200]}")
    return Channel(sock, pid, host_pid)


def spawn_via(
    chan: Channel, op: str, role: str, *, on_reply: Callable[[dict[str, Any], int | None], None] | None = None
) -> Channel:
    """Ask ``chan``'s process to fork a new process (``op``) and return the new process's channel.

    The new process gets the remote end of a fresh socketpair (passed with SCM_RIGHTS) and greets with its
    ``role`` and pid. ``on_reply(reply, sender_pid)`` sees the accepted reply before the greeting is read (it may
    raise ``ProtocolError``). Raises ``ProtocolError`` or ``SandboxError``; the half-made channel is closed on failure.
    """
    host, remote = new_channel()
    try:
        try:
            send_msg(chan.sock, {"op": op}, (remote.fileno(),))
        except OSError as exc:
            raise ProtocolError(f"cannot send to the peer: {exc}") from exc
        finally:
            remote.close()
        deadline = time.monotonic() + CONTROL_TIMEOUT_S
        reply, extra, sender_pid = recv_msg(chan.sock, max_bytes=1 << 16, deadline=deadline, want_creds=True)
        for fd in extra:
            os.close(fd)
        check_fatal(reply)
        if not reply.get("ok"):
            raise ProtocolError(f"{op} refused: {str(reply)[:300]}")
        if on_reply is not None:
            on_reply(reply, sender_pid)
        return read_hello(host, role, CONTROL_TIMEOUT_S)
    except (ProtocolError, SandboxError):
        host.close()
        raise


def restore_from(chan: Channel, watch: Callable[[Channel], None]) -> Channel:
    """Ask checkpoint process ``chan`` for a live kernel. It forks once: the child parks as the snapshot on ``chan``
    (whose pids are updated here from its reply, then handed to ``watch``), the checkpoint process becomes the kernel
    and greets on a new channel, which is returned."""

    def snapshot_moved(reply: dict[str, Any], host_pid: int | None) -> None:
        pid = reply.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise ProtocolError(f"restore refused: {str(reply)[:300]}")
        chan.pid, chan.host_pid = pid, host_pid
        watch(chan)

    return spawn_via(chan, "restore", "kernel", on_reply=snapshot_moved)
