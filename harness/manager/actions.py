"""The manager's action set, declared once, plus the small JSON-schema validator that checks it.

Every action is one :class:`ActionSpec`: a name, a kind, a description a model can follow and a JSON schema of its
arguments. Everything else is derived from :data:`ACTION_SPECS`:

- :func:`tools` — the OpenAI/Qwen3 function-tool list given to the model (and to a vLLM endpoint);
- :data:`ACTION_KIND` — ``name -> "control" | "tool"``;
- :func:`check_action` — the parser's validation (name known, arguments match the schema and the spec's
  cross-argument ``check``: relation rules, ``start_step <= end_step``, FINALIZE mode vs relations), never raising.

Control actions end one manager activation; tool actions are read-only and do not. The harness owns bookkeeping
(state ids, variable versions, relation normalization, the repair schedule), so the arguments carry only analytical
meaning: ``UPDATE_STATE.used_variables`` are variable *names*; the harness binds their versions and values.

The validator implements the subset of JSON schema used here: ``type`` (``object``, ``array``, ``string``,
``integer``, ``number``, ``boolean``, ``null``; a bool is never an integer or a number), ``properties``,
``required``, ``additionalProperties: false``, ``enum``, ``items``, ``minItems``, ``minLength`` and ``minimum``.
Errors name the argument path (``arguments.relations[0].type``) and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, cast

from harness.checks import CHECK_KINDS, CheckSpecError, parse_spec, spec_schema
from harness.registry import lookup
from harness.tasks.checks import RELATIONS

ActionKind = Literal["control", "tool"]

RELATION_TYPES: tuple[str, ...] = RELATIONS
"""The relation types: one tuple shared with the task turns (``harness.tasks``) and re-exported by
:mod:`harness.manager.records`."""

FINALIZE_MODES: tuple[str, ...] = ("confirm", "revise")
"""``FINALIZE_RELATIONS.mode``: keep the provisional relations from OPEN_STATE, or replace them."""

_RELATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "How this state relates to one earlier state. init: no suitable upstream state (omit related_state_id). "
        "progress: continues the previous state. branch: an alternative path from an earlier, non-adjacent state. "
        "invalidate: changes an assumption of an earlier state, whose result must not be inherited. "
        "combine: depends on two or more committed states (give one relation per state)."
    ),
    "properties": {
        "type": {"type": "string", "enum": list(RELATION_TYPES), "description": "The relation type."},
        "related_state_id": {
            "type": "string",
            "minLength": 1,
            "description": "Id of the earlier committed state, as shown in committed_state_index. Omit for init.",
        },
    },
    "required": ["type"],
    "additionalProperties": False,
}

_RELATIONS_SCHEMA: dict[str, Any] = {"type": "array", "items": _RELATION_SCHEMA}

_CODE_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "description": "Python source code."}

IDENTIFIER_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$"


def _check_spec_schema() -> dict[str, Any]:
    """:func:`harness.checks.spec_schema` with the rules of :func:`~harness.checks.parse_spec` a schema can state
    added: a worker variable is an identifier, a ``columns`` list names at least one column."""
    schema = spec_schema()
    for alternative, cls in zip(schema["oneOf"], CHECK_KINDS.values(), strict=True):
        properties = alternative["properties"]
        for f in fields(cls):
            if f.metadata.get("role") == "variable":
                for option in properties[f.name].get("anyOf", [properties[f.name]]):
                    if option.get("type") == "string":
                        option["pattern"] = IDENTIFIER_PATTERN
        if "columns" in properties:
            properties["columns"]["minItems"] = 1
    return schema


CHECK_SPEC_SCHEMA: dict[str, Any] = _check_spec_schema()
"""A typed check spec (:mod:`harness.checks`): ``oneOf`` over every kind. The validator does not read ``oneOf``;
:func:`_spec_problem` parses the spec instead; the action grammar (:func:`harness.manager.wire.call_schema`) admits
only specs of this schema (what it cannot state, :func:`~harness.checks.parse_spec` refuses: a Python keyword as a
variable, ``join_right`` without ``join_on`` and ``join_how``)."""

SPEC_PARAMETER_DESCRIPTION = "A check spec: an object with a kind (listed in the system prompt) and its fields."
"""What the function-tool list says of a spec argument (:meth:`ActionSpec.tool` shows it instead of the whole
``oneOf``, whose kinds the system prompt lists one line each)."""

_CONSTRAINTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Conditions the result must satisfy (filters, units, rounding rules, assumptions).",
    "items": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "description": "The constraint in words."},
            "code": {
                "type": "string",
                "minLength": 1,
                "description": "Optional standalone Python check that raises if it is violated.",
            },
            "check": {
                "anyOf": [CHECK_SPEC_SCHEMA, {"type": "null"}],
                "description": "Optional check spec of the constraint (run it with run_check), or null.",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
}


def _undescribed_item(item: dict[str, Any]) -> dict[str, Any]:
    """A constraint item schema whose properties carry no description (OPEN_STATE's tool entry describes them)."""
    properties = {
        name: {k: v for k, v in sub.items() if k != "description"} for name, sub in item["properties"].items()
    }
    return {**item, "properties": properties}


def _spec_problem(spec: Any, path: str) -> str | None:
    """The one-line :class:`~harness.checks.CheckSpecError` of a malformed spec at ``path``, else None."""
    try:
        parse_spec(spec)
    except CheckSpecError as exc:
        return f"{path}: {exc}"
    return None


def _constraints_problem(arguments: dict[str, Any]) -> str | None:
    for index, constraint in enumerate(arguments.get("constraints", ())):
        if constraint.get("check") is not None:
            if error := _spec_problem(constraint["check"], f"arguments.constraints[{index}].check"):
                return error
    return None


def _relations_problem(relations: list[dict[str, Any]], path: str) -> str | None:
    """The relation rules: init stands alone and names no state; the other types name one; combine needs
    two or more related states."""
    for index, relation in enumerate(relations):
        kind, has_id = relation["type"], "related_state_id" in relation
        if kind == "init" and has_id:
            return (
                f"{path}[{index}]: an init relation has no upstream state; drop related_state_id or use another type"
            )
        if kind != "init" and not has_id:
            return f"{path}[{index}]: a {kind} relation needs related_state_id (an id from committed_state_index)"
    kinds = [relation["type"] for relation in relations]
    if "init" in kinds and len(kinds) > 1:
        return f"{path}: init means no suitable upstream state, so it cannot be given with other relations ({kinds})"
    if kinds.count("combine") == 1:
        return f"{path}: combine depends on two or more committed states; give one combine relation per state"
    return None


def _check_open(arguments: dict[str, Any]) -> str | None:
    return _constraints_problem(arguments) or _relations_problem(arguments["relations"], "arguments.relations")


def _check_run(arguments: dict[str, Any]) -> str | None:
    return _spec_problem(arguments["spec"], "arguments.spec")


def _check_update(arguments: dict[str, Any]) -> str | None:
    if error := _constraints_problem(arguments):
        return error
    interval = arguments["source_interval"]
    if interval["start_step"] > interval["end_step"]:
        return (
            f"arguments.source_interval: start_step={interval['start_step']} is after end_step="
            f"{interval['end_step']}; the interval is inclusive, start_step <= end_step"
        )
    return None


def _check_finalize(arguments: dict[str, Any]) -> str | None:
    relations = arguments["relations"]
    if arguments["mode"] == "confirm" and relations:
        return (
            "arguments.relations: mode=confirm keeps the provisional relations, so give relations as [] "
            f"(got {len(relations)})"
        )
    if arguments["mode"] == "revise" and not relations:
        return (
            "arguments.relations: mode=revise replaces the relations, so give at least one (use confirm to keep them)"
        )
    return _relations_problem(relations, "arguments.relations")


def _object(properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    """An arguments schema: an object with exactly these properties, all of ``required`` present, nothing else."""
    return {
        "type": "object",
        "properties": properties or {},
        "required": required if required is not None else list(properties or {}),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class ActionSpec:
    """One action: its wire ``name``, whether it ends the activation (``kind``), a description for the model, the
    JSON schema of its ``arguments`` (always an object schema) and optional cross-argument ``check``."""

    name: str
    kind: ActionKind
    description: str
    parameters: dict[str, Any] = field(default_factory=_object)
    check: Callable[[dict[str, Any]], str | None] | None = None
    """Cross-argument rules a JSON schema cannot express; runs on schema-valid arguments, returns an error or None."""

    def tool(self) -> dict[str, Any]:
        """This action as one OpenAI/Qwen3 function tool; a check spec argument is shown as an object (the system
        prompt lists the check kinds, one line each), not as its whole schema."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": _shown(self.parameters)},
        }


def _shown(schema: Any) -> Any:
    """``schema`` with every check spec schema (:data:`CHECK_SPEC_SCHEMA`'s ``oneOf``) replaced by a plain object."""
    if isinstance(schema, list):
        return [_shown(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("oneOf") is CHECK_SPEC_SCHEMA["oneOf"]:
        return {"type": "object", **({"description": schema["description"]} if "description" in schema else {})}
    return {key: _shown(value) for key, value in schema.items()}


ACTION_SPECS: tuple[ActionSpec, ...] = (
    # ---- control actions: each ends the activation ----
    ActionSpec(
        "RESUME_WORKER",
        "control",
        "Let the worker continue without changing the state record (the pending trace does not yet form a "
        "meaningful analytical unit, or the opened state is waiting for the worker's turn).",
    ),
    ActionSpec(
        "OPEN_STATE",
        "control",
        "Open a new analytical state for the issue the worker is about to work on (turn start) or has just worked "
        "on (segment). Give its constraints and provisional relations to committed states; the harness assigns the "
        "id and injects the related states as hints for the worker.",
        _object(
            {
                "issue": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The analytical question this state settles, in one sentence.",
                },
                "constraints": _CONSTRAINTS_SCHEMA,
                "relations": {
                    **_RELATIONS_SCHEMA,
                    "description": "Provisional relations to committed states; use one init relation if none fits.",
                    "minItems": 1,
                },
            }
        ),
        _check_open,
    ),
    ActionSpec(
        "UPDATE_STATE",
        "control",
        "Fill the open state from the worker's trace: the issue as it was actually addressed, one inclusive interval "
        "of worker steps that forms it, the variables it used and its conclusions. The harness binds variable "
        "versions and values.",
        _object(
            {
                "issue": {"type": "string", "minLength": 1, "description": "The issue as the trace addressed it."},
                "source_interval": {
                    "type": "object",
                    "description": "Inclusive range of worker step ids that form this state.",
                    "properties": {
                        "start_step": {"type": "integer", "minimum": 0, "description": "First step id."},
                        "end_step": {"type": "integer", "minimum": 0, "description": "Last step id (inclusive)."},
                    },
                    "required": ["start_step", "end_step"],
                    "additionalProperties": False,
                },
                "used_variables": {
                    "type": "array",
                    "description": "Names of the worker variables the conclusions rely on.",
                    "items": {"type": "string", "minLength": 1},
                },
                "conclusions": {
                    "type": "array",
                    "description": "What the state established, one fact per item, with the numbers the trace shows.",
                    "items": {"type": "string", "minLength": 1},
                },
                "constraints": {
                    "type": "array",
                    "description": "Optional: the constraints restated as in OPEN_STATE, with the checks the worker's "
                    "variables now allow; they replace OPEN_STATE's.",
                    "items": _undescribed_item(_CONSTRAINTS_SCHEMA["items"]),
                },
            },
            required=["issue", "source_interval", "used_variables", "conclusions"],
        ),
        _check_update,
    ),
    ActionSpec(
        "FINALIZE_RELATIONS",
        "control",
        "Settle the relations of the updated state after checking it. mode=confirm keeps the provisional relations "
        "(give relations as []); mode=revise replaces them with relations. conflict_evidence states the concrete "
        "evidence for an invalidate relation, or is empty.",
        _object(
            {
                "mode": {"type": "string", "enum": list(FINALIZE_MODES), "description": "confirm or revise."},
                "relations": {**_RELATIONS_SCHEMA, "description": "The final relations when mode=revise, else []."},
                "conflict_evidence": {
                    "type": "string",
                    "description": "Evidence that an earlier state's assumption no longer holds; empty if none.",
                },
            }
        ),
        _check_finalize,
    ),
    ActionSpec(
        "COMMIT_STATE",
        "control",
        "Commit the finalized state to the state store; it becomes available to later states and hints.",
    ),
    ActionSpec(
        "REPAIR",
        "control",
        "Send the worker a repair hint because a tool result shows a concrete error in the open state. Only on clear "
        "evidence: a false repair costs more than a missed one. Never give replacement code or the answer.",
        _object(
            {
                "analytical_evidence": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The runtime evidence (tool results) that shows the error.",
                },
                "error_hint": {
                    "type": "object",
                    "description": "What the worker is told.",
                    "properties": {
                        "error_variable": {
                            "type": "string",
                            "minLength": 1,
                            "description": "The worker variable that holds the wrong value.",
                        },
                        "faulty_reasoning": {
                            "type": "string",
                            "minLength": 1,
                            "description": "The step of reasoning that went wrong, without the fix.",
                        },
                    },
                    "required": ["error_variable", "faulty_reasoning"],
                    "additionalProperties": False,
                },
            }
        ),
    ),
    ActionSpec("ABANDON_STATE", "control", "Discard the open state without committing it."),
    ActionSpec("ABSTAIN", "control", "Decline to act this activation; nothing changes."),
    # ---- tool actions: read-only, the activation continues with their result ----
    ActionSpec(
        "check_execution",
        "tool",
        "Check whether a worker step's claimed code got a matching, successful executor result.",
        _object({"step_id": {"type": "integer", "minimum": 0, "description": "The worker step id."}}),
    ),
    ActionSpec(
        "inspect_python",
        "tool",
        "Show the structure of a Python program through its AST (names read and written, calls, filters).",
        _object({"code": _CODE_SCHEMA}),
    ),
    ActionSpec(
        "compile_python",
        "tool",
        "Check that a Python program is syntactically valid.",
        _object({"code": _CODE_SCHEMA}),
    ),
    ActionSpec(
        "run_probe",
        "tool",
        "Run an isolated verification program over the task data and the worker's current variables; the worker's "
        "state is not changed. Print what you want to see.",
        _object({"code": _CODE_SCHEMA}),
    ),
    ActionSpec(
        "run_check",
        "tool",
        "Run a typed check of one requirement over the worker's current variables in an isolated verifier; the "
        "worker's state is not changed. The result says whether it passed and, if not, what was found against what "
        "is required.",
        _object({"spec": {**CHECK_SPEC_SCHEMA, "description": SPEC_PARAMETER_DESCRIPTION}}),
        _check_run,
    ),
    ActionSpec(
        "load_state",
        "tool",
        "Load one committed state in full, for a one-hop dependency check.",
        _object({"state_id": {"type": "string", "minLength": 1, "description": "A committed state id."}}),
    ),
)

ACTIONS: dict[str, ActionSpec] = {spec.name: spec for spec in ACTION_SPECS}
"""``name -> ActionSpec`` in declaration order."""

ACTION_KIND: dict[str, ActionKind] = {spec.name: spec.kind for spec in ACTION_SPECS}
"""``name -> "control" | "tool"``."""

ACTION_NAMES: tuple[str, ...] = tuple(ACTIONS)


def tool_schemas() -> list[dict[str, Any]]:
    """The function-tool list given to the model: ``[{"type": "function", "function": {name, description,
    parameters}}]``, one per action, in declaration order (control actions first).

    Every dict's keys are sorted: a dataset's ``tools`` column (``datasets.Json`` sorts keys when it stores them)
    then reads back equal to this list, so the tools block the SFT trainer renders is token for token the one the
    model sees at inference."""
    return [json.loads(json.dumps(spec.tool(), sort_keys=True)) for spec in ACTION_SPECS]


def get_spec(name: str) -> ActionSpec:
    """The spec of ``name``; an unknown name raises ``ValueError`` listing the valid action names."""
    return lookup(ACTIONS, name, what="action")


@dataclass(frozen=True)
class Action:
    """One validated manager action. Build it with :func:`make_action` (or get it from the wire parser)."""

    name: str
    arguments: dict[str, Any]
    kind: ActionKind

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "arguments"}`` — the JSON object inside ``<tool_call>``."""
        return {"name": self.name, "arguments": self.arguments}


def check_action(name: object, arguments: object) -> tuple[Action | None, str | None]:
    """Validate one call: ``(Action, None)`` if ``name`` is a known action and ``arguments`` match its schema, else
    ``(None, message)``. Never raises."""
    if not isinstance(name, str):
        return None, f"action name must be a string, got {_type_name(name)} {_short(name)}"
    spec = ACTIONS.get(name)
    if spec is None:
        return None, f"unknown action {_short(name)}; valid actions: {', '.join(ACTION_NAMES)}"
    error = validate(arguments, spec.parameters, "arguments")
    if error is None and spec.check is not None:
        error = spec.check(cast(dict[str, Any], arguments))
    if error is not None:
        return None, f"{name}: {error}"
    return Action(name=name, arguments=cast(dict[str, Any], arguments), kind=spec.kind), None


def make_action(name: str, arguments: dict[str, Any] | None = None) -> Action:
    """A validated :class:`Action`; bad input raises ``ValueError`` with the same message the parser returns."""
    action, error = check_action(name, {} if arguments is None else arguments)
    if action is None:
        raise ValueError(f"invalid action: {error}. See harness.manager.actions.tool_schemas() for the schemas.")
    return action


# ---------------------------------------------------------------- the JSON-schema subset validator

_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _type_name(value: object) -> str:
    """The JSON type name of a Python value (``integer`` for int, ``boolean`` for bool, else the Python name)."""
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate(value: object, schema: dict[str, Any], path: str = "value") -> str | None:
    """The first violation of ``schema`` by ``value`` as ``"<path>: expected ..., got ..."``, or None if it conforms.

    Never raises for any ``value``; keys are checked in sorted order so the message is deterministic.
    """
    expected = schema.get("type")
    if expected is not None and not _TYPE_CHECKS[expected](value):
        return f"{path}: expected {expected}, got {_type_name(value)} {_short(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: expected one of {schema['enum']}, got {_short(value)}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{path}: expected a string of at least {schema['minLength']} character(s), got {_short(value)}"
    if "minimum" in schema and _TYPE_CHECKS["number"](value) and value < schema["minimum"]:  # type: ignore[operator]
        return f"{path}: expected a value >= {schema['minimum']}, got {value}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path}: expected at least {schema['minItems']} item(s), got {len(value)}"
        if "items" in schema:
            for index, item in enumerate(value):
                error = validate(item, schema["items"], f"{path}[{index}]")
                if error is not None:
                    return error
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return f"{path}: missing required argument {key!r}"
        if schema.get("additionalProperties", True) is False:
            extra = sorted(repr(k) for k in value if k not in properties)
            if extra:
                allowed = ", ".join(properties) or "none"
                return f"{path}: unexpected argument(s) {', '.join(extra)}; allowed: {allowed}"
        for key in sorted(k for k in value if k in properties):
            error = validate(value[key], properties[key], f"{path}.{key}")
            if error is not None:
                return error
    return None
