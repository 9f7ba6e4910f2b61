"""The harmful fault types that change which rows or which order a turn works with: wrong_join_key, dropped_rows,
nan_mishandling, reversed_sort, wrong_topk (same conventions as :mod:`synthesis.faults.transforms`)."""

from __future__ import annotations

import ast
import random
from typing import TYPE_CHECKING, Any

from synthesis.faults.code import expr_text, replace_node, sites
from synthesis.faults.model import Edit
from synthesis.faults.transforms import (
    Propose,
    column_of,
    column_values,
    edit_call,
    is_numeric,
    keyword,
    method_call,
    prefer,
    root_name,
    roots_of,
    slot_get,
    tables_with,
)

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec, TurnSpec


# ---- joins: wrong_join_key and dropped_rows ---------------------------------------------------------------------
def _is_merge(node: ast.AST) -> bool:
    return method_call(node, {"merge", "join"})


def propose_wrong_join_key(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    edits: list[tuple[bool, Edit]] = []
    wanted = slot_get(turn, "join", "on")
    for site in sites(turn.code, _is_merge):
        node: ast.Call = site.node  # type: ignore[assignment]
        on = keyword(node, "on")
        if on is None or not isinstance(on.value, ast.Constant) or not isinstance(on.value.value, str):
            continue
        key = on.value.value
        holders = tables_with(task, key)
        common = set.intersection(*(set(df.columns) for df in holders)) if len(holders) >= 2 else set()
        roots = roots_of(site)
        for alt in sorted(common - {key}):
            edits.append(
                (
                    key == wanted,
                    Edit(
                        code=replace_node(turn.code, on.value, repr(alt)),
                        roots=roots,
                        violated=f"the tables must be joined on '{key}'",
                        check=f"`{root_name(roots)}` must join the tables on '{key}'",
                        reasoning=f"the tables were joined on '{alt}' instead of the key '{key}', so rows are "
                        "matched with the wrong partners",
                    ),
                )
            )
    return prefer(edits)


def propose_dropped_rows(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, _is_merge):
        node: ast.Call = site.node  # type: ignore[assignment]
        how = keyword(node, "how")
        if how is None or not isinstance(how.value, ast.Constant) or how.value.value not in ("left", "outer", "right"):
            continue
        roots = roots_of(site)
        edits.append(
            (
                True,
                Edit(
                    code=replace_node(turn.code, how.value, "'inner'"),
                    roots=roots,
                    violated=f"rows without a match must be kept (a {how.value.value} join)",
                    check=f"`{root_name(roots)}` must keep every row of the {how.value.value} join",
                    reasoning=f"an inner join replaced the {how.value.value} join, silently dropping the rows that "
                    "have no match",
                ),
            )
        )
    for site in sites(turn.code, lambda n: method_call(n, {"dropna"}) and keyword(n, "subset") is not None):
        node = site.node  # type: ignore[assignment]
        roots = roots_of(site)
        subset_node = keyword(node, "subset").value  # type: ignore[union-attr]
        subset = ast.unparse(subset_node)
        named = {e.value for e in getattr(subset_node, "elts", []) if isinstance(e, ast.Constant)}
        holders = [df for c in named for df in tables_with(task, c)]
        if holders and not any(df[c].isna().any() for df in holders for c in df.columns if c not in named):
            continue  # no other column of those tables has a missing value: dropping on all columns changes nothing
        edits.append(
            (
                False,
                Edit(
                    code=edit_call(turn.code, node, lambda call: call.keywords.clear()),
                    roots=roots,
                    violated=f"only rows missing {subset} may be dropped",
                    check=f"`{root_name(roots)}` must drop only rows with a missing value in {subset}",
                    reasoning=f"rows with a missing value in any column were dropped, not only those missing {subset}",
                ),
            )
        )
    return prefer(edits)


# ---- nan_mishandling --------------------------------------------------------------------------------------------
NAN_AGGS = {"mean", "median", "std", "var", "min", "max", "sum"}


def _has_nan(task: TaskSpec, column: str | None) -> bool:
    values = column_values(task, column) if column else None
    return values is not None and bool(values.isna().any())


def _keep_nan_groups(call: ast.Call) -> None:
    call.keywords.append(ast.keyword("dropna", ast.Constant(False)))


def propose_nan_mishandling(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "dropna", "var")
    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: method_call(n, {"dropna", "fillna"})):
        node: ast.Call = site.node  # type: ignore[assignment]
        receiver = node.func.value  # type: ignore[attr-defined]
        roots = roots_of(site)
        kind = node.func.attr  # type: ignore[attr-defined]
        subset = keyword(node, "subset")
        listed = subset.value.elts if subset is not None and isinstance(subset.value, ast.List) else []
        columns = [e.value for e in listed if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        # columns that may hold missing values: NaN in the task data, or derived (not in any table)
        values = {c: column_values(task, c) for c in columns}
        missing = [c for c in columns if values[c] is None or bool(values[c].isna().any())]
        if kind == "dropna" and columns and len(columns) == len(listed) and not missing:
            continue  # the data has no missing value in the subset: skipping the step would change nothing
        if kind == "dropna" and len(columns) >= 2 and len(columns) == len(listed):
            # forget one column of the subset: numeric with NaN first, then derived, text last (text is often
            # cleaned next, and NaN there breaks the cleaning instead of skewing the numbers)
            rank = {
                c: 0 if values[c] is not None and is_numeric(values[c]) else 1 if values[c] is None else 2
                for c in missing
            }
            for column in sorted(missing, key=lambda c: rank[c])[:1]:
                rest = [c for c in columns if c != column]
                edits.append(
                    (
                        wanted in roots,
                        Edit(
                            code=replace_node(turn.code, subset.value, repr(rest)),  # type: ignore[union-attr]
                            roots=roots,
                            violated=f"rows with a missing '{column}' must be excluded",
                            check=f"`{root_name(roots)}` must not keep rows whose '{column}' is missing",
                            reasoning=f"rows with a missing '{column}' were kept: only {rest} were checked for "
                            "missing values",
                        ),
                    )
                )
            continue
        violated = "missing values must be excluded" if kind == "dropna" else "missing values must be filled as stated"
        edits.append(
            (
                wanted in roots,
                Edit(
                    code=replace_node(turn.code, node, expr_text(receiver)),
                    roots=roots,
                    violated=violated,
                    check=f"`{root_name(roots)}` must handle missing values as the context states",
                    reasoning="missing values were left in the data (the missing-value handling was skipped)",
                ),
            )
        )
    for site in sites(turn.code, lambda n: method_call(n, NAN_AGGS) and not n.args):
        node = site.node  # type: ignore[assignment]
        receiver = node.func.value  # type: ignore[attr-defined]
        grouped = any(method_call(n, {"groupby", "resample", "rolling"}) for n in ast.walk(receiver))
        if grouped or not _has_nan(task, column_of(receiver)):
            continue
        roots = roots_of(site)
        filled = f"{expr_text(receiver)}.fillna(0).{node.func.attr}()"  # type: ignore[attr-defined]
        edits.append(
            (
                False,
                Edit(
                    code=replace_node(turn.code, node, filled),
                    roots=roots,
                    violated="missing values are unknown, not zero",
                    check=f"`{root_name(roots)}` must ignore missing values instead of counting them as zero",
                    reasoning="missing values were counted as zeros, which biases the statistic",
                ),
            )
        )
    for site in sites(turn.code, lambda n: method_call(n, {"groupby"}) and keyword(n, "dropna") is None):
        node = site.node  # type: ignore[assignment]
        key = node.args[0] if node.args else None  # type: ignore[attr-defined]
        if not (isinstance(key, ast.Constant) and _has_nan(task, key.value)):
            continue
        roots = roots_of(site)
        edits.append(
            (
                False,
                Edit(
                    code=edit_call(turn.code, node, _keep_nan_groups),
                    roots=roots,
                    violated=f"rows with a missing '{key.value}' are excluded",
                    check=f"`{root_name(roots)}` must not have a group for a missing '{key.value}'",
                    reasoning=f"rows with a missing '{key.value}' were kept as a group of their own",
                ),
            )
        )
    return prefer(edits)


# ---- sorting: reversed_sort and wrong_topk ----------------------------------------------------------------------
SORT_SWAP = {
    "nlargest": "nsmallest",
    "nsmallest": "nlargest",
    "idxmax": "idxmin",
    "idxmin": "idxmax",
    "argmax": "argmin",
    "argmin": "argmax",
}


def propose_reversed_sort(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: method_call(n, set(SORT_SWAP) | {"sort_values"})):
        node: ast.Call = site.node  # type: ignore[assignment]
        attr = node.func.attr  # type: ignore[attr-defined]
        if attr == "sort_values":
            asc = keyword(node, "ascending")
            if asc is not None and not (isinstance(asc.value, ast.Constant) and isinstance(asc.value.value, bool)):
                continue
            was = True if asc is None else asc.value.value  # type: ignore[union-attr]

            def change(call: ast.Call, now: bool = not was) -> None:
                call.keywords = [k for k in call.keywords if k.arg != "ascending"]
                call.keywords.append(ast.keyword("ascending", ast.Constant(now)))

            order = ("ascending", "descending") if was else ("descending", "ascending")
        else:

            def change(call: ast.Call, new: str = SORT_SWAP[attr]) -> None:
                call.func.attr = new  # type: ignore[attr-defined]

            order = (attr, SORT_SWAP[attr])
        roots = roots_of(site)
        edits.append(
            (
                True,
                Edit(
                    code=edit_call(turn.code, node, change),
                    roots=roots,
                    violated=f"the question asks for the {order[0]} order / extreme",
                    check=f"`{root_name(roots)}` must be ordered as the question asks ({order[0]})",
                    reasoning=f"the order is reversed: it uses {order[1]} where the question asks for {order[0]}",
                ),
            )
        )
    return prefer(edits)


def propose_wrong_topk(task: TaskSpec, turn: TurnSpec, answers: Any, rng: random.Random) -> list[Edit]:
    wanted = slot_get(turn, "sort", "k")

    def k_node(node: ast.AST) -> ast.Constant | None:
        if method_call(node, {"head", "tail", "nlargest", "nsmallest"}) and node.args:  # type: ignore[attr-defined]
            arg = node.args[0]  # type: ignore[attr-defined]
        elif isinstance(node, ast.Slice) and node.lower is None and node.step is None:
            arg = node.upper
        else:
            return None
        ok = isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool)
        return arg if ok and arg.value >= 1 else None  # type: ignore[return-value]

    edits: list[tuple[bool, Edit]] = []
    for site in sites(turn.code, lambda n: k_node(n) is not None):
        arg = k_node(site.node)
        assert arg is not None
        k = arg.value
        roots = roots_of(site)
        for new in (k - 1,) if k > 1 else (k + 1,):  # k + 1 changes nothing when only k entries exist
            edits.append(
                (
                    k == wanted,
                    Edit(
                        code=replace_node(turn.code, arg, str(new)),
                        roots=roots,
                        violated=f"the question asks for the top {k}",
                        check=f"`{root_name(roots)}` must hold exactly the top {k} the question asks for",
                        reasoning=f"it keeps {new} entries where the question asks for {k}",
                    ),
                )
            )
    return prefer(edits)


ROW_PROPOSALS: dict[str, tuple[Propose, str]] = {
    "wrong_join_key": (propose_wrong_join_key, "tables joined on another shared column"),
    "dropped_rows": (propose_dropped_rows, "a left/outer join made inner, or dropna over all columns"),
    "nan_mishandling": (propose_nan_mishandling, "NaN handling skipped, NaN counted as 0, or a NaN group kept"),
    "reversed_sort": (propose_reversed_sort, "sort order, nlargest/nsmallest or idxmax/idxmin reversed"),
    "wrong_topk": (propose_wrong_topk, "top-k off by one (head/nlargest/slice)"),
}
