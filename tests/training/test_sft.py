"""SFT (training.sft, scripts/sft.py, configs/sft, configs/accelerate): mask golden, configs, loss drop, length filter.

The data is the smoke synthesis run of conftest.py (``sft_smoke_dir``). The golden mask test uses a full sample;
the training tests use its "short" copy (``sft_short_dataset_dir``: first user message and assistant reply only),
which keeps the module under a minute while exercising the same trainer path.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness.manager.checkpoint_settings import ManagerSettings, read_manager_settings

REPO = Path(__file__).resolve().parents[2]
SFT_CONFIGS = sorted((REPO / "configs" / "sft").glob("*.yaml"))
ACCELERATE_CONFIGS = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))


def _cpu_config(output_dir: Path, **overrides):
    from trl import SFTConfig

    settings = dict(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        max_length=1024,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        learning_rate=2e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        seed=0,
        disable_tqdm=True,
    )
    return SFTConfig(**{**settings, **overrides})


def _script_parser():
    """``scripts/sft.py``'s parser (scripts/ is not a package: load the file)."""
    spec = importlib.util.spec_from_file_location("sft_script", REPO / "scripts" / "sft.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_parser()


# --- golden assistant mask ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("last_turn_only", [False, True], ids=["every-turn", "last-turn"])
def test_labels_are_exactly_the_assistant_tokens(sft_smoke_dir, tiny_model_dir, tmp_path, last_turn_only):
    from datasets import DatasetDict, load_from_disk

    from training.sft import DataArguments, ModelArguments, build_trainer

    train = load_from_disk(str(sft_smoke_dir / "dataset"))["train"]
    index = next(i for i, row in enumerate(train) if sum(m["role"] == "assistant" for m in row["messages"]) >= 2)
    sample = train[index]
    assert sample["tools"], "the golden sample must render the tools block"
    short = tmp_path / "one"
    one = train.select([index])
    DatasetDict({"train": one, "validation": one}).save_to_disk(str(short))

    trainer, data_stats = build_trainer(
        ModelArguments(model_name_or_path=str(tiny_model_dir)),
        DataArguments(dataset_path=str(short), last_turn_only=last_turn_only),
        _cpu_config(tmp_path / "out", max_length=40_960),
    )
    assert data_stats == {"dropped_overlong_train": 0, "dropped_overlong_validation": 0}
    batch = trainer.data_collator([trainer.train_dataset[0]])
    input_ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    # The synthesis counted exactly what the trainer trains on; as a prompt-completion pair the sample renders the
    # same tokens (the template is prefix-preserving), only the labels differ.
    assert len(input_ids) == sample["n_tokens"]

    # Contiguous runs of trained tokens, decoded: one per assistant message, its wire text plus <|im_end|>.
    runs, current = [], []
    for token, label in zip(input_ids, labels, strict=True):
        if label != -100:
            assert label == token
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs.append(current) if current else None
    tokenizer = trainer.processing_class
    decoded = [tokenizer.decode(run) for run in runs]
    expected = [m["content"] + "<|im_end|>" for m in sample["messages"] if m["role"] == "assistant"]
    if last_turn_only:  # the control action alone: the checks and probes before it are context
        expected = expected[-1:]
        assert sample["messages"][-1]["role"] == "assistant"
    assert decoded == expected
    assert any("<tool_call>" in text for text in decoded)
    # Nothing else has loss: the trained token count is exactly the assistant bodies' token count.
    assert sum(len(run) for run in runs) == sum(len(tokenizer(text)["input_ids"]) for text in expected)


def test_last_turn_only_rows_and_errors(sft_smoke_dir, tmp_path):
    from datasets import Dataset

    from training.sft import DataArguments, load_sft_splits
    from training.sft_rows import to_last_turn

    full, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir)), None)
    last, _ = load_sft_splits(DataArguments(dataset_path=str(sft_smoke_dir), last_turn_only=True), None)
    assert last["train"].column_names == ["prompt", "completion", "tools"]
    for whole, pair in zip(full["train"], last["train"], strict=True):
        assert pair["prompt"] + pair["completion"] == whole["messages"] and pair["tools"] == whole["tools"]
        assert [m["role"] for m in pair["completion"]] == ["assistant"]

    ends_in_tool = Dataset.from_list([
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "tools": "[]"},
        {"messages": [{"role": "user", "content": "q"}], "tools": "[]"},
    ])  # fmt: skip
    with pytest.raises(ValueError, match=r"^last_turn_only needs .* row 1 ends in 'user' \(1 such rows\)"):
        to_last_turn(ends_in_tool)
    empty = to_last_turn(ends_in_tool.select([]))  # an empty split (validation_fraction 0) keeps the columns
    assert len(empty) == 0 and empty.column_names == ["prompt", "completion", "tools"]


def test_turn_prefixes_train_every_assistant_turn_once(sft_smoke_dir):
    """One sample per assistant turn, each ending in it: with last_turn_only the checks' tool calls are completions
    too, and stratify_by: action draws an equal share of each action."""
    from collections import Counter

    from datasets import Dataset, load_from_disk

    from harness.manager.wire import parse_response
    from training.sft import DataArguments, load_sft_splits
    from training.sft_rows import UNPARSED_ACTION, to_turn_prefixes

    source = load_from_disk(str(sft_smoke_dir / "dataset"))["train"]
    source = source.select([i for i, f in enumerate(source["format"]) if f == "flat"])
    turns = [m for row in source["messages"] for m in row if m["role"] == "assistant"]
    args = DataArguments(dataset_path=str(sft_smoke_dir), last_turn_only=True, turn_prefixes=True)
    pairs, _ = load_sft_splits(args, None)
    assert len(pairs["train"]) == len(turns) > len(source)
    assert sorted(p["completion"][0]["content"] for p in pairs["train"]) == sorted(m["content"] for m in turns)
    names = Counter(parse_response(p["completion"][0]["content"]).action.name for p in pairs["train"])
    assert {"check_execution", "run_probe"} <= set(names)  # a check's tool calls are trained, not only its decision

    prefixes = to_turn_prefixes(source.select([0]))
    whole = source[0]["messages"]
    assert prefixes[-1]["messages"] == whole and prefixes[-1]["task_id"] == source[0]["task_id"]
    assert [p["messages"] for p in prefixes] == [
        whole[: i + 1] for i, m in enumerate(whole) if m["role"] == "assistant"
    ]
    assert prefixes["action"] == [parse_response(p["messages"][-1]["content"]).action.name for p in prefixes]
    assert "transition" not in prefixes.column_names
    assert to_turn_prefixes(Dataset.from_list([
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "prose"}]}
    ]))["action"] == [UNPARSED_ACTION]  # fmt: skip
    with pytest.raises(ValueError, match="no assistant turn in any of 1 samples"):
        to_turn_prefixes(Dataset.from_list([{"messages": [{"role": "user", "content": "q"}]}]))
    empty = to_turn_prefixes(source.select([]))  # an empty split stays empty, with the columns a subset reads
    assert empty["action"] == []

    limited = DataArguments(dataset_path=str(sft_smoke_dir), last_turn_only=True, turn_prefixes=True,
                            max_train_samples=8, stratify_by="action")  # fmt: skip
    _, stats = load_sft_splits(limited, None)
    shares = {key: n for key, n in stats.items() if key.startswith("train_action/")}
    assert sum(shares.values()) == 8 and len(shares) >= 4 and max(shares.values()) - min(shares.values()) <= 1


def test_last_turn_only_refuses_completion_loss_off(sft_smoke_dir, tiny_model_dir, tmp_path):
    from training.sft import DataArguments, ModelArguments, build_trainer

    config = _cpu_config(tmp_path / "out", max_length=40_960)
    config.completion_only_loss = False
    with pytest.raises(ValueError, match=r"^last_turn_only trains the last assistant turn alone"):
        build_trainer(
            ModelArguments(model_name_or_path=str(tiny_model_dir)),
            DataArguments(dataset_path=str(sft_smoke_dir), last_turn_only=True),
            config,
        )


# --- configs --------------------------------------------------------------------------------------------------------


def test_config_folders_hold_the_expected_files():
    assert [p.name for p in SFT_CONFIGS] == [
        "qwen3-8b-lora.yaml",
        "qwen3-8b.yaml",
        "smollm2-cpu.yaml",
        "smollm2-lora-cpu.yaml",
        "tiny-cpu-hier.yaml",
        "tiny-cpu.yaml",
    ]
    assert [p.name for p in ACCELERATE_CONFIGS] == [
        "cpu.yaml",
        "zero2.yaml",
        "zero3.yaml",
    ]


@pytest.mark.parametrize("path", SFT_CONFIGS, ids=lambda p: p.name)
def test_sft_config_parses_into_its_dataclasses(path):
    import torch
    from trl import SFTConfig

    from training.sft import DataArguments, ModelArguments

    # bf16 configs are for GPUs; TrainingArguments refuses bf16 without one unless use_cpu is set.
    extra = [] if torch.cuda.is_available() else ["--use_cpu", "true"]
    model_args, data_args, sft_config = _script_parser().parse_args_and_config(["--config", str(path), *extra])
    assert isinstance(model_args, ModelArguments) and isinstance(data_args, DataArguments)
    assert isinstance(sft_config, SFTConfig)
    if path.name.startswith("qwen3-8b"):
        assert model_args.model_name_or_path == "Qwen/Qwen3-8B"
        assert sft_config.num_train_epochs == 3 and sft_config.max_length == 40_960
        assert sft_config.bf16 and sft_config.gradient_checkpointing
        assert sft_config.per_device_train_batch_size * sft_config.gradient_accumulation_steps * 8 == 32
        assert model_args.use_peft == path.name.endswith("lora.yaml")
    if path.name == "qwen3-8b.yaml":
        assert sft_config.learning_rate == 5e-5
    if path.name == "tiny-cpu.yaml":
        assert model_args.model_name_or_path == "tiny"
        assert sft_config.use_cpu and not sft_config.bf16 and not sft_config.gradient_checkpointing
    # Tracking: off in the checked-in configs (CI); trackio runs land in the stateguard project when switched on.
    assert sft_config.report_to in ([], ["none"], "none") and sft_config.project == "stateguard"


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(path))
    expected = {
        "cpu.yaml": ("NO", 1),
        "zero2.yaml": ("DEEPSPEED", 8),
        "zero3.yaml": ("DEEPSPEED", 8),
    }[path.name]
    assert (str(config.distributed_type).rsplit(".", 1)[-1], config.num_processes) == expected
    assert config.use_cpu == (path.name == "cpu.yaml")
    if config.deepspeed_config:
        assert (REPO / config.deepspeed_config["deepspeed_config_file"]).is_file()


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_configs_pass_deepspeeds_parser(stage, tmp_path):
    """The json as transformers fills it ("auto" <- the qwen3-8b settings, one process) passes DeepSpeedConfig."""
    from accelerate.utils import DeepSpeedPlugin
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    cluster = yaml.safe_load((REPO / "configs" / "accelerate" / f"zero{stage}.yaml").read_text())
    path = REPO / cluster["deepspeed_config"]["deepspeed_config_file"]
    assert DeepSpeedPlugin(hf_ds_config=str(path)).zero_stage == stage

    args = _cpu_config(tmp_path, per_device_train_batch_size=1, gradient_accumulation_steps=4, max_grad_norm=1.0)
    args.bf16 = True  # as in qwen3-8b.yaml; the CPU-only flags do not matter to DeepSpeed
    hf_config = HfTrainerDeepSpeedConfig(json.loads(path.read_text()))
    hf_config.trainer_config_process(args)
    hf_config.fill_only("zero_optimization.reduce_bucket_size", 4096 * 4096)
    hf_config.fill_only("zero_optimization.stage3_prefetch_bucket_size", int(0.9 * 4096 * 4096))
    hf_config.fill_only("zero_optimization.stage3_param_persistence_threshold", 10 * 4096)
    filled = hf_config.config
    assert "auto" not in json.dumps(filled)
    parsed = DeepSpeedConfig(filled)
    assert parsed.zero_optimization_stage == stage
    assert parsed.bfloat16_config.enabled
    assert (parsed.train_micro_batch_size_per_gpu, parsed.gradient_accumulation_steps) == (1, 4)
    assert parsed.gradient_clipping == 1.0


# --- length filter --------------------------------------------------------------------------------------------------


def test_overlong_samples_are_dropped_and_counted(sft_smoke_dir, sft_short_dataset_dir, qwen3_tokenizer):
    from datasets import load_from_disk

    from training.sft import DataArguments, drop_overlong, load_sft_splits

    train = load_from_disk(str(sft_smoke_dir / "dataset"))["train"]
    lengths = sorted(train["n_tokens"])
    limit = lengths[len(lengths) // 2]
    kept, dropped = drop_overlong(train, limit)
    assert dropped == sum(n > limit for n in lengths) > 0
    assert len(kept) == len(train) - dropped and max(kept["n_tokens"]) <= limit
    assert drop_overlong(train, None) == (train, 0)

    # Uncounted rows (n_tokens 0) are tokenized; the split loader reports drops per split.
    short = load_from_disk(str(sft_short_dataset_dir))
    counted = sorted(
        len(qwen3_tokenizer.apply_chat_template(r["messages"], tokenize=True, return_dict=True)["input_ids"])
        for r in short["train"]
        if r["format"] == "flat"  # the loader's default formats
    )
    limit = counted[len(counted) // 2]
    splits, stats = load_sft_splits(DataArguments(dataset_path=str(sft_short_dataset_dir)), limit, qwen3_tokenizer)
    assert stats["dropped_overlong_train"] == sum(n > limit for n in counted) > 0
    assert len(splits["train"]) == len(counted) - stats["dropped_overlong_train"]
    assert splits["train"].column_names == ["messages", "tools"]
    with pytest.raises(ValueError, match="pass the tokenizer"):
        drop_overlong(short["train"], limit)
    with pytest.raises(ValueError, match="raise max_length"):
        load_sft_splits(DataArguments(dataset_path=str(sft_short_dataset_dir)), 10, qwen3_tokenizer)


def test_the_prompt_view_and_the_served_manager_follow_the_data_options(sft_smoke_dir):
    """``prompt_view: bare`` trains without the system prompt and the tools; the checkpoint's manager.json names the
    manager of its one sample format (a mix of formats gets none), the view and the serving cap."""
    from training.sft import DataArguments, load_sft_splits, serving_settings

    data = {"dataset_path": str(sft_smoke_dir), "max_train_samples": 3, "max_eval_samples": 1}
    bare = DataArguments(**data, prompt_view="bare")
    viewed, full = load_sft_splits(bare, None)[0]["train"], load_sft_splits(DataArguments(**data), None)[0]["train"]
    assert [row[0]["role"] for row in full["messages"]] == ["system"] * 3 and all(full["tools"])
    assert viewed["messages"] == [row[1:] for row in full["messages"]] and viewed["tools"] == [[]] * 3
    assert serving_settings(bare) == ManagerSettings(prompt_view="bare")
    checks = DataArguments(**data, formats=["hier_checks"], serve_max_new_tokens=200)
    assert serving_settings(checks) == ManagerSettings(policy="hier", writes="checks", max_new_tokens=200)
    assert serving_settings(DataArguments(**data, formats=["hier"])) == ManagerSettings(policy="hier")
    assert serving_settings(DataArguments(**data, formats=["flat", "hier"])) is None
    with pytest.raises(ValueError, match="prompt_view='short', serve_max_new_tokens=384: use one of full, bare"):
        DataArguments(**data, prompt_view="short")


def test_stratified_subset_gives_each_label_its_share():
    from datasets import Dataset

    from training.sft_rows import stratified_subset

    labels = ["clean"] * 40 + ["repair"] * 3 + ["benign"] * 10 + ["post_repair"] * 7
    data = Dataset.from_dict({"label": labels, "row": list(range(len(labels)))})
    subset = stratified_subset(data, "label", 20, seed=1)
    counts = {label: subset["label"].count(label) for label in set(labels)}
    # 5 each would be equal shares; repair has only 3, so its 2 left over go to the first labels in sorted order.
    assert counts == {"benign": 6, "clean": 6, "post_repair": 5, "repair": 3}
    assert subset["row"] == sorted(subset["row"])  # dataset order kept
    assert stratified_subset(data, "label", 20, seed=1)["row"] == subset["row"]  # seeded
    assert stratified_subset(data, "label", 20, seed=2)["row"] != subset["row"]
    assert len(stratified_subset(data, "label", 100)) == len(labels)  # a limit above the size keeps every row
    # The first rows would have held only clean samples.
    assert set(data.select(range(20))["label"]) == {"clean"}
    with pytest.raises(ValueError, match="stratify_by='lable' is not a column.*label, row"):
        stratified_subset(data, "lable", 5)


def test_stratified_split_loader_counts_the_kept_labels(sft_smoke_dir):
    from datasets import load_from_disk

    from training.sft import DataArguments, load_sft_splits

    train = load_from_disk(str(sft_smoke_dir / "dataset"))["train"]
    labels = set(train["label"])
    assert len(labels) >= 2, "the smoke synthesis must hold more than one label"
    n = 2 * len(labels)
    args = DataArguments(dataset_path=str(sft_smoke_dir), max_train_samples=n, stratify_by="label")
    splits, stats = load_sft_splits(args, None)
    counts = {key.removeprefix("train_label/"): v for key, v in stats.items() if key.startswith("train_label/")}
    assert set(counts) == labels and sum(counts.values()) == n == len(splits["train"])
    available = Counter(train["label"])
    if min(available.values()) >= 2:
        assert counts == dict.fromkeys(labels, 2)
    assert all(counts[label] <= available[label] for label in labels)
    assert splits["train"].column_names == ["messages", "tools"]


def test_dataset_path_errors_name_the_fix(tmp_path):
    from training.sft import DataArguments, resolve_dataset_dir

    with pytest.raises(FileNotFoundError, match="stateguard synthesize"):
        resolve_dataset_dir(tmp_path)
    with pytest.raises(ValueError, match="max_train_samples=0"):
        DataArguments(max_train_samples=0)
    with pytest.raises(ValueError, match="stratify_by='label'.*neither max_train_samples nor max_eval_samples"):
        DataArguments(stratify_by="label")


# --- training -------------------------------------------------------------------------------------------------------


def test_run_sft_lowers_train_and_validation_loss_and_saves(
    sft_short_dataset_dir, tiny_model_dir, qwen3_tokenizer, tmp_path
):
    """The default config (configs/sft/tiny-cpu.yaml: 8 steps of batch 1 at lr 5e-3, 8 train / 4 validation samples,
    seed 0) on the short smoke splits: the validation loss ends well below the untrained one. The run reports to
    TensorBoard and trackio (``report_to: [tensorboard, trackio]``), and the per-step losses read back from both
    trackers' local files equal the trainer's log."""
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.sft import count_tokens, run_sft

    out = tmp_path / "out"
    tracked = yaml.safe_load((REPO / "configs" / "sft" / "tiny-cpu.yaml").read_text())
    tracked.update(report_to=["tensorboard", "trackio"], project="stateguard-tests", run_name=f"sft-{tmp_path.name}")
    (tmp_path / "tracked.yaml").write_text(yaml.safe_dump(tracked))
    model_args, data_args, config = _script_parser().parse_args_and_config(
        [
            "--config", str(tmp_path / "tracked.yaml"),
            "--model_name_or_path", str(tiny_model_dir),
            "--dataset_path", str(sft_short_dataset_dir),
            "--output_dir", str(out),
            "--max_length", "512",
            "--eval_strategy", "steps",
            "--eval_steps", "1000",
            "--eval_on_start", "true",
            "--disable_tqdm", "true",
        ]
    )  # fmt: skip
    assert (config.max_steps, config.per_device_train_batch_size, config.learning_rate, config.seed) == (8, 1, 5e-3, 0)
    metrics = run_sft(model_args, data_args, config)
    # Loss: the validation loss before training (eval_on_start) and after; the per-step training loss.
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    before = next(entry["eval_loss"] for entry in history if "eval_loss" in entry)
    after = metrics["eval/loss"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    assert len(losses) == 8
    assert before > 11.0  # random init over 151,936 ids: about ln(151936) = 11.9
    assert after < 0.7 * before, (before, after)  # measured: 11.97 -> 6.76 (0.56x)
    assert sum(losses[-2:]) / 2 < 0.7 * losses[0], losses

    # Counts: 8 and 4 samples used; the drops are the short samples over max_length=512.
    assert metrics["data/train_samples"] == 8 and metrics["data/eval_samples"] == 4
    short = load_from_disk(str(sft_short_dataset_dir))
    for split in ("train", "validation"):
        lengths = [count_tokens(qwen3_tokenizer, row) for row in short[split] if row["format"] == "flat"]
        assert metrics[f"data/dropped_overlong_{split}"] == sum(n > 512 for n in lengths) > 0
    # Namespaced metrics: train/..., eval/..., data/...; the throughput excludes the first step.
    assert {key.split("/")[0] for key in metrics} == {"train", "eval", "data"}
    assert metrics["train/num_input_tokens_seen"] == history[-1]["num_input_tokens_seen"] > 0
    assert 0 < metrics["train/tokens_per_second_after_first_step"]

    # Saved: the model, the tokenizer with the generation-marked template, the model card.
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert "{% generation %}" in tokenizer.chat_template
    assert AutoModelForCausalLM.from_pretrained(out).config.model_type == "qwen3"
    card = (out / "README.md").read_text()
    assert str(sft_short_dataset_dir) in card and f"| eval/loss | {after:.6g} |" in card
    assert "- max_steps: 8" in card and "- learning_rate: 0.005" in card
    assert read_manager_settings(out) == ManagerSettings()  # served as it was trained: the flat manager, full view

    # The trackers' local files hold the same per-step losses.
    assert read_tensorboard_scalars(out / "runs", "train/loss") == pytest.approx(losses)
    assert read_trackio_scalars("stateguard-tests", f"sft-{tmp_path.name}", "train/loss") == pytest.approx(losses)


def read_tensorboard_scalars(log_dir: Path, tag: str) -> list[float]:
    """The values of ``tag`` in the event files under ``log_dir`` (every run folder), in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = []
    for folder in sorted({path.parent for path in log_dir.rglob("events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(folder))
        accumulator.Reload()
        if tag in accumulator.Tags()["scalars"]:
            events += accumulator.Scalars(tag)
    return [event.value for event in sorted(events, key=lambda e: e.step)]


def read_trackio_scalars(project: str, run: str, key: str) -> list[float]:
    """The values of ``key`` logged to the trackio run, read from trackio's local SQLite file ($TRACKIO_DIR)."""
    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_project_db_path(project).is_file()
    return [row[key] for row in SQLiteStorage.get_logs(project, run) if key in row]


def test_steady_tokens_per_second_skips_the_first_step_and_earlier_sessions():
    from training.sft import steady_tokens_per_second

    def step(n, runtime, tokens):
        return {"loss": 1.0, "step": n, "train_runtime": runtime, "num_input_tokens_seen": tokens}

    first_session = [step(1, 5.0, 100), step(2, 6.0, 300)]
    second_session = [step(3, 4.0, 500), {"eval_loss": 2.0, "step": 3}, step(4, 5.0, 800), step(5, 7.0, 1100)]
    summary = {"train_runtime": 7.5, "train_loss": 1.0, "num_input_tokens_seen": 1100, "step": 5}
    assert steady_tokens_per_second(first_session) == 200.0
    assert steady_tokens_per_second([*first_session, *second_session, summary]) == (1100 - 500) / (7.0 - 4.0)
    assert steady_tokens_per_second([step(1, 5.0, 100), summary]) is None
    assert steady_tokens_per_second([]) is None


def test_tiny_model_is_built_into_the_cache_folder(monkeypatch, tmp_path):
    import training.models
    from training.sft import ModelArguments, resolve_model

    calls = []
    monkeypatch.setenv("STATEGUARD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(training.models, "build_tiny_qwen3", lambda out, seed: calls.append((out, seed)) or out)
    assert resolve_model(ModelArguments(tiny_seed=3)) == str(tmp_path / "tiny-qwen3-seed3")
    assert calls == [(tmp_path / "tiny-qwen3-seed3", 3)]
    assert resolve_model(ModelArguments(model_name_or_path="Qwen/Qwen3-8B")) == "Qwen/Qwen3-8B"
    assert len(calls) == 1
