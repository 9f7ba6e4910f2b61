"""Reference agents: each a workflow program over the operators, selected by one name (:data:`WORKFLOWS`).

- ``react`` (:class:`ReactWorkflow`): the thought + code loop of :class:`~harness.worker.react.ReActWorker` (reused,
  not copied: its model calls and executions are routed through the context, so they are limited, accounted and
  supervised like every other workflow's). Its answer is a valid submission file when it wrote one, else its own.
- ``direct`` (:class:`DirectWorkflow`): one LLM call writes a complete program that reads ``DATA_DIR`` and writes
  the submission into ``WORK_DIR``; it runs in a fresh sandbox process. ``ctx.artifacts["outcome"]`` is one of
  :data:`DIRECT_OUTCOMES`.
- ``pipeline`` (:class:`PipelineWorkflow`): inspect -> analyze -> plan (a DAG), then generate -> execute -> validate
  with at most ``max_iterations`` debug retries, submit, and (multi-turn) a memory summary for later turns.
- ``search`` (:class:`SearchWorkflow`): ``n_drafts`` drafts, debug failures, improve the best by validation score
  (review score of a valid submission, 0 for an invalid one), at most ``max_nodes`` solutions; the best is submitted.
  ``ctx.artifacts["search"]`` holds the tree.

A custom workflow subclasses :class:`Workflow` and implements ``solve(ctx)``: call operators and leave the question's
answer (``Submit``) or the artifact in ``WORK_DIR``. ``revise(ctx, hint)`` (the manager's repair) re-solves with the
hint as a note unless overridden.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.registry import lookup
from harness.sandbox import ExecutionResult, files
from harness.workflow import artifacts
from harness.workflow.artifacts import Validation
from harness.workflow.config import WorkflowConfig
from harness.workflow.context import Context
from harness.workflow.controllers import DAG, Edge, Iterate, Search, Sequence
from harness.workflow.operators import (
    Analyze,
    Debug,
    Execute,
    GenerateCode,
    Improve,
    InspectData,
    Plan,
    Review,
    Submit,
    SummarizeMemory,
    ValidateArtifact,
    result_text,
)

DIRECT_OUTCOMES = ("success", "process_failure", "missing_submission", "invalid_submission", "no_code")
"""``direct``: a valid submission from a clean run; the program failed; it wrote nothing; it wrote a file that fails
the submission contract; the reply held no code block."""


class Workflow:
    """Base of every workflow: one instance per episode (it may keep state across the questions of a task)."""

    name: ClassVar[str] = "custom"

    def __init__(self, config: WorkflowConfig | None = None):
        self.config = config or WorkflowConfig()

    async def solve(self, ctx: Context) -> None:
        """Answer ``ctx.question``: call operators; leave the answer with ``Submit`` or the artifact in WORK_DIR."""
        raise NotImplementedError(f"{type(self).__name__} must implement solve(ctx)")

    async def revise(self, ctx: Context, hint: str) -> None:
        """Re-analyse after a supervisor's repair hint (default: solve again with the hint as a note)."""
        ctx.notes.append(hint)
        await self.solve(ctx)

    async def attempt(
        self, ctx: Context, code: str | None, *, fresh: bool
    ) -> tuple[ExecutionResult | None, Validation]:
        """Run a program (``None``: the reply held no code) and check its submission."""
        if code is None:
            return None, Validation(False, error="the reply held no ```python block; reply with one program.")
        artifacts.clear(ctx.task, ctx.env.workdir)
        result = (await Execute(fresh=fresh, thought=f"{self.name} program")(ctx, code=code))["result"]
        return result, (await ValidateArtifact()(ctx, result=result))["validation"]


def failure_text(result: ExecutionResult | None, validation: Validation) -> str:
    """What went wrong, for the debug operator: the execution's error, else the submission check."""
    if result is not None and not result.ok:
        return result_text(result)
    return f"the program ran, but its submission is {validation.describe()}"


# ---------------------------------------------------------------- direct


class DirectWorkflow(Workflow):
    name = "direct"

    async def solve(self, ctx: Context) -> None:
        code = (await GenerateCode("direct")(ctx, plan=None))["code"]
        result, validation = await self.attempt(ctx, code, fresh=True)
        if code is None:
            outcome = "no_code"
        elif not result.ok:
            outcome = "process_failure"
        elif validation.missing:
            outcome = "missing_submission"
        else:
            outcome = "success" if validation.valid else "invalid_submission"
        ctx.artifacts["outcome"] = outcome
        await Submit()(ctx, validation=validation)


# ---------------------------------------------------------------- pipeline


class PipelineWorkflow(Workflow):
    name = "pipeline"

    async def solve(self, ctx: Context) -> None:
        state: dict[str, Any] = {}
        understand = DAG(
            {"inspect": InspectData(), "analyze": Analyze(), "plan": Plan()},
            [Edge("inspect", "profile", "analyze"), Edge("analyze", "analysis", "plan")],
        )
        await understand.run(ctx, state)

        async def run_and_check(ctx: Context, state: dict[str, Any]) -> None:
            state["result"], state["validation"] = await self.attempt(ctx, state["code"], fresh=False)

        async def debug(ctx: Context, state: dict[str, Any]) -> None:
            error = failure_text(state["result"], state["validation"])
            state.update(await Debug()(ctx, code=state["code"] or "", error=error))

        await Iterate(
            first=Sequence([GenerateCode(), run_and_check]),
            retry=Sequence([debug, run_and_check]),
            until=lambda s: s["validation"].valid and (s["result"] is None or s["result"].ok),
            max_iterations=self.config.max_iterations,
        ).run(ctx, state)
        await Submit()(ctx, validation=state["validation"])
        ctx.artifacts["debug_retries"] = state["iteration"]
        if ctx.task.kind == "multi_turn" and state["validation"].valid:
            await SummarizeMemory()(ctx, code=state["code"], answer=ctx.answer)


# ---------------------------------------------------------------- search


@dataclass
class Node:
    """One solution of the search tree."""

    id: int
    kind: str  # draft | debug | improve
    parent: int | None
    code: str | None
    ok: bool = False
    validation: Validation | None = None
    score: float = 0.0
    issues: tuple[str, ...] = ()
    error: str = ""
    expanded: int = 0  # children made from it
    depth: int = 0  # debug depth
    submission: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        valid = self.validation is not None and self.validation.valid
        return {"id": self.id, "kind": self.kind, "parent": self.parent, "ok": self.ok, "valid": valid,
                "score": self.score, "issues": list(self.issues), "error": self.error[:300]}  # fmt: skip


class SearchWorkflow(Workflow):
    name = "search"

    def policy(self, state: dict[str, Any]) -> str | None:
        """Draft until ``n_drafts``; then debug the shallowest unexpanded failure (up to ``max_iterations`` deep);
        then improve the best valid solution while its score is below ``min_score``; else stop."""
        nodes: list[Node] = state["tree"]
        if sum(n.kind == "draft" for n in nodes) < self.config.n_drafts:
            return "draft"
        if any(self._debuggable(n) for n in nodes):
            return "debug"
        best = self.best(nodes)
        if best is not None and best.score < self.config.min_score and not best.expanded:
            return "improve"
        return None

    def _debuggable(self, node: Node) -> bool:
        return (
            not (node.validation and node.validation.valid)
            and not node.expanded
            and node.depth < (self.config.max_iterations)
        )

    @staticmethod
    def best(nodes: list[Node]) -> Node | None:
        valid = [n for n in nodes if n.validation is not None and n.validation.valid]
        return max(valid, key=lambda n: (n.score, -n.id)) if valid else None

    async def evaluate(self, ctx: Context, state: dict[str, Any], node: Node) -> None:
        result, node.validation = await self.attempt(ctx, node.code, fresh=True)
        node.ok = result is not None and result.ok
        node.error = failure_text(result, node.validation)
        if node.validation.valid:
            node.submission = node.validation.content  # the bytes that were checked, not a second read
            review = await Review()(ctx, code=node.code, result=result, validation=node.validation)
            node.score, node.issues = review["score"], tuple(review["issues"])
        state["tree"].append(node)

    async def solve(self, ctx: Context) -> None:
        state: dict[str, Any] = {"tree": []}

        async def draft(ctx: Context, state: dict[str, Any]) -> None:
            number = sum(n.kind == "draft" for n in state["tree"]) + 1
            code = (await GenerateCode("draft", draft=number)(ctx, plan=None))["code"]
            await self.evaluate(ctx, state, Node(len(state["tree"]), "draft", None, code))

        async def debug(ctx: Context, state: dict[str, Any]) -> None:
            parent = min((n for n in state["tree"] if self._debuggable(n)), key=lambda n: (n.depth, n.id))
            parent.expanded += 1
            code = (await Debug()(ctx, code=parent.code or "", error=parent.error))["code"]
            node = Node(len(state["tree"]), "debug", parent.id, code, depth=parent.depth + 1)
            await self.evaluate(ctx, state, node)

        async def improve(ctx: Context, state: dict[str, Any]) -> None:
            parent = self.best(state["tree"])
            parent.expanded += 1
            code = (await Improve()(ctx, code=parent.code, issues=list(parent.issues)))["code"]
            await self.evaluate(ctx, state, Node(len(state["tree"]), "improve", parent.id, code))

        try:
            steps = {"draft": draft, "debug": debug, "improve": improve}
            await Search(steps, self.policy, budget=self.config.max_nodes).run(ctx, state)
        finally:  # also when the budget runs out: submit the best solution found so far
            ctx.artifacts["search"] = [n.to_dict() for n in state["tree"]]
            await self.submit_best(ctx, state["tree"])

    async def submit_best(self, ctx: Context, nodes: list[Node]) -> None:
        best = self.best(nodes)
        ctx.artifacts["best_node"] = None if best is None else best.id
        if best is None:
            return
        if best.submission is not None:  # replaces whatever is there; a planted link is never written through
            files.write_bytes(ctx.env.workdir, artifacts.submission_file(ctx.task), best.submission)
        else:
            artifacts.clear(ctx.task, ctx.env.workdir)
        await Submit()(ctx, validation=best.validation)


# ---------------------------------------------------------------- react


class _ContextBackend:
    """The ReAct worker's chat backend: supervisor notes join its conversation, calls go through the context."""

    def __init__(self, owner: ReactWorkflow, loop: asyncio.AbstractEventLoop):
        self.owner, self.loop = owner, loop

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Any:
        ctx, worker = self.owner.ctx, self.owner.worker
        for note in ctx.new_notes():
            worker.note(note)
        return asyncio.run_coroutine_threadsafe(ctx.chat(worker.messages), self.loop).result()


class _ContextKernel:
    """The ReAct worker's kernel: executions go through the context (limits, accounting, supervision)."""

    def __init__(self, owner: ReactWorkflow, loop: asyncio.AbstractEventLoop):
        self.owner, self.loop = owner, loop

    def execute(self, code: str, timeout: float | None = None) -> ExecutionResult:
        from harness.worker.react import parse_worker_reply

        thought = parse_worker_reply(self.owner.worker.messages[-1]["content"]).thought
        return asyncio.run_coroutine_threadsafe(self.owner.ctx.execute(code, thought=thought), self.loop).result()


class ReactWorkflow(Workflow):
    name = "react"

    def __init__(self, config: WorkflowConfig | None = None):
        super().__init__(config)
        self.worker: Any = None  # one ReActWorker (one conversation) per episode
        self.ctx: Context | None = None

    def _bind(self, ctx: Context) -> Any:
        from harness.worker.react import ReActConfig, ReActWorker

        self.ctx = ctx
        if self.worker is None:
            loop = asyncio.get_running_loop()
            config = ReActConfig(max_steps=self.config.max_steps, repair_steps=self.config.repair_steps)
            self.worker = ReActWorker(
                _ContextBackend(self, loop), _ContextKernel(self, loop), config, contract=ctx.contract
            )
        return self.worker

    async def solve(self, ctx: Context) -> None:
        worker = self._bind(ctx)
        artifacts.clear(ctx.task, ctx.env.workdir)
        try:
            await ctx.scheduler.offload(worker.run_turn, ctx.turn_id, ctx.question)
        finally:
            self._answer(ctx)

    def _answer(self, ctx: Context) -> None:
        """The question's answer: a valid submission file (or structured ``print_result`` value) when there is one,
        else the worker's own (textual) final answer."""
        answer = self.worker.answers.get(ctx.turn_id)
        reported = answer if isinstance(answer, dict) else artifacts.NO_RESULT
        validation = artifacts.check(ctx.task, ctx.env.workdir, reported)
        ctx.answer = validation.answer if validation.valid and ctx.task.kind != "artifact" else answer

    async def revise(self, ctx: Context, hint: str) -> None:
        question = self.ctx  # a paused question (segment flow) resumes with its own context afterwards
        worker = self._bind(ctx)
        try:
            await ctx.scheduler.offload(worker.repair, ctx.turn_id, hint)
        finally:
            self._answer(ctx)
            self.ctx = question or ctx


WORKFLOWS: dict[str, type[Workflow]] = {
    cls.name: cls for cls in (ReactWorkflow, DirectWorkflow, PipelineWorkflow, SearchWorkflow)
}
"""Workflow name -> class; :func:`register_workflow` adds custom ones."""


def register_workflow(cls: type[Workflow]) -> type[Workflow]:
    """Make ``cls`` selectable by its ``name`` (usable as a class decorator)."""
    if cls.name in WORKFLOWS and WORKFLOWS[cls.name] is not cls:
        raise ValueError(f"a workflow named {cls.name!r} is already registered ({WORKFLOWS[cls.name].__name__}).")
    WORKFLOWS[cls.name] = cls
    return cls


def make_workflow(spec: str | type[Workflow] | Workflow, config: WorkflowConfig | None = None) -> Workflow:
    """A fresh workflow from a registered name, a :class:`Workflow` subclass, or an instance (used as is)."""
    if isinstance(spec, Workflow):
        return spec
    if isinstance(spec, type) and issubclass(spec, Workflow):
        return spec(config)
    return lookup(WORKFLOWS, spec, what="workflow", fix="Or subclass harness.workflow.Workflow.")(config)
