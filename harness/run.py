"""``stateguard run``: one episode of a task with a worker and a manager, shown live, recorded, graded.

    stateguard run --task harness/builtin_tasks/retail-sales --worker scripted --manager rule \\
        --faults runs/faults.jsonl --out runs/run

Workers (``--worker``):

- ``scripted``: replays the task's reference programs (SIMULATED, no LLM); ``--faults FILE`` replaces the code of
  the faulted turns (the shared ``faults.jsonl`` format of :mod:`harness.worker.faults`); ``--fault-line N``
  replays only line N, for files with several faults per turn such as a synthesis run's.
- ``openai:URL``: a ReAct code worker over any OpenAI-compatible endpoint (vLLM, ``transformers serve``, hosted).
- ``hf:PATH``: the same worker over an in-process transformers checkpoint (needs the ``train`` extra).

Managers (``--manager``): ``none | rule | window-rule[:K] | windowed:K:URL | windowed-hf:K:PATH | llm:URL |
llm-hf:PATH | freeform:URL | freeform-hf:PATH | hier:... | read`` (parsed by
:func:`harness.specs.parse_manager_spec`, the policy made by :func:`harness.manager.policy_registry.get_policy`); the
worker spec is parsed by
:func:`harness.specs.parse_worker_spec`, which also refuses ``--faults`` with a model worker.
``--flow turn|segment`` picks the review cadence (default: turn for multi-turn tasks, segment for single tasks).
The manager sees each turn's question, context and constraint texts; ``--oracle-relations`` adds the task's
dependency graph and ``--executable-constraints`` the constraints' code (both oracles a real benchmark does not give;
a task whose metadata sets ``constraint_code_public: true`` shows its code anyway). The rule verifier probes
constraints only when it sees their code, so a fault that raises nothing is caught only with it.

The episode record is appended to ``OUT/episodes.jsonl``; the grade is printed at the end (with the per-turn
verdicts of a multi-turn task) and the last line printed is one JSON summary. ``--out`` is checked (a writable
folder, created when missing, not inside the task folder) and every endpoint ``--manager`` and ``--worker`` name must
answer ``GET /models`` before the sandbox starts. Exit code 0 when the episode ran (whatever its grade), 2 for bad
input (the message names the flag and the fix; also a dead endpoint), 4 when the episode errored: an exception while
playing or grading it, or a manager that failed to respond during it (e.g. its endpoint went down); the record then
carries ``error`` (type and message) and the failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from harness.endpoints import check_endpoints, spec_endpoints
from harness.run_guard import check_out_outside
from harness.specs import MANAGER_GRAMMAR, WORKER_GRAMMAR

logger = logging.getLogger(__name__)

EXIT_ERRORED = 4


class RunError(ValueError):
    """Bad input to ``stateguard run``; the message names the flag and the fix."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run one episode (worker + manager) on a task with a live view; write the record, print the grade",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--task", required=True, help="a task folder, or the name of a built-in task (retail-sales)")
    parser.add_argument("--worker", default="scripted", help=f"{WORKER_GRAMMAR} (default: scripted)")
    parser.add_argument("--manager", default="rule", help=f"{MANAGER_GRAMMAR} (default: rule)")
    parser.add_argument("--flow", choices=["turn", "segment"], default=None, help="review cadence (default: by kind)")
    parser.add_argument("--faults", type=Path, default=None, help="faults.jsonl to replay (scripted worker only)")
    parser.add_argument(
        "--fault-line",
        type=int,
        default=None,
        help="replay only this fault line (1-based) of --faults, e.g. of a synthesis run's faults.jsonl",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/run"), help="output folder (episodes.jsonl)")
    parser.add_argument("--isolation", choices=["bwrap", "none"], default="bwrap", help="sandbox isolation")
    parser.add_argument(
        "--view",
        choices=["auto", "live", "log", "quiet"],
        default="auto",
        help="live: rich live view; log: one line per event; quiet: summary only (auto: live on a terminal)",
    )
    parser.add_argument("--max-turn-end-activations", type=int, default=None, help="override RuntimeConfig")
    add_oracle_arguments(parser)
    parser.add_argument(
        "--manager-max-tokens", type=int, default=None, help="cap on the tokens of one manager reply (llm policies)"
    )
    parser.add_argument(
        "--constrained-decoding",
        action="store_true",
        help="decode an action model's replies under the action grammar (llm-hf, hier:llm-hf in process; llm:URL, "
        "hier:llm:URL as vLLM guided decoding: serve with --structured-outputs-config.backend guidance)",
    )
    parser.add_argument(
        "--legal-actions-only",
        action="store_true",
        help="with --constrained-decoding, a flat llm manager's grammar allows only the actions legal now",
    )
    parser.set_defaults(func=main)


def add_oracle_arguments(parser: argparse.ArgumentParser) -> None:
    """``--oracle-relations`` and ``--executable-constraints``: the RuntimeConfig switches that put the task's
    dependency graph and its constraint code into the manager's view (both off: what a real benchmark gives)."""
    parser.add_argument(
        "--oracle-relations",
        action="store_true",
        help="show the manager the task's dependency graph (an oracle; default: it infers relations from the text)",
    )
    parser.add_argument(
        "--executable-constraints",
        action="store_true",
        help="show the manager the constraints' code (an oracle unless the task declares it public; default: texts)",
    )


def _build_worker_with_faults(
    spec: str, kernel: Any, task: Any, faults_path: Path | None, fault_line: int | None = None
) -> Any:
    """The worker named by ``--worker`` (:func:`harness.worker.spec.build_worker`), with the faults of ``--faults``
    (line ``--fault-line`` only, when given) for the scripted one."""
    from harness.worker import faults_for_task, load_faults
    from harness.worker.spec import build_worker

    faults = faults_for_task(load_faults(faults_path, line=fault_line), task.id) if faults_path is not None else {}
    if faults_path is not None and not faults:
        logger.warning("%s holds no fault for task %s; the episode runs clean", faults_path, task.id)
    return build_worker(spec, kernel, task, faults)


def main(args: argparse.Namespace) -> int:
    """``stateguard run``: :func:`run_from_args`; a :class:`RunError` is one line on stderr and exit code 2."""
    try:
        return run_from_args(args)
    except RunError as exc:
        print(f"stateguard run: {exc}", file=sys.stderr)
        return 2


def play(runtime: Any, task: Any, args: argparse.Namespace, policy: Any) -> Any:
    """The episode's record; an exception while playing or grading it, or a manager that failed to respond during
    it (:mod:`harness.evaluation.errored`), becomes the record's ``error``."""
    from harness.evaluation.errored import backend_failures, policy_failure
    from harness.manager import EpisodeRecord

    before = backend_failures(policy)
    try:
        record = runtime.run()
    except Exception as exc:
        logger.warning("the episode of %s errored: %s: %s", task.id, type(exc).__name__, exc)
        error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
        config = {"worker": args.worker, "manager": args.manager}
        return EpisodeRecord(task.id, uuid.uuid4().hex[:12], config, simulated=args.worker == "scripted", error=error)
    record.error = policy_failure(record, backend_failures(policy) - before)
    return record


def run_from_args(args: argparse.Namespace) -> int:
    """Play, show, record and grade the episode ``args`` describe (see the module docstring); the exit code."""
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from harness.cli import prepare_out_dir
    from harness.live import EpisodeView, grade_rows
    from harness.manager import ManagerRuntime, RuntimeConfig, append_episode, get_policy
    from harness.manager.model_settings import ModelSettingError, constrain_actions, limit_reply_tokens
    from harness.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError
    from harness.specs import parse_manager_spec, parse_worker_spec
    from harness.tasks import TaskConfigError, TaskNotFoundError, load_task, resolve_task_path
    from harness.worker.faults import FaultFileError

    console = Console()
    try:
        task = load_task(resolve_task_path(args.task))
    except TaskNotFoundError as exc:
        raise RunError(f"--{exc}") from exc
    except (TaskConfigError, FileNotFoundError) as exc:
        raise RunError(f"--task {args.task}: {exc}") from exc
    try:
        policy = get_policy(str(parse_manager_spec(args.manager)))
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    if args.legal_actions_only and not args.constrained_decoding:
        raise RunError("--legal-actions-only narrows the action grammar; add --constrained-decoding.")
    try:
        if args.manager_max_tokens is not None:
            limit_reply_tokens(policy, args.manager_max_tokens)
        if args.constrained_decoding:
            constrain_actions(policy, legal_only=args.legal_actions_only)
    except ModelSettingError as exc:
        raise RunError(str(exc)) from exc
    overrides: dict[str, Any] = {}
    if args.max_turn_end_activations is not None:
        overrides["max_turn_end_activations"] = args.max_turn_end_activations
    if args.flow is not None:
        overrides["flow"] = args.flow
    overrides |= {"oracle_relations": args.oracle_relations, "executable_constraints": args.executable_constraints}
    try:
        config = RuntimeConfig(**overrides)
    except (TypeError, ValueError) as exc:
        raise RunError(f"runtime options: {exc}") from exc

    if args.fault_line is not None and args.faults is None:
        raise RunError("--fault-line picks a line of --faults FILE; pass --faults too.")
    try:
        parse_worker_spec(args.worker, faults=args.faults is not None)
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    try:
        check_out_outside(args.out, [task.root], "--out")
        check_endpoints(spec_endpoints([args.manager], args.worker))
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    out = prepare_out_dir(args.out)  # before the sandbox starts: a bad --out must not cost an episode

    view_mode = args.view
    if view_mode == "auto":
        view_mode = "live" if console.is_terminal else "log"
    try:
        sandbox = Sandbox(SandboxConfig(isolation=args.isolation))
    except SandboxUnavailableError as exc:
        raise RunError(f"--isolation {args.isolation}: {exc}") from exc

    t0 = time.perf_counter()
    with sandbox:
        kernel = sandbox.new_kernel(public_dir=task.public_dir)
        try:
            worker = _build_worker_with_faults(args.worker, kernel, task, args.faults, args.fault_line)
        except (FaultFileError, ValueError) as exc:
            raise RunError(f"--worker/--faults: {exc}") from exc
        simulated = bool(getattr(worker, "simulated", False))
        title = f"{task.id} · worker {args.worker} · manager {policy.name}"
        view = EpisodeView(title, simulated=simulated)

        def on_event(name: str, payload: dict[str, Any]) -> None:
            view.on_event(name, payload)
            if view_mode == "log":
                line = view.line(name, payload)
                if line is not None:
                    console.print(line, markup=False, highlight=False, soft_wrap=True)

        try:
            runtime = ManagerRuntime(task, kernel, worker, policy, config, on_event=on_event)
        except ValueError as exc:
            raise RunError(str(exc)) from exc
        if view_mode == "live":
            with Live(view.render(), console=console, refresh_per_second=6, transient=False) as live:

                def on_event_live(name: str, payload: dict[str, Any]) -> None:
                    view.on_event(name, payload)
                    live.update(view.render())

                runtime.on_event = on_event_live
                record = play(runtime, task, args, policy)
        else:
            record = play(runtime, task, args, policy)
        kernel.close()
    episodes = out / "episodes.jsonl"
    append_episode(episodes, record)
    if record.error is not None:
        print(
            f"stateguard run: the episode errored ({record.error['type']}: {record.error['message']}); it is "
            f"recorded with its error in {episodes} and has no grade to report.",
            file=sys.stderr,
        )
        return EXIT_ERRORED

    grade = record.grade or {}
    table = Table(title=f"grade{' (SIMULATED worker)' if simulated else ''}", title_justify="left", min_width=40)
    table.add_column("turn")
    table.add_column("correct")
    for turn_id, correct in grade_rows(grade):
        table.add_row(turn_id, correct)
    console.print(table)
    illegal = sum(1 for a in record.activations for x in a["actions"] if not x.get("legal"))
    summary = {
        "task_id": task.id,
        "episode_id": record.episode_id,
        "worker": args.worker,
        "manager": policy.name,
        "simulated": simulated,
        "valid": grade.get("valid"),
        "score": grade.get("score"),
        "states": len(record.states),
        "repairs": len(record.repairs),
        "activations": len(record.activations),
        "illegal_actions": illegal,
        "duration_s": round(time.perf_counter() - t0, 3),
        "record": str(episodes),
    }
    print(json.dumps(summary))
    return 0
