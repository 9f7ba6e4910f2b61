"""Faults as data: one format shared by ``stateguard run --faults``, synthesis, the envs and evaluation.

A ``faults.jsonl`` line::

    {"task_id": "builtin-retail-sales", "turn_id": "2", "fault_type": "wrong_filter", "code": "..."}

``code`` replaces the reference code of that turn for the scripted worker. An optional ``variables`` list names the
variables the fault corrupts; without it they are inferred: the names assigned by top-level statements of the
faulty code that do not appear, unchanged, in the reference code. A repair hint *localizes* the fault when it names
one of them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.jsonl import iter_jsonl
from harness.pyast import parse_python

REQUIRED_KEYS = ("task_id", "turn_id", "fault_type", "code")
OPTIONAL_KEYS = ("variables", "detectable")


class FaultFileError(ValueError):
    """A faults file cannot be read; the message names the file, the line, the field and the fix."""


@dataclass(frozen=True)
class Fault:
    task_id: str = field(metadata={"help": "id of the task the fault applies to"})
    turn_id: str = field(metadata={"help": "turn whose reference code the fault replaces"})
    fault_type: str = field(metadata={"help": "name of the fault (e.g. wrong_column, unit_slip)"})
    code: str = field(metadata={"help": "the faulty code that replaces the turn's reference code"})
    variables: tuple[str, ...] = field(
        default=(), metadata={"help": "variables the fault corrupts; empty: infer them against the reference code"}
    )
    detectable: bool | None = field(
        default=None,
        metadata={"help": "whether the gold manager's checks reveal it at its turn (synthesis); None: not recorded"},
    )

    @property
    def key(self) -> tuple[str, str]:
        return (self.task_id, self.turn_id)

    def corrupted_variables(self, reference_code: str) -> tuple[str, ...]:
        """The declared ``variables``, else the names assigned by statements that differ from the reference."""
        if self.variables:
            return self.variables
        return infer_corrupted_variables(reference_code, self.code)

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {k: getattr(self, k) for k in REQUIRED_KEYS}
        if self.variables:
            row["variables"] = list(self.variables)
        if self.detectable is not None:
            row["detectable"] = self.detectable
        return row


def _assigned_names(stmt: ast.stmt) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, ast.Subscript | ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def infer_corrupted_variables(reference_code: str, faulty_code: str) -> tuple[str, ...]:
    """Names assigned by top-level statements of ``faulty_code`` that are not, verbatim, in ``reference_code``.

    Returns ``()`` when either side does not parse (an execution-error fault, say): there is nothing to localize.
    """
    try:
        reference = {ast.dump(s) for s in parse_python(reference_code).body}
        faulty = parse_python(faulty_code).body
    except SyntaxError:
        return ()
    names: set[str] = set()
    for stmt in faulty:
        if ast.dump(stmt) not in reference:
            names |= _assigned_names(stmt)
    return tuple(sorted(names))


def fault_from_row(row: Any, where: str) -> Fault:
    """One validated :class:`Fault` from a decoded line; ``where`` (``file:line``) prefixes any error."""
    if not isinstance(row, dict):
        raise FaultFileError(
            f"{where}: expected a JSON object with keys {list(REQUIRED_KEYS)}, got {type(row).__name__}."
        )
    problems = [f"missing field {k!r}" for k in REQUIRED_KEYS if k not in row]
    problems += [f"unknown field {k!r}" for k in row if k not in REQUIRED_KEYS + OPTIONAL_KEYS]
    for k in REQUIRED_KEYS:
        value = row.get(k, "")
        ok = isinstance(value, str) or (k == "turn_id" and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            problems.append(f"field {k!r} must be a string, got {type(value).__name__}")
    variables = row.get("variables", [])
    if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
        problems.append("field 'variables' must be a list of variable names")
    detectable = row.get("detectable")
    if detectable is not None and not isinstance(detectable, bool):
        problems.append(f"field 'detectable' must be true, false or null, got {detectable!r}")
    if problems:
        raise FaultFileError(
            f"{where}: " + "; ".join(problems) + f". Fix: each line is {{{', '.join(REQUIRED_KEYS)}}} "
            "(+ optional 'variables': [names], 'detectable': true | false)."
        )
    return Fault(*(str(row[k]) for k in REQUIRED_KEYS), variables=tuple(variables), detectable=detectable)


def read_faults(path: str | Path) -> list[Fault]:
    """Every fault line of ``path`` in order (several per turn allowed: a synthesis run writes one line per
    counterfactual). A bad line raises :class:`FaultFileError` naming the file, the line and the field."""
    path = Path(path)
    if not path.is_file():
        raise FaultFileError(f"{path}: no such faults file. Fix: pass a JSON-lines file (one fault per line).")
    return [fault_from_row(row, where) for where, row in iter_jsonl(path, error=FaultFileError)]


def load_faults(path: str | Path, *, line: int | None = None) -> dict[tuple[str, str], Fault]:
    """The faults of ONE episode set: ``{(task_id, turn_id): Fault}``, one fault per turn (a duplicate is an error).

    ``line`` (1-based, counting fault lines) picks a single line of a file that holds several counterfactuals, such
    as the ``faults.jsonl`` a synthesis run writes."""
    faults = read_faults(path)
    if line is not None:
        if not 1 <= line <= len(faults):
            raise FaultFileError(f"{path}: fault line {line} does not exist; the file holds {len(faults)} faults.")
        faults = [faults[line - 1]]
    chosen: dict[tuple[str, str], Fault] = {}
    for number, fault in enumerate(faults, start=1):
        if fault.key in chosen:
            raise FaultFileError(
                f"{path}: fault {number} is a second fault for task {fault.task_id!r} turn {fault.turn_id!r}. "
                "Fix: keep one fault per turn, or replay one line of the file (stateguard run --fault-line N)."
            )
        chosen[fault.key] = fault
    return chosen


def write_faults(path: str | Path, faults: Iterable[Fault]) -> None:
    with Path(path).open("w") as fh:
        for fault in faults:
            fh.write(json.dumps(fault.to_dict()) + "\n")


def faults_for_task(faults: Mapping[tuple[str, str], Fault], task_id: str) -> dict[str, Fault]:
    """``{turn_id: Fault}`` for one task."""
    return {turn_id: f for (tid, turn_id), f in faults.items() if tid == task_id}
