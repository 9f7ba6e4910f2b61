"""The fault library: code transforms of a turn's reference code, each with the corrupted variables,
the violated constraint, the evidence that reveals it (a tool and a probe) and the gold repair hint.

Usage::

    import random
    from synthesis.faults import candidate_faults, clean_answers, verify_faults, write_injected

    answers = clean_answers(spec, sandbox.new_kernel)                # {turn_id: clean answer}
    faults = candidate_faults(spec, random.Random(0), answers=answers)   # one per applicable (turn, type)
    verdicts = verify_faults(faults, spec, sandbox.new_kernel)       # runs them in a real sandbox
    write_injected("faults.jsonl", [v.fault for v in verdicts if v.ok])   # the shared faults.jsonl format
    replayed, skipped = faults_from_file("faults.jsonl", {spec.task_id: spec})

Fault types (``FAULT_TYPES``; slot-based when the turn's ``slots`` name the site, else an AST transform of the
reference code): wrong_column, wrong_threshold (off-by-one > vs >= when a value sits on the threshold, else the
nearest threshold that changes the selected rows), wrong_aggregation, rounding, unit_slip (a unit factor dropped, or
a fraction reported as a percentage), wrong_join_key, dropped_rows, nan_mishandling, reversed_sort, wrong_topk,
stale_variable, execution_error, claimed_without_execution, and the benign benign_rewrite. See
:mod:`synthesis.faults.special` for how stale values, errors and claimed results are played.

**Evidence.** Every executing fault carries a ``run_probe`` recomputation probe: the backward slice of the reference
code up to the faulted turn, with its variables renamed ``chk_<name>``, recomputes the turn's quantities from
``public/data`` and asserts the worker's error variable and ``result`` equal them; the assertion message says
which variable differs, its value, the recomputed value and the public rule it must follow. The probe reads only
the task data and the worker's variable names; its code is the correct analysis (derived from the question and
context), so it is what a careful manager writes to re-derive a number. ``execution_error`` uses
``check_execution`` (the step's executor record shows the failure).
"""

from collections.abc import Iterable
from pathlib import Path

from harness.worker.faults import write_faults
from harness.worker.scripted import hint_localizes
from synthesis.faults.library import (
    BENIGN_TYPES,
    FAULT_TYPES,
    candidate_faults,
    check_types,
    faults_from_file,
    replayed_fault,
    task_spec_from_folder,
)
from synthesis.faults.model import AstFaultType, Edit, FaultType, InjectedFault, build_fault
from synthesis.faults.verify import FaultVerdict, KernelFactory, clean_answers, verify_fault, verify_faults


def write_injected(path: str | Path, faults: Iterable[InjectedFault]) -> None:
    """Write ``InjectedFault`` s as the shared ``faults.jsonl`` (:func:`harness.worker.faults.write_faults`)."""
    write_faults(path, [fault.to_fault() for fault in faults])


__all__ = [
    "BENIGN_TYPES",
    "FAULT_TYPES",
    "AstFaultType",
    "Edit",
    "FaultType",
    "FaultVerdict",
    "InjectedFault",
    "KernelFactory",
    "build_fault",
    "candidate_faults",
    "check_types",
    "clean_answers",
    "faults_from_file",
    "hint_localizes",
    "replayed_fault",
    "task_spec_from_folder",
    "verify_fault",
    "verify_faults",
    "write_faults",
    "write_injected",
]
