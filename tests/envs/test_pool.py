"""The episode index written by synthesis/export.py and the replay pool that reads it."""

from __future__ import annotations

import gzip
import json

import pytest

from envs import PoolError, ReplayPool
from harness.manager.episode import read_episodes


def test_index_has_one_line_per_clean_task_and_kept_fault_linked_to_the_records(synth_dir):
    lines = [json.loads(x) for x in (synth_dir / "episodes" / "index.jsonl").read_text().splitlines()]
    (shard_path,) = (synth_dir / "shards").glob("*.json.gz")
    shard = json.loads(gzip.decompress(shard_path.read_bytes()))
    kept = [o for o in shard["outcomes"] if o["kept"]]
    assert [x["kind"] for x in lines] == ["clean"] + ["fault"] * len(kept)
    (clean,) = read_episodes(synth_dir / "episodes" / "clean.jsonl")
    assert lines[0]["id"] == clean.episode_id and lines[0]["episodes"] == {"clean": clean.episode_id}
    assert lines[0]["fault"] is None and lines[0]["fault_info"] is None
    gold = {r.config["fault_id"]: r for r in read_episodes(synth_dir / "episodes" / "gold.jsonl")}
    faulty = {r.config["fault_id"]: r for r in read_episodes(synth_dir / "episodes" / "faulty.jsonl")}
    for line, outcome in zip(lines[1:], kept, strict=True):
        assert line["id"] == outcome["fault_id"]
        assert line["episodes"] == {"gold": gold[line["id"]].episode_id, "faulty": faulty[line["id"]].episode_id}
        assert line["fault"] == outcome["fault"] and line["task_dir"] == f"tasks/{shard['task_id']}"
        info = line["fault_info"]
        assert info == {
            "turn_id": outcome["turn_id"],
            "fault_type": outcome["fault_type"],
            "variables": outcome["fault"]["variables"],
            "error_variable": outcome["injected"]["error_variable"],
            "benign": outcome["benign"],
        }
        assert info["error_variable"] in info["variables"]
        assert line["injected"]["code"] == outcome["fault"]["code"]


def test_pool_resolves_ids_tasks_faults_and_records(pool, synth_dir):
    fault_ids = [i for i in pool.ids if pool.entries[i].kind == "fault"]
    assert len(pool) == 1 + len(fault_ids) and fault_ids
    entry = pool.entry(fault_ids[0])
    assert pool.entry(entry.episodes["gold"]) is entry and pool.entry(entry.episodes["faulty"]) is entry
    assert entry.faults == {entry.fault.turn_id: entry.fault} and entry.fault.variables
    assert pool.task(entry).id == entry.task_id and pool.task(entry) is pool.task(entry)
    assert pool.record(entry, "gold").config["fault_id"] == entry.id
    assert pool.fault_info(entry).turn_id == entry.fault.turn_id
    assert entry.injected_fault().error_variable == entry.fault_info["error_variable"]
    clean = pool.entry(pool.ids[0])
    assert clean.faults == {} and clean.injected_fault() is None and pool.fault_info(clean) is None
    with pytest.raises(PoolError, match="has no 'faulty' record"):
        pool.record(clean, "faulty")


def test_pool_errors_name_the_folder_and_the_id(pool, tmp_path):
    with pytest.raises(PoolError, match="no episode index"):
        ReplayPool(tmp_path)
    with pytest.raises(PoolError, match="'nope' is not in the pool"):
        pool.entry("nope")
