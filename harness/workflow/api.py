"""``run_agent``: one task, one workflow, one model, optionally supervised by a manager -> artifacts, grade, cost.

::

    from harness.workflow import run_agent
    result = run_agent("retail-sales", workflow="pipeline", model="http://localhost:8000/v1", manager="rule")
    result.grade["score"], result.cost["prompt_tokens"], result.files

The episode is played by the manager runtime (:class:`~harness.manager.runtime.ManagerRuntime`) with the workflow as
its worker (:class:`~harness.workflow.bridge.WorkflowWorker`): ``manager=None`` is the ``none`` policy (no review);
any :func:`~harness.manager.policy_registry.get_policy` spec or policy object supervises it (segment flow: a review
every ``segment_steps`` sandbox executions). The record is the same :class:`~harness.manager.episode.EpisodeRecord` as
``stateguard run`` writes, with ``config["workflow"]`` added (name, model, cost, per-question artifacts).

Models (``model=``): a chat backend object (:mod:`harness.llm`, or :class:`~harness.workflow.fake.FakeChatBackend`),
an OpenAI-compatible API root ``http://HOST:PORT/v1`` (also ``openai:URL``), ``hf:PATH`` (in-process transformers),
or ``fake:FILE`` (canned replies, SIMULATED).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.llm import ChatBackend
from harness.manager.episode import EpisodeRecord
from harness.sandbox import files as workspace_files
from harness.tasks import Task
from harness.workflow.agents import Workflow, make_workflow
from harness.workflow.bridge import WorkflowWorker
from harness.workflow.config import WorkflowConfig
from harness.workflow.context import Environment
from harness.workflow.scheduler import Scheduler

MODEL_FORMS = "http://HOST:PORT/v1 | openai:URL | hf:PATH | fake:FILE | a ChatBackend object"


@dataclass
class AgentResult:
    """What one agent run produced and cost."""

    task_id: str
    workflow: str
    manager: str
    grade: dict[str, Any]
    answers: dict[str, Any]
    artifacts: dict[str, dict[str, Any]]
    """Turn id -> that question's artifacts (outcome, search tree, submission, why it stopped ...)."""
    files: dict[str, str]
    """Files left in the work directory: name -> path."""
    cost: dict[str, Any]
    """LLM calls, prompt/completion tokens, LLM seconds, executions, execution seconds, steps, wall seconds."""
    simulated: bool
    record: EpisodeRecord = field(repr=False)

    @property
    def score(self) -> float | None:
        return self.grade.get("score")


def make_backend(model: str | ChatBackend | None, config: WorkflowConfig) -> ChatBackend:
    """The chat backend named by ``model`` (see the module docstring)."""
    if model is None:
        raise ValueError(f"no model: pass model= (or WorkflowConfig.model) as one of {MODEL_FORMS}.")
    if not isinstance(model, str):
        return model
    kind, _, arg = model.partition(":")
    if model.startswith(("http://", "https://")) or (kind == "openai" and arg):
        from harness.llm import OpenAIChatBackend

        url = model if kind != "openai" else arg
        return OpenAIChatBackend(url, temperature=config.temperature, max_tokens=config.max_tokens)
    if kind == "hf" and arg:
        from harness.llm import HFChatBackend

        if not Path(arg).is_dir():
            raise ValueError(f"model {model}: {arg} is not a checkpoint folder.")
        return HFChatBackend(arg, max_new_tokens=config.max_tokens, do_sample=config.temperature > 0)
    if kind == "fake" and arg:
        from harness.workflow.fake import FakeChatBackend

        return FakeChatBackend.from_file(arg)
    raise ValueError(f"model {model!r} is not understood; use one of {MODEL_FORMS}.")


def resolve_task(task: Task | str | Path) -> Task:
    if isinstance(task, Task):
        return task
    from harness.tasks import load_task, resolve_task_path

    return load_task(resolve_task_path(str(task)))


async def arun_agent(
    task: Task | str | Path,
    workflow: str | type[Workflow] | Workflow = "react",
    model: str | ChatBackend | None = None,
    manager: Any = None,
    *,
    config: WorkflowConfig | None = None,
    runtime: dict[str, Any] | None = None,
    scheduler: Scheduler | None = None,
    sandbox: Any = None,
    isolation: str = "bwrap",
    workdir: str | Path | None = None,
) -> AgentResult:
    """:func:`run_agent` inside a running event loop; ``scheduler`` and ``sandbox`` are shared when given."""
    from harness.manager import ManagerRuntime, RuntimeConfig, get_policy
    from harness.sandbox import Sandbox, SandboxConfig

    task = resolve_task(task)
    config = config or WorkflowConfig()
    backend = make_backend(model if model is not None else config.model, config)
    policy = get_policy(manager or "none") if manager is None or isinstance(manager, str) else manager
    runtime_config = RuntimeConfig(**(runtime or {}))
    agent = make_workflow(workflow, config)
    own_scheduler, own_sandbox = scheduler is None, sandbox is None
    scheduler = scheduler or Scheduler()
    sandbox = sandbox or Sandbox(SandboxConfig(isolation=isolation))
    workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"workflow-{task.id}-"))
    t0 = time.perf_counter()
    try:

        def new_kernel() -> Any:
            with scheduler.kernel_lock:
                return sandbox.new_kernel(task.public_dir, workspace=workdir)

        kernel = await scheduler.sandbox(new_kernel)
        try:
            env = Environment(kernel, fresh_kernel=lambda: sandbox.new_kernel(task.public_dir, workspace=workdir))
            worker = WorkflowWorker(agent, task, env, backend, scheduler, asyncio.get_running_loop())
            episode = ManagerRuntime(task, kernel, worker, policy, runtime_config)
            try:
                record = await scheduler.offload(episode.run)
            finally:
                await worker.aclose()  # a workflow still paused when the episode failed must not hang
        finally:
            await scheduler.offload(kernel.close)
    finally:
        if own_sandbox:
            sandbox.close()
        if own_scheduler:
            scheduler.close()
    cost = {**worker.cost.to_dict(), "steps": len(worker.steps), "wall_s": round(time.perf_counter() - t0, 3)}
    record.config["workflow"] = {
        "name": agent.name,
        "model": getattr(backend, "base_url", None) or getattr(backend, "path", None) or type(backend).__name__,
        "config": {k: v for k, v in asdict(agent.config).items() if k != "prompts"},
        "cost": cost,
        "artifacts": worker.artifacts,
    }
    return AgentResult(
        task_id=task.id,
        workflow=agent.name,
        manager=policy.name,
        grade=record.grade or {},
        answers=dict(worker.answers),
        artifacts=worker.artifacts,
        files={
            e.path: str(workdir / e.path) for e in workspace_files.list_files(workdir)
        },  # regular files only, no links
        cost=cost,
        simulated=worker.simulated,
        record=record,
    )


def run_agent(
    task: Task | str | Path,
    workflow: str | type[Workflow] | Workflow = "react",
    model: str | ChatBackend | None = None,
    manager: Any = None,
    **options: Any,
) -> AgentResult:
    """Run ``workflow`` on ``task`` with ``model``, supervised by ``manager`` (None: no manager); the result with
    grade, answers, artifacts and cost. ``options``: see :func:`arun_agent` (config, runtime, isolation, workdir)."""
    return asyncio.run(arun_agent(task, workflow, model, manager, **options))
