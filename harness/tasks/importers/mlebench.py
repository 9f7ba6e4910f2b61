"""Import an MLE-bench competition (its folder + the raw data) as one artifact task graded by its own ``grade.py``.

Source (``--src DIR``, an MLE-bench ``mlebench/competitions/<id>/`` folder)::

    config.yaml      # id, name, dataset{answers, sample_submission}, grader{name, grade_fn}, preparer
    description.md
    prepare.py       # prepare(raw: Path, public: Path, private: Path) -> None
    grade.py         # grade(submission: DataFrame, answers: DataFrame) -> float

and ``--raw DIR``, the competition's raw (downloaded) data. The importer creates the task folder, runs
``prepare(raw, task/public, task/private)`` with the ``mlebench`` shim active (:mod:`harness.tasks.mlebench_compat`),
copies the competition's ``.py`` files and ``description.md`` (plus a short "Submission" section), and writes an
artifact task (id ``--task-id`` or ``mlebench-<id>``) with ``grader: file:grade.py:<fn>`` and
``grader_style: mlebench``. ``dataset.answers`` / ``dataset.sample_submission`` are mapped to the part after their
``private/`` / ``public/`` folder; the sample's first column becomes ``submission.id_column`` and the others the
target columns; ``grader.name`` becomes ``submission.metric`` (informational: the competition's grader scores).

Limitations: answers must be a CSV (the mlebench grader style reads CSVs); grade.py files that import sibling modules
through ``mlebench.competitions.<id>...`` are not supported.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harness.tasks.config import SubmissionConfig, TaskConfig
from harness.tasks.grader_ref import load_function_from_file
from harness.tasks.importers.common import (
    ImporterError,
    ImportOptions,
    ImportReport,
    check_outputs,
    fresh_task_dir,
    write_task,
)
from harness.tasks.mlebench_compat import mlebench_shim
from harness.tasks.task import read_csv_header

logger = logging.getLogger(__name__)

SUBMISSION_FILE = "submission.csv"


def _function_name(ref: Any, key: str, config_path: Path) -> str:
    """``grade`` from ``mlebench.competitions.x.grade:grade``."""
    if not isinstance(ref, str) or ":" not in ref or not ref.rpartition(":")[2].isidentifier():
        raise ImporterError(f"{config_path}: {key} must look like 'module.path:function', got {ref!r}.")
    return ref.rpartition(":")[2]


def _after(path: Any, marker: str, key: str, config_path: Path) -> str:
    """The part of an MLE-bench dataset path after its ``prepared/<marker>/`` folder (else its file name)."""
    if not isinstance(path, str) or not path.strip():
        raise ImporterError(f"{config_path}: {key} must be a path string, got {path!r}.")
    parts = PurePosixPath(path).parts
    if marker in parts:
        index = len(parts) - 1 - parts[::-1].index(marker)
        rest = parts[index + 1 :]
        if rest:
            return PurePosixPath(*rest).as_posix()
    return PurePosixPath(path).name


def read_competition(src: Path) -> dict[str, Any]:
    """The fields of an MLE-bench ``config.yaml`` the importer needs (``ImporterError`` naming a missing one)."""
    config_path = src / "config.yaml"
    for name in ("config.yaml", "prepare.py", "grade.py", "description.md"):
        if not (src / name).is_file():
            raise ImporterError(f"{src / name} is missing; --src must be an MLE-bench competition folder.")
    data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ImporterError(f"{config_path} is not a mapping.")
    dataset, grader = data.get("dataset"), data.get("grader")
    if not isinstance(dataset, dict) or not isinstance(grader, dict) or "id" not in data:
        raise ImporterError(
            f"{config_path} needs 'id', 'dataset' (answers, sample_submission) and 'grader' "
            "(name, grade_fn), as in MLE-bench."
        )
    return {
        "id": str(data["id"]),
        "name": str(data.get("name") or data["id"]),
        "competition_type": data.get("competition_type"),
        "answers": _after(dataset.get("answers"), "private", "dataset.answers", config_path),
        "sample": _after(dataset.get("sample_submission"), "public", "dataset.sample_submission", config_path),
        "metric": str(grader.get("name") or "score"),
        "grade_fn": _function_name(grader.get("grade_fn"), "grader.grade_fn", config_path),
        "prepare_fn": _function_name(data.get("preparer", "x:prepare"), "preparer", config_path),
    }


def _description(src: Path, sample: str, id_column: str | None) -> str:
    text = (src / "description.md").read_text(encoding="utf-8").rstrip()
    key = f", one row per `{id_column}`" if id_column else ""
    return (
        f"{text}\n\n## Submission\n\nWrite your predictions to `{SUBMISSION_FILE}` in your work directory, with the "
        f"columns of `{sample}`{key}."
    )


def import_mlebench(options: ImportOptions) -> ImportReport:
    """Prepare the competition's data and write one artifact task graded by the competition's ``grade.py``."""
    src = options.require("src", "--src", "mlebench")
    raw = options.require("raw", "--raw", "mlebench")
    comp = read_competition(src)
    task_id = options.task_id or f"mlebench-{comp['id']}"
    out = Path(options.out)
    (task_dir,) = check_outputs(out, [task_id], options.overwrite)
    fresh_task_dir(task_dir)
    public, private = task_dir / "public", task_dir / "private"
    try:
        prepare = load_function_from_file((src / "prepare.py").resolve(), comp["prepare_fn"])
        logger.info("running %s:%s(raw=%s)", src / "prepare.py", comp["prepare_fn"], raw)
        with mlebench_shim():
            prepare(raw.resolve(), public.resolve(), private.resolve())
    except Exception as exc:
        shutil.rmtree(task_dir)
        raise ImporterError(
            f"{src / 'prepare.py'}: {comp['prepare_fn']}(raw, public, private) failed "
            f"({type(exc).__name__}: {exc}); fix the preparer or --raw {raw}."
        ) from exc
    for path in sorted(src.glob("*.py")):
        shutil.copy2(path, task_dir / path.name)
    header = read_csv_header(public / comp["sample"]) or []
    id_column = header[0] if len(header) > 1 else None
    config = TaskConfig(
        id=task_id,
        kind="artifact",
        name=comp["name"],
        grader=f"file:grade.py:{comp['grade_fn']}",
        grader_style="mlebench",
        submission=SubmissionConfig(
            filename=SUBMISSION_FILE,
            sample=comp["sample"],
            answers=comp["answers"],
            id_column=id_column,
            target_columns=tuple(header[1:]),
            metric=comp["metric"],
        ),
        metadata={
            "source": "MLE-bench competition",
            "competition_id": comp["id"],
            "competition_type": comp["competition_type"],
        },
    )
    write_task(task_dir, config, _description(src, comp["sample"], id_column))
    return ImportReport(kind="mlebench", out=out, written=[task_dir])
