"""Tier 1 of the hierarchical manager as a check writer: its reply shape, the strict parser, the canonical rendering,
the reply's JSON schema and decoding grammar, and tier 0's decision from the checks' results.

**The reply** is one JSON object, optionally after a ``<think>...</think>`` block, and nothing else::

    {"checks": [{"kind": "top_k", "variable": "top3", "source": "by_store", "k": 3, "order": "largest"}]}

``checks`` lists at most :data:`MAX_CHECKS` check specs (:mod:`harness.checks.spec`), ``[]`` when the turn states
nothing a check kind covers. :func:`render_checks_reply` writes the canonical text (``json.dumps`` separators, each
spec's fields in declaration order, fields at their default left out: :func:`compact_spec`), the SFT target of a tier-1
sample (:func:`specs_of_calls` reads the specs of a manager's ``run_check`` calls). :func:`parse_checks_reply` reads a
reply strictly: a reply that is not that object raises :class:`ChecksReplyError`; a spec that
:func:`~harness.checks.spec.parse_spec` refuses, repeats an earlier one or exceeds the room is dropped and its one-line
error kept (:attr:`ChecksReply.errors`), never an abort.

**The grammar** (:func:`checks_grammar`, llguidance's Lark dialect as :func:`harness.manager.wire.call_grammar`)
embeds :func:`checks_schema`: :func:`~harness.checks.spec.spec_schema` of every kind made exact where the plain schema
is looser than :func:`~harness.checks.spec.parse_spec` (a variable field is a Python name that is not a keyword, a
string field is not blank, ``columns`` is not empty, ``group_aggregate`` with ``join_right`` needs ``join_on`` and
``join_how``), with bounded lengths, so a constrained reply parses with no error. One gap: variable names are ASCII
identifiers (the parser also takes other Unicode identifiers).

**Tier 0's decision** (:func:`failed_check`): the first check the manager wrote whose result says ``passed: false``
is the evidence of a REPAIR; a check that could not run (``passed: null``), a refused call or a passing check is not.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

from harness.checks.spec import CHECK_KINDS, CheckSpec, CheckSpecError, parse_spec, spec_schema
from harness.jsonl import json_depth_error, without_surrogates
from harness.manager.wire import THINK_CLOSE, THINK_OPEN, ReplyLimits, parse_response

CHECKS_KEY = "checks"
"""The reply object's one key."""

MAX_CHECKS = 6
"""Specs a reply may list: the default activation budget (8 actions) less tier 0's execution check and the decision."""

_IDENT_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
_IDENT_CHARS = _IDENT_START + "0123456789"


class ChecksReplyError(ValueError):
    """A tier-1 reply that is not the checks object (the message says what is wrong, in one line)."""


@dataclass(frozen=True)
class ChecksReply:
    """A parsed tier-1 reply: the specs kept, in order; one line per spec dropped; the ``<think>`` text, if any."""

    specs: tuple[CheckSpec, ...]
    errors: tuple[str, ...] = ()
    thought: str | None = None


# ---------------------------------------------------------------- rendering and parsing
def compact_spec(spec: CheckSpec | Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` as JSON (:meth:`~harness.checks.spec.CheckSpec.to_dict`) without the fields at their default: the
    form a reply and a ``run_check`` call write. Raises :class:`~harness.checks.spec.CheckSpecError` for a
    malformed mapping."""
    spec = parse_spec(spec)
    defaults = {f.name: f.default for f in fields(spec) if f.default is not MISSING}
    full = spec.to_dict()
    return {
        key: value
        for key, value in full.items()
        if key not in defaults or value != (list(d) if isinstance(d := defaults[key], tuple) else d)
    }


def render_checks_reply(specs: Iterable[CheckSpec | Mapping[str, Any]]) -> str:
    """The canonical tier-1 reply listing ``specs`` (the SFT target): ``{"checks": [...]}`` with
    :func:`compact_spec` of each. Raises :class:`~harness.checks.spec.CheckSpecError` for a malformed spec."""
    return json.dumps({CHECKS_KEY: [compact_spec(spec) for spec in specs]}, ensure_ascii=False)


def specs_of_calls(responses: Iterable[str]) -> list[CheckSpec]:
    """The check specs of the ``run_check`` calls among wire ``responses`` (a manager's raw responses, such as the gold
    manager's in a check activation), in order, without repeats; a response that does not parse, another action or a
    malformed spec gives nothing. ``render_checks_reply(specs_of_calls(...))`` is a tier-1 target."""
    specs: list[CheckSpec] = []
    for raw in responses:
        parsed = parse_response(raw)
        if parsed.ok and parsed.action is not None and parsed.action.name == "run_check":
            try:
                spec = parse_spec(parsed.action.arguments.get("spec"))
            except CheckSpecError:
                continue
            if spec not in specs:
                specs.append(spec)
    return specs


def parse_checks_reply(text: str, max_checks: int = MAX_CHECKS) -> ChecksReply:
    """The specs of a tier-1 reply (see the module docstring); raises :class:`ChecksReplyError` when ``text`` is not
    an optional ``<think>`` block and one ``{"checks": [...]}`` object with nothing else around them."""
    if not isinstance(text, str):
        raise ChecksReplyError(f"a reply is text, got {type(text).__name__}")
    thought, rest = None, text.strip()
    if rest.startswith(THINK_OPEN):
        end = rest.find(THINK_CLOSE)
        if end < 0:
            raise ChecksReplyError("unterminated <think>: the thought has no closing </think>")
        thought = rest[len(THINK_OPEN) : end].strip() or None
        rest = rest[end + len(THINK_CLOSE) :].strip()
    if not rest.startswith("{"):
        raise ChecksReplyError(f'the reply must be one JSON object {{"{CHECKS_KEY}": [...]}}; it starts {rest[:40]!r}')
    if json_depth_error(rest) is not None:
        raise ChecksReplyError("the reply's JSON nests too deep; write each spec as a flat object")
    try:
        value, end = json.JSONDecoder().raw_decode(rest)
    except (json.JSONDecodeError, RecursionError) as error:
        where = getattr(error, "pos", 0)
        raise ChecksReplyError(f"bad JSON: {getattr(error, 'msg', error)} at character {where}") from None
    if rest[end:].strip():
        raise ChecksReplyError(f"text after the JSON object: {rest[end:].strip()[:40]!r}; write the object alone")
    if not isinstance(value, dict) or set(value) != {CHECKS_KEY} or not isinstance(value[CHECKS_KEY], list):
        keys = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise ChecksReplyError(f'the reply must be {{"{CHECKS_KEY}": [spec, ...]}} and nothing else; got keys {keys}')
    specs: list[CheckSpec] = []
    errors: list[str] = []
    for i, item in enumerate(without_surrogates(value[CHECKS_KEY])):
        try:
            spec = parse_spec(item)
        except CheckSpecError as error:
            errors.append(f"checks[{i}]: {error}")
            continue
        if spec in specs:
            errors.append(f"checks[{i}]: repeats checks[{specs.index(spec)}]; dropped")
        elif len(specs) >= max_checks:
            errors.append(f"checks[{i}]: dropped; at most {max_checks} checks are run")
        else:
            specs.append(spec)
    return ChecksReply(tuple(specs), tuple(errors), thought)


# ---------------------------------------------------------------- schema and grammar
def _not_keyword_identifier(words: Sequence[str] = keyword.kwlist) -> str:
    """A regex (no look-around: llguidance's JSON patterns have none) of the ASCII Python identifiers that are not
    one of ``words``: walk the words' trie; at each node the name may end (unless the prefix is a word), continue
    with a character no word continues with (then anything), or follow the trie."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def cls(chars: str) -> str:  # a character class in ranges: [0-9A-Zac-z_]
        codes, parts = sorted(ord(c) for c in chars), []
        for code in codes:
            if parts and parts[-1][1] == code - 1:
                parts[-1][1] = code
            else:
                parts.append([code, code])
        return "[" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in parts) + "]"

    def walk(node: dict[str, Any], first: bool) -> str:
        allowed = _IDENT_START if first else _IDENT_CHARS
        other = "".join(c for c in allowed if c not in node)
        options = [f"{cls(other)}[A-Za-z0-9_]*"] if other else []
        options += [f"{char}{walk(child, False)}" for char, child in sorted(node.items()) if char]
        if not first and "" not in node:
            options.append("")
        return "(?:" + "|".join(options) + ")"

    return f"^{walk(trie, True)}$"


_NAME_PATTERN = _not_keyword_identifier()
_NOT_BLANK = r"^[\s\S]*\S[\s\S]*$"


def _exact(schema: dict[str, Any], variables: Container[str], limits: ReplyLimits) -> dict[str, Any]:
    """One kind's :func:`spec_schema` with the parser's extra rules and ``limits`` applied (see the module
    docstring); ``variables``: its fields that name a worker variable."""
    props = {}
    for name, prop in schema["properties"].items():
        prop = {k: v for k, v in prop.items() if k != "description"}
        options = prop.get("anyOf", [prop])
        bounded = []
        for option in options:
            option = dict(option)
            if option.get("type") == "string":
                option["maxLength"] = limits.name_chars
                option = {"$ref": "#/$defs/name"} if name in variables else {**option, "pattern": _NOT_BLANK}
            elif option.get("type") == "array":
                option["maxItems"] = limits.items
                option["items"] = {**option["items"], "maxLength": limits.name_chars}
                if name == "columns":
                    option["minItems"] = 1
            elif option.get("type") == ["string", "number", "boolean"]:
                option = {"anyOf": [{"type": "string", "maxLength": limits.name_chars}, {"type": "number"},
                                    {"type": "boolean"}]}  # fmt: skip
            bounded.append(option)
        props[name] = {"anyOf": bounded} if "anyOf" in prop else bounded[0]
    return {**schema, "properties": props}


def _kind_schemas(limits: ReplyLimits) -> list[dict[str, Any]]:
    out = []
    for kind, cls in CHECK_KINDS.items():
        variables = {f.name for f in fields(cls) if f.metadata.get("role") == "variable"}
        schema = _exact(spec_schema(kind), variables, limits)
        schema.pop("description", None)
        if kind == "group_aggregate":  # join_right needs join_on and join_how (parse_spec's cross-field rule)
            props = schema["properties"]
            unjoined = {**schema, "properties": {**props, "join_right": {"type": "null"}}}
            joined_props = {**props, **{k: props[k]["anyOf"][0] for k in ("join_right", "join_on", "join_how")}}
            required = [*schema["required"], "join_right", "join_on", "join_how"]
            out += [unjoined, {**schema, "properties": joined_props, "required": required}]
        else:
            out.append(schema)
    return out


def checks_schema(max_checks: int = MAX_CHECKS, limits: ReplyLimits | None = None) -> dict[str, Any]:
    """The JSON schema of a tier-1 reply object, exact for :func:`parse_checks_reply` (see the module docstring),
    bounded by ``limits`` (None: :class:`~harness.manager.wire.ReplyLimits` defaults); its ``x-guidance`` separators
    are :func:`render_checks_reply`'s."""
    limits = limits or ReplyLimits()
    return {
        "type": "object",
        "properties": {
            CHECKS_KEY: {"type": "array", "items": {"anyOf": _kind_schemas(limits)}, "maxItems": max_checks}
        },
        "required": [CHECKS_KEY],
        "additionalProperties": False,
        "$defs": {"name": {"type": "string", "maxLength": limits.name_chars, "pattern": _NAME_PATTERN}},
        "x-guidance": {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "},
    }


def checks_grammar(added_tokens: Container[str] = (), max_checks: int = MAX_CHECKS) -> str:
    """The Lark grammar (llguidance dialect) of one canonical tier-1 reply: the :func:`checks_schema` object, no
    thought. ``added_tokens`` is accepted for the backends' ``set_grammar`` (the reply has no special token)."""
    del added_tokens
    return f"start: reply\nreply: %json {json.dumps(checks_schema(max_checks))}\n"


# ---------------------------------------------------------------- tier 0's decision
@dataclass(frozen=True)
class FailedCheck:
    """A check the manager wrote that failed: the REPAIR's variable, reasoning (the requirement) and evidence (the
    check's reason, quoted)."""

    variable: str
    reasoning: str
    evidence: str


def failed_check(specs: Sequence[CheckSpec], results: Sequence[Mapping[str, Any]]) -> FailedCheck | None:
    """The first of ``specs`` whose ``run_check`` result (decoded, same order) is a successful call with ``passed``
    false, as REPAIR evidence; None when none failed (a check that could not run is not evidence)."""
    for spec, result in zip(specs, results, strict=False):
        if result.get("ok") is not True or result.get("passed") is not False:
            continue
        variable = str(result.get("variable") or spec.variable)
        requirement = str(result.get("requirement") or f"{spec.kind}: {spec.summary}")
        reason = " ".join(str(result.get("reason") or "the check failed").split())
        return FailedCheck(
            variable=variable,
            reasoning=f"the turn requires: {requirement}",
            evidence=f"check {spec.kind} on {variable} failed: {reason}",
        )
    return None
