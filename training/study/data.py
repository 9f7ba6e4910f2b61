"""The study's data: the synthesized ``train`` and ``test`` splits."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

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
        defaults = {f.name: f.default for f in dataclasses.fields(SynthesisConfig)}  # a stats file may omit one
        had = {**defaults, **done.get("config", {})}
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
