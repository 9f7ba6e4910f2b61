"""Manager policies: what answers the manager's activations.

A policy maps one :class:`PolicyInput` (the rendered observation, the results of the tool actions it already took
in this activation, the legal action names, the public turn and the :class:`ManagerView` that says which of the
turn's oracle parts the manager may see) to ONE model-style response string in
the wire format (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``). Every policy's text goes through the
same parser (:func:`harness.manager.wire.parse_response`) and lifecycle as a trained model's would.

Policies (:data:`POLICIES`, :func:`get_policy`):

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
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.manager.actions import make_action
from harness.manager.lifecycle import Lifecycle
from harness.manager.relations import infer_relations
from harness.manager.wire import render_action
from harness.tasks import Task, Turn

MAX_ACTIONS = Lifecycle().max_actions  # the rule policy plans its tool calls within one activation's budget


@dataclass(frozen=True)
class ManagerView:
    """Which oracle parts of a turn the manager may see (both off on a real benchmark).

    Off, a policy sees of a turn its id, question, context and constraint texts, plus which committed state covers
    each earlier turn (the harness's own bookkeeping); it infers relations from the question's words and writes its
    own checks from constraint texts."""

    oracle_relations: bool = field(
        default=False,
        metadata={"help": "Show the task's dependency graph (depends_on, declared relation); else inferred."},
    )
    executable_constraints: bool = field(
        default=False, metadata={"help": "Show each constraint's executable code; else its text only."}
    )

    @classmethod
    def of(cls, task: Task, oracle_relations: bool = False, executable_constraints: bool = False) -> ManagerView:
        """The view of ``task``'s turns under the two switches; constraint code is shown also when the task declares
        it public (:func:`constraint_code_public`)."""
        return cls(oracle_relations, executable_constraints or constraint_code_public(task))


CODE_PUBLIC_KEY = "constraint_code_public"
"""Task metadata key: true when the task publishes its constraints' code as part of the question (default false)."""


def constraint_code_public(task: Task) -> bool:
    """Whether ``task`` declares its constraint code public (``metadata.constraint_code_public: true``)."""
    value = (task.config.metadata or {}).get(CODE_PUBLIC_KEY, False)
    if not isinstance(value, bool):
        raise ValueError(
            f"task {task.id}: metadata.{CODE_PUBLIC_KEY} must be true or false, got {value!r}; fix its config.yaml."
        )
    return value


@dataclass(frozen=True)
class PolicyInput:
    """Everything a policy is given for one response (the runtime records all of it)."""

    observation: str = field(metadata={"help": "ManagerObservation.render() of the current activation step."})
    tool_results: tuple[str, ...] = field(
        default=(), metadata={"help": "Rendered results of the tool actions taken so far in this activation."}
    )
    legal_actions: tuple[str, ...] = field(default=(), metadata={"help": "Action names legal now (lifecycle)."})
    turn: Turn | None = field(
        default=None,
        metadata={"help": "The turn; a policy shows or uses only what `view` allows of it (see turn_view)."},
    )
    turn_states: Mapping[str, str] = field(
        default_factory=dict, metadata={"help": "Turn id -> id of the committed state that covers it."}
    )
    view: ManagerView = field(
        default=ManagerView(), metadata={"help": "Which oracle parts of the turn the manager may see."}
    )
    previous: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata={
            "help": "(raw response, result text) of every earlier action of this activation, in order, legal or "
            "not: what a chat model needs to continue its conversation within the activation."
        },
    )

    def text(self) -> str:
        """All of the input as one text, the turn as :func:`turn_view` shows it (what the information-boundary
        test scans)."""
        turn = None if self.turn is None else json.dumps(turn_view(self), ensure_ascii=False)
        return "\n".join(
            [
                self.observation,
                *self.tool_results,
                " ".join(self.legal_actions),
                turn or "",
                json.dumps(self.turn_states),
                *(f"{raw}\n{result}" for raw, result in self.previous),
            ]
        )


class Policy(Protocol):
    name: str
    active: bool

    def respond(self, inp: PolicyInput) -> str: ...


def constraint_view(constraints: Iterable[Any], view: ManagerView) -> list[dict[str, str]]:
    """Constraints as the manager sees them: ``{"text"}``, plus ``"code"`` when one is given and ``view`` shows it."""
    shown = view.executable_constraints
    return [{"text": c.text, **({"code": c.code} if shown and c.code else {})} for c in constraints]


def turn_view(inp: PolicyInput) -> dict[str, Any] | None:
    """The turn as the manager sees it (None without a turn): ``turn_id``, ``question``, ``context``,
    ``constraints`` (:func:`constraint_view`) and ``committed_states_by_turn`` (turn id -> committed state id, for
    every committed turn); with ``view.oracle_relations`` also the task graph: ``depends_on_turns``,
    ``declared_relation`` and ``committed_states_of_those_turns``."""
    turn = inp.turn
    if turn is None:
        return None
    shown: dict[str, Any] = {"turn_id": turn.turn_id, "question": turn.question, "context": turn.context}
    if inp.view.oracle_relations:
        shown |= {
            "depends_on_turns": list(turn.depends_on),
            "declared_relation": turn.relation,
            "committed_states_of_those_turns": {
                t: inp.turn_states[t] for t in turn.depends_on if t in inp.turn_states
            },
        }
    shown["committed_states_by_turn"] = dict(inp.turn_states)
    shown["constraints"] = constraint_view(turn.constraints, inp.view)
    return shown


def declared_relations(
    depends_on: Iterable[str], relation: str, turn_states: Mapping[str, str]
) -> list[dict[str, Any]]:
    """OPEN_STATE relations from the task graph (a turn's ``depends_on`` and ``relation``, an oracle): the declared
    relation to the committed states of the dependencies; ``init`` when none is committed, ``progress``/``combine``
    when the declared relation does not fit the committed ones. The evaluation's gold relations too."""
    related = list(dict.fromkeys(turn_states[t] for t in depends_on if t in turn_states))
    if relation == "init" or not related or (relation == "combine" and len(related) < 2):
        kind = "init" if not related else "progress" if len(related) == 1 else "combine"
    else:
        kind = relation
    return [{"type": "init"}] if kind == "init" else [{"type": kind, "related_state_id": s} for s in related]


def call(name: str, arguments: dict[str, Any] | None = None) -> str:
    """The wire text of one action (what a policy answers)."""
    return render_action(make_action(name, arguments or {}))


class NonePolicy:
    """No manager: the runtime never activates it (plain worker)."""

    name = "none"
    active = False

    def respond(self, inp: PolicyInput) -> str:
        return call("ABSTAIN")


SEGMENT_EVENTS = ("segment_pause", "task_end")


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
        if inp.view.oracle_relations:
            relations = declared_relations(turn.depends_on, turn.relation, inp.turn_states)
        else:
            relations = infer_relations(turn.question, turn.context, inp.turn_states)
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
        names: list[str] = []
        conclusions: list[str] = []
        for sid, text in zip(steps, inp.tool_results, strict=False):
            result = json.loads(text)
            if not result.get("ok"):
                continue
            names += [v["name"] for v in result.get("variables", []) if v.get("type") is not None]
            if result.get("results"):
                conclusions.append(f"step {sid} reported {json.dumps(result['results'][-1], ensure_ascii=False)}")
        interval = {"start_step": start or 0, "end_step": end if end is not None else 0}
        return call(
            "UPDATE_STATE",
            {
                "issue": draft["issue"],
                "source_interval": interval,
                "used_variables": list(dict.fromkeys(names)),
                "conclusions": conclusions or ["the turn produced no reported result"],
            },
        )

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
        tree = ast.parse(code)
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


class PolicySpecError(ValueError):
    """A manager spec whose argument is missing, extra or malformed (:func:`get_policy` adds the grammar)."""


def _no_argument(factory: Callable[[], Policy]) -> Callable[[str | None], Policy]:
    def make(argument: str | None) -> Policy:
        if argument is not None:
            raise PolicySpecError(f"this policy takes no argument, got {argument!r}")
        return factory()

    return make


def _k(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise PolicySpecError(f"K must be a whole number >= 1 (the number of recent steps shown), got {text!r}")
    return int(text)


def _url(argument: str | None) -> str:
    if not argument:
        raise PolicySpecError("URL (the endpoint's API root, such as http://localhost:8000/v1) is missing")
    if not argument.startswith(("http://", "https://")):
        raise PolicySpecError(f"URL must be an http(s) API root like http://localhost:8000/v1, got {argument!r}")
    return argument


def _folder(argument: str | None) -> str:
    from pathlib import Path

    if not argument:
        raise PolicySpecError("PATH (a local transformers model folder) is missing")
    if not Path(argument).is_dir():
        raise PolicySpecError(
            f"model folder {argument} does not exist; give a local folder with config.json and tokenizer files"
        )
    return argument


def _window_rule(argument: str | None) -> Policy:
    from harness.manager.windowed import WindowRulePolicy  # imported here: windowed.py imports this module

    return WindowRulePolicy() if argument is None else WindowRulePolicy(_k(argument))


def _windowed(hf: bool) -> Callable[[str | None], Policy]:
    def make(argument: str | None) -> Policy:
        from harness.llm import HFChatBackend, OpenAIChatBackend
        from harness.manager.windowed import WindowedModelPolicy  # imported here: windowed.py imports this module

        k, colon, model = (argument or "").partition(":")
        if not colon:
            got = "no argument" if argument is None else f"only {argument!r}"
            raise PolicySpecError(
                f"the windowed ablation is model-backed: give K and a model, windowed:K:URL (an OpenAI-compatible "
                f"endpoint) or windowed-hf:K:PATH (a local transformers folder); the model-free reminder of the last "
                f"K steps is window-rule:K; got {got}"
            )
        size = _k(k)
        if hf:
            return WindowedModelPolicy(HFChatBackend(_folder(model)), size, name="windowed-hf")
        return WindowedModelPolicy(OpenAIChatBackend(_url(model)), size, name="windowed")

    return make


def _endpoint(freeform: bool) -> Callable[[str | None], Policy]:
    def make(argument: str | None) -> Policy:
        from harness.manager.llm_policy import openai_policy  # imported here: llm_policy.py imports this module

        return openai_policy(_url(argument), freeform=freeform)

    return make


def _local_model(freeform: bool) -> Callable[[str | None], Policy]:
    def make(argument: str | None) -> Policy:
        from harness.manager.llm_policy import hf_policy  # imported here: llm_policy.py imports this module

        return hf_policy(_folder(argument), freeform=freeform)

    return make


def _hier(argument: str | None) -> Policy:
    from harness.manager.hier import HierPolicy, hier_hf_policy, hier_openai_policy  # hier.py imports this module

    tier1, _, model = (argument or "").partition(":")
    if tier1 == "none" and argument == "none":
        return HierPolicy(None, name="hier-none")
    if tier1 == "llm":
        return hier_openai_policy(_url(model))
    if tier1 == "llm-hf":
        return hier_hf_policy(_folder(model))
    got = "no argument" if argument is None else repr(argument)
    raise PolicySpecError(
        f"the hierarchical manager takes its decision model: hier:none (the harness alone), hier:llm:URL (an "
        f"OpenAI-compatible endpoint) or hier:llm-hf:PATH (a local transformers folder); got {got}"
    )


POLICIES: dict[str, Callable[[str | None], Policy]] = {
    "none": _no_argument(NonePolicy),
    "rule": _no_argument(RulePolicy),
    "window-rule": _window_rule,
    "windowed": _windowed(hf=False),
    "windowed-hf": _windowed(hf=True),
    "llm": _endpoint(freeform=False),
    "llm-hf": _local_model(freeform=False),
    "freeform": _endpoint(freeform=True),
    "freeform-hf": _local_model(freeform=True),
    "hier": _hier,
}
"""Manager spec name -> factory of the policy, given the spec's argument (the text after the first ``:``) or None."""

POLICY_GRAMMAR = (
    "none | rule | window-rule[:K] | windowed:K:URL | windowed-hf:K:PATH | llm:URL | llm-hf:PATH | freeform:URL | "
    "freeform-hf:PATH | hier:none | hier:llm:URL | hier:llm-hf:PATH"
)


def get_policy(spec: str) -> Policy:
    """A new policy from a manager spec ``NAME[:ARGUMENT]`` (grammar :data:`POLICY_GRAMMAR`).

    An unknown name or a missing, extra or malformed argument raises ``ValueError`` naming the spec, the grammar and
    an example; a ``-hf`` PATH that is not a folder is named."""
    name, colon, argument = spec.partition(":")
    factory = POLICIES.get(name)
    example = (
        "e.g. --manager rule, --manager llm:http://localhost:8000/v1 or --manager windowed:3:http://localhost:8000/v1"
    )
    if factory is None:
        raise ValueError(
            f"unknown manager policy {name!r} (spec {spec!r}); valid names: {', '.join(POLICIES)}. "
            f"Grammar: {POLICY_GRAMMAR}; {example}."
        )
    try:
        return factory(argument if colon else None)
    except PolicySpecError as error:
        raise ValueError(f"manager spec {spec!r}: {error}. Grammar: {POLICY_GRAMMAR}; {example}.") from None
