"""The kernel process: a persistent namespace that runs cells; checkpoints and probes are forks of it.

Process roles inside one episode (see ``harness/sandbox/__init__.py`` for the whole picture):

- the **kernel** (this module's :class:`KernelRuntime`) runs user cells and answers the host on its channel;
- a **checkpoint** is a fork of the kernel parked on its own channel; ``restore`` makes it fork once: the child
  parks on the same channel as the snapshot, the checkpoint process itself becomes the new kernel (its parent, the
  replaced kernel, is killed, so it is reparented to the episode init and ``os.kill(os.getppid(), 9)`` cannot hit
  anything that matters);
- a probe never runs here: the kernel only **exports** the variables a probe names as data (:mod:`.export`), and the
  episode's clean **verifier** (:mod:`.verifier`, a fork of the episode init that runs no worker code) computes the
  verdict. ``export`` and ``checkpoint`` are dispatched through references :meth:`KernelRuntime.serve` bound before
  any user code ran, not through attributes worker code could replace.
- ``probe_in_fork`` (a fork of this kernel that runs the probe in the worker's own process) is kept only as the
  reference the sandbox benchmark measures the verifier against; the host never uses it for a verdict.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import linecache
import os
import resource
import signal
import socket
import sys
import time
import traceback
import types
from typing import Any

from . import export, mappings, procs, syscalls, threads
from .output import CappedStream, drain_fd_capture, join_capped, to_jsonable
from .protocol import ProtocolError, recv_msg, send_msg
from .variable_tracker import VariableTracker, analyse_cell

HOST_MAX_MSG = 64 << 20  # messages from the (trusted) host
_LIBC = ctypes.CDLL(None)


class CellTimeout(BaseException):
    """Raised inside user code when the wall-clock limit of the cell is reached (BaseException: not swallowed by
    ``except Exception``)."""


class CellCpuExceeded(BaseException):
    """Raised inside user code when the CPU-time limit of the cell is reached."""


class KernelRuntime:
    def __init__(self, sock: socket.socket, spec: dict[str, Any], init_pid: int) -> None:
        self.sock = sock
        self.spec = spec
        self.limits: dict[str, Any] = spec["limits"]
        self.init_pid = init_pid
        self.exiting: set[int] = set()  # probes sent SIGKILL and not yet reaped (see probe())
        self.pid = os.getpid()
        self.cell_count = 0
        self.in_cell = False
        self.results: list[Any] = []
        self.results_bytes = 0
        self.notes: list[str] = []  # harness messages for the next cell's stderr (appended after the cap)
        self.stdout = CappedStream(self.limits["max_output_bytes"], "<stdout>")
        self.stderr = CappedStream(self.limits["max_output_bytes"], "<stderr>")
        self.namespace: dict[str, Any] = {}
        self.tracker: VariableTracker
        self.helpers: dict[str, Any] = {}  # the kernel's own functions in the namespace (print_result)

    # ---- setup (runs once per kernel process, before any user code) ------------------------------------------
    def setup(self) -> None:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.signal(signal.SIGXCPU, self._on_xcpu)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past RLIMIT_FSIZE fail with EFBIG instead
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        paths = self.spec["paths"]
        os.chdir(paths["workspace"])
        env = {
            "DATA_DIR": paths["public"],
            "BASE_PATH": paths["public"],
            "WORK_DIR": paths["workspace"],
            "HOME": paths["workspace"],
            "TMPDIR": paths["tmp"],
        }
        os.environ.update(env)
        self._capture_fds()
        self._set_rlimits()
        syscalls.set_no_new_privs()
        if self.limits.get("landlock", True):
            writable = [paths["workspace"], paths["tmp"], "/dev/null"]
            syscalls.landlock_restrict(writable=writable, readable=self.spec.get("readable"))
        print_result = self._print_result  # one bound-method object, so the tracker can recognise it
        self.helpers = {"print_result": print_result}
        predefined = {
            "DATA_DIR": paths["public"],
            "BASE_PATH": paths["public"],
            "WORK_DIR": paths["workspace"],
            "print_result": print_result,
        }
        self.namespace.update({"__name__": "__main__", "__builtins__": builtins, **predefined})
        self.tracker = VariableTracker({id(v) for v in predefined.values()}, "__main__")
        sys.stdout, sys.stderr = self.stdout, self.stderr
        sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process

    def _capture_fds(self) -> None:
        """Point fds 1 and 2 at fresh memfds (C-level and subprocess output), fd 0 at /dev/null."""
        for fd, name in ((1, "stdout"), (2, "stderr")):
            mem = os.memfd_create(f"cell-{name}", os.MFD_CLOEXEC)
            os.dup2(mem, fd)  # dup2 clears CLOEXEC on the target
            os.close(mem)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

    def _set_rlimits(self) -> None:
        lim = self.limits
        with open("/proc/self/statm") as fh:
            baseline = int(fh.read().split()[0]) * resource.getpagesize()
        if lim["memory_mb"]:
            cap = baseline + lim["memory_mb"] * (1 << 20)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        if lim["max_file_mb"]:
            fsize = lim["max_file_mb"] * (1 << 20)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if lim["max_open_files"]:
            resource.setrlimit(resource.RLIMIT_NOFILE, (lim["max_open_files"], lim["max_open_files"]))
        if lim["max_processes"] and os.getuid() != 0:  # per-uid and ignored for root: the pids cgroup does the job
            try:
                resource.setrlimit(resource.RLIMIT_NPROC, (lim["max_processes"], lim["max_processes"]))
            except (ValueError, OSError):
                pass

    # ---- signals -----------------------------------------------------------------------------------------------
    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.in_cell:
            raise CellTimeout(f"cell exceeded the wall-clock limit of {self.limits['cell_timeout_s']} s")

    def _on_xcpu(self, signum: int, frame: Any) -> None:
        if self.in_cell:
            raise CellCpuExceeded(f"cell exceeded the CPU-time limit of {self.limits['cpu_time_s']} s")

    # ---- helpers for user code ----------------------------------------------------------------------------------
    def _print_result(self, obj: Any) -> None:
        """Print ``obj`` and record its JSON-serialisable form in ``ExecutionResult.results``."""
        print(obj)
        value = to_jsonable(obj)
        import json

        size = len(json.dumps(value, ensure_ascii=False))
        if self.results_bytes + size > self.limits["max_output_bytes"]:
            value = {"truncated": True, "repr": repr(obj)[:200]}
            size = len(json.dumps(value))
        self.results.append(value)
        self.results_bytes += size

    # ---- running a cell -----------------------------------------------------------------------------------------
    def run_cell(
        self,
        code: str,
        timeout: float,
        track: bool,
        keep: set[int],
        stop_threads: bool = False,
    ) -> dict[str, Any]:
        """Run ``code`` in the namespace.
        ``stop_threads``: stop the threads the cell left running before its changes are tracked (:mod:`.threads`)."""
        self.cell_count += 1
        filename = f"<cell-{self.cell_count}>"
        start = time.perf_counter()
        self.results, self.results_bytes = [], 0
        sys.stdout, sys.stderr = self.stdout, self.stderr
        out: dict[str, Any] = {
            "ok": True,
            "error_type": None,
            "error_message": None,
            "traceback": None,
            "timed_out": False,
            "memory_exceeded": False,
            "cpu_exceeded": False,
            "display": None,
            "changes": [],
        }
        try:
            tree = ast.parse(code, filename, "exec")
        except (SyntaxError, ValueError) as exc:
            out.update(
                ok=False,
                error_type=type(exc).__name__,
                error_message=str(exc),
                traceback="".join(traceback.format_exception_only(type(exc), exc)),
            )
            return self._finish(out, start, keep)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        names = analyse_cell(tree, self.namespace) if track else None
        suspects = self.tracker.before_cell(self.namespace, names) if names else set()
        last_expr = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last_expr = ast.Expression(tree.body.pop().value)
        cpu_used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
        cpu_limit = int(cpu_used + self.limits["cpu_time_s"]) + 1
        try:
            body = compile(tree, filename, "exec")
            expr = compile(last_expr, filename, "eval") if last_expr is not None else None
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, resource.RLIM_INFINITY))
            signal.setitimer(signal.ITIMER_REAL, timeout, 0.5)  # re-fires every 0.5 s if the cell swallows it
            self.in_cell = True
            exec(body, self.namespace)
            if expr is not None:
                value = eval(expr, self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    out["display"] = self._display(value)
        except BaseException as exc:  # noqa: BLE001 - user errors are data, never raised to the host
            self.in_cell = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._classify(exc, out)
        finally:
            self.in_cell = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        if os.getpid() != self.pid:  # a child forked by user code finished the cell: it must not answer the host
            os._exit(0)
        if stop_threads:
            self.end_threads(out)
        if names is not None:
            try:
                out["changes"] = self.tracker.after_cell(self.namespace, names, suspects)
            except Exception as exc:  # noqa: BLE001 - a hostile __eq__ or property must not kill the kernel
                out["tracking_error"] = f"{type(exc).__name__}: {exc}"[:500]
        return self._finish(out, start, keep)

    def _display(self, value: Any) -> str:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001
            text = f"<repr failed: {type(exc).__name__}: {exc}>"
        cap = self.limits["max_output_bytes"]
        return text if len(text) <= cap else text[:cap] + f"\n[... display truncated: {len(text) - cap} chars ...]"

    def _classify(self, exc: BaseException, out: dict[str, Any]) -> None:
        out["ok"] = False
        out["error_type"] = type(exc).__name__
        try:
            out["error_message"] = str(exc)[:10_000]
        except Exception:  # noqa: BLE001
            out["error_message"] = "<str() of the exception failed>"
        out["timed_out"] = isinstance(exc, CellTimeout)
        out["cpu_exceeded"] = isinstance(exc, CellCpuExceeded)
        out["memory_exceeded"] = isinstance(exc, MemoryError)
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next  # hide harness frames
        try:
            out["traceback"] = "".join(traceback.format_exception(type(exc), exc, tb))[-20_000:]
        except Exception:  # noqa: BLE001
            out["traceback"] = f"{type(exc).__name__} (traceback unavailable)"

    def _finish(self, out: dict[str, Any], start: float, keep: set[int]) -> dict[str, Any]:
        try:
            _LIBC.fflush(None)  # C stdio buffers into the memfds
        except Exception:  # noqa: BLE001
            pass
        cap = self.limits["max_output_bytes"]
        py_out, py_err = self.stdout.take(), self.stderr.take()
        out["stdout"], t1 = join_capped([py_out, drain_fd_capture(1, cap)], cap)
        out["stderr"], t2 = join_capped([py_err, drain_fd_capture(2, cap)], cap)
        out["output_truncated"] = t1 or t2
        out["stderr"] += "".join(self.notes)
        self.notes = []
        out["results"] = self.results
        self._kill_strays(keep)
        out["duration_s"] = time.perf_counter() - start
        return out

    def _kill_strays(self, keep: set[int]) -> None:
        """Kill processes user code left behind; probes still exiting are not strays. Forget reaped probes."""
        procs.kill_strays(self.init_pid, keep | {self.pid}, exiting=self.exiting)
        for pid in list(self.exiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped (kill_strays reaps every exited child)
                done = pid
            if done:
                self.exiting.discard(pid)

    def end_threads(self, reply: dict[str, Any]) -> None:
        """Stop the Python threads user code left running (see :mod:`.threads`); the stopped ones are named in the
        cell's stderr, and a thread that cannot be stopped sets ``fatal`` (the host restarts the kernel)."""
        found, stuck = threads.stop_other_threads(min(1.0, self.limits["grace_s"] / 4))

        def names(items: list[str]) -> str:
            return "; ".join(items[:10]) + (f"; and {len(items) - 10} more" if len(items) > 10 else "")

        if stuck:
            reply["fatal"] = (
                f"{len(stuck)} thread(s) still running when the cell ended could not be stopped (blocked outside "
                f"Python code, e.g. in a long time.sleep or a C call): {names(stuck)}; threads must not outlive "
                "their cell"
            )[:4000]
        elif found:
            note = (
                f"[sandbox] stopped {len(found)} thread(s) still running when the cell ended (threads must not "
                f"outlive their cell; join them before it ends): {names(found)}\n"
            )[:4000]
            if isinstance(reply.get("stderr"), str):
                reply["stderr"] += note
            else:
                self.notes.append(note)

    # ---- forks ----------------------------------------------------------------------------------------------------
    def checkpoint(self, fd: int, trusted: tuple[Any, ...]) -> int:
        """Fork a parked copy of this kernel that serves ``fd``; returns its pid. ``trusted``: see :meth:`serve`."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                os.write(w, b"ok")
                os.close(w)
                os.close(self.sock.detach())  # drop the kernel channel here (no shutdown: the kernel keeps it)
                trusted[2](self, socket.socket(fileno=fd), trusted)
            finally:
                os._exit(0)
        os.close(w)
        os.read(r, 2)
        os.close(r)
        os.close(fd)
        return pid

    def probe_in_fork(
        self, code: str, timeout: float, keep: set[int], prepare: Any = None, landlock: bool = True
    ) -> dict[str, Any]:
        """Run ``code`` in a throwaway fork of this process (``prepare(self)`` first, in the fork: it may return a
        reply that replaces the run) and return its reply; the fork is killed at its deadline."""
        parent_end, child_end = socket.socketpair()
        start = time.perf_counter()
        shared = mappings.shared_mappings()  # listed here, warm: the fork holds the same mappings
        pid = os.fork()
        if pid == 0:
            try:
                parent_end.close()
                os.close(self.sock.detach())
                kernel_pid, self.pid = self.pid, os.getpid()
                self.notes = []  # the kernel's, for its next cell
                self._capture_fds()  # own memfds: C-level output must not land in the kernel's capture
                try:  # writes through shared mappings would land in the kernel's memory (or its files)
                    mappings.privatize_shared(shared)
                except OSError as exc:
                    send_msg(child_end, failed_probe(f"the probe did not run: {exc}"))
                    os._exit(0)
                if landlock:
                    syscalls.landlock_restrict(writable=["/dev/null"], readable=self.spec.get("readable"))
                early = prepare(self) if prepare is not None else None
                result = early or self.run_cell(code, timeout, track=False, keep=keep | {kernel_pid})
                send_msg(child_end, result)
            finally:
                os._exit(0)
        child_end.close()
        deadline = time.monotonic() + timeout + self.limits["grace_s"]
        try:
            result, _, _ = recv_msg(parent_end, max_bytes=HOST_MAX_MSG, deadline=deadline)
        except ProtocolError as exc:
            result = failed_probe(str(exc), timed_out="deadline" in str(exc))
        finally:
            parent_end.close()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if result.get("error_type") == "ProbeFailed" and not result["timed_out"]:
            try:
                _, status = os.waitpid(pid, 0)
                result["error_message"] = f"probe process {procs.describe_status(status)}"
            except ChildProcessError:
                pass
        # A probe that answered is not waited for: its exit (unmapping a large copy-on-write heap) overlaps the
        # next request, and it is reaped with the other exited children. Its own strays are killed as usual.
        self.exiting.add(pid)
        self._kill_strays(keep)
        result["changes"] = []
        result["duration_s"] = time.perf_counter() - start
        return result

    def state_digest(self) -> str | None:
        """A hash of everything later cells can observe, or None when it cannot be taken (see ``Kernel.digest``):
        the user namespace pickled as one object (so aliasing between names counts), the tracker's entries, and
        numpy's global random state. Functions and classes defined in cells do not pickle (their module is not
        importable here), so a namespace holding one has no digest. The ``random`` module is left out: CPython
        reseeds it in every forked child, so no restored kernel repeats it anyway."""
        import hashlib
        import pickle

        user = {
            name: (value.__name__ if isinstance(value, types.ModuleType) else value)
            for name, value in self.namespace.items()
            if name != "__builtins__" and name not in self.helpers
        }
        digest = hashlib.sha256()
        try:
            digest.update(pickle.dumps(user, protocol=5))
            numpy = sys.modules.get("numpy")
            if numpy is not None:
                digest.update(pickle.dumps(numpy.random.get_state(), protocol=5))
            digest.update(repr(self.tracker.state()).encode())
        except Exception:  # noqa: BLE001 - an unpicklable value: no digest (callers treat it as "unknown")
            return None
        return digest.hexdigest()

    # ---- the request loop -----------------------------------------------------------------------------------------
    def serve(self, trusted: tuple[Any, ...] | None = None) -> None:
        """Answer the host until it goes. ``trusted``: ``(export, checkpoint, park, serve, send, recv)``, bound here
        when the kernel starts (before any user code) and handed on to restored kernels, so that replacing an
        attribute of this class, this module or the instance cannot redirect an export or a checkpoint."""
        if trusted is None:
            trusted = (export.export, KernelRuntime.checkpoint, checkpoint_main, KernelRuntime.serve, send_msg)
            trusted += (recv_msg,)
        export_variables, take_checkpoint, _, _, send, recv = trusted
        namespace, sock = self.namespace, self.sock
        send(sock, {"op": "hello", "role": "kernel", "pid": os.getpid()})
        while True:
            try:
                msg, fds, _ = recv(sock, max_bytes=HOST_MAX_MSG)
            except Exception:  # noqa: BLE001 - ProtocolError: host gone
                return
            op = msg.get("op")
            if op == "export":
                try:
                    names = [n for n in msg.get("names", []) if type(n) is str]
                    reply, exported = export_variables(namespace, names, msg.get("columns"))
                except BaseException as exc:  # noqa: BLE001
                    reply, exported = {"ok": False, "error_type": "ExportFailed", "error_message": repr(exc)[:500]}, []
                try:
                    send(sock, reply, exported)
                except OSError:
                    return
                finally:
                    for fd in exported:
                        os.close(fd)
                continue
            try:
                if op == "checkpoint":
                    reply = {"ok": True, "pid": take_checkpoint(self, fds[0], trusted)}
                else:
                    reply = self.handle(msg, fds)
            except BaseException as exc:  # noqa: BLE001 - e.g. a late CellTimeout in harness code
                reply = {"ok": False, "error_type": "KernelInternalError", "error_message": repr(exc)[:2000]}
            if reply is None:
                return
            # Nothing of the user's runs while the kernel waits for the next request (a deferred checkpoint relies on
            # it): user code this request ran outside a cell (tracking, pickling, fork hooks) may have started
            # threads or armed the wall-clock timer too.
            try:
                self.end_threads(reply)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except BaseException as exc:  # noqa: BLE001
                reply["fatal"] = f"threads could not be checked: {exc!r}"[:2000]
            try:
                try:
                    send(sock, reply)
                except (TypeError, ValueError, RecursionError) as exc:  # an unserialisable reply: say so, live on
                    send(sock, {"ok": False, "error_type": "KernelInternalError", "error_message": repr(exc)})
            except OSError:
                return
            if reply.get("fatal"):
                os._exit(0)  # a thread it could not stop runs on: the host restarts the kernel

    def handle(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any] | None:
        op = msg.get("op")
        keep = set(msg.get("keep", []))
        timeout = float(msg.get("timeout", self.limits["cell_timeout_s"]))
        if op == "execute":
            return self.run_cell(msg["code"], timeout, track=True, keep=keep, stop_threads=True)
        if op == "probe_in_fork":
            return self.probe_in_fork(msg["code"], timeout, keep)
        if op == "variables":
            return {"ok": True, "variables": self.tracker.describe_all(self.namespace)}
        if op == "digest":
            return {"ok": True, "digest": self.state_digest()}
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}
        if op == "shutdown":
            return None
        return {"ok": False, "error_type": "UnknownOp", "error_message": f"unknown op {op!r}"}


def failed_probe(message: str, timed_out: bool = False) -> dict[str, Any]:
    """The reply for a probe that gave no result of its own."""
    return {
        "ok": False,
        "error_type": "ProbeFailed",
        "error_message": message,
        "traceback": None,
        "timed_out": timed_out,
        "memory_exceeded": False,
        "cpu_exceeded": False,
        "display": None,
        "stdout": "",
        "stderr": "",
        "results": [],
        "output_truncated": False,
    }


def checkpoint_main(kernel: KernelRuntime, sock: socket.socket, trusted: tuple[Any, ...]) -> None:
    """Serve a parked checkpoint: ``restore`` forks a live kernel from this frozen state (serving with ``trusted``,
    see :meth:`KernelRuntime.serve`); ``release`` exits."""
    send_msg(sock, {"op": "hello", "role": "checkpoint", "pid": os.getpid()})
    while True:
        try:
            msg, fds, _ = recv_msg(sock, max_bytes=HOST_MAX_MSG)
        except ProtocolError:
            return
        op = msg.get("op")
        if op == "restore":
            # One fork, roles swapped: the child stays the parked snapshot on this same channel (it tells the host its
            # pid), this process becomes the live kernel. The kernel is then the snapshot's parent, as with any
            # checkpoint it takes; its own parent (the kernel that took this checkpoint) is killed by the host, so it
            # is reparented to the episode init, which ignores signals from inside.
            if os.fork() == 0:
                os.close(fds[0])
                send_msg(sock, {"ok": True, "pid": os.getpid()})
                continue
            os.close(sock.detach())  # the snapshot (the child) serves the checkpoint channel now
            kernel.pid = os.getpid()
            kernel.sock = socket.socket(fileno=fds[0])
            kernel._capture_fds()
            trusted[3](kernel, trusted)
            return
        elif op == "release":
            return
        else:
            send_msg(sock, {"ok": False, "error_type": "UnknownOp", "error_message": f"unknown op {op!r}"})


def kernel_main(sock: socket.socket, spec: dict[str, Any], init_pid: int) -> None:
    runtime = KernelRuntime(sock, spec, init_pid)
    try:
        runtime.setup()
    except BaseException as exc:  # noqa: BLE001 - fail closed: report and exit before any user code
        send_msg(sock, {"op": "hello", "role": "kernel", "error": f"kernel setup failed: {exc!r}"})
        os._exit(1)
    runtime.serve()
