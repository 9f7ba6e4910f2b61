"""The evaluation runner: every manager variant on the same episodes of a suite; resumable; results and report.

:func:`run_evaluation` (:class:`EvaluationConfig`):

1. resolves the suite (:mod:`harness.evaluation.suite`) into episodes: one clean episode per task and, with the
   scripted worker, one per fault; each repeated ``runs`` times;
2. for each variant (a manager spec of :func:`harness.manager.get_policy`: ``none``, ``rule``, ``window-rule:K``,
   ``windowed:K:URL``, ``llm:URL``, ``llm-hf:PATH``, ``freeform:URL`` ...) runs the episodes missing from
   ``OUT/episodes/<variant>.jsonl`` in a fresh sandbox kernel each and appends their records (``config["eval"]`` holds
   the episode ``key``, ``run``, ``variant``, ``fault_turn`` and the manager's tokens). A re-run with the same ``OUT``
   skips finished episodes, so a killed evaluation continues where it stopped; an episode that raised, or whose
   manager failed to respond during it, is recorded with its ``error`` (:mod:`.errored`), left out of every metric,
   counted per variant (``n_errored``, ``errored``) and played again by the next run. ``OUT`` is locked for the run,
   and its ``fingerprint.json`` must match (:mod:`.resume`). The episodes are work units of
   :mod:`harness.executors`: ``executor: local`` plays them one after another in this process, or ``workers`` at a
   time on threads of this process (for endpoints, where an episode mostly waits on HTTP: each thread has its own
   policies and sandbox; :func:`check_workers`), ``executor: ray`` as Ray tasks (a local Ray, or the cluster at
   ``address``; a unit whose worker dies is played again); either way this process appends the records in episode
   order, so the outputs are the same. One policy object per process (per thread) serves all its episodes of a
   variant (an in-process model is loaded once per process);
3. summarizes (:mod:`harness.evaluation.summary`) and writes ``OUT/results.json``::

       {"suite": {...}, "oracles": {...}, "config": {...}, "versions": {...}, "errored": {NAME: n},
        "variants": {NAME: {"task_accuracy", "turn_accuracy", "turn_accuracy_ci95", "dcr" (null when undefined),
                            "repair_precision", "repair_recall", "simulated", "n_errored", "manager": {...},
                            "worker": {...}}},
        "comparisons": [{"a", "b", "turn_accuracy_diff", "ci95": [lo, hi], "task_accuracy_diff", ...}]}

   (``comparisons``: every pair of variants in the order given, ``b - a``, so list the baseline first; each variant
   also has ``relation_accuracy``, ``manager_view`` and ``rule_constraints``, see :mod:`.summary`, and
   ``manager_settings``: what its model was served with and the ``manager.json`` it came from, null without a
   model, :mod:`harness.manager.served`), then
   ``OUT/report.md`` with tables and plots (:mod:`harness.evaluation.report`);
4. with ``report_to`` (trackio | tensorboard | wandb), logs the summary metrics (:func:`tracked_metrics`) and the
   plots to one run of that tracker (:mod:`harness.tracking`; tensorboard writes ``OUT/tb``).

The manager sees each turn's question, context and constraint texts; ``oracle_relations`` adds the task's dependency
graph and ``executable_constraints`` the constraints' code (:class:`~harness.manager.runtime.RuntimeConfig`). The
``oracles`` section records both switches (on when the config or any episode set them), the number of tasks that
declare their constraint code public (``metadata.constraint_code_public``, not an oracle), whether the suite is held
out (:func:`is_heldout`) and, when a switch is on for a held-out suite, a ``warning`` that is also logged and heads
the report.

With the scripted worker every number is SIMULATED (``simulated: true``, and the report says so).
"""

from __future__ import annotations

import json
import logging
import platform
import re
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness import __version__
from harness.endpoints import check_endpoints, spec_endpoints
from harness.evaluation.errored import backend_failures, errored_record, eval_section, policy_failure
from harness.evaluation.report import PLOTS, REPORT_FILE
from harness.evaluation.resume import check_and_record, clear_outputs, evaluation_fingerprint
from harness.evaluation.stats import N_RESAMPLES
from harness.evaluation.suite import DEFAULT_CACHE, SUITES, EpisodeSpec, Suite, resolve_suite
from harness.evaluation.summary import TaskInfo, compare_variants, episode_id, summarize_variant
from harness.evaluation.tracked import track_results
from harness.executors import (
    EXECUTION_FIELDS,
    ExecutorOptions,
    SetupState,
    Work,
    address_field,
    check_executor,
    check_options,
    executor_field,
    open_executor,
    ray_connect_timeout_field,
    ray_max_retries_field,
    ray_num_cpus_field,
)
from harness.manager.episode import EpisodeRecord, append_episode, read_episodes
from harness.progress import progress
from harness.run_guard import OutLock, check_out_outside
from harness.specs import (
    MANAGER_GRAMMAR,
    WORKER_GRAMMAR,
    parse_manager_spec,
    parse_manager_specs,
    parse_suite_spec,
    parse_worker_spec,
)
from harness.tracking import TRACKERS, check_tracker
from harness.yaml_config import build_config

logger = logging.getLogger(__name__)

EPISODES_DIR = "episodes"
RESULTS_FILE = "results.json"
ORACLE_SWITCHES = {
    "oracle_relations": "the task's dependency graph",
    "executable_constraints": "the constraints' code",
    "oracle_checks": "the gold's check specs (read by hier-checks:gold only)",
}
"""The RuntimeConfig switches that put an oracle into the manager's view -> what they show."""
RUN_FIELDS = ("workers", *EXECUTION_FIELDS)
"""The config fields that change how the episodes are spread, never their records (kept out of ``results.json``)."""
OUTPUTS = (EPISODES_DIR, RESULTS_FILE, REPORT_FILE, "tb", *PLOTS)
"""What an evaluation writes into OUT (``overwrite`` removes them, and the fingerprint, first)."""


class EvaluationError(ValueError):
    """Bad evaluation input; the message names the option and the fix."""


@dataclass
class EvaluationConfig:
    """What ``stateguard evaluate`` runs (YAML keys = field names; configs/eval/*.yaml). Build one in code with
    :meth:`from_dict` (every value's type is checked, as for a file); the command builds it from its file and flags
    with :func:`harness.config_cli.parse_config`."""

    suite: str = field(metadata={"help": f"A folder of task folders, or a suite name: {', '.join(SUITES)}."})
    out: str = field(metadata={"help": "Output folder: results.json, report.md, episodes/<variant>.jsonl."})
    worker: str = field(default="scripted", metadata={"help": f"The worker: {WORKER_GRAMMAR}."})
    managers: list[str] = field(
        default_factory=lambda: ["none", "rule"],
        metadata={"help": f"Manager variants, run on the same episodes; baseline first. Each: {MANAGER_GRAMMAR}."},
    )
    labels: list[str] | None = field(
        default=None, metadata={"help": "Names of the variants in the results (default: the specs themselves)."}
    )
    faults: str | None = field(default=None, metadata={"help": "faults.jsonl replacing the suite's own faults."})
    runs: int = field(default=1, metadata={"help": "Repetitions of every episode (for sampled workers/managers)."})
    limit: int | None = field(default=None, metadata={"help": "Keep only the first N tasks of the suite."})
    fault_limit: int | None = field(
        default=None, metadata={"help": "Keep only N faults of those tasks (0: clean episodes only)."}
    )
    fault_order: str = field(
        default="file",
        metadata={
            "help": "Which faults fault_limit keeps: file (the first N) | dependents (those whose turn has the most "
            "scored dependent turns); see harness.evaluation.suite."
        },
    )
    cache: str = field(default=str(DEFAULT_CACHE), metadata={"help": "Folder the named suites are read from."})
    isolation: Literal["bwrap", "none"] = field(default="bwrap", metadata={"help": "Sandbox isolation."})
    flow: Literal["turn", "segment"] | None = field(
        default=None, metadata={"help": "Review cadence (null: turn for multi-turn tasks, segment for single tasks)."}
    )
    oracle_relations: bool = field(
        default=False,
        metadata={"help": "Show the manager the task's dependency graph (an oracle; RuntimeConfig.oracle_relations)."},
    )
    executable_constraints: bool = field(
        default=False,
        metadata={"help": "Show the manager the constraints' code (an oracle unless a task declares it public)."},
    )
    oracle_checks: bool = field(
        default=False,
        metadata={"help": "Give hier-checks:gold the gold's check specs (an oracle; RuntimeConfig.oracle_checks)."},
    )
    runtime: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "More RuntimeConfig fields (e.g. max_actions) for every episode."}
    )
    manager_max_tokens: int | None = field(default=None, metadata={"help": "Cap on one manager reply (llm)."})
    constrained_decoding: bool = field(
        default=False,
        metadata={
            "help": "Decode the replies of model managers that write actions under the action grammar: every reply "
            "is one well-formed action (llm-hf, hier:llm-hf in process, harness.grammar; llm:URL, hier:llm:URL as "
            "vLLM guided decoding: serve with --structured-outputs-config.backend guidance)."
        },
    )
    legal_actions_only: bool = field(
        default=False,
        metadata={
            "help": "With constrained_decoding, a flat llm manager's grammar allows only the actions the runtime "
            "lists as legal now (the prompt lists them too): a refused action then breaks a rule by its arguments."
        },
    )
    overwrite: bool = field(
        default=False,
        metadata={
            "help": "Discard the episodes, results and report already in out and start fresh (without it, a re-run "
            "resumes, and out holding another evaluation's episodes is refused)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of the bootstrap resampling."})
    n_resamples: int = field(default=N_RESAMPLES, metadata={"help": "Bootstrap resamples."})
    report: bool = field(default=True, metadata={"help": "Write report.md with plots."})
    report_to: Literal["none", "trackio", "tensorboard", "wandb"] = field(
        default="none",
        metadata={
            "help": f"Tracker that gets the summary metrics and plots, one of {list(TRACKERS)} (trackio: local, "
            "offline, `trackio show`; tensorboard: OUT/tb)."
        },
    )
    project: str = field(default="stateguard", metadata={"help": "Tracker project (trackio, wandb)."})
    run_name: str | None = field(
        default=None, metadata={"help": "Tracker run name (null: eval-<name of the out folder>)."}
    )
    workers: int = field(
        default=1,
        metadata={
            "help": "executor local: episodes played at once, each on its own thread with its own policy and sandbox "
            "(for managers and workers behind an endpoint: llm:URL, openai:URL; in-process models refuse more than "
            "1). The records, results and report are the same as with 1."
        },
    )
    executor: Literal["local", "ray"] = executor_field()
    address: str | None = address_field()
    ray_num_cpus: int | None = ray_num_cpus_field("all cores")
    ray_max_retries: int = ray_max_retries_field()
    ray_connect_timeout_s: float = ray_connect_timeout_field()

    def __post_init__(self) -> None:
        try:  # a -hf model folder is checked when its variant has episodes to run (a resumed one may have none)
            parse_manager_specs(self.managers, check_paths=False)
        except ValueError as exc:
            raise EvaluationError(str(exc)) from None
        if self.legal_actions_only and not self.constrained_decoding:
            raise EvaluationError(
                "legal_actions_only=true narrows the action grammar, but constrained_decoding is false; set "
                "constrained_decoding: true (or drop legal_actions_only)"
            )
        if len(set(self.variant_names)) != len(self.managers):
            raise EvaluationError(f"--manager {','.join(self.managers)}: a variant is listed twice; list each once.")
        if self.labels is not None and len(self.labels) != len(self.managers):
            raise EvaluationError(
                f"labels {self.labels} do not match the {len(self.managers)} managers {self.managers}; give one each."
            )
        from harness.manager import RuntimeConfig

        switches = sorted(set(self.runtime) & set(ORACLE_SWITCHES))
        if switches:
            raise EvaluationError(
                f"runtime options {self.runtime}: set {switches} with the fields of the same name "
                "(--oracle-relations, --executable-constraints), not in runtime."
            )
        try:
            RuntimeConfig(**self.runtime_fields())
        except (TypeError, ValueError) as exc:
            raise EvaluationError(f"runtime options {self.runtime}: {exc}") from exc
        try:
            parse_worker_spec(self.worker, faults=self.faults is not None)
        except ValueError as exc:
            raise EvaluationError(str(exc)) from None
        if self.runs < 1:
            raise EvaluationError(f"--runs {self.runs}: run every episode at least once.")
        if self.report_to not in TRACKERS:
            raise EvaluationError(f"report_to={self.report_to!r}: use one of {list(TRACKERS)}.")
        check_options(self)
        check_workers(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "") -> EvaluationConfig:
        """The config of ``data`` (field name -> value) after the checks of a config file: unknown keys, missing
        required fields and every value's type are named in one ``ValueError`` (``source`` starts the message,
        e.g. ``pipeline evaluate stage``); then this class's own checks. The one way code builds an evaluation."""
        return build_config(cls, data, source=source)

    def runtime_fields(self) -> dict[str, Any]:
        """The RuntimeConfig fields of every episode: ``flow``, the oracle switches, then ``runtime``."""
        return {"flow": self.flow, **{name: getattr(self, name) for name in ORACLE_SWITCHES}, **self.runtime}

    @property
    def scripted(self) -> bool:
        return parse_worker_spec(self.worker).scripted

    @property
    def variant_names(self) -> list[str]:
        return list(self.labels) if self.labels is not None else list(self.managers)


def check_workers(config: EvaluationConfig) -> None:
    """``workers`` > 1 plays episodes on threads of this process (``executor: local``), each thread with its own
    policies: refused for a model loaded into this process (it would load once per thread and the threads would
    contend for one CPU or GPU) and for ``executor: ray`` (Ray runs one episode per CPU itself)."""
    if config.workers < 1:
        raise EvaluationError(f"workers={config.workers}: play at least 1 episode at a time.")
    if config.workers == 1:
        return
    if config.executor != "local":
        raise EvaluationError(
            f"workers={config.workers} with executor {config.executor}: Ray plays one episode per CPU itself; set "
            "workers: 1 (and ray_num_cpus for a local Ray)."
        )
    in_process = [m for m in config.managers if parse_manager_spec(m, check_paths=False).in_process]
    if parse_worker_spec(config.worker).kind == "hf":
        in_process.append(f"worker {config.worker}")
    if in_process:
        raise EvaluationError(
            f"workers={config.workers}: {', '.join(in_process)} runs a model in this process, which one thread per "
            "episode would load once per thread onto the same device; use workers: 1, or serve the model "
            "(`stateguard serve`) and evaluate it as llm:URL / openai:URL."
        )


def variant_file(out: Path, name: str) -> Path:
    """``OUT/episodes/<name>.jsonl`` with every character outside ``[A-Za-z0-9_.-]`` replaced by ``_``."""
    return out / EPISODES_DIR / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".jsonl")


def read_variant(path: Path) -> list[EpisodeRecord]:
    return list(read_episodes(path, resume=True)) if path.is_file() else []


def run_evaluation(
    config: EvaluationConfig, policy_factories: Mapping[str, Callable[[], Any]] | None = None
) -> dict[str, Any]:
    """Run (or resume) the evaluation and write its outputs; returns the results dict (see the module docstring).

    Before any episode: ``OUT`` is locked (:class:`~harness.run_guard.OutLock`; a second run on it is refused), an
    ``OUT`` inside a task folder of the suite is refused, every endpoint the variants still to run and the worker name
    must answer (:mod:`harness.endpoints`), and ``OUT``'s fingerprint must match this evaluation
    (:mod:`harness.evaluation.resume`; ``overwrite`` discards the old outputs instead).

    ``policy_factories``: variant name -> a function making its policy, instead of ``get_policy(spec)`` (e.g. a
    chat model behind a custom backend); called only when the variant has episodes to run, once per process (or
    thread, with ``workers``) that plays them (with ``executor: ray`` the functions travel to the workers: pass
    module-level functions or ``functools.partial`` objects). The executor and the tracker are checked first, before
    any work."""

    options = ExecutorOptions.of(config)
    check_executor(options)
    check_tracker(config.report_to)
    out = Path(config.out)
    suite = resolve_suite(
        config.suite,
        cache=config.cache,
        faults=config.faults,
        limit=config.limit,
        fault_limit=config.fault_limit,
        fault_order=config.fault_order,
    )
    episodes = suite.episodes(with_faults=config.scripted)
    check_out_outside(out, {spec.task_dir for spec in episodes}, "--out")
    with OutLock(out):
        return _run_locked(config, out, options, suite, policy_factories)


def _run_locked(
    config: EvaluationConfig,
    out: Path,
    options: ExecutorOptions,
    suite: Suite,
    policy_factories: Mapping[str, Callable[[], Any]] | None,
) -> dict[str, Any]:
    """:func:`run_evaluation` while this process holds ``OUT``'s lock."""
    from harness.tasks import load_task

    if suite.faults and not config.scripted:
        logger.warning("suite %s has faults; they need the scripted worker, so it runs clean", suite.name)
    episodes = suite.episodes(with_faults=config.scripted)
    tasks = {spec.task_id: load_task(spec.task_dir) for spec in episodes}
    todo = []
    for name in config.variant_names:
        done = set() if config.overwrite else finished(read_variant(variant_file(out, name)))
        todo += [(name, s, k) for s in episodes for k in range(config.runs) if (s.key, k) not in done]
    names = list(dict.fromkeys(n for n, _, _ in todo))
    specs = dict(zip(config.variant_names, config.managers, strict=True))
    factories = dict(policy_factories or {})
    endpoints = [specs[n] for n in names if n not in factories]
    check_endpoints(spec_endpoints(endpoints, config.worker if todo else None))
    fingerprint = evaluation_fingerprint(config, episodes)
    if config.overwrite:
        clear_outputs(out, OUTPUTS)
    check_and_record(out, fingerprint, out / EPISODES_DIR)
    logger.info("suite %s: %d episodes x %d runs x %d variants; %d to run", suite.name, len(episodes), config.runs,
                len(config.managers), len(todo))  # fmt: skip
    if todo:
        setup = (config, tasks, names, factories)
        work = Work(_play_episode, setup=_open_episodes, args=setup, teardown=_close_episodes)
        threads = min(config.workers, len(todo))  # a thread sets up its own sandbox and policies: none idle
        with open_executor(options, threads=threads) as executor, closing(executor.imap(work, todo)) as records:
            bar = progress(records, total=len(todo), desc="evaluate", unit="episode")
            for (name, _, _), record in zip(todo, bar, strict=True):
                append_episode(variant_file(out, name), record)
    results = collect_results(config, suite, {t: TaskInfo.of(task) for t, task in tasks.items()})
    write_results(out, results, config)
    if config.report_to != "none":
        track_results(out, results, config)
    return results


def finished(records: list[EpisodeRecord]) -> set[tuple[str, int]]:
    """The episode ids ``(key, run)`` of ``records`` that played without error (errored ones are played again)."""
    return {episode_id(r) for r in records if r.error is None}


_EPISODES = SetupState()
"""The episode player of this process (this thread, with ``workers``): the config, the tasks, the policies and the
sandbox (:func:`_open_episodes`)."""


def _open_episodes(
    config: EvaluationConfig, tasks: Mapping[str, Any], names: list[str], factories: Mapping[str, Callable[[], Any]]
) -> None:
    """Per process: the policies of the variants ``names`` (made before the sandbox starts, so a bad spec fails
    first), then one sandbox whose fresh kernels play the episodes."""
    from harness.sandbox import Sandbox, SandboxConfig

    specs = dict(zip(config.variant_names, config.managers, strict=True))
    policies = {name: factories[name]() if name in factories else make_policy(specs[name], config) for name in names}
    state = _EPISODES.new()
    state.update(config=config, tasks=tasks, policies=policies)
    state["sandbox"] = Sandbox(SandboxConfig(isolation=config.isolation))


def _play_episode(item: tuple[str, EpisodeSpec, int]) -> EpisodeRecord:
    """The work unit: one episode ``(variant, spec, run)`` (:func:`run_episode`); an exception while playing or
    grading it becomes the episode's ``error`` (:func:`errored_record`) and the evaluation goes on."""
    name, spec, run = item
    state = _EPISODES.get()
    task = state["tasks"][spec.task_id]
    try:
        return run_episode(state["sandbox"], task, spec, run, state["config"], state["policies"][name], name)
    except Exception as exc:
        logger.warning("episode %s (run %d) of %s errored: %s: %s", spec.key, run, name, type(exc).__name__, exc)
        return errored_record(spec, run, state["config"], name, exc)


def _close_episodes() -> None:
    state = _EPISODES.drop()
    sandbox = state.pop("sandbox", None)
    state.clear()
    if sandbox is not None:
        sandbox.close()


def make_policy(spec: str, config: EvaluationConfig) -> Any:
    """The policy of one variant, made only when it has episodes to run (an in-process model loads once)."""
    from harness.manager import get_policy
    from harness.manager.check_writers import GOLD_NEEDS_SWITCH, needs_oracle_checks
    from harness.manager.llm_policy import LLMPolicy
    from harness.manager.model_settings import constrain_actions, limit_reply_tokens

    if needs_oracle_checks(parse_manager_spec(spec, check_paths=False)) and not config.oracle_checks:
        raise EvaluationError(f"--manager {spec}: {GOLD_NEEDS_SWITCH}")
    try:
        policy = get_policy(spec)
        if config.manager_max_tokens is not None and getattr(policy, "backend", None) is not None:
            limit_reply_tokens(policy, config.manager_max_tokens)  # model-backed variants only
        if config.constrained_decoding and parse_manager_spec(spec, check_paths=False).answers_in_actions:
            flat = isinstance(policy, LLMPolicy)
            constrain_actions(policy, legal_only=config.legal_actions_only and flat)
    except ValueError as exc:
        raise EvaluationError(f"--manager {spec}: {exc}") from exc
    return policy


def run_episode(
    sandbox: Any, task: Any, spec: EpisodeSpec, run: int, config: EvaluationConfig, policy: Any, variant: str
) -> EpisodeRecord:
    """One episode of ``spec`` with ``policy`` in a fresh kernel; its record carries ``config["eval"]``."""
    from harness.manager import ManagerRuntime, RuntimeConfig
    from harness.worker.spec import build_worker

    tokens_before = (getattr(policy, "prompt_tokens", 0), getattr(policy, "completion_tokens", 0))
    failures_before = backend_failures(policy)
    runtime_config = RuntimeConfig(**config.runtime_fields())
    with sandbox.new_kernel(public_dir=task.public_dir) as kernel:
        faults = {spec.fault.turn_id: spec.fault} if config.scripted and spec.fault is not None else {}
        worker = build_worker(config.worker, kernel, task, faults)
        record = ManagerRuntime(task, kernel, worker, policy, runtime_config).run()
    record.config["eval"] = {
        **eval_section(spec, run, config, variant),
        "manager_tokens": {
            "prompt": getattr(policy, "prompt_tokens", 0) - tokens_before[0],
            "completion": getattr(policy, "completion_tokens", 0) - tokens_before[1],
        },
        "constrained_decoding": decodes_under_grammar(policy),
    }
    record.error = policy_failure(record, backend_failures(policy) - failures_before)
    return record


def decodes_under_grammar(policy: Any) -> bool:
    """Whether ``policy``'s model (flat ``backend``, hier ``tier1``) decodes under a grammar right now."""
    from harness.manager.model_settings import model_backend

    return getattr(model_backend(policy), "grammar", None) is not None


def collect_results(config: EvaluationConfig, suite: Suite, tasks: dict[str, TaskInfo]) -> dict[str, Any]:
    """The results dict from the records in ``OUT`` (only the episodes of this suite and ``runs``)."""
    out = Path(config.out)
    wanted = {(s.key, k) for s in suite.episodes(with_faults=config.scripted) for k in range(config.runs)}
    records: dict[str, list[EpisodeRecord]] = {}
    errored: dict[str, int] = {}
    for name in config.variant_names:
        played = [r for r in read_variant(variant_file(out, name)) if episode_id(r) in wanted]
        ok: dict[tuple[str, int], EpisodeRecord] = {}
        for r in played:
            if r.error is None:
                ok.setdefault(episode_id(r), r)
        records[name] = list(ok.values())
        errored[name] = len({episode_id(r) for r in played if r.error is not None} - set(ok))
    variants = {
        name: {
            **summarize_variant(recs, tasks, seed=config.seed, n_resamples=config.n_resamples),
            "n_errored": errored[name],
            "manager_settings": next(
                (r.config["manager_settings"] for r in recs if "manager_settings" in r.config), None
            ),  # fmt: skip
        }
        for name, recs in records.items()
    }
    comparisons = []
    names = config.variant_names
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            compared = compare_variants(
                records[a], records[b], tasks, seed=config.seed, n_resamples=config.n_resamples
            )
            if compared is not None:
                comparisons.append({"a": a, "b": b, **compared})
    oracles = oracle_section(config, suite, records)
    if oracles["warning"]:
        logger.warning("%s", oracles["warning"])
    return {
        "suite": {"name": suite.name, "source": suite.source, "tasks": len(tasks), "faults": len(suite.faults)},
        "oracles": oracles,
        "config": {k: v for k, v in asdict(config).items() if k not in RUN_FIELDS},
        "versions": _versions(),
        "simulated": all(v["simulated"] for v in variants.values()),
        "errored": errored,
        "variants": variants,
        "comparisons": comparisons,
    }


def is_heldout(spec: str, suite: Suite) -> bool:
    """Whether ``suite`` stands for real benchmark conditions: a name starting with ``heldout``, a named suite that
    is imported (``dabench-dev``), or a folder no synthesis run wrote (no ``stats.json``: imported tasks)."""
    if suite.name.startswith("heldout"):
        return True
    try:
        ref = parse_suite_spec(spec)
    except ValueError:  # a folder gone since the suite was resolved: nothing says it is held out
        return False
    if ref.folder is None:
        return SUITES[str(ref.name)].import_from is not None
    return not (ref.folder / "stats.json").is_file()


def oracle_section(config: Any, suite: Suite, records: Mapping[str, list[EpisodeRecord]]) -> dict[str, Any]:
    """``results["oracles"]``: each switch (on when the config or any episode set it), the number of tasks that
    declare their constraint code public, whether the suite is held out, and a warning when a switch is on there."""
    episodes = [record for recs in records.values() for record in recs]
    runtime = getattr(config, "runtime", None) or {}
    switches = {
        name: bool(getattr(config, name, False) or runtime.get(name) or any(r.config.get(name) for r in episodes))
        for name in ORACLE_SWITCHES
    }
    public = {r.task_id for r in episodes if r.config.get("constraint_code_public")}
    heldout = is_heldout(config.suite, suite)
    warning = None
    if heldout and any(switches.values()):
        shown = " and ".join(what for name, what in ORACLE_SWITCHES.items() if switches[name])
        warning = (
            f"ORACLES ON A HELD-OUT SUITE: the manager saw {shown} on suite {suite.name}, which a real benchmark "
            "does not give; these are not held-out results."
        )
    return {**switches, "constraint_code_public_tasks": len(public), "heldout": heldout, "warning": warning}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {"stateguard": __version__, "python": platform.python_version()}
    for package in ("numpy", "pandas", "transformers", "torch", "vllm"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    return versions


def write_results(out: Path, results: dict[str, Any], config: EvaluationConfig) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    if config.report:
        from harness.evaluation.report import write_report

        write_report(out, results)
