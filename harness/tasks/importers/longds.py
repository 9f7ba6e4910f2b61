"""Import a LongDS-style multi-turn task (``task.json`` + ``data/``) as one multi_turn task.

Source layout (``--src DIR``)::

    DIR/task.json        # a list of turns, or {"turns": [...], "name": ..., "description": ...}
    DIR/data/...         # the files the code reads as f'{BASE_PATH}/data/...'
    DIR/description.md   # optional: the task description (else task.json's "description", else a generic one)

Each turn has ``turn_id``, ``context``, ``question``, ``code`` (ending with ``print_result(result)``) and ``answer``;
optional ``relation`` and ``depends_on`` are honoured as given. Otherwise the dependencies are recovered from the
code comments and the relation follows from them (:mod:`harness.tasks.importers.dependencies`).

Written task (id ``--task-id`` or ``longds-<folder name>``): the turns' public parts in ``config.yaml``, ``data/``
copied to ``public/data/`` (so ``BASE_PATH`` is the public mount), and ``private/reference.json`` with each turn's
code and answer. An answer that is not a JSON object is stored as ``{"result": answer}`` (the structured grader
compares objects), and the description tells the worker so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.tasks.config import TaskConfig, Turn
from harness.tasks.importers.common import (
    ImporterError,
    ImportOptions,
    ImportReport,
    check_outputs,
    fresh_task_dir,
    link_tree,
    write_task,
)
from harness.tasks.importers.dependencies import infer_dependencies, infer_relation

TURN_KEYS = ("turn_id", "context", "question", "code", "answer", "relation", "depends_on", "precision")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "task"


def _read_source(src: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = src / "task.json"
    if not path.is_file():
        raise ImporterError(f"{path} is missing; --src must be a LongDS task folder with task.json and data/.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImporterError(f"{path} is not valid JSON ({exc}); fix the syntax.") from exc
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        meta = {k: v for k, v in data.items() if k != "turns"}
        data = data.get("turns")
    if not isinstance(data, list) or not data:
        raise ImporterError(f"{path} must hold a non-empty list of turns (or an object with 'turns').")
    problems = []
    for i, turn in enumerate(data):
        if not isinstance(turn, dict):
            problems.append(f"turn {i} is not an object")
            continue
        missing = [k for k in ("turn_id", "question", "code", "answer") if k not in turn]
        unknown = sorted(set(turn) - set(TURN_KEYS))
        if missing:
            problems.append(f"turn {i} lacks {missing}")
        if unknown:
            problems.append(f"turn {i} has unknown keys {unknown} (known: {', '.join(TURN_KEYS)})")
    if problems:
        raise ImporterError(f"{path}: {'; '.join(problems)}. Fix task.json.")
    return data, meta


def build_turns(raw_turns: list[dict[str, Any]]) -> tuple[list[Turn], dict[str, Any]]:
    """Public turns (dependencies inferred where task.json gives none) and the private reference."""
    turns: list[Turn] = []
    reference: dict[str, Any] = {}
    earlier: list[str] = []
    for raw in raw_turns:
        turn_id = str(raw["turn_id"])
        if "depends_on" in raw:
            depends_on = tuple(str(d) for d in raw["depends_on"] or ())
        else:
            depends_on = infer_dependencies(raw["code"], turn_id, earlier)
        relation = raw.get("relation") or infer_relation(depends_on, earlier)
        precision = raw.get("precision")
        if precision is not None and (not isinstance(precision, int) or isinstance(precision, bool)):
            raise ImporterError(f"turn {turn_id}: precision {precision!r} must be an integer number of decimals.")
        turns.append(
            Turn(
                turn_id=turn_id,
                question=str(raw["question"]),
                context=str(raw.get("context") or ""),
                depends_on=depends_on,
                relation=relation,
                precision=precision,
            )
        )
        answer = raw["answer"] if isinstance(raw["answer"], dict) else {"result": raw["answer"]}
        reference[turn_id] = {"code": raw["code"], "answer": answer}
        earlier.append(turn_id)
    return turns, reference


def _description(src: Path, meta: dict[str, Any], wrapped: bool) -> str:
    if (src / "description.md").is_file():
        text = (src / "description.md").read_text(encoding="utf-8")
    elif isinstance(meta.get("description"), str):
        text = meta["description"]
    else:
        title = meta.get("name") or src.name
        text = (
            f"# {title}\n\nA multi-turn data analysis over the files in `data/`. Each turn asks one question "
            "and may build on the results of earlier turns."
        )
    text = text.rstrip() + (
        "\n\nAnswer each turn by calling `print_result(result)` with a JSON object holding the requested fields."
    )
    if wrapped:
        text += ' When a turn asks for a single value, use `{"result": value}`.'
    return text


def import_longds(options: ImportOptions) -> ImportReport:
    """Write one multi_turn task from a LongDS-style folder."""
    src = options.require("src", "--src", "longds")
    raw_turns, meta = _read_source(src)
    turns, reference = build_turns(raw_turns)
    task_id = options.task_id or f"longds-{_slug(src.resolve().name)}"
    wrapped = any(not isinstance(raw["answer"], dict) for raw in raw_turns)
    metadata = {"source": str(meta.get("source") or "LongDS-style task.json"), "n_turns": len(turns)}
    metadata.update({k: v for k, v in meta.items() if k not in ("description", "source", "name")})
    config = TaskConfig(
        id=task_id, kind="multi_turn", name=str(meta.get("name") or src.name), turns=tuple(turns), metadata=metadata
    )  # raises TaskConfigError for inconsistent turns before anything is written
    out = Path(options.out)
    (task_dir,) = check_outputs(out, [task_id], options.overwrite)
    fresh_task_dir(task_dir)
    if (src / "data").is_dir():
        link_tree(src / "data", task_dir / "public" / "data")
    write_task(task_dir, config, _description(src, meta, wrapped), reference=reference)
    return ImportReport(kind="longds", out=out, written=[task_dir])
