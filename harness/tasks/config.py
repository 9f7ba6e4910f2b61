"""``config.yaml`` of a task folder: the frozen :class:`TaskConfig` and its parsing.

Validation never stops at the first problem: :meth:`TaskConfig.from_dict` collects every problem of the file (unknown
keys, missing required keys, wrong types) plus the semantic ones of :mod:`harness.tasks.checks` (bad enum values,
kind-specific fields, multi-turn inconsistencies) and raises one :class:`TaskConfigError` that lists them all, each
naming the file, the field and the fix. Checks that need the task folder (files that must exist, private answers,
grader references) live in :mod:`harness.tasks.task`.

Direct construction (``TaskConfig(id=..., kind=...)``) runs the same semantic checks in ``__post_init__``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from types import SimpleNamespace
from typing import Any

from harness.pyast import parse_python
from harness.tasks.checks import (
    ANSWER_NAME_PATTERN,
    CONFIG_FILE,
    DEFAULT_GRADERS,
    GRADER_STYLES,
    KINDS,
    RELATIONS,
    TASK_ID_PATTERN,
    Problem,
    TaskConfigError,
    config_problems,
    turn_problems,
)

__all__ = [
    "ANSWER_NAME_PATTERN",
    "CONFIG_FILE",
    "DEFAULT_GRADERS",
    "GRADER_STYLES",
    "KINDS",
    "RELATIONS",
    "TASK_ID_PATTERN",
    "Problem",
    "SubmissionConfig",
    "TaskConfig",
    "TaskConfigError",
    "Turn",
    "TurnConstraint",
    "config_problems",
    "turn_problems",
]


@dataclass(frozen=True)
class TurnConstraint:
    """A public condition on one turn's result (part of the question): ``text`` in words and optionally ``code``, a
    standalone Python check over the worker's variables that raises (or evaluates to False) when it is violated."""

    text: str = field(metadata={"help": "The condition in words."})
    code: str | None = field(default=None, metadata={"help": "Optional executable check (raises when violated)."})


@dataclass(frozen=True)
class Turn:
    """The public part of one turn of a multi-turn task (its reference code and answer are private)."""

    turn_id: str = field(
        metadata={"help": "Unique id of the turn within the task (a string; YAML integers are accepted)."}
    )
    question: str = field(metadata={"help": "The question the worker answers in this turn."})
    context: str = field(default="", metadata={"help": "Background for this turn (new facts, corrections, rules)."})
    depends_on: tuple[str, ...] = field(
        default=(), metadata={"help": "Ids of earlier turns whose results this turn builds on."}
    )
    relation: str = field(
        default="init", metadata={"help": f"How the turn relates to its dependencies: one of {', '.join(RELATIONS)}."}
    )
    precision: int | None = field(
        default=None, metadata={"help": "Decimals numbers are compared at when grading this turn (None: 4)."}
    )
    constraints: tuple[TurnConstraint, ...] = field(
        default=(),
        metadata={"help": "Public conditions the turn's result must satisfy; each may carry an executable check."},
    )


@dataclass(frozen=True)
class SubmissionConfig:
    """What an artifact task expects the worker to write, as written in ``config.yaml`` (paths are relative)."""

    filename: str = field(default="submission.csv", metadata={"help": "Name of the file the worker must write."})
    sample: str = field(
        default="sample_submission.csv",
        metadata={"help": "Sample submission, relative to the public folder (shows the expected columns and rows)."},
    )
    answers: str = field(default="answers.csv", metadata={"help": "Answers CSV, relative to the private folder."})
    id_column: str | None = field(default=None, metadata={"help": "Column that identifies rows (joins to answers)."})
    target_columns: tuple[str, ...] = field(
        default=(), metadata={"help": "Columns that are scored (empty: every sample column except the id column)."}
    )
    metric: str = field(default="accuracy", metadata={"help": "Metric the built-in grader computes, e.g. accuracy."})
    higher_is_better: bool | None = field(
        default=None, metadata={"help": "Whether a larger metric is better (None: the metric's own direction)."}
    )


@dataclass(frozen=True)
class TaskConfig:
    """The contents of a task's ``config.yaml``. YAML keys equal field names."""

    id: str = field(metadata={"help": "Unique task id: letters, digits, '.', '_' or '-' (e.g. dabench-0)."})
    kind: str = field(metadata={"help": f"Task kind: one of {', '.join(KINDS)}."})
    name: str | None = field(default=None, metadata={"help": "Human-readable title (defaults to the id)."})
    description: str = field(
        default="description.md", metadata={"help": "Markdown file with the objective, relative to the task folder."}
    )
    grader: str | None = field(
        default=None,
        metadata={
            "help": "Grader reference: 'file:grade.py:grade' (relative to the task folder) or 'module.path:function'. "
            "Default per kind: " + ", ".join(f"{k} -> {v}" for k, v in DEFAULT_GRADERS.items()) + "."
        },
    )
    grader_style: str = field(
        default="stateguard",
        metadata={
            "help": "Calling convention of the grader: 'stateguard' fn(submission, task) -> GradeResult | float, or "
            "'mlebench' fn(submission_df, answers_df) -> float (artifact tasks only)."
        },
    )
    public_dir: str = field(
        default="public", metadata={"help": "Folder visible to the worker (read-only), relative to the task folder."}
    )
    private_dir: str = field(
        default="private", metadata={"help": "Folder with the answers, never shown to worker or manager."}
    )
    answer_format: str | None = field(
        default=None, metadata={"help": "closed_form: how the answer must be written, e.g. '@mean_fare[value]'."}
    )
    submission: SubmissionConfig | None = field(
        default=None, metadata={"help": "artifact: the expected submission file (filename, sample, answers, metric)."}
    )
    turns: tuple[Turn, ...] = field(default=(), metadata={"help": "multi_turn: the turns, in order."})
    constraints: tuple[TurnConstraint, ...] = field(
        default=(),
        metadata={
            "help": "closed_form/artifact: public conditions on the task's result, each optionally with an executable "
            "check (multi_turn tasks put constraints on their turns)."
        },
    )
    metadata: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Free-form facts: source, level, concepts, license, ..."}
    )

    def __post_init__(self) -> None:
        problems = config_problems(self)
        if self.kind == "multi_turn" and self.constraints:
            problems.append(
                Problem(
                    CONFIG_FILE,
                    "constraints",
                    "task-level constraints are for single-question tasks (closed_form, artifact).",
                    "move each constraint to the turn it belongs to (turns[i].constraints).",
                )
            )
        if problems:
            raise TaskConfigError(problems)

    @property
    def grader_ref(self) -> str:
        """The grader reference in effect (the configured one, else the default of the kind)."""
        return self.grader or DEFAULT_GRADERS[self.kind]

    @classmethod
    def from_dict(cls, data: Any, *, file: str = CONFIG_FILE) -> TaskConfig:
        """Build a config from parsed YAML, reporting every problem at once in one :class:`TaskConfigError`."""
        problems: list[Problem] = []
        values = _parse_mapping(data, cls, file, "", problems, nested={"submission": SubmissionConfig})
        if values is None:
            raise TaskConfigError(problems)
        turns = values.get("turns", ())
        if turns is not None and "turns" in values:
            values["turns"] = _parse_turns(turns, file, problems)
        if "constraints" in values:
            values["constraints"] = _parse_constraints(values["constraints"], file, "constraints", problems)
        if problems:  # also report the cross-field problems of whatever parsed cleanly
            view = {f.name: None for f in fields(cls)} | {k: v for k, v in values.items() if v is not None}
            view.setdefault("turns", ())
            problems.extend(config_problems(SimpleNamespace(**view), file=file))
            raise TaskConfigError(problems)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``config.yaml`` (fields left at their defaults are omitted; ``id`` and ``kind`` first)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            if f.name not in ("id", "kind") and value == default:
                continue
            if f.name == "submission" and value is not None:
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(value).items() if v is not None}
            elif f.name == "constraints":
                value = [{k: v for k, v in asdict(c).items() if v is not None} for c in value]
            elif f.name == "turns":
                value = [
                    _dataclass_to_dict(t, Turn, keep=("turn_id", "question", "depends_on", "relation")) for t in value
                ]
            out[f.name] = value
        return out


def _dataclass_to_dict(obj: Any, cls: type, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    data = asdict(obj)
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    out = {}
    for key, value in data.items():
        if key not in keep and key in defaults and value == defaults[key]:
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


# ---------------------------------------------------------------------------------------------------------------------
# parsing: types, unknown and missing keys


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


FIELD_TYPES: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "id": ((str,), False, "a string"),
    "kind": ((str,), False, "a string"),
    "name": ((str,), True, "a string"),
    "description": ((str,), False, "a path string"),
    "grader": ((str,), True, "a reference string"),
    "grader_style": ((str,), False, "a string"),
    "public_dir": ((str,), False, "a path string"),
    "private_dir": ((str,), False, "a path string"),
    "answer_format": ((str,), True, "a string"),
    "submission": ((dict,), True, "a mapping"),
    "turns": ((list,), False, "a list of turns"),
    "metadata": ((dict,), False, "a mapping"),
    # SubmissionConfig
    "filename": ((str,), False, "a file name"),
    "sample": ((str,), False, "a path string"),
    "answers": ((str,), False, "a path string"),
    "id_column": ((str,), True, "a column name"),
    "target_columns": ((list,), False, "a list of column names"),
    "metric": ((str,), False, "a metric name"),
    "higher_is_better": ((bool,), True, "true or false"),
    # Turn
    "turn_id": ((str, int), False, "a string (or integer)"),
    "question": ((str,), False, "a string"),
    "context": ((str,), False, "a string"),
    "depends_on": ((list,), False, "a list of turn ids"),
    "relation": ((str,), False, "a string"),
    "precision": ((int,), True, "a non-negative integer"),
    "constraints": ((list,), False, "a list of {text, code} mappings"),
}
"""Config key -> (accepted Python types, whether null is allowed, the type as the error message names it)."""


def _parse_mapping(
    data: Any,
    cls: type,
    file: str,
    prefix: str,
    problems: list[Problem],
    nested: Mapping[str, type] | None = None,
) -> dict[str, Any] | None:
    """Check keys and value types of one mapping against the fields of ``cls``; return the usable values."""
    where = prefix.rstrip(".") or "(top level)"
    if not isinstance(data, dict):
        problems.append(
            Problem(
                file,
                where,
                f"expected a mapping of {cls.__name__} fields, got {_type_name(data)}.",
                f"write '{where}' as 'key: value' lines with keys from: {', '.join(f.name for f in fields(cls))}.",
            )
        )
        return None
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            problems.append(Problem(file, name, "unknown key.", f"{hint}remove it or use one of: {', '.join(known)}."))
            continue
        types, nullable, type_text = FIELD_TYPES[key]
        if value is None and nullable:
            values[key] = None
            continue
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            help_text = known[key].metadata.get("help", "")
            problems.append(
                Problem(
                    file,
                    name,
                    f"expected {type_text}, got {_type_name(value)} ({value!r:.60}).",
                    f"set '{name}' to {type_text}. ({help_text})",
                )
            )
            continue
        if nested and key in nested and isinstance(value, dict):
            sub = _parse_mapping(value, nested[key], file, f"{name}.", problems)
            if sub is not None:
                if "target_columns" in sub:
                    sub["target_columns"] = _parse_str_list(
                        sub["target_columns"], file, f"{name}.target_columns", problems
                    )
                values[key] = nested[key](**sub)
            continue
        values[key] = value
    for key, f in known.items():
        if f.default is MISSING and f.default_factory is MISSING and key not in data:
            problems.append(
                Problem(
                    file, f"{prefix}{key}", "required key is missing.", f"add '{key}:' ({f.metadata.get('help', '')})"
                )
            )
    return values


def _parse_str_list(items: list, file: str, field_name: str, problems: list[Problem], ints_ok: bool = False) -> tuple:
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str) or (ints_ok and isinstance(item, int) and not isinstance(item, bool)):
            out.append(str(item))
        else:
            what = "a string or integer" if ints_ok else "a string"
            problems.append(
                Problem(
                    file,
                    f"{field_name}[{i}]",
                    f"expected {what}, got {_type_name(item)}.",
                    f"write item {i} of '{field_name}' as {what}.",
                )
            )
    return tuple(out)


def _parse_turns(items: list, file: str, problems: list[Problem]) -> tuple[Turn, ...]:
    turns = []
    for i, item in enumerate(items):
        prefix = f"turns[{i}]."
        values = _parse_mapping(item, Turn, file, prefix, problems)
        if values is None or not {"turn_id", "question"} <= values.keys():
            continue  # the missing or mistyped required key is already reported
        values["turn_id"] = str(values["turn_id"])
        if "depends_on" in values:
            values["depends_on"] = _parse_str_list(
                values["depends_on"], file, f"{prefix}depends_on", problems, ints_ok=True
            )
        if "constraints" in values:
            values["constraints"] = _parse_constraints(values["constraints"], file, f"{prefix}constraints", problems)
        turns.append(Turn(**values))
    return tuple(turns)


def _parse_constraints(items: list, file: str, field_name: str, problems: list[Problem]) -> tuple[TurnConstraint, ...]:
    """``[{text: str, code: str | null}, ...]`` -> TurnConstraints; each bad item is one problem naming its index."""
    out = []
    for i, item in enumerate(items):
        where = f"{field_name}[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem(file, where, f"expected a mapping, got {_type_name(item)}.", _CONSTRAINT_FIX))
            continue
        extra = sorted(str(k) for k in item if k not in ("text", "code"))
        text, code = item.get("text"), item.get("code")
        if extra:
            problems.append(Problem(file, where, f"unknown key(s) {extra}.", _CONSTRAINT_FIX))
        elif not isinstance(text, str) or not text.strip():
            problems.append(
                Problem(file, f"{where}.text", f"expected a non-empty string, got {text!r}.", _CONSTRAINT_FIX)
            )
        elif code is not None and (not isinstance(code, str) or not code.strip()):
            problems.append(
                Problem(file, f"{where}.code", f"expected Python source or null, got {code!r}.", _CONSTRAINT_FIX)
            )
        elif code is not None and (error := _syntax_error(code)):
            problems.append(Problem(file, f"{where}.code", f"is not valid Python: {error}.", _CONSTRAINT_FIX))
        else:
            out.append(TurnConstraint(text=text, code=code))
    return tuple(out)


def _syntax_error(code: str) -> str | None:
    try:
        parse_python(code)
    except SyntaxError as error:
        return f"{error.msg} (line {error.lineno})"
    return None


_CONSTRAINT_FIX = "write each constraint as {text: <the condition in words>, code: <a Python check> or null}."
