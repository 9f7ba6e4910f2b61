"""YAML -> dataclass config (STYLE rule 2: YAML keys equal field names; an unknown key is an error naming it)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def load_yaml_config(cls: type[T], path: str | Path, what: str, example: str, **overrides: Any) -> T:
    """``cls(**yaml, **overrides)`` from ``path``; overrides that are ``None`` are ignored (unset command-line flags).

    Errors (``ValueError``) name the file and the fix: a missing file (with ``example``, e.g.
    ``configs/synthesis/smoke.yaml``), a document that is not a mapping, unknown keys (with the valid ones)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such {what} config; pass a YAML file such as {example}.")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of field names to values, got {type(data).__name__}.")
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; valid keys: {sorted(names)}.")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return cls(**data)
