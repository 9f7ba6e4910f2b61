"""The ``synthesize`` pipeline: tasks -> faults -> counterfactual runs -> samples, in resumable shards, then export.

:func:`synthesize` (config, out):

1. **plan** (:func:`plan_jobs`, main process): the generated tasks (each domain x ``tasks_per_domain`` seeds, the turn
   count drawn from ``n_turns`` by the seed), the imported task folders and the chains over ``tables``; the faults
   read from ``faults_files`` are attached to their tasks (bad lines are skipped and reported). One job per task.
2. **run** (:func:`run_job`, one work unit per task on the executor of :mod:`harness.executors`: ``executor: local``
   runs them in this process or in ``workers`` processes, or, with a teacher, ``teacher_workers`` at a time on threads
   of this process (a task then mostly waits on the teacher's endpoint), ``executor: ray`` as Ray tasks on a local Ray
   or the cluster at ``address``; one :class:`~harness.sandbox.Sandbox`, one tokenizer and one teacher per process or
   thread): write the task folder
   ``tasks/<task_id>/`` (running its reference code), generate its faults, play the clean run and each fault's two
   runs (:mod:`synthesis.runs`), build and filter the samples (:mod:`synthesis.samples`) and write everything as ONE
   shard ``shards/<task_id>.json.gz``, its episode records beside it (``<task_id>.episodes.jsonl.gz``: the clean,
   faulty and gold lines in that order, which the export concatenates without parsing; the shard holds their ids and
   counts). The unit writes into its process's scratch folder and hands the files back (:func:`_job_in_worker`);
   the parent writes them under ``OUT`` atomically (temp file + rename), the shard last, in the order the units were
   submitted, so every executor writes the same bytes. A task that fails (its reference code raises, say) writes a
   shard with its ``error``: reported, and the run goes on.
3. **export** (:func:`synthesis.export.export`): reads all shards in task order, dedupes samples across tasks and
   writes the dataset, card, stats, episodes and ``faults.jsonl``.

Resume: a re-run with the same config skips tasks whose shard exists, so a killed run continues where it stopped and
ends with byte-identical outputs (``OUT/shards/config.json`` holds the config without the fields that only choose
where it runs, :data:`~synthesis.config.RUN_FIELDS`; another config in the same folder is an error naming the fix).
With ``executor: ray`` a task whose worker process dies is run again (``ray_max_retries``). Progress: a tqdm bar
with trajectories/s; at the end a summary table.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.executors import ExecutorOptions, SetupState, Work, check_executor, open_executor
from harness.jsonl import dumps
from harness.run_guard import value_digest
from harness.tasks import load_task
from synthesis.config import SynthesisConfig
from synthesis.export import export, read_shard
from synthesis.shards import EPISODE_BRANCHES, SHARDS, episodes_path, shard_path

if TYPE_CHECKING:
    from harness.manager.episode import EpisodeRecord

logger = logging.getLogger(__name__)


@dataclass
class Job:
    """One task to synthesize: where it comes from and the faults read for it from files."""

    index: int
    task_id: str
    source: str  # generated | folder | table
    params: dict[str, Any]
    file_faults: list[Any] = field(default_factory=list)


def _seeded_turns(seed: int, lo: int, hi: int) -> int:
    return random.Random(seed).randint(lo, hi)


def _spec_of(job: Job, question_writer: str = "a") -> Any:
    """The TaskSpec of a job; generated tasks and table chains worded by ``question_writer``."""
    from synthesis.domains import generate_chain_over_table, generate_task
    from synthesis.faults import task_spec_from_folder

    words = {"question_writer": question_writer}
    if job.source == "generated":
        return generate_task(job.params["domain"], job.params["seed"], job.params["n_turns"], **words)
    if job.source == "table":
        return generate_chain_over_table(job.params["path"], job.params["seed"], job.params["n_turns"], **words)
    return task_spec_from_folder(job.params["path"])


def plan_jobs(config: SynthesisConfig) -> tuple[list[Job], list[str]]:
    """The jobs of ``config`` in a fixed order, and the skipped inputs with their reasons."""
    from synthesis.faults import faults_from_file

    jobs: list[Job] = []
    skipped: list[str] = []
    specs: dict[str, Any] = {}
    lo, hi = config.n_turns
    for domain in config.domains:
        for k in range(config.tasks_per_domain):
            seed = config.seed + k
            params = {"domain": domain, "seed": seed, "n_turns": _seeded_turns(seed * 7919 + len(domain), lo, hi)}
            jobs.append(Job(len(jobs), "", "generated", params))
    for path in config.task_dirs:
        jobs.append(Job(len(jobs), "", "folder", {"path": str(path)}))
    for k, path in enumerate(config.tables):
        jobs.append(
            Job(len(jobs), "", "table", {"path": str(path), "seed": config.seed + k, "n_turns": config.table_turns})
        )
    planned = []
    for job in jobs:
        try:
            spec = _spec_of(job, config.question_writer)
        except Exception as exc:  # a bad folder or table is reported; the others go on
            skipped.append(f"task source {job.source} {job.params}: {type(exc).__name__}: {exc}; skipped")
            continue
        if spec.task_id in specs:
            skipped.append(f"task {spec.task_id} ({job.source} {job.params}) is listed twice; the second is skipped")
            continue
        job.task_id = spec.task_id
        specs[spec.task_id] = spec
        planned.append(job)
    by_task: dict[str, Job] = {job.task_id: job for job in planned}
    for path in config.faults_files:
        try:
            faults, bad = faults_from_file(path, specs)
        except ValueError as exc:
            skipped.append(f"faults file {path}: {exc}")
            continue
        skipped += bad
        for fault in faults:
            by_task[fault.task_id].file_faults.append(fault)
    for index, job in enumerate(planned):
        job.index = index
    return planned, skipped


# ---------------------------------------------------------------- worker side
_WORKER = SetupState()
"""This worker's state (:func:`_init_worker`): per process, or per thread with ``teacher_workers``."""


WORKER_GC_THRESHOLD = (50_000, 20, 20)
"""The worker's ``gc.set_threshold``: a run allocates millions of short-lived dicts (records, observations, samples)
that reference counting frees, and the default (700, 10, 10) scanned them ~650 times per three tasks, ~8 % of the
worker's CPU; with this and the start-up objects frozen, ~2 %."""


def _init_worker(config: SynthesisConfig, scratch_root: str | None = None) -> None:
    """Per process (per thread with ``teacher_workers``): the config, a scratch folder (under ``scratch_root`` when
    that folder exists on this machine, else in the system's temporary folder), one sandbox, the tokenizer (when
    counting tokens) and the teacher (when configured); then, in a process of its own (not on a thread), the start-up
    objects are frozen out of the garbage collector and its threshold raised (:data:`WORKER_GC_THRESHOLD`;
    :func:`_close_worker` puts both back and removes the scratch folder)."""
    from synthesis.gold import Teacher

    state = _WORKER.new()
    state["config"] = config
    root = scratch_root if scratch_root is not None and Path(scratch_root).is_dir() else None
    state["scratch"] = Path(tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-", dir=root))
    state["sandbox"] = open_sandbox(config.isolation)
    state["count"] = None
    if config.count_tokens:
        from harness.tokenizer import build_qwen3_tokenizer, qwen3_tiktoken_encoding
        from synthesis.samples import token_counter

        state["count"] = token_counter(build_qwen3_tokenizer(), qwen3_tiktoken_encoding())
    state["teacher"] = None
    if config.teacher_url:
        from harness.llm import OpenAIChatBackend

        state["teacher"] = Teacher(OpenAIChatBackend(config.teacher_url))
    if threading.current_thread() is not threading.main_thread():
        return
    state["gc"] = (gc.get_threshold(), gc.get_freeze_count())
    gc.freeze()
    gc.set_threshold(*WORKER_GC_THRESHOLD)


MAX_CHECKPOINTS = 128
"""Kernel checkpoints a synthesis kernel may hold (the clean runs' snapshots before every faulted turn)."""


def open_sandbox(isolation: str | None) -> Any:
    """The worker's sandbox: ``isolation`` if given, else bwrap when usable, else 'none' (logged)."""
    from harness.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError

    settings = {"max_checkpoints": MAX_CHECKPOINTS}
    if isolation is not None:
        return Sandbox(SandboxConfig(isolation=isolation, **settings))
    try:
        return Sandbox(SandboxConfig(isolation="bwrap", **settings))
    except SandboxUnavailableError as exc:
        logger.warning("bwrap is unusable (%s); synthesis runs with isolation none", exc)
        return Sandbox(SandboxConfig(isolation="none", **settings))


def _close_worker() -> None:
    state = _WORKER.drop()
    sandbox = state.pop("sandbox", None)
    if sandbox is not None:
        sandbox.close()
    scratch = state.pop("scratch", None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    state.pop("config", None)
    saved = state.pop("gc", None)
    if saved is not None:
        threshold, frozen = saved
        gc.set_threshold(*threshold)
        if frozen == 0:  # nobody else had frozen anything: thaw what _init_worker froze
            gc.unfreeze()


def select_faults(faults: list[Any], limit: int | None, rng: random.Random) -> list[Any]:
    """At most ``limit`` faults, round-robin over fault types (each type's order shuffled by ``rng``)."""
    if limit is None or len(faults) <= limit:
        return list(faults)
    by_type: dict[str, list[Any]] = {}
    for fault in faults:
        by_type.setdefault(fault.fault_type, []).append(fault)
    for group in by_type.values():
        rng.shuffle(group)
    types = sorted(by_type)
    rng.shuffle(types)
    chosen: list[Any] = []
    while len(chosen) < limit:
        for name in types:
            if by_type[name] and len(chosen) < limit:
                chosen.append(by_type[name].pop(0))
    return chosen


def prepare_job(job: Job, config: SynthesisConfig, out: Path, sandbox: Any) -> tuple[Any, Any, list[Any]]:
    """The task folder of ``job`` written under ``out/tasks`` (its reference code run in ``sandbox``), the loaded
    task and its faults: the seeded candidates, selected, then the ones read from files. Raises for a bad task."""
    from synthesis.domains import write_task_folder
    from synthesis.faults import candidate_faults

    spec = _spec_of(job, config.question_writer)
    task = load_task(write_task_folder(spec, out / "tasks" / job.task_id, sandbox))
    references = {t: r.answer for t, r in task.load_answers().items()}  # type: ignore[union-attr]
    rng = random.Random(f"{config.seed}|{job.task_id}")
    faults: list[Any] = []
    if config.generate_faults:
        faults = candidate_faults(spec, rng, config.fault_types, answers=references)
        faults = select_faults(faults, config.max_faults_per_task, rng)
    taken = {(f.turn_id, f.fault_type, f.code) for f in faults}
    faults += [f for f in job.file_faults if (f.turn_id, f.fault_type, f.code) not in taken]
    return spec, task, faults


def run_job(job: Job, config: SynthesisConfig, out: Path) -> dict[str, Any]:
    """Synthesize one task; returns the shard (also written to ``out/shards``). Never raises for a bad task."""
    from synthesis.checks import folder_checks
    from synthesis.runs import fault_id, run_task
    from synthesis.samples import build_samples, filter_samples

    shard: dict[str, Any] = {"index": job.index, "task_id": job.task_id, "source": job.source, "error": None}
    try:
        spec, task, faults = prepare_job(job, config, out, _WORKER.get()["sandbox"])
        checks = folder_checks(task, config.gold_skip_check_kinds)
        runs = run_task(task, faults, _WORKER.get()["sandbox"], teacher=_WORKER.get()["teacher"], checks=checks)
    except Exception as exc:  # a task that cannot be synthesized is reported; the run goes on
        shard["error"] = f"task {job.task_id} ({job.source} {job.params}): {type(exc).__name__}: {exc}"
        logger.warning("%s", shard["error"])
        return _write_shard(out, shard)
    if runs.clean is None:
        shard["error"] = f"task {job.task_id}: {runs.reason}"
        return _write_shard(out, shard)
    base = {"task_id": task.id, "domain": spec.domain, "relations": [t.relation for t in task.turns]}
    samples: list[dict[str, Any]] = []
    meta = {"task_id": task.id, "domain": spec.domain, "fault_type": "none", "fault_id": "", "source": job.source}
    hier_drops: Counter[str] = Counter()  # gold activations that are not hier ones (synthesis.samples.hier_part)
    formats = {"formats": config.formats, "drops": hier_drops}
    samples += build_samples(runs.clean.log, meta, fault_turn=None, benign=False, kinds=config.kinds, **formats)
    outcomes = []
    records: dict[str, list[EpisodeRecord]] = {"clean": [runs.clean.record], "faulty": [], "gold": []}
    for outcome in runs.outcomes:
        fid = fault_id(outcome.fault)
        outcomes.append(
            {
                "fault_id": fid,
                "fault_type": outcome.fault.fault_type,
                "turn_id": outcome.fault.turn_id,
                "benign": outcome.fault.benign,
                "relation": next(t.relation for t in task.turns if t.turn_id == outcome.fault.turn_id),
                "kept": outcome.kept,
                "reason": outcome.reason,
                "detectable": outcome.detectable,
                "revealed_by": list(outcome.revealed_by),
                "fault": outcome.fault.to_fault().to_dict(),
                "injected": outcome.fault.to_dict(),
            }
        )
        if not outcome.kept:
            continue
        assert outcome.gold is not None and outcome.faulty is not None
        records["faulty"].append(outcome.faulty.record)
        records["gold"].append(outcome.gold.record)
        meta = {**meta, "fault_type": outcome.fault.fault_type, "fault_id": fid}
        samples += build_samples(
            outcome.gold.log,
            meta,
            fault_turn=outcome.fault.turn_id,
            benign=outcome.fault.benign,
            undetectable=outcome.detectable is False,
            kinds=config.kinds,
            atomic_labels=config.faulted_atomic_labels,
            **formats,
        )
    kept, dropped = filter_samples(samples, _WORKER.get()["count"], config.max_tokens)
    dropped.update(hier_drops)
    lines = "".join(f"{record.to_json()}\n" for branch in EPISODE_BRANCHES for record in records[branch])
    episode_ids = {branch: [record.episode_id for record in group] for branch, group in records.items()}
    _write_atomic(episodes_path(out, job.task_id), lines.encode())
    shard.update(task=base, outcomes=outcomes, samples=kept, sample_drops=dict(dropped), episode_ids=episode_ids)
    shard["trajectories"] = 1 + sum(o["kept"] for o in outcomes)
    return _write_shard(out, shard)


def _write_shard(out: Path, shard: dict[str, Any]) -> dict[str, Any]:
    """Write ``shard`` atomically (its presence marks the task done, so it is written last)."""
    _write_atomic(shard_path(out, shard["task_id"]), dumps(shard, sort_keys=True).encode())
    return shard


def _write_atomic(path: Path, data: bytes, *, compress: bool = True) -> None:
    """Write ``data`` (gzipped unless ``compress`` is false) into ``path``: a temp file in the same folder, then
    ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".gz")
    with os.fdopen(fd, "wb") as fh:
        fh.write(gzip.compress(data, compresslevel=3, mtime=0) if compress else data)
    os.replace(tmp, path)


def _job_in_worker(job: Job) -> dict[str, Any]:
    """The work unit: synthesize ``job`` into this process's scratch folder and hand back its summary and every file
    it wrote (``files``: (path relative to OUT, bytes), the shard last), which leave the scratch folder."""
    scratch = _WORKER.get()["scratch"]
    shard = run_job(job, _WORKER.get()["config"], scratch)
    return {
        "task_id": shard["task_id"],
        "trajectories": shard.get("trajectories", 0),
        "error": shard["error"],
        "files": _take_files(scratch, shard_path(scratch, job.task_id)),
    }


def _take_files(folder: Path, last: Path) -> list[tuple[str, bytes]]:
    """Every file under ``folder`` as (relative path, bytes), ``last`` last; the folder is left empty."""
    paths = sorted((p for p in folder.rglob("*") if p.is_file()), key=lambda p: (p == last, str(p)))
    files = [(p.relative_to(folder).as_posix(), p.read_bytes()) for p in paths]
    for child in folder.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    return files


# ---------------------------------------------------------------- driver
def config_fingerprint(config: SynthesisConfig) -> str:
    data = {k: v for k, v in config.output_dict().items() if k != "teacher_url"}
    return value_digest(data)


def _check_resume(out: Path, config: SynthesisConfig) -> None:
    marker = out / SHARDS / "config.json"
    fingerprint = config_fingerprint(config)
    if marker.is_file():
        try:
            found = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            found = f"{type(error).__name__}: {error}"
        if not isinstance(found, dict) or not isinstance(found.get("fingerprint"), str):
            raise ValueError(
                f"{marker}: not the config marker of a synthesis run ({str(found)[:200]}), so the shards in {out} "
                "cannot be matched to this config; use another --out folder or delete that one to start over."
            )
        found = found["fingerprint"]
        if found != fingerprint:
            raise ValueError(
                f"{out} holds shards of another synthesis config (fingerprint {found}, this one {fingerprint}); "
                "use another --out folder or delete that one to start over."
            )
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(
        json.dumps({"fingerprint": fingerprint, "config": config.output_dict()}, sort_keys=True, indent=1)
    )


@dataclass
class SynthesisResult:
    out: Path
    trajectories: int
    wall_s: float
    stats: dict[str, Any]
    skipped: list[str]


def synthesize(
    config: SynthesisConfig,
    out: str | Path,
    *,
    max_jobs: int | None = None,
    progress: bool = True,
    on_shard: Callable[[dict[str, Any]], None] | None = None,
) -> SynthesisResult:
    """Run the pipeline into ``out`` (see the module docstring). ``max_jobs``: stop after that many new shards
    (for tests of resume: the outputs are then exported from the shards written so far). The executor is checked
    first (:func:`harness.executors.check_executor`: Ray installed, ``address`` answering), before any work."""
    from tqdm import tqdm

    out = Path(out)
    start = time.perf_counter()
    options = ExecutorOptions.of(config)
    check_executor(options)
    _check_resume(out, config)
    jobs, skipped = plan_jobs(config)
    for reason in skipped:
        logger.warning("skipped: %s", reason)
    todo = [job for job in jobs if not shard_path(out, job.task_id).is_file()]
    if max_jobs is not None:
        todo = todo[:max_jobs]
    logger.info("%d tasks planned, %d already done, %d to run", len(jobs), len(jobs) - len(todo), len(todo))
    bar = tqdm(total=len(todo), unit="task", disable=not progress, desc="synthesize")
    done_trajectories = 0
    # Longest first (turn count is the best cost guess before the faults exist): a long task last would leave a
    # core idle at the end. Only the order of work changes; the export reads the shards in job order.
    order = sorted(todo, key=lambda job: -int(job.params.get("n_turns") or 0))
    workers = min(config.n_workers, max(len(todo), 1))
    threads = min(config.teacher_workers, max(len(todo), 1))  # > 1: threads of this process instead of processes

    parsed: dict[Path, dict[str, Any]] = {}  # shards read while the other workers run (the export needs them all)

    def record(summary: dict[str, Any]) -> None:
        nonlocal done_trajectories
        for name, data in summary["files"]:  # the shard last: its presence marks the task done
            _write_atomic(out / name, data, compress=False)
        path = shard_path(out, summary["task_id"])
        parsed[path] = json.loads(gzip.decompress(summary["files"][-1][1]))
        done_trajectories += summary["trajectories"]
        elapsed = max(time.perf_counter() - start, 1e-9)
        bar.set_postfix(trajectories=done_trajectories, per_s=f"{done_trajectories / elapsed:.2f}")
        bar.update(1)
        if on_shard is not None:
            on_shard({key: value for key, value in summary.items() if key != "files"})

    scratch_root = tempfile.mkdtemp(prefix="stateguard-synth-")  # the workers' scratch folders on this machine
    try:
        if order:
            work = Work(_job_in_worker, setup=_init_worker, args=(config, scratch_root), teardown=_close_worker)
            with (
                open_executor(
                    options, workers=1 if threads > 1 else workers, threads=threads, ray_num_cpus=config.n_workers
                ) as executor,
                contextlib.closing(executor.imap(work, order)) as summaries,
            ):
                for summary in summaries:
                    record(summary)
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    bar.close()
    done = [job for job in jobs if shard_path(out, job.task_id).is_file()]
    _fail_when_nothing_succeeded(out, done, parsed)
    stats = export(out, [shard_path(out, job.task_id) for job in done], config, skipped, parsed)
    wall = time.perf_counter() - start
    return SynthesisResult(out, stats["trajectories"], wall, stats, skipped)


class NothingSynthesizedError(ValueError):
    """Every planned task failed: there is no data to export. Raised before the export, after the failed tasks'
    shards were removed, so that a re-run once the cause is fixed tries them again."""


def _fail_when_nothing_succeeded(out: Path, done: list[Job], parsed: dict[Path, dict[str, Any]]) -> None:
    """Raise :class:`NothingSynthesizedError` when ``done`` is not empty and every shard of it holds an error.

    One failed task among good ones is the task's problem (kept, reported, skipped on resume); every task failing
    is almost always the machine's (a sandbox that cannot start, say), and an empty dataset would only fail later,
    in training, with a misleading message."""
    if not done:
        return
    shards = {
        job.task_id: parsed.get(shard_path(out, job.task_id)) or read_shard(shard_path(out, job.task_id))
        for job in done
    }
    errors = [shard["error"] for shard in shards.values() if shard["error"] is not None]
    if len(errors) < len(shards):
        return
    for task_id in shards:
        shard_path(out, task_id).unlink(missing_ok=True)
        episodes_path(out, task_id).unlink(missing_ok=True)
    first = errors[0].splitlines()[0]
    raise NothingSynthesizedError(
        f"every one of the {len(errors)} task(s) failed, so there is no data; the first: {first}. "
        f"Fix that cause and re-run with the same --out {out} (the failed tasks are tried again)."
    )


def summary_table(result: SynthesisResult) -> str:
    """The closing summary: kept/dropped by reason, counts by fault type, domain and label, wall time."""
    stats = result.stats
    lines = [f"synthesis into {result.out}: {stats['trajectories']} trajectories in {result.wall_s:.1f} s"]

    def block(title: str, counts: dict[str, int]) -> None:
        lines.append(f"{title}:")
        width = max((len(str(k)) for k in counts), default=0)
        lines.extend(f"  {str(k):<{width}}  {v:>6}" for k, v in sorted(counts.items()))

    block("faults kept/dropped", stats["faults"]["by_outcome"])
    block("kept trajectories by fault type", stats["trajectories_by_fault_type"])
    block("kept trajectories by domain", stats["trajectories_by_domain"])
    block("samples by label", stats["samples"]["by_label"])
    block("samples by kind", stats["samples"]["by_kind"])
    block("samples by format", stats["samples"]["by_format"])
    block("samples dropped", stats["samples"]["dropped"] or {"(none)": 0})
    if stats["errors"] or result.skipped:
        lines.append(f"skipped inputs and failed tasks: {len(result.skipped) + len(stats['errors'])}")
        lines.extend(f"  - {reason}" for reason in [*result.skipped, *stats["errors"]])
    return "\n".join(lines)


def count_by(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    return dict(sorted(Counter(str(r[key]) for r in rows).items()))
