"""Builders of small task folders for the data-layer tests (imported by the tests as ``task_builders``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DABENCH_DIR = Path(__file__).resolve().parents[3] / ".." / "shared" / "benchmarks" / "dabench-dev"

CLOSED_FORM: dict[str, Any] = {
    "id": "toy-closed",
    "kind": "closed_form",
    "answer_format": "@mean_fare[value] rounded to 2 decimals",
}
MULTI_TURN: dict[str, Any] = {
    "id": "toy-multi",
    "kind": "multi_turn",
    "turns": [
        {"turn_id": "1", "question": "How many rows?", "depends_on": [], "relation": "init"},
        {"turn_id": "2", "question": "Mean of x?", "depends_on": ["1"], "relation": "progress", "precision": 2},
        {"turn_id": "3", "question": "Both?", "depends_on": ["1", "2"], "relation": "combine"},
    ],
}
REFERENCE = {
    "1": {"code": "result = {'n': 3}", "answer": {"n": 3}},
    "2": {"code": "result = {'mean_x': 2.0}", "answer": {"mean_x": 2.0}},
    "3": {"code": "result = {'n': 3, 'mean_x': 2.0}", "answer": {"n": 3, "mean_x": 2.0}},
}
ARTIFACT: dict[str, Any] = {
    "id": "toy-artifact",
    "kind": "artifact",
    "submission": {
        "filename": "submission.csv",
        "sample": "sample_submission.csv",
        "answers": "answers.csv",
        "id_column": "id",
        "metric": "accuracy",
    },
}
SAMPLE_CSV = "id,label\n1,a\n2,a\n3,a\n4,a\n"
ANSWERS_CSV = "id,label\n1,a\n2,b\n3,b\n4,a\n"

BASE_CONFIGS = {"closed_form": CLOSED_FORM, "multi_turn": MULTI_TURN, "artifact": ARTIFACT}


def write_task_folder(
    root: Path,
    kind: str,
    *,
    config: dict[str, Any] | None = None,
    answers: Any = (("mean_fare", "34.65"),),
    reference: Any = None,
    description: str | None = "# Toy task\n\nDo the analysis.\n",
) -> Path:
    """A valid task folder of ``kind`` at ``root`` (``config`` replaces the default config entirely)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "public").mkdir(exist_ok=True)
    (root / "private").mkdir(exist_ok=True)
    cfg = config if config is not None else json.loads(json.dumps(BASE_CONFIGS[kind]))
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    if description is not None:
        (root / "description.md").write_text(description, encoding="utf-8")
    (root / "public" / "data.csv").write_text("x\n1\n2\n3\n", encoding="utf-8")
    if kind == "closed_form" and answers is not None:
        (root / "private" / "answers.json").write_text(json.dumps([list(p) for p in answers]), encoding="utf-8")
    if kind == "multi_turn":
        data = REFERENCE if reference is None else reference
        (root / "private" / "reference.json").write_text(json.dumps(data), encoding="utf-8")
    if kind == "artifact":
        (root / "public" / "sample_submission.csv").write_text(SAMPLE_CSV, encoding="utf-8")
        (root / "private" / "answers.csv").write_text(ANSWERS_CSV, encoding="utf-8")
    return root


def edit_config(task_dir: Path, **changes: Any) -> None:
    """Set (or, with value ``...``, delete) top-level keys of a task's config.yaml."""
    path = task_dir / "config.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
