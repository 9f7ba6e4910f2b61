"""Per-episode cgroups for the process limit (pids) and the episode memory limit (memory).

The host creates ``stateguard-<pid>-<n>/<kernel>`` under the cgroup v1 hierarchies ``/sys/fs/cgroup/{pids,memory}``
(or one cgroup v2 directory with ``pids.max``/``memory.max`` when the v2 controllers are enabled) and moves the
episode init into it before any kernel is forked, so every process of the episode is counted. When the cgroup
file system is not writable (not root, read-only mount), each missing controller is logged once with
``logging.warning`` and the sandbox runs without that limit (the wall-clock timeout and the per-process
RLIMIT_AS remain).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)
_COUNTER = itertools.count()
_V1_ROOT = Path("/sys/fs/cgroup")
# controller -> (v1 limit file, v2 limit file)
_LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max")}


@dataclass
class CgroupHandle:
    """The cgroup directories of one episode."""

    dirs: dict[str, Path]  # controller -> directory

    def add(self, pid: int) -> None:
        for path in set(self.dirs.values()):
            (path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many processes the memory limit killed so far (0 when unknown)."""
        path = self.dirs.get("memory")
        if path is None:
            return 0
        for name, key in (("memory.oom_control", "oom_kill"), ("memory.events", "oom_kill")):
            try:
                for line in (path / name).read_text().splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
            except OSError:
                continue
        return 0

    def remove(self) -> None:
        for path in set(self.dirs.values()):
            for _ in range(50):
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)


class CgroupManager:
    """Creates one parent cgroup per sandbox and one child per episode; degrades with a warning."""

    def __init__(self, enabled: bool = True) -> None:
        self.parents: dict[str, Path] = {}
        if not enabled:
            return
        name = f"stateguard-{os.getpid()}-{next(_COUNTER)}"
        v2 = self._v2_root()
        for controller in _LIMIT_FILES:
            last_error: OSError | None = None
            candidates = [_V1_ROOT / controller]
            if v2 is not None and controller in self._v2_controllers(v2):
                candidates.append(v2)
            for root in candidates:
                path = root / name
                try:
                    path.mkdir(exist_ok=True)
                    self.parents[controller] = path
                    break
                except OSError as exc:
                    last_error = exc
                    continue
            else:
                logger.warning(
                    "sandbox: no writable %s cgroup (%s); the %s limit is not enforced. Run as root or delegate a "
                    "cgroup to this user to enforce it.",
                    controller,
                    last_error or "no cgroup hierarchy",
                    "process" if controller == "pids" else "episode memory",
                )

    @staticmethod
    def _v2_root() -> Path | None:
        for root in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
            if (root / "cgroup.controllers").exists():
                return root
        return None

    @staticmethod
    def _v2_controllers(root: Path) -> set[str]:
        try:
            return set((root / "cgroup.subtree_control").read_text().split())
        except OSError:
            return set()

    def create(self, kernel_id: str, *, pids_max: int, memory_bytes: int) -> CgroupHandle | None:
        dirs: dict[str, Path] = {}
        limits = {"pids": pids_max, "memory": memory_bytes}
        for controller, parent in self.parents.items():
            path = parent / kernel_id
            try:
                path.mkdir(exist_ok=True)
                if limits[controller]:
                    v1_file, v2_file = _LIMIT_FILES[controller]
                    limit_file = path / v1_file if (path / v1_file).exists() else path / v2_file
                    limit_file.write_text(str(limits[controller]))
                dirs[controller] = path
            except OSError as exc:
                logger.warning(
                    "sandbox: cannot set up the %s cgroup %s (%s); limit not enforced", controller, path, exc
                )
        return CgroupHandle(dirs) if dirs else None

    def close(self) -> None:
        for path in set(self.parents.values()):
            for child in path.iterdir() if path.exists() else []:
                if child.is_dir():
                    CgroupHandle({"x": child}).remove()
            try:
                path.rmdir()
            except OSError:
                pass
