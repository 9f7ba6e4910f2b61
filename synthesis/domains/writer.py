"""Write a :class:`TaskSpec` as a multi-turn task folder, with answers computed by running its reference code.

:func:`write_task_folder` writes ``public/data/<table>.csv`` first, then runs every turn's code in order in one sandbox
kernel whose ``BASE_PATH`` is that ``public/`` folder (each turn's answer is the last ``print_result`` value; each
executable constraint must pass on the reference run), then writes ``config.yaml``, ``description.md``,
``private/reference.json`` and ``private/synthesis.json`` (domain, seed and each turn's ``writes``, ``slots``,
``checks``, relation and dependencies; private: never shown to the worker or the manager), and validates the folder
with :func:`harness.tasks.load_task`. The bytes are deterministic for the same spec: CSVs without index and with
``\\n`` line ends, JSON with sorted keys, YAML in field order.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from harness.sandbox import Kernel, Sandbox, SandboxConfig, SandboxUnavailableError
from harness.tasks import TaskConfig, Turn, TurnConstraint, load_task
from harness.tasks.importers.common import write_task
from synthesis.checks import task_checks
from synthesis.domains.base import SynthesisError, TaskSpec

logger = logging.getLogger(__name__)

SYNTHESIS_FILE = "synthesis.json"
"""Private file with each turn's ``writes``, ``slots`` (for the fault library and the gold policy) and ``checks``: the
gold's check specs of the turn (:func:`synthesis.checks.task_checks`, every kind), which evaluation scores a manager's
specs against and the oracle arm ``hier-checks:gold`` runs (:mod:`harness.checks.gold`)."""


def open_sandbox(isolation: str | None = None) -> Sandbox:
    """A sandbox for reference runs: ``isolation`` if given, else bwrap when it works here, else 'none'."""
    if isolation is not None:
        return Sandbox(SandboxConfig(isolation=isolation))
    if shutil.which("bwrap"):
        try:
            return Sandbox(SandboxConfig(isolation="bwrap"))
        except SandboxUnavailableError as exc:
            logger.warning("bwrap is installed but unusable (%s); running reference code with isolation none", exc)
    return Sandbox(SandboxConfig(isolation="none"))


def write_public(spec: TaskSpec, out_dir: Path) -> Path:
    """Write the spec's tables to ``out_dir/public/data/<name>.csv`` and return the public folder."""
    public = Path(out_dir) / "public"
    (public / "data").mkdir(parents=True, exist_ok=True)
    for name in sorted(spec.tables):
        spec.tables[name].to_csv(public / "data" / f"{name}.csv", index=False, lineterminator="\n")
    return public


def run_reference(spec: TaskSpec, kernel: Kernel, timeout_s: float = 30.0) -> tuple[list[dict[str, Any]], list[float]]:
    """Run every turn's code (and check its executable constraints) in ``kernel``; return the answers and the
    seconds each turn took. Raises SynthesisError naming the task, turn and error when something fails."""
    answers, seconds = [], []
    for turn in spec.turns:
        start = time.perf_counter()
        result = kernel.execute(turn.code, timeout=timeout_s)
        where = f"task {spec.task_id} turn {turn.turn_id} ({turn.relation})"
        if not result.ok:
            raise SynthesisError(
                f"{where}: reference code failed with {result.error_type}: {result.error_message}\n{turn.code}"
            )
        if not result.results or not isinstance(result.results[-1], dict):
            raise SynthesisError(f"{where}: the code printed no result dict (end it with print_result(result)).")
        seconds.append(time.perf_counter() - start)
        answers.append(result.results[-1])
        for text, code in turn.constraints:
            if code is None:
                continue
            check = kernel.execute(code, timeout=timeout_s)
            if not check.ok:
                raise SynthesisError(
                    f"{where}: the reference run violates its constraint {text!r} "
                    f"({check.error_type}: {check.error_message})."
                )
    return answers, seconds


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable: {value!r}")


def _write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=_json_default)
    path.write_text(text + "\n", encoding="utf-8")


def task_config(spec: TaskSpec) -> TaskConfig:
    """The ``config.yaml`` contents of the spec (public parts of the turns)."""
    turns = tuple(
        Turn(
            turn_id=t.turn_id,
            question=t.question,
            context=t.context,
            depends_on=t.depends_on,
            relation=t.relation,
            precision=t.precision,
            constraints=tuple(TurnConstraint(text=text, code=code) for text, code in t.constraints),
        )
        for t in spec.turns
    )
    metadata = {"source": "synthesis (StateGuard)", "license": "Apache-2.0", "domain": spec.domain, "seed": spec.seed}
    return TaskConfig(id=spec.task_id, kind="multi_turn", name=spec.title, turns=turns, metadata=metadata)


def write_task_folder(
    spec: TaskSpec,
    out_dir: str | Path,
    sandbox: Sandbox | Kernel | None = None,
    *,
    timeout_s: float = 30.0,
) -> Path:
    """Write ``spec`` as the task folder ``out_dir`` (created; files of an earlier write are replaced) and return it.

    ``sandbox``: a :class:`Sandbox` to open a fresh kernel from (reuse one across many tasks: kernels are cheap), a
    fresh :class:`Kernel` whose ``public_dir`` is already ``out_dir/public`` (call :func:`write_public` first), or
    None to start a temporary sandbox (bwrap when available, else isolation none). Raises SynthesisError when a turn's
    code fails or its answer is not a dict; the folder then stays incomplete.
    """
    out = Path(out_dir)
    start = time.perf_counter()
    public = write_public(spec, out)
    (out / "private").mkdir(parents=True, exist_ok=True)
    own_sandbox = open_sandbox() if sandbox is None else None
    try:
        if isinstance(sandbox, Kernel):
            if Path(sandbox.public_dir).resolve() != public.resolve():
                raise ValueError(
                    f"kernel public_dir {sandbox.public_dir} is not {public}; open the kernel on the task's public "
                    "folder (write_public(spec, out_dir) first) or pass the Sandbox instead"
                )
            answers, seconds = run_reference(spec, sandbox, timeout_s)
        else:
            with (own_sandbox or sandbox).new_kernel(public) as kernel:
                answers, seconds = run_reference(spec, kernel, timeout_s)
    finally:
        if own_sandbox is not None:
            own_sandbox.close()
    reference = {t.turn_id: {"code": t.code, "answer": a} for t, a in zip(spec.turns, answers, strict=True)}
    checks = task_checks(spec)
    synthesis = {
        "task_id": spec.task_id,
        "domain": spec.domain,
        "seed": spec.seed,
        "turns": {
            t.turn_id: {
                "relation": t.relation,
                "depends_on": list(t.depends_on),
                "writes": list(t.writes),
                "slots": dict(t.slots),
                "checks": [check.spec.to_dict() for check in checks[t.turn_id]],
            }
            for t in spec.turns
        },
    }
    config = task_config(spec)
    _write_json(out / config.private_dir / "reference.json", reference)
    _write_json(out / config.private_dir / SYNTHESIS_FILE, synthesis)
    write_task(out, config, spec.description)  # writes config.yaml and description.md, then load_task validates
    logger.info(
        "wrote %s: %d turns in %.2f s (code %.3f s, slowest turn %.3f s)",
        out,
        len(spec.turns),
        time.perf_counter() - start,
        sum(seconds),
        max(seconds),
    )
    return out


def rerun_task_folder(folder: str | Path, sandbox: Sandbox) -> dict[str, tuple[dict[str, Any], Any]]:
    """Re-run a written folder's reference code in a fresh kernel: turn id -> (stored answer, re-computed answer).

    Reads only what is on disk (through :func:`harness.tasks.load_task`), so it checks the folder, not the spec.
    A turn whose code fails re-computes to None.
    """
    task = load_task(folder)
    references = task.load_answers()
    if not isinstance(references, dict):
        raise ValueError(f"{folder}: not a multi_turn task folder (kind {task.kind}); pass a synthesised task.")
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    with sandbox.new_kernel(task.public_dir) as kernel:
        for turn in task.turns:
            result = kernel.execute(references[turn.turn_id].code)
            out[turn.turn_id] = (references[turn.turn_id].answer, result.results[-1] if result.ok else None)
    return out
