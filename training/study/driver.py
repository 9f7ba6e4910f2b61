"""The small-model study, third design: does a trained manager help in whole held-out episodes?

``python -m training.study --config training/study/configs/smollm2.yaml`` runs :func:`run_study`
(:class:`~training.study.config.StudyConfig`):

1. **data** (``OUT/data``): the ``train`` split (the training domains, question writer a; the ``hier_checks``
   samples the model arms learn from) and the ``test`` split (a held-out domain worded by question writer b, its own
   seed), synthesized with the real sandbox.
2. **test set** (``OUT/data/test-suite``): :func:`training.study.testset.draw_testset` draws the faulted episodes
   (detectable faults only, paired with each task's clean episode) and checks them against the frozen record
   (``testset_record``, committed): a later edition plays exactly the same episodes.
3. **arms** (``OUT/arms/<arm>``): each model arm's checkpoint folder with its ``manager.json``
   (:mod:`training.study.arms`): the prompt arm links SmolLM2; ``sft`` and ``sft-dapo`` are real launcher
   subprocesses (``accelerate launch scripts/sft.py``, ``scripts/rl.py``), exactly as a user types them.
4. **episodes** (``OUT/eval/<arm>``): every arm is played by the product's own command, ``stateguard evaluate
   --managers SPEC`` (a model arm: ``hier:llm-hf:DIR``, served as its ``manager.json`` says), a subprocess per arm,
   the scripted (SIMULATED) worker, whole 6-turn tasks. The baselines play every test task, a model arm the first
   ``model_tasks`` (each with its clean and faulted episodes). The exact command of each arm is in the record.
5. **record**: :mod:`training.study.episode_metrics` (per-arm metrics, paired task-clustered differences, the
   targets met or missed) and :func:`training.study.record.write_record` (``results.json``, ``report.md``, plots).

Resume: every stage leaves a marker (the splits' ``stats.json``, ``OUT/arms/<arm>/train.json``,
``OUT/eval/<arm>/done.json``; ``stateguard evaluate`` resumes its own episodes), so a killed study re-run with the
same ``OUT`` continues where it stopped; ``OUT/timing.json`` sums each stage's seconds over the invocations.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from harness.tracking import resolve_report_to
from training.pipeline import ROOT
from training.study.arms import ARMS, manager_spec, train_arm
from training.study.config import StudyConfig
from training.study.data import synthesize_split
from training.study.layout import Study
from training.study.testset import draw_testset

__all__ = ["TIMING_FILE", "Study", "StudyConfig", "check_resume", "evaluate_arm", "evaluate_command", "run_study"]

logger = logging.getLogger(__name__)

TIMING_FILE = "timing.json"  # seconds per stage, summed over the invocations that ran it (a resume adds its own)
DONE = "done.json"  # an arm's finished evaluation: its command and exit code
CONFIG_FILE = "config.json"  # the config the study in OUT runs with; a resume must give the same
RESUMABLE_CHANGES = ("out", "report_to", "record_only")  # fields a resume may change: none changes a number


class StudyStageError(RuntimeError):
    """A stage that did not produce what it must (the message names the stage, its log and the fix)."""


def evaluate_command(study: Study, arm: str) -> list[str]:
    """The ``stateguard evaluate`` arguments that play ``arm`` on the frozen test set."""
    config = study.config
    command = [
        "evaluate", "--suite", str(study.test_suite()), "--worker", "scripted", "--managers", manager_spec(study, arm),
        "--labels", arm, "--out", str(study.eval_dir(arm)), "--seed", str(config.seed),
        "--n_resamples", str(config.n_resamples), "--isolation", config.isolation, "--report_to", "none",
        "--workers", str(config.model_workers if ARMS[arm].model else config.workers),
    ]  # fmt: skip
    if config.runtime:
        command += ["--runtime", yaml.safe_dump(config.runtime, default_flow_style=True).strip()]
    if ARMS[arm].model and config.model_tasks is not None:
        command += ["--limit", str(config.model_tasks)]
    if ARMS[arm].oracle:
        command += ["--oracle_checks"]
    return command


def evaluate_arm(study: Study, arm: str) -> dict[str, Any]:
    """Play ``arm`` with ``stateguard evaluate`` in a subprocess (log ``OUT/eval/<arm>/log.txt``); returns the
    command as typed and its exit code. Exit 4 (some episodes errored) is kept: the record counts them; any other
    failure stops the study naming the log."""
    out = study.eval_dir(arm)
    done = out / DONE
    argv = evaluate_command(study, arm)
    typed = "stateguard " + shlex.join(argv)
    if done.is_file() and json.loads(done.read_text()).get("command") == typed:
        return json.loads(done.read_text())
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    logger.info("study: %s", typed)
    with log.open("a", encoding="utf-8") as fh:
        rc = subprocess.call([sys.executable, "-m", "harness.cli", *argv], cwd=ROOT, stdout=fh, stderr=fh)
    if rc not in (0, 4):
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        raise StudyStageError(f"arm {arm}: stateguard evaluate exited {rc} ({tail[0]}); see {log}")
    result = {"command": typed, "rc": rc, "errored_episodes": rc == 4}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def play_decision_points(study: Study) -> dict[str, list[dict[str, Any]]]:
    """The diagnostic: ``decision_points`` of the test split (half REPAIR, half confirm), the gold running its checks
    and the arm deciding from their results (``takeover: decision``), played by the no-model deciders ``rule`` and
    the digest rule (:mod:`training.study.digest_rule`) in the real manager env."""
    from envs import ManagerEnv, ReplayPool
    from harness.manager.policies import RulePolicy
    from training.study.decisions import DECISIONS_FILE, decision_points, score_decisions
    from training.study.digest_rule import DECISION_BASELINES, DIGEST_RULE

    config = study.config
    pool = ReplayPool(study.data_dir("test"))
    points = decision_points(pool, config.decision_points, config.seed)
    env = ManagerEnv(pool=pool, worker="replay", isolation=config.isolation)
    deciders = {"rule": RulePolicy, DIGEST_RULE: DECISION_BASELINES[DIGEST_RULE]}
    try:
        return {
            arm: score_decisions(study.arm_dir(arm) / DECISIONS_FILE, env, points, make(), 2, label=arm,
                                 takeover="decision", group="test")
            for arm, make in deciders.items()
        }  # fmt: skip
    finally:
        env.close()


def collect(
    study: Study,
    evaluations: dict[str, dict[str, Any]],
    testset: dict[str, Any],
    decisions: dict[str, list[dict[str, Any]]],
    timing: dict[str, float],
    unavailable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The study's results (:func:`training.study.record.build_results`) from each arm's evaluation folder."""
    from harness.evaluation.suite import resolve_suite
    from training.study.record import arm_settings, build_results, load_arm_records, testset_tasks

    config = study.config
    tasks = testset_tasks(resolve_suite(str(study.test_suite())))
    records = {arm: load_arm_records(study.eval_dir(arm), arm) for arm in evaluations}
    settings = {
        arm: arm_settings(
            manager_spec(study, arm),
            study.model_dir(arm) if ARMS[arm].model else None,
            command=evaluation["command"],
            exit_code=evaluation["rc"],
            tasks_limit=config.model_tasks if ARMS[arm].model else None,
            code=evaluated_code(study.eval_dir(arm)),
        )
        for arm, evaluation in evaluations.items()
    }
    summary = {
        "id": Path(config.testset_record).name,
        "sha256": testset_digest(testset),
        "editions_seen": len(testset["seen_by_editions"]),
        "seen_by_editions": testset["seen_by_editions"],
        "domain": ", ".join(config.testset.get("domains", [])),
        "question_writer": config.testset.get("question_writer"),
        "seed": config.testset.get("seed"),
        "path": str(config.testset_record),
    }
    return build_results(
        records,
        tasks,
        question=QUESTION,
        testset=summary,
        settings=settings,
        timing=timing,
        descriptions={arm: ARMS[arm].description for arm in evaluations},
        decisions=decisions,
        unavailable=unavailable,
        config=asdict(config),
        seed=config.seed,
        n_resamples=config.n_resamples,
    )


def evaluated_code(folder: Path) -> str | None:
    """The code version an arm's episodes were played with (its evaluation's fingerprint), None when unrecorded."""
    path = folder / "fingerprint.json"
    return json.loads(path.read_text()).get("code") if path.is_file() else None


def testset_digest(record: dict[str, Any]) -> str:
    """One SHA-256 of the frozen set: its tasks' and faults' hashes in order."""
    import hashlib

    parts = [t["sha256"] for t in record["tasks"]] + [f["sha256"] for f in record["faults"]]
    return hashlib.sha256("".join(parts).encode()).hexdigest()


QUESTION = (
    "Does SmolLM2-135M-Instruct, trained to write the checks a turn requires (SFT, then DAPO over check activations), "
    "repair more detectable faults and no more clean turns than the baselines that could explain it, in whole "
    "held-out episodes?"
)


def check_resume(study: Study) -> None:
    """Record the config in ``OUT/config.json`` at the first run; a later run (a resume) with another config stops
    before any stage, naming the fields that changed (only :data:`RESUMABLE_CHANGES` may)."""
    path = study.out / CONFIG_FILE
    current = json.loads(json.dumps(asdict(study.config)))
    if not path.is_file():
        path.write_text(json.dumps(current, indent=2) + "\n")
        return
    stored = json.loads(path.read_text())
    changed = sorted(k for k in {*stored, *current} if k not in RESUMABLE_CHANGES and stored.get(k) != current.get(k))
    if changed:
        detail = "; ".join(f"{k}: {stored.get(k)!r} -> {current.get(k)!r}" for k in changed)
        raise StudyStageError(
            f"{path}: the study in {study.out} ran with another config ({detail}); its finished stages would mix "
            f"two designs: restore the config, or use another --out (or delete {study.out} to start over)"
        )


def interim_record(study: Study, timing: dict[str, float]) -> dict[str, Any]:
    """The record of the arms whose episodes are finished (``OUT/eval/<arm>/done.json``), the others listed as not
    played yet, and the decision points played so far; ``interim`` set: for a study still running
    (``record_only``). Nothing is trained or played."""
    from training.study.record import write_record

    config = study.config
    record_path = config.path(config.testset_record)
    if not record_path.is_file():
        raise StudyStageError(f"{record_path}: no test set drawn yet; run the study first")
    evaluations = {
        arm: json.loads((study.eval_dir(arm) / DONE).read_text())
        for arm in config.arms
        if (study.eval_dir(arm) / DONE).is_file()
    }
    waiting = {arm: "not played yet: the study is still running" for arm in config.arms if arm not in evaluations}
    from harness.jsonl import read_jsonl_resumable
    from training.study.decisions import DECISIONS_FILE

    decisions = {
        arm: rows
        for arm in ("rule", "digest-rule")
        if (rows := read_jsonl_resumable(study.arm_dir(arm) / DECISIONS_FILE))
    }
    testset = json.loads(record_path.read_text())
    results = collect(study, evaluations, testset, decisions, timing, waiting)
    results["interim"] = True
    write_record(study.out, results)
    return results


def run_study(config: StudyConfig, out: str | Path | None = None) -> dict[str, Any]:
    """Run (or resume) the whole study; writes the record into ``OUT`` and returns the results."""
    from training.smollm2 import build_smollm2
    from training.study.record import track_study, write_record

    study = Study(config, Path(out) if out is not None else config.path(config.out))
    study.out.mkdir(parents=True, exist_ok=True)
    check_resume(study)
    timing_path = study.out / TIMING_FILE
    timing: dict[str, float] = json.loads(timing_path.read_text()) if timing_path.is_file() else {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        value = fn()
        took = time.perf_counter() - began
        logger.info("study: %s took %.1f s", name, took)
        timing[name] = round(timing.get(name, 0.0) + took, 1)
        if name.startswith("train/") and isinstance(value, dict) and "seconds" in value:
            timing[name] = value["seconds"]  # the training launch's own wall time (a resumed arm's from its marker)
        timing_path.write_text(json.dumps(timing, indent=2) + "\n")
        return value

    if config.record_only:
        return interim_record(study, timing)
    if any(ARMS[a].model for a in config.arms):
        timed("model", lambda: build_smollm2(config.path(config.smollm2_dir)))
    data = {split: timed(f"data/{split}", lambda s=split: synthesize_split(study, s)) for split in ("train", "test")}
    record_path = config.path(config.testset_record)
    testset = timed("testset", lambda: draw_testset(config, study.data_dir("test"), study.test_suite(), record_path))
    trained: dict[str, dict[str, Any]] = {}
    evaluations: dict[str, dict[str, Any]] = {}
    for arm in config.arms:  # each arm built, then played: the baselines' numbers come first
        trained[arm] = timed(f"train/{arm}", lambda a=arm: train_arm(study, a))
        evaluations[arm] = timed(f"episodes/{arm}", lambda a=arm: evaluate_arm(study, a))
    decisions = timed("decisions", lambda: play_decision_points(study)) if config.decision_points else {}
    results = collect(study, evaluations, testset, decisions, timing)
    results["data"] = {split: {k: v for k, v in stats.items() if k != "config"} for split, stats in data.items()}
    results["trained"] = trained
    write_record(study.out, results)
    track_study(study.out, results, resolve_report_to(config.report_to), f"{study.out.name}-study")
    return results
