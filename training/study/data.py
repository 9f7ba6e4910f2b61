"""The study's data: the synthesized ``train`` and ``test`` splits, and the SFT dataset as the model arms see it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from harness.manager.prompt_view import view
from training.study.layout import Study

logger = logging.getLogger(__name__)


def synthesize_split(study: Study, split: str) -> dict[str, Any]:
    """The ``train`` split (``train_synthesis``) or the ``test`` split (``testset``: drawn once, frozen by
    :mod:`training.study.testset`); resumable, skipped when its stats.json exists."""
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    out = study.data_dir(split)
    stats = out / "stats.json"
    config = study.config
    if split == "train":
        fields = dict(config.train_synthesis)
    else:
        fields = {**config.testset, "validation_fraction": 0.0}
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
