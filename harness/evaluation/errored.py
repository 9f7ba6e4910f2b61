"""Episodes that are not the manager's own: the ``error`` of an evaluation record.

An episode is *errored* when playing or grading it raised (:func:`errored_record`: its ids and the exception's type
and message, nothing else) or when its manager failed to respond during it (:func:`policy_failure`: an action the
runtime rejected because the policy raised, or a backend call a hierarchical or windowed manager turned into a
fallback or silence, :func:`backend_failures`). Errored episodes count in no metric; the evaluation counts them per
variant and plays them again on resume.
"""

from __future__ import annotations

import uuid
from typing import Any

from harness.evaluation.suite import EpisodeSpec
from harness.manager.episode import EpisodeRecord
from harness.manager.runtime import POLICY_FAILED as _POLICY_FAILED

POLICY_FAILED = f"rejected: {_POLICY_FAILED}"
"""How the result of an action starts when the policy raised instead of answering."""


def eval_section(spec: EpisodeSpec, run: int, config: Any, variant: str) -> dict[str, Any]:
    """``record.config["eval"]`` without the manager's figures: which episode of which evaluation it is."""
    return {
        "key": spec.key,
        "run": run,
        "variant": variant,
        "suite": config.suite,
        "worker": config.worker,
        "fault_turn": None if spec.fault is None else spec.fault.turn_id,
        "fault_type": None if spec.fault is None else spec.fault.fault_type,
        "fault_detectable": None if spec.fault is None else spec.fault.detectable,
    }


def errored_record(spec: EpisodeSpec, run: int, config: Any, variant: str, exc: BaseException) -> EpisodeRecord:
    """The record of an episode that raised: its ids and ``error`` (type and message), nothing else."""
    return EpisodeRecord(
        task_id=spec.task_id,
        episode_id=uuid.uuid4().hex[:12],
        config={"eval": eval_section(spec, run, config, variant)},
        simulated=config.scripted,
        error={"type": type(exc).__name__, "message": str(exc)[:2000]},
    )


def backend_failures(policy: Any) -> int:
    """How many calls to a model-backed policy's backend have raised so far (those its policy turned into a
    fallback or silence: the hier manager's tier 1, the windowed manager's hints)."""
    stats = getattr(policy, "stats", None)
    count = getattr(stats, "failures", 0) if stats is not None else 0
    own = getattr(policy, "failures", 0)
    return int(count or 0) + int(own if isinstance(own, int) else 0)


def policy_failure(record: EpisodeRecord, failures: int) -> dict[str, Any] | None:
    """The ``error`` of an episode whose manager failed to respond (a rejected action that says so, or ``failures``
    backend calls that raised), else None: its decisions were not the manager's."""
    failed = [
        a["result"]
        for act in record.activations
        for a in act.get("actions", ())
        if str(a.get("result") or "").startswith(POLICY_FAILED)
    ]
    if not failed and not failures:
        return None
    first = failed[0][len(POLICY_FAILED) :].strip(" ()") if failed else "see the log"
    return {
        "type": "ManagerBackendError",
        "message": f"the manager failed to respond {len(failed) + failures} time(s) in this episode (first: "
        f"{first[:500]}); its decisions were not the manager's",
    }
