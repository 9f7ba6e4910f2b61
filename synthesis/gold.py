"""The gold manager: a harness :class:`~harness.manager.policies.Policy` with privileged knowledge of the fault.

Used only in synthesis. It answers the same :class:`~harness.manager.policies.PolicyInput` as every other
policy, with wire text, inside the real :class:`~harness.manager.runtime.ManagerRuntime`, so its sequences are legal
by construction. Per turn (turn-aligned flow):

- **turn start** -> ``OPEN_STATE``: the issue from the question (template), the turn's public constraints, relations
  following the task graph (the turn's ``relation`` to the committed states of its ``depends_on`` turns, read from
  ``PolicyInput.turn_states``; ``init`` when none is committed).
- **turn end, state open** -> ``check_execution`` of the turn's latest step, then ``UPDATE_STATE`` with the variables
  that step wrote (as the sandbox reported them) and a conclusion quoting the reported result.
- **turn end, state updated** -> checks, then a decision:

  - clean state (and a benign fault's state): ``check_execution`` of the latest step and ``run_probe`` of every
    executable constraint (a benign fault's state also runs its evidence probe, which passes), then
    ``FINALIZE_RELATIONS(confirm)``;
  - the faulted state before its repair: the fault's evidence tool call (``run_probe`` of ``evidence_code`` or
    ``check_execution`` of the failed step); ONLY when that result really shows the violation (the probe failed with
    an ``AssertionError``; the step's verdict is ``failed``) -> ``REPAIR`` whose ``analytical_evidence`` quotes the
    tool result and whose hint names ``fault.error_variable`` with ``fault.faulty_reasoning``. Otherwise it confirms
    like a clean state and :attr:`GoldPolicy.evidence_missing` is set (the run is then dropped as "no evidence");
  - after the repair (``repair_attempts > 0``): the same re-check (the probe now passes), then
    ``FINALIZE_RELATIONS(confirm)`` — never a second repair.
- **finalized** -> ``COMMIT_STATE``.

Natural-language fields come from templates. An optional :class:`Teacher` (an OpenAI-compatible chat endpoint) may
paraphrase the issue and the conclusions; any teacher failure falls back to the template, so the policy always works
offline. Every response and the input it answered are kept in :attr:`GoldPolicy.log` for sample building.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.manager.actions import make_action
from harness.manager.hints import HintError, render_repair_hint
from harness.manager.policies import PolicyInput
from harness.manager.wire import render_action

if TYPE_CHECKING:
    from harness.llm import ChatBackend
    from synthesis.faults import InjectedFault

logger = logging.getLogger(__name__)

EVIDENCE_CHARS = 360
"""Characters of the tool result quoted as ``analytical_evidence`` (the whole hint must stay under 800)."""
RESULT_CHARS = 300
"""Characters of a turn's reported result quoted in a conclusion."""


def _call(name: str, arguments: dict[str, Any] | None = None) -> str:
    return render_action(make_action(name, arguments or {}))


def _one_line(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


class Teacher:
    """Paraphrases natural-language fields through an OpenAI-compatible chat backend; falls back to the text given.

    ``backend``: any :class:`harness.llm.ChatBackend` (e.g. ``OpenAIChatBackend(url)``). Results are cached per text,
    so a paraphrase is asked once per distinct template output."""

    PROMPT = (
        "Rewrite the following note of a data-analysis reviewer in different words. Keep every number, variable "
        "name and column name exactly; one sentence; no code. Note: {text}"
    )

    def __init__(self, backend: ChatBackend):
        self.backend = backend
        self.cache: dict[str, str] = {}
        self.failures = 0

    def paraphrase(self, text: str) -> str:
        if text in self.cache:
            return self.cache[text]
        try:
            reply = self.backend.chat([{"role": "user", "content": self.PROMPT.format(text=text)}])
            out = _one_line(reply.text, 400) or text
        except Exception as exc:  # an endpoint problem must never stop synthesis: keep the template text
            self.failures += 1
            logger.warning("teacher failed (%s: %s); keeping the template text", type(exc).__name__, exc)
            out = text
        self.cache[text] = out
        return out


@dataclass(frozen=True)
class LoggedResponse:
    """One response of the gold policy and the input it answered."""

    inp: PolicyInput
    response: str


class GoldPolicy:
    """The gold manager for one episode (see the module docstring).

    Args:
        fault: the fault injected in this episode (None: the clean run).
        teacher: optional paraphraser of the natural-language fields (None: templates only).
    """

    name = "gold"
    active = True

    def __init__(self, fault: InjectedFault | None = None, teacher: Teacher | None = None):
        self.fault = fault
        self.teacher = teacher
        self.log: list[LoggedResponse] = []
        self.evidence_missing = False  # the faulted state's evidence call did not show the violation
        self.evidence_seen: str | None = None  # the quoted evidence of the repair, when one was made

    # ---------------------------------------------------------------- the Policy protocol
    def respond(self, inp: PolicyInput) -> str:
        response = self._decide(inp)
        self.log.append(LoggedResponse(inp, response))
        return response

    def _decide(self, inp: PolicyInput) -> str:
        obs = json.loads(inp.observation)
        legal = set(inp.legal_actions)
        draft = obs["current_draft"]
        if "COMMIT_STATE" in legal:
            return _call("COMMIT_STATE")
        if "OPEN_STATE" in legal and obs["event_type"] == "turn_start":
            return self._open(inp)
        if draft is None:
            return _call("ABSTAIN")
        if obs["event_type"] == "turn_start":
            return _call("RESUME_WORKER")
        if "FINALIZE_RELATIONS" in legal:
            return self._check(inp, obs, draft, legal)
        if "UPDATE_STATE" in legal:
            return self._update(inp, obs, draft)
        return _call("ABSTAIN")

    # ---------------------------------------------------------------- helpers
    def _text(self, text: str) -> str:
        return self.teacher.paraphrase(text) if self.teacher is not None else text

    def _faulted_turn(self, inp: PolicyInput) -> bool:
        return self.fault is not None and inp.turn is not None and inp.turn.turn_id == self.fault.turn_id

    # ---------------------------------------------------------------- turn start
    def _open(self, inp: PolicyInput) -> str:
        turn = inp.turn
        if turn is None:
            return _call("ABSTAIN")
        related = [inp.turn_states[t] for t in turn.depends_on if t in inp.turn_states]
        if not related:
            relations: list[dict[str, Any]] = [{"type": "init"}]
        else:
            kind = turn.relation
            if kind == "init" or (kind == "combine" and len(related) < 2):
                kind = "progress" if len(related) == 1 else "combine"
            relations = [{"type": kind, "related_state_id": s} for s in related]
        constraints = [{"text": c.text, **({"code": c.code} if c.code else {})} for c in turn.constraints]
        issue = self._text(f"Turn {turn.turn_id}: {_one_line(turn.question, 300)}")
        return _call("OPEN_STATE", {"issue": issue, "constraints": constraints, "relations": relations})

    # ---------------------------------------------------------------- turn end: update
    def _update(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> str:
        last = obs["pending_end_step"]
        if last is not None and not inp.tool_results:
            return _call("check_execution", {"step_id": last})
        names: list[str] = []
        conclusions: list[str] = []
        if inp.tool_results:
            result = json.loads(inp.tool_results[-1])
            if result.get("ok"):
                names = [v["name"] for v in result.get("variables", []) if v.get("type") is not None]
                if result.get("results"):
                    reported = json.dumps(result["results"][-1], ensure_ascii=False, sort_keys=True)
                    conclusions.append(self._text(f"Step {last} reported {_one_line(reported, RESULT_CHARS)}."))
                elif result.get("verdict") == "failed":
                    error = f"{result.get('error_type')}: {result.get('error_message')}"
                    conclusions.append(self._text(f"Step {last} did not run: {_one_line(error, 200)}."))
        start = obs["pending_start_step"] or 0
        interval = {"start_step": start, "end_step": last if last is not None else start}
        return _call(
            "UPDATE_STATE",
            {
                "issue": draft["issue"],
                "source_interval": interval,
                "used_variables": list(dict.fromkeys(names)),
                "conclusions": conclusions or ["The turn reported no result."],
            },
        )

    # ---------------------------------------------------------------- turn end: checks and decision
    def _plan(self, obs: dict[str, Any], draft: dict[str, Any], faulted: bool) -> list[tuple[str, dict[str, Any]]]:
        """The tool calls of the check activation, in order."""
        last = draft["source_step_end"]
        if faulted and obs["repair_attempts"] == 0 and self.fault is not None and not self.fault.benign:
            if self.fault.evidence_tool == "check_execution":
                return [("check_execution", {"step_id": last})]
            return [("run_probe", {"code": self.fault.evidence_code})]
        plan: list[tuple[str, dict[str, Any]]] = [] if last is None else [("check_execution", {"step_id": last})]
        plan += [("run_probe", {"code": c["code"]}) for c in draft["constraints"] if c.get("code")]
        if faulted and self.fault is not None and self.fault.evidence_tool == "run_probe":
            plan.append(("run_probe", {"code": self.fault.evidence_code}))  # the re-check (or a benign check)
        return plan[:6]

    def _check(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], legal: set[str]) -> str:
        faulted = self._faulted_turn(inp)
        plan = self._plan(obs, draft, faulted)
        done = len(inp.tool_results)
        if done < len(plan):
            name, arguments = plan[done]
            return _call(name, arguments)
        if faulted and obs["repair_attempts"] == 0 and self.fault is not None and not self.fault.benign:
            evidence = _violation(json.loads(inp.tool_results[-1])) if inp.tool_results else None
            if evidence is not None and "REPAIR" in legal:
                return self._repair(evidence)
            self.evidence_missing = True
            logger.info("fault %s/%s: the evidence call showed nothing", self.fault.task_id, self.fault.turn_id)
        return _call("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})

    def _repair(self, evidence: str) -> str:
        assert self.fault is not None
        variable, reasoning = self.fault.error_variable, _one_line(self.fault.faulty_reasoning, 300)
        quoted = _one_line(evidence, EVIDENCE_CHARS)
        try:
            render_repair_hint(variable, reasoning, quoted)
        except HintError:  # the quote parses as an assignment: say it in words
            quoted = quoted.replace("==", " equals ").replace("=", " is ")
        self.evidence_seen = quoted
        return _call(
            "REPAIR",
            {"analytical_evidence": quoted, "error_hint": {"error_variable": variable, "faulty_reasoning": reasoning}},
        )


def _violation(result: dict[str, Any]) -> str | None:
    """The quoted evidence when a tool result really shows a violation, else None.

    ``run_probe``: the probe ran (``ok``) and failed with an ``AssertionError``; ``check_execution``: the step's
    verdict is ``failed``."""
    if not result.get("ok"):
        return None
    if "verdict" in result:
        if result["verdict"] != "failed":
            return None
        return f"check_execution of step {result.get('step_id')}: failed with {result.get('error_type')}: " + str(
            result.get("error_message")
        )
    if result.get("succeeded") is False and result.get("error_type") == "AssertionError":
        return f"run_probe failed: {result.get('error_message')}"
    return None
