"""Check faults in a real sandbox: :func:`verify_faults` / :func:`verify_fault` and :func:`clean_answers`.

For each turn that carries faults, the clean prefix has already run in one kernel; the kernel is checkpointed, each
fault's code runs from the checkpoint (then its evidence probe, which must fail with an ``AssertionError``), the
kernel is restored, and finally the clean turn runs (then each probe, which must pass) and the walk continues. One
kernel per task; the prefix runs once. A fault is *valid* when:

- harmful, executing: the faulty step runs, the turn's answer differs from the clean one at the turn's precision
  (the grader's comparison), the probe fails on the faulty state with an ``AssertionError`` and passes on the clean;
- ``check_execution`` evidence (execution_error): the faulty step fails and the clean one runs;
- benign: the faulty step runs, the answer equals the clean one, the probe passes on both states;
- always: the gold repair hint localizes the fault (``hint_localizes(fault.repair_hint(), fault.variables)``).

Usage::

    with Sandbox(SandboxConfig()) as sandbox:
        verdicts = verify_faults(faults, spec, sandbox.new_kernel)      # spec: a TaskSpec or a task folder
        kept = [v.fault for v in verdicts if v.ok]
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.evaluation.structured import compare_structured
from harness.sandbox import ExecutionResult, Kernel
from harness.worker.scripted import hint_localizes
from synthesis.faults.model import InjectedFault

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec

logger = logging.getLogger(__name__)

KernelFactory = Callable[[Path], Kernel]
"""``public_dir -> Kernel`` (e.g. ``sandbox.new_kernel``)."""
PROBE_TIMEOUT_S = 10.0


@dataclass
class FaultVerdict:
    """What running one fault showed. ``ok`` is the overall verdict; ``reasons`` says why it is not ok."""

    fault: InjectedFault
    ok: bool = False
    reasons: list[str] = field(default_factory=list)
    clean_answer: Any = None
    faulty_answer: Any = None
    faulty_ran: bool = False
    faulty_error: str | None = None
    answer_changed: bool = False
    evidence_failed_on_faulty: bool | None = None
    evidence_passed_on_clean: bool | None = None
    evidence_message: str | None = None
    hint_localizes: bool = False
    latent: bool = False  # answer unchanged, but the probe shows a corrupted intermediate variable
    seconds: float = 0.0


def _answer(result: ExecutionResult) -> Any:
    return result.results[-1] if result.results else None


def _error(result: ExecutionResult) -> str | None:
    return None if result.ok else f"{result.error_type}: {result.error_message}"


def _write_public(task: TaskSpec, root: Path) -> Path:
    public = root / "public"
    (public / "data").mkdir(parents=True)
    for name, table in task.tables.items():
        table.to_csv(public / "data" / f"{name}.csv", index=False)
    return public


def _as_spec(task: TaskSpec | str | Path) -> TaskSpec:
    if isinstance(task, str | Path):
        from synthesis.faults.library import task_spec_from_folder

        return task_spec_from_folder(task)
    return task


def _judge(verdict: FaultVerdict, precision: int | None, require_answer_change: bool) -> None:
    fault, reasons = verdict.fault, verdict.reasons
    verdict.hint_localizes = hint_localizes(fault.repair_hint(), fault.variables)
    if not verdict.hint_localizes:
        reasons.append(f"the gold hint does not name any of the corrupted variables {list(fault.variables)}")
    if fault.evidence_tool == "check_execution":
        if verdict.faulty_ran:
            reasons.append("the faulty step ran without error, so check_execution shows nothing")
        verdict.answer_changed = True
    else:
        if not verdict.faulty_ran:
            reasons.append(f"the faulty step raised ({verdict.faulty_error}) though its evidence is a probe")
        same = compare_structured(verdict.faulty_answer, verdict.clean_answer, precision=precision).correct
        verdict.answer_changed = not same
        if fault.benign:
            if not same:
                reasons.append("the benign rewrite changes the turn's answer")
            if verdict.evidence_failed_on_faulty:
                reasons.append(f"the probe fails on the benign rewrite: {verdict.evidence_message}")
        else:
            verdict.latent = same and bool(verdict.evidence_failed_on_faulty)
            if same and (require_answer_change or not verdict.latent):
                reasons.append("the fault changes nothing: the turn's answer equals the clean one")
            if not verdict.evidence_failed_on_faulty:
                reasons.append("the evidence probe does not fail with an AssertionError on the faulty state")
        if verdict.evidence_passed_on_clean is False:
            reasons.append("the evidence probe fails on the clean state")
    verdict.ok = not reasons


def verify_faults(
    faults: Sequence[InjectedFault],
    task: TaskSpec | str | Path,
    kernel_factory: KernelFactory,
    *,
    require_answer_change: bool = True,
) -> list[FaultVerdict]:
    """Run every fault of ``task`` (a TaskSpec or a task folder) in one kernel; verdicts in the order of
    ``faults``. Faults for another task or an unknown turn get a not-ok verdict saying so.

    ``require_answer_change=False`` also accepts *latent* faults: the turn's answer is unchanged but the probe shows
    a corrupted intermediate variable (later turns that reuse it may still go wrong)."""
    spec = _as_spec(task)
    verdicts = [FaultVerdict(fault) for fault in faults]
    turn_ids = [t.turn_id for t in spec.turns]
    for verdict in verdicts:
        fault = verdict.fault
        if fault.task_id != spec.task_id or fault.turn_id not in turn_ids:
            verdict.reasons.append(
                f"fault for task {fault.task_id} turn {fault.turn_id} does not belong to task "
                f"{spec.task_id} (turns {turn_ids})"
            )
    pending = [v for v in verdicts if not v.reasons]
    if not pending:
        return verdicts
    last = max(turn_ids.index(v.fault.turn_id) for v in pending)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        public = _as_folder_public(task) or _write_public(spec, Path(tmp))
        kernel = kernel_factory(public)
        try:
            for turn in spec.turns[: last + 1]:
                here = [v for v in pending if v.fault.turn_id == turn.turn_id]
                clean = _run_turn(kernel, turn.code, here)
                if not clean.ok:
                    for verdict in pending:
                        if not verdict.ok and verdict.fault.turn_id in turn_ids[turn_ids.index(turn.turn_id) :]:
                            verdict.reasons.append(f"the reference code of turn {turn.turn_id} fails: {_error(clean)}")
                    break
                for verdict in here:
                    _judge(verdict, turn.precision, require_answer_change)
        finally:
            kernel.close()
    for verdict in verdicts:
        if not verdict.ok:
            logger.debug(
                "fault %s/%s %s rejected: %s",
                verdict.fault.task_id,
                verdict.fault.turn_id,
                verdict.fault.fault_type,
                "; ".join(verdict.reasons),
            )
    return verdicts


def _as_folder_public(task: TaskSpec | str | Path) -> Path | None:
    if isinstance(task, str | Path):
        from harness.tasks import load_task

        return load_task(task).public_dir
    return None


def _probe_failure(kernel: Kernel, code: str) -> tuple[bool, str | None]:
    """``(failed with AssertionError, message)``; another error counts as not failed (with its message)."""
    result = kernel.probe(code, timeout=PROBE_TIMEOUT_S)
    if result.ok:
        return False, None
    return result.error_type == "AssertionError", f"{result.error_type}: {result.error_message}"


def _run_turn(kernel: Kernel, code: str, verdicts: list[FaultVerdict]) -> ExecutionResult:
    """Run the faults of one turn from a checkpoint, then the clean turn (left in the kernel)."""
    checkpoint = kernel.checkpoint() if verdicts else None
    for verdict in verdicts:
        t0 = time.perf_counter()
        fault = verdict.fault
        result = kernel.execute(fault.code)
        verdict.faulty_ran, verdict.faulty_error = result.ok, _error(result)
        verdict.faulty_answer = _answer(result)
        if fault.evidence_code:
            failed, message = _probe_failure(kernel, fault.evidence_code)
            verdict.evidence_failed_on_faulty, verdict.evidence_message = failed, message
        kernel.restore(checkpoint)  # type: ignore[arg-type]
        verdict.seconds += time.perf_counter() - t0
    clean = kernel.execute(code)
    for verdict in verdicts:
        t0 = time.perf_counter()
        verdict.clean_answer = _answer(clean)
        if verdict.fault.evidence_code and clean.ok:
            failed, message = _probe_failure(kernel, verdict.fault.evidence_code)
            verdict.evidence_passed_on_clean = message is None
            if message is not None:
                verdict.reasons.append(f"probe on the clean state: {message}")
        verdict.seconds += time.perf_counter() - t0
    if checkpoint is not None:
        kernel.release(checkpoint)
    return clean


def verify_fault(
    fault: InjectedFault,
    task: TaskSpec | str | Path,
    kernel_factory: KernelFactory,
    *,
    require_answer_change: bool = True,
) -> FaultVerdict:
    """:func:`verify_faults` for one fault."""
    return verify_faults([fault], task, kernel_factory, require_answer_change=require_answer_change)[0]


def clean_answers(task: TaskSpec | str | Path, kernel_factory: KernelFactory) -> dict[str, Any]:
    """``{turn_id: answer}`` of the clean run (for ``candidate_faults(..., answers=...)``); a failing turn maps to
    ``None`` and the walk stops there."""
    spec = _as_spec(task)
    answers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        public = _as_folder_public(task) or _write_public(spec, Path(tmp))
        kernel = kernel_factory(public)
        try:
            for turn in spec.turns:
                result = kernel.execute(turn.code)
                answers[turn.turn_id] = _answer(result) if result.ok else None
                if not result.ok:
                    break
        finally:
            kernel.close()
    return answers
