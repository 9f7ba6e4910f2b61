"""The hand-written ``to_dict`` of small flat records equals ``dataclasses.asdict`` (they skip its deep copy for
speed): a field added later and not written there fails here."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from harness.manager.lifecycle import Transition
from harness.sandbox.result import FileChange, VariableChange, VariableInfo

RECORDS = [
    VariableInfo("df", 3, "DataFrame", [120, 4], "DataFrame (120, 4)"),
    VariableInfo("x", 1, "int", None, "1"),
    VariableChange("df", "changed", 4, "DataFrame", [10, 2], "DataFrame (10, 2)"),
    VariableChange("gone", "deleted", 5, None, None, ""),
    FileChange("out/result.csv", "created"),
    Transition(3, "REPAIR", "draft_open", "repairing", True, "ok", "light"),
    Transition(1, "(unparseable response)", "idle", "idle", False, "rejected"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_to_dict_equals_asdict_and_copies_lists(record):
    data = record.to_dict()
    assert data == asdict(record)
    assert list(data) == [f.name for f in fields(record)]  # declaration order, as asdict
    for name, value in data.items():
        if isinstance(value, list):
            assert value is not getattr(record, name)  # a copy: editing the dict leaves the record alone
