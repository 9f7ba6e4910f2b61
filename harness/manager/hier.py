"""The hierarchical manager ``hier``: the harness does the bookkeeping, a chat model decides each state or writes its
checks.

:class:`HierPolicy` answers the same :class:`~harness.manager.policy_types.PolicyInput` as every policy, one
wire-format response per action, and says who wrote each one in :attr:`HierPolicy.last_actor`:

**Tier 0** (``last_actor == "harness"``, no model) writes the bookkeeping with the gold manager's own code
(:mod:`harness.manager.bookkeeping`), so a tier-0 episode commits the states the gold manager of synthesis commits:

- turn start: OPEN_STATE from the public turn (``Turn N: <question>`` as issue, the constraint texts as
  :func:`~harness.manager.policy_types.constraint_view` shows them, relations from
  :func:`~harness.manager.relations.infer_relations`, or from the task graph with ``view.oracle_relations``);
- turn end, state open: ``check_execution`` of the turn's latest step, then UPDATE_STATE with the variables it wrote
  and its reported result;
- turn end, state updated (the *check activation*): ``check_execution`` of the state's latest step. When it failed,
  REPAIR naming the state's variable and the error (ABANDON_STATE when the repair budget is spent) without asking
  the model. Otherwise tier 1 decides (after a repair too: the repaired state is verified like the first one); a
  policy without a model confirms;
- finalized: COMMIT_STATE.
- Segment flow (``segment_pause`` / ``task_end``): the rule policy's segment logic
  (:class:`~harness.manager.policies.RulePolicy`: resume until the pending steps form a unit, open, update with the
  pending interval); its check activation is the one above.

**Tier 1** (``last_actor == "policy"``): a chat backend answers within the check activation, after tier 0's checks,
with the actions left of the activation's budget (:data:`~harness.manager.policy_types.MAX_ACTIONS`, tier 0's actions
count). Its conversation (:mod:`harness.manager.hier_prompts`) holds only its own calls: the entries of
``PolicyInput.previous`` after tier 0's checks. Its read-only tool calls go to the runtime as the policy's responses
(the raw reply, verbatim); it ends with FINALIZE_RELATIONS (confirm, or revise with its relations) or REPAIR, the
flat ``llm`` policy's action names and schemas. That is ``writes="decisions"`` (the default).

**Tier 1 writes checks** (``writes="checks"``). Tier 1 is asked once per state, at its first check activation after
tier 0's ``check_execution``, which checks the turn requires: :data:`~harness.manager.hier_prompts.CHECKS_SYSTEM`
(the check kinds, one line each, generated from :data:`harness.checks.spec.CHECK_KINDS`) and
:func:`~harness.manager.hier_prompts.render_checks_request` (the public turn, the draft, tier 0's checks, the committed
states); its reply is ``{"checks": [spec, ...]}`` (:mod:`harness.manager.hier_checks`: strict parser, canonical
rendering, exact grammar in :attr:`HierPolicy.reply_grammar`). Tier 0 then sends one ``run_check`` per spec (each
such response is tier 1's, ``last_actor == "policy"``; the first one's ``<think>`` block says how many checks tier 1
wrote and quotes every spec it dropped with its error) and decides with no model call: REPAIR (ABANDON_STATE when the
repair budget is spent) iff a check tier 1 wrote fails (``passed: false``), naming the check's variable, the
requirement as the faulty reasoning and the check's reason as evidence; else FINALIZE_RELATIONS, mode confirm. A check
that could not run (``passed: null``) or that the runtime refused is not evidence. The checks are kept for the state
until it is committed or abandoned: after a repair the repaired state is checked with the same specs, with no model
call. A failed execution is still
repaired by tier 0 before tier 1 is asked; a policy without a model, a reply that is not the checks object or a
backend that raises gives the state no check (the reply is recorded as rejected), and tier 0 confirms.

**Robustness.** A tier-1 reply is *rejected*, and tier 0 confirms instead (FINALIZE_RELATIONS, mode confirm), when the
backend raises, the reply does not parse (with the runtime's default strict wire format), its action is not one of tier
1's (:data:`~harness.manager.hier_prompts.TIER1_TOOLS`, :data:`~harness.manager.hier_prompts.DECISIONS`) or not legal
now, it is a tool call that would leave no action for the decision, the runtime refused its previous call, or it is a
REPAIR whose hint the harness would refuse or whose evidence quotes no check or probe result of the activation
(:func:`quotes_tool_result` over :func:`evidence_texts`: a failed check's error, a probe's output, never the worker's
code or output that ``check_execution`` echoes). Every rejection is recorded twice: in :attr:`HierPolicy.rejected`
(turn, event, state, reason, raw reply) and in the ``<think>`` block of the confirming response, which the episode
record keeps as that action's ``raw`` text: ``tier-1 reply rejected (<reason>); confirmed by the harness. reply: "<raw
reply as a JSON string, < and > escaped>"``. The policy never raises for anything tier 1 does and never repairs without
evidence.

:attr:`HierPolicy.stats` counts tier 1's model calls and the prompt / completion tokens its backend reported.

**Driving tier 1 from outside.** :meth:`~HierPolicy.respond` is the composition of four public steps, so that a driver
(:class:`envs.ManagerEnv` with ``format="hier"``, RL rollouts) can put an agent in tier 1's place:
:meth:`~HierPolicy.tier1_messages` (tier 1's conversation when the request is tier 1's, None when tier 0 answers it),
:meth:`~HierPolicy.tier0_respond` (tier 0's answer), :meth:`~HierPolicy.vet` (why a tier-1 reply is rejected, None when
it is accepted) and :meth:`~HierPolicy.fallback` (record a rejected reply, confirm instead). With ``writes="checks"``
it is two: :meth:`~HierPolicy.tier1_messages` then :meth:`~HierPolicy.take_checks` (keep a reply's checks: a gold
manager's specs make the oracle arm), and :meth:`~HierPolicy.tier0_respond` for every request.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.checks.spec import CheckSpec
from harness.llm import DEFAULT_MAX_REPLY_CHARS, ChatBackend, Message, cut_reply
from harness.manager.bookkeeping import open_response, update_response
from harness.manager.hier_checks import (
    MAX_CHECKS,
    ChecksReply,
    ChecksReplyError,
    checks_grammar,
    compact_spec,
    failed_check,
    parse_checks_reply,
)
from harness.manager.hier_evidence import MIN_QUOTE_CHARS, evidence_texts, quotes_tool_result
from harness.manager.hier_prompts import (
    CHECKS_SYSTEM,
    DECISIONS,
    HIER_SYSTEM,
    TIER1_TOOLS,
    render_checks_request,
    render_decision,
    tier1_tool_schemas,
)
from harness.manager.hints import HintError, render_repair_hint
from harness.manager.lifecycle import Lifecycle
from harness.manager.llm_policy import reply_to_text
from harness.manager.policies import RulePolicy, execution_evidence
from harness.manager.policy_types import MAX_ACTIONS, SEGMENT_EVENTS, PolicyInput, call, constraint_view, turn_view
from harness.manager.prompt_view import check_prompt_view, view
from harness.manager.prompts import render_evidence, render_tool_response
from harness.manager.wire import THINK_CLOSE, THINK_OPEN, parse_response

logger = logging.getLogger(__name__)

__all__ = ["HARNESS", "MIN_QUOTE_CHARS", "POLICY", "HierPolicy", "evidence_texts", "quotes_tool_result"]

HARNESS, POLICY = "harness", "policy"
"""The two values of :attr:`HierPolicy.last_actor`: tier 0 (the harness) or tier 1 (the model) wrote the response."""

TIER1_MIN_ACTIONS = 4
"""Actions of the check activation a budget must leave for tier 1 (tool calls and the decision) after tier 0's
``check_execution`` of the latest step: ``max_actions`` must be larger."""

REJECTED_RAW_CHARS = 1_500
"""Characters of a rejected raw reply quoted in the confirming response's ``<think>`` block (``rejected`` has all)."""

# ---------------------------------------------------------------- the policy


@dataclass
class Tier1Stats:
    """Tier 1's usage over the policy's life: model calls made (``failures`` of them raised), prompt and completion
    tokens the backend reported, and replies rejected (:attr:`HierPolicy.rejected`)."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rejected: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class _Check:
    """The check activation as tier 0 sees it: its planned ``check_execution`` calls and their results so far."""

    steps: list[int]
    results: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Plan:
    """The checks tier 1 wrote for one state (kept across its repairs) and the note the first response shows."""

    specs: tuple[CheckSpec, ...]
    note: str
    announced: bool = False


CONFIRM = {"mode": "confirm", "relations": [], "conflict_evidence": ""}
WRITES = ("decisions", "checks")
"""What tier 1 writes (:class:`HierPolicy`'s ``writes``): a decision, or the checks tier 0 runs and decides from."""


class HierPolicy:
    """The hierarchical manager described in the module docstring.

    Args:
        tier1: the chat backend of the decision model; None: tier 0 alone (confirms wherever tier 1 would decide).
        name: the policy's name in episode records.
        unit_steps: segment flow: pending steps that form a unit (as :class:`RulePolicy`).
        max_actions: the activation's action budget (the runtime's ``max_actions``).
        max_repairs: the state's repair budget (shown to tier 1).
        strict_wire: parse tier 1's replies as strictly as the runtime does (its ``strict_wire``).
        writes: ``decisions`` (tier 1 decides with tools) or ``checks`` (tier 1 writes check specs, tier 0 runs them
            and decides: see the module docstring).
        prompt_view: ``full`` or ``bare`` (tier 1's conversations without the system message and the tools block:
            :mod:`harness.manager.prompt_view`).
    """

    active = True

    def __init__(
        self,
        tier1: ChatBackend | None,
        *,
        name: str = "hier",
        unit_steps: int = 3,
        max_actions: int = MAX_ACTIONS,
        max_repairs: int = Lifecycle().max_repairs,
        strict_wire: bool = True,
        writes: str = "decisions",
        prompt_view: str = "full",
    ):
        if writes not in WRITES:
            raise ValueError(f"writes={writes!r}: tier 1 writes one of {', '.join(WRITES)}; use one of them.")
        if max_actions <= TIER1_MIN_ACTIONS:
            raise ValueError(
                f"max_actions={max_actions}: tier 0 needs one check and tier 1 at least {TIER1_MIN_ACTIONS} actions "
                f"of every check activation; use max_actions > {TIER1_MIN_ACTIONS}."
            )
        self.tier1, self.name = tier1, name
        self.tier0 = RulePolicy(unit_steps)
        self.max_actions, self.max_repairs, self.strict_wire = max_actions, max_repairs, strict_wire
        self.tier0_checks = 1
        self.writes = writes
        self.system = CHECKS_SYSTEM if writes == "checks" else HIER_SYSTEM
        self.prompt_view = check_prompt_view(prompt_view)
        self.tools: list[dict[str, Any]] | None = view([], [] if writes == "checks" else tier1_tool_schemas(),
                                                       prompt_view)[1]  # fmt: skip
        self.reply_grammar = checks_grammar if writes == "checks" else None
        self.written: list[dict[str, Any]] = []
        self._plans: dict[tuple[str | None, str | None], _Plan] = {}
        self.last_actor: str = HARNESS
        self.stats = Tier1Stats()
        self.rejected: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- dispatch
    def respond(self, inp: PolicyInput) -> str:
        """The response to ``inp``: tier 0's (:meth:`tier0_respond`), or, where tier 1 answers and a backend is set,
        the backend's reply to :meth:`tier1_messages` when :meth:`vet` accepts it, else :meth:`fallback`. With
        ``writes="checks"``: the backend answers :meth:`tier1_messages` when it asks, :meth:`take_checks` keeps the
        checks, and tier 0 answers."""
        if self.writes == "checks":
            messages = self.tier1_messages(inp) if self.tier1 is not None else None
            if messages is not None:
                self._ask_checks(inp, messages)
            return self.tier0_respond(inp)
        context = self._tier1_context(inp) if self.tier1 is not None else None
        if context is None:
            return self.tier0_respond(inp)
        return self._ask(inp, *context)

    def tier1_messages(self, inp: PolicyInput) -> list[Message] | None:
        """Tier 1's conversation when ``inp`` is tier 1's to answer (the check activation after tier 0's checks, no
        failed execution, the runtime did not refuse tier 1's previous call), whether or not a backend is set; None
        when tier 0 answers it. An outside driver (:class:`envs.ManagerEnv` with ``format="hier"``) answers it in
        tier 1's place, through :meth:`vet` and :meth:`fallback`. With ``writes="checks"``: the check-writing
        conversation at the activation's first request after tier 0's execution checks, once per state (None
        after), answered through :meth:`take_checks`."""
        if self.writes == "checks":
            found = self._checks_context(inp)
            return None if found is None else self.checks_messages(inp, *found)
        context = self._tier1_context(inp)
        return None if context is None else self.messages(inp, *context)

    def tier0_respond(self, inp: PolicyInput) -> str:
        """Tier 0's response to ``inp`` (``last_actor`` becomes ``"harness"``): the bookkeeping, the checks, the
        repair of a failed execution, :meth:`fallback` after a refused tier-1 call, and the confirmation a policy
        without a model gives where tier 1 would decide."""
        self.last_actor = HARNESS
        obs = json.loads(inp.observation)
        legal = set(inp.legal_actions)
        draft = obs["current_draft"]
        if draft is None or "COMMIT_STATE" in legal:
            self._plans.clear()  # a state's checks live until it is committed or abandoned (or the episode ends)
        if _is_check(draft, legal):
            return self._check(inp, draft, legal)
        if obs["event_type"] in SEGMENT_EVENTS or "COMMIT_STATE" in legal:
            return self.tier0.respond(inp)  # the segment flow, and commits: the rule policy's
        if "OPEN_STATE" in legal and obs["event_type"] == "turn_start":
            constraints = [] if inp.turn is None else constraint_view(inp.turn.constraints, inp.view)
            return open_response(inp, constraints)
        if draft is None:
            return call("ABSTAIN")
        if obs["event_type"] == "turn_start":
            return call("RESUME_WORKER")
        if "UPDATE_STATE" in legal:
            return update_response(inp, obs, draft)
        return call("ABSTAIN")

    # ---------------------------------------------------------------- the check activation
    def _plan(self, draft: dict[str, Any]) -> list[int]:
        start, end = draft["source_step_start"], draft["source_step_end"]
        return [] if start is None else list(range(start, end + 1))[-self.tier0_checks :]

    def _tier0_check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str]) -> tuple[str | None, _Check]:
        """Tier 0's response in the check activation (its next check, or the repair of a failed execution), None when
        tier 1 decides; and the activation's checks so far."""
        steps = self._plan(draft)
        if len(inp.previous) < len(steps):
            return call("check_execution", {"step_id": steps[len(inp.previous)]}), _Check(steps)
        results = [_decoded(result) for _, result in inp.previous[: len(steps)]]
        check = _Check(steps, results)
        failed = execution_evidence(results, [v["name"] for v in draft["used_variables"]])
        if failed is None:
            return None, check
        if "REPAIR" not in legal:
            return call("ABANDON_STATE"), check
        return _repair(*failed), check

    def _check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str]) -> str:
        response, check = self._tier0_check(inp, draft, legal)
        if response is not None:
            return response
        if self.writes == "checks":
            return self._run_checks(inp, draft, legal, check)
        own = inp.previous[len(check.steps) :]
        if own and _refused(own[-1][1]):
            return self.fallback(inp, f"the runtime refused it: {own[-1][1][:300]}", own[-1][0])
        return call("FINALIZE_RELATIONS", CONFIRM)  # where tier 1 decides, tier 0 alone confirms

    def _tier1_context(self, inp: PolicyInput) -> tuple[dict[str, Any], dict[str, Any], _Check] | None:
        """``(observation, draft, checks)`` when ``inp`` is tier 1's to answer, else None."""
        obs = json.loads(inp.observation)
        legal = set(inp.legal_actions)
        draft = obs["current_draft"]
        if not _is_check(draft, legal):
            return None
        response, check = self._tier0_check(inp, draft, legal)
        own = inp.previous[len(check.steps) :]
        if response is not None or (own and _refused(own[-1][1])):
            return None
        return obs, draft, check

    # ---------------------------------------------------------------- tier 1 writes checks, tier 0 runs them
    def _room(self, check: _Check) -> int:
        """The checks one activation can run: its budget less tier 0's execution checks and the decision."""
        return min(MAX_CHECKS, self.max_actions - len(check.steps) - 1)

    @staticmethod
    def _plan_key(inp: PolicyInput, draft: dict[str, Any] | None) -> tuple[str | None, str | None]:
        return (inp.turn.turn_id if inp.turn is not None else None, (draft or {}).get("id"))

    def _checks_context(self, inp: PolicyInput) -> tuple[dict[str, Any], dict[str, Any], _Check] | None:
        """``(observation, draft, checks)`` when tier 1 is asked for checks now (see :meth:`tier1_messages`)."""
        obs = json.loads(inp.observation)
        draft = obs["current_draft"]
        legal = set(inp.legal_actions)
        if not _is_check(draft, legal) or self._plan_key(inp, draft) in self._plans:
            return None
        response, check = self._tier0_check(inp, draft, legal)
        return None if response is not None or len(inp.previous) > len(check.steps) else (obs, draft, check)

    def checks_messages(
        self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], check: _Check
    ) -> list[Message]:
        """Tier 1's check-writing conversation: :data:`~.hier_prompts.CHECKS_SYSTEM` (not under ``prompt_view="bare"``)
        and the request."""
        user = render_checks_request(
            event_type=obs["event_type"],
            turn=turn_view(inp),
            draft=draft,
            checks=check.results,
            index=obs["committed_state_index"],
            room=self._room(check),
        )
        return view([{"role": "system", "content": self.system}, {"role": "user", "content": user}], None,
                    self.prompt_view)[0]  # fmt: skip

    def take_checks(self, inp: PolicyInput, text: str) -> ChecksReply | None:
        """Keep the checks of tier 1's reply ``text`` to ``inp`` for its state (tier 0 runs them, this activation and
        after each repair) and record them in :attr:`written`; a malformed spec is dropped, its error recorded. A
        reply that is not the checks object is rejected (:attr:`rejected`) and the state gets no check: None."""
        obs = json.loads(inp.observation)
        key = self._plan_key(inp, obs["current_draft"])
        check = self._tier0_check(inp, obs["current_draft"], set(inp.legal_actions))[1]
        try:
            reply = parse_checks_reply(text, self._room(check))
        except ChecksReplyError as error:
            self._reject(inp, key, f"unparseable: {error}", text)
            return None
        kept = [compact_spec(spec) for spec in reply.specs]
        self.written.append({"turn_id": key[0], "state_id": key[1], "specs": kept, "errors": list(reply.errors)})
        note = f"tier-1 checks: {len(kept)} written"
        if reply.errors:
            note += f", {len(reply.errors)} dropped ({'; '.join(reply.errors)}); reply: {_quoted(text)}"
        self._plans[key] = _Plan(reply.specs, note)
        return reply

    def _reject(self, inp: PolicyInput, key: tuple[str | None, str | None], reason: str, raw: str) -> None:
        """A tier-1 checks reply that gives no checks: recorded like a rejected decision; the state gets none."""
        obs = json.loads(inp.observation)
        self.stats.rejected += 1
        self.rejected.append(
            {"turn_id": key[0], "event_type": obs["event_type"], "state_id": key[1], "reason": reason, "raw": raw}
        )
        self.written.append({"turn_id": key[0], "state_id": key[1], "specs": [], "errors": [reason]})
        logger.info("%s: tier-1 checks rejected at turn %s (%s)", self.name, key[0], reason)
        self._plans[key] = _Plan((), f"tier-1 reply rejected ({reason}); no check written. reply: {_quoted(raw)}")

    def _ask_checks(self, inp: PolicyInput, messages: list[Message]) -> None:
        """Tier 1's backend answers ``messages``; :meth:`take_checks` keeps its checks. Never raises."""
        assert self.tier1 is not None
        self.stats.calls += 1
        try:
            reply = self.tier1.chat(messages, tools=None)
            self.stats.prompt_tokens += reply.prompt_tokens
            self.stats.completion_tokens += reply.completion_tokens
            text = cut_reply(reply_to_text(reply), DEFAULT_MAX_REPLY_CHARS)[0]
        except Exception as exc:  # a failing backend costs the checks, never the episode
            self.stats.failures += 1
            logger.warning("%s: tier 1 failed: %s: %s", self.name, type(exc).__name__, exc)
            obs = json.loads(inp.observation)
            self._reject(inp, self._plan_key(inp, obs["current_draft"]), f"the backend raised {type(exc).__name__}: "
                         f"{exc}", "")  # fmt: skip
            return
        self.take_checks(inp, text)

    def _run_checks(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str], check: _Check) -> str:
        """After tier 0's execution checks: ``run_check`` each check tier 1 wrote for the state, then decide with no
        model call: REPAIR from the first check that failed (ABANDON_STATE when the repair budget is spent), else
        confirm. The first response after tier 1's reply carries its note in a ``<think>`` block."""
        plan = self._plans.get(self._plan_key(inp, draft))
        specs = plan.specs[: self._room(check)] if plan is not None else ()
        own = inp.previous[len(check.steps) :]
        note = ""
        if plan is not None and not plan.announced:
            plan.announced, note = True, f"{THINK_OPEN}{_escaped(plan.note)}{THINK_CLOSE}\n"
        if len(own) < len(specs) and "run_check" in legal:
            self.last_actor = POLICY  # tier 1 wrote the spec; tier 0 only sends it
            return note + call("run_check", {"spec": compact_spec(specs[len(own)])})
        failed = failed_check(specs, [_decoded(result) for _, result in own])
        if failed is None:
            return note + call("FINALIZE_RELATIONS", CONFIRM)
        if "REPAIR" not in legal:
            return note + call("ABANDON_STATE")
        return note + _repair(failed.variable, failed.reasoning, failed.evidence)

    # ---------------------------------------------------------------- tier 1 decides
    def messages(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], check: _Check) -> list[Message]:
        """Tier 1's conversation for its next reply in this check activation (see :mod:`.hier_prompts`)."""
        start = draft["source_step_start"]
        unchecked = None
        if check.steps and start is not None and check.steps[0] > start:
            unchecked = (start, check.steps[0] - 1)
        budget = self.max_actions - len(check.steps)
        decisions = [d for d in DECISIONS if d in inp.legal_actions]
        user = render_decision(
            event_type=obs["event_type"],
            turn=turn_view(inp),
            draft=draft,
            checks=check.results,
            unchecked=unchecked,
            index=obs["committed_state_index"],
            decisions=decisions,
            repair_attempts=obs["repair_attempts"],
            max_repairs=self.max_repairs,
            budget=budget,
        )
        messages: list[Message] = view([{"role": "system", "content": self.system}, {"role": "user", "content": user}],
                                       None, self.prompt_view)[0]  # fmt: skip
        results = [result for _, result in inp.previous]
        for k in range(len(check.steps), len(results)):  # the digest counts tier 0's checks and tier 1's calls
            messages.append({"role": "assistant", "content": inp.previous[k][0]})
            messages.append(
                {"role": "user", "content": render_tool_response(results[k], render_evidence(results[: k + 1]))}
            )
        return messages

    def _ask(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], check: _Check) -> str:
        """Tier 1's backend answers :meth:`messages`; its reply when :meth:`vet` accepts it, else :meth:`fallback`."""
        assert self.tier1 is not None
        try:
            messages = self.messages(inp, obs, draft, check)
            self.stats.calls += 1
            reply = self.tier1.chat(messages, tools=self.tools)
        except Exception as exc:  # a failing backend (or prompt) costs the decision, never the episode
            self.stats.failures += 1
            logger.warning("%s: tier 1 failed: %s: %s", self.name, type(exc).__name__, exc)
            return self.fallback(inp, f"the backend raised {type(exc).__name__}: {exc}", "")
        self.stats.prompt_tokens += reply.prompt_tokens
        self.stats.completion_tokens += reply.completion_tokens
        try:
            text, full_chars = cut_reply(reply_to_text(reply), DEFAULT_MAX_REPLY_CHARS)
            problem = self._vet(text, inp)
            if problem is not None and full_chars is not None:
                problem = f"the reply was cut to {len(text)} of its {full_chars} characters; {problem}"
        except Exception as exc:  # a reply the vetting cannot read is a rejected reply
            text, problem = str(getattr(reply, "text", ""))[:DEFAULT_MAX_REPLY_CHARS], _unreadable(exc)
        if problem is not None:
            return self.fallback(inp, problem, text)
        self.last_actor = POLICY
        return text

    def vet(self, text: str, inp: PolicyInput) -> str | None:
        """Why the tier-1 reply ``text`` to ``inp`` is rejected, or None when it goes to the runtime as it is (the
        rules of the module docstring's *Robustness*). Never raises: a reply the vetting cannot read is rejected."""
        try:
            return self._vet(text, inp)
        except Exception as exc:
            return _unreadable(exc)

    def _vet(self, text: str, inp: PolicyInput) -> str | None:
        legal = set(inp.legal_actions)
        parsed = parse_response(text, strict=self.strict_wire)
        if not parsed.ok or parsed.action is None:
            return f"unparseable: {parsed.error}"
        action = parsed.action
        if action.name not in TIER1_TOOLS and action.name not in DECISIONS:
            allowed = ", ".join((*TIER1_TOOLS, *DECISIONS))
            return f"{action.name} is not a tier-1 action (allowed: {allowed})"
        if action.name not in legal:
            return f"{action.name} is not legal now (legal: {', '.join(inp.legal_actions)})"
        if action.name in TIER1_TOOLS and self.max_actions - len(inp.previous) <= 1:
            return f"{action.name} would use the activation's last action, which the decision needs"
        if action.name == "REPAIR":
            hint = action.arguments["error_hint"]
            evidence = action.arguments["analytical_evidence"]
            try:
                render_repair_hint(hint["error_variable"], hint["faulty_reasoning"], evidence)
            except HintError as error:
                return f"the harness would refuse the repair hint: {error}"
            if not quotes_tool_result(evidence, evidence_texts(inp.previous, self.strict_wire)):
                return "REPAIR without evidence: analytical_evidence quotes no check or probe result of the activation"
        return None

    def fallback(self, inp: PolicyInput, reason: str, raw: str) -> str:
        """Record the rejected tier-1 reply ``raw`` to ``inp`` (in :attr:`rejected`, ``stats.rejected``) and return
        tier 0's confirming response in its place, ``reason`` and ``raw`` in its ``<think>`` block (see the module
        docstring); ``last_actor`` becomes ``"harness"``."""
        self.last_actor = HARNESS
        self.stats.rejected += 1
        obs = json.loads(inp.observation)
        turn_id = inp.turn.turn_id if inp.turn is not None else None
        draft = obs["current_draft"] or {}
        entry = {"turn_id": turn_id, "event_type": obs["event_type"], "state_id": draft.get("id")}
        self.rejected.append({**entry, "reason": reason, "raw": raw})
        logger.info("%s: tier-1 reply rejected at turn %s (%s); confirming", self.name, turn_id, reason)
        note = f"tier-1 reply rejected ({_escaped(reason)}); confirmed by the harness. reply: {_quoted(raw)}"
        return f"{THINK_OPEN}{note}{THINK_CLOSE}\n{call('FINALIZE_RELATIONS', CONFIRM)}"


def _is_check(draft: dict[str, Any] | None, legal: set[str]) -> bool:
    """Whether a request is in the check activation: a draft, FINALIZE_RELATIONS legal, COMMIT_STATE not."""
    return draft is not None and "FINALIZE_RELATIONS" in legal and "COMMIT_STATE" not in legal


def _refused(result: str) -> bool:
    """Whether the runtime refused the action whose result is ``result``."""
    return result.startswith(("rejected:", "illegal:"))


def _unreadable(exc: Exception) -> str:
    return f"unreadable reply ({type(exc).__name__}: {exc})"


def _escaped(text: str) -> str:
    """``text`` on one line, without ``<`` and ``>`` (it goes inside a ``<think>`` block)."""
    return " ".join(text.split()).replace("<", "(").replace(">", ")")


def _quoted(raw: str) -> str:
    """``raw`` as a JSON string for a ``<think>`` block: capped, ``<`` and ``>`` escaped."""
    quoted = json.dumps(raw[:REJECTED_RAW_CHARS], ensure_ascii=False)
    return quoted.replace("<", "\\u003c").replace(">", "\\u003e")


def _repair(variable: str, reasoning: str, evidence: str) -> str:
    """Tier 0's REPAIR naming ``variable``: evidence capped; a text that reads as code (an assignment) said in
    words, so that the harness accepts the hint."""
    reasoning, evidence = reasoning[:300], evidence[:400]
    try:
        render_repair_hint(variable, reasoning, evidence)
    except HintError:
        reasoning, evidence = (t.replace("==", " equals ").replace("=", " is ") for t in (reasoning, evidence))
    hint = {"error_variable": variable, "faulty_reasoning": reasoning}
    return call("REPAIR", {"analytical_evidence": evidence, "error_hint": hint})


def _decoded(result: str) -> dict[str, Any]:
    try:
        value = json.loads(result)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
