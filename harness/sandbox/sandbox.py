"""The :class:`Sandbox`: owns the zygote (bubblewrap container or plain subprocess) and creates kernels."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from .cgroups import CgroupManager
from .channels import SandboxError, read_hello, request
from .client import Kernel
from .config import SandboxConfig
from .result import ExecutionResult
from .runtime.protocol import ProtocolError
from .runtime.syscalls import landlock_abi

logger = logging.getLogger(__name__)

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
RUNTIME_PACKAGE = "sg_runtime"
INSIDE_RUNTIME_PARENT = "/opt/stateguard"
INSIDE_PUBLIC = "/public"
INSIDE_WORKSPACE = "/workspace"
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from sg_runtime.zygote import main; main(sys.argv[2:])"
_THREAD_ENV = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
_TOP_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
)


class SandboxUnavailableError(RuntimeError):
    """The requested isolation cannot be provided on this machine (the message says how to fix it)."""


TMP_PREFIX = "stateguard-sandbox-"
OWNER_FILE = "owner"
"""Each sandbox's temporary folder (workspaces, per-kernel tmp, the zygote's log) holds ``owner``: the creating
process's pid and start time, so a later sandbox can tell a folder left by a killed process from a live one."""


def owner_stamp(pid: int) -> str | None:
    """``"PID START"`` (start time in clock ticks since boot, from ``/proc``), None when the process is gone; the
    start time tells a reused pid from the original process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def remove_orphaned_tmp_roots(parent: str | Path | None = None) -> list[Path]:
    """Remove this user's sandbox temporary folders whose owner process is gone (killed with ``kill -9``, say, so
    ``Sandbox.close`` never ran); returns them. A folder without an owner file, of another user, or whose owner
    still runs is left alone."""
    removed = []
    for folder in Path(parent or tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        try:
            if folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            stamp = (folder / OWNER_FILE).read_text(encoding="utf-8").strip()
            pid = int(stamp.split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if owner_stamp(pid) != stamp:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        logger.info("removed %d sandbox folder(s) left by processes that are gone", len(removed))
    return removed


def sandbox_environment(workspace: str, public: str, tmp: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workspace,
        "TMPDIR": tmp,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        "DATA_DIR": public,
        "BASE_PATH": public,
        "WORK_DIR": workspace,
    }
    env.update({name: "1" for name in _THREAD_ENV})
    return env


def _python_dirs() -> list[str]:
    """Directories the interpreter needs: the venv, the base installation and the real executable's prefix."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    real = Path(os.path.realpath(sys.executable))
    dirs.add(str(real.parent.parent))
    return sorted(d for d in dirs if d and not d.startswith("/usr"))


PROJECT_PACKAGES = ("harness", "envs", "synthesis", "rewards", "training")
"""This project's top-level packages: the folder above ``harness`` holds them (the repository, or an installed copy's
``site-packages``)."""


def hidden_dirs(binds: list[str]) -> list[str]:
    """This project's own package folders that lie inside one of ``binds`` (host folders mounted read-only at the
    same path), as paths inside the sandbox: a wheel's copy in the venv's ``site-packages``, with the built-in tasks'
    ``private/`` answers. The sandbox covers each with an empty read-only tmpfs (the runtime has its own mount); an
    editable install's packages live outside every bind and need nothing."""
    root = Path(__file__).resolve().parents[2]
    hidden = set()
    for bind in binds:
        real = Path(os.path.realpath(bind))
        for name in PROJECT_PACKAGES:
            package = root / name
            if package.is_dir() and package.is_relative_to(real):
                hidden.add(str(Path(bind) / package.relative_to(real)))
    return sorted(hidden)


class Sandbox:
    """Owns one zygote; serves many kernels (one per episode). Use as a context manager or call :meth:`close`."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._kernel_ids = itertools.count(1)
        self._kernels: weakref.WeakSet[Kernel] = weakref.WeakSet()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._closed = False
        self._bwrap = self._locate_bwrap()
        self.landlock_abi = landlock_abi() if self.config.landlock else 0
        if self.config.isolation == "none":
            logger.warning(
                "SANDBOX ISOLATION DISABLED (isolation: none): untrusted code runs as uid %d with this machine's "
                "file system, network and processes in reach, limited only by rlimits%s. Use isolation: bwrap "
                "for anything untrusted.",
                os.getuid(),
                f" and Landlock ABI {self.landlock_abi} (file and TCP access, signals)"
                if self.landlock_abi
                else " (Landlock unavailable)",
            )
        remove_orphaned_tmp_roots()
        self._tmp_root = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        os.chmod(self._tmp_root, 0o700)
        (self._tmp_root / OWNER_FILE).write_text(owner_stamp(os.getpid()) or "", encoding="utf-8")
        self._cgroups = CgroupManager(enabled=True)
        try:
            self._start_zygote()
        except BaseException:
            self.close()
            raise

    # ---- public API -------------------------------------------------------------------------------------------------
    def new_kernel(self, public_dir: str | Path, workspace: str | Path | None = None) -> Kernel:
        """A fresh kernel with ``public_dir`` read-only at ``DATA_DIR``/``BASE_PATH`` and a writable ``WORK_DIR``
        (``workspace``; None creates a temporary one that is removed on close)."""
        self._check_open()
        public = Path(public_dir)
        if not public.is_dir():
            raise ValueError(
                f"public_dir {str(public)!r} is not an existing directory; pass the task's public data folder"
            )
        owns = workspace is None
        if workspace is None:
            ws = Path(tempfile.mkdtemp(prefix="ws-", dir=self._tmp_root))
        else:
            ws = Path(workspace)
            if ws.exists() and not ws.is_dir():
                raise ValueError(f"workspace {str(ws)!r} exists and is not a directory; pass a directory or None")
            ws.mkdir(parents=True, exist_ok=True)
        kernel_id = f"k{next(self._kernel_ids)}"
        spec = self._kernel_spec(kernel_id, Path(os.path.realpath(public)), Path(os.path.realpath(ws)))
        kernel = Kernel(self, kernel_id, public, ws, owns, spec)
        self._kernels.add(kernel)
        return kernel

    def execute_once(self, code: str, public_dir: str | Path, timeout: float | None = None) -> ExecutionResult:
        """Run ``code`` in a throwaway kernel with a temporary workspace."""
        with self.new_kernel(public_dir) as kernel:
            return kernel.execute(code, timeout=timeout)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for kernel in list(self._kernels):
            with contextlib.suppress(Exception):
                kernel.close()
        self._stop_zygote()
        self._cgroups.close()
        shutil.rmtree(self._tmp_root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ---- internals --------------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox is closed; create a new Sandbox")

    def _forget(self, kernel: Kernel) -> None:
        self._kernels.discard(kernel)

    def _locate_bwrap(self) -> str | None:
        if self.config.isolation != "bwrap":
            return None
        path = shutil.which(self.config.bwrap_path)
        if path is None:
            raise SandboxUnavailableError(
                f"bubblewrap ({self.config.bwrap_path!r}) was not found, so the sandbox cannot isolate code. "
                "Install it (e.g. `apt-get install bubblewrap`, or `make sysdeps`), or set `isolation: none` in "
                "the sandbox config to run WITHOUT isolation (trusted code only)."
            )
        return path

    def _ro_binds(self) -> list[str]:
        """Host directories mounted read-only at the same path inside the bwrap sandbox."""
        return [*_python_dirs(), *self.config.extra_ro_binds]

    def _kernel_spec(self, kernel_id: str, public: Path, workspace: Path) -> dict[str, Any]:
        cfg = self.config
        bwrap = cfg.isolation == "bwrap"
        if bwrap:
            paths = {"public": INSIDE_PUBLIC, "workspace": INSIDE_WORKSPACE, "tmp": "/tmp"}
            readable = None
        else:
            tmp = self._tmp_root / f"tmp-{kernel_id}"
            tmp.mkdir()
            paths = {"public": str(public), "workspace": str(workspace), "tmp": str(tmp)}
            readable = [
                *_python_dirs(),
                "/usr",
                "/lib",
                "/lib64",
                "/bin",
                "/proc",
                "/dev",
                "/sys/devices/system/cpu",
                *_ETC_FILES,
                str(RUNTIME_DIR),
                str(public),
                *cfg.extra_ro_binds,
            ]
        limits = {
            "memory_mb": cfg.memory_mb,
            "cell_timeout_s": cfg.cell_timeout_s,
            "cpu_time_s": cfg.effective_cpu_time_s,
            "grace_s": cfg.grace_s,
            "max_output_bytes": cfg.max_output_bytes,
            "max_file_mb": cfg.max_file_mb,
            "max_open_files": cfg.max_open_files,
            "max_processes": cfg.max_processes,
            "tmp_mb": cfg.tmp_mb,
            "private_network": cfg.private_network,
            "landlock": cfg.landlock,
        }
        return {
            "kernel_id": kernel_id,
            # read-only binds under /tmp, hidden by each episode's fresh /tmp: the episode init binds them again
            "tmp_ro_binds": [d for d in self._ro_binds() if Path(d).is_relative_to("/tmp")] if bwrap else [],
            "tmp_hidden": [d for d in hidden_dirs(self._ro_binds()) if d.startswith("/tmp/")] if bwrap else [],
            "public_host": str(public),
            "workspace_host": str(workspace),
            "paths": paths,
            "limits": limits,
            "readable": readable,
        }

    def _bwrap_argv(self, python: str, fd: int) -> list[str]:
        assert self._bwrap is not None
        argv = [
            self._bwrap,
            "--unshare-user",
            "--uid",
            "0",
            "--gid",
            "0",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-add",
            "ALL",
        ]
        for top in _TOP_DIRS:
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        for etc in _ETC_FILES:
            argv += ["--ro-bind-try", etc, etc]
        # /tmp first: bwrap mounts in order, and the interpreter may live under /tmp (a clone in /tmp/...).
        argv += ["--tmpfs", "/tmp"]
        for path in self._ro_binds():
            argv += ["--ro-bind", path, path]
        for path in hidden_dirs([*_TOP_DIRS, *self._ro_binds()]):  # an installed copy of this project: hidden
            argv += ["--tmpfs", path, "--remount-ro", path]
        argv += [
            "--ro-bind",
            str(RUNTIME_DIR),
            f"{INSIDE_RUNTIME_PARENT}/{RUNTIME_PACKAGE}",
            "--bind",
            "/",
            "/.host",  # reachable by the zygote only; every episode detaches it
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--dir",
            INSIDE_PUBLIC,
            "--dir",
            INSIDE_WORKSPACE,
            "--chdir",
            "/",
            "--clearenv",
        ]
        for key, value in sandbox_environment(INSIDE_WORKSPACE, INSIDE_PUBLIC, "/tmp").items():
            argv += ["--setenv", key, value]
        settings = json.dumps({"isolation": "bwrap", "preload": self.config.preload})
        return [*argv, "--", python, "-E", "-s", "-B", "-c", _BOOT, INSIDE_RUNTIME_PARENT, settings, str(fd)]

    def _start_zygote(self) -> None:
        cfg = self.config
        python = cfg.python or sys.executable
        control, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        control.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        fd = remote.fileno()
        if cfg.isolation == "bwrap":
            argv = self._bwrap_argv(python, fd)
            env = None
        else:
            link_parent = self._tmp_root / "runtime"
            link_parent.mkdir()
            (link_parent / RUNTIME_PACKAGE).symlink_to(RUNTIME_DIR)
            settings = json.dumps({"isolation": "none", "preload": cfg.preload})
            argv = [python, "-E", "-s", "-B", "-c", _BOOT, str(link_parent), settings, str(fd)]
            env = sandbox_environment("/nonexistent", "/nonexistent", str(self._tmp_root))
        log_path = self._tmp_root / "zygote.log"
        with open(log_path, "wb") as log:
            self._zygote = subprocess.Popen(
                argv,
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        remote.close()
        self._control = control
        try:
            read_hello(control, "zygote", cfg.start_timeout_s)
        except (ProtocolError, SandboxError) as exc:
            time.sleep(0.05)
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            hint = (
                "bubblewrap could not create the sandbox (are user namespaces enabled? "
                "sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces), or set isolation: none"
                if cfg.isolation == "bwrap"
                else "check that numpy/pandas import in this interpreter"
            )
            raise SandboxUnavailableError(
                f"the sandbox zygote did not start ({exc}). Log: {tail.strip()!r}. Fix: {hint}."
            ) from exc

    def _zygote_alive(self) -> bool:
        return self._zygote is not None and self._zygote.poll() is None

    def _spawn_episode(self, spec: dict[str, Any], remote: socket.socket) -> None:
        """Ask the zygote to fork an episode init serving ``remote`` (restarting the zygote if it died)."""
        self._check_open()
        for attempt in range(2):
            if not self._zygote_alive() or self._control is None:
                logger.warning("sandbox: the zygote is gone; starting a new one")
                self._restart_zygote()
            try:
                assert self._control is not None
                reply = request(
                    self._control,
                    {"op": "spawn", "spec": spec},
                    fds=(remote.fileno(),),
                    timeout=15.0,
                    max_bytes=1 << 16,
                )
            except ProtocolError as exc:
                if attempt:
                    raise SandboxError(f"the zygote failed to spawn an episode: {exc}") from exc
                self._restart_zygote()
                continue
            if not reply.get("ok"):
                raise SandboxError(f"the zygote refused to spawn an episode: {reply.get('error_message')}")
            return

    def _stop_zygote(self) -> None:
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        if self._zygote is not None:
            with contextlib.suppress(OSError):
                self._zygote.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=5)

    def _restart_zygote(self) -> None:
        self._stop_zygote()
        link_parent = self._tmp_root / "runtime"
        if link_parent.exists():
            shutil.rmtree(link_parent)
        self._start_zygote()
