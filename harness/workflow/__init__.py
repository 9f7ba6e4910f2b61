"""Workflow layer: agents as executable operator programs over the task contract.

Different agents run under the same sandbox, task interface, graders and manager supervision, so they can be
compared. The pieces, bottom up:

- :mod:`.operators`: atomic async capabilities with declared inputs/outputs (inspect data, analyze, plan, generate
  code, execute, validate artifact, debug, review, improve, submit, summarize memory); structured LLM replies are
  schema-checked before use, execution goes through the sandbox, submissions are checked against the task's
  submission contract (:mod:`.artifacts`) before grading.
- :mod:`.controllers`: fixed sequence, conditional/iterative retries, policy-driven search, and a small DAG runtime.
- :mod:`.context` and :mod:`.config`: what an operator runs in (model, kernel, budgets, notes, cost) and the
  :class:`WorkflowConfig` (prompts, model, temperature, iterations, time budget, validation threshold).
- :mod:`.scheduler`: global limits on concurrent tasks, LLM calls and sandbox processes.
- :mod:`.agents`: the reference agents ``react``, ``direct``, ``pipeline``, ``search`` and the :class:`Workflow` base
  class (a custom agent implements ``solve(ctx)``).
- :mod:`.bridge`: any workflow as a manager-runtime worker (one step per sandbox execution), so the state manager
  supervises every agent alike; :mod:`.api`: :func:`run_agent`; :mod:`.bench`: ``stateguard bench run``.

A custom workflow in a few lines::

    from harness.workflow import Execute, GenerateCode, Submit, ValidateArtifact, Workflow, run_agent

    class OneShot(Workflow):
        name = "one-shot"

        async def solve(self, ctx):
            code = (await GenerateCode("direct")(ctx, plan=None))["code"]
            result, validation = await self.attempt(ctx, code, fresh=True)   # run it, check the submission
            await Submit()(ctx, validation=validation)

    result = run_agent("retail-sales", workflow=OneShot, model="http://localhost:8000/v1", manager="rule")
    print(result.grade["score"], result.cost)
"""

from harness.workflow.agents import (
    DIRECT_OUTCOMES,
    WORKFLOWS,
    DirectWorkflow,
    PipelineWorkflow,
    ReactWorkflow,
    SearchWorkflow,
    Workflow,
    make_workflow,
    register_workflow,
)
from harness.workflow.api import AgentResult, arun_agent, make_backend, run_agent
from harness.workflow.artifacts import Validation
from harness.workflow.bridge import WorkflowWorker
from harness.workflow.config import SchedulerConfig, WorkflowConfig
from harness.workflow.context import BudgetExceeded, Context, Cost, Environment
from harness.workflow.controllers import DAG, Edge, Iterate, Search, Sequence
from harness.workflow.fake import FakeChatBackend
from harness.workflow.operators import (
    Analyze,
    Debug,
    Execute,
    GenerateCode,
    Improve,
    InspectData,
    Operator,
    Plan,
    Review,
    StructuredOutputError,
    Submit,
    SummarizeMemory,
    ValidateArtifact,
)
from harness.workflow.scheduler import Scheduler

__all__ = [
    "DAG",
    "DIRECT_OUTCOMES",
    "WORKFLOWS",
    "AgentResult",
    "Analyze",
    "BudgetExceeded",
    "Context",
    "Cost",
    "Debug",
    "DirectWorkflow",
    "Edge",
    "Environment",
    "Execute",
    "FakeChatBackend",
    "GenerateCode",
    "Improve",
    "InspectData",
    "Iterate",
    "Operator",
    "PipelineWorkflow",
    "Plan",
    "ReactWorkflow",
    "Review",
    "Scheduler",
    "SchedulerConfig",
    "Search",
    "SearchWorkflow",
    "Sequence",
    "StructuredOutputError",
    "Submit",
    "SummarizeMemory",
    "ValidateArtifact",
    "Validation",
    "Workflow",
    "WorkflowConfig",
    "WorkflowWorker",
    "arun_agent",
    "make_backend",
    "make_workflow",
    "register_workflow",
    "run_agent",
]
