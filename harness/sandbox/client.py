"""Host-side handle of one sandboxed kernel (one episode): execute, probe, checkpoint/restore, variables, files.

Everything the kernel sends is parsed as untrusted input: a malformed, oversized or late reply is handled exactly
like a crash — the kernel is killed, a fresh one is forked from the episode init (or, if that is gone too, from the
zygote) and the result says ``restarted=True`` with the reason. Variable versions are assigned here, on the host,
from a per-name high-water mark, so they stay strictly increasing across restores and restarts (:meth:`Kernel.reset`
starts a new episode on the same kernel: versions start again at 1).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .channels import (
    CONTROL_TIMEOUT_S,
    Channel,
    EpisodeProcesses,
    KernelFatal,
    SandboxError,
    new_channel,
    read_hello,
    request,
    restore_from,
    spawn_via,
)
from .probe_host import ProbeHost
from .replies import check_change, parse_reply, restarted_result, scan_workspace, workspace_changes
from .result import ExecutionResult, FileChange, VariableChange, VariableInfo
from .runtime.protocol import DeadlineExceeded, ProtocolError, send_msg

if TYPE_CHECKING:
    import socket

    from .cgroups import CgroupManager
    from .config import SandboxConfig

__all__ = ["Kernel", "ReplyTap", "SandboxError"]

logger = logging.getLogger(__name__)


class ReplyTap(Protocol):
    """Sees every execute/probe reply of a :class:`Kernel` (``Kernel.tap``) and may answer one from a record instead
    of the kernel process. Synthesis uses it to let a run that reached a recorded run's exact state (equal
    :meth:`Kernel.digest`) take that run's replies rather than recompute them (:mod:`synthesis.replay`).

    The host's bookkeeping (variable versions, the workspace scan, probe counts) is applied to a served reply exactly
    as to a real one; the kernel process meanwhile falls behind, and the tap owes it the served operations."""

    def reply(self, op: str, code: str) -> dict[str, Any] | None:
        """A raw reply to serve for this operation, or None to run it in the kernel process."""

    def seen(self, op: str, code: str, timeout: float, raw: dict[str, Any] | None, result: ExecutionResult) -> None:
        """The kernel process answered (``raw`` None: it was restarted instead)."""

    def sync(self) -> None:
        """Bring the kernel process up to the state the served replies describe (before anything snapshots it)."""

    def discard(self) -> None:
        """The kernel process's state is being replaced (restore, reset): nothing is owed any more."""


class KernelHost(Protocol):
    """What a :class:`Kernel` uses of the sandbox that made it (:class:`harness.sandbox.sandbox.Sandbox` is the one
    implementation): its config, its cgroups, starting an episode process, and forgetting a closed kernel."""

    config: SandboxConfig
    _cgroups: CgroupManager

    def _spawn_episode(self, spec: dict[str, Any], remote: socket.socket) -> None: ...

    def _forget(self, kernel: Kernel) -> None: ...


@dataclass(eq=False)
class _Checkpoint:
    """A checkpoint process. Several checkpoint ids may share one (see :meth:`Kernel.checkpoint`).

    ``channel`` None: *deferred* — the live kernel process still is this checkpoint's state (it has run nothing since
    the checkpoint was taken), so no process has been forked yet; :meth:`Kernel._materialize` forks it before the
    kernel process runs anything.

    ``restorable`` False: an id only (see ``Kernel.checkpoint(restorable=False)``): never forked, never restored."""

    channel: Channel | None
    variables: dict[str, VariableInfo]
    restorable: bool = True

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


class Kernel:
    """A persistent, isolated Python namespace. Not thread-safe: use one kernel from one thread at a time."""

    def __init__(
        self,
        sandbox: KernelHost,
        kernel_id: str,
        public_dir: Path,
        workspace: Path,
        owns_workspace: bool,
        spec: dict[str, Any],
    ) -> None:
        self.sandbox = sandbox
        self.config = sandbox.config
        self.kernel_id = kernel_id
        self.public_dir = public_dir
        self.workspace = workspace
        self._owns_workspace = owns_workspace
        self._spec = spec
        self._max_reply = 4 * self.config.max_output_bytes + (8 << 20)
        self._episode: EpisodeProcesses | None = None
        self._k: Channel | None = None
        self._checkpoints: dict[str, _Checkpoint] = {}
        self._cp_counter = itertools.count(1)
        # The namespace's generation: +1 on every cell, probe, digest, restore and restart (whatever runs in the
        # kernel process). ``_same_as`` is the checkpoint process whose state equals the kernel's at that generation,
        # so a checkpoint taken again before anything ran shares it instead of forking another process.
        self._generation = 0
        self._same_as: tuple[int, _Checkpoint] | None = None
        self._deferred: _Checkpoint | None = None  # a checkpoint not forked yet (see checkpoint())
        self._vars: dict[str, VariableInfo] = {}
        self._hwm: dict[str, int] = {}
        self._files: dict[str, tuple[int, ...]] = {}
        self.restarts = 0
        self._probes = ProbeHost(
            self.config, self._max_reply, self._kernel, lambda: self._generation, self._spawn_verifier, self._sweep
        )
        self.tap: ReplyTap | None = None
        self.closed = False
        self._start_episode()
        self._files = self._scan_files()

    # ---- public API -------------------------------------------------------------------------------------------------
    @property
    def data_dir(self) -> str:
        """``DATA_DIR``/``BASE_PATH`` as seen by code in the kernel."""
        return self._spec["paths"]["public"]

    @property
    def work_dir(self) -> str:
        """``WORK_DIR`` (the cwd) as seen by code in the kernel."""
        return self._spec["paths"]["workspace"]

    def execute(self, code: str, timeout: float | None = None) -> ExecutionResult:
        """Run a cell; the namespace persists. Never raises for errors in ``code``."""
        return self._run("execute", code, timeout)

    def probe(self, code: str, timeout: float | None = None) -> ExecutionResult:
        """Compute ``code``'s result in the episode's clean verifier over the variables it names, exported from the
        kernel as data (``result.unavailable``: the named variables that are not data, and why). Nothing of the
        worker's code runs in the verifier, and the probe cannot change the kernel or write files. See the package
        docstring for the limits."""
        return self._run("probe", code, timeout)

    def _probe_in_fork(self, code: str, timeout: float | None = None) -> ExecutionResult:
        """The reference the benchmark measures :meth:`probe` against: ``code`` in a fork of the worker's own kernel
        (worker code decides what it reports). Never use it for a verdict."""
        self._before_kernel_runs()
        timeout = float(timeout or self.config.cell_timeout_s)
        msg = {"op": "probe_in_fork", "code": code, "timeout": timeout, "keep": self._keep_pids()}
        raw = request(self._kernel(), msg, timeout=timeout + 2 * self.config.grace_s, max_bytes=self._max_reply)
        return self._parse({**raw, "changes": []}, probe=True)

    def checkpoint(self, restorable: bool = True) -> str:
        """Snapshot the kernel (fork, copy-on-write); returns an id for :meth:`restore`/:meth:`release`.
        The workspace files are *not* part of the snapshot.

        ``restorable=False`` takes an id without a snapshot: it counts against ``max_checkpoints`` and is released
        like any other, but nothing is forked and :meth:`restore` refuses it. For callers that must record
        checkpoints but know they will never roll back (synthesis with its gold policy): a fork costs ~10 ms here,
        and every page the kernel writes after it costs a copy-on-write fault.

        When the kernel process has run nothing (no cell, probe or digest) since the last checkpoint was taken or
        restored, the new id shares that checkpoint's process (no fork): the states are identical. Ids stay distinct,
        and each is released on its own (the process goes when its last id is released).

        The fork is *deferred*: it happens just before the kernel process next runs anything (a cell, a probe, a
        digest, a restore to another checkpoint) — never if the checkpoint is released or restored before that (then
        the live process still is the snapshot). The snapshot is the state at this call all the same: between
        requests the kernel process runs nothing (every cell ends with no other thread running, see
        ``runtime/threads.py``; it waits on its channel), so the fork gets the same request at the same state, only
        later. The fork's cost is paid by that next operation (``scripts/bench_sandbox.py`` measures it as
        ``checkpoint_plus_cell_ms_p50``). A manager takes a checkpoint at every commit but rarely rolls back, so the
        last one of an episode is never forked. Should the kernel die in between, the deferred checkpoint is lost with
        it (its ids are dropped; restoring one raises naming it)."""
        self._check_open()
        if len(self._checkpoints) >= self.config.max_checkpoints:
            raise SandboxError(
                f"kernel {self.kernel_id} already holds {len(self._checkpoints)} checkpoints "
                f"(max_checkpoints={self.config.max_checkpoints}); release() some or raise max_checkpoints."
            )
        if not restorable:
            cid = f"cp{next(self._cp_counter)}"
            self._checkpoints[cid] = _Checkpoint(None, {}, restorable=False)
            return cid
        if self.tap is not None:
            self.tap.sync()
        same = self._same_as
        if same is not None and same[0] == self._generation and self._holds(same[1]):
            cid = f"cp{next(self._cp_counter)}"
            self._checkpoints[cid] = same[1]
            return cid
        self._kernel()  # a kernel that is not running is restarted first (as a forked checkpoint would)
        cid = f"cp{next(self._cp_counter)}"
        self._checkpoints[cid] = self._deferred = _Checkpoint(None, dict(self._vars))
        self._same_as = (self._generation, self._deferred)
        return cid

    def _before_kernel_runs(self) -> None:
        """The kernel process is about to run something (a cell, a digest: user code
        can run in each, through fork hooks, pickling or finalizers): fork the deferred checkpoint first, and end the
        generation, so no later checkpoint shares a process with an earlier one."""
        self._materialize()
        self._generation += 1

    def _materialize(self) -> None:
        """Fork the deferred checkpoint, if one is still held, before the kernel process runs anything."""
        cp, self._deferred = self._deferred, None
        if cp is None or not self._holds(cp):
            return
        try:
            cp.channel = spawn_via(self._kernel(), "checkpoint", "checkpoint")
            self._track_host_pid(cp.channel)
        except (ProtocolError, SandboxError) as exc:
            lost = self._drop(cp)
            logger.warning("sandbox: kernel %s died before checkpoint %s was forked (%s)", self.kernel_id, lost, exc)

    def _drop(self, cp: _Checkpoint) -> str:
        """Forget every id of ``cp`` (its process is gone or was never forked); returns the ids."""
        ids = [cid for cid, other in self._checkpoints.items() if other is cp]
        for cid in ids:
            del self._checkpoints[cid]
        cp.close()
        return ", ".join(ids)

    def restore(self, checkpoint_id: str) -> None:
        """Return the kernel's namespace to a checkpoint (which stays available for further restores)."""
        self._check_open()
        cp = self._get_checkpoint(checkpoint_id)
        if not cp.restorable:
            raise SandboxError(
                f"checkpoint {checkpoint_id} was taken with restorable=False (an id without a snapshot) and cannot be "
                "restored; take it with checkpoint() (restorable=True) to roll back to it."
            )
        if self.tap is not None:
            self.tap.discard()
        if cp is self._deferred:  # nothing ran since it was taken: the live namespace is the snapshot
            self._vars = dict(cp.variables)
            self._files = self._scan_files()
            return
        self._materialize()
        assert cp.channel is not None  # only the deferred checkpoint has no process
        try:
            new_kernel = restore_from(cp.channel, self._track_host_pid)
        except (ProtocolError, SandboxError) as exc:
            self._drop(cp)
            raise SandboxError(f"checkpoint {checkpoint_id} is no longer usable ({exc}); it was dropped") from exc
        old = self._k
        self._k = new_kernel
        self._track_host_pid(new_kernel)
        if old is not None:
            old.close()
        # kills the previous kernel (without waiting for its exit) and anything it left running
        self._sweep(exiting=[old.pid] if old is not None else [])
        self._vars = dict(cp.variables)
        self._files = self._scan_files()
        self._generation += 1
        self._same_as = (self._generation, cp)

    def release(self, checkpoint_id: str) -> None:
        """Free a checkpoint's process."""
        cp = self._get_checkpoint(checkpoint_id)
        del self._checkpoints[checkpoint_id]
        if self._holds(cp):  # another id shares this process
            return
        if cp.channel is None:  # deferred (never forked) or not restorable
            if cp is self._deferred:
                self._deferred = None
            return
        with contextlib.suppress(OSError):
            send_msg(cp.channel.sock, {"op": "release"})
        cp.channel.close()

    def reset(self) -> None:
        """Start over on the same public folder, as a new kernel would: a fresh kernel process (forked from the
        episode's init, which already holds the preloaded libraries), no variables, versions from 1, no checkpoints,
        checkpoint ids from ``cp1``, an empty workspace. Cheaper than :meth:`close` plus ``Sandbox.new_kernel`` (no
        new bubblewrap episode, no teardown): environments recycle their kernel this way between episodes."""
        self._check_open()
        if self.tap is not None:
            self.tap.discard()
        old = [self._k.pid] if self._k is not None else []
        old += [cp.channel.pid for cp in self._checkpoints.values() if cp.channel is not None]  # (the verifier stays)
        for cp in self._checkpoints.values():
            cp.close()
        self._checkpoints.clear()
        self._deferred = None
        if self._k is not None:
            self._k.close()
            self._k = None
        if self._episode is None:
            self._start_episode()
        else:
            self._sweep(exiting=old)  # the old kernel and checkpoints: killed, not waited for
            self._spawn_kernel_process()
        self._vars, self._hwm, self._same_as = {}, {}, None
        self._cp_counter = itertools.count(1)
        self._generation += 1
        for entry in list(self.workspace.iterdir()) if self.workspace.is_dir() else []:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        self._files = self._scan_files()

    @property
    def checkpoints(self) -> list[str]:
        return list(self._checkpoints)

    def variables(self) -> dict[str, VariableInfo]:
        """The tracked variables now, with their current versions."""
        return dict(self._vars)

    def digest(self) -> str | None:
        """A hash of the kernel's state as later cells see it: the namespace (pickled as one object, so aliasing
        counts), the variable tracker's entries, numpy's global random state and the workspace listing. None when it
        cannot be taken (a function or class defined in a cell does not pickle). Equal digests mean the same
        deterministic cells give the same replies; versions and the cell counter are not part of it. A kernel that
        does not answer within the cell timeout (pickling is the kernel's own code, but the objects are the user's) is
        restarted as after a hung cell, and the digest is None."""
        self._check_open()
        if self.tap is not None:
            self.tap.sync()
        timeout = self.config.cell_timeout_s + self.config.grace_s
        self._before_kernel_runs()
        try:
            raw = request(self._kernel(), {"op": "digest"}, timeout=timeout, max_bytes=1 << 16)
        except ProtocolError as exc:  # DeadlineExceeded included: the channel may hold a late reply, so restart
            self._restart(f"the kernel gave no state digest ({exc})")
            return None
        value = raw.get("digest")
        if not isinstance(value, str):
            return None
        return hashlib.sha256(f"{value}|{sorted(self._files.items())}".encode()).hexdigest()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for cp in self._checkpoints.values():
            cp.close()
        self._checkpoints.clear()
        self._deferred = None
        self._same_as = None
        self._teardown_episode()
        if self._owns_workspace:
            shutil.rmtree(self.workspace, ignore_errors=True)
        self.sandbox._forget(self)

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- running cells ----------------------------------------------------------------------------------------------
    def _run(self, op: str, code: str, timeout: float | None) -> ExecutionResult:
        self._check_open()
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        timeout = float(timeout if timeout is not None else self.config.cell_timeout_s)
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout={timeout} must be a positive number of seconds")
        if op == "execute":
            self._materialize()
            self._generation += 1
        started = time.perf_counter()
        if self.tap is not None and (served := self.tap.reply(op, code)) is not None:
            result = self._parse(served, probe=op == "probe")
            result.files = self._diff_files()
            return result
        raw: dict[str, Any] | None = None
        try:
            raw = self._exchange(op, code, timeout)
            result = self._parse(raw, probe=op == "probe")
        except DeadlineExceeded:
            reason, deleted = self._restart(
                f"the cell ignored the interrupt and ran past {timeout:g}s + {self.config.grace_s:g}s grace; "
                "the kernel was killed and restarted"
            )
            result = restarted_result("CellTimeout", reason, deleted, op, timed_out=True)
        except KernelFatal as exc:
            reason, deleted = self._restart(f"{exc.reason}; the kernel was restarted")
            result = restarted_result("ThreadNotStopped", reason, deleted, op)
            for key in ("stdout", "stderr"):
                if isinstance(exc.reply.get(key), str):
                    setattr(result, key, exc.reply[key])
        except ProtocolError as exc:
            oom = self._oom_happened()
            death = self._death_of_kernel()
            reason, deleted = self._restart(
                f"kernel {death or 'stopped answering'}{' (episode memory limit)' if oom else ''}: {exc}"
            )
            result = restarted_result("KernelDied", reason, deleted, op, memory_exceeded=oom)
        if result.restarted or not result.duration_s:
            result.duration_s = time.perf_counter() - started
        result.files = self._diff_files()
        if self.tap is not None:
            self.tap.seen(op, code, timeout, None if result.restarted else raw, result)
        return result

    def _exchange(self, op: str, code: str, timeout: float) -> dict[str, Any]:
        """Send one execute/probe to the kernel process and return its raw reply, with no host bookkeeping: for a
        :class:`ReplyTap` bringing the process up to date. Raises ``ProtocolError`` (``DeadlineExceeded``) when the
        kernel fails; a probe whose verifier fails is a failed probe, not an error."""
        if op == "probe":
            return self._probes.verify(code, timeout)
        self._before_kernel_runs()
        msg = {"op": op, "code": code, "timeout": timeout, "keep": self._keep_pids()}
        wait = timeout + self.config.grace_s * (2 if op == "probe" else 1)
        return request(self._kernel(), msg, timeout=wait, max_bytes=self._max_reply)

    def _parse(self, raw: dict[str, Any], probe: bool) -> ExecutionResult:
        """Validate a reply from the (untrusted) kernel; raise ProtocolError on anything unexpected."""
        result = parse_reply(raw, probe)
        if not probe:
            result.variables = [self._apply_change(c) for c in raw["changes"]]
        return result

    def _apply_change(self, change: Any) -> VariableChange:
        """Version one variable change (from the per-name high-water mark) and track the variable."""
        name, kind, type_, shape, summary = check_change(change)
        version = self._hwm.get(name, 0) + 1
        self._hwm[name] = version
        if kind == "deleted":
            self._vars.pop(name, None)
        else:
            self._vars[name] = VariableInfo(name, version, type_ or "?", shape, summary[:500])
        return VariableChange(name, kind, version, type_, shape, summary[:500])

    # ---- probes: export from the kernel, verdict in the clean verifier (probe_host.py) -----------------------------
    def _spawn_verifier(self) -> Channel:
        """A fresh clean verifier (``runtime/verifier.py``), forked by the episode init."""
        if self._episode is None:
            self._kernel()
        assert self._episode is not None
        verifier = spawn_via(self._episode.init, "spawn_verifier", "verifier")
        self._track_host_pid(verifier)
        return verifier

    # ---- files ------------------------------------------------------------------------------------------------------
    def _scan_files(self) -> dict[str, tuple[int, ...]]:
        return scan_workspace(str(self.workspace), self.config.max_tracked_files)

    def _diff_files(self) -> list[FileChange]:
        new = self._scan_files()
        old, self._files = self._files, new
        return workspace_changes(old, new)

    # ---- process management ---------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"kernel {self.kernel_id} is closed; create a new one with sandbox.new_kernel()")

    def _kernel(self) -> Channel:
        if self._k is None:
            self._restart("kernel was not running")
        assert self._k is not None  # for type checkers: _restart always leaves a kernel or raises
        return self._k

    def _get_checkpoint(self, checkpoint_id: str) -> _Checkpoint:
        try:
            return self._checkpoints[checkpoint_id]
        except KeyError:
            valid = ", ".join(self._checkpoints) or "none"
            raise SandboxError(f"unknown checkpoint {checkpoint_id!r}; live checkpoints: {valid}") from None

    def _keep_pids(self) -> list[int]:
        keep = {cp.channel.pid for cp in self._checkpoints.values() if cp.channel is not None}
        verifier = self._probes.verifier
        return sorted(keep | ({verifier.pid} if verifier is not None else set()))

    def _holds(self, cp: _Checkpoint) -> bool:
        return any(other is cp for other in self._checkpoints.values())

    def _track_host_pid(self, chan: Channel) -> None:
        if self._episode is not None:
            self._episode.watch(chan.host_pid)

    def _start_episode(self) -> None:
        init_sock, remote = new_channel()
        try:
            self.sandbox._spawn_episode(self._spec, remote)
        finally:
            remote.close()
        try:
            init = read_hello(init_sock, "init", CONTROL_TIMEOUT_S)
        except ProtocolError as exc:
            init_sock.close()
            raise SandboxError(f"episode init for kernel {self.kernel_id} did not start: {exc}") from exc
        except SandboxError:
            init_sock.close()
            raise
        cfg = self.config
        cgroup = self.sandbox._cgroups.create(
            self.kernel_id,
            pids_max=cfg.max_processes + cfg.max_checkpoints + 4,
            memory_bytes=cfg.effective_episode_memory_mb << 20,
        )
        if cgroup is not None and init.host_pid:
            cgroup.add(init.host_pid)
        self._episode = EpisodeProcesses(init, cgroup)
        self._episode.watch(init.host_pid)
        self._episode.oom_seen = cgroup.oom_kills() if cgroup else 0
        self._spawn_kernel_process()

    def _spawn_kernel_process(self) -> None:
        assert self._episode is not None
        self._k = spawn_via(self._episode.init, "spawn_kernel", "kernel")
        self._track_host_pid(self._k)

    def _sweep(self, exiting: list[int] | None = None) -> None:
        """Kill every process of the episode except the init, the live kernel and the checkpoints. ``exiting``:
        processes to SIGKILL without waiting for them to finish exiting (a replaced kernel unmapping its heap)."""
        if self._episode is None:
            return
        keep = self._keep_pids() + ([self._k.pid] if self._k is not None else [])
        self._episode.sweep(keep, list(exiting or []))

    def _death_of_kernel(self) -> str | None:
        if self._episode is None or self._k is None:
            return None
        return self._episode.exit_status(self._k.pid)

    def _oom_happened(self) -> bool:
        return self._episode is not None and self._episode.oom_happened()

    def _restart(self, reason: str) -> tuple[str, list[VariableChange]]:
        """Replace a dead or hung kernel by a fresh one; every tracked name is reported as deleted."""
        logger.warning("sandbox: restarting kernel %s: %s", self.kernel_id, reason)
        self.restarts += 1
        self._generation += 1
        if self._deferred is not None and self._holds(self._deferred):  # its namespace dies with the kernel
            reason += f"; checkpoint {self._drop(self._deferred)} (not forked yet) was lost"
        self._deferred = None
        if self._k is not None:
            self._k.close()
            self._k = None
        try:
            self._sweep()
            self._spawn_kernel_process()
        except (ProtocolError, SandboxError, OSError) as exc:
            logger.warning("sandbox: episode init of %s is gone (%s); starting a new episode", self.kernel_id, exc)
            lost = list(self._checkpoints)
            for cp in self._checkpoints.values():
                cp.close()
            self._checkpoints.clear()
            self._teardown_episode()
            self._start_episode()
            if lost:
                reason += f"; checkpoints {', '.join(lost)} were lost with the episode"
        deleted = [
            self._apply_change({"name": n, "kind": "deleted", "type": None, "shape": None, "summary": ""})
            for n in list(self._vars)
        ]
        return reason, deleted

    def _teardown_episode(self) -> None:
        self._probes.close()
        ep, self._episode = self._episode, None
        if self._k is not None:
            self._k.close()
            self._k = None
        if ep is not None:
            ep.shutdown()
