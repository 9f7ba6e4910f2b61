"""``FAULT_TYPES``, :func:`candidate_faults`, :func:`faults_from_file` and :func:`task_spec_from_folder`."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.worker.faults import Fault, FaultFileError, fault_from_row
from synthesis.faults.code import code_writes, dependent_writes
from synthesis.faults.model import AstFaultType, Edit, FaultType, InjectedFault, build_fault, turn_index
from synthesis.faults.rows import ROW_PROPOSALS
from synthesis.faults.special import BENIGN_PROPOSALS, SPECIAL_PROPOSALS
from synthesis.faults.transforms import VALUE_PROPOSALS

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec

logger = logging.getLogger(__name__)

HARMFUL_PROPOSALS = {**VALUE_PROPOSALS, **ROW_PROPOSALS, **SPECIAL_PROPOSALS}
FAULT_TYPES: dict[str, FaultType] = {
    **{name: AstFaultType(name, fn, False, text) for name, (fn, text) in HARMFUL_PROPOSALS.items()},
    **{name: AstFaultType(name, fn, True, text) for name, (fn, text) in BENIGN_PROPOSALS.items()},
}
"""Fault type name -> type (``inject(task, turn, rng, answers=None)``)."""
BENIGN_TYPES = tuple(name for name, t in FAULT_TYPES.items() if t.benign)
NOT_EXECUTING = ("execution_error",)


def check_types(types: Sequence[str] | None) -> list[str]:
    """The fault type names to use (all when ``None``); ``ValueError`` names unknown ones and lists the valid."""
    if types is None:
        return list(FAULT_TYPES)
    unknown = [t for t in types if t not in FAULT_TYPES]
    if unknown:
        raise ValueError(f"unknown fault types {unknown}; valid fault types: {sorted(FAULT_TYPES)}.")
    return list(dict.fromkeys(types))


def candidate_faults(
    task: TaskSpec,
    rng: random.Random,
    types: Sequence[str] | None = None,
    answers: Mapping[str, Any] | None = None,
) -> list[InjectedFault]:
    """Every applicable (turn, fault type) pair of ``task`` as an :class:`InjectedFault`, turn by turn in the order
    of ``types`` (default: all of ``FAULT_TYPES``). Deterministic for ``rng``'s seed. ``answers`` (``{turn_id:
    clean answer}``) enables the types that need it (``claimed_without_execution``)."""
    names = check_types(types)
    found = []
    for turn in task.turns:
        for name in names:
            fault = FAULT_TYPES[name].inject(task, turn, rng, answers)
            if fault is not None:
                found.append(fault)
    return found


def replayed_fault(fault: Fault, task: TaskSpec) -> InjectedFault:
    """An :class:`InjectedFault` for a fault written elsewhere: the corrupted variables as the scripted worker infers
    them, ``check_execution`` evidence when the code does not compile, else a recomputation probe."""
    turn = task.turns[turn_index(task, fault.turn_id)]
    variables = list(fault.corrupted_variables(turn.code))
    compiles = True
    try:
        compile(fault.code, "<fault>", "exec")
    except SyntaxError:
        compiles = False
    if not variables:
        try:
            variables = dependent_writes(fault.code, code_writes(fault.code)[:1]) or ["result"]
        except SyntaxError:
            variables = list(code_writes(turn.code)) or ["result"]
    edit = Edit(
        code=fault.code,
        roots=tuple(variables),
        violated=f"a {fault.fault_type} fault (replayed from a faults file)",
        check=f"turn {turn.turn_id} must answer: {turn.question}",
        reasoning=f"the {fault.fault_type.replace('_', ' ')} changed how it is computed; it no longer matches the "
        "question and context",
        executes=compiles and fault.fault_type not in NOT_EXECUTING,
    )
    built = build_fault(task, turn, fault.fault_type, edit, benign=fault.fault_type in BENIGN_TYPES)
    if built is None:  # no corrupted variable the recomputation assigns: compare the answer alone
        edit = Edit(**{**edit.__dict__, "compare": ("result",)})
        built = build_fault(task, turn, fault.fault_type, edit, benign=fault.fault_type in BENIGN_TYPES)
    if built is None:
        raise ValueError(
            f"cannot build evidence for the {fault.fault_type} fault of task {task.task_id} turn {turn.turn_id}"
        )
    if fault.variables:
        built = InjectedFault(
            **{**built.__dict__, "variables": tuple(dict.fromkeys((*fault.variables, built.error_variable)))}
        )
    return built


def faults_from_file(path: str | Path, tasks: Mapping[str, TaskSpec]) -> tuple[list[InjectedFault], list[str]]:
    """Replay a ``faults.jsonl`` written elsewhere: one :class:`InjectedFault` per usable line, and the reasons the
    other lines were skipped (each names the line and, where known, the task and turn). A missing file raises
    :class:`~harness.worker.faults.FaultFileError`."""
    path = Path(path)
    if not path.is_file():
        raise FaultFileError(f"{path}: no such faults file. Fix: pass a JSON-lines file (one fault per line).")
    faults: list[InjectedFault] = []
    skipped: list[str] = []
    seen: set[tuple[str, str, str]] = set()  # (task, turn, code): several faults per turn are fine
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            fault = fault_from_row(json.loads(line), where)
        except json.JSONDecodeError as exc:
            skipped.append(f"{where}: not JSON ({exc.msg} at column {exc.colno}); skipped")
            continue
        except FaultFileError as exc:
            skipped.append(f"{exc}; skipped")
            continue
        task = tasks.get(fault.task_id)
        if task is None:
            skipped.append(
                f"{where}: task {fault.task_id!r} (turn {fault.turn_id!r}) is not among the {len(tasks)} tasks "
                f"given ({', '.join(sorted(tasks)[:10]) or 'none'}); skipped"
            )
            continue
        turn_ids = [t.turn_id for t in task.turns]
        if fault.turn_id not in turn_ids:
            skipped.append(
                f"{where}: task {fault.task_id!r} has no turn {fault.turn_id!r} "
                f"(turns: {', '.join(turn_ids)}); skipped"
            )
            continue
        if (*fault.key, fault.code) in seen:
            skipped.append(
                f"{where}: repeats an earlier fault of task {fault.task_id!r} turn {fault.turn_id!r}; skipped"
            )
            continue
        try:
            faults.append(replayed_fault(fault, task))
        except (ValueError, SyntaxError) as exc:
            skipped.append(f"{where}: task {fault.task_id!r} turn {fault.turn_id!r}: {exc}; skipped")
            continue
        seen.add((*fault.key, fault.code))
    for reason in skipped:
        logger.warning("faults file: %s", reason)
    return faults, skipped


def task_spec_from_folder(folder: str | Path) -> TaskSpec:
    """A :class:`~synthesis.domains.base.TaskSpec` of a multi_turn task folder (its config, ``public/data/*.csv``
    and ``private/reference.json``; ``private/synthesis.json`` adds ``writes`` and ``slots`` when present)."""
    from harness.tasks import load_task
    from synthesis.domains.base import TaskSpec, TurnSpec

    task = load_task(folder)
    if task.kind != "multi_turn":
        raise ValueError(f"task {task.id} is {task.kind}; faults are injected into multi_turn tasks only.")
    references = task.load_answers()
    extra_path = task.private_dir / "synthesis.json"
    extra = json.loads(extra_path.read_text(encoding="utf-8")).get("turns", {}) if extra_path.is_file() else {}
    data = task.public_dir / "data"
    tables = {p.stem: pd.read_csv(p) for p in sorted(data.glob("*.csv"))} if data.is_dir() else {}
    turns = []
    for turn in task.turns:
        more = extra.get(turn.turn_id, {})
        turns.append(
            TurnSpec(
                turn_id=turn.turn_id,
                question=turn.question,
                context=turn.context or "",
                code=references[turn.turn_id].code,
                depends_on=tuple(turn.depends_on),
                relation=turn.relation,
                precision=turn.precision,
                constraints=tuple((c.text, c.code) for c in (turn.constraints or ())),
                writes=tuple(more.get("writes", ())) or code_writes(references[turn.turn_id].code),
                slots=more.get("slots", {}),
            )
        )
    return TaskSpec(
        task_id=task.id,
        domain=str((getattr(task.config, "metadata", None) or {}).get("domain", "imported")),
        seed=0,
        title=task.name,
        description=task.description,
        tables=tables,
        turns=tuple(turns),
    )
