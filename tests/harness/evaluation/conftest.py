"""Shared by the serving and checkpoint-evaluation tests: the tiny checkpoint and a two-turn task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

RETAIL = Path(__file__).resolve().parents[3] / "harness" / "builtin_tasks" / "retail-sales"


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny Qwen3 with the real tokenizer and chat template (training.models)."""
    from training.models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("ckpt") / "tiny-qwen3", seed=0)


@pytest.fixture(scope="session")
def two_turn_task(tmp_path_factory):
    """The built-in retail task cut to its first two turns: a whole episode is 4 manager activations."""
    task = tmp_path_factory.mktemp("task") / "retail-2"
    shutil.copytree(RETAIL, task)
    config = yaml.safe_load((task / "config.yaml").read_text())
    config["id"], config["turns"] = "retail-2", config["turns"][:2]
    (task / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    reference = json.loads((task / "private" / "reference.json").read_text())
    (task / "private" / "reference.json").write_text(json.dumps({t: reference[t] for t in ("1", "2")}))
    return task
