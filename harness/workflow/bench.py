"""``stateguard bench run``: reference (or registered) workflows on a suite, with the results format of evaluate.

    stateguard bench run --suite dabench-dev --workflow direct,pipeline --model http://localhost:8000/v1 \\
        --manager none --out runs/bench --concurrency 4

Each ``--workflow`` is one variant (``WORKFLOW+MANAGER``, or ``--label``) run on every task of the suite (clean; a
suite's faults need the scripted worker of ``stateguard evaluate``). Episodes run concurrently under the scheduler's
limits (``--concurrency`` tasks, ``--max-llm-calls``, ``--max-sandbox``) with a progress bar; each finished episode is
appended at once to ``OUT/episodes/<variant>.jsonl`` (the record of ``stateguard run``/``evaluate`` with
``config["eval"]`` and ``config["workflow"]``: cost in tokens, LLM calls, executions and seconds), so a killed run
resumes where it stopped. Then ``OUT/results.json`` and ``OUT/report.md`` are written by the evaluation code
(:func:`harness.evaluation.evaluate.collect_results` / ``write_results``: the same format as ``stateguard evaluate``),
with a ``bench`` section added: per-episode score, validity and cost, totals per variant, and failed episodes (an
episode that raised is logged, left out and retried by the next run).

``--model``: ``http://HOST:PORT/v1`` | ``openai:URL`` | ``hf:PATH`` | ``fake:FILE`` (canned replies; SIMULATED).
The flags are the fields of :class:`BenchConfig` and of :class:`~harness.workflow.config.WorkflowConfig` (prompts,
temperature, max_iterations, time_budget_s ...), read by :mod:`harness.config_cli`: the defaults, then ``--config
FILE`` (a YAML of fields of either class; ``model`` sets both), then the flags (``--max_iterations 2`` or
``--max-iterations 2``). Every value's type is checked. Kept from before: ``--workflow A,B`` and ``--label A,B`` (one
comma-separated value for ``workflows`` / ``labels``), ``--max-sandbox`` (``max_sandbox_processes``) and
``--segment-steps N`` (``runtime: {segment_steps: N}``). ``--out`` (and ``--cache`` for a named suite) is checked
writable, and created, before any episode runs. Exit codes: 0 done, 2 bad input, 3 suite unavailable (e.g. DABench
absent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_INPUT, EXIT_SUITE_MISSING = 0, 2, 3


@dataclass
class BenchConfig:
    suite: str = field(metadata={"help": "A suite folder or name (harness.evaluation.suite.SUITES)."})
    out: str = field(metadata={"help": "Output folder: results.json, report.md, episodes/, work/."})
    workflows: list[str] = field(default_factory=lambda: ["react"], metadata={"help": "Workflow names (variants)."})
    model: str | None = field(default=None, metadata={"help": "The model of every workflow (see the module doc)."})
    manager: str = field(default="none", metadata={"help": "The manager variant supervising every workflow."})
    labels: list[str] | None = field(default=None, metadata={"help": "Variant names (default WORKFLOW+MANAGER)."})
    workflow_config: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "WorkflowConfig fields (the command sets them from its own flags)."}
    )
    runtime: dict[str, Any] = field(default_factory=dict, metadata={"help": "RuntimeConfig fields (segment_steps)."})
    limit: int | None = field(default=None, metadata={"help": "Keep only the first N tasks of the suite."})
    cache: str = field(default="runs/eval-suites", metadata={"help": "Folder the named suites are read from."})
    isolation: Literal["bwrap", "none"] = field(default="bwrap", metadata={"help": "Sandbox isolation."})
    concurrency: int = field(default=4, metadata={"help": "Tasks at once."})
    max_llm_calls: int = field(default=4, metadata={"help": "LLM calls in flight at once (hf: forced to 1)."})
    max_sandbox_processes: int = field(default=4, metadata={"help": "Sandbox executions at once."})
    report: bool = field(default=True, metadata={"help": "Write report.md with plots."})
    seed: int = field(default=0, metadata={"help": "Seed of the bootstrap resampling."})
    n_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples."})

    scripted = False  # read by the evaluation's collect_results: workflows run every suite clean
    runs = 1  # one run per episode

    def __post_init__(self) -> None:
        from harness.workflow.agents import WORKFLOWS
        from harness.workflow.config import WorkflowConfig

        unknown = [w for w in self.workflows if w not in WORKFLOWS]
        if not self.workflows or unknown:
            raise ValueError(f"--workflow {','.join(self.workflows)}: use names from {', '.join(WORKFLOWS)}.")
        if self.labels is not None and len(self.labels) != len(self.workflows):
            raise ValueError(f"labels {self.labels}: give one per workflow {self.workflows}.")
        if len(set(self.variant_names)) != len(self.workflows):
            raise ValueError(f"--workflow {','.join(self.workflows)}: a workflow is listed twice; list each once.")
        WorkflowConfig(**{**self.workflow_config, "model": self.model or self.workflow_config.get("model")})
        from harness.specs import parse_manager_spec

        if parse_manager_spec(self.manager).in_process and self.concurrency != 1:
            raise ValueError(
                f"--manager {self.manager} runs an in-process model shared by all episodes; use --concurrency 1."
            )

    @property
    def variant_names(self) -> list[str]:
        return self.labels or [f"{w}+{self.manager}" for w in self.workflows]


def run_bench(config: BenchConfig) -> dict[str, Any]:
    """Run (or resume) the benchmark and write its outputs; returns the results dict."""
    from harness.evaluation.evaluate import collect_results, read_variant, variant_file, write_results
    from harness.evaluation.suite import resolve_suite
    from harness.evaluation.summary import TaskInfo, episode_id
    from harness.tasks import load_task

    out = Path(config.out)
    suite = resolve_suite(config.suite, cache=config.cache, limit=config.limit)
    specs = suite.episodes(with_faults=False)
    tasks = {spec.task_id: load_task(spec.task_dir) for spec in specs}
    todo = []
    for workflow, name in zip(config.workflows, config.variant_names, strict=True):
        done = {episode_id(r)[0] for r in read_variant(variant_file(out, name))}
        todo += [(workflow, name, spec) for spec in specs if spec.key not in done]
    logger.info(
        "bench %s: %d tasks x %d workflows; %d to run", suite.name, len(specs), len(config.workflows), len(todo)
    )
    failed = asyncio.run(_run_all(config, tasks, todo)) if todo else []
    # the evaluation's own summary and report (collect_results reads the fields BenchConfig shares with
    # EvaluationConfig: out, scripted, runs, variant_names, seed, n_resamples, report)
    results = collect_results(config, suite, {t: TaskInfo.of(task) for t, task in tasks.items()})
    # the report's header names the worker and the runs (EvaluationConfig fields BenchConfig does not have)
    results["config"].update(worker="workflow:" + ",".join(config.workflows), runs=config.runs)
    results["bench"] = bench_section(config, out, failed)
    write_results(out, results, config)
    return results


async def _run_all(config: BenchConfig, tasks: dict[str, Any], todo: list[tuple[str, str, Any]]) -> list[dict]:
    from harness.evaluation.evaluate import variant_file
    from harness.manager import get_policy
    from harness.manager.episode import append_episode
    from harness.sandbox import Sandbox, SandboxConfig
    from harness.specs import parse_manager_spec
    from harness.workflow.api import arun_agent, make_backend
    from harness.workflow.config import SchedulerConfig, WorkflowConfig
    from harness.workflow.scheduler import Scheduler

    workflow_config = WorkflowConfig(**{**config.workflow_config, "model": config.model or None})
    backend = make_backend(workflow_config.model, workflow_config)
    in_process = type(backend).__name__ == "HFChatBackend"
    limits = SchedulerConfig(
        max_tasks=config.concurrency,
        max_llm_calls=1 if in_process else config.max_llm_calls,
        max_sandbox_processes=config.max_sandbox_processes,
    )
    shared_policy = get_policy(config.manager) if parse_manager_spec(config.manager).in_process else None
    failed: list[dict] = []
    out = Path(config.out)
    with Scheduler(limits) as scheduler, Sandbox(SandboxConfig(isolation=config.isolation)) as sandbox:
        progress = tqdm(total=len(todo), desc="bench", unit="episode", disable=None)

        def episode(workflow: str, name: str, spec: Any):
            async def run() -> None:
                policy = shared_policy or get_policy(config.manager)
                tokens = (getattr(policy, "prompt_tokens", 0), getattr(policy, "completion_tokens", 0))
                try:
                    result = await arun_agent(
                        tasks[spec.task_id], workflow, backend, policy, config=workflow_config,
                        runtime=config.runtime, scheduler=scheduler, sandbox=sandbox,
                        workdir=out / "work" / name / spec.task_id,
                    )  # fmt: skip
                except Exception as exc:  # one failing episode must not stop the others; the next run retries it
                    logger.exception("bench: %s on %s failed", name, spec.key)
                    failed.append({"variant": name, "key": spec.key, "error": f"{type(exc).__name__}: {exc}"})
                    return
                finally:
                    progress.update(1)
                result.record.config["eval"] = {
                    "key": spec.key, "run": 0, "variant": name, "suite": config.suite,
                    "worker": f"workflow:{workflow}", "fault_turn": None, "fault_type": None,
                    "manager_tokens": {
                        "prompt": getattr(policy, "prompt_tokens", 0) - tokens[0],
                        "completion": getattr(policy, "completion_tokens", 0) - tokens[1],
                    },
                }  # fmt: skip
                append_episode(variant_file(out, name), result.record)
                progress.set_postfix_str(f"{name} {spec.task_id}: score {result.score}")

            return run

        await scheduler.run_tasks(episode(*item) for item in todo)
        progress.close()
    return failed


def bench_section(config: BenchConfig, out: Path, failed: list[dict]) -> dict[str, Any]:
    """Per-episode score, validity and cost of every variant, the totals, and the failed episodes."""
    from harness.evaluation.evaluate import read_variant, variant_file

    variants = {}
    for workflow, name in zip(config.workflows, config.variant_names, strict=True):
        episodes = {}
        for record in read_variant(variant_file(out, name)):
            grade = record.grade or {}
            cost = record.config.get("workflow", {}).get("cost", {})
            episodes[record.config["eval"]["key"]] = {"score": grade.get("score"), "valid": grade.get("valid"), **cost}
        keys = ("llm_calls", "prompt_tokens", "completion_tokens", "executions", "wall_s")
        totals = {k: sum(e.get(k) or 0 for e in episodes.values()) for k in keys}
        variants[name] = {"workflow": workflow, "manager": config.manager, "episodes": episodes, "totals": totals}
    return {"model": config.model, "variants": variants, "failed": failed}


# ---------------------------------------------------------------- CLI


ALIASES = {"workflows": "--workflow", "labels": "--label", "max_sandbox_processes": "--max-sandbox"}
"""The flags ``stateguard bench run`` had before its config (all still work)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="benchmark agent workflows on a suite (stateguard bench run ...)")
    commands = parser.add_subparsers(dest="bench_command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        "run",
        help="run workflows on a suite",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(run)
    run.set_defaults(func=bench_command)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE``, one flag per field of :class:`BenchConfig` and :class:`WorkflowConfig` (with the aliases
    of :data:`ALIASES`), and ``--segment-steps``."""
    from harness.config_cli import add_config_arguments
    from harness.workflow.config import WorkflowConfig

    add_config_arguments(
        parser,
        BenchConfig,
        WorkflowConfig,
        what="bench",
        example="bench.yaml holding BenchConfig and WorkflowConfig fields (e.g. `max_iterations: 2`)",
        aliases=ALIASES,
        skip=("workflow_config",),
    )
    parser.add_argument(
        "--segment-steps", type=int, default=None, help="manager review every N executions (runtime.segment_steps)"
    )


def bench_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from harness.cli import prepare_out_dir
    from harness.config_cli import given_flag, parse_config
    from harness.evaluation.suite import SuiteUnavailableError
    from harness.specs import parse_suite_spec
    from harness.tasks import TaskConfigError

    def flag(name: str) -> str:
        return given_flag(args, name) or (f"{name} (of {args.config})" if args.config else f"--{name}")

    try:
        bench, workflow = parse_config(args)
        runtime = dict(bench.runtime)
        if args.segment_steps is not None:
            runtime["segment_steps"] = args.segment_steps
        workflow_config = {k: v for k, v in asdict(workflow).items() if k != "model"}
        config = replace(bench, workflow_config=workflow_config, runtime=runtime)
        suite = parse_suite_spec(config.suite, flag=given_flag(args, "suite") or "suite=")
        prepare_out_dir(config.out, flag("out"))
        if suite.named:
            prepare_out_dir(config.cache, flag("cache"))  # a named suite is built there
        results = run_bench(config)
    except SuiteUnavailableError as exc:
        print(f"stateguard bench run: suite unavailable: {exc}", file=sys.stderr)
        return EXIT_SUITE_MISSING
    except (TaskConfigError, ValueError) as exc:
        print(f"stateguard bench run: {exc}", file=sys.stderr)
        return EXIT_INPUT
    keys = ("task_accuracy", "turn_accuracy", "mean_score", "n_episodes", "simulated")
    summary = {
        "out": config.out,
        "variants": {name: {k: v.get(k) for k in keys} for name, v in results["variants"].items()},
        "totals": {name: v["totals"] for name, v in results["bench"]["variants"].items()},
        "failed": len(results["bench"]["failed"]),
    }
    print(json.dumps(summary))
    return EXIT_OK
