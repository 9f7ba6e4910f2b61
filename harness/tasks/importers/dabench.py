"""Import InfiAgent-DABench (``questions.jsonl`` + ``labels.jsonl`` + ``tables/``) as closed_form tasks.

One task per question, id ``dabench-<id>``:

* ``description.md``: the question, the data file, the constraints and the answer format;
* ``config.yaml``: ``answer_format`` = the question's ``format``; ``metadata`` = level, concepts, file name, source and
  license (CC BY-NC 4.0); the default closed-form grader (DABench semantics);
* ``public/<file_name>``: the question's table, hard-linked (copied across filesystems), name kept (two contain
  spaces);
* ``private/answers.json``: the labels' ``common_answers``, verbatim and in order.

Label quirks, handled by keeping the labels verbatim (the scorer has the official semantics):

* ids 116, 352, 473 expect an empty answer (``@outlier_countries[]``); empty values are kept as ``""``.
* id 273's ``outlier_list`` label is ``"["``: the gold list ``[]`` was cut at its first ``]`` by the official
  non-greedy extraction. A response writing the empty list, ``@outlier_list[[]]``, extracts as ``"["`` too, so the
  label is kept as is (normalising it to ``"[]"`` would make the question unanswerable); ``metadata.label_note``
  says so.
* id 734 repeats answer names; the scorer keeps the last value per name, as the official evaluator does.
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
    link_or_copy,
    progress,
    read_jsonl,
    select,
    write_task,
)

LICENSE = "CC BY-NC 4.0"
SOURCE = "InfiAgent-DABench dev set (examples/DA-Agent/data)"
LABEL_NOTES = {
    273: "outlier_list label '[' is the gold empty list '[]' cut at its first ']' by the official @name[value] "
    "extraction; a response '@outlier_list[[]]' extracts to '[' and matches. Kept verbatim.",
    734: "answer names repeat; the last value per name counts (official evaluator semantics).",
}


def task_id(question_id: Any) -> str:
    return f"dabench-{question_id}"


def render_description(question: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"# DABench question {question['id']}",
            "",
            question["question"].strip(),
            "",
            "## Data",
            "",
            f"The table `{question['file_name']}` is in the data folder.",
            "",
            "## Constraints",
            "",
            (question.get("constraints") or "None.").strip(),
            "",
            "## Answer format",
            "",
            question["format"].strip(),
        ]
    )


def _build_config(question: dict[str, Any]) -> TaskConfig:
    qid = question["id"]
    metadata: dict[str, Any] = {
        "source": SOURCE,
        "dabench_id": qid,
        "level": question.get("level"),
        "concepts": list(question.get("concepts") or []),
        "file_name": question["file_name"],
        "license": LICENSE,
    }
    if qid in LABEL_NOTES:
        metadata["label_note"] = LABEL_NOTES[qid]
    return TaskConfig(
        id=task_id(qid), kind="closed_form", name=f"DABench {qid}", answer_format=question["format"], metadata=metadata
    )


def import_dabench(options: ImportOptions) -> ImportReport:
    """Write one closed_form task per DABench question (``options.ids`` selects question ids)."""
    src = options.require("src", "--src", "dabench")
    questions_path, labels_path, tables = src / "questions.jsonl", src / "labels.jsonl", src / "tables"
    for path in (questions_path, labels_path, tables):
        if not path.exists():
            raise ImporterError(
                f"{path} is missing; --src must be the DABench folder with questions.jsonl, labels.jsonl and tables/."
            )
    labels = {row["id"]: row.get("common_answers") for row in read_jsonl(labels_path)}
    questions = select(read_jsonl(questions_path), options.ids, lambda q: q["id"], str(questions_path))
    problems = []
    for q in questions:
        missing_keys = [k for k in ("id", "question", "format", "file_name") if not q.get(k) and q.get(k) != 0]
        if missing_keys:
            problems.append(f"question {q.get('id')}: missing {missing_keys}")
        elif not isinstance(labels.get(q["id"]), list):
            problems.append(f"question {q['id']}: no label list in labels.jsonl")
        elif not (tables / q["file_name"]).is_file():
            problems.append(f"question {q['id']}: table {q['file_name']!r} not in {tables}")
    if problems:
        raise ImporterError(
            f"{len(problems)} question(s) cannot be imported: {'; '.join(problems[:5])}. Fix the "
            "source files or leave those ids out with --ids."
        )

    out = Path(options.out)
    task_dirs = check_outputs(out, [task_id(q["id"]) for q in questions], options.overwrite)
    report = ImportReport(kind="dabench", out=out)
    for q, task_dir in progress(list(zip(questions, task_dirs, strict=True)), "dabench"):
        fresh_task_dir(task_dir)
        link_or_copy(tables / q["file_name"], task_dir / "public" / q["file_name"])
        answers = [[str(name), str(value)] for name, value in labels[q["id"]]]
        write_task(task_dir, _build_config(q), render_description(q), answers=answers)
        report.written.append(task_dir)
    return report
