"""The SFT data loader trains on the formats asked for: flat (the default), hier, or both; a dataset without the
``format`` column is all flat."""

from __future__ import annotations

import pytest

from harness.manager.hier_prompts import HIER_SYSTEM, tier1_tool_schemas
from harness.manager.prompts import MANAGER_SYSTEM_POLICY


def _systems(split) -> set[str]:
    return {row["messages"][0]["content"] for row in split}


def test_the_loader_selects_the_formats(sft_smoke_dir):
    from datasets import load_from_disk

    from training.sft import DataArguments, load_sft_splits

    data = load_from_disk(str(sft_smoke_dir / "dataset"))
    counts = {name: {f: split["format"].count(f) for f in ("flat", "hier")} for name, split in data.items()}
    assert counts["train"]["hier"] > 0 and counts["train"]["flat"] > 0

    flat, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir)), None)
    assert {name: len(split) for name, split in flat.items()} == {n: c["flat"] for n, c in counts.items()}
    assert _systems(flat["train"]) == {MANAGER_SYSTEM_POLICY}

    hier, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir), formats=["hier"]), None)
    assert {name: len(split) for name, split in hier.items()} == {n: c["hier"] for n, c in counts.items()}
    assert _systems(hier["train"]) == {HIER_SYSTEM} and hier["train"].column_names == ["messages", "tools"]
    assert all(row["tools"] == tier1_tool_schemas() for row in hier["train"])

    both, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir), formats=["flat", "hier"]), None)
    assert len(both["train"]) == counts["train"]["flat"] + counts["train"]["hier"]
    every, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir), formats=["flat", "hier", "hier_checks"]),
                               None)  # fmt: skip
    assert len(every["train"]) == len(data["train"])


def test_a_dataset_without_the_column_is_flat(sft_smoke_dir, tmp_path):
    from datasets import load_from_disk

    from training.sft import DataArguments, load_sft_splits

    data = load_from_disk(str(sft_smoke_dir / "dataset"))
    old = data.filter(lambda row: row["format"] == "flat").remove_columns("format")
    old.save_to_disk(str(tmp_path / "dataset"), num_shards=dict.fromkeys(old, 1))
    flat, _ = load_sft_splits(DataArguments(dataset_path=str(tmp_path)), None)
    assert len(flat["train"]) == len(old["train"])
    with pytest.raises(ValueError, match=r"in formats \['hier'\]"):
        load_sft_splits(DataArguments(dataset_path=str(tmp_path), formats=["hier"]), None)


def test_an_unknown_format_is_one_line_naming_the_valid_ones():
    from training.sft import DataArguments

    valid = r"\['flat', 'hier', 'hier_checks'\]"
    with pytest.raises(ValueError, match=rf"^formats=\['tree'\]: use a non-empty subset of {valid}$"):
        DataArguments(formats=["tree"])
    with pytest.raises(ValueError, match=r"^formats=\[\]"):
        DataArguments(formats=[])
