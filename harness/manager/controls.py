"""What the manager's actions do to a :class:`~harness.manager.runtime.ManagerRuntime`: tools, control actions and
the kernel checkpoints.

The runtime's activation (:meth:`~harness.manager.runtime.ManagerRuntime.activation`) applies each legal action here:

- tools (:func:`run_tool`) run with :mod:`harness.manager.tools`; ``run_probe`` of a code that is one of the draft's
  stated constraints is checked as that constraint (:func:`~harness.manager.tools.check_constraint`); ``run_check``
  (:func:`~harness.manager.tools.run_check`) of a spec equal to one of the draft's constraint checks is that
  constraint's check (its result names the constraint);
- the control actions (:func:`apply_control`): OPEN_STATE opens a draft with the next free id and its constraints
  (text, optional code, optional check spec); UPDATE_STATE (whose constraints, when given, replace the draft's) binds
  ``used_variables`` to ``VariableRef(name, version, value)`` from ``kernel.variables()`` and sets the source
  interval: the whole turn in the turn flow, the given inclusive interval clipped to the pending steps in the segment
  flow; FINALIZE_RELATIONS confirms or revises the draft's relations; COMMIT_STATE assigns ``S1, S2, ...``,
  normalizes the relations (:func:`normalize_relations`) and takes a checkpoint; ABANDON_STATE, when the state had
  been repaired, rolls the kernel back to the last checkpoint (the start of the turn, or the last commit, whichever is
  later) and tells the worker with a note;
- REPAIR (:func:`repair`, a generator: the worker's re-analysis may ask its model through the episode): light, the
  hint goes to the worker's ``repair``, which runs within the worker's reserved repair budget; heavy (attempt >= 2),
  the harness first deletes the named variable.

Checkpoints (:func:`take_checkpoint`): at the kernel's ``max_checkpoints`` the oldest one that is not the rollback
target is released first (``op: "release"``); a sandbox that cannot take one is logged and the state is committed
with ``checkpoint_id: None``. :func:`release_checkpoints` frees those an abandoned episode still holds.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from harness.manager import tools
from harness.manager.actions import Action
from harness.manager.hints import render_repair_hint
from harness.manager.records import AnalyticalState, Constraint, Relation, VariableRef
from harness.sandbox import SandboxError
from harness.tasks import Turn
from harness.worker.base import repair_requests

if TYPE_CHECKING:
    from harness.manager.episode_loop import Steps
    from harness.manager.runtime_types import Runtime

logger = logging.getLogger(__name__)


def normalize_relations(relations: tuple[Relation, ...], committed: set[str], own_id: str) -> tuple[Relation, ...]:
    """Dedupe, keep only relations to committed states (never to ``own_id``); ``(init,)`` when none remain."""
    kept = [
        r
        for r in dict.fromkeys(relations)
        if r.type != "init" and r.related_state_id in committed and r.related_state_id != own_id
    ]
    return tuple(kept) or (Relation("init", None),)


# ---------------------------------------------------------------- tools


def run_tool(rt: Runtime, act: Action) -> tools.ToolResult:
    args = act.arguments
    timeout = rt.config.probe_timeout_s
    if act.name == "check_execution":
        step = rt.worker.steps[args["step_id"]] if 0 <= args["step_id"] < len(rt.worker.steps) else None
        claimed = step.code if step is not None else None
        return tools.check_execution(args["step_id"], claimed, rt.executor_log)
    if act.name == "run_probe":
        codes = {c.code for c in rt.draft.constraints} if rt.draft is not None else set()
        if args["code"] in codes:  # a stated constraint: checked as one (adds passed, reason, operand values)
            return tools.check_constraint(rt.kernel, args["code"], timeout_s=timeout)
        return tools.run_probe(rt.kernel, args["code"], timeout_s=timeout)
    if act.name == "run_check":
        spec = tools.spec_dict(args["spec"])
        stated = rt.draft.constraints if rt.draft is not None else ()
        text = next((c.text for c in stated if c.check is not None and c.check == spec), None)
        return tools.run_check(rt.kernel, args["spec"], timeout_s=timeout, constraint=text)
    if act.name == "load_state":
        return tools.load_state(args["state_id"], {k: s.to_dict() for k, s in rt.committed.items()})
    return TOOL_FUNCTIONS[act.name](args["code"])


# ---------------------------------------------------------------- control actions


def apply_control(rt: Runtime, act: Action, turn: Turn) -> str:
    """Carry out a legal control action other than REPAIR; its result text."""
    handler = CONTROL_HANDLERS.get(act.name)
    return handler(rt, act, turn) if handler else f"{act.name}: ok"


def _open(rt: Runtime, act: Action, turn: Turn) -> str:
    args = act.arguments
    rt.draft = AnalyticalState(
        id=rt.next_state_id(),
        issue=args["issue"],
        constraints=_constraints(args["constraints"]),
        relations=tuple(Relation(r["type"], r.get("related_state_id")) for r in args["relations"]),
    )
    rt.draft_repairs = 0
    return f"OPEN_STATE: opened {rt.draft.id} for turn {turn.turn_id}."


def _constraints(given: list[dict[str, Any]]) -> tuple[Constraint, ...]:
    """OPEN_STATE's / UPDATE_STATE's constraints (their specs already checked by the action's validation)."""
    return tuple(Constraint.of(c["text"], c.get("code"), c.get("check")) for c in given)


def _interval(rt: Runtime, act: Action) -> tuple[int, int]:
    """The draft's inclusive source interval: the whole turn (turn flow), or the manager's interval clipped to the
    pending steps (segment flow)."""
    first, last = rt.boundary, max(len(rt.worker.steps) - 1, rt.boundary)
    if rt.flow == "turn":
        return first, last
    given = act.arguments["source_interval"]
    start = min(max(given["start_step"], first), last)
    return start, min(max(given["end_step"], start), last)


def _update(rt: Runtime, act: Action, turn: Turn) -> str:
    assert rt.draft is not None  # the lifecycle allows UPDATE_STATE only with an open state
    args = act.arguments
    live = rt.kernel.variables()
    bound = [
        VariableRef(n, live[n].version, live[n].summary) for n in dict.fromkeys(args["used_variables"]) if n in live
    ]
    missing = [n for n in args["used_variables"] if n not in live]
    start, end = _interval(rt, act)
    rt.draft = AnalyticalState(
        id=rt.draft.id,
        issue=args["issue"],
        constraints=_constraints(args["constraints"]) if "constraints" in args else rt.draft.constraints,
        used_variables=tuple(bound),
        conclusions=tuple(args["conclusions"]),
        relations=rt.draft.relations,
        source_step_start=start,
        source_step_end=end,
    )
    note = f"; not in the sandbox (dropped): {missing}" if missing else ""
    return f"UPDATE_STATE: {rt.draft.id} bound to steps {start}-{end} and {len(bound)} variable(s){note}."


def _finalize(rt: Runtime, act: Action, turn: Turn) -> str:
    assert rt.draft is not None
    if act.arguments["mode"] == "revise":
        relations = tuple(Relation(r["type"], r.get("related_state_id")) for r in act.arguments["relations"])
        rt.draft = AnalyticalState(**{**vars(rt.draft), "relations": relations})
    return f"FINALIZE_RELATIONS: {act.arguments['mode']}."


def _commit(rt: Runtime, act: Action, turn: Turn) -> str:
    assert rt.draft is not None
    state_id = rt.next_state_id()
    checkpoint = take_checkpoint(rt, "take", state_id, turn.turn_id)
    relations = normalize_relations(rt.draft.relations, set(rt.committed), state_id)
    state = AnalyticalState(**{**vars(rt.draft), "id": state_id, "relations": relations, "checkpoint_id": checkpoint})
    rt.committed[state_id] = state
    rt.turn_states[turn.turn_id] = state_id
    if checkpoint is not None:
        rt.last_checkpoint = checkpoint
    rt.draft = None
    end = state.source_step_end
    rt.boundary = end + 1 if rt.flow == "segment" and end is not None else len(rt.worker.steps)
    rt.emit("commit", state.to_dict())
    return f"COMMIT_STATE: committed {state_id} (checkpoint {checkpoint})."


def _abandon(rt: Runtime, act: Action, turn: Turn) -> str:
    state_id = rt.draft.id if rt.draft is not None else None
    repaired = rt.draft_repairs > 0
    if repaired and rt.last_checkpoint is not None and not rt.config.restorable_checkpoints:
        raise RuntimeError(
            f"ABANDON_STATE of repaired state {state_id} (turn {turn.turn_id}) needs a rollback, but this runtime "
            "runs with restorable_checkpoints=False (no snapshots); use restorable_checkpoints=True for a policy "
            "that may abandon repaired states."
        )
    rt.draft, rt.draft_repairs = None, 0
    rt.boundary = len(rt.worker.steps)
    rolled_back = repaired and rt.last_checkpoint is not None
    if rolled_back:
        rt.kernel.restore(rt.last_checkpoint)
        rt.record.checkpoints.append(
            {"state_id": state_id, "turn_id": turn.turn_id, "checkpoint_id": rt.last_checkpoint, "op": "restore"}
        )
        rt.note(
            "Note from the supervisor: the session was rolled back to an earlier checkpoint; variables and "
            "results created since then no longer exist."
        )
    rt.emit("abandon", {"state_id": state_id, "turn_id": turn.turn_id})
    if rolled_back:
        return f"ABANDON_STATE: discarded {state_id}; rolled back to checkpoint {rt.last_checkpoint}."
    return f"ABANDON_STATE: discarded {state_id}."


def repair(rt: Runtime, act: Action, turn: Turn, mode: str | None) -> Steps:
    """Carry out a legal REPAIR (``mode``: light or heavy); returns its result text. Yields the worker's chat
    requests when its replies come from outside."""
    hint_args = act.arguments["error_hint"]
    variable = hint_args["error_variable"]
    hint = render_repair_hint(variable, hint_args["faulty_reasoning"], act.arguments["analytical_evidence"])
    removed: list[str] = []
    if mode == "heavy" and variable.isidentifier() and variable in rt.kernel.variables():
        rt.kernel.execute(f"del {variable}")
        removed.append(variable)
    rt.transcript.append(("worker", hint))
    rt.last_prompt = hint
    first_step = len(rt.worker.steps)
    rt.record_hint("repair", turn.turn_id, first_step, hint)
    steps = yield from repair_requests(rt.worker, turn.turn_id, hint)
    for step in steps:
        rt.log_step(step)
    rt.draft_repairs += 1
    entry = {
        "state_id": rt.draft.id if rt.draft else None,
        "turn_id": turn.turn_id,
        "attempt": rt.lifecycle.repair_attempts,
        "mode": mode,
        "variable": variable,
        "removed": removed,
        "steps": [s.step_id for s in steps],
        "worker_reaction": steps[-1].meta.get("repair") if steps else None,
    }
    rt.record.repairs.append(entry)
    rt.emit("repair", entry)
    ids = ", ".join(str(s.step_id) for s in steps) or "none"
    return f"REPAIR ({mode}, attempt {entry['attempt']}): hint delivered; the worker answered with step(s) {ids}."


# ---------------------------------------------------------------- checkpoints


def take_checkpoint(rt: Runtime, op: str, state_id: str | None, turn_id: str) -> str | None:
    """Take a kernel checkpoint and record it; at the kernel's limit the oldest one that is not the rollback target
    is released first. None (logged) when the sandbox cannot take one."""
    held = rt.kernel.checkpoints
    limit = rt.kernel.config.max_checkpoints
    if limit and len(held) >= limit:
        oldest = next((c for c in held if c != rt.last_checkpoint), None)
        if oldest is not None:
            rt.kernel.release(oldest)
            rt.record.checkpoints.append(
                {"state_id": None, "turn_id": turn_id, "checkpoint_id": oldest, "op": "release"}
            )
    try:
        checkpoint = rt.kernel.checkpoint(restorable=rt.config.restorable_checkpoints)
    except SandboxError as exc:
        logger.warning("no %s checkpoint for turn %s: %s", op, turn_id, exc)
        return None
    rt.record.checkpoints.append({"state_id": state_id, "turn_id": turn_id, "checkpoint_id": checkpoint, "op": op})
    return checkpoint


def release_checkpoints(rt: Runtime) -> None:
    """Free the kernel checkpoints the episode took that the kernel still holds (an abandoned episode; not recorded,
    its record is incomplete anyway). A closed kernel holds none."""
    kernel = rt.kernel
    if kernel is None or getattr(kernel, "closed", False):
        return
    taken = {c["checkpoint_id"] for c in rt.record.checkpoints}
    for checkpoint in kernel.checkpoints:
        if checkpoint in taken:
            kernel.release(checkpoint)


TOOL_FUNCTIONS = {"inspect_python": tools.inspect_python, "compile_python": tools.compile_python}
CONTROL_HANDLERS = {
    "OPEN_STATE": _open,
    "UPDATE_STATE": _update,
    "FINALIZE_RELATIONS": _finalize,
    "COMMIT_STATE": _commit,
    "ABANDON_STATE": _abandon,
}
"""Control action -> its handler (REPAIR is :func:`repair`; RESUME_WORKER and ABSTAIN change nothing)."""
