"""The harmful fault types that change one value-level expression of a turn's code (column, threshold, aggregation,
rounding, units) and the helpers the other fault modules share; :mod:`synthesis.faults.rows` has the row-level
types (joins, NaN handling, sorting). Each ``propose_*`` lists every :class:`~synthesis.faults.model.Edit` of a
turn; sites the turn's ``slots`` name come first (only they are returned when there are any), so generated tasks get
the semantically intended fault and imported tasks still get one from their code.

Slots read (all optional; vocabulary in synthesis/domains/base.py): ``filter`` ``{"column", "value"}``, ``agg``,
``round``, ``sort`` ``{"k"}``, ``join`` ``{"on"}``, ``unit`` ``{"factor"}``, ``dropna`` ``{"var"}``; for
stale_variable (:mod:`synthesis.faults.special`) ``recompute``, ``param`` and ``correction``.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.pyast import parse_python
from synthesis.faults.code import Site, expr_text, node_text, replace_node, sites, stmt_writes
from synthesis.faults.model import Edit

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec, TurnSpec

Propose = Callable[["TaskSpec", "TurnSpec", "Mapping[str, Any] | None", random.Random], list[Edit]]

AGG_SWAP = {"mean": "median", "median": "mean", "sum": "mean", "max": "min", "min": "max", "std": "var", "var": "std"}
UNIT_FACTORS = (10, 12, 24, 60, 100, 365, 1000, 1024, 3600, 1_000_000)
RATIO_WORDS = ("share", "fraction", "percent", "proportion", "rate", "ratio")
FLIP_STRICT = {ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Lt: ast.LtE, ast.LtE: ast.Lt}
OP_TEXT = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}


# ---- small helpers ----------------------------------------------------------------------------------------------
def slots_of(turn: TurnSpec) -> Mapping[str, Any]:
    return getattr(turn, "slots", None) or {}


def slot_get(turn: TurnSpec, key: str, field_name: str | None = None) -> Any:
    value = slots_of(turn).get(key)
    if field_name is None or value is None:
        return value
    return value.get(field_name) if isinstance(value, Mapping) else None


def prefer(edits: list[tuple[bool, Edit]]) -> list[Edit]:
    """The slot-matching edits when there are any, else all of them."""
    preferred = [edit for hit, edit in edits if hit]
    return preferred or [edit for _, edit in edits]


def roots_of(site: Site) -> tuple[str, ...]:
    return tuple(stmt_writes(site.stmt))


def tables_with(task: TaskSpec, column: str) -> list[pd.DataFrame]:
    return [df for df in getattr(task, "tables", {}).values() if column in df.columns]


def column_values(task: TaskSpec, column: str) -> pd.Series | None:
    frames = [df[column] for df in tables_with(task, column)]
    return pd.concat(frames, ignore_index=True) if frames else None


def is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def column_of(node: ast.AST) -> str | None:
    """``'col'`` for ``x['col']`` or ``x.col`` (the column an expression reads), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Subscript | ast.Attribute):
        return node.attr
    return None


def is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def method_call(node: ast.AST, names: Any) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names


def keyword(node: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in node.keywords if k.arg == name), None)


def edit_call(code: str, node: ast.Call, change: Callable[[ast.Call], None]) -> str:
    new = parse_python(ast.unparse(node), mode="eval").body
    assert isinstance(new, ast.Call)
    change(new)
    return replace_node(code, node, expr_text(new))


def root_name(roots: tuple[str, ...]) -> str:
    named = [r for r in roots if r != "result"]
    return (named or list(roots) or ["the result"])[0]


def format_like(old: float | int, new: float) -> float | int:
    if isinstance(old, int) and float(new).is_integer():
        return int(new)
    return round(float(new), 6)


# ---- wrong_column -----------------------------------------------------------------------------------------------
def _alternatives(task: TaskSpec, column: str) -> list[str]:
    """Other columns of the tables holding ``column``, of the same kind (numeric or not); id-like ones last."""
    found: list[str] = []
    for df in tables_with(task, column):
        kind = is_numeric(df[column])
        found += [c for c in df.columns if c != column and is_numeric(df[c]) == kind and c not in found]
    plain = [c for c in found if "id" not in c.lower().split("_")]
    return plain or found


def propose_wrong_column(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "filter", "column")

    def match(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            return column_of(node) is not None
        return method_call(node, {"groupby"}) and bool(node.args) and isinstance(node.args[0], ast.Constant)

    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, match):
        target = site.node.slice if isinstance(site.node, ast.Subscript) else site.node.args[0]  # type: ignore[attr-defined]
        column = target.value if isinstance(target, ast.Constant) else None
        if not isinstance(column, str):
            continue
        for alt in _alternatives(task, column)[:3]:
            roots = roots_of(site)
            code = replace_node(turn.code, target, repr(alt))
            var = root_name(roots)
            edits.append(
                (
                    column == wanted,
                    Edit(
                        code=code,
                        roots=roots,
                        violated=f"the question is about the column '{column}', not '{alt}'",
                        check=f"`{var}` must be computed from the column '{column}' the question refers to",
                        reasoning=f"it was computed from the column '{alt}' instead of '{column}', the column the "
                        "question is about",
                    ),
                )
            )
    return prefer(edits)


# ---- wrong_threshold --------------------------------------------------------------------------------------------
def _threshold_parts(node: ast.Compare) -> tuple[ast.expr, ast.Constant, type, bool] | None:
    """``(column side, constant, op type, constant_on_right)`` of ``x > 5`` / ``5 < x``, else None."""
    if len(node.ops) != 1 or type(node.ops[0]) not in FLIP_STRICT:
        return None
    left, right = node.left, node.comparators[0]
    if is_number(right):
        return left, right, type(node.ops[0]), True  # type: ignore[return-value]
    if is_number(left):
        return right, left, type(node.ops[0]), False  # type: ignore[return-value]
    return None


def _selected(values: pd.Series, op: type, threshold: float, on_right: bool) -> int:
    ops = {ast.Gt: values.gt, ast.GtE: values.ge, ast.Lt: values.lt, ast.LtE: values.le}
    if not on_right:  # 5 < x  ==  x > 5
        flip = {ast.Gt: ast.Lt, ast.Lt: ast.Gt, ast.GtE: ast.LtE, ast.LtE: ast.GtE}
        op = flip[op]
    return int(ops[op](threshold).sum())


def propose_wrong_threshold(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "filter", "value")
    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: isinstance(n, ast.Compare) and _threshold_parts(n) is not None):
        side, const, op, on_right = _threshold_parts(site.node)  # type: ignore[arg-type,misc]
        column = column_of(side)
        values = column_values(task, column) if column else None
        values = values.dropna() if values is not None and is_numeric(values) else None
        old = const.value
        roots, hit = roots_of(site), wanted is not None and old == wanted
        var, rule = root_name(roots), node_text(turn.code, site.node)
        variants: list[tuple[str, str]] = []
        # off-by-one: strict vs non-strict; it only bites when some value equals the threshold
        if values is None or bool((values == old).any()):
            flipped = ast.Compare(left=site.node.left, ops=[FLIP_STRICT[op]()], comparators=site.node.comparators)
            variants.append((ast.unparse(flipped), f"'{OP_TEXT[FLIP_STRICT[op]]}' instead of '{OP_TEXT[op]}'"))
        # a shifted threshold: the nearest data value that changes which rows pass, else a 10% shift
        new = None
        if values is not None:
            base = _selected(values, op, old, on_right)
            for value in sorted(set(values.tolist()) - {old}, key=lambda v: (abs(v - old), v)):
                if _selected(values, op, value, on_right) != base:
                    new = format_like(old, value)
                    break
        elif isinstance(old, int):
            new = old + 1
        else:
            new = round(old * 1.1, 6)
        if new is not None and new != old:
            moved = parse_python(ast.unparse(site.node), mode="eval").body
            target = moved.comparators[0] if on_right else moved.left  # type: ignore[attr-defined]
            target.value = new
            shifted = ast.unparse(moved)
            variants.append((shifted, f"the threshold {new} instead of {old}"))
        for text, what in variants:
            edits.append(
                (
                    hit,
                    Edit(
                        code=replace_node(turn.code, site.node, f"({text})"),
                        roots=roots,
                        violated=f"the filter must be `{rule}`",
                        check=f"`{var}` must follow the filter {rule} stated by the question",
                        reasoning=f"the filter uses {what}, so it keeps the wrong rows",
                    ),
                )
            )
    return prefer(edits)


# ---- wrong_aggregation ------------------------------------------------------------------------------------------
def propose_wrong_aggregation(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "agg")

    def match(node: ast.AST) -> bool:
        if method_call(node, AGG_SWAP):
            return not node.args  # type: ignore[attr-defined]
        return (
            method_call(node, {"agg", "aggregate"})
            and len(node.args) == 1  # type: ignore[attr-defined]
            and isinstance(node.args[0], ast.Constant)  # type: ignore[attr-defined]
            and node.args[0].value in AGG_SWAP  # type: ignore[attr-defined]
        )

    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, match):
        node: ast.Call = site.node  # type: ignore[assignment]
        if node.func.attr in AGG_SWAP:  # type: ignore[attr-defined]
            old = node.func.attr  # type: ignore[attr-defined]

            def change(call: ast.Call, new: str = AGG_SWAP[old]) -> None:
                call.func.attr = new  # type: ignore[attr-defined]
        else:
            old = node.args[0].value  # type: ignore[attr-defined]

            def change(call: ast.Call, new: str = AGG_SWAP[old]) -> None:
                call.args[0] = ast.Constant(new)

        new = AGG_SWAP[old]
        roots = roots_of(site)
        edits.append(
            (
                old == wanted,
                Edit(
                    code=edit_call(turn.code, node, change),
                    roots=roots,
                    violated=f"the question asks for the {old}",
                    check=f"`{root_name(roots)}` must be the {old} the question asks for",
                    reasoning=f"it takes the {new} where the question asks for the {old}",
                ),
            )
        )
    return prefer(edits)


# ---- rounding ---------------------------------------------------------------------------------------------------
def _decimals(node: ast.AST) -> ast.Constant | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and node.func.id == "round" and len(node.args) == 2:
        arg = node.args[1]
    elif method_call(node, {"round"}) and len(node.args) == 1:
        arg = node.args[0]
    else:
        return None
    ok = isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool)
    return arg if ok and arg.value >= 1 else None  # type: ignore[return-value]


def propose_rounding(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "round")
    if wanted is None:
        wanted = getattr(turn, "precision", None)
    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: _decimals(n) is not None):
        arg = _decimals(site.node)
        assert arg is not None
        n = arg.value
        fewer = max(n - 2, 0)  # two decimals fewer: one fewer often leaves a value that is already short unchanged
        roots = roots_of(site)
        edits.append(
            (
                n == wanted,
                Edit(
                    code=replace_node(turn.code, arg, str(fewer)),
                    roots=roots,
                    violated=f"values must be rounded to {n} decimals",
                    check=f"`{root_name(roots)}` must be rounded to {n} decimals as the context requires",
                    reasoning=f"it is rounded to {fewer} decimals, but the required precision is {n} decimals",
                ),
            )
        )
    return prefer(edits)


# ---- unit_slip --------------------------------------------------------------------------------------------------
def propose_unit_slip(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "unit", "factor")

    def factor_of(node: ast.AST) -> tuple[ast.expr, Any] | None:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div)):
            return None
        for const, other in ((node.right, node.left), (node.left, node.right)):
            if is_number(const) and const.value in UNIT_FACTORS:  # type: ignore[attr-defined]
                return other, const.value  # type: ignore[attr-defined]
        return None

    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: factor_of(n) is not None):
        other, factor = factor_of(site.node)  # type: ignore[misc]
        roots = roots_of(site)
        verb = "multiplied by" if isinstance(site.node.op, ast.Mult) else "divided by"  # type: ignore[attr-defined]
        edits.append(
            (
                factor == wanted,
                Edit(
                    code=replace_node(turn.code, site.node, expr_text(other)),
                    roots=roots,
                    violated=f"the unit conversion (a factor of {factor}) the context states",
                    check=f"`{root_name(roots)}` must be in the unit the context states (a factor of {factor})",
                    reasoning=f"the value is not {verb} {factor}, so it is in the wrong unit",
                ),
            )
        )
    text = f"{turn.question} {getattr(turn, 'context', '')}".lower()
    if not edits and any(word in text for word in RATIO_WORDS):  # a fraction reported as a percentage
        for site in sites(turn.code, lambda n: isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)):
            roots = roots_of(site)
            edits.append(
                (
                    False,
                    Edit(
                        code=replace_node(turn.code, site.node, f"({node_text(turn.code, site.node)}) * 100"),
                        roots=roots,
                        violated="shares and rates are fractions between 0 and 1",
                        check=f"`{root_name(roots)}` must be a fraction between 0 and 1, not a percentage",
                        reasoning="the ratio was turned into a percentage (times 100) where a fraction is required",
                    ),
                )
            )
    return prefer(edits)


VALUE_PROPOSALS: dict[str, tuple[Propose, str]] = {
    "wrong_column": (propose_wrong_column, "a column reference swapped for another column of the same table"),
    "wrong_threshold": (propose_wrong_threshold, "a filter off by one (> vs >=) or with a shifted threshold"),
    "wrong_aggregation": (propose_wrong_aggregation, "mean/median, sum/mean, max/min, std/var swapped"),
    "rounding": (propose_rounding, "rounded to one decimal fewer than the required precision"),
    "unit_slip": (propose_unit_slip, "a unit factor dropped, or a fraction reported as a percentage"),
}
