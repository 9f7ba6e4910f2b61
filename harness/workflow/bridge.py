"""The bridge that lets the manager runtime drive — and supervise — any workflow as a worker.

:class:`WorkflowWorker` implements :class:`~harness.worker.base.Worker`. A question (``begin``) becomes a
:class:`~harness.workflow.context.Context` whose workflow ``solve(ctx)`` runs as a coroutine on the scheduler's event
loop; **every sandbox execution is one worker step**. After each execution the workflow is paused until the runtime
asks for the next step (``step()``), so the runtime's segment-induced flow reviews any workflow every N sandbox
executions, exactly as it reviews the ReAct worker every N steps, and a ``note`` (a windowed hint) reaches the
workflow's next LLM call. ``repair(turn_id, hint)`` runs the workflow's ``revise(ctx, hint)`` within the reserved
``repair_steps`` executions (the step hook does not pause there). A question ends when ``solve`` returns, or when its
budget is spent or the model's structured replies never fit their schema (recorded in the question's artifacts under
``"stopped"``); any other exception is re-raised by ``step``/``repair`` in the runtime's thread.

Threads: the runtime runs in a scheduler thread (``Scheduler.offload``) and blocks in ``step()``; the workflow runs
on the loop; steps cross over a ``queue.Queue`` and the go-signal is an ``asyncio.Event`` set with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from typing import Any

from harness.llm import ChatBackend
from harness.sandbox import ExecutionResult
from harness.tasks import Task
from harness.tasks.contract import render_contract
from harness.tasks.profile import profile_directory
from harness.worker.base import StepwiseWorker
from harness.worker.step import WorkerStep
from harness.workflow.agents import Workflow
from harness.workflow.context import BudgetExceeded, Context, Cost, Environment
from harness.workflow.operators import StructuredOutputError
from harness.workflow.scheduler import Scheduler

logger = logging.getLogger(__name__)

_DONE = object()


class EpisodeEnded(RuntimeError):
    """Raised in a workflow paused after an execution when the episode ends without resuming it (see ``aclose``)."""


STOPPING = (BudgetExceeded, StructuredOutputError, EpisodeEnded)
"""Exceptions that end a question (it keeps the answer it has) instead of the episode."""


class WorkflowWorker(StepwiseWorker):
    """A workflow as a :class:`~harness.worker.base.Worker` (see the module docstring)."""

    def __init__(
        self,
        workflow: Workflow,
        task: Task,
        env: Environment,
        backend: ChatBackend,
        scheduler: Scheduler,
        loop: asyncio.AbstractEventLoop,
    ):
        self.workflow, self.task, self.env, self.backend = workflow, task, env, backend
        self.scheduler, self.loop = scheduler, loop
        self.simulated = bool(getattr(backend, "simulated", False))
        self.steps: list[WorkerStep] = []
        self.answers: dict[str, Any] = {}
        self.artifacts: dict[str, dict[str, Any]] = {}
        """Turn id -> that question's ``ctx.artifacts`` (outcome, search tree, submission ...)."""
        self.cost = Cost()
        self.memory: list[str] = []
        self._profile: Any = None
        self._ctx: Context | None = None
        self._notes: list[str] = []  # notes given before the first question
        self._out: queue.Queue = queue.Queue()
        self._go: asyncio.Event | None = None
        self._started = False
        self._done = True
        self._solving: Any = None  # the concurrent future of the running question
        self._ended = False
        self._mark = (0, 0, time.perf_counter())  # tokens and clock at the last step

    @property
    def repair_steps(self) -> int:
        return self.workflow.config.repair_steps

    @property
    def finished(self) -> bool:
        return self._done

    # ---- Worker protocol ------------------------------------------------------------------------------------------
    def begin(self, turn_id: str, prompt: str, hint: str | None = None) -> None:
        if not self._done:
            raise RuntimeError(f"begin({turn_id!r}) while question {self._ctx.turn_id!r} is still running.")
        ctx = Context(
            task=self.task, turn_id=turn_id, question=prompt, contract=self._contract(turn_id),
            config=self.workflow.config, backend=self.backend, env=self.env, scheduler=self.scheduler,
            cost=self.cost, memory=self.memory, on_step=self._pause_after,
        )  # fmt: skip
        ctx.notes += self._notes + ([hint] if hint else [])
        self._notes = []
        self._ctx, self._out, self._go, self._started, self._done = ctx, queue.Queue(), asyncio.Event(), False, False
        self._mark = (self.cost.prompt_tokens, self.cost.completion_tokens, time.perf_counter())

    def step(self) -> WorkerStep | None:
        if self._done:
            return None
        if not self._started:
            self._started = True
            self._solving = asyncio.run_coroutine_threadsafe(self._solve(self._ctx), self.loop)
        else:
            self.loop.call_soon_threadsafe(self._go.set)
        item = self._out.get()
        if item is _DONE or isinstance(item, BaseException):
            self._done = True
            if isinstance(item, BaseException):
                raise item
            return None
        return item

    def note(self, text: str) -> None:
        (self._ctx.notes if self._ctx is not None else self._notes).append(text)

    def repair(self, turn_id: str, hint: str) -> list[WorkerStep]:
        """Run the workflow's ``revise`` within ``repair_steps`` executions; the steps it took."""
        if self._ctx is None or self._ctx.turn_id != turn_id:
            raise RuntimeError(f"repair({turn_id!r}): that question is not the current one.")
        parent = self._ctx
        first = len(self.steps)

        async def on_step(thought: str, code: str, result: ExecutionResult, meta: dict[str, Any]) -> None:
            self._record(child, thought, code, result, {**meta, "repair": "re-analysis"})

        child = parent.child(max_steps=self.repair_steps, on_step=on_step)
        asyncio.run_coroutine_threadsafe(self._run(self.workflow.revise(child, hint), child), self.loop).result()
        parent.answer = child.answer
        if child.answer is not None:
            self.answers[turn_id] = child.answer
        return self.steps[first:]

    async def aclose(self) -> None:
        """End a question that is still running (the episode stopped early, e.g. on an error): a paused workflow
        gets :class:`EpisodeEnded` instead of resuming. Waits until it has stopped. Called on the event loop."""
        if self._solving is None or self._solving.done():
            return
        self._ended = True
        self._go.set()
        await asyncio.wrap_future(self._solving)

    # ---- internals ------------------------------------------------------------------------------------------------
    def _contract(self, turn_id: str) -> str:
        if self._profile is None:
            self._profile = profile_directory(self.task.public_dir)
        return render_contract(self.task, self._profile, turn_id=turn_id if self.task.kind == "multi_turn" else None)

    async def _run(self, coro: Any, ctx: Context) -> None:
        """Await a workflow coroutine; a stopping exception ends it quietly; keep the question's answer."""
        try:
            await coro
        except STOPPING as exc:
            logger.info("task %s question %s stopped: %s", self.task.id, ctx.turn_id, exc)
            ctx.artifacts["stopped"] = f"{type(exc).__name__}: {exc}"
        finally:
            if ctx.answer is not None:
                self.answers[ctx.turn_id] = ctx.answer
            self.artifacts[ctx.turn_id] = ctx.artifacts

    async def _solve(self, ctx: Context) -> None:
        try:
            await self._run(self.workflow.solve(ctx), ctx)
        except BaseException as exc:  # re-raised by step() in the runtime's thread
            self._out.put(exc)
            return
        self._out.put(_DONE)

    async def _pause_after(self, thought: str, code: str, result: ExecutionResult, meta: dict[str, Any]) -> None:
        """The step hook of a question: record the execution as a step, hand it over, wait for the next step()."""
        step = self._record(self._ctx, thought, code, result, meta)
        if self._ended:
            raise EpisodeEnded(f"task {self.task.id}: the episode ended while the workflow was running.")
        self._go.clear()
        self._out.put(step)
        await self._go.wait()
        if self._ended:
            raise EpisodeEnded(f"task {self.task.id}: the episode ended while the workflow was paused.")

    def _record(
        self, ctx: Context, thought: str, code: str, result: ExecutionResult, meta: dict[str, Any]
    ) -> WorkerStep:
        prompt_tokens, completion_tokens, t0 = self._mark
        now = time.perf_counter()
        step = WorkerStep(
            step_id=len(self.steps),
            turn_id=ctx.turn_id,
            thought=thought,
            code=code,
            result=result,
            answer=ctx.answer,
            duration_s=now - t0,
            prompt_tokens=self.cost.prompt_tokens - prompt_tokens,
            completion_tokens=self.cost.completion_tokens - completion_tokens,
            simulated=self.simulated,
            meta={**meta, "workflow": self.workflow.name},
        )
        self._mark = (self.cost.prompt_tokens, self.cost.completion_tokens, now)
        self.steps.append(step)
        return step
