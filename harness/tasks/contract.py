"""The task contract: the worker prompt rendered from a task's public parts and its data profile.

:func:`render_contract` assembles, in order: the objective (``task.description``), the working environment
(``DATA_DIR`` holds the public files read-only, ``WORK_DIR`` is where outputs go; both are Python variables and
environment variables in the sandbox), the data report (:meth:`DataProfile.to_markdown`), and the output requirements
of the task's kind:

* ``closed_form``: ``task.answer_format`` and the ``@name[value]`` convention;
* ``artifact``: the file to write in ``WORK_DIR`` (name, columns, rows, id column, scored columns and metric);
* ``multi_turn``: the earlier turns' questions, then the current turn's context, question, dependencies and precision.

Authority boundary: the contract uses only the task's public attributes (``id``, ``kind``, ``description``,
``answer_format``, ``submission``, ``turns``, ``public_dir``); it never reads ``task.private_dir`` nor calls
``task.load_answers()``. The task object is duck-typed so fakes work in tests.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.tasks.profile import DataProfile

logger = logging.getLogger(__name__)

ENVIRONMENT = (
    "You work in a persistent Python session. The task's files are in the directory `DATA_DIR` (read-only; paths "
    "below are relative to it). Write every file you create to `WORK_DIR`. Both are defined as Python variables and "
    "as environment variables."
)

RELATION_MEANINGS: dict[str, str] = {
    "init": "a fresh start",
    "progress": "continues from those turns",
    "branch": "an alternative path from those turns",
    "invalidate": "changes an assumption of those turns, so their results must not be reused unchanged",
    "combine": "combines the results of those turns",
}


def _closed_form_requirements(task: Any, turn_id: str | None) -> list[str]:
    lines = ["## Answer format", ""]
    if task.answer_format:
        lines += [str(task.answer_format).strip(), ""]
    lines.append(
        "End with your final answer: every requested value written as `@name[value]` (a value ends at the first "
        "`]`, so write lists without brackets)."
    )
    return lines


def _sample_columns(task: Any, profile: DataProfile, sample_rel: str | None) -> tuple[list[str] | None, Any]:
    """Columns and row count of the sample submission: from the profile, else the sample's header (a public file)."""
    if profile.submission and (sample_rel is None or profile.submission["path"] == sample_rel):
        return list(profile.submission["columns"]), profile.submission["n_rows"]
    sample = Path(task.submission.sample)
    if sample_rel is not None and sample.is_file():
        with sample.open(newline="", encoding="utf-8", errors="replace") as f:
            return next(csv.reader(f), None), None
    return None, None


def _artifact_requirements(task: Any, profile: DataProfile, turn_id: str | None) -> list[str]:
    spec = task.submission
    if spec is None:
        raise ValueError(f"Task {task.id} is an artifact task without a submission spec; add `submission:` to it.")
    sample_rel = None
    try:
        sample_rel = Path(spec.sample).relative_to(Path(task.public_dir)).as_posix()
    except ValueError:
        logger.warning("task %s: sample submission %s is outside the public folder; not shown", task.id, spec.sample)
    columns, n_rows = _sample_columns(task, profile, sample_rel)
    lines = ["## Output", "", f"Write your predictions to `WORK_DIR/{spec.filename}` (a CSV file with a header row)."]
    if sample_rel is not None:
        rows = f"the same {n_rows} rows" if n_rows is not None else "one row per sample row"
        lines.append(f"Follow the sample submission `{sample_rel}`: the same columns (any order) and {rows}.")
    if columns:
        lines.append(f"Columns: {', '.join(f'`{c}`' for c in columns)}.")
    if spec.id_column:
        lines.append(f"Rows are identified by `{spec.id_column}`; use exactly the sample's ids, each once.")
    targets = list(spec.target_columns) or [c for c in (columns or []) if c != spec.id_column]
    if targets:
        direction = {True: "higher is better", False: "lower is better"}.get(spec.higher_is_better, "")
        metric = f"{spec.metric} ({direction})" if direction else str(spec.metric)
        lines.append(f"Scored columns: {', '.join(f'`{c}`' for c in targets)}; metric: {metric}. Fill every cell.")
    return lines


def _multi_turn_requirements(task: Any, profile: DataProfile, turn_id: str | None) -> list[str]:
    turns = list(task.turns or ())
    if not turns:
        raise ValueError(f"Task {task.id} is a multi_turn task without turns; add `turns:` to its config.")
    ids = [str(t.turn_id) for t in turns]
    current_id = ids[0] if turn_id is None else str(turn_id)
    if current_id not in ids:
        raise ValueError(f"Task {task.id} has no turn {turn_id!r}; valid turn ids are {ids}.")
    index = ids.index(current_id)
    turn = turns[index]
    lines: list[str] = []
    if index:
        lines += ["## Earlier turns", ""]
        lines += [f"- Turn {t.turn_id}: {str(t.question).strip()}" for t in turns[:index]]
        lines.append("")
    lines += [f"## Current turn ({current_id}, {index + 1} of {len(turns)})", ""]
    if getattr(turn, "context", ""):
        lines += [f"Context: {str(turn.context).strip()}", ""]
    lines += [f"Question: {str(turn.question).strip()}", ""]
    depends_on = [str(d) for d in (getattr(turn, "depends_on", ()) or ())]
    relation = getattr(turn, "relation", None)
    if depends_on:
        meaning = RELATION_MEANINGS.get(str(relation), "")
        lines.append(f"This turn builds on turn(s) {', '.join(depends_on)} (relation: {relation}; {meaning}).")
    precision = getattr(turn, "precision", None)
    lines.append(
        "Answer with a JSON object of the requested fields (call `print_result(result)` with a dict)"
        + (f"; round numbers to {precision} decimals." if precision is not None else ".")
    )
    if getattr(task, "answer_format", None):
        lines += ["", f"Answer format: {str(task.answer_format).strip()}"]
    return lines


REQUIREMENTS: dict[str, Callable[[Any, DataProfile, str | None], list[str]]] = {
    "closed_form": lambda task, profile, turn_id: _closed_form_requirements(task, turn_id),
    "artifact": _artifact_requirements,
    "multi_turn": _multi_turn_requirements,
}
"""Task kind -> renderer of its output requirements."""


def render_contract(task: Any, profile: DataProfile, *, turn_id: str | None = None) -> str:
    """The worker prompt for ``task`` (for a multi-turn task, for turn ``turn_id``; ``None`` means the first turn).

    Raises ``ValueError`` for an unknown kind (listing the valid ones) or turn id (listing the task's turns).
    """
    try:
        requirements = REQUIREMENTS[task.kind]
    except KeyError:
        raise ValueError(
            f"Task {task.id} has kind {task.kind!r}; render_contract knows {sorted(REQUIREMENTS)}."
        ) from None
    if turn_id is not None and task.kind != "multi_turn":
        raise ValueError(f"Task {task.id} is {task.kind}, not multi_turn; call render_contract without turn_id.")
    lines = [
        f"# Task {task.id}",
        "",
        "## Objective",
        "",
        str(task.description).strip(),
        "",
        "## Environment",
        "",
        ENVIRONMENT,
        "",
        "## Data",
        "",
        profile.to_markdown(),
        "",
    ]
    lines += requirements(task, profile, turn_id)
    return "\n".join(lines).rstrip() + "\n"
