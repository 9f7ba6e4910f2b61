"""The manager runtime: plays a task with a worker and a manager policy, and records the episode.

The episode is a state machine the caller advances (:mod:`harness.manager.episode_loop`)::

    episode = runtime.start()
    while (request := episode.next_request()) is not None:   # a PolicyInput (or a worker's chat messages)
        episode.answer(respond(request))                     # episode.fail(exc) when respond raised
    record = episode.record                                  # episode.close() abandons it early

:meth:`ManagerRuntime.run` is that loop with ``policy.respond`` (:meth:`ManagerRuntime.drive`); the environments
in ``envs`` step it with the agent's actions. Underneath, :meth:`ManagerRuntime.play` is a generator: the flows, the
activation and REPAIR ``yield`` each request up to the caller and receive its answer. Only an active, reviewing
policy is asked anything; a worker without a chat backend of its own (a ReAct worker with ``backend=None``) asks
for its model's replies the same way.

The flows (when the manager is activated, and how the worker is driven) are in :mod:`harness.manager.flows`:
*turn-aligned* for multi_turn tasks (one state per turn) and *segment-induced* for single tasks (closed_form,
artifact: pauses every ``segment_steps`` worker steps and at the end). ``RuntimeConfig.flow`` picks one (default:
by the task's kind); asking for the other one is a ``ValueError`` naming the kind and the fix.

This module holds what both flows share:

- one *activation* (:meth:`ManagerRuntime.activation`): the policy answers :class:`PolicyInput` until it takes a
  control action or the activation's budget is spent. Tool actions run with :mod:`harness.manager.tools` and return
  their result as ``last_action_result``. An unparseable or illegal response, a REPAIR whose hint the harness refuses,
  or a policy that raises is recorded (``legal=False``), its error returned as ``last_action_result`` and counted
  against the budget, never raised. A reply longer than ``RuntimeConfig.max_reply_chars`` is cut to it first (the
  action records ``raw_cut`` and ``raw_chars``, its full length). What each action does (UPDATE_STATE's variable
  binding and source interval, REPAIR light and heavy, COMMIT_STATE's ids and relation normalization, ABANDON_STATE's
  rollback) is in :mod:`harness.manager.controls`.
- the *fallback* when review activations run out: commit a finalized state, abandon any other open one (recorded as
  activations with ``actor="harness"``).
- checkpoints: one at each turn start (``op: "turn_start"``; the previous turn-start checkpoint is released, ``op:
  "release"``) and one at each commit (``op: "take"``) — only for a reviewing policy: ``none`` and ``windowed`` never
  roll back, so their episodes take none.
- state hints: the committed states the draft's own relations (the manager's, as it opened or revised them) point
  to; a state invalidated by a later one carries ``invalidated_by``.
- the manager's *view* (:class:`~harness.manager.policy_types.ManagerView`, in every :class:`PolicyInput`): by default
  the turn's id, question, context and constraint texts and which committed state covers each earlier turn; the task's
  dependency graph only with ``RuntimeConfig.oracle_relations``, constraint code only with
  ``RuntimeConfig.executable_constraints`` or when the task's metadata sets ``constraint_code_public: true``; the
  gold's check specs only with ``RuntimeConfig.oracle_checks`` (read by the oracle arm ``hier-checks:gold`` alone).
  The episode record's ``config`` holds the switches, ``constraint_code_public``, the effective ``manager_view`` and,
  for a model policy, the settings it is served with (``manager_settings``:
  :func:`~harness.manager.checkpoint_settings.used_settings`).
- live-view events: ``on_event(name, payload)`` with the names of :data:`EVENTS`; an exception raised by the callback
  is logged and never breaks the episode.

The ``none`` policy (``policy.active is False``) gets no activations (plain worker). A *windowed* policy
(``policy.style == "windowed"``) gets no activations either: it gives stateless hints (see :mod:`.flows`).
Nothing from ``private/``, grader output or reference answers reaches the policy or the worker: the policy gets
:class:`~harness.manager.policy_types.PolicyInput` (observation, tool results, legal actions, the public turn and its
view) and the worker gets the public turn text plus hints; the grade is computed after the episode.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from harness.evaluation.result import GradeResult
from harness.llm import cut_reply
from harness.manager import controls, tools
from harness.manager.actions import ACTION_KIND, Action, make_action
from harness.manager.checkpoint_settings import used_settings
from harness.manager.controls import normalize_relations
from harness.manager.episode import EpisodeRecord, execution_summary, prompt_sha256
from harness.manager.episode_loop import Episode, EpisodeStateError, Reply, Steps
from harness.manager.flows import FLOWS, closed_form_text, resolve_flow, worker_prompt
from harness.manager.hints import HintError, render_repair_hint, render_state_hint
from harness.manager.lifecycle import CONTROL_ACTIONS, Lifecycle, Phase
from harness.manager.policy_types import CODE_PUBLIC_KEY, ManagerView, Policy, PolicyInput, constraint_code_public
from harness.manager.records import AnalyticalState, ManagerObservation, StateSummary
from harness.manager.runtime_types import RuntimeConfig
from harness.manager.wire import parse_response
from harness.sandbox import Kernel, files
from harness.tasks import Task, Turn, grade_task
from harness.worker.base import SINGLE_TURN_ID, Worker, step_requests
from harness.worker.step import WorkerStep

__all__ = [
    "EVENTS",
    "Episode",
    "EpisodeStateError",
    "ManagerRuntime",
    "Reply",
    "RuntimeConfig",
    "closed_form_text",
    "normalize_relations",
    "resolve_flow",
    "worker_prompt",
]

logger = logging.getLogger(__name__)

POLICY_FAILED = "the policy failed to respond"
"""How a rejected action whose policy raised starts its result (after ``rejected: ``); evaluation reads it."""


EVENTS: dict[str, str] = {
    "turn_start": "a turn (segment flow: the task) starts; payload {turn_id, question}",
    "worker_step": "a worker step was recorded; payload: its worker_steps entry",
    "activation": "a manager activation ended; payload: its activations entry",
    "hint": "a hint was delivered to the worker; payload: its hints entry",
    "repair": "a repair was carried out; payload: its repairs entry",
    "commit": "a state was committed; payload: the state dict",
    "abandon": "a state was abandoned; payload {state_id, turn_id}",
    "episode_end": "the episode was graded; payload {grade}",
}
"""The live-view event names passed to ``on_event(name, payload)`` and what each payload holds."""


class ManagerRuntime:
    """Plays ``task`` with ``worker`` in ``kernel`` under ``policy``; :meth:`run` returns the :class:`EpisodeRecord`.

    ``transcript`` lists every text sent to the policy or the worker during the episode as ``(channel, text)``.
    ``on_event`` (settable after construction too) receives the live-view events of :data:`EVENTS`.
    """

    def __init__(
        self,
        task: Task,
        kernel: Kernel,
        worker: Worker,
        policy: Policy,
        config: RuntimeConfig | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ):
        self.config = config or RuntimeConfig()
        self.flow = resolve_flow(task, self.config.flow)
        self.task, self.kernel, self.worker, self.policy = task, kernel, worker, policy
        self.on_event = on_event
        self._held: list[tuple[str, dict[str, Any]]] | None = None  # events held during an activation
        self.windowed = getattr(policy, "style", "stateful") == "windowed"
        self.reviews = bool(policy.active) and not self.windowed
        self.lifecycle = Lifecycle(max_actions=self.config.max_actions, max_repairs=self.config.max_repairs)
        self.view = ManagerView.of(
            task, self.config.oracle_relations, self.config.executable_constraints, self.config.oracle_checks
        )
        self.committed: dict[str, AnalyticalState] = {}
        self._index_cache: tuple[tuple[AnalyticalState, ...], tuple[StateSummary, ...]] = ((), ())
        self.turn_states: dict[str, str] = {}
        self.executor_log: dict[int, tools.ExecutedStep] = {}
        self.draft: AnalyticalState | None = None
        self.draft_repairs = 0
        self.boundary = 0  # first worker step not yet covered by a committed or abandoned state
        self.last_checkpoint: str | None = None  # the rollback target: the later of turn start and last commit
        self.turn_checkpoint: str | None = None
        self.current_turn: str | None = None
        self.last_prompt = ""
        self.transcript: list[tuple[str, str]] = []
        self._started = False
        self.record = EpisodeRecord(
            task_id=task.id,
            episode_id=uuid.uuid4().hex[:12],
            config={
                "manager": policy.name,
                "manager_style": getattr(policy, "style", "stateful"),
                "flow": self.flow,
                "worker": type(worker).__name__,
                "worker_repair_steps": getattr(worker, "repair_steps", None),
                "faults": {t: f.fault_type for t, f in getattr(worker, "faults", {}).items()},
                **{k: v for k, v in vars(self.config).items() if k != "flow"},
                CODE_PUBLIC_KEY: constraint_code_public(task),
                "manager_view": self.view.recorded(),
                **_settings_entry(policy),
            },
            simulated=bool(getattr(worker, "simulated", False)),
        )

    # ---------------------------------------------------------------- episode
    def start(self) -> Episode:
        """The episode as an :class:`Episode` the caller advances (``next_request`` / ``answer``); :meth:`close
        <Episode.close>` before the end releases the kernel checkpoints it took. A runtime plays one episode."""
        if self._started:
            raise RuntimeError(f"this ManagerRuntime already played task {self.task.id}; build a new one per episode.")
        self._started = True
        return Episode(self.play(), on_close=lambda: controls.release_checkpoints(self))

    def run(self) -> EpisodeRecord:
        """Play the episode, answering every request with the policy; the record."""
        return self.drive(self.start())

    def drive(self, episode: Episode | Steps) -> Any:
        """Answer ``episode``'s requests with the policy until it ends; its result. A policy that raises is handed
        to the episode (:meth:`Episode.fail`), which records the failure as a refused action and goes on."""
        if not isinstance(episode, Episode):
            episode = Episode(episode)
        while (request := episode.next_request()) is not None:
            if not isinstance(request, PolicyInput):
                episode.close()
                raise TypeError(
                    f"the episode of task {self.task.id} asks for a chat reply (its worker has no backend of its "
                    "own); answer its requests yourself: episode = runtime.start(), next_request() / answer()."
                )
            try:
                response = self.policy.respond(request)
            except Exception as exc:  # a policy failure is the episode's to record
                episode.fail(exc)
            else:
                actor = getattr(self.policy, "last_actor", None)  # a hierarchical policy says which tier wrote it
                episode.answer(response if actor is None else Reply(response, actor))
        return episode.result

    def play(self) -> Steps:
        """The episode as a generator of requests (:mod:`harness.manager.episode_loop`); returns the record."""
        t0 = time.perf_counter()
        yield from FLOWS[self.flow](self)
        self.record.transitions = [t.to_dict() for t in self.lifecycle.history]
        self.record.states = [s.to_dict() for s in self.committed.values()]
        self.record.final_answers = dict(self.worker.answers)
        self.record.grade = self.grade_submission()
        self.record.duration_s = time.perf_counter() - t0
        self.emit("episode_end", {"grade": self.record.grade})
        logger.info(
            "episode %s of %s (manager %s, %s flow): %d states, %d repairs, score %s",
            self.record.episode_id,
            self.task.id,
            self.policy.name,
            self.flow,
            len(self.committed),
            len(self.record.repairs),
            self.record.grade.get("score"),
        )
        return self.record

    def submission(self) -> Any:
        """What the worker submitted: the turn answers (multi_turn), the answer text (closed_form), or the name of
        the submission file in the kernel's workspace (artifact; read it only through ``harness.sandbox.files``)."""
        if self.task.kind == "multi_turn":
            return dict(self.worker.answers)
        if self.task.kind == "closed_form":
            return closed_form_text(self.worker.answers.get(SINGLE_TURN_ID))
        return self.task.submission.filename if self.task.submission else "submission.csv"

    def grade_submission(self) -> dict[str, Any]:
        """The task's grade of :meth:`submission`. An artifact is graded from a host-owned copy of the workspace
        file; a link, FIFO, device, hard link or oversized file there is an invalid submission naming the reason."""
        if self.task.kind != "artifact":
            return grade_task(self.task, self.submission()).to_dict()
        try:
            with files.snapshot(self.kernel.workspace, self.submission()) as path:
                return grade_task(self.task, str(path)).to_dict()
        except files.WorkspaceFileError as exc:
            return GradeResult(task_id=self.task.id, valid=False, score=None, details={"error": str(exc)}).to_dict()

    def emit(self, name: str, payload: dict[str, Any]) -> None:
        """Call ``on_event``; its exceptions are logged, never raised.

        Events caused by an action inside an activation (a repair's worker step, a hint, a commit) are held back
        until the activation's own event has been emitted, so a viewer sees the decision before its effects.
        """
        if self.on_event is None:
            return
        if self._held is not None:
            self._held.append((name, payload))
            return
        try:
            self.on_event(name, payload)
        except Exception as exc:  # a broken live view must not break the episode
            logger.warning("on_event(%r) raised %s: %s; the episode goes on", name, type(exc).__name__, exc)

    def _release(self, name: str, entry: dict[str, Any]) -> None:
        """Emit an activation's event, then the events its actions caused (held back by :meth:`emit`)."""
        held, self._held = self._held or [], None
        self.emit(name, entry)
        for event in held:
            self.emit(*event)

    # ---------------------------------------------------------------- what the flows call
    def begin_turn(self, turn: Turn) -> None:
        """A turn (segment flow: the task) starts: nothing before it is pending; checkpoint; event."""
        self.current_turn = turn.turn_id
        self.boundary = len(self.worker.steps)
        previous = self.turn_checkpoint
        self.turn_checkpoint = (
            controls.take_checkpoint(self, "turn_start", None, turn.turn_id) if self.reviews else None
        )
        if self.turn_checkpoint is not None:
            self.last_checkpoint = self.turn_checkpoint
        if previous is not None and previous in self.kernel.checkpoints and previous != self.last_checkpoint:
            self.kernel.release(previous)
            self.record.checkpoints.append(
                {"state_id": None, "turn_id": turn.turn_id, "checkpoint_id": previous, "op": "release"}
            )
        self.emit("turn_start", {"turn_id": turn.turn_id, "question": turn.question})

    def start_worker(self, turn_id: str, prompt: str, hint: str | None) -> None:
        self.last_prompt = prompt if not hint else f"{prompt}\n\n{hint}"
        self.transcript.append(("worker", self.last_prompt))
        self.worker.begin(turn_id, prompt, hint)

    def worker_step(self) -> Steps:
        """The worker's next step (None once it has finished the question); yields its chat requests when its
        model's replies come from outside."""
        return (yield from step_requests(self.worker))

    def note(self, text: str) -> None:
        """Add ``text`` to the worker's conversation (read with its next step)."""
        self.last_prompt = text
        self.transcript.append(("worker", text))
        self.worker.note(text)

    def pending_steps(self) -> int:
        return len(self.worker.steps) - self.boundary

    def window_hint(self, turn: Turn) -> str:
        """A windowed policy's stateless hint from the worker's steps so far and the public ``turn`` (recorded when
        non-empty)."""
        text = self.policy.window_hint(tuple(self.worker.steps), turn)  # type: ignore[attr-defined]
        if text:
            self.record_hint("window", turn.turn_id, len(self.worker.steps), text)
        return text

    def state_hint(self, turn: Turn) -> str:
        """The state hint of the draft's related committed states; invalidated ones carry ``invalidated_by``."""
        assert self.draft is not None
        invalidated_by: dict[str, str] = {}
        for state in self.committed.values():
            for relation in state.relations:
                if relation.type == "invalidate" and relation.related_state_id is not None:
                    invalidated_by[relation.related_state_id] = state.id
        for relation in self.draft.relations:  # this turn revises them: the worker must not reuse them either
            if relation.type == "invalidate" and relation.related_state_id is not None:
                invalidated_by[relation.related_state_id] = self.draft.id
        related = [r.related_state_id for r in self.draft.relations if r.related_state_id in self.committed]
        states = []
        for state_id in dict.fromkeys(related):
            state = {k: v for k, v in self.committed[state_id].to_dict().items() if k != "checkpoint_id"}
            if state_id in invalidated_by:
                state["invalidated_by"] = invalidated_by[state_id]
            states.append(state)
        hint = render_state_hint(states)
        if hint:
            self.record_hint("state", turn.turn_id, len(self.worker.steps), hint)
        return hint

    def fallback(self, event_type: str, turn: Turn) -> None:
        """Review activations ran out: commit a finalized state, abandon any other open one."""
        if self.lifecycle.phase is Phase.IDLE:
            return
        action = "COMMIT_STATE" if self.lifecycle.phase is Phase.FINALIZED else "ABANDON_STATE"
        self.lifecycle.begin_activation()
        self._held = []
        transition = self.lifecycle.apply(action)
        result = controls.apply_control(self, make_action(action), turn)
        entry = {
            "index": self.lifecycle.activation,
            "event_type": event_type,
            "turn_id": turn.turn_id,
            "actor": "harness",
            "observation": None,
            "actions": [{"raw": None, "parsed": {"name": action, "arguments": {}}, "kind": "control",
                         "legal": transition.legal, "result": result}],
            "latency_s": 0.0,
        }  # fmt: skip
        self.record.activations.append(entry)
        self._release("activation", entry)

    # ---------------------------------------------------------------- one activation
    def activation(self, event_type: str, turn: Turn, last: bool) -> Steps:
        """One manager activation: yields a :class:`PolicyInput` per action and receives the policy's response (an
        exception thrown in instead is the policy failing to respond); returns the legal control action that ended
        it (None: its budget ran out)."""
        self.lifecycle.begin_activation()
        self._held = []
        t0 = time.perf_counter()
        opening = self._observation(event_type, last, None)
        entry: dict[str, Any] = {
            "index": self.lifecycle.activation,
            "event_type": event_type,
            "turn_id": turn.turn_id,
            "actor": "policy",
            "observation": opening.to_dict(),
            "actions": [],
        }
        results: list[str] = []
        previous: list[tuple[str, str]] = []
        last_result: str | None = None
        control: str | None = None
        while self.lifecycle.activation_open:
            obs = opening if last_result is None else self._observation(event_type, last, last_result)
            inp = PolicyInput(
                observation=obs.render(),
                tool_results=tuple(results),
                legal_actions=tuple(self.lifecycle.legal_actions()),
                turn=turn,
                turn_states=dict(self.turn_states),
                view=self.view,
                previous=tuple(previous),
            )
            self.transcript.append(("policy", inp.text()))
            actor = None
            try:
                raw = yield inp
            except Exception as exc:  # a policy failure (e.g. an endpoint down) costs one action, never the episode
                logger.warning("policy %s failed: %s: %s", self.policy.name, type(exc).__name__, exc)
                raw, policy_error = "", f"{POLICY_FAILED} ({type(exc).__name__}: {exc})"
            else:
                policy_error = None
                if isinstance(raw, Reply):
                    raw, actor = raw.text, raw.actor
            full_chars = None
            if isinstance(raw, str):
                raw, full_chars = cut_reply(raw, self.config.max_reply_chars)
            parsed = parse_response(raw, strict=self.config.strict_wire)
            action = {"raw": raw, "parsed": None, "kind": None, "legal": False, "result": None}
            if full_chars is not None:
                action.update(raw_cut=True, raw_chars=full_chars)
            if actor is not None:
                action["actor"] = actor
            if policy_error or not parsed.ok or parsed.action is None:
                self.lifecycle.apply("(unparseable response)")
                cut = "" if full_chars is None else f"the reply was cut to {len(raw)} of its {full_chars} characters; "
                last_result = f"rejected: {cut}{policy_error or parsed.error}"
            else:
                act = parsed.action
                action.update(parsed=act.to_dict(), kind=ACTION_KIND[act.name])
                last_result, legal = yield from self._act(act, turn)
                action["legal"] = legal
                if legal and action["kind"] == "tool":
                    results.append(last_result)
                if legal and act.name in CONTROL_ACTIONS:
                    control = act.name
            action["result"] = last_result
            previous.append((raw, last_result))
            entry["actions"].append(action)
        entry["latency_s"] = time.perf_counter() - t0
        self.record.activations.append(entry)
        self._release("activation", entry)
        return control

    def _act(self, act: Action, turn: Turn) -> Steps:
        """Apply one parsed action; returns (result text, legal). Yields the worker's requests of a REPAIR."""
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
            return controls.run_tool(self, act).render(), True
        if act.name == "REPAIR":
            return (yield from controls.repair(self, act, turn, transition.repair_mode)), True
        return controls.apply_control(self, act, turn), True

    # ---------------------------------------------------------------- bookkeeping
    def next_state_id(self) -> str:
        """The id the next committed state gets (an open draft carries it too)."""
        return f"S{len(self.committed) + 1}"

    def record_hint(self, kind: str, turn_id: str, step_id: int, text: str) -> None:
        """Record a hint delivered to the worker and emit it."""
        entry = {"kind": kind, "turn_id": turn_id, "step_id": step_id, "text": text}
        self.record.hints.append(entry)
        self.emit("hint", entry)

    def _observation(self, event_type: str, last: bool, last_result: str | None) -> ManagerObservation:
        n_steps = len(self.worker.steps)
        pending = n_steps - self.boundary
        return ManagerObservation(
            event_type=event_type,
            available_state_id=self.draft.id if self.draft is not None else self.next_state_id(),
            untraced_steps=pending,
            pending_start_step=self.boundary if pending else None,
            pending_end_step=n_steps - 1 if pending else None,
            current_draft=self.draft,
            repair_attempts=self.lifecycle.repair_attempts,
            terminal_pending_review=last and event_type in ("turn_end", "task_end"),
            last_action_result=last_result,
            committed_state_index=self._state_index(),
        )

    def _state_index(self) -> tuple[StateSummary, ...]:
        """One summary per committed state, reused while the committed states are the same objects (each summary
        caches its rendering)."""
        states = tuple(self.committed.values())
        cached_states, index = self._index_cache
        if len(cached_states) != len(states) or any(a is not b for a, b in zip(cached_states, states, strict=True)):
            index = tuple(StateSummary.of(s) for s in states)
            self._index_cache = (states, index)
        return index

    def log_step(self, step: WorkerStep) -> None:
        """Record one worker step (prompt hash of the last text delivered to the worker) and emit it."""
        if step.code is not None and step.result is not None:
            self.executor_log[step.step_id] = tools.ExecutedStep.from_result(step.step_id, step.code, step.result)
        entry = {
            "step_id": step.step_id,
            "turn_id": step.turn_id,
            "prompt_sha256": prompt_sha256(self.last_prompt),
            "thought": step.thought,
            "code": step.code,
            "execution": execution_summary(step.result),
            "answer": step.answer,
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "duration_s": step.duration_s,
            "meta": step.meta,
        }
        self.record.worker_steps.append(entry)
        self.emit("worker_step", entry)


def _settings_entry(policy: Policy) -> dict[str, Any]:
    """``{"manager_settings": ...}``: what a model policy is served with (:func:`used_settings`); empty without a
    model."""
    used = used_settings(policy)
    return {} if used is None else {"manager_settings": used}
