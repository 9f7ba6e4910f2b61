"""The checks a careful manager writes at a turn end from the turn's stated requirements (:func:`turn_checks`).

The gold manager (:mod:`synthesis.gold`) verifies every turn end the same way, clean, faulted or benign: it runs
``check_execution`` of the turn's last step, a ``run_probe`` of every constraint the turn states, and a ``run_probe``
of every check listed here; its decision follows from those results alone. So the checks must be a function of what
the manager's prompt holds, never of the reference code or of an injected fault.

They are written from the turn's ``slots`` (:mod:`synthesis.domains.base`): the structured form of what the question
and context *state* — the filter ``unit price at least 50`` (``{"column": "unit_price", "op": ">=", "value": 50}``),
``round to 2 decimals``, ``keeping every order`` (a left join), ``the 3 highest``, ``drop orders with no revenue``, a
revision ``discount_rate is 0.08``, ``exclude every row with store_id S08``. Each check reads worker variables by the
names the turn's step reported (the sandbox lists them in ``check_execution``'s result) and the task's public data
through them; its code is an independent restatement of the requirement (``nlargest`` for a top-k, ``agg('sum')``
with a tolerance for a rounded total, a count of the rows that meet a filter), not a copy of any reference line, and
its assertion message says what was found against what the requirement gives, in neutral words.

A revision holds for the rest of the task: from an ``invalidate`` turn on, every later turn also re-checks the
revised value (``param``), the corrected cell (``correction``) and the excluded rows (``exclude``) on the variables
the revision re-derived.

Slots without a check here (``resample``, ``unit``, ``groupby`` inputs the revision left stale, ...) leave some faults
that no check reveals: the gold manager then commits, and synthesis counts the fault as *undetectable*.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.tasks import Task
    from synthesis.domains.base import TaskSpec, TurnSpec

logger = logging.getLogger(__name__)

MAX_CHECKS = 5
"""Checks run per turn end (with ``check_execution`` and the constraint probes, an activation has 8 actions)."""


@dataclass(frozen=True)
class Check:
    """One probe of a stated requirement.

    ``variable``: the worker variable it is about (the one a repair hint names); ``requirement``: the requirement in
    words, as the question or context states it; ``code``: the probe, which passes on a state that meets the
    requirement and otherwise fails with an ``AssertionError`` saying what it found."""

    variable: str
    requirement: str
    code: str


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def _say(value: Any) -> str:
    """``value`` as literal text inside a single-quoted f-string of a probe (quotes turned double, braces doubled)."""
    text = value if isinstance(value, str) else repr(value)
    return text.replace("\\", "/").replace("'", '"').replace("{", "{{").replace("}", "}}").replace("\n", " ")


def _tolerance(decimals: Any) -> float:
    """Half a unit in the last stated decimal (a value rounded as asked is within it), else 1e-6."""
    return 0.5 * 10.0 ** -int(decimals) + 1e-9 if isinstance(decimals, int) else 1e-6


# ---------------------------------------------------------------- one check per slot
def _filter(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, column, op, value = (slot[k] for k in ("var", "source", "column", "op", "value"))
    rule = _say(f"{column} {op} {value!r}")
    code = _lines(
        f"_meets = {source}[{column!r}] {op} {value!r}",
        f"assert len({var}) == int(_meets.sum()), (",
        f"    f'`{var}` has {{len({var})}} rows; `{source}` has {{int(_meets.sum())}} rows with {rule}')",
        f"assert bool(({var}[{column!r}] {op} {value!r}).all()), f'some rows of `{var}` do not have {rule}'",
    )
    return [Check(var, f"`{var}` holds exactly the rows of `{source}` with {column} {op} {value!r}", code)]


def _total(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, column = slot["var"], slot["source"], slot["column"]
    agg, decimals = slots.get("agg", "sum"), slots.get("round")
    code = _lines(
        f"_expected = float({source}[{column!r}].agg({agg!r}))",
        f"assert abs(float({var}) - _expected) <= {_tolerance(decimals)!r}, (",
        f"    f'`{var}` is {{{var}!r}} but the {agg} of {_say(column)} over `{source}` is {{_expected!r}}')",
    )
    return [Check(var, f"`{var}` is the {agg} of {column} over `{source}`", code)]


def _groupby(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, by, column = (slot[k] for k in ("var", "source", "by", "column"))
    agg = slots.get("agg")
    if agg not in ("sum", "mean", "median", "count"):
        return []
    frame, words = source, f"`{source}`"
    join = slots.get("join")
    if isinstance(join, Mapping) and join.get("var") == var:  # joined and grouped in one expression
        on, right = join["on"], join["right"]
        frame = f"_pd.merge({join['left']}, {right}[[{on!r}, {by!r}]], how={join['how']!r}, on={on!r})"
        words = f"`{join['left']}` joined with `{right}` on {on}"
    code = _lines(
        "import pandas as _pd",
        f"_expected = {frame}.groupby({by!r})[{column!r}].agg({agg!r})",
        f"_got = {var}",
        "_names, _groups = sorted(map(str, _got.index)), sorted(map(str, _expected.index))",
        f"assert _names == _groups, f'`{var}` has groups {{_names[:8]}}; {_say(by)}"
        f" in {_say(words)} has {{_groups[:8]}}'",
        "_gap = float((_got.astype(float).reindex(_expected.index) - _expected).abs().max())",
        f"assert _gap <= {_tolerance(slots.get('round'))!r}, (",
        f"    f'`{var}` differs from the {agg} of {_say(column)} per {_say(by)} over"
        f" {_say(words)} by up to {{_gap!r}}')",
    )
    return [Check(var, f"`{var}` is the {agg} of {column} per {by} over {words}", code)]


def _sort(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, ascending, k = slot["var"], slot["source"], bool(slot["ascending"]), int(slot["k"])
    pick, order = ("nsmallest", "smallest") if ascending else ("nlargest", "largest")
    code = _lines(
        f"_expected = [float(v) for v in {source}.{pick}({k})]",
        f"_got = [float({source}[{var}])] if isinstance({var}, str) else [float(v) for v in {var}]",
        f"assert _got == _expected, f'`{var}` holds {{_got}}; the {k} {order} of"
        f" `{source}` in order are {{_expected}}'",
    )
    return [Check(var, f"`{var}` lists the {k} {order} values of `{source}`, {order} first", code)]


def _share(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var = slot["var"]
    code = _lines(
        "import pandas as _pd",
        f"_values = _pd.Series({var}).astype(float)",
        "_outside = _values[(_values < 0) | (_values > 1)]",
        f"assert _outside.empty, f'`{var}` has values outside [0, 1]: {{dict(list(_outside.items())[:5])}}'",
    )
    return [Check(var, f"`{var}` holds fractions between 0 and 1", code)]


def _dropna(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, subset = slot["var"], slot["source"], list(slot["subset"])
    code = _lines(
        f"_complete = int({source}[list({tuple(subset)!r})].notna().all(axis=1).sum())",
        f"assert len({var}) == _complete, (",
        f"    f'`{var}` has {{len({var})}} rows; `{source}` has {{_complete}} rows"
        f" with all of {_say(subset)} present')",
    )
    return [Check(var, f"`{var}` keeps every row of `{source}` with {', '.join(subset)} all present", code)]


def _normalize(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, column, synonyms = slot["var"], slot["column"], dict(slot.get("synonyms") or {})
    code = _lines(
        f"_values = set({var}[{column!r}].dropna().astype(str))",
        f"_odd = sorted(v for v in _values if v != v.strip().title() or v in {sorted(synonyms)!r})",
        f"assert not _odd, f'`{var}` has {_say(column)} values that are not normalised: {{_odd[:8]}}'",
    )
    return [Check(var, f"the {column} values of `{var}` are trimmed, in title case, synonyms merged", code)]


def _outlier(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, column, k = slot["var"], slot["source"], slot["column"], slot["k"]
    decimals = slots.get("round")
    limit = f"_q3 + {k!r} * (_q3 - _q1)" if decimals is None else f"round(_q3 + {k!r} * (_q3 - _q1), {decimals})"
    code = _lines(
        f"_q1, _q3 = {source}[{column!r}].quantile([0.25, 0.75])",
        f"_limit = {limit}",
        f"_above = int(({source}[{column!r}] > _limit).sum())",
        f"assert len({var}) == _above, (",
        f"    f'`{var}` has {{len({var})}} rows; {{_above}} rows of `{source}` have {_say(column)} above "
        f"Q3 + {k} * IQR = {{_limit}}')",
    )
    return [Check(var, f"`{var}` holds the rows of `{source}` with {column} above Q3 + {k} * IQR", code)]


def _missing(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source = slot["var"], slot["source"]
    code = _lines(
        f"_expected = {{str(c): int(n) for c, n in {source}.isna().sum().items() if n}}",
        f"_got = {{str(c): int(n) for c, n in dict({var}).items() if n}}",
        f"assert _got == _expected, f'`{var}` counts {{_got}}; the NaN cells per"
        f" column of `{source}` are {{_expected}}'",
    )
    return [Check(var, f"`{var}` counts the NaN cells per column of `{source}`", code)]


def _join(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, left, right, on, how = (slot[k] for k in ("var", "left", "right", "on", "how"))
    grouped = slots.get("groupby")
    if isinstance(grouped, Mapping) and grouped.get("var") == var:
        return []  # joined and grouped in one expression: the groupby check covers the join
    if how == "left":
        expected, words = f"len({left})", f"every row of `{left}` once"
    elif how == "inner":
        expected, words = f"int({left}[{on!r}].isin(set({right}[{on!r}])).sum())", f"the rows of `{left}` matched"
    else:
        return []
    code = _lines(
        f"_expected = {expected}",
        f"assert len({var}) == _expected, f'`{var}` has {{len({var})}} rows;"
        f" joining on {_say(on)} keeps {{_expected}}'",
    )
    return [Check(var, f"`{var}` (a {how} join on {on}) keeps {words}", code)]


def _overlap(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, left, right = slot["var"], slot["left"], slot["right"]
    code = _lines(
        "import pandas as _pd",
        f"_keys = [set(v.index) if isinstance(v, _pd.DataFrame | _pd.Series) else set(v) for v in ({left}, {right})]",
        "_common = _keys[0] & _keys[1]",
        f"assert len({var}) == len(_common), f'`{var}` has {{len({var})}} entries; `{left}` and `{right}` share "
        "{len(_common)}'",
    )
    return [Check(var, f"`{var}` holds what `{left}` and `{right}` have in common", code)]


def _param(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, new = slot["var"], slot["new"]
    code = _lines(f"assert {var} == {new!r}, f'`{var}` is {{{var}!r}}; the revision sets it to {_say(new)}'")
    return [Check(var, f"`{var}` is {new!r} after the revision", code)]


def _correction(slot: Mapping[str, Any], _: Mapping[str, Any], targets: Sequence[str] = ()) -> list[Check]:
    column, key_column, key, new = slot["column"], slot.get("key_column"), slot["key"], slot["new"]
    out = []
    for var in dict.fromkeys([slot["var"], *targets]):
        rows = (
            f"{var}.loc[{var}.index == {key!r}]" if key_column is None else f"{var}[{var}[{key_column!r}] == {key!r}]"
        )
        where = _say(f"row {key!r}" if key_column is None else f"{key_column} {key!r}")
        has_key = "" if key_column is None else f" and {key_column!r} in {var}.columns"
        code = _lines(
            "import pandas as _pd",
            f"if isinstance({var}, _pd.DataFrame) and {column!r} in {var}.columns{has_key}:",
            f"    _rows = {rows}",
            f"    _wrong = _rows[{column!r}][_rows[{column!r}] != {new!r}].tolist()",
            f"    assert not _wrong, f'`{var}` has {_say(column)} = {{_wrong[:3]}} for {where}; the correction "
            f"is {_say(new)}'",
        )
        out.append(Check(var, f"{column} is {new!r} for {where} in `{var}`", code))
    return out


def _exclude(slot: Mapping[str, Any], _: Mapping[str, Any], targets: Sequence[str] = ()) -> list[Check]:
    column, value = slot["column"], slot["value"]
    out = []
    for var in dict.fromkeys([slot["var"], *targets]):
        code = _lines(
            "import pandas as _pd",
            f"if isinstance({var}, _pd.DataFrame) and {column!r} in {var}.columns:",
            f"    _left = int(({var}[{column!r}] == {value!r}).sum())",
            f"    assert _left == 0, f'`{var}` still has {{_left}} rows with {_say(column)} {_say(value)}'",
        )
        out.append(Check(var, f"`{var}` has no row with {column} {value!r}", code))
    return out


def _round(decimals: Any, _: Mapping[str, Any]) -> list[Check]:
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        return []
    code = _lines(
        "def _numbers(value):",
        "    if isinstance(value, dict):",
        "        value = list(value.values())",
        "    if isinstance(value, list | tuple):",
        "        return [x for item in value for x in _numbers(item)]",
        "    return [value] if isinstance(value, float) else []",
        f"_long = [x for x in _numbers(result) if abs(x - round(x, {decimals})) > 1e-9]",
        f"assert not _long, f'`result` reports numbers with more than {decimals} decimals: {{_long[:5]}}'",
    )
    return [Check("result", f"every number the turn reports is rounded to {decimals} decimals", code)]


SLOT_CHECKS = {
    "filter": _filter,
    "total": _total,
    "groupby": _groupby,
    "sort": _sort,
    "share": _share,
    "dropna": _dropna,
    "normalize": _normalize,
    "outlier": _outlier,
    "missing": _missing,
    "join": _join,
    "overlap": _overlap,
    "round": _round,
}
"""Slot key -> the checks of a turn that states it (the revision slots are handled by :func:`revision_checks`)."""


def revision_checks(turn: TurnSpec, later_writes: Sequence[str] = ()) -> list[Check]:
    """The checks of an ``invalidate`` turn's revision, on the revised variable and on the variables it re-derived
    (``slots["recompute"]``); ``later_writes`` restricts those to variables still current (not re-assigned by a turn
    that does not follow the revision)."""
    slots = turn.slots
    targets = [v for v in slots.get("recompute", ()) if not later_writes or v in later_writes]
    out: list[Check] = []
    if "param" in slots:
        out += _param(slots["param"], slots)
    if "correction" in slots:
        out += _correction(slots["correction"], slots, targets)
    if "exclude" in slots:
        out += _exclude(slots["exclude"], slots, targets)
    return out


def slot_checks(turn: TurnSpec) -> list[Check]:
    """The checks of the requirements ``turn`` itself states (one or two per slot of :data:`SLOT_CHECKS`)."""
    out: list[Check] = []
    stated = dict(turn.slots)
    tolerances = {**stated, "round": stated.get("round", turn.precision)}  # values compared at the graded decimals
    for key, write in SLOT_CHECKS.items():
        if isinstance(stated.get(key), Mapping) or (key == "round" and "round" in stated):
            try:
                out += write(stated[key], tolerances)
            except (KeyError, TypeError, ValueError) as exc:  # a malformed slot: no check for it, said once
                logger.warning(
                    "turn %s: no check for its %r slot (%s: %s)", turn.turn_id, key, type(exc).__name__, exc
                )
    return out


def turn_checks(task: TaskSpec, turn: TurnSpec) -> tuple[Check, ...]:
    """The checks of ``turn`` (at most :data:`MAX_CHECKS`): its own stated requirements first (for an ``invalidate``
    turn, also those of the earlier turns whose variables it re-derives, on those variables), then the standing
    revisions of the earlier ``invalidate`` turns (the latest first), without repeats."""
    index = next(i for i, t in enumerate(task.turns) if t.turn_id == turn.turn_id)
    own = slot_checks(turn)
    if turn.relation == "invalidate":  # "what are X (turn 4) now?": turn 4's requirements, on the re-derived values
        recomputed = set(turn.slots.get("recompute", ()))
        for earlier in task.turns[:index]:
            if recomputed & set(earlier.writes) and earlier.relation != "invalidate":
                own += [c for c in slot_checks(earlier) if c.variable in recomputed]
    standing: list[Check] = []
    revised: set[str] = set()  # parameters a later revision set again: the earlier value no longer holds
    for earlier in reversed(task.turns[: index + 1]):
        if earlier.relation != "invalidate":
            continue
        param = earlier.slots.get("param")
        standing += [c for c in revision_checks(earlier) if not (param and c.variable in revised)]
        if isinstance(param, Mapping):
            revised.add(param["var"])
    checks: dict[str, Check] = {}
    for check in own + standing:
        checks.setdefault(check.code, check)
    return tuple(checks.values())[:MAX_CHECKS]


def task_checks(task: TaskSpec) -> dict[str, tuple[Check, ...]]:
    """``{turn_id: turn_checks(task, turn)}`` for every turn of ``task``."""
    return {turn.turn_id: turn_checks(task, turn) for turn in task.turns}


def folder_checks(task: Task) -> dict[str, tuple[Check, ...]]:
    """:func:`task_checks` of a written multi-turn task folder: its public turns with the ``writes`` and ``slots`` of
    ``private/synthesis.json`` (no tables are read). ``{}`` for a task that is not multi-turn or has no such file
    (an imported task: its turns are verified by ``check_execution`` and their constraints only)."""
    from synthesis.domains.base import TaskSpec, TurnSpec

    extra_path = task.private_dir / "synthesis.json"
    if task.kind != "multi_turn" or not extra_path.is_file():
        return {}
    extra = json.loads(extra_path.read_text(encoding="utf-8")).get("turns", {})
    turns = tuple(
        TurnSpec(
            turn_id=turn.turn_id,
            question=turn.question,
            context=turn.context or "",
            code="",
            depends_on=tuple(turn.depends_on),
            relation=turn.relation,
            precision=turn.precision,
            writes=tuple(extra.get(turn.turn_id, {}).get("writes", ())),
            slots=extra.get(turn.turn_id, {}).get("slots", {}),
        )
        for turn in task.turns
    )
    spec = TaskSpec(task.id, "", 0, task.name, "", {}, turns)
    return task_checks(spec)
