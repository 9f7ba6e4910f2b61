"""Import DABstep-style questions (a JSON-lines file + a folder of context documents) as closed_form tasks.

Source: ``--src`` is the ``.jsonl`` file, or a folder holding exactly one ``*.jsonl`` (``tasks.jsonl`` preferred);
each row has ``task_id``, ``question``, ``answer``, ``guidelines`` and ``level``. ``--context DIR`` is the folder of
documents and tables every question may use (default: ``context/`` next to the jsonl).

Mapping (one task per row, id ``dabstep-<task_id>``):

* the answer is a single DABench-style value named ``answer``: ``private/answers.json`` = ``[["answer", str(answer)]]``
  and the grader is the closed-form one, so numbers match within 1e-6 and text must match exactly (after stripping);
* ``answer_format`` = ``@answer[value]`` plus the row's ``guidelines`` (DABstep's guidelines describe the format);
* ``description.md``: the question, the guidelines and the list of context files;
* ``public/``: the context files, hard-linked (copied across filesystems);
* ``metadata``: source, DABstep task id and level.

Rows that cannot be graded this way are skipped, and the report says why: an empty answer (hidden test-split
labels) and an answer containing ``]`` (it would end the ``@answer[...]`` value early, so no response could match).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.tasks.config import TaskConfig
from harness.tasks.importers.common import (
    ImporterError,
    ImportOptions,
    ImportReport,
    check_outputs,
    fresh_task_dir,
    link_tree,
    progress,
    read_jsonl,
    select,
    write_task,
)

SOURCE = "DABstep-style jsonl"
REQUIRED = ("task_id", "question", "answer", "guidelines")


def _find_jsonl(src: Path) -> Path:
    if src.is_file():
        return src
    preferred = src / "tasks.jsonl"
    if preferred.is_file():
        return preferred
    candidates = sorted(src.glob("*.jsonl"))
    if len(candidates) != 1:
        raise ImporterError(f"--src {src} holds {len(candidates)} .jsonl files; pass the questions file itself.")
    return candidates[0]


def task_id(row: dict[str, Any]) -> str:
    return f"dabstep-{row['task_id']}"


def skip_reason(row: dict[str, Any]) -> str | None:
    """Why a row cannot become a closed_form task (None when it can)."""
    answer = str(row["answer"]).strip()
    if not answer:
        return "empty answer (hidden test-split label)"
    if "]" in answer:
        return "answer contains ']', which no @answer[...] response can reproduce"
    return None


def render_description(row: dict[str, Any], files: list[str]) -> str:
    listing = "\n".join(f"- `{name}`" for name in files) or "- (none)"
    return "\n".join(
        [
            f"# DABstep task {row['task_id']}",
            "",
            str(row["question"]).strip(),
            "",
            "## Guidelines",
            "",
            str(row["guidelines"]).strip(),
            "",
            "## Data",
            "",
            "These documents and tables are in the data folder:",
            "",
            listing,
            "",
            "## Answer format",
            "",
            "Write the final answer as `@answer[value]`, with the value formatted as the guidelines say.",
        ]
    )


def import_dabstep(options: ImportOptions) -> ImportReport:
    """Write one closed_form task per answerable row (``options.ids`` selects task ids)."""
    src = options.require("src", "--src", "dabstep")
    jsonl = _find_jsonl(src)
    context = Path(options.context) if options.context is not None else jsonl.parent / "context"
    if not context.is_dir():
        raise ImporterError(f"context folder {context} does not exist; pass --context DIR (the documents and tables).")
    rows = select(read_jsonl(jsonl), options.ids, lambda r: r.get("task_id"), str(jsonl))
    bad = [
        f"line {i + 1}: missing {[k for k in REQUIRED if k not in r]}"
        for i, r in enumerate(rows)
        if any(k not in r for k in REQUIRED)
    ]
    if bad:
        raise ImporterError(f"{jsonl}: {'; '.join(bad[:5])}. Each row needs {', '.join(REQUIRED)}.")
    report = ImportReport(kind="dabstep", out=Path(options.out))
    keep = []
    for row in rows:
        reason = skip_reason(row)
        if reason:
            report.skipped.append((str(row["task_id"]), reason))
        else:
            keep.append(row)
    task_dirs = check_outputs(report.out, [task_id(r) for r in keep], options.overwrite)
    files = sorted(p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file() and not p.is_symlink())
    for row, task_dir in progress(list(zip(keep, task_dirs, strict=True)), "dabstep"):
        fresh_task_dir(task_dir)
        link_tree(context, task_dir / "public")
        config = TaskConfig(
            id=task_id(row),
            kind="closed_form",
            name=f"DABstep {row['task_id']}",
            answer_format=f"@answer[value] where value follows the guidelines: {str(row['guidelines']).strip()}",
            metadata={"source": SOURCE, "dabstep_id": str(row["task_id"]), "level": row.get("level")},
        )
        write_task(task_dir, config, render_description(row, files), answers=[["answer", str(row["answer"]).strip()]])
        report.written.append(task_dir)
    return report
