"""The submission a workflow's program writes, and its check against the task's submission contract.

Programs written by the ``direct``, ``pipeline`` and ``search`` agents leave their result as a file in ``WORK_DIR``:

- ``artifact`` tasks: the task's submission file (``submission.filename``), checked with
  :func:`~harness.evaluation.submission.validate_csv_submission` against the sample (columns, rows, ids);
- ``closed_form`` tasks: ``answer.json``, a JSON object with one value per ``@name[...]`` of the answer format;
- ``multi_turn`` tasks: ``answer.json``, a JSON object (the turn's structured answer).

A program may instead report its answer with ``print_result(obj)`` (a persistent-kernel program); :func:`check` takes
that value when no file was written. The check happens *before* grading and never reads the task's private answers:
an invalid submission is reported with the reason (shown to the model by the debug operator), never graded.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.evaluation.dabench import ANSWER_PATTERN
from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.submission import validate_csv_submission
from harness.sandbox import files
from harness.tasks import Task

ANSWER_FILE = "answer.json"
"""The file a program writes in ``WORK_DIR`` for closed_form and multi_turn tasks."""

NO_RESULT = object()
"""Marks "the program reported no ``print_result`` value" (``None`` is a value)."""


@dataclass(frozen=True)
class Validation:
    """The outcome of checking a submission: ``valid`` with the ``answer`` (the value or the file path), or the
    ``error`` naming the problem and the fix. ``missing`` is True when nothing was submitted at all; ``content``
    holds the bytes of a valid artifact file as they were checked."""

    valid: bool
    answer: Any = None
    error: str | None = None
    missing: bool = False
    content: bytes | None = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        return "valid" if self.valid else f"invalid: {self.error}"


def submission_file(task: Task) -> str:
    """The file name a program writes its submission to (see the module docstring)."""
    return task.submission.filename if task.kind == "artifact" and task.submission else ANSWER_FILE


def answer_names(task: Task) -> list[str]:
    """The ``@name[...]`` names of a closed_form task's answer format (empty when it has none)."""
    return [name for name, _ in ANSWER_PATTERN.findall(task.answer_format or "")]


def target_text(task: Task) -> str:
    """The instruction ``... that <target>`` telling a program what to write (used by the prompts)."""
    if task.kind == "artifact":
        return (
            f"writes the submission CSV to WORK_DIR/{submission_file(task)} with exactly the sample's columns and rows"
        )
    if task.kind == "closed_form":
        names = ", ".join(f'"{n}"' for n in answer_names(task)) or "one key per answer"
        return f"writes the answers as a JSON object with the keys {names} to WORK_DIR/{ANSWER_FILE}"
    return f"writes the answer to the question as a JSON object (named values) to WORK_DIR/{ANSWER_FILE}"


def clear(task: Task, workdir: Path) -> None:
    """Remove an earlier submission file, so a stale one is never taken for a new question's (a link there is
    removed itself, never its target)."""
    files.remove(workdir, submission_file(task))


def read_submission(task: Task, workdir: Path) -> bytes | None:
    """The submission file's bytes, read through :mod:`harness.sandbox.files` (None when there is none); a link,
    FIFO, device, hard link or oversized file raises :class:`~harness.sandbox.files.WorkspaceFileError`."""
    try:
        return files.read_bytes(workdir, submission_file(task))
    except FileNotFoundError:
        return None


def check(task: Task, workdir: Path, reported: Any = NO_RESULT) -> Validation:
    """Check the submission in ``workdir`` (or the ``print_result`` value ``reported``) against the contract.

    The file is read once through :mod:`harness.sandbox.files`: a link, FIFO or device there is invalid with the
    reason (its target is never read, nor its content echoed)."""
    name = submission_file(task)
    try:
        data = read_submission(task, workdir)
    except files.WorkspaceFileError as exc:
        return Validation(False, error=f"{exc}.")
    if task.kind == "artifact":
        if data is None:
            return Validation(False, error=f"no submission file: write it to WORK_DIR/{name}.", missing=True)
        with tempfile.TemporaryDirectory(prefix="stateguard-check-") as folder:
            copy = Path(folder) / name
            copy.write_bytes(data)
            try:
                validate_csv_submission(
                    copy, sample_path=task.submission.sample, expected_name=name, id_column=task.submission.id_column
                )
            except InvalidSubmissionError as exc:
                return Validation(False, error=str(exc).replace(str(copy), f"WORK_DIR/{name}"))
        return Validation(True, answer=str(workdir / name), content=data)
    if data is not None:
        try:
            value = json.loads(data.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return Validation(False, error=f"WORK_DIR/{ANSWER_FILE} is not JSON ({exc}); write it with json.dump.")
    elif reported is not NO_RESULT:
        value = reported
    else:
        return Validation(False, error=f"no answer: write a JSON object to WORK_DIR/{ANSWER_FILE}.", missing=True)
    if not isinstance(value, dict) or not value:
        return Validation(False, error=f"the answer must be a non-empty JSON object, got {str(value)[:100]!r}.")
    missing = [name for name in answer_names(task) if name not in value] if task.kind == "closed_form" else []
    if missing:
        return Validation(False, error=f"the answer lacks the key(s) {missing} of the answer format; add them.")
    return Validation(True, answer=value)
