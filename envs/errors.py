"""The environments' typed errors: misuse (:class:`EnvUsageError` and its subclasses, Gymnasium's ``ResetNeeded``)
and a failure inside the episode (:class:`EpisodeError`)."""

from __future__ import annotations

from gymnasium.error import ResetNeeded


class EnvUsageError(ResetNeeded):
    """The environment was used out of order; the message names the fix."""


class StepBeforeResetError(EnvUsageError):
    """``step`` was called before the first ``reset``."""


class StepAfterDoneError(EnvUsageError):
    """``step`` was called after the episode terminated or was truncated."""


class EpisodeError(RuntimeError):
    """The episode raised (the worker, the sandbox, the runtime); the message names the episode and the env step,
    the original exception is the ``__cause__``."""
