"""The study's data: the synthesized ``train`` and ``heldout`` splits, the SFT dataset as the model arms see it,
and the evaluation suite cut to the first turns of every held-out task."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import yaml

from harness.manager.prompt_view import view
from training.study.layout import Study

logger = logging.getLogger(__name__)


def synthesize_split(study: Study, split: str) -> dict[str, Any]:
    """The ``train``, ``heldout`` or ``heldout-seen`` synthesis run (resumable; skipped when its stats.json exists)."""
    from synthesis.config import SynthesisConfig
    from synthesis.domains.catalog import HELDOUT_DOMAINS
    from synthesis.driver import synthesize
    from synthesis.faults import FAULT_TYPES

    out = study.data_dir(split)
    stats = out / "stats.json"
    config = study.config
    if split == "train":
        fields = {
            **config.train_synthesis,
            "fault_types": [t for t in FAULT_TYPES if t not in config.heldout_fault_types],
        }
    elif split == "heldout-seen":  # held-out tasks, the training fault types
        fields = {
            **config.heldout_seen_synthesis,
            "domains": list(HELDOUT_DOMAINS),
            "validation_fraction": 0.0,
            "fault_types": [t for t in FAULT_TYPES if t not in config.heldout_fault_types],
        }
    else:
        fields = {**config.heldout_synthesis, "domains": list(HELDOUT_DOMAINS), "validation_fraction": 0.0}
    if stats.is_file():
        done = json.loads(stats.read_text())
        had = done.get("config", {})
        changed = [k for k, v in fields.items() if k not in ("workers", "isolation") and had.get(k) != v]
        if changed:
            raise ValueError(
                f"{stats}: the {split} split there was synthesized with other {', '.join(changed)} than the config "
                f"asks ({', '.join(f'{k}={had.get(k)!r} vs {fields[k]!r}' for k in changed)}); every later stage "
                f"of the study depends on it: use another --out, or delete {study.out} to start over"
            )
        return done
    logger.info("synthesizing the %s split into %s", split, out)
    synthesize(SynthesisConfig(**{"isolation": config.isolation, **fields}), out, progress=True)
    return json.loads(stats.read_text())


def sft_dataset(study: Study) -> Path:
    """The training split as the model arms see it: the synthesis output itself (``full``), or a copy of its
    dataset with the system prompt and tools block removed (``bare``; lengths recounted by the SFT)."""
    if study.config.prompt_view == "full":
        return study.data_dir("train")
    target = study.out / "data" / f"train-{study.config.prompt_view}"
    if not (target / "dataset_dict.json").is_file():
        from datasets import DatasetDict, load_from_disk

        def shown(row: dict[str, Any]) -> dict[str, Any]:
            messages, tools = view(row["messages"], row["tools"], study.config.prompt_view)
            return {"messages": messages, "tools": tools or [], "n_tokens": 0}

        splits = load_from_disk(str(study.data_dir("train") / "dataset"))
        shown_splits = DatasetDict({name: split.map(shown) for name, split in splits.items()})
        shown_splits.save_to_disk(str(target), num_shards=dict.fromkeys(shown_splits, 1))  # an empty split too
    return target


# ---------------------------------------------------------------- driver
def first_turns_suite(src: Path, out: Path, n_turns: int, faulted_only: bool = False) -> Path:
    """A copy of the synthesized suite ``src`` whose tasks keep their first ``n_turns`` turns (``config.yaml`` and
    ``private/reference.json`` cut there; the tables and the rest copied) and whose ``faults.jsonl`` keeps the faults
    injected in those turns; ``faulted_only`` keeps only the tasks left with a harmful (not benign) fault there.
    Turns only depend on earlier ones, so the cut tasks are valid tasks. Rebuilt each time (cheap: a few small files
    per task)."""
    from harness.tasks import load_task
    from synthesis.faults import BENIGN_TYPES

    if out.exists():
        shutil.rmtree(out)
    kept: dict[str, set[str]] = {}
    folders: dict[str, Path] = {}
    for config_path in sorted((src / "tasks").glob("*/config.yaml")):
        task_dir = out / "tasks" / config_path.parent.name
        shutil.copytree(config_path.parent, task_dir)
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        config["turns"] = config["turns"][:n_turns]
        turn_ids = {str(turn["turn_id"]) for turn in config["turns"]}
        (task_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        reference_path = task_dir / "private" / "reference.json"
        reference = json.loads(reference_path.read_text(encoding="utf-8"))
        reference = {turn_id: value for turn_id, value in reference.items() if turn_id in turn_ids}
        reference_path.write_text(json.dumps(reference, indent=2, ensure_ascii=False), encoding="utf-8")
        task_id = load_task(task_dir).id  # validates the cut task
        kept[task_id], folders[task_id] = turn_ids, task_dir
    faults_path = src / "faults.jsonl"
    lines = faults_path.read_text(encoding="utf-8").splitlines() if faults_path.is_file() else []
    harmful: set[str] = set()
    faults = [json.loads(line) for line in filter(str.strip, lines)]
    faults = [f for f in faults if str(f.get("turn_id")) in kept.get(str(f.get("task_id")), set())]
    harmful = {str(f["task_id"]) for f in faults if f.get("fault_type") not in BENIGN_TYPES}
    if faulted_only:
        for task_id in set(folders) - harmful:
            shutil.rmtree(folders[task_id])
        faults = [f for f in faults if str(f["task_id"]) in harmful]
    with (out / "faults.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(f) + "\n" for f in faults)
    return out
