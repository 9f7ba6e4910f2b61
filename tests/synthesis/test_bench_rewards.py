"""Smoke test of scripts/bench_rewards.py on the already synthesized folder (synthesis resumes: nothing re-runs)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_rewards.py"


def test_bench_prints_the_table_then_one_json_line(
    synthesized: Path, synthesis_yaml: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "bench_rewards.py",
        "--config",
        str(synthesis_yaml),
        "--out",
        str(synthesized),
        "--policies",
        "always_abstain",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[1].split()[:2] == ["policy", "total"]
    totals = json.loads(lines[-1])
    assert list(totals) == ["gold", "always_abstain"]
    assert totals["gold"] > totals["always_abstain"] + 0.4
