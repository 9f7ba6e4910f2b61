"""The manager's wire format: parse one model response into one validated action, and render an action back.

Two input forms are accepted by :func:`parse_response`:

1. **Text** (what the trained model generates, Qwen3/Hermes style)::

       <think>optional reasoning</think>
       <tool_call>
       {"name": "OPEN_STATE", "arguments": {...}}
       </tool_call>

   The thought is kept in :attr:`ParseResult.thought`. A response whose template already opened ``<think>`` (it
   starts inside the thought and only ``</think>`` appears) is accepted too: everything before ``</think>`` is the
   thought. The JSON inside ``<tool_call>`` is read with a real JSON decoder, so code arguments may contain
   ``</tool_call>`` or ``<`` freely.
2. **Structured** (an OpenAI-compatible chat message as a vLLM endpoint with the hermes tool parser returns it):
   ``{"role": "assistant", "content": ..., "reasoning_content": ..., "tool_calls": [{"type": "function",
   "function": {"name": ..., "arguments": "<json string>"}}]}``; ``arguments`` may already be a dict. A bare list of
   tool calls is accepted too; a message without ``tool_calls`` is parsed from its ``content`` text.

Rules (each violation is one error with a precise message; see :class:`ParseResult`):

- exactly one action per response: zero calls and several calls are errors; a tool action together with a control
  action gets its own message;
- the call object has exactly the keys ``name`` and ``arguments``; arguments must match the action's schema
  (missing, extra and wrongly typed arguments are named with their path);
- **text outside the tags is an error** in the default ``strict=True`` mode (only whitespace may surround the
  thought and the call): the format is fixed, the trained model produces it exactly, and stray prose is a sign of a
  malformed response. ``strict=False`` ignores such text (useful for prompt-only base models).

Untrusted JSON: a call nested deeper than :data:`harness.jsonl.MAX_JSON_DEPTH` is an error found by a pre-scan
before decoding (never a ``RecursionError``), and a lone surrogate a string decodes to (the escape ``\\udc00``)
becomes its escape text ``\\udc00`` in the action, so an action's text always encodes as UTF-8.

:func:`parse_response` never raises, whatever it is given.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Container
from dataclasses import asdict, dataclass
from typing import Any

from harness.jsonl import MAX_JSON_DEPTH, json_depth_error, too_deep, without_surrogates
from harness.manager.actions import ACTION_KIND, ACTION_SPECS, RELATION_TYPES, Action, check_action

logger = logging.getLogger(__name__)

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ParseResult:
    """Either ``ok`` with one :class:`Action`, or an ``error`` message. ``thought`` is the reasoning, if any."""

    action: Action | None = None
    error: str | None = None
    thought: str | None = None

    def __post_init__(self) -> None:
        if (self.action is None) == (self.error is None):
            raise ValueError("ParseResult holds exactly one of action and error; got both or neither.")

    @property
    def ok(self) -> bool:
        return self.action is not None


def render_action(action: Action) -> str:
    """The canonical wire text of ``action``: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``
    (Qwen3 chat-template layout; non-ASCII kept as is). ``parse_response(render_action(a)).action == a``."""
    return f"{TOOL_CALL_OPEN}\n{json.dumps(action.to_dict(), ensure_ascii=False)}\n{TOOL_CALL_CLOSE}"


def _relation_lists() -> dict[str, Any]:
    """The relation rules a schema can state (:func:`harness.manager.actions.check_action` checks them too): one
    ``init`` relation alone, naming no state, or one or more relations of the other types, each naming its state."""
    init = {
        "type": "object",
        "properties": {"type": {"const": "init"}},
        "required": ["type"],
        "additionalProperties": False,
    }
    linked = {
        "type": "object",
        "properties": {
            "type": {"enum": [kind for kind in RELATION_TYPES if kind != "init"]},
            "related_state_id": {"type": "string", "minLength": 1},
        },
        "required": ["type", "related_state_id"],
        "additionalProperties": False,
    }
    return {
        "anyOf": [
            {"type": "array", "items": init, "minItems": 1, "maxItems": 1},
            {"type": "array", "items": linked, "minItems": 1},
        ]
    }


def _grammar_arguments(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` with the cross-argument rules a JSON schema can state added: OPEN_STATE's relations follow
    :func:`_relation_lists`; FINALIZE_RELATIONS confirms with ``relations: []`` or revises with such a list. (What
    no schema states stays with the parser: ``start_step <= end_step``, a lone ``combine`` relation.)"""
    if name == "OPEN_STATE":
        return {**parameters, "properties": {**parameters["properties"], "relations": _relation_lists()}}
    if name == "FINALIZE_RELATIONS":
        evidence = parameters["properties"]["conflict_evidence"]
        modes = (("confirm", {"type": "array", "maxItems": 0}), ("revise", _relation_lists()))
        return {
            "anyOf": [
                {
                    **parameters,
                    "properties": {"mode": {"const": mode}, "relations": relations, "conflict_evidence": evidence},
                }
                for mode, relations in modes
            ]
        }
    return parameters


@dataclass(frozen=True)
class ReplyLimits:
    """How far a constrained reply's values may run: the action grammar's bounds on lengths, list sizes, integers
    and digit runs. Greedy decoding of a small model can loop inside a JSON string (a number that never ends, a
    sentence repeated, a list of relations ``S1``, ``S2``, ...) until the token cap cuts the reply; under these bounds
    the string or list must close. Every bound is far above what a concise record needs (the synthesized training
    data stays well inside them); the parser does not apply them, only decoding does.

    ``text_chars``: prose (conclusions, constraint text, evidence, reasoning, conflict evidence), which also holds
    no run of more than ``digit_run`` digits; ``issue_chars``: the issue (a restatement of the question);
    ``name_chars``: variable names and state ids; ``code_chars``: code; ``items``: any list; ``max_int``: step ids.
    """

    text_chars: int = 400
    issue_chars: int = 400
    name_chars: int = 120
    code_chars: int = 4000
    items: int = 8
    max_int: int = 1_000_000
    digit_run: int = 24

    def __post_init__(self) -> None:
        bad = [f"{key}={value!r}" for key, value in asdict(self).items() if not isinstance(value, int) or value < 1]
        if bad:
            raise ValueError(f"ReplyLimits: {', '.join(bad)}; every limit is a positive integer")


_CODE_KEYS = frozenset({"code"})
_NAME_KEYS = frozenset({"used_variables", "error_variable", "related_state_id", "state_id"})
_SPEC_NAME_KEYS = frozenset(
    {"variable", "source", "left", "right", "column", "columns", "by", "on", "join_right", "join_on", "key_column"}
    | {"date_column", "variants"}
)
"""A check spec's names (variables, columns, spellings): bounded like variable names."""


def _bounded(schema: Any, limits: ReplyLimits, key: str | None = None) -> Any:
    """``schema`` with :class:`ReplyLimits` applied to every free string, list and integer; ``key`` is the property
    (or list) the node is the value of: it decides which string limit applies."""
    if isinstance(schema, list):
        return [_bounded(item, limits, key) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {name: _bounded(sub, limits, name) for name, sub in out["properties"].items()}
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in out:
            out[combinator] = _bounded(out[combinator], limits, key)
    if "items" in out:
        out["items"] = _bounded(out["items"], limits, key)
    if "const" in out or "enum" in out:
        return out
    kind = out.get("type")
    if isinstance(kind, list) and "string" in kind:  # a spec's scalar value: a string among other types
        out["maxLength"] = limits.name_chars
    if kind == "array":
        out["maxItems"] = min(out.get("maxItems", limits.items), limits.items)
    elif kind == "integer":
        out["maximum"] = min(out.get("maximum", limits.max_int), limits.max_int)
    elif kind == "string":
        if key in _CODE_KEYS:
            out["maxLength"] = limits.code_chars
        elif key in _NAME_KEYS or key in _SPEC_NAME_KEYS or "pattern" in out:
            out["maxLength"] = limits.name_chars
        elif key == "issue":
            out["maxLength"] = limits.issue_chars
        else:
            run = limits.digit_run
            out["maxLength"] = limits.text_chars
            out["pattern"] = f"^(?:[^0-9]|[0-9]{{1,{run}}}[^0-9])*[0-9]{{0,{run}}}$"
    return out


def _undescribed(schema: Any) -> Any:
    """``schema`` without its ``description`` texts (they guide the model in the tool list; the grammar, sent with
    every constrained request, needs only the structure). A property named ``description`` is a dict: it stays."""
    if isinstance(schema, list):
        return [_undescribed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: _undescribed(v) for k, v in schema.items() if k != "description" or not isinstance(v, str)}


def call_schema(names: Collection[str] | None = None, limits: ReplyLimits | None = ReplyLimits()) -> dict[str, Any]:
    """The JSON schema of one call object ``{"name": ..., "arguments": {...}}``: one alternative per action (all, or
    those in ``names``), each with its arguments' schema (without descriptions), the cross-argument rules a schema
    can state (:func:`_grammar_arguments`) and the decoding bounds ``limits`` (:class:`ReplyLimits`; None:
    unbounded); the ``x-guidance`` separators are :func:`render_action`'s (``", "`` and ``": "``, no other
    whitespace), so a constrained reply is written the way the SFT data writes it."""
    specs = [spec for spec in ACTION_SPECS if names is None or spec.name in names]
    if not specs:
        raise ValueError(f"call_schema: no action among {sorted(names or ())}")

    def arguments(spec: Any) -> dict[str, Any]:
        schema = _undescribed(_grammar_arguments(spec.name, spec.parameters))
        return schema if limits is None else _bounded(schema, limits)

    alternatives = [
        {
            "type": "object",
            "properties": {"name": {"const": spec.name}, "arguments": arguments(spec)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for spec in specs
    ]
    return {
        "oneOf": alternatives,
        "x-guidance": {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "},
    }


def call_grammar(
    added_tokens: Container[str] = (),
    names: Collection[str] | None = None,
    limits: ReplyLimits | None = ReplyLimits(),
) -> str:
    """The Lark grammar (llguidance dialect: vLLM's ``guidance`` structured-outputs backend and
    :class:`harness.grammar.TokenGrammar` read it) of one canonical response: ``<tool_call>``, a newline, one call
    matching :func:`call_schema` (with ``limits``), a newline, ``</tool_call>`` — exactly :func:`render_action`'s
    layout, no thought.
    A tag that is one of the tokenizer's ``added_tokens`` (Qwen3's) is written as a token, otherwise as text
    (SmolLM2 spells the tags out in plain tokens)."""

    def tag(text: str) -> str:
        return text if text in added_tokens else json.dumps(text)

    schema = json.dumps(call_schema(names, limits))
    return f'start: {tag(TOOL_CALL_OPEN)} "\\n" call "\\n" {tag(TOOL_CALL_CLOSE)}\ncall: %json {schema}\n'


def parse_response(response: object, *, strict: bool = True) -> ParseResult:
    """Parse one manager response (a string, an OpenAI message dict, or a list of tool calls); never raises."""
    try:
        return _parse(response, strict)
    except Exception as error:  # noqa: BLE001 - the contract is "never raises"; a bug here must not kill a rollout
        logger.exception("parse_response: unexpected failure")
        return ParseResult(error=f"internal parser error ({type(error).__name__}: {error}); please report it")


def _parse(response: object, strict: bool) -> ParseResult:
    if isinstance(response, str):
        return _parse_text(response, strict)
    if hasattr(response, "model_dump") and not isinstance(response, dict | list):
        response = response.model_dump()  # an openai-python ChatCompletionMessage
    if isinstance(response, list):
        return _parse_structured(response, None, None, strict)
    if isinstance(response, dict):
        content = response.get("content")
        if content is not None and not isinstance(content, str):
            return ParseResult(error=f"message content must be a string or null, got {type(content).__name__}")
        reasoning = response.get("reasoning_content", response.get("reasoning"))
        if reasoning is not None and not isinstance(reasoning, str):
            return ParseResult(error=f"message reasoning_content must be a string, got {type(reasoning).__name__}")
        calls = response.get("tool_calls")
        if calls is None or calls == []:
            if content is None:
                return ParseResult(error=_NO_ACTION, thought=reasoning)
            result = _parse_text(content, strict)
            thought = _join(reasoning, result.thought)
            return ParseResult(action=result.action, error=result.error, thought=thought)
        if not isinstance(calls, list):
            return ParseResult(error=f"message tool_calls must be a list, got {type(calls).__name__}")
        return _parse_structured(calls, content, reasoning, strict)
    return ParseResult(
        error=f"expected a response string or an OpenAI message dict, got {type(response).__name__}",
    )


_NO_ACTION = 'no action: the response must hold exactly one <tool_call>{"name": ..., "arguments": {...}}</tool_call>'


def _join(*parts: str | None) -> str | None:
    kept = [part for part in parts if part]
    return "\n".join(kept) if kept else None


def _split_thought(text: str) -> tuple[str | None, str, str | None]:
    """``(thought, rest, error)``: a leading ``<think>...</think>`` (or a response that starts inside the thought
    and only closes it) is split off."""
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        end = stripped.find(THINK_CLOSE)
        if end < 0:
            return None, text, "unterminated <think>: the thought has no closing </think>"
        return stripped[len(THINK_OPEN) : end].strip() or None, stripped[end + len(THINK_CLOSE) :], None
    close = text.find(THINK_CLOSE)
    if close >= 0 and THINK_OPEN not in text[:close] and TOOL_CALL_OPEN not in text[:close]:
        return text[:close].strip() or None, text[close + len(THINK_CLOSE) :], None
    return None, text, None


def _parse_text(text: str, strict: bool) -> ParseResult:
    thought, rest, error = _split_thought(text)
    if error is not None:
        return ParseResult(error=error)
    calls: list[object] = []
    outside: list[str] = []
    position = 0
    while True:
        start = rest.find(TOOL_CALL_OPEN, position)
        if start < 0:
            outside.append(rest[position:])
            break
        outside.append(rest[position:start])
        json_start = _skip_space(rest, start + len(TOOL_CALL_OPEN))
        deep = json_depth_error(rest, json_start)
        if deep is not None:
            return ParseResult(error=_too_deep(f"tool call #{len(calls) + 1}", deep - json_start), thought=thought)
        try:
            obj, json_end = _DECODER.raw_decode(rest, json_start)
        except json.JSONDecodeError as decode_error:
            offset = decode_error.pos - json_start
            return ParseResult(
                error=f"bad JSON in tool call #{len(calls) + 1}: {decode_error.msg} at character {offset} of the "
                f"call (line {decode_error.lineno}, column {decode_error.colno} of the response after the thought)",
                thought=thought,
            )
        except ValueError as error:  # an integer of more than 4300 digits
            message = str(error).split(";")[0]
            return ParseResult(error=f"bad JSON in tool call #{len(calls) + 1}: {message}", thought=thought)
        obj = without_surrogates(obj)
        close = _skip_space(rest, json_end)
        if not rest.startswith(TOOL_CALL_CLOSE, close):
            found = rest[close : close + 20]
            return ParseResult(
                error=f"tool call #{len(calls) + 1}: expected {TOOL_CALL_CLOSE} right after the JSON object, "
                f"found {found!r}" + (" (end of response)" if not found else ""),
                thought=thought,
            )
        calls.append(obj)
        position = close + len(TOOL_CALL_CLOSE)
    stray = "".join(outside).strip()
    if THINK_OPEN in stray or THINK_CLOSE in stray:
        return ParseResult(error="a <think> block is only allowed once, at the start of the response", thought=thought)
    if strict and stray:
        return ParseResult(
            error=f"text outside <tool_call> tags is not allowed (only a leading <think> block): {stray[:60]!r}",
            thought=thought,
        )
    return _one_action(calls, thought)


def _too_deep(where: str, offset: int | None) -> str:
    at = "" if offset is None else f" (at character {offset})"
    return f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels{at}; write the call's arguments flat"


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def _parse_structured(calls: list[object], content: str | None, reasoning: str | None, strict: bool) -> ParseResult:
    thought = reasoning
    if content is not None:
        content_thought, rest, error = _split_thought(content)
        thought = _join(reasoning, content_thought)
        if error is not None:
            return ParseResult(error=error, thought=thought)
        if TOOL_CALL_OPEN in rest:
            return ParseResult(
                error="several actions: the message has structured tool_calls and a <tool_call> in its content",
                thought=thought,
            )
        if strict and rest.strip():
            return ParseResult(
                error=f"text outside the tool call is not allowed (message content): {rest.strip()[:60]!r}",
                thought=thought,
            )
    objects: list[object] = []
    for index, call in enumerate(calls):
        where = f"tool_calls[{index}]"
        if not isinstance(call, dict):
            return ParseResult(error=f"{where}: expected an object, got {type(call).__name__}", thought=thought)
        if call.get("type", "function") != "function":
            return ParseResult(error=f"{where}.type: expected 'function', got {call.get('type')!r}", thought=thought)
        function = call.get("function")
        if not isinstance(function, dict):
            return ParseResult(
                error=f"{where}.function: expected an object with name and arguments, got {type(function).__name__}",
                thought=thought,
            )
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            deep = json_depth_error(arguments)
            if deep is not None:
                return ParseResult(error=_too_deep(f"{where}.function.arguments", deep), thought=thought)
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as decode_error:
                return ParseResult(
                    error=f"bad JSON in {where}.function.arguments: {decode_error.msg} "
                    f"at character {decode_error.pos}",
                    thought=thought,
                )
            except ValueError as error:  # an integer of more than 4300 digits
                message = str(error).split(";")[0]
                return ParseResult(error=f"bad JSON in {where}.function.arguments: {message}", thought=thought)
        elif too_deep(arguments, MAX_JSON_DEPTH - 1):
            return ParseResult(error=_too_deep(f"{where}.function.arguments", None), thought=thought)
        objects.append(without_surrogates({"name": function.get("name"), "arguments": arguments}))
    return _one_action(objects, thought)


def _one_action(calls: list[object], thought: str | None) -> ParseResult:
    """Exactly one well-formed, valid call -> an action; every other case -> the matching error."""
    if not calls:
        return ParseResult(error=_NO_ACTION, thought=thought)
    if len(calls) > 1:
        names = [call.get("name") if isinstance(call, dict) else None for call in calls]
        kinds = {ACTION_KIND.get(name) for name in names if isinstance(name, str)}
        if {"tool", "control"} <= kinds:
            return ParseResult(
                error=f"a tool action and a control action together ({', '.join(map(str, names))}); "
                "one response holds exactly one action",
                thought=thought,
            )
        return ParseResult(
            error=f"{len(calls)} actions in one response ({', '.join(map(str, names))}); exactly one is allowed",
            thought=thought,
        )
    call = calls[0]
    if not isinstance(call, dict):
        return ParseResult(
            error=f"the tool call must be a JSON object with name and arguments, got {type(call).__name__}",
            thought=thought,
        )
    keys = set(call)
    if keys != {"name", "arguments"}:
        missing = sorted({"name", "arguments"} - keys)
        extra = sorted(repr(key) for key in keys - {"name", "arguments"})
        detail = "; ".join(
            part
            for part in (
                f"missing key(s) {', '.join(missing)}" if missing else "",
                f"unexpected key(s) {', '.join(extra)}" if extra else "",
            )
            if part
        )
        return ParseResult(
            error=f"the tool call object needs exactly the keys name and arguments: {detail}", thought=thought
        )
    action, error = check_action(call["name"], call["arguments"])
    if action is None:
        return ParseResult(error=error, thought=thought)
    return ParseResult(action=action, thought=thought)


def action_from_dict(data: dict[str, Any]) -> ParseResult:
    """Validate ``{"name": ..., "arguments": {...}}`` (e.g. a stored gold decision) like the parser does."""
    return _one_action([data], None)
