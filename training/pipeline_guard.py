"""What the pipeline checks before its first stage: its paths, its stage markers and their fingerprints.

Every stage's marker ``OUT/<stage>/stage.json`` records a ``fingerprint`` of what determines the stage
(:func:`stage_fingerprints`): the code version (:func:`harness.run_guard.code_version`), the stage's config values
and the digests of the config files it reads, and the digests of its upstream stages' fingerprints (so a change
upstream changes every stage below it). A resumed run trusts a marker only when its fingerprint equals the one this
run computes; a marker that is not JSON, has no fingerprint (not written by this pipeline) or another one, or a stage
marked done below a stage that is not, stops the run before any work with one line naming the file, what changed
and the fix (``--from-stage STAGE`` or a new ``--out``). :func:`check_inputs` checks that every file the stages still
to run read exists (and that the synthesis config and the evaluation suite parse) before the first stage;
:func:`discard_from` removes the folders of a stage and the stages after it (``--from-stage``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.run_guard import changed_fields, code_version, file_digest, value_digest

MARKER = "stage.json"
UPSTREAM: dict[str, tuple[str, ...]] = {
    "model": (),
    "synthesize": (),
    "sft": ("model", "synthesize"),
    "rl": ("sft", "synthesize"),
    "evaluate": ("sft", "rl"),
}
"""Stage -> the stages whose outputs it reads."""
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("tiny_seed",),
    "synthesize": (),
    "sft": ("sft_args",),
    "rl": ("rl_args",),
    "evaluate": ("eval_suite", "eval_limit", "eval_fault_limit", "eval_fault_order", "eval_max_tokens",
                 "eval_max_actions", "isolation"),
}  # fmt: skip
"""Stage -> the PipelineConfig values that determine its output."""
STAGE_FILES: dict[str, tuple[str, ...]] = {
    "model": (),
    "synthesize": ("synthesis",),
    "sft": ("sft", "accelerate_config"),
    "rl": ("rl", "accelerate_config"),
    "evaluate": (),
}
"""Stage -> the PipelineConfig fields naming the files it reads (their digests are in its fingerprint)."""


class PipelineStateError(ValueError):
    """The output folder or the config cannot be resumed or run as it is; one line naming the file and the fix."""


def stage_fingerprints(config: Any, stages: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each stage's fingerprint: ``code``, ``values`` (its config values), ``files`` (field -> digest of the file,
    or ``missing``) and ``upstream`` (upstream stage -> digest of its fingerprint)."""
    prints: dict[str, dict[str, Any]] = {}
    for stage in stages:
        files = {}
        for name in STAGE_FILES[stage]:
            path = config.path(getattr(config, name))
            files[name] = file_digest(path) if path.is_file() else "missing"
        prints[stage] = {
            "code": code_version(),
            "values": {name: getattr(config, name) for name in STAGE_FIELDS[stage]},
            "files": files,
            "upstream": {up: value_digest(prints[up]) for up in UPSTREAM[stage]},
        }
    return prints


def _changes(stored: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    parts = []
    for key in changed_fields(stored, current):
        old, new = stored.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            names = changed_fields(old, new)
            parts.append(f"{key} {', '.join(names)}" if key != "upstream" else f"upstream stage {', '.join(names)}")
        else:
            parts.append(f"{key} ({old} -> {new})")
    return "; ".join(parts)


def read_markers(out: Path, stages: Sequence[str], prints: Mapping[str, Any], flag: str) -> dict[str, dict[str, Any]]:
    """The figures of every stage marked done whose marker matches its fingerprint; raises
    :class:`PipelineStateError` (one line) for a marker that is unreadable, has no or another fingerprint, or lies
    below a stage that is not done."""
    done: dict[str, dict[str, Any]] = {}
    missing: str | None = None
    for stage in stages:
        path = out / stage / MARKER
        if not path.is_file():
            missing = missing or stage
            continue
        fix = f"re-run from it with --from-stage {stage}, or pass a new {flag}"
        try:
            marker = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PipelineStateError(
                f"{path}: the stage marker is unreadable ({type(exc).__name__}: {exc}); {fix}."
            ) from None
        if not isinstance(marker, dict) or not isinstance(marker.get("fingerprint"), dict):
            raise PipelineStateError(
                f"{path}: the stage marker has no fingerprint, so it was not written by this pipeline; {fix}."
            )
        if marker["fingerprint"] != prints[stage]:
            changes = _changes(marker["fingerprint"], prints[stage])
            raise PipelineStateError(f"{path}: stage {stage} was made from other inputs ({changes} changed); {fix}.")
        if missing is not None:
            raise PipelineStateError(
                f"{path}: stage {stage} is marked done but the earlier stage {missing} is not, so its inputs may "
                f"change; re-run from {missing} with --from-stage {missing}, or pass a new {flag}."
            )
        done[stage] = {k: v for k, v in marker.items() if k != "fingerprint"}
    return done


def check_inputs(config: Any, todo: Sequence[str]) -> None:
    """Every file the stages ``todo`` read exists (paths made by earlier stages are not checked), the synthesis
    config loads and the evaluation suite is a folder or a known name; else one :class:`PipelineStateError`."""
    problems = []
    for name in dict.fromkeys(f for stage in todo for f in STAGE_FILES[stage]):
        value = getattr(config, name)
        if not config.path(value).is_file():
            problems.append(f"{name}: {value} is not a file")
    if "synthesize" in todo and not problems:
        from synthesis.config import SynthesisConfig

        try:
            SynthesisConfig.from_yaml(config.path(config.synthesis))
        except (OSError, ValueError, TypeError) as exc:
            problems.append(f"synthesis: {exc}")
    if "evaluate" in todo:
        from harness.specs import parse_suite_spec

        try:
            parse_suite_spec(config.eval_suite, flag="eval_suite=")
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise PipelineStateError(
            f"pipeline config: {'; '.join(problems)}; fix the config (paths are relative to the repository root) "
            "before any stage runs."
        )


def discard_from(out: Path, stages: Sequence[str], first: str) -> list[str]:
    """Remove the folders of stage ``first`` and every stage after it; returns those stages. An unknown ``first``
    raises :class:`PipelineStateError` listing the stages."""
    if first not in stages:
        raise PipelineStateError(f"--from-stage {first}: no such stage; valid stages: {', '.join(stages)}.")
    later = list(stages[stages.index(first) :])
    for stage in later:
        folder = out / stage
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        elif folder.exists() or folder.is_symlink():
            folder.unlink()
    return later
