"""Durable JSON-lines appends: a run killed mid-append leaves a torn last line that the next run drops with a
warning (and plays again) instead of refusing to resume; a bad line before the last is still an error."""

from __future__ import annotations

import json

import pytest

from harness.jsonl import append_jsonl, drop_torn_tail, read_jsonl_resumable
from harness.manager.episode import EpisodeRecord, append_episode, read_episodes


def test_a_torn_last_line_is_dropped_with_a_warning_and_appending_goes_on(tmp_path, caplog):
    path = tmp_path / "rows.jsonl"
    append_jsonl(path, {"key": 1})
    append_jsonl(path, {"key": 2})
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"key": 3, "val')  # killed mid-write
    with caplog.at_level("WARNING", logger="harness.jsonl"):
        assert read_jsonl_resumable(path) == [{"key": 1}, {"key": 2}]
    assert "rows.jsonl: dropped a torn last line (15 bytes)" in caplog.text
    assert path.read_bytes() == whole
    append_jsonl(path, {"key": 3})
    assert read_jsonl_resumable(path) == [{"key": 1}, {"key": 2}, {"key": 3}]


def test_a_whole_file_is_left_alone_and_a_bad_middle_line_is_still_reported(tmp_path):
    path = tmp_path / "rows.jsonl"
    assert drop_torn_tail(path) == 0 and read_jsonl_resumable(path) == []
    path.write_text('{"a": 1}\n{"b": 2}\n')
    assert drop_torn_tail(path) == 0 and path.read_text() == '{"a": 1}\n{"b": 2}\n'
    path.write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(ValueError, match=r"rows.jsonl:2: not JSON"):
        read_jsonl_resumable(path)
    path.write_text('{"a": 1}\n{"b": 2, "c\n')  # a torn line that still got its newline
    assert drop_torn_tail(path) == len('{"b": 2, "c\n') and json.loads(path.read_text()) == {"a": 1}


def test_an_episode_file_cut_mid_record_resumes(tmp_path):
    path = tmp_path / "episodes" / "rule.jsonl"
    first, second = (EpisodeRecord(task_id="t", episode_id=e, config={}, simulated=True) for e in ("e1", "e2"))
    append_episode(path, first)
    append_episode(path, second)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    with pytest.raises(ValueError, match="rule.jsonl:2: not JSON"):
        list(read_episodes(path))  # a plain read reports the torn line
    assert [r.episode_id for r in read_episodes(path, resume=True)] == ["e1"]
    append_episode(path, second)
    assert [r.episode_id for r in read_episodes(path)] == ["e1", "e2"]


def test_a_value_that_would_span_lines_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cannot hold a newline"):
        append_jsonl(tmp_path / "x.jsonl", '{"a":\n1}')
    assert not (tmp_path / "x.jsonl").exists()
