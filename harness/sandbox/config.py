"""Configuration of the sandbox (YAML keys equal field names)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from harness.yaml_config import type_problems

ISOLATION_MODES = ("bwrap", "none")


@dataclass
class SandboxConfig:
    """Limits and isolation of the sandboxed kernels. Every limit is per kernel (one episode)."""

    isolation: str = field(
        default="bwrap",
        metadata={
            "help": "'bwrap' (bubblewrap namespaces, required for untrusted code) or 'none' (same fork "
            "machinery without namespaces; Landlock only where available; logs a loud warning)."
        },
    )
    memory_mb: int = field(
        default=2048,
        metadata={
            "help": "Address space a kernel may add on top of its preloaded baseline (RLIMIT_AS), in MiB. "
            "0 disables the limit."
        },
    )
    episode_memory_mb: int = field(
        default=0,
        metadata={
            "help": "Memory cgroup limit for all processes of an episode (kernel, checkpoints, probes, "
            "/tmp). 0 means automatic: 2 * memory_mb + tmp_mb. Needs a writable memory cgroup."
        },
    )
    cell_timeout_s: float = field(
        default=30.0, metadata={"help": "Wall-clock limit per cell; the cell is interrupted, then killed."}
    )
    cpu_time_s: float = field(
        default=0.0, metadata={"help": "CPU-time limit per cell (RLIMIT_CPU). 0 means equal to cell_timeout_s."}
    )
    grace_s: float = field(
        default=2.0,
        metadata={"help": "Extra time the host waits after a deadline before it kills and restarts the kernel."},
    )
    max_processes: int = field(
        default=64, metadata={"help": "Processes/threads user code may run at once (pids cgroup)."}
    )
    max_checkpoints: int = field(default=16, metadata={"help": "Live checkpoints per kernel."})
    max_output_bytes: int = field(
        default=1_000_000, metadata={"help": "Cap on captured stdout and on stderr per cell, in bytes."}
    )
    max_file_mb: int = field(default=1024, metadata={"help": "Largest file a kernel may write (RLIMIT_FSIZE)."})
    max_open_files: int = field(default=1024, metadata={"help": "RLIMIT_NOFILE of kernels."})
    tmp_mb: int = field(default=256, metadata={"help": "Size of each kernel's private /tmp (tmpfs)."})
    max_tracked_files: int = field(
        default=10_000, metadata={"help": "Workspace entries scanned per cell for file changes."}
    )
    private_network: bool = field(
        default=True,
        metadata={
            "help": "Give every kernel its own empty network namespace (loopback only) so episodes cannot "
            "talk to each other. False shares one empty namespace between the kernels of a sandbox."
        },
    )
    landlock: bool = field(
        default=True,
        metadata={
            "help": "Also confine kernels with Landlock where the kernel supports it (writes only to the "
            "workspace and /tmp, no TCP, no signals out of the episode; probes: no writes)."
        },
    )
    preload: list[str] = field(
        default_factory=lambda: ["numpy", "pandas"],
        metadata={"help": "Modules the zygote imports once; kernels fork with them ready."},
    )
    bwrap_path: str = field(default="bwrap", metadata={"help": "bubblewrap executable (name on PATH or path)."})
    python: str = field(
        default="",
        metadata={"help": "Interpreter for the zygote; empty means the one running the host (sys.executable)."},
    )
    extra_ro_binds: list[str] = field(
        default_factory=list,
        metadata={"help": "Extra host paths bound read-only at the same path inside the sandbox (bwrap mode)."},
    )
    start_timeout_s: float = field(
        default=60.0, metadata={"help": "How long to wait for the zygote to import its preload modules."}
    )

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(
                f"isolation={self.isolation!r} is not a known mode; valid values: {', '.join(ISOLATION_MODES)}. "
                "Use 'bwrap' (install bubblewrap) or 'none' on machines without it."
            )
        for name in ("memory_mb", "episode_memory_mb", "max_file_mb", "max_open_files", "max_tracked_files"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} is negative; use a positive value or 0 for no limit.")
        for name in ("cell_timeout_s", "grace_s", "start_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0 seconds; set a positive number.")
        if self.cpu_time_s < 0:
            raise ValueError(f"cpu_time_s={self.cpu_time_s} is negative; use a positive value or 0 (= timeout).")
        if self.max_processes < 1:
            raise ValueError(f"max_processes={self.max_processes} must be >= 1 (the kernel itself is a process).")
        if self.max_checkpoints < 0:
            raise ValueError(f"max_checkpoints={self.max_checkpoints} is negative; use 0 to disable checkpoints.")
        if self.max_output_bytes < 1024:
            raise ValueError(
                f"max_output_bytes={self.max_output_bytes} is below 1024; tracebacks would not fit. Use >= 1024."
            )
        if self.tmp_mb < 1:
            raise ValueError(f"tmp_mb={self.tmp_mb} must be >= 1 MiB.")

    @property
    def effective_cpu_time_s(self) -> float:
        return self.cpu_time_s or self.cell_timeout_s

    @property
    def effective_episode_memory_mb(self) -> int:
        if self.episode_memory_mb:
            return self.episode_memory_mb
        return 2 * self.memory_mb + self.tmp_mb if self.memory_mb else 0

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> SandboxConfig:
        """Load a YAML file whose keys are field names (every value checked against its field's type);
        ``overrides`` win over the file."""
        path = Path(path)
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of SandboxConfig fields, got {type(data).__name__}.")
        data = data.get("sandbox", data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown sandbox keys {unknown}; valid keys: {', '.join(sorted(known))}.")
        wrong = type_problems(cls, data) + type_problems(cls, overrides, label="override")
        if wrong:
            raise ValueError(f"{path}: {'; '.join(wrong)}; fix the values.")
        return cls(**{**data, **overrides})
