"""Semantic checks of a task config, shared constants, and the error type that lists every problem.

:func:`config_problems` takes any object with the attributes of :class:`harness.tasks.config.TaskConfig` (fields that
failed to parse may be None), so the parser can report type problems and semantic problems in one error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.tasks.grader_ref import GraderRef

CONFIG_FILE = "config.yaml"

KINDS = ("closed_form", "artifact", "multi_turn")
GRADER_STYLES = ("stateguard", "mlebench")
RELATIONS = ("init", "progress", "branch", "invalidate", "combine")

DEFAULT_GRADERS: dict[str, str] = {
    "closed_form": "harness.evaluation.graders:grade_dabench",
    "artifact": "harness.evaluation.graders:grade_csv_submission",
    "multi_turn": "harness.evaluation.graders:grade_structured",
}
"""The grader used when ``config.yaml`` names none, per task kind."""

TASK_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ANSWER_NAME_PATTERN = re.compile(r"^\w+$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a task folder: where (file, field), what, and how to fix it."""

    file: str
    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message} Fix: {self.fix}"


class TaskConfigError(ValueError):
    """A task folder is invalid. ``problems`` lists every problem found (each names the file, field and fix)."""

    def __init__(self, problems: Sequence[Problem | str], *, path: object = None) -> None:
        self.records: tuple[Problem | str, ...] = tuple(problems)
        self.problems: tuple[str, ...] = tuple(str(p) for p in problems)
        self.path = path
        where = f"task folder {path}" if path is not None else "task config"
        count = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{where} is invalid ({count} problem{'s' if count != 1 else ''}):\n{lines}")


def config_problems(cfg: Any, *, file: str = CONFIG_FILE) -> list[Problem]:
    """Every semantic problem of a (possibly partially parsed) config; fields that failed to parse are None."""
    problems: list[Problem] = []
    if isinstance(cfg.id, str) and not TASK_ID_PATTERN.match(cfg.id):
        problems.append(
            Problem(
                file,
                "id",
                f"{cfg.id!r} is not a valid task id.",
                "use letters, digits, '.', '_' and '-' only, starting with a letter or digit.",
            )
        )
    kind = cfg.kind
    if isinstance(kind, str) and kind not in KINDS:
        problems.append(Problem(file, "kind", f"{kind!r} is not a task kind.", f"use one of: {', '.join(KINDS)}."))
        kind = None
    style = cfg.grader_style
    if isinstance(style, str) and style not in GRADER_STYLES:
        problems.append(
            Problem(
                file, "grader_style", f"{style!r} is not a grader style.", f"use one of: {', '.join(GRADER_STYLES)}."
            )
        )
    if isinstance(cfg.grader, str):
        try:
            GraderRef.parse(cfg.grader)
        except ValueError as exc:
            problems.append(
                Problem(
                    file,
                    "grader",
                    str(exc),
                    "write 'file:grade.py:grade' (a function in a file of the task folder) or "
                    "'package.module:function'.",
                )
            )
    for name in ("description", "public_dir", "private_dir"):
        value = getattr(cfg, name)
        if isinstance(value, str) and not value.strip():
            problems.append(Problem(file, name, "is empty.", f"set '{name}' to a path relative to the task folder."))
    if kind == "closed_form" and not cfg.answer_format:
        problems.append(
            Problem(
                file,
                "answer_format",
                "a closed_form task needs an answer format.",
                "add 'answer_format:', e.g. '@mean_fare[value] where value is rounded to 2 decimals'.",
            )
        )
    if kind == "artifact" and cfg.submission is None:
        problems.append(
            Problem(
                file,
                "submission",
                "an artifact task needs a submission section.",
                "add 'submission:' with filename, sample, answers and metric.",
            )
        )
    if kind is not None and kind != "artifact" and cfg.submission is not None:
        problems.append(
            Problem(
                file,
                "submission",
                f"only artifact tasks take a submission section (kind is {kind}).",
                "remove 'submission:' or set 'kind: artifact'.",
            )
        )
    if style == "mlebench" and kind is not None and kind != "artifact":
        problems.append(
            Problem(
                file,
                "grader_style",
                f"grader_style 'mlebench' grades CSV files, but kind is {kind}.",
                "use 'grader_style: stateguard' or set 'kind: artifact'.",
            )
        )
    if style == "mlebench" and cfg.grader is None:
        problems.append(
            Problem(
                file,
                "grader",
                "grader_style 'mlebench' needs the competition's grader.",
                "add 'grader: file:grade.py:grade'.",
            )
        )
    turns = cfg.turns or ()
    if kind == "multi_turn" and not turns:
        problems.append(
            Problem(
                file,
                "turns",
                "a multi_turn task needs at least one turn.",
                "add 'turns:' with turn_id, question, depends_on and relation for each turn.",
            )
        )
    if kind is not None and kind != "multi_turn" and turns:
        problems.append(
            Problem(
                file,
                "turns",
                f"only multi_turn tasks take turns (kind is {kind}).",
                "remove 'turns:' or set 'kind: multi_turn'.",
            )
        )
    if cfg.submission is not None:
        problems.extend(_submission_problems(cfg.submission, file))
    problems.extend(turn_problems(turns, file=file))
    return problems


def _submission_problems(sub: Any, file: str) -> list[Problem]:
    problems = []
    for name in ("filename", "sample", "answers", "metric"):
        if not getattr(sub, name).strip():
            problems.append(Problem(file, f"submission.{name}", "is empty.", f"set 'submission.{name}'."))
    if "/" in sub.filename or "\\" in sub.filename:
        problems.append(
            Problem(
                file,
                "submission.filename",
                f"{sub.filename!r} must be a bare file name.",
                "drop the folder part (the worker writes it into its work directory).",
            )
        )
    if sub.id_column is not None and sub.id_column in sub.target_columns:
        problems.append(
            Problem(
                file,
                "submission.target_columns",
                f"the id column {sub.id_column!r} is also a target.",
                "remove it from 'submission.target_columns'.",
            )
        )
    return problems


def turn_problems(turns: Sequence[Any], *, file: str = CONFIG_FILE) -> list[Problem]:
    """Multi-turn consistency: unique ids, dependencies on earlier turns only, relations that fit them."""
    problems: list[Problem] = []
    position: dict[str, int] = {}
    for i, turn in enumerate(turns):
        where = f"turns[{i}]"
        if not turn.turn_id.strip():
            problems.append(Problem(file, f"{where}.turn_id", "is empty.", "give every turn a unique, non-empty id."))
        if turn.turn_id in position:
            problems.append(
                Problem(
                    file,
                    f"{where}.turn_id",
                    f"duplicate turn id {turn.turn_id!r} (also turns[{position[turn.turn_id]}]).",
                    "give every turn a unique id.",
                )
            )
        else:
            position[turn.turn_id] = i
        if not turn.question.strip():
            problems.append(Problem(file, f"{where}.question", "is empty.", "write the question the turn asks."))
        if turn.precision is not None and turn.precision < 0:
            problems.append(
                Problem(
                    file,
                    f"{where}.precision",
                    f"{turn.precision} is negative.",
                    "use a number of decimals >= 0, or drop it for the default of 4.",
                )
            )
    ids = [t.turn_id for t in turns]
    for i, turn in enumerate(turns):
        where = f"turns[{i}]"
        seen: set[str] = set()
        for dep in turn.depends_on:
            if dep in seen:
                problems.append(
                    Problem(file, f"{where}.depends_on", f"lists turn {dep!r} twice.", f"remove the repeated {dep!r}.")
                )
            seen.add(dep)
            if dep == turn.turn_id:
                problems.append(
                    Problem(
                        file,
                        f"{where}.depends_on",
                        f"turn {dep!r} depends on itself.",
                        f"remove {dep!r} from its own depends_on.",
                    )
                )
            elif dep not in position:
                problems.append(
                    Problem(
                        file,
                        f"{where}.depends_on",
                        f"names unknown turn {dep!r}.",
                        f"use ids of earlier turns: {', '.join(ids[:i]) or '(none: this is the first)'}.",
                    )
                )
            elif position[dep] > i:
                problems.append(
                    Problem(
                        file,
                        f"{where}.depends_on",
                        f"names turn {dep!r}, which comes later (turns[{position[dep]}]).",
                        "a turn may depend on earlier turns only: reorder the turns or drop the id.",
                    )
                )
        n_deps = len(set(turn.depends_on))
        if turn.relation not in RELATIONS:
            problems.append(
                Problem(
                    file,
                    f"{where}.relation",
                    f"{turn.relation!r} is not a relation.",
                    f"use one of: {', '.join(RELATIONS)}.",
                )
            )
        elif turn.relation == "init" and n_deps:
            problems.append(
                Problem(
                    file,
                    f"{where}.relation",
                    f"'init' means no upstream turn, but depends_on lists {list(turn.depends_on)}.",
                    "clear depends_on, or pick progress/branch/invalidate/combine.",
                )
            )
        elif turn.relation == "combine" and n_deps < 2:
            problems.append(
                Problem(
                    file,
                    f"{where}.relation",
                    f"'combine' needs two or more dependencies, got {n_deps}.",
                    "list every combined turn in depends_on, or use progress/branch.",
                )
            )
        elif turn.relation in ("progress", "branch", "invalidate") and n_deps == 0:
            problems.append(
                Problem(
                    file,
                    f"{where}.relation",
                    f"{turn.relation!r} needs a dependency, got none.",
                    "name the upstream turn in depends_on, or use 'init'.",
                )
            )
    return problems
