"""The manager's prompts: the system policy, its ablations, and the activation text.

- :data:`MANAGER_SYSTEM_POLICY`: role, information boundary, authority, the turn-end checklist, evidence-gated repair,
  the response format (exactly one action), and the two flow templates (turn-aligned, segment-induced).
- :data:`FREEFORM_SYSTEM`: the free-form memory ablation, built from the same text blocks: role, information
  boundary, authority, evidence-gated repair, both flow templates (the order of the control actions, without the
  checks) and the response format; without the prescribed state schema (what a state records) and the verification
  policy (the checklist).
- :data:`WINDOWED_SYSTEM` and :func:`render_window`: the windowed ablation (:mod:`harness.manager.windowed`): a model
  that sees the public turn and the last K worker steps and answers ``<hint>...</hint>`` or ``<silent/>``.
- :func:`render_activation`: the user message that opens one activation, built from a
  :class:`~harness.manager.policy_types.PolicyInput` (the observation as the activation started, the public turn as its
  ``view`` allows, and the legal actions). :func:`render_tool_response` wraps one action result for the continuation
  of the activation; :func:`render_tool_responses` renders an activation's results in order, each with the evidence
  digest (:func:`render_evidence`) of the results up to it as its last line.

The action list and its argument schemas are not repeated here: they reach the model as the function-tool list
(:func:`harness.manager.actions.tool_schemas`), which the chat template renders.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from harness.checks import CHECK_KINDS, spec_schema
from harness.manager.actions import ACTION_SPECS
from harness.manager.policy_types import PolicyInput, turn_view
from harness.manager.records import ManagerObservation
from harness.manager.wire import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from harness.tasks import Turn
from harness.untrusted import neutralize

_TOOL_NAMES = ", ".join(spec.name for spec in ACTION_SPECS if spec.kind == "tool")


def _enum(schema: dict[str, Any]) -> list[Any] | None:
    """The allowed values of a field's schema (an ``enum``, possibly nullable), else None."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    return options[0].get("enum") if len(options) == 1 else None


def check_kind_lines() -> list[str]:
    """The check kinds of :data:`harness.checks.CHECK_KINDS` from their JSON schemas: a line of the allowed values of
    each field that has the same ones in several kinds (``agg``), then one line per kind: the kind, its fields (``?``
    optional, ``:a|b`` the allowed values of the others) and its summary: ``- top_k(variable, source, k,
    order:largest|smallest, column?): variable lists ...``."""
    schemas = {kind: spec_schema(kind) for kind in CHECK_KINDS}
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for schema in schemas.values():
        for name, sub in schema["properties"].items():
            if (enum := _enum(sub)) is not None and name != "kind":
                seen.setdefault(name, []).append(tuple(enum))
    shared = {name: enums[0] for name, enums in seen.items() if len(enums) > 1 and len(set(enums)) == 1}
    lines = [f"{name}: {'|'.join(map(str, values))}" for name, values in shared.items()]
    for kind, schema in schemas.items():
        listed = []
        for name, sub in schema["properties"].items():
            if name == "kind":
                continue
            enum = _enum(sub) if name not in shared else None
            optional = "" if name in schema["required"] else "?"
            listed.append(f"{name}{optional}{':' + '|'.join(map(str, enum)) if enum else ''}")
        lines.append(f"- {kind}({', '.join(listed)}): {schema['description'].replace('`', '')}")
    return lines


CHECKS_SECTION = "\n".join(
    [
        "# Check specs (run_check)",
        'A spec is {"kind": <kind>, <field>: <value>, ...}; variable is the worker variable checked,',
        "source/left/right the variables it is recomputed from, a field with ? may be left out. A failed check is",
        "evidence. Kinds:",
        *check_kind_lines(),
    ]
)

_FORMAT = f"""\
# Response format
Every response holds exactly ONE action: optionally a short <think>...</think> block, then one
{TOOL_CALL_OPEN}{{"name": <action name>, "arguments": {{...}}}}{TOOL_CALL_CLOSE}
and nothing else. Never two calls, never a tool action together with a control action, no prose outside the tags.
Tool actions ({_TOOL_NAMES}) are read-only:
their result comes back to you and the activation continues. Control actions (RESUME_WORKER, OPEN_STATE, UPDATE_STATE,
FINALIZE_RELATIONS, COMMIT_STATE, REPAIR, ABANDON_STATE, ABSTAIN) end the activation. Use only the actions listed as
legal now; an activation allows at most 8 actions. A malformed or illegal response is refused and the reason is
returned to you; it still uses up one action."""

_ROLE_HEAD = """\
You are the state manager of a data-analysis session. A separate worker agent analyses data by running Python cells
in a persistent interpreter. You watch its trace from outside and keep"""

_STATE_SCHEMA = """\
 an explicit, checkable record of the analysis
as analytical states: the issue a stretch of work settles, its constraints, the variables it relied on, its
conclusions, and its relations to earlier committed states (init, progress, branch, invalidate, combine)."""

_FREE_RECORD = """\
 your own record of the analysis as states,
in whatever form you find useful."""

_BOUNDARY_AND_AUTHORITY = """\
# Information boundary
You see only what the harness shows you: the observation, the public question of the turn, the worker's trace
through your tools, and committed states. You never see private task data, graders or reference answers, and you
must not guess them. Judge the work only by runtime evidence.

# Authority
You never edit or run the worker's code and you never solve the task. You record, verify and hint. A hint you give
is reference material: the worker decides what to do with it. Never put replacement code or the answer in a hint.
The harness does the bookkeeping: it assigns state ids, binds variable names to versions and values, sets source
intervals, normalizes relations and takes checkpoints. You supply only the analytical meaning."""

_CHECKLIST = """\
# Checklist at the end of a turn or segment
1. UPDATE_STATE: the issue as actually addressed, one inclusive interval of worker steps, the variables the
   conclusions rely on (names only), and the conclusions with the numbers the trace shows.
2. Check before you conclude: check_execution on the steps that produced the result; for each requirement the turn
   states, write a check spec as the constraint's check (in UPDATE_STATE's constraints) and run_check it; for one no
   kind covers, a short check (its code when the public turn gives one), compile_python and run_probe it;
   inspect_python a cell when its inputs or filters matter; load_state an upstream state when the result depends on it.
3. If a tool result shows a concrete error, REPAIR. Otherwise FINALIZE_RELATIONS (confirm the provisional relations,
   or revise them with the evidence), then COMMIT_STATE.

"""

_REPAIR = """\
# Evidence-gated repair
REPAIR only on concrete evidence from a tool result: a failed execution, a violated constraint, a probe whose output
contradicts the state. Each tool result ends with a line "[evidence this activation: ...]" that counts the failed
checks and probes of this activation so far and quotes the first failure. Name the error variable and the faulty
reasoning in words, and quote the evidence. A hunch, a style concern or a result that merely looks surprising is not
evidence. A false repair costs more than a missed one: when in doubt, finalize.
You have at most 3 repair attempts per state (the first is light: a hint only; later ones are heavy: the harness
also deletes the named variable before the worker retries); when they are spent the state is abandoned or rolled
back."""


def _flows(checklist: bool) -> str:
    """The two flow templates; ``checklist``: the turn end refers to the checklist and both flows name the checks."""
    turn_end = "follow the checklist: UPDATE_STATE, checks, then" if checklist else "UPDATE_STATE, then"
    check = "check, " if checklist else ""
    return f"""\
# Flow: turn-aligned (multi-turn tasks; one state per turn)
- turn_start: compare the new question with committed_state_index and OPEN_STATE with provisional relations (init
  when no committed state fits; the question names the earlier turns it builds on, and committed_states_by_turn
  gives their state ids). The harness shows the related committed states to the worker as reference hints.
  If a state is already open, RESUME_WORKER.
- turn_end: {turn_end} REPAIR or FINALIZE_RELATIONS, then COMMIT_STATE. Each
  control action ends one activation; the harness activates you again (current_draft shows the state so far) until
  the state is committed or abandoned. terminal_pending_review=true means this is the task's last review.

# Flow: segment-induced (long single tasks)
- segment_pause: the harness paused the worker after some steps. A pause is not a state boundary: RESUME_WORKER until
  the pending steps form a meaningful analytical unit (they fix a quantity later steps rely on, complete a sub-stage,
  or move to another aspect).
- Then OPEN_STATE, UPDATE_STATE with one inclusive source interval inside the pending steps, {check}choose the
  relations after the fact with FINALIZE_RELATIONS (or REPAIR on evidence), and COMMIT_STATE.
- task_end: review the remaining pending steps the same way before the task closes."""


MANAGER_SYSTEM_POLICY = f"""\
{_ROLE_HEAD}{_STATE_SCHEMA}

{_BOUNDARY_AND_AUTHORITY}

{_CHECKLIST}{_REPAIR}

{_flows(checklist=True)}

{CHECKS_SECTION}

{_FORMAT}"""

FREEFORM_SYSTEM = f"""\
{_ROLE_HEAD}{_FREE_RECORD}

{_BOUNDARY_AND_AUTHORITY}

{_REPAIR}

{_flows(checklist=False)}

{CHECKS_SECTION}

{_FORMAT}"""

WINDOWED_SYSTEM = """\
You watch a worker agent that analyses data by running Python cells in a persistent interpreter. Before it goes on,
you are shown the public question it works on and its most recent steps (thought, code, outcome, output), nothing
else: no record of the earlier analysis, no tools, no task data, no graders or reference answers. You may send the
worker one short hint, or stay silent.

# Authority
You never edit or run the worker's code and you never solve the task. A hint is reference material: the worker
decides what to do with it. Never put replacement code or the answer in a hint.

# When to hint
Hint only on concrete evidence in the steps shown: an error, an output that contradicts the question or a stated
constraint, a value reused after a step changed it. Name the variable and what looks wrong, and quote the evidence.
A hunch, a style concern or a result that merely looks surprising is not evidence. A wrong hint costs more than
silence: when in doubt, stay silent.

# Response format
Optionally a short <think>...</think> block, then exactly one of
<hint>the hint, a few sentences at most</hint>
<silent/>
and nothing else."""


_OBSERVATION_FIELDS = tuple(json.dumps(f.name) for f in fields(ManagerObservation))


def _rendered_lines(observation: str) -> list[str] | None:
    """The field lines of ``observation`` when it is :meth:`ManagerObservation.render`'s output (one field per line,
    in declaration order, each value compact JSON: no raw newline inside a value), else None."""
    lines = observation.split("\n")
    if len(lines) != len(_OBSERVATION_FIELDS) + 2 or lines[0] != "{" or lines[-1] != "}":
        return None
    for name, line in zip(_OBSERVATION_FIELDS, lines[1:-1], strict=True):
        if not line.startswith(name) or line[len(name) : len(name) + 2] != ": ":
            return None
    return lines


def activation_observation(observation: str) -> str:
    """The observation as it was when the activation started (``last_action_result`` reset to null).

    Within one activation only tool actions and refused actions happen, and neither changes the record, so this is
    the text the first response of the activation saw: the conversation prefix stays identical between calls.
    A rendered observation has its one line replaced (the same text as re-rendering it, without parsing the
    record); any other JSON is parsed, checked and rendered."""
    return _activation_view(observation)[0]


def _activation_view(observation: str) -> tuple[str, Any]:
    """:func:`activation_observation`'s text and the observation's ``event_type``, with the lines split once."""
    lines = _rendered_lines(observation)
    if lines is None:
        data = json.loads(observation)
        if data.get("last_action_result") is None:
            return observation, data.get("event_type")
        data["last_action_result"] = None
        return ManagerObservation.from_dict(data).render(), data.get("event_type")
    event = json.loads(lines[1][len('"event_type": ') :].removesuffix(","))
    index = 1 + _OBSERVATION_FIELDS.index('"last_action_result"')
    null = '"last_action_result": null' + ("," if lines[index].endswith(",") else "")
    if lines[index] == null:
        return observation, event
    lines[index] = null
    return "\n".join(lines), event


def render_activation(inp: PolicyInput) -> str:
    """The user message that opens one activation: observation, public turn, legal actions.

    The public turn is :func:`~harness.manager.policy_types.turn_view`: id, question, context, constraint texts and the
    committed state of every earlier turn; the task graph and constraint code only where ``inp.view`` shows them.
    The observation and the turn are untrusted text (:func:`harness.untrusted.neutralize`)."""
    observation, event = _activation_view(inp.observation)
    parts = [f"# Activation: {event}", "## Observation", neutralize(observation)]
    turn = turn_view(inp)
    if turn is not None:
        parts += ["## Public turn", neutralize(json.dumps(turn, ensure_ascii=False, indent=1))]
    parts += [
        "## Legal actions now",
        ", ".join(inp.legal_actions) if inp.legal_actions else "(none listed)",
        "Respond with exactly one action.",
    ]
    return "\n".join(parts)


TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
EVIDENCE_CHARS = 200
"""The longest failure message an evidence digest quotes (longer ones are cut)."""
EVIDENCE_PREFIX = "[evidence this activation: "


def render_tool_response(result: str, evidence: str | None = None) -> str:
    """One action's result as the Qwen3 chat template renders a ``tool`` message: ``<tool_response>`` tags, with the
    ``evidence`` digest (:func:`render_evidence`) as the last line inside them when given. Inside, so that the text
    is still exactly a rendered ``tool`` message (whose content is the result and the digest) and the template still
    takes it for tool output when it looks for the last real query. The result and the digest (which quotes results)
    are untrusted text (:func:`harness.untrusted.neutralize`); the tags around them are the harness's own."""
    body = result if evidence is None else f"{result}\n{evidence}"
    return f"{TOOL_RESPONSE_OPEN}\n{neutralize(body)}\n{TOOL_RESPONSE_CLOSE}"


def tool_response_body(content: str) -> str | None:
    """The result text of a rendered tool response (what :func:`render_tool_response` wrapped), without its evidence
    digest line; None when ``content`` is not a tool response."""
    text = content.strip()
    if not text.startswith(TOOL_RESPONSE_OPEN):
        return None
    body = text.removeprefix(TOOL_RESPONSE_OPEN).removesuffix(TOOL_RESPONSE_CLOSE).strip("\n")
    head, newline, last = body.rpartition("\n")
    return head if newline and last.startswith(EVIDENCE_PREFIX) and last.endswith("]") else body


def result_failure(result: Mapping[str, Any]) -> str | None:
    """What a check or probe result shows failed, in one line; ``""`` when it passed; None when ``result`` is not
    the result of a check or probe that ran (another action's, or a call the runtime refused: ``ok`` not true).
    Failed: a ``check_constraint`` that did not pass, a ``run_check`` whose ``passed`` is False (one that could not
    run, ``passed`` None, gives None), a ``check_execution`` whose verdict is not ``verified``, a ``run_probe`` that
    did not succeed."""
    if result.get("ok") is not True:
        return None
    if "requirement" in result:  # run_check: None when it could not run (no verdict)
        passed = result.get("passed")
        return None if passed is None else "" if passed else f"run_check failed: {result.get('reason')}"
    if "passed" in result:
        return "" if result["passed"] is not False else f"check_constraint failed: {result.get('reason')}"
    if "verdict" in result:
        verdict, step = result["verdict"], result.get("step_id")
        if verdict == "verified":
            return ""
        if verdict == "failed":
            return f"check_execution of step {step} failed: {result.get('error_type')}: {result.get('error_message')}"
        return f"check_execution of step {step}: verdict {verdict}"
    if "succeeded" in result:
        if result["succeeded"] is not False:
            return ""
        return f"run_probe failed: {result.get('error_message') or result.get('error_type') or 'timed out'}"
    return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def render_evidence(results: Iterable[str]) -> str:
    """The evidence digest of an activation's results (texts, in order): one bracketed line that counts the
    failures its checks and probes show (:func:`result_failure`) and quotes the first; or, when every one passed,
    how many checks and probes ran (saying so when no probe has: a check that passed is not yet evidence about the
    analysis); or that none ran. Results that are not JSON objects are skipped. It restates the tool results next
    to the decision; it reads nothing else."""
    outcomes: list[tuple[bool, str]] = []  # (a probe?, its failure or "")
    for text in results:
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(value, dict) and (outcome := result_failure(value)) is not None:
            outcomes.append(("succeeded" in value and "passed" not in value and "verdict" not in value, outcome))
    failed = [o for _, o in outcomes if o]
    if failed:
        first = failed[0] if len(failed[0]) <= EVIDENCE_CHARS else failed[0][: EVIDENCE_CHARS - 3] + "..."
        return f"{EVIDENCE_PREFIX}{len(failed)} failed: {first}]"
    probes = sum(probe for probe, _ in outcomes)
    checks = len(outcomes) - probes
    if probes:
        return f"{EVIDENCE_PREFIX}every check and probe passed ({_count(checks, 'check')}, {_count(probes, 'probe')})]"
    if checks:
        return f"{EVIDENCE_PREFIX}{_count(checks, 'check')} passed; no probe has run]"
    return f"{EVIDENCE_PREFIX}no check or probe has run]"


def render_tool_responses(results: Sequence[str]) -> list[str]:
    """Each result of an activation as a tool response carrying the evidence digest of the results up to and
    including it: the k-th text depends on the first k results only, so a conversation built one response at a time
    equals one rendered whole."""
    return [render_tool_response(r, render_evidence(results[: k + 1])) for k, r in enumerate(results)]


def render_window(turn: Turn | None, entries: list[dict[str, Any]], total: int) -> str:
    """The windowed model's user message: the public turn (context, question, constraint texts), then ``entries``,
    the last of the ``total`` worker steps so far, as one JSON list. Everything but the headings is untrusted text,
    so the whole message passes through :func:`harness.untrusted.neutralize` (the headings hold no token string)."""
    parts = []
    if turn is not None:
        parts.append("# Public turn")
        if turn.context:
            parts.append(f"Context: {turn.context}")
        parts.append(f"Question: {turn.question}")
        parts += ["Constraints:", *(f"- {c.text}" for c in turn.constraints)] if turn.constraints else []
    parts += [
        f"# The worker's last {len(entries)} of {total} steps",
        json.dumps(entries, ensure_ascii=False, indent=1),
        "Reply with <hint>...</hint> or <silent/>.",
    ]
    return neutralize("\n".join(parts))
