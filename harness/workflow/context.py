"""The context an operator runs in: the question, the model, the sandbox, the budgets, the cost and the notes.

A :class:`Context` is made per question (a single task is one question, a multi-turn task one per turn) by the
:class:`~harness.workflow.bridge.WorkflowWorker` (or directly, in tests). It is the only way operators reach the
outside world, which is what makes a workflow supervisable and accountable:

- :meth:`Context.chat` sends messages to the chat backend through the scheduler's ``llm`` slots, and counts calls,
  tokens and seconds in :class:`Cost`;
- :meth:`Context.execute` runs code in the episode's kernel, or with ``fresh=True`` in a fresh sandbox process that
  shares the workspace, through the scheduler's ``sandbox`` slots; every execution is reported to ``on_step``
  (the bridge turns it into a worker step the manager sees and may pause after). Executions beyond ``max_steps``
  raise :class:`StepBudgetExceeded`; any call after the time budget raises :class:`TimeBudgetExceeded` — both are
  :class:`BudgetExceeded`, which ends the question with the answer it has;
- ``notes`` are texts from a supervisor (the manager's hints) that every later prompt of the question includes
  (``$notes``); a conversational workflow (react) takes each once with :meth:`Context.new_notes`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from harness.llm import ChatBackend, ChatReply, Message
from harness.sandbox import ExecutionResult, Kernel
from harness.tasks import Task
from harness.untrusted import neutralize
from harness.workflow.artifacts import target_text
from harness.workflow.config import WorkflowConfig
from harness.workflow.prompts import SYSTEM
from harness.workflow.scheduler import Scheduler


class BudgetExceeded(RuntimeError):
    """A question's budget is spent; the workflow stops and the question keeps the answer it has."""


class StepBudgetExceeded(BudgetExceeded):
    """More sandbox executions than the question (or the re-analysis) may take."""


class TimeBudgetExceeded(BudgetExceeded):
    """The question's wall-clock budget (``WorkflowConfig.time_budget_s``) is spent."""


@dataclass
class Cost:
    """What a task cost: LLM calls and tokens, sandbox executions, and seconds spent in each."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_s: float = 0.0
    executions: int = 0
    execution_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Environment:
    """Where a task's code runs: the episode's kernel and, for fresh processes, a factory of kernels that share its
    workspace (``fresh_kernel`` None: fresh processes are unavailable)."""

    kernel: Kernel
    fresh_kernel: Callable[[], Kernel] | None = None

    @property
    def workdir(self) -> Path:
        return Path(self.kernel.workspace)


StepHook = Callable[[str, str, ExecutionResult, dict[str, Any]], Awaitable[None]]
"""``on_step(thought, code, result, meta)``: called after every execution (see the module docstring)."""


@dataclass
class Context:
    """One question of one task (see the module docstring)."""

    task: Task
    turn_id: str
    question: str
    contract: str
    config: WorkflowConfig
    backend: ChatBackend
    env: Environment
    scheduler: Scheduler
    cost: Cost = field(default_factory=Cost)
    notes: list[str] = field(default_factory=list)
    memory: list[str] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    answer: Any = None
    on_step: StepHook | None = None
    max_steps: int | None = None
    """Executions allowed in this context (None: ``config.max_steps``)."""
    steps_taken: int = 0
    delivered: int = 0
    """Notes already delivered by :meth:`new_notes`."""
    started: float = field(default_factory=time.monotonic)

    # ---- budgets ------------------------------------------------------------------------------------------------
    def time_left(self) -> float:
        return self.config.time_budget_s - (time.monotonic() - self.started)

    def _check_time(self) -> None:
        if self.time_left() <= 0:
            raise TimeBudgetExceeded(
                f"task {self.task.id} question {self.turn_id}: time budget of {self.config.time_budget_s:g} s spent."
            )

    # ---- model ----------------------------------------------------------------------------------------------------
    def notes_text(self) -> str:
        """All supervisor notes of this question as one text (for ``$notes``), empty when there are none."""
        if not self.notes:
            return ""
        return "\nSupervisor notes (for reference; verify before use):\n" + "\n\n".join(self.notes) + "\n"

    def new_notes(self) -> list[str]:
        """The notes not yet returned by this method (for a conversation that keeps them once delivered)."""
        fresh = self.notes[self.delivered :]
        self.delivered = len(self.notes)
        return fresh

    def render(self, name: str, **fields: Any) -> str:
        """The prompt template ``name`` filled with the contract, target, memory, pending notes and ``fields``."""
        memory = "\nEarlier results:\n" + "\n".join(f"- {m}" for m in self.memory) + "\n" if self.memory else ""
        values = {"contract": self.contract, "target": target_text(self.task), "memory": memory, **fields}
        values.setdefault("notes", self.notes_text())
        return Template(self.config.prompt(name)).substitute({k: str(v) for k, v in values.items()})

    async def chat(self, messages: list[Message]) -> ChatReply:
        """One LLM call (under an ``llm`` slot), accounted in :attr:`cost`."""
        self._check_time()
        t0 = time.perf_counter()
        reply = await self.scheduler.llm(self.backend.chat, list(messages))
        self.cost.llm_calls += 1
        self.cost.prompt_tokens += reply.prompt_tokens
        self.cost.completion_tokens += reply.completion_tokens
        self.cost.llm_s += time.perf_counter() - t0
        return reply

    async def ask(self, prompt: str) -> ChatReply:
        """A single-turn call: the system prompt and ``prompt``. The prompt (an operator's template filled with the
        question, data profile, code and output) is untrusted text (:func:`harness.untrusted.neutralize`)."""
        return await self.chat(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": neutralize(prompt)}]
        )

    # ---- sandbox --------------------------------------------------------------------------------------------------
    async def execute(
        self, code: str, *, fresh: bool = False, thought: str = "", meta: dict[str, Any] | None = None
    ) -> ExecutionResult:
        """Run ``code`` in the kernel (``fresh``: in a fresh process sharing the workspace); never raises for errors
        in ``code``. Raises :class:`BudgetExceeded` when the step or time budget is spent."""
        limit = self.config.max_steps if self.max_steps is None else self.max_steps
        if self.steps_taken >= limit:
            raise StepBudgetExceeded(
                f"task {self.task.id} question {self.turn_id}: all {limit} sandbox executions are spent."
            )
        self._check_time()
        self.steps_taken += 1
        timeout = max(1.0, min(self.config.cell_timeout_s, self.time_left()))
        t0 = time.perf_counter()
        if fresh:
            result = await self.scheduler.sandbox(self._run_fresh, code, timeout)
        else:
            result = await self.scheduler.sandbox(self.env.kernel.execute, code, timeout)
        self.cost.executions += 1
        self.cost.execution_s += time.perf_counter() - t0
        if self.on_step is not None:
            await self.on_step(thought, code, result, {**(meta or {}), "fresh_process": fresh})
        return result

    def _run_fresh(self, code: str, timeout: float) -> ExecutionResult:
        if self.env.fresh_kernel is None:
            raise RuntimeError(
                "this context has no fresh-process factory (Environment.fresh_kernel); run_agent and the bench "
                "provide one — pass fresh_kernel=... when building an Environment by hand."
            )
        with self.scheduler.kernel_lock:
            kernel = self.env.fresh_kernel()
        with kernel:
            return kernel.execute(code, timeout)

    def child(self, *, max_steps: int, on_step: StepHook | None) -> Context:
        """A context for a re-analysis of this question: same task, model, kernel, cost, notes and memory; its own
        step budget and step hook; it starts from this context's answer."""
        return Context(
            task=self.task, turn_id=self.turn_id, question=self.question, contract=self.contract, config=self.config,
            backend=self.backend, env=self.env, scheduler=self.scheduler, cost=self.cost, notes=self.notes,
            memory=self.memory, artifacts=self.artifacts, answer=self.answer, on_step=on_step, max_steps=max_steps,
            delivered=self.delivered,
        )  # fmt: skip
