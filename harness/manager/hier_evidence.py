"""The evidence rule of the hierarchical manager (:mod:`harness.manager.hier`): a REPAIR's ``analytical_evidence``
must quote a check or probe result of its activation (:func:`quotes_tool_result` over :func:`evidence_texts`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from harness.manager.wire import parse_response

MIN_QUOTE_CHARS = 12
"""A REPAIR's evidence quotes a tool result when they share a run of this many normalized characters (or a number)."""

EVIDENCE_FIELDS: dict[str, tuple[str, ...]] = {
    "check_execution": ("verdict", "error_type", "error_message"),
    "run_probe": ("reason", "values", "stdout", "stderr", "display", "results", "error_type", "error_message"),
    "run_check": ("reason", "requirement"),
}
"""The fields of a tool result that a REPAIR's evidence may quote, by tool: what a check computed (a failed step's
error), what a probe printed, returned or raised (a stated constraint's probe adds its ``reason`` and operand
``values``), or why a check spec failed (``run_check`` with ``passed: false`` only: a passing check or one that could
not run quotes nothing). Never the worker's code, stdout, results or variables that ``check_execution`` echoes, nor
the other tools' texts (compile and inspect results describe the manager's own code, ``load_state`` an earlier
claim)."""

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d+|\d{3,})(?![\w]|\.\d)")
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


# ---------------------------------------------------------------- the evidence rule


def _leaves(value: Any, top: bool = True) -> Iterator[str]:
    """The texts of a decoded tool result: every leaf value and every key below the top level (the tool's own field
    names, such as ``verdict`` or ``stdout_tail``, are not evidence)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not top:
                yield str(key)
            yield from _leaves(item, top=False)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, top=False)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _normalized(text: str) -> str:
    """Lower case, every run of characters other than letters and digits as one space."""
    return _NOT_ALNUM.sub(" ", text.lower()).strip()


def _numbers(text: str) -> set[float]:
    return {float(n) for n in _NUMBER.findall(text)}


def quotes_tool_result(evidence: str, results: Iterable[str]) -> bool:
    """Whether ``evidence`` (a REPAIR's ``analytical_evidence``) quotes one of ``results`` (tool result texts).

    The rule: a result text is decoded (JSON) into its leaf values and nested keys, not its top-level field names
    (a text that is not JSON is taken whole); then either the evidence and that text share a number written with a
    decimal point or with at least three digits (compared as numbers: ``51996.97`` matches ``51996.970``), or they
    share a run of at least :data:`MIN_QUOTE_CHARS` characters once both are normalized (lower case, every run of
    characters that are not letters or digits as one space: ``KeyError: 'Regio'`` matches the fields
    ``"KeyError"``, ``"'Regio'"``). A necessary condition for a repair, not a proof that it is right."""
    wanted = _normalized(evidence)
    numbers = _numbers(evidence)
    for text in results:
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            value = text
        joined = " | ".join(_leaves(value)) if isinstance(value, dict | list) else str(value)
        if numbers & _numbers(joined):
            return True
        haystack = _normalized(joined)
        if any(wanted[i : i + MIN_QUOTE_CHARS] in haystack for i in range(len(wanted) - MIN_QUOTE_CHARS + 1)):
            return True
    return False


def evidence_texts(previous: Iterable[tuple[str, str]], strict: bool = True) -> list[str]:
    """The quotable part of each successful check and probe among ``previous`` (``PolicyInput.previous``: the raw
    response of each action of the activation and its result text): the :data:`EVIDENCE_FIELDS` of the result, as
    JSON. A response that does not parse (``strict``: the wire format the runtime parsed it with), a result that is
    not a JSON object with ``ok: true`` (refused, illegal, a failed call), a ``run_check`` result whose ``passed`` is
    not false and every other tool give nothing."""
    texts = []
    for raw, result in previous:
        parsed = parse_response(raw, strict=strict)
        fields = EVIDENCE_FIELDS.get(parsed.action.name) if parsed.ok and parsed.action is not None else None
        try:
            value = json.loads(result) if fields else None
        except (json.JSONDecodeError, TypeError):
            continue
        if isinstance(value, dict) and value.get("ok") is True:
            if parsed.action.name == "run_check" and value.get("passed") is not False:
                continue
            texts.append(json.dumps({key: value[key] for key in fields if key in value}, ensure_ascii=False))
    return texts
