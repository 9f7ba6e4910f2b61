"""The manager runtime: plays a multi-turn task with a worker and a manager policy, and records the episode.

Only the **turn-aligned** flow (one state per turn, ../shared/DESIGN.md §3) is implemented here; the
segment-induced flow (long single tasks, review every N steps) is out of scope of this module.

Per turn:

1. *turn start* activation (``event_type="turn_start"``): the policy may OPEN_STATE with provisional relations.
   The harness then injects the state hint of the related *committed* states into the worker's turn prompt (recorded
   in ``hints``).
2. The worker runs the turn (its steps are logged as :class:`~harness.manager.tools.ExecutedStep` records).
3. *turn end* activations (``event_type="turn_end"``) until the state is committed or abandoned, at most
   ``max_turn_end_activations``: UPDATE_STATE (the harness binds ``used_variables`` names to ``VariableRef(name,
   version, value)`` from ``kernel.variables()`` and sets the source interval to the whole turn's steps), tool
   actions (executed with :mod:`harness.manager.tools`, their result returned as ``last_action_result``), REPAIR
   (light: the hint goes to ``worker.repair``; heavy, attempt >= 2: the harness first deletes the named variable with
   ``kernel.execute("del name")``), FINALIZE_RELATIONS, COMMIT_STATE (the harness assigns ``S1, S2, ...``,
   normalizes relations — dedupe, only committed states, no self-relations, ``init`` when none remain — and takes
   ``kernel.checkpoint()``), ABANDON_STATE (when the state had been repaired, the harness rolls the kernel back to
   the last commit's checkpoint).

Deterministic fallbacks: an unparseable or illegal response, or a REPAIR whose hint the harness refuses, is recorded
(``legal=False``), its error returned as ``last_action_result`` and counted against the activation's budget, never
raised. An activation whose budget is spent without a control action ends. When the turn-end activations run out
with the state still open, the harness **commits** it if its relations were finalized and **abandons** it otherwise
(nothing unreviewed enters the store); these harness actions are recorded as activations with ``actor="harness"``.

The ``none`` policy (``policy.active is False``) short-circuits: no activations, the worker just plays each turn.
Nothing from ``private/``, grader output or reference answers reaches the policy or the worker: the policy gets
:class:`~harness.manager.policies.PolicyInput` (observation, tool results, legal actions, the public turn) and the
worker gets the public turn text plus hints; the grade is computed after the episode.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from harness.manager import tools
from harness.manager.actions import ACTION_KIND, Action, make_action
from harness.manager.episode import EpisodeRecord, execution_summary, prompt_sha256
from harness.manager.hints import HintError, render_repair_hint, render_state_hint
from harness.manager.lifecycle import Lifecycle, Phase
from harness.manager.policies import Policy, PolicyInput
from harness.manager.records import (
    AnalyticalState,
    Constraint,
    ManagerObservation,
    Relation,
    StateSummary,
    VariableRef,
)
from harness.manager.wire import parse_response
from harness.sandbox import Kernel
from harness.tasks import Task, Turn, grade_task
from harness.worker.scripted import ScriptedWorker
from harness.worker.step import WorkerStep

logger = logging.getLogger(__name__)


@dataclass
class RuntimeConfig:
    max_actions: int = field(default=8, metadata={"help": "Actions (tool or control) per manager activation."})
    max_repairs: int = field(default=3, metadata={"help": "REPAIR attempts per state (1 light, then heavy)."})
    max_turn_end_activations: int = field(
        default=8, metadata={"help": "Turn-end activations before the harness commits or abandons the state."}
    )
    probe_timeout_s: float = field(default=5.0, metadata={"help": "Time limit of one run_probe / constraint check."})
    strict_wire: bool = field(default=True, metadata={"help": "Reject text outside the wire-format tags."})

    def __post_init__(self) -> None:
        if self.max_turn_end_activations < 1:
            raise ValueError(
                f"max_turn_end_activations={self.max_turn_end_activations}: the turn end needs at least one "
                "activation; use >= 1."
            )
        if not 0 < self.probe_timeout_s <= tools.MAX_PROBE_TIMEOUT_S:
            raise ValueError(
                f"probe_timeout_s={self.probe_timeout_s} is out of range; use a value in "
                f"(0, {tools.MAX_PROBE_TIMEOUT_S:g}] seconds."
            )


def worker_prompt(turn: Turn, hint: str) -> str:
    """The text the worker gets for a turn: the public context and question, then the state hint (if any)."""
    parts = [f"Context: {turn.context}" if turn.context else "", f"Question: {turn.question}", hint]
    return "\n\n".join(p for p in parts if p)


def normalize_relations(relations: tuple[Relation, ...], committed: set[str], own_id: str) -> tuple[Relation, ...]:
    """Dedupe, keep only relations to committed states (never to ``own_id``); ``(init,)`` when none remain."""
    kept = [
        r
        for r in dict.fromkeys(relations)
        if r.type != "init" and r.related_state_id in committed and r.related_state_id != own_id
    ]
    return tuple(kept) or (Relation("init", None),)


class ManagerRuntime:
    """Plays ``task`` with ``worker`` in ``kernel`` under ``policy``; :meth:`run` returns the :class:`EpisodeRecord`.

    ``transcript`` lists every text sent to the policy or the worker during the episode as ``(channel, text)``.
    """

    def __init__(
        self,
        task: Task,
        kernel: Kernel,
        worker: ScriptedWorker,
        policy: Policy,
        config: RuntimeConfig | None = None,
    ):
        if task.kind != "multi_turn":
            raise ValueError(
                f"task {task.id} is {task.kind}; the turn-aligned runtime plays multi_turn tasks only "
                "(the segment flow for single tasks is not built)."
            )
        self.task, self.kernel, self.worker, self.policy = task, kernel, worker, policy
        self.config = config or RuntimeConfig()
        self.lifecycle = Lifecycle(max_actions=self.config.max_actions, max_repairs=self.config.max_repairs)
        self.committed: dict[str, AnalyticalState] = {}
        self.turn_states: dict[str, str] = {}
        self.executor_log: dict[int, tools.ExecutedStep] = {}
        self.draft: AnalyticalState | None = None
        self.boundary = 0  # first worker step not yet covered by a committed or abandoned state
        self.last_checkpoint: str | None = None
        self.transcript: list[tuple[str, str]] = []
        self.record = EpisodeRecord(
            task_id=task.id,
            episode_id=uuid.uuid4().hex[:12],
            config={
                "manager": policy.name,
                "flow": "turn",
                "worker": type(worker).__name__,
                "faults": {t: f.fault_type for t, f in getattr(worker, "faults", {}).items()},
                **vars(self.config),
            },
            simulated=bool(getattr(worker, "simulated", False)),
        )

    # ---------------------------------------------------------------- episode
    def run(self) -> EpisodeRecord:
        t0 = time.perf_counter()
        for index, turn in enumerate(self.task.turns):
            last = index == len(self.task.turns) - 1
            self._play_turn(turn, last)
        self.record.transitions = [t.to_dict() for t in self.lifecycle.history]
        self.record.states = [s.to_dict() for s in self.committed.values()]
        self.record.final_answers = dict(self.worker.answers)
        self.record.grade = grade_task(self.task, dict(self.worker.answers)).to_dict()
        self.record.duration_s = time.perf_counter() - t0
        logger.info(
            "episode %s of %s (manager %s): %d states, %d repairs, score %s",
            self.record.episode_id,
            self.task.id,
            self.policy.name,
            len(self.committed),
            len(self.record.repairs),
            self.record.grade.get("score"),
        )
        return self.record

    def _play_turn(self, turn: Turn, last: bool) -> None:
        turn_start = len(self.worker.steps)
        self.boundary = turn_start
        hint = ""
        if self.policy.active:
            self._activation("turn_start", turn, last=False)
            if self.draft is not None:
                hint = self._state_hint(turn)
        prompt = worker_prompt(turn, hint)
        self.transcript.append(("worker", prompt))
        self._log_step(self.worker.run_turn(turn.turn_id, hint or None), prompt)
        if not self.policy.active:
            return
        for _ in range(self.config.max_turn_end_activations):
            self._activation("turn_end", turn, last=last)
            if self.lifecycle.phase is Phase.IDLE:
                return  # committed, abandoned, or no state was opened for this turn
        self._fallback(turn)

    def _fallback(self, turn: Turn) -> None:
        """Turn-end activations ran out: commit a finalized state, abandon any other open one."""
        if self.lifecycle.phase is Phase.IDLE:
            return
        action = "COMMIT_STATE" if self.lifecycle.phase is Phase.FINALIZED else "ABANDON_STATE"
        self.lifecycle.begin_activation()
        transition = self.lifecycle.apply(action)
        result = self._control(make_action(action), turn)
        self.record.activations.append(
            {
                "index": self.lifecycle.activation,
                "event_type": "turn_end",
                "turn_id": turn.turn_id,
                "actor": "harness",
                "observation": None,
                "actions": [{"raw": None, "parsed": {"name": action, "arguments": {}}, "kind": "control",
                             "legal": transition.legal, "result": result}],
                "latency_s": 0.0,
            }
        )  # fmt: skip

    # ---------------------------------------------------------------- one activation
    def _activation(self, event_type: str, turn: Turn, last: bool) -> None:
        self.lifecycle.begin_activation()
        t0 = time.perf_counter()
        entry: dict[str, Any] = {
            "index": self.lifecycle.activation,
            "event_type": event_type,
            "turn_id": turn.turn_id,
            "actor": "policy",
            "observation": self._observation(event_type, last, None).to_dict(),
            "actions": [],
        }
        results: list[str] = []
        previous: list[tuple[str, str]] = []
        last_result: str | None = None
        while self.lifecycle.activation_open:
            obs = self._observation(event_type, last, last_result)
            inp = PolicyInput(
                observation=obs.render(),
                tool_results=tuple(results),
                legal_actions=tuple(self.lifecycle.legal_actions()),
                turn=turn,
                turn_states=dict(self.turn_states),
                previous=tuple(previous),
            )
            self.transcript.append(("policy", inp.text()))
            try:
                raw = self.policy.respond(inp)
            except Exception as exc:  # a policy failure (e.g. an endpoint down) costs one action, never the episode
                logger.warning("policy %s failed: %s: %s", self.policy.name, type(exc).__name__, exc)
                raw, policy_error = "", f"the policy failed to respond ({type(exc).__name__}: {exc})"
            else:
                policy_error = None
            parsed = parse_response(raw, strict=self.config.strict_wire)
            action = {"raw": raw, "parsed": None, "kind": None, "legal": False, "result": None}
            if policy_error or not parsed.ok or parsed.action is None:
                self.lifecycle.apply("(unparseable response)")
                last_result = f"rejected: {policy_error or parsed.error}"
            else:
                act = parsed.action
                action.update(parsed=act.to_dict(), kind=ACTION_KIND[act.name])
                last_result, legal = self._act(act, turn)
                action["legal"] = legal
                if legal and action["kind"] == "tool":
                    results.append(last_result)
            action["result"] = last_result
            previous.append((raw, last_result))
            entry["actions"].append(action)
        entry["latency_s"] = time.perf_counter() - t0
        self.record.activations.append(entry)

    def _act(self, act: Action, turn: Turn) -> tuple[str, bool]:
        """Apply one parsed action; returns (result text, legal)."""
        if act.name == "REPAIR" and self.lifecycle.why_illegal("REPAIR") is None:
            hint = act.arguments["error_hint"]
            try:
                render_repair_hint(
                    hint["error_variable"], hint["faulty_reasoning"], act.arguments["analytical_evidence"]
                )
            except HintError as error:
                self.lifecycle.apply("(refused REPAIR)")
                return f"rejected: {error}", False
        transition = self.lifecycle.apply(act.name)
        if not transition.legal:
            return f"illegal: {transition.message}", False
        if ACTION_KIND[act.name] == "tool":
            return self._tool(act).render(), True
        return self._control(act, turn, transition.repair_mode), True

    # ---------------------------------------------------------------- tools
    def _tool(self, act: Action) -> tools.ToolResult:
        args = act.arguments
        timeout = self.config.probe_timeout_s
        if act.name == "check_execution":
            step = self.worker.steps[args["step_id"]] if 0 <= args["step_id"] < len(self.worker.steps) else None
            claimed = step.code if step is not None else None
            return tools.check_execution(args["step_id"], claimed, self.executor_log)
        if act.name == "run_probe":
            codes = {c.code for c in self.draft.constraints} if self.draft is not None else set()
            if args["code"] in codes:  # a stated constraint: checked as one (adds passed, reason, operand values)
                return tools.check_constraint(self.kernel, args["code"], timeout_s=timeout)
            return tools.run_probe(self.kernel, args["code"], timeout_s=timeout)
        if act.name == "load_state":
            return tools.load_state(args["state_id"], {k: s.to_dict() for k, s in self.committed.items()})
        return TOOL_FUNCTIONS[act.name](args["code"])

    # ---------------------------------------------------------------- control actions
    def _control(self, act: Action, turn: Turn, repair_mode: str | None = None) -> str:
        handler = CONTROL_HANDLERS.get(act.name)
        return handler(self, act, turn, repair_mode) if handler else f"{act.name}: ok"

    def _open(self, act: Action, turn: Turn, _mode: str | None) -> str:
        args = act.arguments
        self.draft = AnalyticalState(
            id=self._next_id(),
            issue=args["issue"],
            constraints=tuple(Constraint(c["text"], c.get("code")) for c in args["constraints"]),
            relations=tuple(Relation(r["type"], r.get("related_state_id")) for r in args["relations"]),
        )
        return f"OPEN_STATE: opened {self.draft.id} for turn {turn.turn_id}."

    def _update(self, act: Action, turn: Turn, _mode: str | None) -> str:
        assert self.draft is not None  # the lifecycle allows UPDATE_STATE only with an open state
        args = act.arguments
        live = self.kernel.variables()
        bound = [
            VariableRef(n, live[n].version, live[n].summary)
            for n in dict.fromkeys(args["used_variables"])
            if n in live
        ]
        missing = [n for n in args["used_variables"] if n not in live]
        start, end = self.boundary, max(len(self.worker.steps) - 1, self.boundary)
        self.draft = AnalyticalState(
            id=self.draft.id,
            issue=args["issue"],
            constraints=self.draft.constraints,
            used_variables=tuple(bound),
            conclusions=tuple(args["conclusions"]),
            relations=self.draft.relations,
            source_step_start=start,
            source_step_end=end,
        )
        note = f"; not in the sandbox (dropped): {missing}" if missing else ""
        return f"UPDATE_STATE: {self.draft.id} bound to steps {start}-{end} and {len(bound)} variable(s){note}."

    def _finalize(self, act: Action, turn: Turn, _mode: str | None) -> str:
        assert self.draft is not None
        if act.arguments["mode"] == "revise":
            relations = tuple(Relation(r["type"], r.get("related_state_id")) for r in act.arguments["relations"])
            self.draft = AnalyticalState(**{**vars(self.draft), "relations": relations})
        return f"FINALIZE_RELATIONS: {act.arguments['mode']}."

    def _commit(self, act: Action, turn: Turn, _mode: str | None) -> str:
        assert self.draft is not None
        state_id = self._next_id()
        checkpoint = self.kernel.checkpoint()
        relations = normalize_relations(self.draft.relations, set(self.committed), state_id)
        state = AnalyticalState(
            **{**vars(self.draft), "id": state_id, "relations": relations, "checkpoint_id": checkpoint}
        )
        self.committed[state_id] = state
        self.turn_states[turn.turn_id] = state_id
        self.last_checkpoint = checkpoint
        self.record.checkpoints.append({"state_id": state_id, "checkpoint_id": checkpoint, "op": "take"})
        self.draft = None
        self.boundary = len(self.worker.steps)
        return f"COMMIT_STATE: committed {state_id} (checkpoint {checkpoint})."

    def _abandon(self, act: Action, turn: Turn, _mode: str | None) -> str:
        repaired = any(r["turn_id"] == turn.turn_id for r in self.record.repairs)
        state_id = self.draft.id if self.draft is not None else None
        self.draft = None
        self.boundary = len(self.worker.steps)
        if repaired and self.last_checkpoint is not None:
            self.kernel.restore(self.last_checkpoint)
            self.record.checkpoints.append(
                {"state_id": state_id, "checkpoint_id": self.last_checkpoint, "op": "restore"}
            )
            return f"ABANDON_STATE: discarded {state_id}; rolled back to checkpoint {self.last_checkpoint}."
        return f"ABANDON_STATE: discarded {state_id}."

    def _repair(self, act: Action, turn: Turn, mode: str | None) -> str:
        hint_args = act.arguments["error_hint"]
        variable = hint_args["error_variable"]
        hint = render_repair_hint(variable, hint_args["faulty_reasoning"], act.arguments["analytical_evidence"])
        removed: list[str] = []
        if mode == "heavy" and variable.isidentifier() and variable in self.kernel.variables():
            self.kernel.execute(f"del {variable}")
            removed.append(variable)
        self.transcript.append(("worker", hint))
        step = self.worker.repair(turn.turn_id, hint)
        self._log_step(step, hint)
        attempt = self.lifecycle.repair_attempts
        self.record.hints.append({"kind": "repair", "turn_id": turn.turn_id, "step_id": step.step_id, "text": hint})
        self.record.repairs.append(
            {
                "state_id": self.draft.id if self.draft else None,
                "turn_id": turn.turn_id,
                "attempt": attempt,
                "mode": mode,
                "variable": variable,
                "removed": removed,
                "worker_reaction": step.meta.get("repair"),
            }
        )
        return f"REPAIR ({mode}, attempt {attempt}): hint delivered; the worker answered with step {step.step_id}."

    # ---------------------------------------------------------------- bookkeeping
    def _next_id(self) -> str:
        return f"S{len(self.committed) + 1}"

    def _state_hint(self, turn: Turn) -> str:
        assert self.draft is not None
        related = [r.related_state_id for r in self.draft.relations if r.related_state_id in self.committed]
        states = [
            {k: v for k, v in self.committed[s].to_dict().items() if k not in ("checkpoint_id",)}
            for s in dict.fromkeys(related)
        ]
        hint = render_state_hint(states)
        if hint:
            step_id = len(self.worker.steps)
            self.record.hints.append({"kind": "state", "turn_id": turn.turn_id, "step_id": step_id, "text": hint})
        return hint

    def _observation(self, event_type: str, last: bool, last_result: str | None) -> ManagerObservation:
        n_steps = len(self.worker.steps)
        pending = n_steps - self.boundary
        return ManagerObservation(
            event_type=event_type,
            available_state_id=self.draft.id if self.draft is not None else self._next_id(),
            untraced_steps=pending,
            pending_start_step=self.boundary if pending else None,
            pending_end_step=n_steps - 1 if pending else None,
            current_draft=self.draft,
            repair_attempts=self.lifecycle.repair_attempts,
            terminal_pending_review=last and event_type == "turn_end",
            last_action_result=last_result,
            committed_state_index=tuple(StateSummary.of(s) for s in self.committed.values()),
        )

    def _log_step(self, step: WorkerStep, prompt: str) -> None:
        if step.code is not None and step.result is not None:
            self.executor_log[step.step_id] = tools.ExecutedStep.from_result(step.step_id, step.code, step.result)
        self.record.worker_steps.append(
            {
                "step_id": step.step_id,
                "turn_id": step.turn_id,
                "prompt_sha256": prompt_sha256(prompt),
                "thought": step.thought,
                "code": step.code,
                "execution": execution_summary(step.result),
                "answer": step.answer,
                "prompt_tokens": step.prompt_tokens,
                "completion_tokens": step.completion_tokens,
                "duration_s": step.duration_s,
                "meta": step.meta,
            }
        )


TOOL_FUNCTIONS = {"inspect_python": tools.inspect_python, "compile_python": tools.compile_python}
CONTROL_HANDLERS = {
    "OPEN_STATE": ManagerRuntime._open,
    "UPDATE_STATE": ManagerRuntime._update,
    "FINALIZE_RELATIONS": ManagerRuntime._finalize,
    "COMMIT_STATE": ManagerRuntime._commit,
    "ABANDON_STATE": ManagerRuntime._abandon,
    "REPAIR": ManagerRuntime._repair,
}
