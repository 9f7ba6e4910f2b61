"""An episode as a state machine the caller advances: :class:`Episode` over a generator of requests.

The manager runtime plays an episode as a generator (:meth:`harness.manager.runtime.ManagerRuntime.play`): every
time the episode needs an answer from outside it yields a *request* and waits for the answer to be sent in.

- a :class:`~harness.manager.policy_types.PolicyInput` when the manager policy must respond; the answer is the policy's
  response text (wire format). Only an active, reviewing policy gets such requests (``none`` and ``windowed``
  never do).
- a chat message list (``list[dict]``) when the worker's model must reply and the worker has no chat backend of its
  own (a :class:`~harness.worker.react.ReActWorker` built with ``backend=None``); the answer is the reply text (or a
  :class:`~harness.llm.ChatReply`).

:class:`Episode` wraps such a generator::

    episode = runtime.start()
    while (request := episode.next_request()) is not None:
        episode.answer(respond(request))      # or episode.fail(exc): the responder raised
    record = episode.record

:meth:`Episode.answer` runs the episode until its next request (or its end), so the exceptions of the episode itself
(a sandbox failure, a worker bug) are raised there. :meth:`Episode.fail` hands the responder's exception to the
episode at the point of the request: a policy's exception is recorded as a refused action and the episode goes on
(what :meth:`~harness.manager.runtime.ManagerRuntime.run` does with a policy that raises); a worker request re-raises
it. :meth:`Episode.close` abandons an unfinished episode: the generator is closed (``GeneratorExit`` at the waiting
request, which no ``except Exception`` in the runtime can swallow) and the ``on_close`` cleanup runs (the runtime
releases the kernel checkpoints the episode took). Using the episode out of order raises :class:`EpisodeStateError`
naming the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

__all__ = ["Episode", "EpisodeStateError", "Request", "Steps"]

Request = Any
"""What an episode waits for: a :class:`~harness.manager.policy_types.PolicyInput` or a chat message list."""

Steps = Generator[Request, Any, Any]
"""A played episode (or part of one): yields requests, receives their answers, returns its result."""


@dataclass(frozen=True)
class Reply:
    """An answer to a manager request that also says who wrote it: ``actor`` is ``"policy"`` (a model) or
    ``"harness"`` (deterministic bookkeeping of a hierarchical policy). The episode records ``actor`` on the action;
    a plain string answer records none (every action of the activation is the policy's)."""

    text: str
    actor: str


class EpisodeStateError(RuntimeError):
    """An :class:`Episode` was used out of order (answered before a request, after its end, after close)."""


class Episode:
    """One episode the caller advances with :meth:`next_request` and :meth:`answer` (see the module docstring).

    Args:
        steps: the generator that plays the episode.
        on_close: called by :meth:`close` when the episode had not finished (its cleanup).
    """

    def __init__(self, steps: Steps, on_close: Callable[[], None] | None = None):
        self._steps = steps
        self._on_close = on_close
        self._request: Request | None = None
        self.state = "new"
        """new | waiting (a request is pending) | finished | failed (the episode raised) | closed."""
        self.result: Any = None
        """What the generator returned, once finished (a whole episode: its EpisodeRecord)."""

    @property
    def done(self) -> bool:
        """True once the episode finished, raised or was closed: no request will come."""
        return self.state in ("finished", "failed", "closed")

    @property
    def record(self) -> Any:
        """The :class:`~harness.manager.episode.EpisodeRecord` of a finished episode; None before."""
        return self.result

    def next_request(self) -> Request | None:
        """The request waiting for an answer (the first call starts the episode); None once it is done."""
        if self.state == "new":
            self.state = "waiting"
            self._advance(self._steps.__next__)
        return self._request

    def answer(self, response: Any) -> None:
        """Answer the pending request and run the episode until its next request or its end."""
        self._check_waiting("answer")
        self._advance(lambda: self._steps.send(response))

    def fail(self, error: Exception) -> None:
        """The responder raised ``error`` instead of answering: hand it to the episode at the pending request."""
        self._check_waiting("fail")
        self._advance(lambda: self._steps.throw(error))

    def close(self) -> None:
        """Abandon the episode (a no-op once closed): close the generator and, when it had not finished, run the
        ``on_close`` cleanup."""
        if self.state == "closed":
            return
        unfinished = self.state != "finished"
        self.state, self._request = "closed", None
        self._steps.close()
        if unfinished and self._on_close is not None:
            self._on_close()

    def _advance(self, resume: Callable[[], Request]) -> None:
        self._request = None
        try:
            self._request = resume()
        except StopIteration as stop:
            self.state, self.result = "finished", stop.value
        except BaseException:
            self.state = "failed"
            raise

    def _check_waiting(self, what: str) -> None:
        if self.state == "waiting":
            return
        fixes = {
            "new": "call next_request() first",
            "finished": "the episode has ended: read episode.record, and start a new episode for another",
            "failed": "the episode raised an exception and cannot go on; start a new episode",
            "closed": "the episode was closed; start a new episode",
        }
        raise EpisodeStateError(f"Episode.{what}() with no pending request ({self.state}): {fixes[self.state]}.")
