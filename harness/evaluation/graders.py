"""Built-in graders, referenced by name from task configs: ``fn(submission, task) -> GradeResult``.

A grader raises :class:`InvalidSubmissionError` when the submission cannot be graded (its score is ``None``, not 0);
:func:`grade` turns that into ``GradeResult(valid=False, score=None, details={"error": ...})``. A task-configuration
problem (unknown metric, missing answers) raises ``ValueError`` and is not the submitter's fault.

Graders only use this duck-typed ``task`` interface:

* ``task.id``, ``task.kind``;
* ``task.load_answers()``: closed_form -> ``[(name, value), ...]`` labels; multi_turn -> ``{turn_id: obj}`` with
  ``obj.answer`` (the reference dict); artifact -> ``Path`` of the private answers CSV;
* ``task.turns``: objects with ``.turn_id`` and ``.precision`` (``int | None``);
* ``task.submission`` (artifact): ``.filename``, ``.sample`` (absolute ``Path``), ``.id_column``,
  ``.target_columns``, ``.metric``, ``.higher_is_better``.

Submissions: ``dabench`` takes the response text (a text without any ``@name[...]`` is *valid but wrong*, score 0;
anything but a ``str`` is invalid); ``structured`` takes ``{turn_id: answer_dict}``; ``csv_submission`` takes the
path of the submitted CSV, or a directory that holds ``task.submission.filename``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.evaluation.dabench import answers_dict, extract_answers, score_response
from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.metrics import get_metric, numeric_column_errors
from harness.evaluation.result import GradeResult
from harness.evaluation.structured import StructuredScore, compare_structured
from harness.evaluation.submission import read_csv_text, validate_csv_submission
from harness.registry import lookup

logger = logging.getLogger(__name__)

Grader = Callable[[Any, Any], GradeResult]


def grade_dabench(submission: Any, task: Any) -> GradeResult:
    """Closed-form DABench answer: score 1.0 when every gold ``@name[value]`` matches, else 0.0."""
    if not isinstance(submission, str):
        raise InvalidSubmissionError(
            f"Task {task.id}: the dabench grader needs the response text (str), got {type(submission).__name__}; "
            f"submit the final answer text with @name[value] answers."
        )
    labels = task.load_answers()
    result = score_response(submission, labels)
    details = {
        "per_answer": result.per_answer,
        "n_correct": result.n_correct,
        "n_total": result.n_total,
        "predicted": answers_dict(extract_answers(submission)),
    }
    return GradeResult(task_id=str(task.id), valid=True, score=1.0 if result.correct else 0.0, details=details)


def _turn_precisions(task: Any) -> dict[str, int | None]:
    return {str(turn.turn_id): getattr(turn, "precision", None) for turn in getattr(task, "turns", ()) or ()}


def grade_structured(submission: Any, task: Any) -> GradeResult:
    """Multi-turn structured answers: score = fraction of reference turns whose answer is fully correct.

    Each turn's answer is compared with :func:`compare_structured` at the turn's precision. A missing turn or a
    non-dict turn answer makes that turn wrong (every reference field False); turns not in the reference are ignored
    and listed in ``details["ignored_turns"]``.
    """
    if not isinstance(submission, Mapping):
        raise InvalidSubmissionError(
            f"Task {task.id}: the structured grader needs a dict turn_id -> answer dict, got "
            f"{type(submission).__name__}; submit {{'<turn_id>': {{'<field>': value, ...}}, ...}}."
        )
    references = task.load_answers()
    if not references:
        raise ValueError(f"Task {task.id} has no reference answers for its turns; fix the task's private answers.")
    predicted = {str(turn_id): answer for turn_id, answer in submission.items()}
    precisions = _turn_precisions(task)

    turns: dict[str, dict[str, Any]] = {}
    for turn_id, reference in references.items():
        turn_id = str(turn_id)
        answer = predicted.get(turn_id)
        if isinstance(answer, Mapping):
            result = compare_structured(answer, reference.answer, precision=precisions.get(turn_id))
        else:
            wrong_fields = dict.fromkeys(compare_structured(None, reference.answer).fields, False)
            result = StructuredScore(correct=False, score=0.0, fields=wrong_fields)
        turns[turn_id] = {"score": result.score, "correct": result.correct, "fields": result.fields}
        if turn_id not in predicted:
            turns[turn_id]["missing"] = True
    n_correct = sum(turn["correct"] for turn in turns.values())
    details = {
        "turns": turns,
        "n_correct": n_correct,
        "n_turns": len(turns),
        "ignored_turns": sorted(set(predicted) - set(turns)),
    }
    return GradeResult(task_id=str(task.id), valid=True, score=n_correct / len(turns), details=details)


def grade_csv_submission(submission: Any, task: Any) -> GradeResult:
    """Artifact task: validate the CSV against the sample, then the metric over the target columns.

    Rows are joined on ``id_column`` when the task names one, otherwise aligned by position. With several target
    columns the score is the mean of the per-column metric values (``details["per_column"]``). Blank or (for numeric
    metrics) non-numeric predictions in a target column make the submission invalid.
    """
    spec = task.submission
    metric = get_metric(spec.metric)
    if not isinstance(submission, (str, os.PathLike)):
        raise InvalidSubmissionError(
            f"Task {task.id}: the csv_submission grader needs the path of the submitted file, got "
            f"{type(submission).__name__}; submit the path of {spec.filename}."
        )
    path = Path(submission)
    if path.is_dir():
        path = path / spec.filename
    frame = validate_csv_submission(
        path, sample_path=spec.sample, expected_name=spec.filename, id_column=spec.id_column
    )
    answers_path = Path(task.load_answers())
    answers = read_csv_text(answers_path)

    targets = list(spec.target_columns)
    if not targets:
        raise ValueError(f"Task {task.id} names no submission.target_columns; list the columns to score.")
    for column in targets:
        if column not in answers.columns:
            raise ValueError(f"Task {task.id}: target column {column!r} is not in the answers file {answers_path}.")
        if column not in frame.columns:
            raise InvalidSubmissionError(
                f"Submission file {path} has no target column {column!r}; add it (columns of the sample: "
                f"{list(frame.columns)})."
            )

    if spec.id_column is not None:
        answer_ids = answers[spec.id_column].fillna("").str.strip()
        frame_ids = frame[spec.id_column].fillna("").str.strip()
        if set(answer_ids) != set(frame_ids):
            raise ValueError(f"Task {task.id}: the ids of the answers file {answers_path} differ from the sample's.")
        frame = frame.assign(_key=frame_ids).set_index("_key").loc[answer_ids.tolist()]
    elif len(answers) != len(frame):
        raise ValueError(f"Task {task.id}: the answers file {answers_path} and the sample differ in row count.")

    per_column: dict[str, float] = {}
    for column in targets:
        predictions = frame[column].tolist()
        blanks = sum(value is None or value != value or not str(value).strip() for value in predictions)
        if blanks:
            raise InvalidSubmissionError(
                f"Submission file {path} has {blanks} blank value(s) in column {column!r}; fill every row."
            )
        if metric.numeric:
            bad = numeric_column_errors(predictions)
            if bad:
                raise InvalidSubmissionError(
                    f"Submission file {path} has non-numeric values in column {column!r} (e.g. {bad}); the "
                    f"{metric.name} metric needs a finite number in every row."
                )
        per_column[column] = metric.fn(answers[column].tolist(), predictions)

    score = sum(per_column.values()) / len(per_column)
    higher = getattr(spec, "higher_is_better", None)
    details = {
        "metric": metric.name,
        "higher_is_better": metric.higher_is_better if higher is None else bool(higher),
        "per_column": per_column,
        "n_rows": len(frame),
    }
    return GradeResult(task_id=str(task.id), valid=True, score=float(score), details=details)


GRADERS: dict[str, Grader] = {
    "dabench": grade_dabench,
    "structured": grade_structured,
    "csv_submission": grade_csv_submission,
}


def get_grader(name: str) -> Grader:
    """The built-in grader called ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    return lookup(GRADERS, name, what="grader", fix="Fix the task's grader.")


def grade(grader: str | Grader, submission: Any, task: Any) -> GradeResult:
    """Run a grader (by name or function); an :class:`InvalidSubmissionError` becomes an invalid ``GradeResult``."""
    fn = get_grader(grader) if isinstance(grader, str) else grader
    try:
        return fn(submission, task)
    except InvalidSubmissionError as exc:
        logger.info("task %s: invalid submission: %s", getattr(task, "id", "?"), exc)
        return GradeResult(task_id=str(task.id), valid=False, score=None, details={"error": str(exc)})
