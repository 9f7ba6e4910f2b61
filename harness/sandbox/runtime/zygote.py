"""The zygote (pre-forked parent with numpy/pandas imported) and the per-episode init process.

Zygote: started once per :class:`harness.sandbox.Sandbox` (inside bubblewrap, or as a plain subprocess with
``isolation: none``). On ``spawn`` it forks an *episode init* for a new kernel:

- bwrap mode: fork X; X ``unshare``\\ s new PID, mount, IPC (and network) namespaces; X forks the init, which is
  PID 1 of the new PID namespace, then exits. The init bind-mounts the episode's public dir (read-only) and
  workspace (read-write) from ``/.host``, mounts a fresh ``/tmp`` and ``/proc``, detaches ``/.host`` (so nothing of
  the host outside those two dirs stays reachable), drops every capability and only then accepts ``spawn_kernel``.
- none mode: the init is a plain child marked as child subreaper.

Episode init: runs no user code. It forks kernels (``spawn_kernel``) and the episode's clean verifier
(``spawn_verifier``, :mod:`.verifier`: it computes every probe's verdict), kills stray processes (``sweep``),
reports how a child died (``status``) and exits on ``exit`` or when the host closes its channel — in bwrap mode that
kills every process of the episode, because it is PID 1 of the episode's PID namespace.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import sys
from typing import Any

from . import procs, syscalls
from .protocol import ProtocolError, recv_msg, send_msg

HOST_MAX_MSG = 64 << 20
HOST_ROOT = "/.host"


def _preload(modules: list[str]) -> None:
    for name in modules:
        __import__(name)
    if "pandas" in modules:
        _warm_pandas()


def _warm_pandas() -> None:
    """Run the pandas machinery analysis code uses most once, here, so kernels fork with it warm.

    Much of pandas' first-call cost is not imports but lazily built state (parser and dtype caches, groupby and
    join code paths, datetime parsing, ``re`` caches). A kernel, and every checkpoint forked from it, would otherwise
    pay it again: measured on the synthesized tasks, a cold kernel ran the same cells about 2x slower than a warm
    one. The frame is tiny; this adds ~0.2 s once to the zygote's start."""
    import io

    import numpy as np
    import pandas as pd

    csv = "id,key,amount,when,label\n1,a,1.5,2024-01-03,x \n2,b,,2024-02-10, Y\n3,a,7.25,03/05/2024,x\n4,c,2,bad,z\n"
    frame = pd.read_csv(io.StringIO(csv))
    other = pd.DataFrame({"key": ["a", "b", "c"], "group": ["g1", "g2", "g1"]})
    frame["label"] = frame["label"].astype(str).str.strip().str.title().replace({"Z": "X"})
    frame["amount"] = frame["amount"].fillna(frame["amount"].median()).round(2).abs()
    frame["when"] = pd.to_datetime(frame["when"], errors="coerce", format="mixed")
    frame["band"] = "Q" + (pd.qcut(frame["amount"].rank(method="first"), 2, labels=False) + 1).astype(str)
    merged = frame.merge(other, on="key", how="left")
    merged.groupby("group")["amount"].agg(["sum", "mean", "count", "max"]).round(3)
    merged.groupby(["group", "band"]).amount.sum().unstack()
    merged.pivot_table(index="group", columns="band", values="amount", aggfunc="sum")
    merged.set_index("when").loc[lambda f: f.index.notna()].resample("MS")["amount"].sum()
    merged.dropna().sort_values("amount", ascending=False).head(2)
    merged[merged["label"].isin(["X"]) & merged["label"].str.contains("x", case=False)].nunique()
    merged["amount"].quantile([0.25, 0.5]), merged["amount"].idxmax(), merged["key"].value_counts().unique()
    merged["amount"].clip(0, 5).cumsum().shift(1).pct_change()
    merged.drop_duplicates("key").describe(include="all")
    repr(merged), merged.to_dict("records"), float(np.nanmean(merged["amount"].to_numpy()))


def _close_other_fds(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _setup_mounts(spec: dict[str, Any]) -> None:
    paths = spec["paths"]
    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
    syscalls.bind_mount(HOST_ROOT + spec["public_host"], paths["public"], readonly=True)
    syscalls.bind_mount(HOST_ROOT + spec["workspace_host"], paths["workspace"], readonly=False)
    syscalls.mount(
        "tmpfs",
        paths["tmp"],
        "tmpfs",
        syscalls.MS_NOSUID | syscalls.MS_NODEV,
        f"size={spec['limits']['tmp_mb']}m,mode=1777",
    )
    for path in spec.get("tmp_ro_binds", []):  # e.g. a venv under /tmp, now hidden by the fresh /tmp
        os.makedirs(path, exist_ok=True)
        syscalls.bind_mount(HOST_ROOT + path, path, readonly=True)
    for path in spec.get("tmp_hidden", []):  # this project's installed packages inside such a bind: hidden again
        syscalls.mount("tmpfs", path, "tmpfs", syscalls.MS_RDONLY | syscalls.MS_NOSUID | syscalls.MS_NODEV, "size=4k")
    syscalls.mount("proc", "/proc", "proc", syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC_PROC)
    syscalls.umount_detach(HOST_ROOT)  # (never rmdir it: that would detach the zygote's mount too)
    # The root tmpfs is shared by all episodes: make it read-only here so no episode can leave anything for another.
    syscalls.mount(None, "/", None, syscalls.MS_REMOUNT | syscalls.MS_BIND | syscalls.MS_RDONLY)
    # No nested user namespaces for anything in the sandbox (they would give user code fresh capabilities).
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")
    if os.listdir(HOST_ROOT):
        raise OSError(f"{HOST_ROOT} is still populated after detaching it")


class EpisodeInit:
    def __init__(self, sock: socket.socket, spec: dict[str, Any]) -> None:
        self.sock = sock
        self.spec = spec
        self.statuses: dict[int, int] = {}

    def _on_sigchld(self, signum: int, frame: Any) -> None:
        procs.reap_children(self.statuses)

    def run(self, bwrap: bool) -> None:
        try:
            if bwrap:
                _setup_mounts(self.spec)
                syscalls.drop_all_capabilities()
            else:
                syscalls.set_child_subreaper()
            syscalls.set_no_new_privs()
        except BaseException as exc:  # noqa: BLE001 - fail closed: no kernel is ever forked
            send_msg(self.sock, {"op": "hello", "role": "init", "error": f"episode setup failed: {exc!r}"})
            os._exit(1)
        signal.signal(signal.SIGCHLD, self._on_sigchld)
        send_msg(self.sock, {"op": "hello", "role": "init", "pid": os.getpid()})
        while True:
            try:
                msg, fds, _ = recv_msg(self.sock, max_bytes=HOST_MAX_MSG)
            except ProtocolError:
                os._exit(0)  # host gone: in bwrap mode this tears the whole episode down
            op = msg.get("op")
            if op == "spawn_kernel":
                reply = {"ok": True, "pid": self._spawn_kernel(fds[0])}
            elif op == "spawn_verifier":
                reply = {"ok": True, "pid": self._spawn_kernel(fds[0], verifier=True)}
            elif op == "sweep":
                exiting = {int(pid) for pid in msg.get("exiting", [])}
                for pid in exiting:  # killed now, reaped later: its exit need not finish before the reply
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                killed = procs.kill_strays(os.getpid(), set(msg.get("keep", [])), exiting=exiting)
                reply = {"ok": True, "killed": killed}
            elif op == "status":
                procs.reap_children(self.statuses)
                status = self.statuses.get(int(msg.get("pid", -1)))
                reply = {
                    "ok": True,
                    "status": None if status is None else procs.describe_status(status),
                    "signal": os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None,
                }
            elif op == "exit":
                procs.kill_strays(os.getpid(), set())
                os._exit(0)
            else:
                reply = {"ok": False, "error_message": f"unknown op {op!r}"}
            send_msg(self.sock, reply)

    def _spawn_kernel(self, fd: int, verifier: bool = False) -> int:
        """Fork a kernel (or, ``verifier``, the episode's clean verifier: :mod:`.verifier`) serving ``fd``."""
        from .kernel import kernel_main
        from .verifier import verifier_main

        init_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(self.sock.detach())
                (verifier_main if verifier else kernel_main)(socket.socket(fileno=fd), self.spec, init_pid)
            finally:
                os._exit(0)
        os.close(fd)
        return pid


def _spawn_episode(control: socket.socket, fd: int, spec: dict[str, Any], bwrap: bool) -> None:
    def become_init() -> None:
        try:
            control.detach()
            _close_other_fds({fd})
            os.setsid()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            EpisodeInit(socket.socket(fileno=fd), spec).run(bwrap)
        finally:
            os._exit(1)

    if not bwrap:
        if os.fork() == 0:
            become_init()
        return
    mid = os.fork()
    if mid == 0:
        try:
            flags = syscalls.CLONE_NEWPID | syscalls.CLONE_NEWNS | syscalls.CLONE_NEWIPC
            if spec["limits"].get("private_network", True):
                flags |= syscalls.CLONE_NEWNET
            syscalls.unshare(flags)
            if os.fork() == 0:
                become_init()
        except BaseException as exc:  # noqa: BLE001
            try:
                send_msg(socket.socket(fileno=fd), {"op": "hello", "role": "init", "error": f"unshare: {exc!r}"})
            finally:
                os._exit(1)
        os._exit(0)
    try:
        os.waitpid(mid, 0)
    except ChildProcessError:
        pass  # already reaped by the SIGCHLD handler


def main(argv: list[str]) -> None:
    settings = json.loads(argv[0])
    control = socket.socket(fileno=int(argv[1]))
    bwrap = settings["isolation"] == "bwrap"
    if not bwrap:
        syscalls.set_parent_death_signal(signal.SIGKILL)
    try:
        _preload(settings.get("preload", []))
        from . import export, verifier  # noqa: F401 - (verifier imports kernel) loaded before the snapshot

        export.take_snapshots()  # before any worker code: what the kernels' exports check against
    except Exception as exc:  # noqa: BLE001
        send_msg(control, {"op": "hello", "role": "zygote", "error": f"preload failed: {exc!r}"})
        return
    gc.collect()
    gc.freeze()  # keep the preloaded heap out of GC passes: fewer copy-on-write page faults in kernels
    send_msg(
        control,
        {
            "op": "hello",
            "role": "zygote",
            "pid": os.getpid(),
            "landlock": syscalls.landlock_abi(),
            "python": sys.version.split()[0],
        },
    )
    signal.signal(signal.SIGCHLD, lambda *_: procs.reap_children())
    while True:
        try:
            msg, fds, _ = recv_msg(control, max_bytes=HOST_MAX_MSG)
        except ProtocolError:
            return
        if msg.get("op") == "spawn" and len(fds) == 1:
            try:
                _spawn_episode(control, fds[0], msg["spec"], bwrap)
                reply: dict[str, Any] = {"ok": True}
            except Exception as exc:  # noqa: BLE001
                reply = {"ok": False, "error_message": repr(exc)}
            finally:
                os.close(fds[0])
            send_msg(control, reply)
        elif msg.get("op") == "exit":
            return
        else:
            for fd in fds:
                os.close(fd)
            send_msg(control, {"ok": False, "error_message": f"bad request {msg.get('op')!r}"})


if __name__ == "__main__":
    main(sys.argv[1:])
