"""What both environments share: the sandbox they recycle, the isolation default, the misuse checks and how they
advance the episode (:func:`advance`: the runtime's :class:`~harness.manager.episode_loop.Episode`, stepped directly).

:class:`SandboxHolder` keeps ONE :class:`~harness.sandbox.Sandbox` per environment (started on the first ``reset``,
so constructing an environment is cheap) and one live kernel: each ``reset`` recycles the previous episode's kernel
when the new episode reads the same public folder (:meth:`harness.sandbox.Kernel.reset`: a fresh kernel process and
namespace without a new bubblewrap episode — the common case in RL, where a group of rollouts replays one episode),
else closes it and starts a new one; ``close`` shuts the sandbox down. Nothing is left running between episodes
but the sandbox's zygote, so process count and memory stay flat over any number of resets
(``tests/envs/test_soak.py``).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, TypeVar

from envs.errors import EpisodeError, StepAfterDoneError, StepBeforeResetError
from harness.manager.episode_loop import Episode, Reply, Request
from harness.sandbox import Kernel, Sandbox, SandboxConfig

logger = logging.getLogger(__name__)

T = TypeVar("T")


def merged_config(cls: type[T], config: T | None, overrides: dict[str, Any], render_mode: str | None, env: str) -> T:
    """``cls`` from ``config``'s fields updated by ``overrides`` (what ``gymnasium.make`` passes); the envs render
    nothing, so a ``render_mode`` is refused with the fix."""
    if render_mode is not None:
        raise ValueError(f"render_mode={render_mode!r}: {env} renders nothing; leave render_mode unset.")
    base = vars(config) if config is not None else {}
    return cls(**{**base, **overrides})


def check_step(env: str, started: bool, done: bool, action: Any, what: str) -> None:
    """The misuse checks every ``step`` starts with: before ``reset``, after the episode ended, a non-string action
    (``what`` says what the action is)."""
    if not started:
        raise StepBeforeResetError(f"{env}.step() was called before reset(); call env.reset() first.")
    if done:
        raise StepAfterDoneError(
            f"{env}.step() was called after the episode ended (terminated or truncated); call env.reset()."
        )
    if not isinstance(action, str):
        raise TypeError(f"the action is {what}, not {type(action).__name__}.")


def advance(episode: Episode, action: str | Reply | None, where: str) -> Request | None:
    """Answer ``episode``'s pending request with ``action`` (None: only read the first request) and return the next
    request (None: the episode ended). An exception raised inside the episode is re-raised as :class:`EpisodeError`
    that names ``where`` (episode and env step), with the original as its ``__cause__``."""
    try:
        if action is not None:
            episode.answer(action)
        return episode.next_request()
    except Exception as exc:
        raise EpisodeError(f"{where}: the episode raised {type(exc).__name__}: {exc}") from exc


def default_isolation(isolation: str | None) -> str:
    """``isolation`` as given, else ``bwrap`` when bubblewrap is installed, else ``none`` (logged)."""
    if isolation is not None:
        return isolation
    if shutil.which("bwrap"):
        return "bwrap"
    logger.warning("bubblewrap (bwrap) is not installed: the environment's sandbox runs with isolation 'none'")
    return "none"


class SandboxHolder:
    """One sandbox per environment (or one shared by several), one live kernel at a time (module docstring)."""

    def __init__(self, isolation: str | None, sandbox: Sandbox | None = None):
        self.isolation = default_isolation(isolation) if sandbox is None else sandbox.config.isolation
        self.sandbox = sandbox
        self.owned = sandbox is None  # a shared sandbox is closed by its owner
        self.kernel: Kernel | None = None
        self.kernels_started = 0
        self.kernels_recycled = 0

    def new_kernel(self, public_dir: str | Path) -> Kernel:
        """A kernel in its start state on ``public_dir``: the current one reset when it reads the same folder, else a
        new one (the current one closed)."""
        if self.kernel is not None and not self.kernel.closed:
            if Path(self.kernel.public_dir).resolve() == Path(public_dir).resolve():
                self.kernel.reset()
                self.kernels_recycled += 1
                return self.kernel
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
