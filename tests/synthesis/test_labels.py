"""The fault labels of a synthesis output folder (synthesis.labels): read from its shards, kept and dropped faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from synthesis.labels import fault_infos


def test_fault_infos_read_the_shards(synthesized: Path) -> None:
    from harness.jsonl import iter_jsonl

    infos = fault_infos(synthesized)
    gold = [row for _, row in iter_jsonl(synthesized / "episodes" / "gold.jsonl")]
    assert gold, "the tiny synthesis kept no fault"
    for record in gold:
        info = infos[record["config"]["fault_id"]]
        assert info.turn_id in record["config"]["faults"]
        assert info.error_variable in info.variables
        assert [r["variable"] for r in record["repairs"]] == [info.error_variable]  # the gold hint's variable
    assert len(infos) >= len(gold)  # dropped faults are read too


def test_fault_infos_needs_shards(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no shards"):
        fault_infos(tmp_path)
