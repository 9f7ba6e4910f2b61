"""A check spec's requirement in words (:func:`requirement`), naming the worker variable it is about: what a manager's
tool result and a repair hint quote."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.checks.spec import CheckSpec, parse_spec


def article(how: str) -> str:
    """``how`` with its article: "an inner", "a left"."""
    return f"an {how}" if how == "inner" else f"a {how}"


def requirement(spec: CheckSpec | Mapping[str, Any]) -> str:
    """The requirement ``spec`` (or its JSON) checks, in words, naming its variable."""
    spec = parse_spec(spec)
    return REQUIREMENTS[spec.kind](spec)


def _decimals(decimals: int | None) -> str:
    return "" if decimals is None else f", rounded to {decimals} decimals"


REQUIREMENTS: dict[str, Callable[..., str]] = {
    "filter": lambda s: f"`{s.variable}` holds exactly the rows of `{s.source}` with {s.column} {s.op} {s.value!r}",
    "aggregate": lambda s: f"`{s.variable}` is the {s.agg} of {s.column} over `{s.source}`{_decimals(s.decimals)}",
    "group_aggregate": lambda s: (
        f"`{s.variable}` is the {s.agg} of {s.column} per {s.by} over `{s.source}`"
        + (f" joined ({s.join_how}) with `{s.join_right}` on {s.join_on}" if s.join_right else "")
        + _decimals(s.decimals)
    ),
    "top_k": lambda s: (
        f"`{s.variable}` lists the {s.k} {s.order} values of `{s.source}`"
        + (f" ({s.column})" if s.column else "")
        + f", {s.order} first"
    ),
    "sort_order": lambda s: (
        f"`{s.variable}` is sorted by {s.column if s.column else 'its values'}, "
        + ("ascending" if s.ascending else "descending")
    ),
    "join_rows": lambda s: (
        f"`{s.variable}` has the rows {article(s.how)} join of `{s.left}` and `{s.right}` on {s.on} keeps"
    ),
    "complete_rows": lambda s: (
        f"`{s.variable}` keeps exactly the rows of `{s.source}` with {', '.join(s.columns)} all present"
    ),
    "no_missing": lambda s: f"`{s.variable}` has no missing value in {', '.join(s.columns)}",
    "normalized": lambda s: (
        f"the {s.column} values of `{s.variable}` are trimmed, in title case"
        + (f", with none of {', '.join(s.variants)} left" if s.variants else "")
    ),
    "iqr_outliers": lambda s: f"`{s.variable}` holds the rows of `{s.source}` with {s.column} above Q3 + {s.k} * IQR",
    "nan_counts": lambda s: f"`{s.variable}` counts the NaN cells per column of `{s.source}`",
    "share": lambda s: f"`{s.variable}` holds fractions between 0 and 1",
    "rounded": lambda s: f"every number in `{s.variable}` is rounded to {s.decimals} decimals",
    "param": lambda s: f"`{s.variable}` is {s.value!r} after the revision",
    "corrected_cell": lambda s: (
        f"{s.column} is {s.value!r} where {s.key_column or 'the row label'} is {s.key!r} in `{s.variable}`"
    ),
    "excluded_rows": lambda s: f"`{s.variable}` has no row with {s.column} {s.value!r}",
    "overlap": lambda s: f"`{s.variable}` holds what `{s.left}` and `{s.right}` have in common",
    "unit_scale": lambda s: (
        f"the values of `{s.variable}` are in units of {s.factor:g}: times {s.factor:g} they add up to the total "
        f"of {s.column} over `{s.source}`"
    ),
    "resample": lambda s: (
        f"`{s.variable}` is the {s.agg} of {s.column} over `{s.source}` per calendar month of {s.date_column} "
        f"('YYYY-MM')" + (f", divided by {s.factor:g}" if s.factor != 1 else "") + _decimals(s.decimals)
    ),
}
"""Kind -> the requirement in words."""
