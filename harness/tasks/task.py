"""The :class:`Task` object and the loader/validator of task folders.

``load_task(path)`` checks the whole folder — ``config.yaml`` (see :mod:`harness.tasks.config`), the description,
the public and private folders, the private answers of the task's kind, the sample submission of artifact tasks, the
grader reference and ``prepare.py`` — and raises one :class:`TaskConfigError` listing every problem.
``validate_task(path)`` returns the same problems as a list of strings (empty when valid).

The private answers are read again only by :meth:`Task.load_answers`, which only graders and synthesis call.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.evaluation.metrics import METRICS
from harness.pyast import parse_python
from harness.tasks.config import (
    ANSWER_NAME_PATTERN,
    CONFIG_FILE,
    DEFAULT_GRADERS,
    Problem,
    SubmissionConfig,
    TaskConfig,
    TaskConfigError,
    Turn,
)
from harness.tasks.grader_ref import GraderRef, top_level_names

ANSWERS_FILE = "answers.json"
"""closed_form: ``private/answers.json``, a JSON list of ``[name, value]`` string pairs (order kept)."""
REFERENCE_FILE = "reference.json"
"""multi_turn: ``private/reference.json``, ``{turn_id: {"code": str, "answer": {...}}}``."""
PREPARE_FILE = "prepare.py"

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class TurnReference:
    """The private reference of one turn: the code that solves it and its structured answer."""

    code: str
    answer: dict[str, Any]


@dataclass(frozen=True)
class SubmissionSpec:
    """What an artifact task expects, resolved: ``sample`` is an absolute path inside the public folder."""

    filename: str
    sample: Path
    id_column: str | None
    target_columns: tuple[str, ...]
    metric: str
    higher_is_better: bool | None
    """Explicit in config.yaml, else the built-in metric's direction, else None (unknown metric)."""


@dataclass(frozen=True)
class Task:
    """A validated task folder. Build it with :func:`load_task`."""

    id: str
    kind: str
    root: Path
    config: TaskConfig
    public_dir: Path
    private_dir: Path
    description: str
    answer_format: str | None
    submission: SubmissionSpec | None
    turns: tuple[Turn, ...]

    @property
    def name(self) -> str:
        return self.config.name or self.id

    @property
    def grader(self) -> GraderRef:
        return GraderRef.parse(self.config.grader_ref)

    def load_answers(self) -> list[tuple[str, str]] | dict[str, TurnReference] | Path:
        """The private answers (graders and synthesis only).

        closed_form: ``[(name, value), ...]``; multi_turn: ``{turn_id: TurnReference}``; artifact: the answers CSV
        path.
        """
        problems: list[Problem] = []
        answers: Any
        if self.kind == "closed_form":
            answers = read_closed_form_answers(self.private_dir / ANSWERS_FILE, self._rel, problems)
        elif self.kind == "multi_turn":
            answers = read_reference(self.private_dir / REFERENCE_FILE, self.turns, self._rel, problems)
        else:
            answers = self.private_dir / (self.config.submission or SubmissionConfig()).answers
            if not answers.is_file():
                problems.append(
                    Problem(
                        self._rel(answers),
                        "(file)",
                        "the answers file is missing.",
                        "restore it (re-run the importer or prepare.py).",
                    )
                )
        if problems:
            raise TaskConfigError(problems, path=self.root)
        return answers

    def _rel(self, path: Path) -> str:
        return _relative(path, self.root)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------------------------------
# private answer files (shared by validation and load_answers, so both read them the same way)


def _read_json(path: Path, rel: str, problems: list[Problem]) -> Any:
    if not path.is_file():
        problems.append(Problem(rel, "(file)", "is missing.", f"write {rel} (the importers do)."))
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel, "(file)", f"is not valid JSON ({exc}).", "fix the JSON syntax."))
        return None


def read_closed_form_answers(
    path: Path, rel_of: Callable[[Path], str], problems: list[Problem]
) -> list[tuple[str, str]]:
    """Parse ``private/answers.json`` (a list of [name, value] string pairs); append problems for bad entries."""
    rel = rel_of(path)
    data = _read_json(path, rel, problems)
    if data is None:
        return []
    fix = 'write a JSON list of [name, value] string pairs, e.g. [["mean_fare", "34.65"]].'
    if not isinstance(data, list) or not data:
        problems.append(Problem(rel, "(top level)", f"expected a non-empty list of pairs, got {data!r:.60}.", fix))
        return []
    answers = []
    for i, pair in enumerate(data):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            problems.append(
                Problem(rel, f"[{i}]", f"expected a [name, value] pair of strings, got {pair!r:.60}.", fix)
            )
            continue
        name, value = pair
        if not ANSWER_NAME_PATTERN.match(name):
            problems.append(
                Problem(
                    rel,
                    f"[{i}][0]",
                    f"answer name {name!r} is not a word (letters, digits, _).",
                    "rename it: answers are written as @name[value] and names match \\w+.",
                )
            )
        if "]" in value:
            problems.append(
                Problem(
                    rel,
                    f"[{i}][1]",
                    f"value {value!r} contains ']', which ends an @name[value] answer, so no response could match it.",
                    "remove the brackets from the value.",
                )
            )
        answers.append((name, value))
    return answers


def read_reference(
    path: Path, turns: tuple[Turn, ...], rel_of: Callable[[Path], str], problems: list[Problem]
) -> dict[str, TurnReference]:
    """Parse ``private/reference.json``; every turn needs an entry with ``code`` (str) and ``answer`` (object)."""
    rel = rel_of(path)
    data = _read_json(path, rel, problems)
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(
            Problem(
                rel,
                "(top level)",
                f"expected an object keyed by turn id, got {type(data).__name__}.",
                'write {"<turn_id>": {"code": "...", "answer": {...}}, ...}.',
            )
        )
        return {}
    references: dict[str, TurnReference] = {}
    turn_ids = [t.turn_id for t in turns]
    for turn_id in turn_ids:
        entry = data.get(turn_id)
        if entry is None:
            problems.append(
                Problem(
                    rel,
                    turn_id,
                    f"turn {turn_id!r} of config.yaml has no reference.",
                    f'add "{turn_id}": {{"code": ..., "answer": {{...}}}}.',
                )
            )
            continue
        if not (
            isinstance(entry, dict) and isinstance(entry.get("code"), str) and isinstance(entry.get("answer"), dict)
        ):
            problems.append(
                Problem(
                    rel,
                    turn_id,
                    'expected {"code": str, "answer": object}.',
                    f"give turn {turn_id!r} its code as a string and its answer as a JSON object.",
                )
            )
            continue
        references[turn_id] = TurnReference(code=entry["code"], answer=entry["answer"])
    for extra in sorted(set(data) - set(turn_ids)):
        problems.append(
            Problem(
                rel,
                extra,
                f"turn {extra!r} is not a turn of config.yaml.",
                f"remove it or add the turn to config.yaml (turns: {', '.join(turn_ids)}).",
            )
        )
    return references


def read_csv_header(path: Path) -> list[str] | None:
    """The first row of a CSV file, or None when it cannot be read."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


# ---------------------------------------------------------------------------------------------------------------------
# loading and validation


def _read_config(root: Path, problems: list[Problem]) -> tuple[TaskConfig | None, dict[str, Any]]:
    path = root / CONFIG_FILE
    if not path.is_file():
        problems.append(
            Problem(CONFIG_FILE, "(file)", "is missing.", "add config.yaml with at least 'id' and 'kind'.")
        )
        return None, {}
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        problems.append(Problem(CONFIG_FILE, "(file)", f"is not valid YAML ({exc}).", "fix the YAML syntax."))
        return None, {}
    try:
        return TaskConfig.from_dict(raw), raw
    except TaskConfigError as exc:
        problems.extend(p for p in exc.records if isinstance(p, Problem))
        return None, raw if isinstance(raw, dict) else {}


def _inside(root: Path, value: str, field_name: str, problems: list[Problem]) -> Path | None:
    """``root / value`` if it is a relative path that stays inside the task folder (else a problem)."""
    path = (root / value).resolve()
    if Path(value).is_absolute() or not path.is_relative_to(root):
        problems.append(
            Problem(
                CONFIG_FILE,
                field_name,
                f"{value!r} points outside the task folder.",
                "use a path relative to the task folder, without '..'.",
            )
        )
        return None
    return path


def _folder_problems(root: Path, raw: dict[str, Any], problems: list[Problem]) -> dict[str, Path | None]:
    """Check description, public and private folders (using config values when they are strings, else defaults)."""

    def value(key: str, default: str) -> str:
        v = raw.get(key, default)
        return v if isinstance(v, str) and v.strip() else default

    paths = {
        "description": _inside(root, value("description", "description.md"), "description", problems),
        "public_dir": _inside(root, value("public_dir", "public"), "public_dir", problems),
        "private_dir": _inside(root, value("private_dir", "private"), "private_dir", problems),
    }
    description, public, private = paths["description"], paths["public_dir"], paths["private_dir"]
    if description is not None and not description.is_file():
        problems.append(
            Problem(
                _relative(description, root),
                "(file)",
                "the task description is missing.",
                "write the objective the worker sees into it (Markdown).",
            )
        )
    for key, path in (("public_dir", public), ("private_dir", private)):
        if path is not None and not path.is_dir():
            problems.append(
                Problem(
                    CONFIG_FILE,
                    key,
                    f"folder {_relative(path, root)!r} does not exist.",
                    f"create it (the {'data the worker sees' if key == 'public_dir' else 'answers'} "
                    "go there) or point the field at the right folder.",
                )
            )
    if (
        public is not None
        and private is not None
        and (public.is_relative_to(private) or private.is_relative_to(public))
    ):
        problems.append(
            Problem(
                CONFIG_FILE,
                "private_dir",
                "the public and private folders overlap, so the worker would see the answers.",
                "use two separate folders, e.g. public/ and private/.",
            )
        )
    return paths


def _kind_problems(root: Path, cfg: TaskConfig, public: Path, private: Path, problems: list[Problem]) -> None:
    def rel_of(path: Path) -> str:
        return _relative(path, root)

    if cfg.kind == "closed_form":
        read_closed_form_answers(private / ANSWERS_FILE, rel_of, problems)
    elif cfg.kind == "multi_turn":
        read_reference(private / REFERENCE_FILE, cfg.turns, rel_of, problems)
    elif cfg.kind == "artifact" and cfg.submission is not None:
        sub = cfg.submission
        sample = _inside(public, sub.sample, "submission.sample", problems)
        answers = _inside(private, sub.answers, "submission.answers", problems)
        if answers is not None and not answers.is_file():
            problems.append(
                Problem(
                    rel_of(answers),
                    "(file)",
                    "the answers file (submission.answers) is missing.",
                    "write the answers CSV there, or fix 'submission.answers'.",
                )
            )
        if sample is not None and not sample.is_file():
            problems.append(
                Problem(
                    rel_of(sample),
                    "(file)",
                    "the sample submission (submission.sample) is missing.",
                    "write a sample submission CSV there, or fix 'submission.sample'.",
                )
            )
        elif sample is not None and sample.suffix.lower() == ".csv":
            header = read_csv_header(sample)
            wanted = ([sub.id_column] if sub.id_column else []) + list(sub.target_columns)
            missing = [c for c in wanted if header is None or c not in header]
            if missing:
                problems.append(
                    Problem(
                        CONFIG_FILE,
                        "submission",
                        f"columns {missing} are not in the sample submission's header {header}.",
                        "fix 'submission.id_column'/'submission.target_columns' or the sample file.",
                    )
                )
            elif header is not None and not sub.target_columns and not [c for c in header if c != sub.id_column]:
                problems.append(
                    Problem(
                        CONFIG_FILE,
                        "submission.target_columns",
                        "the sample submission has no column besides the id column, so nothing would be scored.",
                        "add the predicted column(s) to the sample submission.",
                    )
                )
        if cfg.grader_ref == DEFAULT_GRADERS["artifact"] and sub.metric not in METRICS:
            problems.append(
                Problem(
                    CONFIG_FILE,
                    "submission.metric",
                    f"{sub.metric!r} is not a metric of the built-in csv_submission grader.",
                    f"use one of: {', '.join(METRICS)}.",
                )
            )


def _code_problems(root: Path, cfg: TaskConfig, problems: list[Problem]) -> None:
    ref = GraderRef.parse(cfg.grader_ref)
    message = ref.problem(root)
    if message:
        fix = (
            "point 'grader' at an existing function, or remove it to use the default for " + cfg.kind
            if cfg.grader
            else "the default grader of this kind is missing from harness.evaluation; update the harness"
        )
        problems.append(Problem(CONFIG_FILE, "grader", f"{cfg.grader_ref!r} does not resolve: {message}", fix + "."))
    prepare = root / PREPARE_FILE
    if prepare.is_file():
        try:
            names = top_level_names(parse_python(prepare.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError) as exc:
            problems.append(Problem(PREPARE_FILE, "(file)", f"does not parse ({exc}).", "fix the syntax."))
        else:
            if "prepare" not in names:
                problems.append(
                    Problem(
                        PREPARE_FILE,
                        "prepare",
                        "defines no top-level function 'prepare'.",
                        "define prepare(raw: Path, public: Path, private: Path) -> None.",
                    )
                )


def load_task(path: str | os.PathLike[str]) -> Task:
    """Load and validate the task folder ``path``; raise one :class:`TaskConfigError` listing every problem."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskConfigError(
            [
                Problem(
                    str(path),
                    "(folder)",
                    "does not exist or is not a folder.",
                    "pass a task folder (one that contains config.yaml).",
                )
            ],
            path=path,
        )
    problems: list[Problem] = []
    cfg, raw = _read_config(root, problems)
    paths = _folder_problems(root, raw, problems)
    public, private, description = paths["public_dir"], paths["private_dir"], paths["description"]
    if cfg is not None:
        _code_problems(root, cfg, problems)
        if public is not None and private is not None and public.is_dir() and private.is_dir():
            _kind_problems(root, cfg, public, private, problems)
    if problems or cfg is None or public is None or private is None or description is None:
        raise TaskConfigError(problems, path=root)
    return Task(
        id=cfg.id,
        kind=cfg.kind,
        root=root,
        config=cfg,
        public_dir=public,
        private_dir=private,
        description=description.read_text(encoding="utf-8"),
        answer_format=cfg.answer_format,
        submission=_resolve_submission(cfg.submission, public),
        turns=cfg.turns,
    )


def _resolve_submission(sub: SubmissionConfig | None, public: Path) -> SubmissionSpec | None:
    if sub is None:
        return None
    sample = (public / sub.sample).resolve()
    targets = sub.target_columns
    if not targets:
        header = read_csv_header(sample) if sample.suffix.lower() == ".csv" else None
        targets = tuple(c for c in (header or []) if c != sub.id_column)
    higher = sub.higher_is_better
    if higher is None and sub.metric in METRICS:
        higher = METRICS[sub.metric].higher_is_better
    return SubmissionSpec(
        filename=sub.filename,
        sample=sample,
        id_column=sub.id_column,
        target_columns=targets,
        metric=sub.metric,
        higher_is_better=higher,
    )


def validate_task(path: str | os.PathLike[str]) -> list[str]:
    """Every problem of the task folder ``path`` (each names the file, the field and the fix); empty when valid."""
    try:
        load_task(path)
    except TaskConfigError as exc:
        return list(exc.problems)
    return []


BUILTIN_DIR = Path(__file__).resolve().parents[1] / "builtin_tasks"
"""The built-in task folders (``--task NAME`` finds them by folder name)."""


class TaskNotFoundError(ValueError):
    """A task spec that is neither a folder nor a built-in task's name (the message lists the built-ins)."""


def resolve_task_path(spec: str) -> Path:
    """A task folder path, or the name of a built-in task (:data:`BUILTIN_DIR`); :class:`TaskNotFoundError` listing
    the built-ins when it is neither."""
    path = Path(spec)
    if path.is_dir():
        return path
    builtin = BUILTIN_DIR / spec
    if builtin.is_dir():
        return builtin
    names = sorted(p.name for p in BUILTIN_DIR.iterdir() if p.is_dir())
    raise TaskNotFoundError(f"task {spec!r}: no such folder and no built-in task of that name; built-ins: {names}.")


def find_task_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` itself when it holds a config.yaml, else every folder below it that does (sorted, not nested)."""
    root = Path(path)
    if (root / CONFIG_FILE).is_file():
        return [root]
    found = []
    for current, dirs, files in os.walk(root):
        if CONFIG_FILE in files:
            found.append(Path(current))
            dirs.clear()  # a task folder's public/private data is not searched for more tasks
        else:
            dirs.sort()
    return sorted(found)


def load_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """Every task under ``path`` (see :func:`find_task_dirs`); one :class:`TaskConfigError` for all problems."""
    tasks, problems = [], []
    for task_dir in find_task_dirs(path):
        try:
            tasks.append(load_task(task_dir))
        except TaskConfigError as exc:
            problems.extend(f"{task_dir}/{p}" for p in exc.problems)
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.id in seen:
            problems.append(
                f"{task.root}/{CONFIG_FILE}: id: duplicate task id {task.id!r} (also {seen[task.id]}). "
                "Fix: give every task a unique id."
            )
        seen.setdefault(task.id, task.root)
    if not tasks and not problems:
        problems.append(
            f"{path}: (folder): no task folder (with a {CONFIG_FILE}) found. Fix: pass a task folder or a "
            "folder of task folders."
        )
    if problems:
        raise TaskConfigError(problems, path=path)
    return tasks
