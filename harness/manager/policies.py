"""Manager policies: what answers the manager's activations.

A policy maps one :class:`~harness.manager.policy_types.PolicyInput` (the rendered observation, the results of the
tool actions it already took in this activation, the legal action names, the public turn and the
:class:`~harness.manager.policy_types.ManagerView` that says which of the turn's oracle parts the manager may see) to
ONE model-style response string in the wire format (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``).
Every policy's text goes through the same parser (:func:`harness.manager.wire.parse_response`) and lifecycle as a
trained model's would.

The policies by spec name (each module registers its own with
:func:`~harness.manager.policy_registry.register_policy`; :func:`~harness.manager.policy_registry.get_policy` builds
one from a spec of the grammar :data:`harness.specs.MANAGER_GRAMMAR`); this module defines ``none`` and ``rule``:

- ``none``: no manager. ``active = False`` tells the runtime to short-circuit: no activations at all (plain worker).
- ``rule``: a deterministic verifier with no model. Per turn: OPEN_STATE at turn start (relations inferred from the
  question's words with :func:`~harness.manager.relations.infer_relations`, or, with ``view.oracle_relations``,
  from the turn's declared ``depends_on``/``relation``; constraints from the turn's public ``constraints``, their
  code only with ``view.executable_constraints``), RESUME_WORKER; at turn end ``check_execution`` on the pending
  steps, then UPDATE_STATE with the variables the sandbox reported; then checks: ``check_execution`` on the state's
  steps, and for every constraint of the state that carries code ``compile_python`` (syntax), ``inspect_python``
  (its inputs) and ``run_probe`` (the runtime checks a probe whose code is one of the open state's constraint codes
  with :func:`~harness.manager.tools.check_constraint`); with text-only constraints only the executions are
  checked. It REPAIRs only on concrete
  evidence (a failed constraint, or a failed execution of the turn's latest executed step), naming a variable
  (the constraint's inputs intersected with the state's variables, else its first input) and the evidence; otherwise
  FINALIZE_RELATIONS(confirm) and COMMIT_STATE. When the repair budget is spent and evidence remains it abandons
  the state. The rule policy is stateless: the same input gives the same response.
- ``llm:URL`` / ``llm-hf:PATH`` and the free-form memory ablation ``freeform:URL`` / ``freeform-hf:PATH``: a chat
  model answers every activation (:mod:`harness.manager.llm_policy`), over an OpenAI-compatible endpoint (URL, its
  API root) or an in-process transformers model (PATH, a local folder).
- ``windowed:K:URL`` / ``windowed-hf:K:PATH``: the "w/o state validity maintenance" ablation: a chat model that sees
  only the public turn and the last K worker steps gives stateless hints or stays silent; no state records, no tools
  (:mod:`harness.manager.windowed`). ``window-rule[:K]`` (default K = 3) repeats the last K steps to the worker with
  no model. The spec ``windowed:K`` without a model is refused, naming these spellings.
- ``hier:llm:URL`` / ``hier:llm-hf:PATH`` / ``hier:none``: the hierarchical manager (:mod:`harness.manager.hier`):
  the rule policy's bookkeeping and execution checks without a model (tier 0), and a chat model asked once per state
  check to confirm it or repair it on quoted evidence (tier 1); ``hier:none`` is tier 0 alone (it confirms where the
  model would decide).
- ``read``: the question reader (:mod:`harness.manager.read_policy`): check specs written from the turn's words
  (:mod:`harness.manager.reader`), run with ``run_check``; no model.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from harness.manager.bookkeeping import opening_relations, update_state_call
from harness.manager.policy_registry import register_policy
from harness.manager.policy_types import (
    MAX_ACTIONS,
    SEGMENT_EVENTS,
    Policy,
    PolicyInput,
    call,
    constraint_view,
)
from harness.pyast import parse_python
from harness.specs import ManagerSpec


def _reported(step: int, result: dict[str, Any]) -> str | None:
    """The rule policy's conclusion of one checked step: the last result it reported, as JSON."""
    if not result.get("results"):
        return None
    return f"step {step} reported {json.dumps(result['results'][-1], ensure_ascii=False)}"


class NonePolicy:
    """No manager: the runtime never activates it (plain worker)."""

    name = "none"
    active = False

    def respond(self, inp: PolicyInput) -> str:
        return call("ABSTAIN")


class RulePolicy:
    """The deterministic verifier manager described in the module docstring.

    In the segment flow (``segment_pause`` / ``task_end`` activations) it resumes the worker until the pending steps
    form a unit (at least ``unit_steps`` of them, or the task has ended), then opens a state (``progress`` from the
    last committed state, else ``init``; the task's public constraints as ``view`` shows them), updates it with the
    pending interval, checks and repairs or commits exactly as at a turn end. At a pause, a constraint that raises
    ``NameError`` is not evidence: the worker has not yet created the variables it reads.
    """

    name = "rule"
    active = True

    def __init__(self, unit_steps: int = 3):
        if unit_steps < 1:
            raise ValueError(f"unit_steps={unit_steps}: a state needs at least one step; use >= 1.")
        self.unit_steps = unit_steps

    def respond(self, inp: PolicyInput) -> str:
        obs = json.loads(inp.observation)
        legal = set(inp.legal_actions)
        draft = obs["current_draft"]
        if "COMMIT_STATE" in legal:
            return call("COMMIT_STATE")
        if "OPEN_STATE" in legal:
            if obs["event_type"] in SEGMENT_EVENTS:
                return self._open_segment(inp, obs)
            return self._open(inp)
        if "FINALIZE_RELATIONS" in legal and draft is not None:
            return self._check(inp, draft, legal, at_pause=obs["event_type"] == "segment_pause")
        if "UPDATE_STATE" in legal and draft is not None:
            if obs["event_type"] == "turn_start":
                return call("RESUME_WORKER")
            return self._update(inp, obs, draft)
        return call("ABSTAIN")

    # ---- turn start
    def _open(self, inp: PolicyInput) -> str:
        turn = inp.turn
        if turn is None:
            return call("ABSTAIN")
        relations = opening_relations(inp)
        constraints = constraint_view(turn.constraints, inp.view)
        return call("OPEN_STATE", {"issue": turn.question, "constraints": constraints, "relations": relations})

    # ---- segment flow: open once the pending steps form a unit
    def _open_segment(self, inp: PolicyInput, obs: dict[str, Any]) -> str:
        pending = obs["untraced_steps"]
        if pending == 0 or (pending < self.unit_steps and not obs["terminal_pending_review"]):
            return call("ABSTAIN" if obs["terminal_pending_review"] else "RESUME_WORKER")
        index = obs["committed_state_index"]
        relations = [{"type": "progress", "related_state_id": index[-1]["id"]}] if index else [{"type": "init"}]
        turn = inp.turn
        constraints = [] if turn is None else constraint_view(turn.constraints, inp.view)
        topic = (turn.question.strip().splitlines() or [""])[0][:200] if turn is not None else "the task"
        issue = f"steps {obs['pending_start_step']}-{obs['pending_end_step']} of: {topic}"
        return call("OPEN_STATE", {"issue": issue, "constraints": constraints, "relations": relations})

    # ---- turn end: update
    def _update(self, inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any]) -> str:
        start, end = obs["pending_start_step"], obs["pending_end_step"]
        steps = [] if start is None else list(range(start, end + 1))[-(MAX_ACTIONS - 1) :]
        if len(inp.tool_results) < len(steps):
            return call("check_execution", {"step_id": steps[len(inp.tool_results)]})
        checks = zip(steps, (json.loads(text) for text in inp.tool_results), strict=False)
        return update_state_call(draft, obs, checks, _reported, no_result="the turn produced no reported result")

    # ---- turn end: checks, then repair or finalize
    def _plan(self, draft: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        codes = [c["code"] for c in draft["constraints"] if c.get("code")]
        per_constraint = [
            step for code in codes for step in (("compile_python", {"code": code}), ("inspect_python", {"code": code}))
        ] + [("run_probe", {"code": code}) for code in codes]
        room = max(MAX_ACTIONS - 1 - len(per_constraint), 1)
        start, end = draft["source_step_start"], draft["source_step_end"]
        steps = [] if start is None else list(range(start, end + 1))[-room:]
        return [("check_execution", {"step_id": s}) for s in steps] + per_constraint

    def _check(self, inp: PolicyInput, draft: dict[str, Any], legal: set[str], at_pause: bool = False) -> str:
        plan = self._plan(draft)[: MAX_ACTIONS - 1]
        done = len(inp.tool_results)
        if done < len(plan):
            name, arguments = plan[done]
            return call(name, arguments)
        found = _evidence(plan, [json.loads(t) for t in inp.tool_results], draft, at_pause=at_pause)
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


def written_names(code: str) -> list[str]:
    """The names ``code`` binds at top level, in order (assignment targets, augmented and annotated ones). Code that
    does not parse (a syntax error, a cell cut by the display cap) is read line by line: ``name = ...``,
    ``name[...] = ...`` and ``name += ...`` at the start of a line."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        found = re.findall(r"^([A-Za-z_]\w*)\s*(?:\[[^\]\n]*\])?\s*(?:[-+*/%]|//)?=(?!=)", code, re.MULTILINE)
        return list(dict.fromkeys(found))
    names: list[str] = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for target in targets:
            for sub in ast.walk(target) if target is not None else ():
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
    return names


def execution_evidence(checks: Iterable[Mapping[str, Any]], state_vars: list[str]) -> tuple[str, str, str] | None:
    """``(variable, faulty reasoning, evidence)`` when the latest executed step among ``checks`` (``check_execution``
    results, in step order; calls that were themselves wrong are skipped) failed, else None. The variable is the
    state's first one (``state_vars``), else the first name the failed cell assigns (its ``code``), else
    ``"step N"``. An earlier failed step that a later one re-ran
    successfully is no evidence."""
    executed = [r for r in checks if r.get("ok")]
    if not executed or executed[-1].get("verdict") != "failed":
        return None
    last = executed[-1]
    variable = (
        state_vars[0] if state_vars else (written_names(last.get("code") or "") or [f"step {last['step_id']}"])[0]
    )
    error = f"{last.get('error_type')}: {last.get('error_message')}"
    return variable, f"the cell of step {last['step_id']} did not run successfully", f"execution failed: {error}"


def _evidence(
    plan: list[tuple[str, dict[str, Any]]],
    results: list[dict[str, Any]],
    draft: dict[str, Any],
    at_pause: bool = False,
) -> tuple[str, str, str] | None:
    """``(variable, faulty reasoning, evidence)`` for the first concrete error the tool results show, else None.
    ``at_pause``: a constraint that raised ``NameError`` is skipped (its variables do not exist yet)."""
    state_vars = [v["name"] for v in draft["used_variables"]]
    checks = [r for (name, _), r in zip(plan, results, strict=False) if name == "check_execution"]
    failed = execution_evidence(checks, state_vars)
    if failed is not None:
        return failed
    codes = [args["code"] for name, args in plan if name == "run_probe"]
    by_code: dict[str, dict[str, dict[str, Any]]] = {}
    for (name, args), result in zip(plan, results, strict=False):
        by_code.setdefault(args.get("code", ""), {})[name] = result
    for code in codes:
        checks = by_code.get(code, {})
        compiled, inspected, probe = (checks.get(k, {}) for k in ("compile_python", "inspect_python", "run_probe"))
        if not compiled.get("valid") or not probe.get("ok"):
            continue  # a constraint that does not compile or could not run is no evidence about the worker
        failed = probe.get("passed") is False or (probe.get("passed") is None and probe.get("succeeded") is False)
        if not failed or (at_pause and probe.get("error_type") == "NameError"):
            continue
        # name a variable the constraint reads, preferring one this state wrote (a heavy repair may have deleted it)
        read = inspected.get("inputs", [])
        inputs = [n for n in read if n in state_vars] or list(read)
        if not inputs:
            continue  # the constraint reads no variable: nothing to localize
        text = next((c["text"] for c in draft["constraints"] if c.get("code") == code), "a constraint")
        reason = probe.get("reason") or f"{probe.get('error_type')}: {probe.get('error_message')}"
        evidence = f"constraint '{text}' failed: {reason}"
        if probe.get("values"):
            evidence += f"; operands: {json.dumps(probe['values'], ensure_ascii=False)}"
        return inputs[0], f"the value of {inputs[0]} violates the stated constraint: {text}", evidence[:400]
    return None


@register_policy("none")
def _none(spec: ManagerSpec) -> Policy:
    return NonePolicy()


@register_policy("rule")
def _rule(spec: ManagerSpec) -> Policy:
    return RulePolicy()
