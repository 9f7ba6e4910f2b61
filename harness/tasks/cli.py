"""``stateguard tasks``: validate, import, grade, show and list task folders.

    stateguard tasks validate PATH [PATH ...]        # exit 0 when every task is valid, 2 otherwise
    stateguard tasks import dabench --src DABENCH_DEV_DIR --out runs/tasks/dabench [--ids 0,5]
    stateguard tasks import longds --src DIR --out OUT [--task-id ID]
    stateguard tasks import dabstep --src FILE_OR_DIR [--context DIR] --out OUT
    stateguard tasks import mlebench --src COMPETITION_DIR --raw RAW_DIR --out OUT
    stateguard tasks grade TASK_DIR --answer TEXT_OR_FILE   # one JSON line {"task_id", "valid", "score", "details"}
    stateguard tasks show TASK_DIR                   # the public parts of a task
    stateguard tasks list PATH                       # id, kind and folder of every task under PATH

Standalone: ``python -m harness.tasks.cli validate PATH`` (the same sub-commands without the ``tasks`` prefix).
Exit codes: 0 success (``grade``: graded, even when wrong or invalid), 2 invalid task or bad input (``grade``: an
``--answer`` naming a missing file, a folder or a binary file; ``import``: an ``--out`` that is not a writable
folder), 1 grader crash.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cli import CommandLineError, prepare_out_dir, run_command
from harness.evaluation.result import GradeResult
from harness.tasks.config import TaskConfigError
from harness.tasks.grading import grade_task
from harness.tasks.importers import IMPORTERS, ImporterError, ImportOptions, run_import
from harness.tasks.task import Task, find_task_dirs, load_task

EXIT_OK, EXIT_CRASH, EXIT_INVALID = 0, 1, 2


def _error(command: str, message: str) -> int:
    print(f"stateguard tasks {command}: error: {message}", file=sys.stderr)
    return EXIT_INVALID


# ---------------------------------------------------------------------------------------------------------------------
# validate / list


def cmd_validate(args: argparse.Namespace) -> int:
    n_valid, n_invalid = 0, 0
    seen: dict[str, Path] = {}
    for path in args.paths:
        task_dirs = find_task_dirs(path)
        if not task_dirs:
            print(
                f"INVALID {path}\n  - {path}: (folder): no config.yaml found. Fix: pass a task folder or a folder "
                "of task folders."
            )
            n_invalid += 1
            continue
        for task_dir in task_dirs:
            try:
                task = load_task(task_dir)
            except TaskConfigError as exc:
                print(f"INVALID {task_dir}")
                print("\n".join(f"  - {problem}" for problem in exc.problems))
                n_invalid += 1
                continue
            if task.id in seen:
                print(
                    f"INVALID {task_dir}\n  - config.yaml: id: {task.id!r} is also the id of {seen[task.id]}. "
                    "Fix: give every task a unique id."
                )
                n_invalid += 1
                continue
            seen[task.id] = task_dir
            n_valid += 1
            if not args.quiet:
                print(f"ok      {task_dir} ({task.id}, {task.kind})")
    print(f"{n_valid} valid, {n_invalid} invalid")
    return EXIT_INVALID if n_invalid else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for task_dir in find_task_dirs(args.path):
        try:
            task = load_task(task_dir)
        except TaskConfigError:
            print(f"INVALID\t-\t{task_dir}")
            status = EXIT_INVALID
            continue
        print(f"{task.id}\t{task.kind}\t{task_dir}")
    return status


# ---------------------------------------------------------------------------------------------------------------------
# import


def cmd_import(args: argparse.Namespace) -> int:
    ids = tuple(i.strip() for i in args.ids.split(",") if i.strip()) if args.ids else None
    try:
        options = ImportOptions(
            src=args.src,
            out=args.out,
            ids=ids or None,
            raw=args.raw,
            context=args.context,
            task_id=args.task_id,
            overwrite=args.overwrite,
        )
        prepare_out_dir(args.out)
        report = run_import(args.kind, options)
    except (ImporterError, TaskConfigError, ValueError) as exc:
        return _error("import", str(exc))
    print(report.summary())
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------------
# grade


# A literal answer never ends like this; an --answer that does names a file that should exist.
FILE_SUFFIXES = frozenset({".json", ".jsonl", ".txt", ".md", ".csv", ".tsv", ".parquet", ".xlsx", ".npy", ".pkl"})


def names_a_file(answer: str) -> bool:
    """Whether ``--answer`` text is meant as a file path: it starts like one (``/``, ``./``, ``../``, ``~/``), ends in
    a file suffix (``.json``, ``.txt``, ``.csv`` ...), or its folder part is an existing folder (``runs/answer``).
    A DABench answer such as ``@ratio[1/2]`` is none of these."""
    if answer.startswith(("/", "./", "../", "~/")) or Path(answer).suffix.lower() in FILE_SUFFIXES:
        return True
    return "/" in answer and Path(answer).parent.is_dir()


def read_submission(task: Task, answer: str) -> Any:
    """The submission for ``task`` from ``--answer``: a file path when such a file exists, else literal text.

    closed_form: the text; artifact: the path; multi_turn: the JSON object (``ValueError`` if it is not JSON).
    An ``--answer`` that names a missing file (see :func:`names_a_file`; for an artifact task, any missing path), a
    folder, or a file that is not UTF-8 text (closed_form, multi_turn) raises :class:`CommandLineError` naming it.
    """
    path = Path(answer)
    is_file = path.is_file()
    if path.is_dir():
        raise CommandLineError(f"--answer {answer}: is a folder; pass a file, or the answer itself as text.")
    if not is_file and (task.kind == "artifact" or names_a_file(answer)):
        what = "the submission file" if task.kind == "artifact" else "an existing file, or the answer itself as text"
        raise CommandLineError(f"--answer {answer}: no such file; pass {what}.")
    if task.kind == "artifact":
        return str(path)
    try:
        text = path.read_text(encoding="utf-8") if is_file else answer
    except UnicodeDecodeError:
        raise CommandLineError(
            f"--answer {answer}: not a UTF-8 text file; pass a text file (the response, or a JSON object keyed by "
            "turn id), or the answer itself as text."
        ) from None
    if task.kind == "multi_turn":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            source = f"file {path}" if is_file else "--answer text"
            raise ValueError(f"{source} is not JSON ({exc}); give a JSON object keyed by turn id.") from exc
    return text


def cmd_grade(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task_dir)
    except TaskConfigError as exc:
        return _error("grade", str(exc))
    try:
        submission = read_submission(task, args.answer)
    except ValueError as exc:
        result = GradeResult(task_id=task.id, valid=False, score=None, details={"error": str(exc)})
    else:
        try:
            result = grade_task(task, submission)
        except Exception as exc:  # noqa: BLE001 - a crashing grader is reported, not a traceback
            print(
                f"stateguard tasks grade: the grader of {task.id} crashed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return EXIT_CRASH
    print(result.to_json())
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------------
# show


def describe(task: Task) -> str:
    """The public parts of a task as text (never the private answers)."""
    lines = [
        f"id: {task.id}",
        f"name: {task.name}",
        f"kind: {task.kind}",
        f"root: {task.root}",
        f"grader: {task.config.grader_ref} ({task.config.grader_style})",
    ]
    if task.answer_format:
        lines.append(f"answer_format: {task.answer_format}")
    if task.submission:
        sub = task.submission
        lines.append(
            f"submission: {sub.filename} (sample {sub.sample.name}, id {sub.id_column}, targets "
            f"{', '.join(sub.target_columns)}, metric {sub.metric})"
        )
    for turn in task.turns:
        deps = ", ".join(turn.depends_on) or "-"
        lines.append(f"turn {turn.turn_id} [{turn.relation} <- {deps}]: {turn.question}")
    lines += ["", task.description.rstrip()]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task_dir)
    except TaskConfigError as exc:
        return _error("show", str(exc))
    print(describe(task))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------------
# parser


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Add the sub-commands (validate, import, grade, show, list) to ``parser``."""
    parser.set_defaults(func=lambda _args: (parser.print_help(), EXIT_INVALID)[1])
    sub = parser.add_subparsers(dest="tasks_command", metavar="ACTION")

    p = sub.add_parser("validate", help="check task folders; exit 2 if any is invalid")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a task folder or a folder of task folders")
    p.add_argument("-q", "--quiet", action="store_true", help="print only invalid tasks and the summary")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import", help="write task folders from an external benchmark")
    p.add_argument("kind", choices=sorted(IMPORTERS), help="source format")
    p.add_argument("--src", type=Path, required=True, help="the benchmark's folder (or file, for dabstep)")
    p.add_argument("--out", type=Path, required=True, help="folder to write the task folders into")
    p.add_argument("--ids", help="comma-separated source ids to import (default: all)")
    p.add_argument("--raw", type=Path, help="mlebench: the raw competition data")
    p.add_argument("--context", type=Path, help="dabstep: folder of context documents (default: context/ beside it)")
    p.add_argument("--task-id", dest="task_id", help="longds/mlebench: id of the written task")
    p.add_argument("--overwrite", action="store_true", help="replace existing task folders")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("grade", help="grade one answer; prints one JSON line")
    p.add_argument("task_dir", type=Path, metavar="TASK_DIR")
    p.add_argument(
        "--answer",
        required=True,
        help="a file (response text, submission file, or JSON object keyed by turn id) or literal text",
    )
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("show", help="print the public parts of a task")
    p.add_argument("task_dir", type=Path, metavar="TASK_DIR")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("list", help="list the tasks under a folder")
    p.add_argument("path", type=Path, metavar="PATH")
    p.set_defaults(func=cmd_list)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Entry point of the ``stateguard.commands`` group: add ``stateguard tasks``."""
    parser = subparsers.add_parser(
        "tasks",
        help="task folders: validate, import, grade, show, list",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_commands(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stateguard tasks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_commands(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``stateguard tasks`` standalone: ``main(["validate", "path/to/task"])``."""
    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return run_command(" ".join(filter(None, ("stateguard tasks", args.tasks_command))), args.func, args)


if __name__ == "__main__":
    sys.exit(main())
