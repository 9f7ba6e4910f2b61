"""scripts/reader_recall.py: the question reader's spec recall and precision against the gold's, per kind."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("reader_recall", REPO / "scripts" / "reader_recall.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_reader_finds_the_gold_specs_of_two_tasks(script, tmp_path, capsys):
    config = tmp_path / "synth.yaml"
    config.write_text("domains: [commerce, energy]\ntasks_per_domain: 1\nn_turns: [8, 8]\n")
    assert script.main(["--config", str(config), "--split", "all"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert lines[0].split() == ["kind", "gold", "read", "match", "recall", "precision"]
    assert result["tasks"] == 2 and result["turns"] == 16 and result["gold"] > 0
    assert result["recall"] >= 0.8 and result["precision"] >= 0.9
    assert sum(row["matched"] for row in result["per_kind"].values()) == result["matched"]
