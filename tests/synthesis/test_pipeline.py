"""The synthesis pipeline end to end: outputs, determinism, resume, bad input, the dataset and its rendering."""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.manager.episode import read_episodes
from harness.sandbox import SandboxUnavailableError
from harness.worker.faults import read_faults
from synthesis.config import SynthesisConfig
from synthesis.driver import NothingSynthesizedError, summary_table, synthesize
from synthesis.labels import synthesized_shards

ROOT = Path(__file__).resolve().parents[2]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


def small_config(**overrides) -> SynthesisConfig:
    base = dict(
        domains=["commerce", "energy"],
        tasks_per_domain=1,
        n_turns=[6, 6],
        max_faults_per_task=3,
        workers=1,
        validation_fraction=0.5,
        isolation=ISOLATION,
    )
    return SynthesisConfig(**{**base, **overrides})


def tree_digest(folder: Path) -> dict[str, str]:
    """sha256 of every output file (the shards' config marker included)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "out"
    result = synthesize(small_config(), out, progress=False)
    return out, result


def test_outputs_hold_the_dataset_episodes_faults_card_and_stats(run):
    from datasets import load_from_disk

    out, result = run
    stats = json.loads((out / "stats.json").read_text())
    assert stats["trajectories"] == result.trajectories == 2 + stats["faults"]["by_outcome"]["kept"]
    assert stats["tasks"]["ok"] == 2 and len(stats["tasks"]["validation"]) == 1
    dataset = load_from_disk(str(out / "dataset"))
    assert set(dataset) == {"train", "validation"}
    assert len(dataset["train"]) + len(dataset["validation"]) == stats["samples"]["total"]
    # split by task: no task in both splits
    assert not set(dataset["train"]["task_id"]) & set(dataset["validation"]["task_id"])
    assert set(dataset["validation"]["task_id"]) == set(stats["tasks"]["validation"])
    row = dataset["train"][0]
    assert row["messages"][0]["role"] == "system" and row["messages"][-1]["role"] == "assistant"
    assert [t["function"]["name"] for t in row["tools"]][:1] and row["n_tokens"] > 0
    # episodes: one clean per task, one faulty and one gold per kept fault, linked by fault id
    clean = list(read_episodes(out / "episodes" / "clean.jsonl"))
    faulty = list(read_episodes(out / "episodes" / "faulty.jsonl"))
    gold = list(read_episodes(out / "episodes" / "gold.jsonl"))
    kept = stats["faults"]["by_outcome"]["kept"]
    assert len(clean) == 2 and len(faulty) == len(gold) == kept
    assert [e.config["fault_id"] for e in faulty] == [e.config["fault_id"] for e in gold]
    assert all(e.simulated for e in clean + faulty + gold)
    faults = read_faults(out / "faults.jsonl")
    assert len(faults) == kept and {f.task_id for f in faults} <= {e.task_id for e in clean}
    card = (out / "README.md").read_text()
    assert f"trajectories (gold-managed episodes, clean or faulted): {result.trajectories}" in card
    assert (out / "token_lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "kept trajectories by fault type" in summary_table(result)


def test_the_control_column_names_the_action_that_ends_each_sample(run):
    from datasets import load_from_disk

    from harness.manager.lifecycle import CONTROL_ACTIONS
    from harness.manager.wire import parse_response

    out, _ = run
    rows = [row for split in load_from_disk(str(out / "dataset")).values() for row in split]
    for row in rows:
        if row["format"] == "hier_checks":  # the target is the checks; the control, the decision taken after them
            assert isinstance(json.loads(row["messages"][-1]["content"])["checks"], list)
            assert row["control"] in ("REPAIR", "FINALIZE_RELATIONS")
            continue
        last = parse_response(row["messages"][-1]["content"]).action
        assert row["control"] == last.name and last.name in CONTROL_ACTIONS
        assert (row["control"] == "REPAIR") == (row["label"] == "repair") or row["kind"] == "full"
    by_control = json.loads((out / "stats.json").read_text())["samples"]["by_control"]
    assert sum(by_control.values()) == len(rows) and {"OPEN_STATE", "COMMIT_STATE", "REPAIR"} <= set(by_control)


def test_gold_repairs_make_every_faulted_turn_right_and_faulty_runs_do_not(run):
    out, _ = run
    gold = {e.config["fault_id"]: e for e in read_episodes(out / "episodes" / "gold.jsonl")}
    faulty = {e.config["fault_id"]: e for e in read_episodes(out / "episodes" / "faulty.jsonl")}
    clean = {e.task_id: e for e in read_episodes(out / "episodes" / "clean.jsonl")}
    outcomes = {o["fault_id"]: o for s in synthesized_shards(out) for o in s["outcomes"] if o["kept"]}
    assert any(o["detectable"] for o in outcomes.values())
    for fid, episode in gold.items():
        if outcomes[fid]["detectable"] is False:  # no check revealed it: committed, the fault spreads
            assert not episode.repairs and episode.final_answers == faulty[fid].final_answers, fid
            continue
        assert episode.grade["score"] == clean[episode.task_id].grade["score"] == 1.0, fid
        if outcomes[fid]["benign"]:
            assert not episode.repairs, fid
        else:
            assert faulty[fid].final_answers != episode.final_answers, fid  # the fault changed some answer
            assert episode.repairs and episode.repairs[0]["turn_id"] == outcomes[fid]["turn_id"], fid


def test_same_config_gives_byte_identical_outputs(run, tmp_path):
    out, _ = run
    again = tmp_path / "again"
    gc_settings = (gc.get_threshold(), gc.get_freeze_count())
    synthesize(small_config(), again, progress=False)  # workers=1: in this process
    assert tree_digest(again) == tree_digest(out)
    assert (gc.get_threshold(), gc.get_freeze_count()) == gc_settings  # the worker's GC tuning is put back


def test_a_killed_run_resumes_to_the_same_result(run, tmp_path):
    out, _ = run
    resumed = tmp_path / "resumed"
    partial = synthesize(small_config(), resumed, progress=False, max_jobs=1)  # "killed" after one task
    assert partial.stats["tasks"]["ok"] == 1
    seen = []
    synthesize(small_config(), resumed, progress=False, on_shard=seen.append)
    assert len(seen) == 1  # only the missing task ran
    assert tree_digest(resumed) == tree_digest(out)


def test_the_episode_records_beside_a_shard_export_unparsed_and_a_damaged_file_is_named(run, tmp_path):
    """The export concatenates each shard's episode lines as written (byte-identical to a shard that still holds
    them inline, the layout before); a records file whose line count disagrees with its shard is an error naming it."""
    import gzip

    from synthesis.export import export
    from synthesis.shards import EPISODE_BRANCHES, episodes_path

    out, _ = run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shards = sorted((copy / "shards").glob("*.json.gz"))
    shard = json.loads(gzip.decompress(shards[0].read_bytes()))
    lines = gzip.decompress(episodes_path(copy, shard["task_id"]).read_bytes()).decode().splitlines()
    counts = [len(shard["episode_ids"][b]) for b in EPISODE_BRANCHES]
    assert len(lines) == sum(counts) and json.loads(lines[0])["episode_id"] == shard["episode_ids"]["clean"][0]
    inline = {**shard, "episodes": {}}
    del inline["episode_ids"]
    for branch, n in zip(EPISODE_BRANCHES, counts, strict=True):
        inline["episodes"][branch], lines = lines[:n], lines[n:]
    shards[0].write_bytes(gzip.compress(json.dumps(inline).encode()))
    episodes_path(copy, shard["task_id"]).unlink()
    export(copy, shards, small_config(), [])
    for name in ("clean", "faulty", "gold", "index"):
        path = Path("episodes") / f"{name}.jsonl"
        assert (copy / path).read_bytes() == (out / path).read_bytes(), name
    other = json.loads(gzip.decompress(shards[1].read_bytes()))
    damaged = episodes_path(copy, other["task_id"])
    damaged.write_bytes(gzip.compress(gzip.decompress(damaged.read_bytes()).split(b"\n", 1)[1]))
    with pytest.raises(ValueError, match=f"{damaged.name}: .* episode lines where the shard lists .*re-run"):
        export(copy, shards, small_config(), [])


def test_a_run_where_every_task_fails_raises_and_keeps_nothing(tmp_path):
    broken = tmp_path / "broken-task"
    shutil.copytree(RETAIL, broken)
    reference = json.loads((broken / "private" / "reference.json").read_text())
    reference["1"]["code"] = "raise RuntimeError('reference code is broken')"
    (broken / "private" / "reference.json").write_text(json.dumps(reference))
    config = small_config(domains=[], task_dirs=[str(broken)])
    out = tmp_path / "out"
    with pytest.raises(NothingSynthesizedError, match="every one of the 1 task.*reference code is broken.*re-run"):
        synthesize(config, out, progress=False)
    assert not list((out / "shards").glob("*.json.gz"))  # retried on the next run, not skipped as done
    assert not (out / "dataset").exists()


def test_another_config_in_the_same_folder_is_refused(run):
    out, _ = run
    with pytest.raises(ValueError, match="holds shards of another synthesis config"):
        synthesize(small_config(seed=1), out, progress=False)


def test_bad_inputs_are_named_and_the_run_goes_on(tmp_path):
    broken = tmp_path / "broken-task"
    shutil.copytree(RETAIL, broken)
    config_text = (broken / "config.yaml").read_text().replace("id: builtin-retail-sales", "id: broken-retail")
    (broken / "config.yaml").write_text(config_text)
    reference = json.loads((broken / "private" / "reference.json").read_text())
    reference["1"]["code"] = "raise RuntimeError('reference code is broken')"
    (broken / "private" / "reference.json").write_text(json.dumps(reference))
    faults = tmp_path / "faults.jsonl"
    lines = [
        {"task_id": "no-such-task", "turn_id": "1", "fault_type": "wrong_column", "code": "x = 1"},
        {"task_id": "builtin-retail-sales", "turn_id": "99", "fault_type": "wrong_column", "code": "x = 1"},
    ]
    faults.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    config = small_config(
        domains=["commerce"], task_dirs=[str(RETAIL), str(broken)], faults_files=[str(faults)], max_faults_per_task=2
    )
    result = synthesize(config, tmp_path / "out", progress=False)
    assert result.stats["tasks"]["ok"] == 2  # the generated task and retail-sales
    assert len(result.stats["errors"]) == 1 and "broken-retail" in result.stats["errors"][0]
    assert "reference code is broken" in result.stats["errors"][0]
    skipped = "\n".join(result.skipped)
    assert "task 'no-such-task' (turn '1') is not among" in skipped
    assert "task 'builtin-retail-sales' has no turn '99'" in skipped
    assert f"{faults}:3: not JSON" in skipped
    assert "broken-retail" in summary_table(result)


@pytest.mark.timeout(120)
def test_a_worker_that_cannot_start_fails_the_run_with_its_error(tmp_path, monkeypatch):
    # The forked workers cannot find bwrap: the run must fail with the sandbox's message, not respawn them forever.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match="bubblewrap .* was not found.*make sysdeps"):
        synthesize(small_config(workers=2, isolation="bwrap"), tmp_path / "out", progress=False)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"domains": ["commerce", "astrology"]}, r"domains: unknown domain\(s\) \['astrology'\]; valid domains: \["),
        ({"fault_types": ["typo"]}, r"fault_types: unknown fault type\(s\) \['typo'\]"),
        ({"n_turns": [3, 40]}, r"n_turns=\[3, 40\]"),
        ({"kinds": ["poem"]}, r"kinds=\['poem'\]"),
        ({"teacher_workers": 4}, r"teacher_workers=4 runs tasks on threads .* teacher_url is null; set teacher_url"),
        (
            {"teacher_workers": 4, "teacher_url": "http://h:8000/v1", "workers": 2},
            r"teacher_workers=4 with executor local and workers=2: .*set workers: null",
        ),
    ],
)
def test_a_bad_config_names_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        small_config(**overrides)


def test_cli_refuses_a_config_with_an_unknown_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("domains: [commerce]\ntask_per_domain: 3\n")
    assert main(["synthesize", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "unknown key(s) ['task_per_domain']" in capsys.readouterr().err


def test_one_sample_renders_through_the_qwen3_chat_template_with_assistant_masks(run):
    from datasets import load_from_disk

    from harness.tokenizer import build_qwen3_tokenizer

    out, _ = run
    tokenizer = build_qwen3_tokenizer()
    row = next(r for r in load_from_disk(str(out / "dataset"))["train"] if r["kind"] == "atomic")
    encoded = tokenizer.apply_chat_template(
        row["messages"], tools=row["tools"], return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    assert len(ids) == row["n_tokens"]
    assistant = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert assistant.startswith(row["messages"][-1]["content"])
    assert "<tool_call>" in assistant


def test_a_one_task_run_saves_a_loadable_dataset_with_an_empty_validation_split(tmp_path):
    from datasets import load_from_disk

    config = small_config(domains=["commerce"], tasks_per_domain=1, max_faults_per_task=2, kinds=["atomic"])
    synthesize(config, tmp_path / "out", progress=False)
    dataset = load_from_disk(str(tmp_path / "out" / "dataset"))  # an empty split used to break loading
    assert dataset["validation"].num_rows == 0 and dataset["train"].num_rows > 0
    assert dataset["validation"].column_names == dataset["train"].column_names


def test_the_stored_tools_equal_the_inference_tools_key_for_key(run):
    from datasets import load_from_disk

    from harness.manager.actions import tool_schemas

    out, _ = run
    row = load_from_disk(str(out / "dataset"))["train"][0]
    assert json.dumps(row["tools"]) == json.dumps(tool_schemas())


DABENCH = ROOT.parent / "shared" / "benchmarks" / "dabench-dev"


@pytest.mark.skipif(not (DABENCH / "tables").is_dir(), reason=f"DABench dev set not found at {DABENCH}")
def test_dabench_table_chains_and_an_imported_folder_run_through_the_same_pipeline(tmp_path):
    config = small_config(
        domains=[],
        tasks_per_domain=0,
        tables=[str(DABENCH / "tables" / "Credit.csv")],
        table_turns=6,
        task_dirs=[str(RETAIL)],
    )
    result = synthesize(config, tmp_path / "out", progress=False)
    assert result.stats["errors"] == [] and result.stats["tasks"]["ok"] == 2
    sources = {row["source"] for row in _all_rows(tmp_path / "out")}
    assert sources == {"table", "folder"}
    assert result.stats["faults"]["by_outcome"]["kept"] >= 2


def _all_rows(out):
    from datasets import load_from_disk

    dataset = load_from_disk(str(out / "dataset"))
    return [row for split in dataset.values() for row in split]


def test_teacher_threads_give_the_sequential_outputs_byte_for_byte(tmp_path):
    from tests.harness.test_llm import FakeOpenAI, completion

    overrides = dict(domains=["commerce"], tasks_per_domain=2, max_faults_per_task=1, count_tokens=False)
    with FakeOpenAI([(200, completion("A reworded note."))], keep_alive="yes") as teacher:
        synthesize(small_config(teacher_url=teacher.url, **overrides), tmp_path / "one", progress=False)
        calls = len(teacher.posts())
        config = small_config(teacher_url=teacher.url, teacher_workers=2, **{**overrides, "workers": None})
        synthesize(config, tmp_path / "threads", progress=False)
    assert tree_digest(tmp_path / "threads") == tree_digest(tmp_path / "one")
    assert 0 < calls <= len(teacher.posts()) - calls  # each thread asks its own teacher (its own cache)
    text = gzip.decompress(next((tmp_path / "one" / "shards").glob("*.json.gz")).read_bytes()).decode()
    assert "A reworded note." in text  # the teacher's paraphrases are in the samples
