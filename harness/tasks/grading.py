"""Grading dispatch: find a task's grader and turn whatever it returns into a :class:`GradeResult`.

Submissions by kind: closed_form -> the response text (``str``); artifact -> the path of the submitted file
(``str`` or ``os.PathLike``); multi_turn -> ``dict`` keyed by turn id (str) of structured answers (turns missing from
a partial dict are graded as wrong by the grader). A submission of the wrong type is invalid, not wrong.

Grader styles (``config.yaml: grader_style``):

* ``stateguard`` (default): ``fn(submission, task) -> GradeResult | float``. A float is wrapped as a valid result.
* ``mlebench``: ``fn(submission_df, answers_df) -> float``. The submission file and the private answers CSV are read
  into DataFrames; a submission that is missing or not a parseable CSV is invalid. The call runs with the ``mlebench``
  shim active (:mod:`harness.tasks.mlebench_compat`).

*Invalid is not wrong*: a grader raising :class:`InvalidSubmissionError` gives ``GradeResult(valid=False,
score=None, details={"error": message})``. Any other exception is a bug in the grader or the task and propagates.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.result import GradeResult
from harness.tasks.mlebench_compat import mlebench_shim
from harness.tasks.task import Task

Grader = Callable[[Any, Task], "GradeResult | float"]

SUBMISSION_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "closed_form": ((str,), "the response text (a string)"),
    "artifact": ((str, os.PathLike), "the path of the submitted file"),
    "multi_turn": ((dict,), "a JSON object keyed by turn id"),
}


def _read_submission_csv(path: Path, expected_name: str) -> pd.DataFrame:
    if not path.is_file():
        raise InvalidSubmissionError(
            f"submission file {path} does not exist; write the submission as {expected_name}."
        )
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InvalidSubmissionError(
            f"submission file {path} is not a readable CSV ({exc}); write a CSV with the "
            "columns of the sample submission."
        ) from exc


def _mlebench_adapter(fn: Callable[[pd.DataFrame, pd.DataFrame], float]) -> Grader:
    """Wrap an MLE-bench ``grade(submission_df, answers_df)`` as a StateGuard grader."""

    def grade(submission: Any, task: Task) -> float:
        expected = task.submission.filename if task.submission else "a CSV file"
        submission_df = _read_submission_csv(Path(submission), expected)
        answers_df = pd.read_csv(task.load_answers())
        with mlebench_shim():
            return fn(submission_df, answers_df)

    grade.__name__ = f"mlebench_{getattr(fn, '__name__', 'grade')}"
    return grade


GRADER_STYLES: dict[str, Callable[[Callable[..., Any]], Grader]] = {
    "stateguard": lambda fn: fn,
    "mlebench": _mlebench_adapter,
}
"""Grader style -> adapter that turns the referenced function into ``fn(submission, task)``."""


def resolve_grader(task: Task) -> Grader:
    """The grader of ``task`` as ``fn(submission, task) -> GradeResult | float`` (adapted to its grader style)."""
    fn = task.grader.load(task.root)
    try:
        adapt = GRADER_STYLES[task.config.grader_style]
    except KeyError:
        raise ValueError(
            f"task {task.id}: unknown grader_style {task.config.grader_style!r}; valid styles: "
            f"{', '.join(GRADER_STYLES)}."
        ) from None
    return adapt(fn)


def _wrap(task: Task, outcome: Any, grader: Grader) -> GradeResult:
    if isinstance(outcome, GradeResult):
        return outcome
    if isinstance(outcome, numbers.Real) and not isinstance(outcome, bool) and math.isfinite(outcome):
        details = {"grader": task.config.grader_ref, "grader_style": task.config.grader_style}
        return GradeResult(task_id=task.id, valid=True, score=float(outcome), details=details)
    raise TypeError(
        f"grader {task.config.grader_ref} ({getattr(grader, '__name__', grader)}) of task {task.id} "
        f"returned {outcome!r}; a grader must return a GradeResult or a finite number."
    )


def grade_task(task: Task, submission: Any) -> GradeResult:
    """Grade ``submission`` for ``task``; an invalid submission gives ``valid=False, score=None`` (never raises)."""
    types, expected = SUBMISSION_TYPES[task.kind]
    if not isinstance(submission, types):
        message = f"a {task.kind} submission must be {expected}, got {type(submission).__name__}."
        return GradeResult(task_id=task.id, valid=False, score=None, details={"error": message})
    grader = resolve_grader(task)
    try:
        outcome = grader(submission, task)
    except InvalidSubmissionError as exc:
        return GradeResult(task_id=task.id, valid=False, score=None, details={"error": str(exc)})
    return _wrap(task, outcome, grader)
