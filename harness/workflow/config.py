"""Workflow configuration: prompts, model, sampling, budgets and validation thresholds of one agent.

:class:`WorkflowConfig` is what every reference agent (and a custom :class:`~harness.workflow.agents.Workflow`) reads;
:class:`SchedulerConfig` holds the global limits that apply when many tasks run at once. YAML keys equal field names:
``stateguard bench run`` reads :class:`WorkflowConfig` fields, next to those of its
:class:`~harness.workflow.bench.BenchConfig`, from ``--config FILE`` and from one flag per field
(:mod:`harness.config_cli`; unknown keys and wrong types are refused, naming the field or the flag); the scheduler's
limits come from the bench's fields (``--concurrency``, ``--max-llm-calls``, ``--max-sandbox``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.workflow.prompts import PROMPTS


@dataclass
class WorkflowConfig:
    model: str | None = field(
        default=None,
        metadata={"help": "The model: an OpenAI-compatible API root (http://HOST:PORT/v1), hf:PATH, or fake:FILE."},
    )
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature of every LLM call."})
    max_tokens: int = field(default=1024, metadata={"help": "Cap on the tokens of one LLM reply."})
    prompts: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": "Overrides of the operator prompt templates by name (see harness.workflow.prompts)."},
    )
    max_steps: int = field(
        default=12, metadata={"help": "Sandbox executions per question (react: worker steps per question)."}
    )
    repair_steps: int = field(
        default=4, metadata={"help": "Sandbox executions reserved for one manager-triggered re-analysis."}
    )
    max_iterations: int = field(
        default=3, metadata={"help": "Debug retries after a failed execution or an invalid submission (pipeline)."}
    )
    n_drafts: int = field(default=3, metadata={"help": "search: independent drafts before debugging and improving."})
    max_nodes: int = field(default=8, metadata={"help": "search: solutions (drafts, fixes, improvements) in all."})
    min_score: float = field(
        default=0.8,
        metadata={"help": "Validation threshold: a valid solution scoring below it is refined (pipeline, search)."},
    )
    max_format_retries: int = field(
        default=1, metadata={"help": "Re-asks after a structured reply that fails its JSON schema."}
    )
    time_budget_s: float = field(default=900.0, metadata={"help": "Wall-clock budget of one question, in seconds."})
    cell_timeout_s: float = field(default=120.0, metadata={"help": "Time limit of one sandbox execution, in seconds."})

    def __post_init__(self) -> None:
        unknown = sorted(set(self.prompts) - set(PROMPTS))
        if unknown:
            raise ValueError(f"prompts: unknown template name(s) {unknown}; valid names: {', '.join(PROMPTS)}.")
        for name in ("max_tokens", "max_steps", "n_drafts", "max_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: use a value >= 1.")
        for name in ("repair_steps", "max_iterations", "max_format_retries"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: use a value >= 0.")
        if self.n_drafts > self.max_nodes:
            raise ValueError(
                f"n_drafts={self.n_drafts} > max_nodes={self.max_nodes}: the search budget must cover the drafts; "
                "raise max_nodes or lower n_drafts."
            )
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score={self.min_score}: validation scores are in [0, 1]; use a value there.")
        if self.time_budget_s <= 0 or self.cell_timeout_s <= 0:
            raise ValueError(
                f"time_budget_s={self.time_budget_s}, cell_timeout_s={self.cell_timeout_s}: use positive seconds."
            )

    def prompt(self, name: str) -> str:
        """The template ``name``: the override in ``prompts`` or the default of :data:`PROMPTS`."""
        return self.prompts.get(name, PROMPTS[name])


@dataclass
class SchedulerConfig:
    max_tasks: int = field(default=4, metadata={"help": "Tasks (episodes) running at once; the rest wait."})
    max_llm_calls: int = field(default=4, metadata={"help": "LLM calls in flight at once, over all tasks."})
    max_sandbox_processes: int = field(
        default=4, metadata={"help": "Sandbox executions (and kernel starts) at once, over all tasks."}
    )

    def __post_init__(self) -> None:
        for name in ("max_tasks", "max_llm_calls", "max_sandbox_processes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: allow at least 1.")
