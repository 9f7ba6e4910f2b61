"""The ``read`` manager: the question reader (:mod:`harness.manager.reader`) played as a policy, no model.

Per turn (turn-aligned flow), as the rule tier, with checks written from the turn's words:

- **turn start** -> ``OPEN_STATE``: the issue ``Turn N: <question> | Context: <context>``, the turn's public
  constraint texts, the relations the question names in words (:func:`~harness.manager.relations.infer_relations`;
  the task graph's with ``view.oracle_relations``).
- **turn end, state open** -> ``check_execution`` of each pending step (at most :data:`MAX_STEPS`), one ``run_probe``
  that lists the full columns of the frames whose summary was cut, then ``UPDATE_STATE`` with the variables the
  steps wrote and the issue note extended with them (``| Wrote: name (frame: a, b); other (series)``). The note is
  the reader's memory: the committed-state index shows every earlier turn's note, so a later turn finds its sources
  ("Using the result of turn 3") and the revisions that still stand without a tool call.
- **turn end, state updated** -> ``check_execution`` of the latest step, then one ``run_check`` per spec
  :func:`~harness.manager.reader.read_turn` writes from the notes (at most :data:`MAX_CHECKS`); ``REPAIR`` iff the
  step failed or a check failed (the hint names the check's variable and quotes its reason), else
  ``FINALIZE_RELATIONS(confirm)``; ``ABANDON_STATE`` when evidence remains and the repair budget is spent.
- **finalized** -> ``COMMIT_STATE``.

The segment-induced flow (``segment_pause`` / ``task_end``) is the rule policy's. The policy is stateless: the same
input gives the same response. It reads the turn's question, context and constraint texts and what its own tools
returned; never slots, reference code or private files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from harness.checks.spec import CheckSpec
from harness.manager.bookkeeping import one_line, opening_relations, update_state_call
from harness.manager.hints import HintError, render_repair_hint
from harness.manager.policies import RulePolicy, execution_evidence
from harness.manager.policy_registry import register_policy
from harness.manager.policy_types import (
    MAX_ACTIONS,
    SEGMENT_EVENTS,
    Policy,
    PolicyInput,
    call,
    constraint_view,
)
from harness.manager.reader import NotedTurn, Variable, read_turn, summary_columns, variable_kind
from harness.specs import ManagerSpec

MAX_STEPS = 5
"""Steps of a turn whose ``check_execution`` the update reads (the latest ones)."""
MAX_CHECKS = MAX_ACTIONS - 2
"""``run_check`` calls of one check activation (with ``check_execution`` and the decision, the 8 actions)."""
EVIDENCE_CHARS = 360
"""Characters of a failed check's result quoted as ``analytical_evidence``."""

_NOTE = re.compile(r"^Turn (\S+?): (.*?)(?: \| Context: (.*?))?(?: \| Wrote: (.*))?$", re.DOTALL)


# ---------------------------------------------------------------- the note: the reader's memory in the state's issue
def note(turn_id: str, question: str, context: str, variables: Sequence[Variable] = ()) -> str:
    """The issue the reader writes: ``Turn N: question | Context: context | Wrote: name (kind: columns); ...``."""
    text = f"Turn {turn_id}: {one_line(question, 2000)}"
    if context.strip():
        text += f" | Context: {one_line(context, 2000)}"
    if variables:
        shown = [
            f"{v.name} ({v.kind}: {', '.join(v.columns)})" if v.columns else f"{v.name} ({v.kind})" for v in variables
        ]
        text += " | Wrote: " + "; ".join(shown)
    return text


def parse_note(issue: str) -> NotedTurn | None:
    """The :class:`NotedTurn` of an issue :func:`note` wrote, else None."""
    match = _NOTE.match(issue.strip())
    if match is None:
        return None
    variables = []
    for part in (match.group(4) or "").split("; "):
        item = re.match(r"^([A-Za-z_]\w*) \((\w+)(?:: (.*))?\)$", part.strip())
        if item:
            columns = tuple(c.strip() for c in (item.group(3) or "").split(", ") if c.strip())
            variables.append(Variable(item.group(1), item.group(2), columns))
    return NotedTurn(match.group(1), match.group(2), match.group(3) or "", tuple(variables))


def written_variables(
    results: Sequence[dict[str, Any]], columns: dict[str, list[str]] | None = None
) -> list[Variable]:
    """The variables the ``check_execution`` ``results`` list (deleted ones left out; a later step's wins), with
    ``columns`` (name -> full column list) where a probe listed them."""
    found: dict[str, Variable] = {}
    for result in results:
        if not result.get("ok", True):
            continue
        for v in result.get("variables", []):
            if v.get("type") is None or not isinstance(v.get("name"), str):
                found.pop(v.get("name"), None)
                continue
            kind = variable_kind(v["type"])
            shown = tuple((columns or {}).get(v["name"]) or summary_columns(v.get("summary", ""))[0])
            found.pop(v["name"], None)
            found[v["name"]] = Variable(v["name"], kind, shown if kind == "frame" else ())
    return list(found.values())


def _cut_frames(results: Sequence[dict[str, Any]]) -> list[str]:
    names = []
    for result in results:
        for v in result.get("variables", []):
            if variable_kind(v.get("type")) == "frame" and summary_columns(v.get("summary", ""))[1]:
                names.append(v["name"])
    return list(dict.fromkeys(names))


def _columns_probe(names: Sequence[str]) -> str:
    body = ", ".join(f"{name!r}: [str(c) for c in {name}.columns]" for name in names)
    return f"print_result({{{body}}})"


# ---------------------------------------------------------------- the policy
class ReadPolicy:
    """The question reader as a manager (see the module docstring)."""

    name = "read"
    active = True

    def __init__(self) -> None:
        self._segments = RulePolicy()

    def respond(self, inp: PolicyInput) -> str:
        obs = json.loads(inp.observation)
        if obs["event_type"] in SEGMENT_EVENTS:
            return self._segments.respond(inp)
        legal = set(inp.legal_actions)
        draft = obs["current_draft"]
        if "COMMIT_STATE" in legal:
            return call("COMMIT_STATE")
        if "OPEN_STATE" in legal and obs["event_type"] == "turn_start":
            return self._open(inp)
        if draft is None:
            return call("ABSTAIN")
        if obs["event_type"] == "turn_start":
            return call("RESUME_WORKER")
        if "FINALIZE_RELATIONS" in legal:
            return self._check(inp, obs, draft, legal)
        if "UPDATE_STATE" in legal:
            return self._update(inp, obs, draft)
        return call("ABSTAIN")

    # ---- turn start
    def _open(self, inp: PolicyInput) -> str:
        turn = inp.turn
        if turn is None:
            return call("ABSTAIN")
        relations = opening_relations(inp)
        issue = note(turn.turn_id, turn.question, turn.context or "")
        constraints = constraint_view(turn.constraints, inp.view)
        return call("OPEN_STATE", {"issue": issue, "constraints": constraints, "relations": relations})

    # ---- turn end: check the steps, list cut columns, update with the note
    def _update(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> str:
        start, end = obs["pending_start_step"], obs["pending_end_step"]
        steps = [] if start is None else list(range(start, end + 1))[-MAX_STEPS:]
        done = [json.loads(text) for text in inp.tool_results]
        if len(done) < len(steps):
            return call("check_execution", {"step_id": steps[len(done)]})
        checked = done[: len(steps)]
        cut = _cut_frames([r for r in checked if r.get("ok")])
        if cut and len(done) == len(steps):
            return call("run_probe", {"code": _columns_probe(cut)})
        columns: dict[str, list[str]] = {}
        if cut and len(done) > len(steps):
            listed = done[len(steps)].get("results") or [{}]
            columns = {k: list(v) for k, v in listed[-1].items() if isinstance(v, list)} if listed else {}
        variables = written_variables(checked, columns)
        turn = inp.turn
        issue = draft["issue"]
        if turn is not None:
            issue = note(turn.turn_id, turn.question, turn.context or "", variables)

        def conclude(step: int, result: dict[str, Any]) -> str | None:
            if result.get("results"):
                reported = json.dumps(result["results"][-1], ensure_ascii=False, sort_keys=True)
                return f"Step {step} reported {one_line(reported, 300)}."
            return None

        call_text = update_state_call(
            {**draft, "issue": issue}, obs, zip(steps, checked, strict=False), conclude, no_result="No result."
        )
        return call_text

    # ---- turn end: the checks the words state, then repair or confirm
    def specs(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> list[CheckSpec]:
        """The specs of the turn of ``inp`` from the notes of its draft and of the committed states."""
        own = parse_note(draft["issue"])
        turn = inp.turn
        if own is None or turn is None:
            return []
        earlier = [n for s in obs["committed_state_index"] if (n := parse_note(s["issue"])) is not None]
        earlier = [n for n in earlier if n.turn_id != own.turn_id]
        texts = [c["text"] for c in draft.get("constraints", [])]
        specs = read_turn(turn.question, turn.context or "", own.variables, earlier, texts)
        return specs[:MAX_CHECKS]

    def _check(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], legal: set[str]) -> str:
        last = draft["source_step_end"]
        plan: list[tuple[str, dict[str, Any], CheckSpec | None]] = []
        if last is not None:
            plan.append(("check_execution", {"step_id": last}, None))
        plan += [("run_check", {"spec": spec.to_dict()}, spec) for spec in self.specs(inp, obs, draft)]
        done = len(inp.tool_results)
        if done < len(plan):
            name, arguments, _ = plan[done]
            return call(name, arguments)
        results = [json.loads(text) for text in inp.tool_results]
        found = _evidence(plan, results, [v["name"] for v in draft["used_variables"]])
        if found is None:
            return call("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})
        if "REPAIR" not in legal:
            return call("ABANDON_STATE")
        variable, reasoning, evidence = found
        return call(
            "REPAIR",
            {
                "analytical_evidence": evidence,
                "error_hint": {"error_variable": variable, "faulty_reasoning": reasoning},
            },
        )


def _evidence(
    plan: Sequence[tuple[str, dict[str, Any], CheckSpec | None]],
    results: Sequence[dict[str, Any]],
    state_vars: list[str],
) -> tuple[str, str, str] | None:
    """``(variable, faulty reasoning, evidence)`` of a failed step or the first failed check, else None. A check that
    could not run (``passed`` None, a refused spec) is no evidence."""
    checks = [r for (name, _, _), r in zip(plan, results, strict=False) if name == "check_execution"]
    failed = execution_evidence(checks, state_vars)
    if failed is not None:
        return failed
    for (name, _, spec), result in zip(plan, results, strict=False):
        if name != "run_check" or spec is None or not result.get("ok") or result.get("passed") is not False:
            continue
        requirement = result.get("requirement") or spec.kind
        reasoning = one_line(f"it does not meet what the turn states: {requirement}", 300)
        quoted = one_line(f"run_check failed: {result.get('reason') or requirement}", EVIDENCE_CHARS)
        try:
            render_repair_hint(spec.variable, reasoning, quoted)
        except HintError:  # the quote parses as an assignment: say it in words
            quoted = quoted.replace("==", " equals ").replace("=", " is ")
        return spec.variable, reasoning, quoted
    return None


@register_policy("read")
def _read(spec: ManagerSpec) -> Policy:
    return ReadPolicy()
