"""Damaged synthesis outputs (a truncated gzip, a list where an object belongs, a bad ``shards/config.json``) are
errors naming the file (and the line) and the fix, never a raw ``EOFError``/``TypeError``; on the command line: one
line, exit code 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.cli import main
from synthesis.export import episode_lines, read_shard
from synthesis.shards import episodes_path, shard_path

SMOKE = str(Path(__file__).resolve().parents[2] / "configs" / "synthesis" / "smoke.yaml")
SHARD = {"task_id": "t1", "index": 0, "error": None, "task": {}, "outcomes": [], "samples": [], "sample_drops": {},
         "episode_ids": {"clean": ["e1"], "faulty": ["e2"], "gold": []}}  # fmt: skip


def _gz(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data))
    return path


def test_a_truncated_or_misshapen_shard_is_named_with_the_fix(tmp_path):
    good = _gz(shard_path(tmp_path, "t1"), json.dumps(SHARD).encode())
    assert read_shard(good) == SHARD
    good.write_bytes(good.read_bytes()[:-12])  # a copy cut short
    with pytest.raises(ValueError, match=r"t1\.json\.gz: unreadable shard \(EOFError: .*delete .*t1\.json\.gz and "):
        read_shard(good)
    listed = _gz(shard_path(tmp_path, "t2"), b"[1, 2]")
    with pytest.raises(ValueError, match=r"t2\.json\.gz: the shard is a JSON list, not an object; .*re-run"):
        read_shard(listed)
    partial = _gz(shard_path(tmp_path, "t3"), json.dumps({"task_id": "t3", "index": 0, "error": None}).encode())
    with pytest.raises(ValueError, match=r"t3\.json\.gz: not a complete shard \(missing \['task', "):
        read_shard(partial)


def test_damaged_episode_records_name_the_file_and_line(tmp_path):
    records = episodes_path(tmp_path, "t1")
    _gz(records, b'{"episode_id": "e1"}\n{"episode_id": "e2"}\n')
    assert episode_lines(tmp_path, SHARD)["faulty"] == [b'{"episode_id": "e2"}']
    _gz(records, b'{"episode_id": "e1"}\n["e2"]\n')
    with pytest.raises(ValueError, match=r"t1\.episodes\.jsonl\.gz: line 2 is not a JSON object; delete .*re-run"):
        episode_lines(tmp_path, SHARD)
    records.write_bytes(gzip.compress(b'{"episode_id": "e1"}\n{"episode_id": "e2"}\n')[:-9])
    with pytest.raises(ValueError, match=r"t1\.episodes\.jsonl\.gz: unreadable episode records \(EOFError"):
        episode_lines(tmp_path, SHARD)


@pytest.mark.parametrize("text", ['{"fingerprint": ', "[1, 2]", '{"config": {}}'])
def test_a_bad_config_marker_stops_the_run_with_one_line(tmp_path, capsys, text):
    out = tmp_path / "out"
    marker = out / "shards" / "config.json"
    marker.parent.mkdir(parents=True)
    marker.write_text(text)
    assert main(["synthesize", "--config", SMOKE, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{marker}: not the config marker of a synthesis run" in err[0]
    assert "use another --out folder or delete that one to start over" in err[0]
    assert sorted(p.name for p in out.rglob("*")) == ["config.json", "shards"]  # nothing else written
