"""envs: Gymnasium environments over StateGuard tasks, keeping the Gymnasium contract exactly.

- :class:`~envs.manager.ManagerEnv` (``stateguard/Manager-v0``): the agent is the state manager; the worker inside
  replays synthesized counterfactual episodes (``replay``, over a :class:`~envs.pool.ReplayPool`), plays a task's
  reference programs (``scripted``) or is a model (``openai:URL``, ``hf:PATH``).
  ``format``: ``flat`` (the ``llm`` manager), ``hier`` (tier 1 decides) or ``hier_checks`` (tier 1 writes each
  state's checks; the step's reward is the check-writing reward, a faulted turn's checks also run on its clean twin:
  :mod:`envs.twins`, :mod:`envs.checks_step`).
- :class:`~envs.worker.WorkerEnv` (``stateguard/Worker-v0``): the agent is the ReAct worker.

Both step the runtime's episode directly (:meth:`harness.manager.runtime.ManagerRuntime.start`: ``next_request`` /
``answer``), in the caller's thread. Misuse raises the typed errors of :mod:`envs.errors`.

Both ids are registered on import with default kwargs that need no pool and no model: the built-in task
``retail-sales`` with the scripted worker (``gymnasium.make("stateguard/Manager-v0")``). Pass ``pool=...`` (a
synthesis output folder or a :class:`~envs.pool.ReplayPool`) to ``make`` for the replay worker.
"""

from harness.import_utils import require

require("gymnasium")

import gymnasium  # noqa: E402

from envs.errors import EnvUsageError, EpisodeError, StepAfterDoneError, StepBeforeResetError  # noqa: E402
from envs.manager import ManagerEnv, ManagerEnvConfig  # noqa: E402
from envs.pool import PoolEntry, PoolError, ReplayPool  # noqa: E402
from envs.spaces import MAX_TEXT_CHARS, UnicodeText  # noqa: E402
from envs.worker import WorkerEnv, WorkerEnvConfig  # noqa: E402

ENV_IDS = {
    "stateguard/Manager-v0": ("envs.manager:ManagerEnv", {"task": "retail-sales"}),
    "stateguard/Worker-v0": ("envs.worker:WorkerEnv", {"task": "retail-sales"}),
}
"""Registered id -> (entry point, default kwargs)."""


def register_envs() -> None:
    """Register :data:`ENV_IDS` with Gymnasium (idempotent)."""
    for env_id, (entry_point, kwargs) in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs), disable_env_checker=False)


register_envs()

__all__ = [
    "ENV_IDS",
    "MAX_TEXT_CHARS",
    "EnvUsageError",
    "EpisodeError",
    "ManagerEnv",
    "ManagerEnvConfig",
    "PoolEntry",
    "PoolError",
    "ReplayPool",
    "StepAfterDoneError",
    "StepBeforeResetError",
    "UnicodeText",
    "WorkerEnv",
    "WorkerEnvConfig",
    "register_envs",
]
