"""What both environments share: the sandbox they recycle, the isolation default and the episode thread's life.

:class:`SandboxHolder` keeps ONE :class:`~harness.sandbox.Sandbox` per environment (started on the first ``reset``,
so constructing an environment is cheap) and one kernel per episode: each ``reset`` closes the previous episode's
kernel before it forks a new one, and ``close`` shuts the sandbox down. Nothing is left running between episodes
but the sandbox's zygote, so process count and memory stay flat over any number of resets
(``tests/envs/test_soak.py``).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from harness.sandbox import Kernel, Sandbox, SandboxConfig

logger = logging.getLogger(__name__)


def default_isolation(isolation: str | None) -> str:
    """``isolation`` as given, else ``bwrap`` when bubblewrap is installed, else ``none`` (logged)."""
    if isolation is not None:
        return isolation
    if shutil.which("bwrap"):
        return "bwrap"
    logger.warning("bubblewrap (bwrap) is not installed: the environment's sandbox runs with isolation 'none'")
    return "none"


class SandboxHolder:
    """One sandbox per environment (or one shared by a batch), one live kernel at a time (module docstring)."""

    def __init__(self, isolation: str | None, sandbox: Sandbox | None = None):
        self.isolation = default_isolation(isolation) if sandbox is None else sandbox.config.isolation
        self.sandbox = sandbox
        self.owned = sandbox is None  # a shared sandbox (ManagerEnvBatch) is closed by its owner
        self.kernel: Kernel | None = None
        self.kernels_started = 0

    def new_kernel(self, public_dir: str | Path) -> Kernel:
        """Close the current kernel (if any) and start a fresh one on ``public_dir``."""
        self.close_kernel()
        if self.sandbox is None:
            self.sandbox = Sandbox(SandboxConfig(isolation=self.isolation))
        self.kernel = self.sandbox.new_kernel(public_dir)
        self.kernels_started += 1
        return self.kernel

    def close_kernel(self) -> None:
        if self.kernel is not None:
            kernel, self.kernel = self.kernel, None
            kernel.close()

    def close(self) -> None:
        """Close the kernel and (when this holder started it) the sandbox; safe to call twice."""
        self.close_kernel()
        if self.sandbox is not None and self.owned:
            sandbox, self.sandbox = self.sandbox, None
            sandbox.close()
