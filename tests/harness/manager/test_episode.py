import json

import pytest

from harness.manager.episode import (
    SCHEMA_VERSION,
    EpisodeRecord,
    EpisodeRecordError,
    append_episode,
    execution_summary,
    prompt_sha256,
    read_episodes,
)
from harness.sandbox import ExecutionResult, VariableChange


def make_record(**overrides):
    result = ExecutionResult(
        ok=True,
        stdout="x" * 5000,
        variables=[VariableChange("sales", "created", 1, "DataFrame", [240, 6], "240 rows")],
        results=[{"n": 240}],
    )
    base = dict(
        task_id="builtin-retail-sales",
        episode_id="ep-1",
        config={"worker": "scripted", "manager": "rule", "flow": "turn"},
        simulated=True,
        worker_steps=[{"step_id": 0, "turn_id": "1", "prompt_sha256": prompt_sha256("p"),
                       "execution": execution_summary(result)}],
        final_answers={"1": {"n": 240}},
        grade={"task_id": "builtin-retail-sales", "valid": True, "score": 1.0, "details": {}},
    )  # fmt: skip
    base.update(overrides)
    return EpisodeRecord(**base)


def test_round_trip_through_jsonl(tmp_path):
    path = tmp_path / "episodes.jsonl"
    records = [make_record(), make_record(episode_id="ep-2", simulated=False)]
    for r in records:
        append_episode(path, r)
    assert list(read_episodes(path)) == records
    assert len(path.read_text().splitlines()) == 2


def test_execution_summary_keeps_tails_and_variables():
    step = make_record().worker_steps[0]["execution"]
    assert len(step["stdout_tail"]) == 2000
    assert step["variables"][0]["name"] == "sales" and step["variables"][0]["version"] == 1
    assert step["results"] == [{"n": 240}]
    assert execution_summary(None) is None


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version="2.0"), r"schema_version 2.0 is not readable"),
        (lambda d: d.pop("task_id"), r"missing field\(s\) \['task_id'\]"),
        (lambda d: d.update(surprise=1), r"unknown field\(s\) \['surprise'\]"),
    ],
)
def test_bad_records_name_the_line_and_field(tmp_path, mutate, message):
    data = json.loads(make_record().to_json())
    mutate(data)
    path = tmp_path / "e.jsonl"
    path.write_text(make_record().to_json() + "\n" + json.dumps(data) + "\n")
    with pytest.raises(EpisodeRecordError, match=f"e.jsonl:2: {message}"):
        list(read_episodes(path))


def test_damaged_line_is_reported(tmp_path):
    (tmp_path / "e.jsonl").write_text("{not json\n")
    with pytest.raises(EpisodeRecordError, match=r"e.jsonl:1: not JSON"):
        list(read_episodes(tmp_path / "e.jsonl"))
    assert SCHEMA_VERSION == "1.0"
