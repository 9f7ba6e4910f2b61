"""The two review cadences (turn-aligned, segment-induced) that :class:`~harness.manager.runtime.ManagerRuntime` plays.

**Turn-aligned** (:func:`play_turns`, multi_turn tasks), per turn:

1. the harness takes a checkpoint (``op: "turn_start"``), so abandoning a repaired state rolls back to before the
   turn;
2. *turn start* activation (``event_type="turn_start"``): the policy may OPEN_STATE with provisional relations; the
   harness injects the state hint of the related committed states into the worker's turn prompt;
3. the worker runs the turn step by step;
4. *turn end* activations (``event_type="turn_end"``) until the state is committed or abandoned, at most
   ``max_turn_end_activations``, then the harness fallback (commit a finalized state, abandon any other).

**Segment-induced** (:func:`play_segments`, single tasks: closed_form, artifact): the whole task is one turn with the
id ``"main"``. The harness takes a checkpoint, starts the worker on the task prompt and pauses it every
``segment_steps`` of the worker's own steps (repair steps do not count) with a ``segment_pause`` activation, and
once more when it has finished with a ``task_end`` activation (``terminal_pending_review``). A pause is not a state
boundary: RESUME_WORKER (or ABSTAIN) resumes the worker and the pending steps stay pending. A state is formed post
hoc: OPEN_STATE, UPDATE_STATE with one inclusive source interval (the harness clips it to the pending steps), checks,
REPAIR or FINALIZE_RELATIONS, COMMIT_STATE; activations follow one another at the same pause until the manager
resumes the worker, commits or abandons (at most ``max_turn_end_activations`` per pause; then the worker resumes with
the draft still open). At the end, activations continue while steps are pending, then the same fallback applies.

Every function here that plays a part of an episode is a generator (:mod:`harness.manager.episode_loop`): it
yields the requests of the activations it starts (and of a worker whose model replies come from outside) and
returns when its part is played.

**Windowed** policies (``policy.style == "windowed"``) get no activations: at each turn start (turn flow) or pause
(segment flow) the harness passes the worker's steps so far and the public turn to ``policy.window_hint(steps, turn)``
and delivers a non-empty text with the turn prompt (turn flow) or as a note in the worker's conversation (segment
flow), recorded in ``hints`` with ``kind: "window"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.manager.lifecycle import Phase
from harness.tasks import Task, Turn
from harness.worker.base import SINGLE_TURN_ID

if TYPE_CHECKING:
    from harness.manager.episode_loop import Steps
    from harness.manager.runtime_types import Runtime

FLOW_BY_KIND = {"multi_turn": "turn", "closed_form": "segment", "artifact": "segment"}
"""The flow a task kind is played with (the only one it can be played with)."""

RESUMING = ("RESUME_WORKER", "ABSTAIN")
"""Control actions with which the manager lets the worker go on (segment flow)."""


def resolve_flow(task: Task, flow: str | None) -> str:
    """The flow ``task`` is played with: ``flow`` when it fits the task's kind (None: the kind's flow)."""
    expected = FLOW_BY_KIND[task.kind]
    if flow is not None and flow != expected:
        raise ValueError(
            f"task {task.id} is {task.kind}, which is played with flow={expected!r}, not flow={flow!r} "
            f"('turn' is for multi_turn tasks, 'segment' for closed_form and artifact tasks). "
            f"Fix: set flow={expected!r} or leave it unset."
        )
    return expected


def closed_form_text(answer: Any) -> str:
    """A closed_form submission from the worker's answer: text as is; an object ``{name: value}`` as
    ``@name[value] ...``; nothing as ``""`` (graded as wrong, not invalid)."""
    if answer is None:
        return ""
    if isinstance(answer, dict):
        return " ".join(f"@{name}[{value}]" for name, value in answer.items())
    return str(answer)


def worker_prompt(turn: Turn, hint: str) -> str:
    """The text the worker gets for a turn: the public context and question, then the state hint (if any)."""
    parts = [f"Context: {turn.context}" if turn.context else "", f"Question: {turn.question}", hint]
    return "\n\n".join(p for p in parts if p)


def task_prompt(task: Task) -> str:
    """The text the worker gets for a single task: the public description and the expected answer form."""
    parts = [task.description.strip()]
    if task.answer_format:
        parts.append(f"Answer format: {task.answer_format}")
    if task.submission is not None:
        parts.append(f"Write your submission to WORK_DIR/{task.submission.filename}.")
    return "\n\n".join(parts)


def single_turn(task: Task) -> Turn:
    """A single task as the one public turn ``"main"`` the policy sees (its description and constraints)."""
    return Turn(turn_id=SINGLE_TURN_ID, question=task.description.strip(), constraints=task.config.constraints)


# ---------------------------------------------------------------- turn-aligned


def play_turns(rt: Runtime) -> Steps:
    for index, turn in enumerate(rt.task.turns):
        yield from play_turn(rt, turn, last=index == len(rt.task.turns) - 1)


def play_turn(rt: Runtime, turn: Turn, last: bool) -> Steps:
    """One turn of the turn-aligned flow (``last``: the task's last turn)."""
    rt.begin_turn(turn)
    hint = ""
    if rt.windowed:
        hint = rt.window_hint(turn)
    elif rt.policy.active:
        yield from rt.activation("turn_start", turn, last=False)
        if rt.draft is not None:
            hint = rt.state_hint(turn)
    rt.start_worker(turn.turn_id, worker_prompt(turn, ""), hint or None)
    while (step := (yield from rt.worker_step())) is not None:
        rt.log_step(step)
    if not rt.reviews:
        return
    for _ in range(rt.config.max_turn_end_activations):
        yield from rt.activation("turn_end", turn, last=last)
        if rt.lifecycle.phase is Phase.IDLE:
            return  # committed, abandoned, or no state was opened for this turn
    rt.fallback("turn_end", turn)


# ---------------------------------------------------------------- segment-induced


def play_segments(rt: Runtime) -> Steps:
    turn = single_turn(rt.task)
    rt.begin_turn(turn)
    rt.start_worker(turn.turn_id, task_prompt(rt.task), None)
    since_pause = 0
    while (step := (yield from rt.worker_step())) is not None:
        rt.log_step(step)
        since_pause += 1
        if since_pause >= rt.config.segment_steps and not rt.worker.finished:
            since_pause = 0
            yield from _pause(rt, turn)
    yield from _review_end(rt, turn)


def _pause(rt: Runtime, turn: Turn) -> Steps:
    if rt.windowed:
        text = rt.window_hint(turn)
        if text:
            rt.note(text)
        return
    if not rt.reviews:
        return
    for _ in range(rt.config.max_turn_end_activations):
        control = yield from rt.activation("segment_pause", turn, last=False)
        if control is None or control in RESUMING or rt.lifecycle.phase is Phase.IDLE:
            return  # the worker resumes; pending steps (and an open draft) stay


def _review_end(rt: Runtime, turn: Turn) -> Steps:
    if not rt.reviews:
        return
    for _ in range(rt.config.max_turn_end_activations):
        if rt.lifecycle.phase is Phase.IDLE and rt.pending_steps() == 0:
            return  # everything the worker did is covered by committed or abandoned states
        control = yield from rt.activation("task_end", turn, last=True)
        if rt.lifecycle.phase is Phase.IDLE and control in RESUMING:
            return  # the manager declines to review the rest: those steps stay untraced
    rt.fallback("task_end", turn)


FLOWS: dict[str, Callable[[Runtime], Steps]] = {"turn": play_turns, "segment": play_segments}
"""Flow name -> the generator function that plays an episode with it."""
