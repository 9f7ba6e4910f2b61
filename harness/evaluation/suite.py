"""Evaluation suites: which tasks, and which faults, an evaluation runs (``stateguard evaluate --suite DIR|NAME``).

A :class:`Suite` is a list of task folders plus the counterfactual faults to replay on them (the shared
``faults.jsonl`` format of :mod:`harness.worker.faults`). It expands into :class:`EpisodeSpec` s: one clean episode per
task and one faulted episode per fault line (a fault replaces the code of one turn; several lines may fault the same
turn, each is its own episode). Every manager variant runs on exactly these episodes, which is what makes the
comparison paired.

``--suite`` accepts:

- a **folder**: a synthesis output (``tasks/`` + ``faults.jsonl``), a folder of task folders, or one task folder
  (any LongDS-, DABstep-, MLE-bench- or DABench-style folder written by ``stateguard tasks import``); its
  ``faults.jsonl``, when present, is replayed;
- a **name** (:data:`~harness.evaluation.suite_names.SUITES`):

  - ``heldout-seeds``: synthesized tasks in every training domain with seeds far from the training seeds
    (training configs use seeds 0..N-1), ``heldout-domain``: synthesized tasks of logistics only, a domain no
    training config uses, ``smoke``: one small synthesized task with its faults (tests and the checkpoint evaluation
    during training), ``heldout-demo``: the finance task of ``heldout-seeds`` with seed 1000 (8 turns) and the same
    faults, for ``make demo`` (with ``fault_limit: 2, fault_order: dependents`` it plays the clean episode and the two
    faults of turn 2, which five later turns build on: a wrong column and an execution error). Each is the folder
    ``CACHE/NAME`` that ``stateguard synthesize --config configs/synthesis/<its config> --out CACHE/NAME`` writes
    (the pipeline writes the one it evaluates); evaluation only reads it, and a missing one fails with one line
    naming the folder and that command;
  - ``dabench-dev``: InfiAgent-DABench dev imported from :data:`~harness.evaluation.suite_names.DABENCH_DEV` into
    ``CACHE/dabench-dev`` (skipped with a message naming the folder when it is absent). It has no reference programs:
    use a model worker.

``--faults F`` replaces the suite's own faults with the lines of ``F`` (faults written elsewhere, e.g. by another
fault library). Faults need the scripted worker; with a model worker the suite runs clean.

**Which faults** ``fault_limit`` keeps is set by ``fault_order`` (:data:`FAULT_ORDERS`); the kept faults are played
in file order whatever the order that chose them:

- ``file`` (default): the first N faults of the kept tasks, in the order of the faults file;
- ``dependents``: the N faults whose turn has the most *scored dependents*, ties in file order. A turn's dependents
  are the later turns whose ``depends_on`` reaches it, directly or through other turns; a dependent is scored when
  the task holds a reference answer for it (the turns the structured grader scores). A fault on such a turn can
  spread to turns that are graded, which is what the dependency-conditioned DCR needs; a fault on a turn nothing
  depends on leaves the DCR without a contaminated turn. Single-question tasks have no dependents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.evaluation.suite_names import DEFAULT_CACHE, ROOT, SUITES, SuiteSpec
from harness.registry import lookup
from harness.specs import parse_suite_spec
from harness.tasks import find_task_dirs
from harness.worker.faults import Fault, read_faults

logger = logging.getLogger(__name__)

IMPORTED_MARKER = ".imported"  # written after a complete import: a killed import is redone


class SuiteError(ValueError):
    """A suite that cannot be resolved; the message names the suite, the folder and the fix."""


class SuiteUnavailableError(SuiteError):
    """A named suite whose tasks are not on this machine: DABench dev absent from
    :data:`~harness.evaluation.suite_names.DABENCH_DEV`, or a synthesized suite not written yet (the message names the
    ``stateguard synthesize`` command that writes it)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode of a suite: a task, run clean (``fault`` None) or with one fault."""

    task_dir: Path
    task_id: str
    fault: Fault | None = None
    fault_index: int | None = field(
        default=None, metadata={"help": "1-based position of the fault in the suite's (kept) faults."}
    )

    @property
    def key(self) -> str:
        """Stable id of the episode within the suite (the same in every variant): ``task/clean`` or
        ``task/fault-N-turn-type``."""
        if self.fault is None:
            return f"{self.task_id}/clean"
        return f"{self.task_id}/fault-{self.fault_index}-{self.fault.turn_id}-{self.fault.fault_type}"


@dataclass
class Suite:
    """Task folders and the faults to replay on them; ``source`` says where they came from (for the report)."""

    name: str
    task_dirs: list[Path]
    faults: list[Fault] = field(default_factory=list)
    source: str = ""

    def episodes(self, *, with_faults: bool = True) -> list[EpisodeSpec]:
        """The clean episode of every task, then (``with_faults``) one episode per fault, in file order."""
        from harness.tasks import load_task

        ids = {load_task(task_dir).id: task_dir for task_dir in self.task_dirs}
        specs = [EpisodeSpec(task_dir, task_id) for task_id, task_dir in ids.items()]
        if with_faults:
            unknown = sorted({f.task_id for f in self.faults} - set(ids))
            if unknown:
                logger.warning("suite %s: faults for tasks not in the suite are skipped: %s", self.name, unknown)
            for index, fault in enumerate(self.faults, start=1):
                if fault.task_id in ids:
                    specs.append(EpisodeSpec(ids[fault.task_id], fault.task_id, fault, index))
        return specs


# ---------------------------------------------------------------- which faults fault_limit keeps
def scored_dependents(depends_on: Mapping[str, Sequence[str]], scored: Collection[str]) -> dict[str, frozenset[str]]:
    """Turn id -> its scored dependents: the turns in ``scored`` whose ``depends_on`` reaches it, transitively.

    ``depends_on`` maps every turn to the turns it declares it builds on (a turn id it names that is not a key is
    ignored); a turn is never its own dependent."""
    direct: dict[str, set[str]] = {t: set() for t in depends_on}
    for turn, upstream in depends_on.items():
        for up in upstream:
            if up in direct and up != turn:
                direct[up].add(turn)
    result: dict[str, frozenset[str]] = {}
    for turn in depends_on:
        seen: set[str] = set()
        stack = list(direct[turn])
        while stack:
            down = stack.pop()
            if down not in seen and down != turn:
                seen.add(down)
                stack.extend(direct[down])
        result[turn] = frozenset(seen & set(scored))
    return result


def task_dependents(task_dir: Path) -> dict[str, frozenset[str]]:
    """:func:`scored_dependents` of the task in ``task_dir``: its turns' ``depends_on`` and, as the scored turns,
    those with a private reference answer. Empty for a single-question task."""
    from harness.tasks import load_task

    task = load_task(task_dir)
    if task.kind != "multi_turn":
        return {}
    answers = task.load_answers()
    return scored_dependents({t.turn_id: t.depends_on for t in task.turns}, set(answers))  # type: ignore[arg-type]


Dependents = Mapping[str, Mapping[str, frozenset[str]]]
"""``{task_id: {turn_id: scored dependents}}`` (:func:`task_dependents` of each task)."""

FAULT_ORDERS: dict[str, Callable[[Fault, Dependents], int]] = {
    "file": lambda fault, dependents: 0,
    "dependents": lambda fault, dependents: -len(dependents.get(fault.task_id, {}).get(fault.turn_id, ())),
}
"""How ``fault_limit`` ranks faults (see the module docstring): name -> rank of a fault (lower first; ties in file
order)."""


def select_faults(
    faults: Sequence[Fault], limit: int | None, order: str = "file", dependents: Dependents | None = None
) -> list[Fault]:
    """The ``limit`` best-ranked faults by ``order`` (:data:`FAULT_ORDERS`; every fault when ``limit`` is None),
    returned in file order. ``dependents`` is what ``dependents`` ranks by; a task or turn missing from it has
    none."""
    rank = lookup(FAULT_ORDERS, order, what="fault order")
    if limit is None:
        return list(faults)
    ranked = sorted(range(len(faults)), key=lambda i: (rank(faults[i], dependents or {}), i))
    return [faults[i] for i in sorted(ranked[:limit])]


def resolve_suite(
    spec: str,
    *,
    cache: str | Path = DEFAULT_CACHE,
    faults: str | Path | None = None,
    limit: int | None = None,
    fault_limit: int | None = None,
    fault_order: str = "file",
) -> Suite:
    """The suite named or located by ``spec`` (see the module docstring); ``limit`` keeps the first N tasks,
    ``fault_limit`` N faults of the tasks kept, ranked by ``fault_order`` (:data:`FAULT_ORDERS`) and played in file
    order (every task still has its clean episode)."""
    lookup(FAULT_ORDERS, fault_order, what="fault order")  # a bad name fails before a suite is built
    try:
        ref = parse_suite_spec(spec)
    except ValueError as exc:
        raise SuiteError(str(exc)) from None
    if ref.folder is not None:
        suite = _folder_suite(ref.folder, name=ref.folder.name)
    else:
        suite = _build_named(ref.spec, SUITES[ref.spec], Path(cache))
    if faults is not None:
        suite.faults = read_faults(faults)
        suite.source += f"; faults from {faults}"
    if limit is not None:
        if limit < 1:
            raise SuiteError(f"--limit {limit}: keep at least one task.")
        suite.task_dirs = suite.task_dirs[:limit]
    if fault_limit is not None:
        if fault_limit < 0:
            raise SuiteError(f"--fault_limit {fault_limit}: use 0 (clean episodes only) or more.")
        from harness.tasks import load_task

        kept = {load_task(task_dir).id: task_dir for task_dir in suite.task_dirs}
        candidates = [f for f in suite.faults if f.task_id in kept]
        dependents: dict[str, dict[str, frozenset[str]]] = {}
        if fault_order != "file":  # the file order needs no task graph
            dependents = {t: task_dependents(kept[t]) for t in dict.fromkeys(f.task_id for f in candidates)}
        suite.faults = select_faults(candidates, fault_limit, fault_order, dependents)
    return suite


def _folder_suite(path: Path, name: str) -> Suite:
    tasks_root = path / "tasks" if (path / "tasks").is_dir() else path
    task_dirs = find_task_dirs(tasks_root)
    if not task_dirs:
        raise SuiteError(
            f"suite folder {path} holds no task folder (no config.yaml below it). Fix: pass a synthesis output, a "
            "folder of task folders (stateguard tasks import ...) or a suite name: " + ", ".join(SUITES) + "."
        )
    faults_path = path / "faults.jsonl"
    faults = read_faults(faults_path) if faults_path.is_file() else []
    return Suite(name, task_dirs, faults, source=f"folder {path}")


def missing_synthesized_suite(spec: str, cache: str | Path = DEFAULT_CACHE) -> tuple[Path, Path] | None:
    """``(synthesis config, folder)`` when ``spec`` names a synthesized suite whose folder under ``cache`` is not
    written yet (no ``stats.json``, which a finished synthesis run writes last); None otherwise. What the pipeline
    synthesizes before it evaluates."""
    suite = SUITES.get(str(spec))
    if suite is None or suite.synthesis_config is None or Path(str(spec)).is_dir():
        return None
    out = Path(cache) / str(spec)
    return None if (out / "stats.json").is_file() else (ROOT / suite.synthesis_config, out)


def _build_named(name: str, spec: SuiteSpec, cache: Path) -> Suite:
    out = cache / name
    if spec.synthesis_config is not None:
        if not (out / "stats.json").is_file():  # written last by a finished synthesis run
            raise SuiteUnavailableError(
                f"suite {name}: its task folder {out} is not written yet; write it with: "
                f"{spec.synthesize_command(out)}"
            )
        suite = _folder_suite(out, name)
    else:
        if spec.import_from is None or not spec.import_from.is_dir():
            raise SuiteUnavailableError(
                f"suite {name}: {spec.import_from} does not exist, so the suite is skipped. Fix: place the "
                "benchmark there (see its NOTICE.md) or pass an imported folder with --suite DIR."
            )
        if not (out / IMPORTED_MARKER).is_file():
            from harness.tasks.importers import ImportOptions, run_import

            report = run_import(spec.importer, ImportOptions(src=spec.import_from, out=out, overwrite=True))
            logger.info("%s", report.summary())
            (out / IMPORTED_MARKER).write_text(report.summary() + "\n", encoding="utf-8")
        suite = _folder_suite(out, name)
    suite.source = f"{name}: {spec.description} (cached in {out})"
    return suite
