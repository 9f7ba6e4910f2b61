"""Counterfactual runs of one task and their runtime validation.

Per task (:func:`run_task`): the **clean run** (scripted worker, :class:`~synthesis.gold.GoldPolicy` without a
fault), and per fault the **unmanaged faulty continuation** (manager ``none``: the fault propagates — the replay env's
"COMMIT on a faulted state" branch) and the **gold-managed run** (repair at the faulted state, then the repaired
continuation). Every run is a real :class:`~harness.manager.runtime.ManagerRuntime` episode in its own kernel (kernels
are cheap: one fork of the sandbox zygote) and is kept as an :class:`~harness.manager.episode.EpisodeRecord`
(``simulated=True``).

Validation (:func:`validate`), harmful faults:

- ``changes nothing``: the faulty continuation's final answers equal the clean ones on every turn (at each turn's
  precision, as the grader compares);
- ``repair does not reproduce``: the gold run repaired the faulted turn but its final answers differ from the clean
  ones somewhere;
- ``caught downstream only``: the gold run's checks showed nothing at the faulted turn but a later turn's did (the
  scripted worker cannot repair an earlier turn from a later hint).

A harmful fault whose gold run made no repair at all is kept and marked *undetectable*
(``FaultOutcome.detectable=False``): no check the manager runs at its turn end reveals it, so its gold decision is
to commit, and the samples of its turn are labelled ``undetectable``.

Benign faults: ``benign changes answers`` (the faulty continuation differs from clean) and ``benign repaired`` (the
gold run repaired). The clean run itself must reproduce the task's reference answers, else the whole task is dropped.
The unmanaged faulty run is played first; when it alone decides the drop (``changes nothing``, ``benign changes
answers``; :func:`faulty_verdict`) the gold run is not played (``outcome.gold`` stays None): about one fault in seven
on the default config, and a gold run costs more than a faulty one (the manager's probes).

Checkpoint reuse (``reuse_checkpoints=True``, the default): the clean prefix of a faulted run is identical to the
clean run up to the faulted turn, so it is not replayed. The clean gold run and a clean unmanaged run take, before
each turn that carries a fault, a kernel checkpoint plus a pickled snapshot of the runtime's and the worker's
bookkeeping (and the gold policy's log); each faulted run restores that checkpoint into the task's one kernel, copies
the snapshot into a fresh :class:`ManagerRuntime` whose worker carries the fault, and plays the remaining turns with
the runtime's own turn flow. The records equal a full replay's except for bookkeeping of the shared kernel: its
checkpoint ids (a per-kernel counter) and the one ``release`` entry of the previous turn's start checkpoint, which the
clean run has already released (``tests/synthesis/test_runs.py`` checks the equality). It is about 2x faster than a
full replay per fault (measured in the report of ``scripts/bench_synthesis.py``). This reads runtime internals
(``harness.manager.flows.play_turn``, the runtime's bookkeeping attributes, :data:`RUNTIME_FIELDS`, and the kernel's
variable-version high-water marks ``Kernel._hwm``, which a restore deliberately keeps monotone; a snapshot puts them
back so variable versions match a full replay).

Determinism: each record's ``episode_id`` is derived from the task id, the fault and the branch; every duration
(``duration_s``, ``latency_s``, the executions' ``duration_s``) is zeroed (:func:`scrub`), since wall-clock times
differ run to run. Checkpoint ids are the kernel's counters and are deterministic.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.evaluation.structured import compare_structured
from harness.manager.episode import EpisodeRecord
from harness.manager.flows import play_turn
from harness.manager.policies import NonePolicy
from harness.manager.policy_types import Policy
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.sandbox import Kernel
from harness.tasks import Task
from harness.worker.scripted import ScriptedWorker
from synthesis.checks import Check, folder_checks
from synthesis.gold import GoldPolicy, LoggedResponse, Teacher, revealed_by
from synthesis.replay import Recording, ReplayDiverged, ReplayTap

if TYPE_CHECKING:
    from harness.sandbox import Sandbox
    from synthesis.faults import InjectedFault

logger = logging.getLogger(__name__)

SYNTHESIS_RUNTIME = RuntimeConfig(restorable_checkpoints=False)
"""The runtime settings of every synthesized run unless a caller passes its own: the gold policy never abandons a
repaired state, so the runtime's checkpoints are recorded (same ids) without forking a snapshot each. The snapshots
this module takes itself for checkpoint reuse are real ones."""

BRANCHES = ("clean", "faulty", "gold")
"""Episode branches: the clean gold-managed run, the unmanaged faulty continuation, the gold-managed faulted run."""


@dataclass
class Run:
    """One played episode: its record and, for gold-managed runs, the policy's logged responses."""

    branch: str
    record: EpisodeRecord
    log: list[LoggedResponse] = field(default_factory=list)


@dataclass
class FaultOutcome:
    """One fault's runs and verdict: ``kept`` or the ``reason`` it was dropped."""

    fault: InjectedFault
    faulty: Run | None = None
    gold: Run | None = None
    kept: bool = False
    reason: str | None = None
    detectable: bool | None = None  # harmful faults: did the gold run's checks reveal it at its turn (None: benign)
    revealed_by: tuple[str, ...] = ()  # detectable: what the failing calls at its turn were (gold.revealed_by)


@dataclass
class TaskRuns:
    """All runs of one task. ``clean`` is None when the task was dropped (``reason`` says why)."""

    task_id: str
    clean: Run | None
    outcomes: list[FaultOutcome] = field(default_factory=list)
    reason: str | None = None
    joined: int = 0  # faulted runs that joined a clean run's recording (synthesis.replay)
    served: int = 0  # kernel operations answered from a recording


def episode_id(task_id: str, branch: str, fault: InjectedFault | None) -> str:
    """A content-derived episode id: the same task, branch and fault always give the same id."""
    key = f"{task_id}|{branch}|" + ("" if fault is None else f"{fault.turn_id}|{fault.fault_type}|{fault.code}")
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def fault_id(fault: InjectedFault) -> str:
    """A short stable id of a fault (links its branches in the exported episodes)."""
    key = f"{fault.task_id}|{fault.turn_id}|{fault.fault_type}|{fault.code}"
    return f"{fault.task_id}:{fault.turn_id}:{fault.fault_type}:{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def scrub(record: EpisodeRecord) -> EpisodeRecord:
    """Zero every wall-clock duration in ``record`` (in place) so identical runs give identical bytes."""
    record.duration_s = 0.0
    for activation in record.activations:
        activation["latency_s"] = 0.0
    for step in record.worker_steps:
        step["duration_s"] = 0.0
        if step.get("execution"):
            step["execution"]["duration_s"] = 0.0
    return record


def play(
    task: Task,
    sandbox: Sandbox,
    policy: Policy,
    fault: InjectedFault | None,
    branch: str,
    runtime: RuntimeConfig | None = None,
) -> Run:
    """Play one episode of ``task`` in a fresh kernel with the scripted worker (and ``fault`` injected)."""
    faults = {} if fault is None else {fault.turn_id: fault.to_fault()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        worker = ScriptedWorker.for_task(task, kernel, faults)
        record = ManagerRuntime(task, kernel, worker, policy, runtime).run()
    record.episode_id = episode_id(task.id, branch, fault)
    record.config["fault_id"] = None if fault is None else fault_id(fault)
    record.config["branch"] = branch
    gold = policy if isinstance(policy, GoldPolicy) else None
    return Run(branch=branch, record=scrub(record), log=list(gold.log) if gold else [])


def same_answers(task: Task, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when every turn's answer in ``a`` equals the one in ``b`` at the turn's precision."""
    for turn in task.turns:
        if not compare_structured(a.get(turn.turn_id), b.get(turn.turn_id), precision=turn.precision).correct:
            return False
    return True


def faulty_verdict(task: Task, clean: Run, faulty: Run, benign: bool) -> str | None:
    """The reason to drop a fault that its unmanaged faulty run alone decides, else None: a harmful fault whose
    continuation reproduces every clean answer, or a benign one that changes some. The gold run is then not played."""
    same = same_answers(task, faulty.record.final_answers, clean.record.final_answers)
    if benign:
        return "benign changes answers" if not same else None
    return "changes nothing" if same else None


def validate(task: Task, clean: Run, outcome: FaultOutcome) -> str | None:
    """The reason to drop ``outcome`` (see the module docstring), or None to keep it."""
    assert outcome.faulty is not None
    if reason := faulty_verdict(task, clean, outcome.faulty, outcome.fault.benign):
        return reason
    assert outcome.gold is not None
    gold_same = same_answers(task, outcome.gold.record.final_answers, clean.record.final_answers)
    repaired = bool(outcome.gold.record.repairs)
    if outcome.fault.benign:
        if repaired:
            return "benign repaired"
        return None if gold_same else "repair does not reproduce"
    at_fault = any(r.get("turn_id") == outcome.fault.turn_id for r in outcome.gold.record.repairs)
    outcome.detectable = at_fault
    if not repaired:
        return None  # undetectable: committed like a clean state
    if not at_fault:
        return "caught downstream only"
    if not gold_same:
        return "repair does not reproduce"
    return None


RUNTIME_FIELDS = (
    "lifecycle",
    "committed",
    "turn_states",
    "executor_log",
    "draft",
    "draft_repairs",
    "boundary",
    "last_checkpoint",
    "turn_checkpoint",
    "current_turn",
    "last_prompt",
    "transcript",
    "record",
)
"""The :class:`ManagerRuntime` attributes a snapshot carries (its bookkeeping between turns)."""
WORKER_FIELDS = ("steps", "answers", "repaired", "notes", "_turn", "_cells", "_cursor", "_faulty", "_hinted")
"""The :class:`ScriptedWorker` attributes a snapshot carries."""


@dataclass(frozen=True)
class Snapshot:
    """A runtime between two turns: the kernel checkpoint and the pickled bookkeeping (see the module docstring)."""

    index: int  # the turn about to start
    checkpoint: str
    runtime: bytes
    worker: bytes
    log: tuple[LoggedResponse, ...]
    versions: dict[str, int]  # the kernel's per-name version high-water marks (restore keeps them monotone)


def _take(rt: ManagerRuntime, index: int) -> Snapshot:
    policy = rt.policy
    return Snapshot(
        index=index,
        checkpoint=rt.kernel.checkpoint(),
        runtime=pickle.dumps({name: getattr(rt, name) for name in RUNTIME_FIELDS}),
        worker=pickle.dumps({name: getattr(rt.worker, name) for name in WORKER_FIELDS}),
        log=tuple(policy.log) if isinstance(policy, GoldPolicy) else (),
        versions=dict(rt.kernel._hwm),
    )


def _play_from(
    rt: ManagerRuntime,
    start: int,
    snapshot_at: set[int] | None = None,
    *,
    tap: ReplayTap | None = None,
    marks: set[int] | None = None,
    join: Recording | None = None,
) -> tuple[EpisodeRecord, dict]:
    """Play turns ``start..`` with the runtime's turn flow (snapshots before the turns in ``snapshot_at``), then
    close the record exactly as :meth:`ManagerRuntime.run` does. With ``tap``: note the kernel's digest before the
    turns in ``marks`` (a run being recorded), or after the first turn try to join the recorded run ``join``."""
    turns = rt.task.turns
    snapshots: dict[int, Snapshot] = {}
    try:
        for index in range(start, len(turns)):
            if snapshot_at and index in snapshot_at:
                snapshots[index] = _take(rt, index)
            if tap is not None and marks and index in marks:
                tap.mark(index)
            rt.drive(play_turn(rt, turns[index], last=index == len(turns) - 1))
            if tap is not None and join is not None and index == start:
                tap.follow(join, index + 1)
    finally:
        if tap is not None and join is not None:
            tap.leave()
    rt.record.transitions = [t.to_dict() for t in rt.lifecycle.history]
    rt.record.states = [s.to_dict() for s in rt.committed.values()]
    rt.record.final_answers = dict(rt.worker.answers)
    rt.record.grade = rt.grade_submission()
    return rt.record, snapshots


def _finish(task: Task, rt: ManagerRuntime, record: EpisodeRecord, branch: str, fault: InjectedFault | None) -> Run:
    record.episode_id = episode_id(task.id, branch, fault)
    record.config["fault_id"] = None if fault is None else fault_id(fault)
    record.config["branch"] = branch
    gold = rt.policy if isinstance(rt.policy, GoldPolicy) else None
    return Run(branch, scrub(record), list(gold.log) if gold else [])


def play_snapshots(
    task: Task,
    kernel: Kernel,
    policy: Policy,
    branch: str,
    at: set[int],
    runtime: RuntimeConfig | None = None,
    tap: ReplayTap | None = None,
) -> tuple[Run, dict[int, Snapshot], Recording | None]:
    """Play the clean episode in ``kernel`` and snapshot it before each turn index in ``at``. With ``tap``, also
    record it, joinable after each of those turns (see :mod:`synthesis.replay`)."""
    worker = ScriptedWorker.for_task(task, kernel)
    rt = ManagerRuntime(task, kernel, worker, policy, runtime)
    recording = tap.record() if tap is not None else None
    try:
        marks = {index + 1 for index in at if index + 1 < len(task.turns)}
        record, snapshots = _play_from(rt, 0, at, tap=tap, marks=marks)
    finally:
        if tap is not None:
            tap.stop()
    return _finish(task, rt, record, branch, None), snapshots, recording


def play_from_snapshot(
    task: Task,
    kernel: Kernel,
    snapshot: Snapshot,
    policy: Policy,
    fault: InjectedFault,
    branch: str,
    runtime: RuntimeConfig | None = None,
    join: tuple[ReplayTap, Recording] | None = None,
) -> Run:
    """Continue a snapshot of the clean episode with ``fault`` injected (its turn is the snapshot's next turn).
    ``join``: a tap and the clean run's recording, joined after the faulted turn when the states are equal; should
    the kernel then answer otherwise than recorded, the run is played again without it."""
    if join is not None:
        fresh = GoldPolicy(checks=policy.checks, teacher=policy.teacher) if isinstance(policy, GoldPolicy) else policy
        counter = copy.copy(kernel._cp_counter)  # checkpoint ids: the second play must take the same ones
        try:
            return _continue(task, kernel, snapshot, policy, fault, branch, runtime, join)
        except ReplayDiverged as exc:
            logger.warning("%s; playing the %s run of %s again without joining", exc, branch, fault_id(fault))
            kernel._cp_counter = counter
            return _continue(task, kernel, snapshot, fresh, fault, branch, runtime, None)
    return _continue(task, kernel, snapshot, policy, fault, branch, runtime, None)


def _continue(
    task: Task,
    kernel: Kernel,
    snapshot: Snapshot,
    policy: Policy,
    fault: InjectedFault,
    branch: str,
    runtime: RuntimeConfig | None,
    join: tuple[ReplayTap, Recording] | None,
) -> Run:
    kernel.restore(snapshot.checkpoint)
    kernel._hwm = dict(snapshot.versions)  # variable versions continue as in a full replay
    held = set(kernel.checkpoints)
    worker = ScriptedWorker.for_task(task, kernel, {fault.turn_id: fault.to_fault()})
    rt = ManagerRuntime(task, kernel, worker, policy, runtime)
    config = rt.record.config
    for name, value in pickle.loads(snapshot.runtime).items():
        setattr(rt, name, value)
    for name, value in pickle.loads(snapshot.worker).items():
        setattr(worker, name, value)
    rt.record.config = config
    if isinstance(policy, GoldPolicy):
        policy.log = list(snapshot.log)
    tap, recording = join if join is not None else (None, None)
    try:
        record, _ = _play_from(rt, snapshot.index, tap=tap, join=recording)
    finally:
        for checkpoint in [c for c in kernel.checkpoints if c not in held]:
            kernel.release(checkpoint)  # keep the shared kernel's checkpoints bounded (an abandoned play's too)
    return _finish(task, rt, record, branch, fault)


def _check_clean(task: Task, clean: Run) -> str | None:
    references = {turn_id: ref.answer for turn_id, ref in task.load_answers().items()}  # type: ignore[union-attr]
    if not same_answers(task, clean.record.final_answers, references):
        return "clean run does not reproduce the reference answers"
    if clean.record.repairs:
        return "the gold policy repaired a clean run"
    return None


def run_task(
    task: Task,
    faults: Sequence[InjectedFault],
    sandbox: Sandbox,
    *,
    teacher: Teacher | None = None,
    checks: Mapping[str, Sequence[Check]] | None = None,
    runtime: RuntimeConfig | None = None,
    reuse_checkpoints: bool = True,
    join_runs: bool = True,
    verify_joins: bool = False,
) -> TaskRuns:
    """The clean run and every fault's two runs of ``task``, validated (see the module docstring). ``join_runs``
    (with ``reuse_checkpoints``): a faulted run whose state after its faulted turn equals the clean run's takes the
    clean run's kernel replies from there (:mod:`synthesis.replay`; the records are the same). ``verify_joins``
    (tests): bring the kernel up to date at the end of every joined run and check it answers as recorded.
    ``checks``: the gold policy's checks per turn (default: :func:`synthesis.checks.folder_checks` of the task)."""
    runtime = runtime or SYNTHESIS_RUNTIME
    if checks is None:
        checks = folder_checks(task)

    def gold() -> GoldPolicy:
        return GoldPolicy(checks=checks, teacher=teacher)

    if not reuse_checkpoints:
        clean = play(task, sandbox, gold(), None, "clean", runtime)
        reason = _check_clean(task, clean)
        if reason is not None:
            return TaskRuns(task.id, None, reason=reason)
        runs = TaskRuns(task.id, clean)
        for fault in faults:
            outcome = FaultOutcome(fault)
            outcome.faulty = play(task, sandbox, NonePolicy(), fault, "faulty", runtime)
            if not faulty_verdict(task, clean, outcome.faulty, fault.benign):
                outcome.gold = play(task, sandbox, gold(), fault, "gold", runtime)
            runs.outcomes.append(_judged(task, clean, outcome, checks))
        return runs
    turn_index = {turn.turn_id: index for index, turn in enumerate(task.turns)}
    at = {turn_index[f.turn_id] for f in faults}
    with sandbox.new_kernel(task.public_dir) as kernel:
        needed = 2 * len(at) + 2 * len(task.turns) + 8
        if kernel.config.max_checkpoints < needed:
            logger.info("task %s: max_checkpoints < %d, replaying every run in full", task.id, needed)
            return run_task(
                task, faults, sandbox, teacher=teacher, checks=checks, runtime=runtime, reuse_checkpoints=False
            )
        tap = ReplayTap(kernel) if join_runs else None
        if tap is not None:
            tap.verify = verify_joins
        kernel.tap = tap
        clean, gold_snaps, gold_rec = play_snapshots(task, kernel, gold(), "clean", at | {0}, runtime, tap)
        _release_except(kernel, gold_snaps)
        reason = _check_clean(task, clean)
        if reason is not None:
            return TaskRuns(task.id, None, reason=reason)
        runs = TaskRuns(task.id, clean)
        if not faults:
            return runs
        kernel.restore(gold_snaps[0].checkpoint)  # the namespace before the first turn
        kernel._hwm = dict(gold_snaps[0].versions)
        _, none_snaps, none_rec = play_snapshots(task, kernel, NonePolicy(), "faulty", at, runtime, tap)
        _release_except(kernel, {**gold_snaps, **{-1 - k: v for k, v in none_snaps.items()}})
        for fault in faults:
            index = turn_index[fault.turn_id]
            outcome = FaultOutcome(fault)
            outcome.faulty = play_from_snapshot(
                task, kernel, none_snaps[index], NonePolicy(), fault, "faulty", runtime, _joining(tap, none_rec)
            )
            if not faulty_verdict(task, clean, outcome.faulty, fault.benign):
                joining = _joining(tap, gold_rec)
                outcome.gold = play_from_snapshot(
                    task, kernel, gold_snaps[index], gold(), fault, "gold", runtime, joining
                )
            runs.outcomes.append(_judged(task, clean, outcome, checks))
        if tap is not None:
            runs.joined, runs.served = tap.joined, tap.served
    return runs


def _joining(tap: ReplayTap | None, recording: Recording | None) -> tuple[ReplayTap, Recording] | None:
    return None if tap is None or recording is None else (tap, recording)


def _release_except(kernel: Kernel, snapshots: dict[int, Snapshot]) -> None:
    """Release the kernel's checkpoints that no snapshot holds (the clean runs' own), so faulted runs have room."""
    keep = {s.checkpoint for s in snapshots.values()}
    for checkpoint in [c for c in kernel.checkpoints if c not in keep]:
        kernel.release(checkpoint)


def _judged(task: Task, clean: Run, outcome: FaultOutcome, checks: Mapping[str, Sequence[Check]]) -> FaultOutcome:
    outcome.reason = validate(task, clean, outcome)
    outcome.kept = outcome.reason is None
    if outcome.detectable and outcome.gold is not None:
        outcome.revealed_by = fault_turn_violations(outcome.gold, outcome.fault.turn_id, checks)
    return outcome


def fault_turn_violations(gold: Run, turn_id: str, checks: Mapping[str, Sequence[Check]]) -> tuple[str, ...]:
    """The labels of the failing calls (:func:`synthesis.gold.revealed_by`) that led to the gold run's first repair
    at turn ``turn_id``; ``()`` when it made none there."""
    for entry in gold.log:
        if entry.inp.turn is not None and entry.inp.turn.turn_id == turn_id and '"name": "REPAIR"' in entry.response:
            return revealed_by(entry.inp, checks)
    return ()
