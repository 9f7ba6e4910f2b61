"""The gold manager: a harness :class:`~harness.manager.policy_types.Policy` whose every decision is a function of what
the manager itself sees.

Used in synthesis (the SFT targets) and to play the rest of RL rollouts. It answers the same
:class:`~harness.manager.policy_types.PolicyInput` as every other policy, with wire text, inside the real
:class:`~harness.manager.runtime.ManagerRuntime`, so its sequences are legal by construction. It is given no fault:
the same policy manages clean, faulted and benign runs, and decides from its tool results alone. Per turn
(turn-aligned flow):

- **turn start** -> ``OPEN_STATE``: the issue from the question (template), the turn's constraints as
  ``{"text", "check"}`` (``check``: the spec that restates the constraint, :func:`synthesis.checks.constraint_checks`;
  ``{"text"}`` alone when no spec states it), and the relations the question names in words
  (:func:`harness.manager.relations.infer_relations`: "Using the result of turn 3", "Go back to the result of turn 2",
  "With this revision ... (turn 4)"; ``init`` when it names none).
- **turn end, state open** -> ``check_execution`` of the turn's latest step, then ``UPDATE_STATE`` with the variables
  that step wrote (as the sandbox reported them) and a conclusion quoting the reported result.
- **turn end, state updated** -> one verification procedure for every turn end, the same tool calls whatever the
  run: ``check_execution`` of the latest step, a ``run_check`` of every constraint the turn states with its spec (a
  ``run_probe`` of the task's own code for a constraint no spec states), and a ``run_check`` of every check
  :mod:`synthesis.checks` writes from the turn's stated requirements (``checks``, by turn id; typed specs, never
  code). Then the decision follows from the results: when one shows a violation (a ``run_check`` whose ``passed`` is
  false, a probe that failed with an ``AssertionError``, a step whose verdict is ``failed``) and ``REPAIR`` is legal ->
  ``REPAIR`` whose ``analytical_evidence`` quotes that result (the failed check's reason) and whose hint names the
  variable the failed check is about and the requirement it breaks (written from the check, never from a fault
  record); otherwise ``FINALIZE_RELATIONS(confirm)``. After a repair the same calls run again.
- **finalized** -> ``COMMIT_STATE``.

A fault that none of these checks reveals is therefore committed like a clean state: synthesis counts it as
*undetectable* (:mod:`synthesis.runs`). Natural-language fields come from templates. An optional :class:`Teacher` (an
OpenAI-compatible chat endpoint) may paraphrase the issue and the conclusions; any teacher failure falls back to the
template, so the policy always works offline. Every response and the input it answered are kept in
:attr:`GoldPolicy.log` for sample building.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.manager.bookkeeping import call, one_line, open_response, update_response
from harness.manager.hints import HintError, render_repair_hint
from harness.manager.policy_types import PolicyInput
from harness.pyast import parse_python
from harness.untrusted import neutralize

if TYPE_CHECKING:
    from harness.llm import ChatBackend
    from synthesis.checks import Check

logger = logging.getLogger(__name__)

EVIDENCE_CHARS = 360
"""Characters of the tool result quoted as ``analytical_evidence`` (the whole hint must stay under 800)."""
MAX_TOOL_CALLS = 7
"""Tool calls of one check activation (the runtime allows 8 actions; the decision is the last)."""


_call, _one_line = call, one_line


class Teacher:
    """Paraphrases natural-language fields through an OpenAI-compatible chat backend; falls back to the text given.
    The field (it may quote worker values) reaches the model as untrusted text (:func:`harness.untrusted.neutralize`).

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
            reply = self.backend.chat([{"role": "user", "content": self.PROMPT.format(text=neutralize(text))}])
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
        checks: the checks of each turn (``{turn_id: checks}``, :func:`synthesis.checks.task_checks`); a turn
            without an entry is verified by ``check_execution`` and its constraints only.
        teacher: optional paraphraser of the natural-language fields (None: templates only).
    """

    name = "gold"
    active = True

    def __init__(self, *, checks: Mapping[str, Sequence[Check]] | None = None, teacher: Teacher | None = None):
        self.checks = dict(checks or {})
        self.teacher = teacher
        self.log: list[LoggedResponse] = []
        self.evidence_seen: list[str] = []  # the quoted evidence of each repair, in order

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
            return self._check(inp, draft, legal)
        if "UPDATE_STATE" in legal:
            return self._update(inp, obs, draft)
        return _call("ABSTAIN")

    # ---------------------------------------------------------------- helpers
    def _text(self, text: str) -> str:
        return self.teacher.paraphrase(text) if self.teacher is not None else text

    # ---------------------------------------------------------------- turn start and turn end: bookkeeping
    def _open(self, inp: PolicyInput) -> str:
        constraints: list[dict[str, Any]] = []
        if inp.turn is not None:
            stated = self._constraint_checks(inp.turn.turn_id)
            for c in inp.turn.constraints:
                check = stated.get(c.text)
                constraints.append(
                    {"text": c.text} if check is None else {"text": c.text, "check": check.spec.to_dict()}
                )
        return open_response(inp, constraints, self._text)

    def _constraint_checks(self, turn_id: str) -> dict[str, Check]:
        return _stated_constraints(self.checks, turn_id)

    def _update(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> str:
        return update_response(inp, obs, draft, self._text)

    # ---------------------------------------------------------------- turn end: checks and decision
    def _plan(self, inp: PolicyInput, draft: dict[str, Any]) -> list[_Planned]:
        return plan_calls(inp, draft, self.checks)

    def _check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str]) -> str:
        plan = self._plan(inp, draft)
        done = len(inp.tool_results)
        if done < len(plan):
            return _call(plan[done].name, plan[done].arguments)
        if "REPAIR" in legal:
            for planned, text in zip(plan, inp.tool_results, strict=False):
                evidence = _violation(json.loads(text))
                if evidence is not None:
                    return self._repair(planned, evidence, plan)
        return _call("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})

    def _repair(self, planned: _Planned, evidence: str, plan: Sequence[_Planned]) -> str:
        if planned.name == "check_execution":
            wanted = list(dict.fromkeys(p.variable for p in plan if p.variable)) or ["result"]
            variable = wanted[0]
            names = ", ".join(f"`{name}`" for name in wanted[:4])
            reasoning = f"the cell stopped with an error, so {names} the turn asks for were not computed"
        else:
            variable = planned.variable or "result"
            reasoning = f"it does not meet what the turn states: {planned.requirement}"
        reasoning = _one_line(reasoning, 300)
        quoted = _one_line(evidence, EVIDENCE_CHARS)
        try:
            render_repair_hint(variable, reasoning, quoted)
        except HintError:  # the quote parses as an assignment: say it in words
            quoted = quoted.replace("==", " equals ").replace("=", " is ")
        self.evidence_seen.append(quoted)
        return _call(
            "REPAIR",
            {"analytical_evidence": quoted, "error_hint": {"error_variable": variable, "faulty_reasoning": reasoning}},
        )


def _stated_constraints(checks: Mapping[str, Sequence[Check]], turn_id: str) -> dict[str, Check]:
    """The turn's checks that restate a public constraint, by the constraint's text."""
    return {c.constraint: c for c in checks.get(turn_id, ()) if c.constraint}


def plan_calls(inp: PolicyInput, draft: dict[str, Any], checks: Mapping[str, Sequence[Check]]) -> list[_Planned]:
    """The tool calls of a check activation, in order, each with what it verifies (the same on every run)."""
    last = draft["source_step_end"]
    plan: list[_Planned] = [] if last is None else [_Planned("check_execution", {"step_id": last})]
    turn = inp.turn
    if turn is not None:
        stated = _stated_constraints(checks, turn.turn_id)
        for constraint in turn.constraints:
            if (check := stated.get(constraint.text)) is not None:
                arguments = {"spec": check.spec.to_dict()}
                plan.append(_Planned("run_check", arguments, check.variable, constraint.text, "constraint"))
            elif constraint.code:  # a constraint no spec states: its own (public) code
                variable = _constraint_variable(constraint.code)
                plan.append(_Planned("run_probe", {"code": constraint.code}, variable, constraint.text, "constraint"))
        for check in checks.get(turn.turn_id, ()):
            if not check.constraint:
                plan.append(_Planned("run_check", {"spec": check.spec.to_dict()}, check.variable, check.requirement))
    seen: set[str] = set()
    unique = [p for p in plan if not (p.key in seen or seen.add(p.key))]  # type: ignore[func-returns-value]
    return unique[:MAX_TOOL_CALLS]


def revealed_by(inp: PolicyInput, checks: Mapping[str, Sequence[Check]]) -> tuple[str, ...]:
    """What the results of the check activation ``inp`` answers show violated, one label per failing call:
    ``check_execution``, ``constraint`` (a stated constraint, by spec or by its code) or the spec kind of a check
    written from the turn's stated requirements."""
    plan = plan_calls(inp, json.loads(inp.observation)["current_draft"], checks)
    return tuple(
        planned.label
        for planned, text in zip(plan, inp.tool_results, strict=False)
        if _violation(json.loads(text)) is not None
    )


@dataclass(frozen=True)
class _Planned:
    """One tool call of the verification procedure and what it verifies (the variable and requirement a repair
    hint names when its result shows a violation)."""

    name: str
    arguments: dict[str, Any]
    variable: str = ""
    requirement: str = ""
    origin: str = ""  # "constraint": it restates a stated constraint

    @property
    def label(self) -> str:
        if self.origin or self.name != "run_check":
            return self.origin or self.name
        return str(self.arguments["spec"]["kind"])

    @property
    def key(self) -> str:
        return f"{self.name}:{json.dumps(self.arguments, sort_keys=True)}"


def _constraint_variable(code: str) -> str:
    """The first variable a constraint's code reads (what a repair hint names), ``""`` when it reads none."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return ""
    builtins = set(dir(__builtins__)) if not isinstance(__builtins__, dict) else set(__builtins__)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in builtins and not node.id.startswith("_"):
            return node.id
    return ""


def _violation(result: dict[str, Any]) -> str | None:
    """The quoted evidence when a tool result really shows a violation, else None.

    ``run_check``: the check ran (``ok``) and did not pass (``passed`` False; None: it could not run); ``run_probe``:
    the probe ran and failed with an ``AssertionError``; ``check_execution``: the step's verdict is ``failed``."""
    if not result.get("ok"):
        return None
    if "passed" in result:
        if result["passed"] is not False:
            return None
        return f"run_check failed: {result.get('reason') or result.get('requirement') or 'the check did not pass'}"
    if "verdict" in result:
        if result["verdict"] != "failed":
            return None
        return f"check_execution of step {result.get('step_id')}: failed with {result.get('error_type')}: " + str(
            result.get("error_message")
        )
    if result.get("succeeded") is False and result.get("error_type") == "AssertionError":
        message = result.get("error_message")
        return (
            f"run_probe failed: {message}"
            if message
            else "run_probe failed: AssertionError (an assert without a message)"
        )
    return None
