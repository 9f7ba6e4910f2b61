"""The checks a careful manager writes at a turn end from the turn's stated requirements (:func:`turn_checks`).

The gold manager (:mod:`synthesis.gold`) verifies every turn end the same way, clean, faulted or benign: it runs
``check_execution`` of the turn's last step, a ``run_check`` of every constraint the turn states (the spec that
restates the constraint, :func:`constraint_checks`; a ``run_probe`` of the constraint's own code when no spec states
it) and a ``run_check`` of every check listed here; its decision follows from those results alone. So the checks must
be a function of what the manager's prompt holds, never of the reference code or of an injected fault.

A check is a typed spec (:mod:`harness.checks.spec`), never code: this module translates, the harness compiles
(:func:`harness.checks.compile.compile_check`) and runs it in the clean verifier. The specs are written from the
turn's ``slots`` (:mod:`synthesis.domains.base`): the structured form of what the question and context *state* — the
filter ``unit price at least 50`` (a ``filter`` spec), ``round to 2 decimals`` (``rounded``, and the ``decimals`` of
every recomputed number), ``keeping every order`` (``join_rows``, left), ``the 3 highest`` (``top_k``), ``drop orders
with no revenue`` (``complete_rows``), ``monthly totals in thousands`` (``resample`` with ``factor`` 1000), a revision
``discount_rate is 0.08`` (``param``), ``exclude every row with store_id S08`` (``excluded_rows``). Each spec names
worker variables by the names the turn's step reported (the sandbox lists them in ``check_execution``'s result) and
public table columns; its requirement is stated in neutral words.

Slot -> kind: filter -> filter; total -> aggregate (the turn's ``agg`` and rounding); groupby -> group_aggregate
(through the join when one expression joins and groups); sort -> top_k; share -> share; dropna -> complete_rows;
normalize -> normalized; outlier -> iqr_outliers; missing -> nan_counts; join -> join_rows; overlap -> overlap;
resample -> resample (the ``unit`` factor of the same variable included); unit -> unit_scale (on a variable that is not
resampled); round -> rounded; param -> param; correction -> corrected_cell; exclude -> excluded_rows.

A revision holds for the rest of the task: from an ``invalidate`` turn on, every later turn also re-checks the
revised value (``param``), the corrected cell (``correction``) and the excluded rows (``exclude``) on the variables
the revision re-derived.

Slots without a check (``groupby`` inputs the revision left stale, a ``groupby`` with ``min``/``max``, ...) leave some
faults that no check reveals: the gold manager then commits, and synthesis counts the fault as *undetectable*.
``skip_kinds`` (the synthesis config's ``gold_skip_check_kinds``) leaves out the checks of some kinds, e.g.
``unit_scale`` and ``resample`` to measure what was detectable without them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.checks.spec import MAX_DECIMALS, CheckSpec, CheckSpecError, parse_spec

if TYPE_CHECKING:
    from harness.tasks import Task
    from synthesis.domains.base import TaskSpec, TurnSpec

logger = logging.getLogger(__name__)

MAX_CHECKS = 5
"""Checks run per turn end (with ``check_execution`` and the constraint probes, an activation has 8 actions)."""


@dataclass(frozen=True)
class Check:
    """One check of a stated requirement.

    ``variable``: the worker variable it is about (the one a repair hint names); ``requirement``: the requirement in
    words, as the question or context states it; ``spec``: the typed check (:mod:`harness.checks.spec`) the manager
    runs with ``run_check``, which passes on a state that meets the requirement and otherwise fails saying what it
    found; ``constraint``: the text of the public constraint the check restates (empty for a check written from the
    turn's stated requirements)."""

    variable: str
    requirement: str
    spec: CheckSpec
    constraint: str = ""

    @property
    def key(self) -> str:
        """The spec as canonical JSON (two checks with the same key run the same verdict)."""
        return json.dumps(self.spec.to_dict(), sort_keys=True)


def _decimals(value: Any) -> int | None:
    """The stated rounding as a spec's ``decimals`` (None: compared to 1e-6)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DECIMALS else None


# ---------------------------------------------------------------- one check per slot
def _filter(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, column, op, value = (slot[k] for k in ("var", "source", "column", "op", "value"))
    spec = parse_spec(
        {"kind": "filter", "variable": var, "source": source, "column": column, "op": op, "value": value}
    )
    return [Check(var, f"`{var}` holds exactly the rows of `{source}` with {column} {op} {value!r}", spec)]


def _total(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, column = slot["var"], slot["source"], slot["column"]
    agg = slots.get("agg", "sum")
    spec = parse_spec(
        {"kind": "aggregate", "variable": var, "source": source, "column": column, "agg": agg,
         "decimals": _decimals(slots.get("round"))}
    )  # fmt: skip
    return [Check(var, f"`{var}` is the {agg} of {column} over `{source}`", spec)]


def _groupby(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, by, column = (slot[k] for k in ("var", "source", "by", "column"))
    agg = slots.get("agg")
    if agg not in ("sum", "mean", "median", "count"):
        return []
    fields: dict[str, Any] = {"kind": "group_aggregate", "variable": var, "source": source, "by": by}
    fields |= {"column": column, "agg": agg, "decimals": _decimals(slots.get("round"))}
    words = f"`{source}`"
    join = slots.get("join")
    if isinstance(join, Mapping) and join.get("var") == var:  # joined and grouped in one expression
        fields |= {"source": join["left"], "join_right": join["right"], "join_on": join["on"], "join_how": join["how"]}
        words = f"`{join['left']}` joined with `{join['right']}` on {join['on']}"
    return [Check(var, f"`{var}` is the {agg} of {column} per {by} over {words}", parse_spec(fields))]


def _sort(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, ascending, k = slot["var"], slot["source"], bool(slot["ascending"]), int(slot["k"])
    order = "smallest" if ascending else "largest"
    spec = parse_spec({"kind": "top_k", "variable": var, "source": source, "k": k, "order": order})
    return [Check(var, f"`{var}` lists the {k} {order} values of `{source}`, {order} first", spec)]


def _share(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var = slot["var"]
    return [Check(var, f"`{var}` holds fractions between 0 and 1", parse_spec({"kind": "share", "variable": var}))]


def _dropna(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source, subset = slot["var"], slot["source"], list(slot["subset"])
    spec = parse_spec({"kind": "complete_rows", "variable": var, "source": source, "columns": subset})
    return [Check(var, f"`{var}` keeps every row of `{source}` with {', '.join(subset)} all present", spec)]


def _normalize(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, column, synonyms = slot["var"], slot["column"], dict(slot.get("synonyms") or {})
    spec = parse_spec({"kind": "normalized", "variable": var, "column": column, "variants": sorted(synonyms)})
    return [Check(var, f"the {column} values of `{var}` are trimmed, in title case, synonyms merged", spec)]


def _outlier(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, source, column, k = slot["var"], slot["source"], slot["column"], slot["k"]
    spec = parse_spec(
        {"kind": "iqr_outliers", "variable": var, "source": source, "column": column, "k": float(k),
         "decimals": _decimals(slots.get("round"))}
    )  # fmt: skip
    return [Check(var, f"`{var}` holds the rows of `{source}` with {column} above Q3 + {k} * IQR", spec)]


def _missing(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, source = slot["var"], slot["source"]
    spec = parse_spec({"kind": "nan_counts", "variable": var, "source": source})
    return [Check(var, f"`{var}` counts the NaN cells per column of `{source}`", spec)]


def _join(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    var, left, right, on, how = (slot[k] for k in ("var", "left", "right", "on", "how"))
    grouped = slots.get("groupby")
    if isinstance(grouped, Mapping) and grouped.get("var") == var:
        return []  # joined and grouped in one expression: the groupby check covers the join
    if how not in ("left", "inner"):
        return []
    words = f"every row of `{left}` once" if how == "left" else f"the rows of `{left}` matched"
    spec = parse_spec({"kind": "join_rows", "variable": var, "left": left, "right": right, "on": on, "how": how})
    return [Check(var, f"`{var}` (a {how} join on {on}) keeps {words}", spec)]


def _overlap(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, left, right = slot["var"], slot["left"], slot["right"]
    spec = parse_spec({"kind": "overlap", "variable": var, "left": left, "right": right})
    return [Check(var, f"`{var}` holds what `{left}` and `{right}` have in common", spec)]


def _resample(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    """Monthly totals: the ``measure`` summed per calendar month of the date ``column``, in the stated ``unit``."""
    var, source, date_column, column = slot["var"], slot["source"], slot["column"], slot["measure"]
    if slot.get("rule", "MS") != "MS":
        return []
    unit = slots.get("unit")
    factor = unit["factor"] if isinstance(unit, Mapping) and unit.get("var") == var else 1
    spec = parse_spec(
        {"kind": "resample", "variable": var, "source": source, "date_column": date_column, "column": column,
         "agg": "sum", "factor": factor, "decimals": _decimals(slots.get("round"))}
    )  # fmt: skip
    scale = f", in units of {factor}" if factor != 1 else ""
    return [Check(var, f"`{var}` is the total of {column} per calendar month of {date_column}{scale}", spec)]


def _unit(slot: Mapping[str, Any], slots: Mapping[str, Any]) -> list[Check]:
    """A stated unit: its values times ``factor`` add up to the source column's total. Monthly totals state their unit
    in the ``resample`` check (which compares month by month), so a unit on a resampled variable adds none."""
    var, factor = slot["var"], slot["factor"]
    resampled = slots.get("resample")
    if isinstance(resampled, Mapping) and resampled.get("var") == var:
        return []
    spec = parse_spec(
        {"kind": "unit_scale", "variable": var, "source": slot["source"], "column": slot["column"], "factor": factor}
    )
    return [Check(var, f"`{var}` is stated in units of {factor} of {slot['column']}", spec)]


def _param(slot: Mapping[str, Any], _: Mapping[str, Any]) -> list[Check]:
    var, new = slot["var"], slot["new"]
    return [
        Check(
            var, f"`{var}` is {new!r} after the revision", parse_spec({"kind": "param", "variable": var, "value": new})
        )
    ]


def _correction(slot: Mapping[str, Any], _: Mapping[str, Any], targets: Sequence[str] = ()) -> list[Check]:
    column, key_column, key, new = slot["column"], slot.get("key_column"), slot["key"], slot["new"]
    where = f"row {key!r}" if key_column is None else f"{key_column} {key!r}"
    return [
        Check(
            var,
            f"{column} is {new!r} for {where} in `{var}`",
            parse_spec(
                {
                    "kind": "corrected_cell",
                    "variable": var,
                    "column": column,
                    "key": key,
                    "value": new,
                    "key_column": key_column,
                }
            ),  # fmt: skip
        )
        for var in dict.fromkeys([slot["var"], *targets])
    ]


def _exclude(slot: Mapping[str, Any], _: Mapping[str, Any], targets: Sequence[str] = ()) -> list[Check]:
    column, value = slot["column"], slot["value"]
    return [
        Check(
            var,
            f"`{var}` has no row with {column} {value!r}",
            parse_spec({"kind": "excluded_rows", "variable": var, "column": column, "value": value}),
        )
        for var in dict.fromkeys([slot["var"], *targets])
    ]


def _round(decimals: Any, _: Mapping[str, Any]) -> list[Check]:
    if _decimals(decimals) is None:
        return []
    spec = parse_spec({"kind": "rounded", "variable": "result", "decimals": decimals})
    return [Check("result", f"every number the turn reports is rounded to {decimals} decimals", spec)]


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
    "resample": _resample,
    "unit": _unit,
    "round": _round,
}
"""Slot key -> the checks of a turn that states it (the revision slots are handled by :func:`revision_checks`)."""


def revision_checks(turn: TurnSpec, later_writes: Sequence[str] = ()) -> list[Check]:
    """The checks of an ``invalidate`` turn's revision, on the revised variable and on the variables it re-derived
    (``slots["recompute"]``); ``later_writes`` restricts those to variables still current (not re-assigned by a turn
    that does not follow the revision)."""
    slots = turn.slots
    targets = [v for v in slots.get("recompute", ()) if not later_writes or v in later_writes]
    return revision_checks_of(slots, targets)


def revision_checks_of(slots: Mapping[str, Any], targets: Sequence[str] = ()) -> list[Check]:
    """The checks of the revision ``slots`` state (``param``, ``correction``, ``exclude``), also on ``targets``."""
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
            except (
                KeyError,
                TypeError,
                ValueError,
                CheckSpecError,
            ) as exc:  # a malformed slot: no check for it, said once
                logger.warning(
                    "turn %s: no check for its %r slot (%s: %s)", turn.turn_id, key, type(exc).__name__, exc
                )
    return out


_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_ROUNDED = re.compile(rf"assert all\(abs\(v - round\(v, (\d+)\)\) < 1e-9 for v in {_NAME}\)")
_SHARE = (
    re.compile(rf"assert 0 <= {_NAME} <= 1 and "),
    re.compile(rf"assert \(\(\({_NAME}\) >= 0\) & \(\(\1\) <= 1\)\)\.all\(\)"),
)
_ROWS_KEPT = re.compile(rf"assert len\({_NAME}\) == len\({_NAME}\)")


def _constraint_spec(code: str, slots: Mapping[str, Any]) -> CheckSpec | None:
    """The spec that restates a public constraint's ``code`` (the forms the task templates write), None for a form
    without one (e.g. a set of allowed values, a derived-column rule)."""
    code = code.strip()
    if match := _ROUNDED.fullmatch(code):
        return parse_spec({"kind": "rounded", "variable": match[2], "decimals": int(match[1])})
    for form in _SHARE:
        if match := form.match(code):
            return parse_spec({"kind": "share", "variable": match[1]})
    join = slots.get("join")
    if (match := _ROWS_KEPT.fullmatch(code)) and isinstance(join, Mapping) and join.get("how") == "left":
        if (match[1], match[2]) == (join["var"], join["left"]):
            return _join(join, {})[0].spec
    resampled, unit = slots.get("resample"), slots.get("unit")
    if isinstance(resampled, Mapping) and isinstance(unit, Mapping) and unit["var"] in code and "* " in code:
        return parse_spec(
            {"kind": "unit_scale", "variable": unit["var"], "source": resampled["source"],
             "column": resampled["measure"], "factor": unit["factor"]}
        )  # fmt: skip
    revisions = [c.spec for c in revision_checks_of(slots) if c.spec.variable in code]
    for spec in revisions:
        value = getattr(spec, "value", None)
        if value is not None and repr(value) in code:
            return spec
    return None


def constraint_checks(
    turn: TurnSpec, skip_kinds: Collection[str] = (), earlier: Sequence[TurnSpec] = ()
) -> tuple[Check, ...]:
    """The checks that restate ``turn``'s public constraints as specs (``constraint`` holds the constraint's text),
    for the constraints whose code has a form a spec states; the others keep their code. ``earlier``: the turns whose
    constraints an ``invalidate`` turn repeats (their slots name the variables of those constraints)."""
    out = []
    for text, code in turn.constraints:
        if not code:
            continue
        spec = None
        for slots in (turn.slots, *(t.slots for t in earlier)):
            try:
                spec = _constraint_spec(code, slots)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                logger.warning("turn %s: constraint %r: %s: %s", turn.turn_id, text, type(exc).__name__, exc)
            if spec is not None:
                break
        if spec is not None and spec.kind not in skip_kinds:
            out.append(Check(spec.variable, text, spec, constraint=text))
    return tuple(out)


def turn_checks(task: TaskSpec, turn: TurnSpec, skip_kinds: Collection[str] = ()) -> tuple[Check, ...]:
    """The checks of ``turn`` (at most :data:`MAX_CHECKS`): its own stated requirements first (for an ``invalidate``
    turn, also those of the earlier turns whose variables it re-derives, on those variables), then the standing
    revisions of the earlier ``invalidate`` turns (the latest first), without repeats and without checks of the kinds
    in ``skip_kinds`` (e.g. ``("unit_scale", "resample")`` measures what is detectable without them)."""
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
        if check.spec.kind not in skip_kinds:
            checks.setdefault(check.key, check)
    return tuple(checks.values())[:MAX_CHECKS]


def task_checks(task: TaskSpec, skip_kinds: Collection[str] = ()) -> dict[str, tuple[Check, ...]]:
    """``{turn_id: checks}`` for every turn of ``task``: :func:`turn_checks`, then :func:`constraint_checks`."""
    out = {}
    for index, turn in enumerate(task.turns):
        recomputed = set(turn.slots.get("recompute", ())) if turn.relation == "invalidate" else set()
        earlier = [t for t in task.turns[:index] if recomputed & set(t.writes)]
        out[turn.turn_id] = turn_checks(task, turn, skip_kinds) + constraint_checks(turn, skip_kinds, earlier)
    return out


def folder_checks(task: Task, skip_kinds: Collection[str] = ()) -> dict[str, tuple[Check, ...]]:
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
            constraints=tuple((c.text, c.code) for c in turn.constraints),
            writes=tuple(extra.get(turn.turn_id, {}).get("writes", ())),
            slots=extra.get(turn.turn_id, {}).get("slots", {}),
        )
        for turn in task.turns
    )
    spec = TaskSpec(task.id, "", 0, task.name, "", {}, turns)
    return task_checks(spec, skip_kinds)
