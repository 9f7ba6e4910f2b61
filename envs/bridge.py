"""Turning a push-style episode into pull-style steps, and the environments' typed errors.

The manager runtime calls *us* (``policy.respond(PolicyInput) -> str``; the ReAct worker calls
``backend.chat(messages)``); a Gymnasium environment is called by the agent (``step(action)``). :class:`EpisodeThread`
inverts the control flow without touching the runtime: the episode runs in a worker thread, and the callback the
runtime calls (:meth:`EpisodeThread.ask`) hands its question to the environment and blocks until ``step`` supplies
the answer. Exactly one side runs at a time (two one-slot queues), so the environment may read the runtime's
bookkeeping whenever the episode thread waits in :meth:`~EpisodeThread.ask` or has ended.

Messages from the episode thread: ``("ask", question)``, ``("done", result)`` (the play function returned) or
``("error", exception)`` (it raised; :class:`EpisodeError` re-raises it in the caller's thread with the context).
:meth:`EpisodeThread.stop` (on ``reset``, ``close`` or truncation) makes the waiting :meth:`~EpisodeThread.ask`
raise :class:`EpisodeAborted`, a ``BaseException`` so that no ``except Exception`` inside the runtime (which turns
policy failures into refused actions) can swallow it, and joins the thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from gymnasium.error import ResetNeeded

JOIN_TIMEOUT_S = 30.0
"""How long :meth:`EpisodeThread.stop` waits for the episode thread to unwind (a sandbox call may be in flight)."""


class EnvUsageError(ResetNeeded):
    """The environment was used out of order; the message names the fix."""


class StepBeforeResetError(EnvUsageError):
    """``step`` was called before the first ``reset``."""


class StepAfterDoneError(EnvUsageError):
    """``step`` was called after the episode terminated or was truncated."""


class EpisodeError(RuntimeError):
    """The episode thread raised; the original exception is the ``__cause__``."""


class EpisodeAborted(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Raised inside the episode thread by :meth:`EpisodeThread.ask` when the environment stops the episode."""


_STOP = object()


class EpisodeThread:
    """Runs an episode in a daemon thread; :meth:`ask` is the callback the episode uses to get an answer.

    Create it, hand :meth:`ask` to whatever the episode calls (a bridge policy or chat backend), then
    :meth:`start` the play function."""

    def __init__(self, name: str = "stateguard-episode"):
        self._name = name
        self._to_env: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        self._to_episode: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self.finished = False

    def _main(self, play: Callable[[], Any]) -> None:
        try:
            result = play()
        except EpisodeAborted:
            return
        except BaseException as exc:  # handed to the environment, which re-raises it with context
            self._to_env.put(("error", exc))
            return
        self._to_env.put(("done", result))

    # ---------------------------------------------------------------- episode side
    def ask(self, question: Any) -> Any:
        """Hand ``question`` to the environment and wait for its answer (called in the episode thread)."""
        self._to_env.put(("ask", question))
        answer = self._to_episode.get()
        if answer is _STOP:
            raise EpisodeAborted
        return answer

    # ---------------------------------------------------------------- environment side
    def start(self, play: Callable[[], Any]) -> tuple[str, Any]:
        """Run ``play()`` in the episode thread; returns the first message (see the module docstring)."""
        self._thread = threading.Thread(target=self._main, args=(play,), name=self._name, daemon=True)
        self._thread.start()
        return self._receive()

    def answer(self, value: Any) -> tuple[str, Any]:
        """Answer the pending question; the next message."""
        self._to_episode.put(value)
        return self._receive()

    def _receive(self) -> tuple[str, Any]:
        kind, value = self._to_env.get()
        if kind != "ask":
            self.finished = True
            assert self._thread is not None
            self._thread.join()
        if kind == "error":
            raise EpisodeError(f"the episode raised {type(value).__name__}: {value}") from value
        return kind, value

    def stop(self) -> None:
        """Abort a running episode (it waits in :meth:`ask`) and join its thread; a no-op once it has finished."""
        if self._thread is None or not self._thread.is_alive() or self.finished:
            self.finished = True
            return
        self._to_episode.put(_STOP)
        self._thread.join(JOIN_TIMEOUT_S)
        self.finished = True
        if self._thread.is_alive():
            raise EpisodeError(f"the episode thread did not stop within {JOIN_TIMEOUT_S:g} s")
