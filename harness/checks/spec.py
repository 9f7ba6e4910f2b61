"""Typed check specs: the form a manager writes a constraint's executable check in.

A spec is a small JSON object, ``{"kind": "top_k", "variable": "top3", "source": "revenue_by_store", "k": 3,
"order": "largest"}``: a named kind and its arguments, never code. Each kind is a frozen dataclass registered in
:data:`CHECK_KINDS`; :func:`parse_spec` builds one from JSON and refuses a malformed spec with one line naming the
field, its value and the fix (:class:`CheckSpecError`). :func:`spec_schema` gives the JSON schema of one kind (or of
all), used by the tool definitions and the action grammar. The harness compiles a spec to a verdict computed in the
clean verifier (:mod:`harness.checks.compile`); a spec names worker variables and public table columns, nothing else.

Field conventions: ``variable`` is the worker variable the check is about (the one a repair hint names); ``source``,
``left`` and ``right`` are worker variables it is recomputed from; ``column``/``by``/``columns`` are column labels;
``decimals`` is the rounding the turn states (``None``: compared to 1e-6); ``value`` is a JSON scalar.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Literal, get_args, get_origin, get_type_hints

OPS = ("==", "!=", ">", ">=", "<", "<=")
AGGS = ("sum", "mean", "median", "count", "min", "max")
MAX_DECIMALS = 12
MAX_K = 1000

Scalar = str | int | float | bool


class CheckSpecError(ValueError):
    """A check spec that cannot be run: the message is one line naming the kind, the field, the value and the fix."""


def _is_identifier(value: Any) -> bool:
    return isinstance(value, str) and value.isidentifier() and not keyword.iskeyword(value)


@dataclass(frozen=True)
class CheckSpec:
    """Base of every kind: ``variable`` is the worker variable the check is about."""

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    variable: str = field(metadata={"help": "The worker variable the check is about.", "role": "variable"})

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON (``kind`` first, then the fields in declaration order)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def variables(self) -> tuple[str, ...]:
        """The worker variables the check reads (``variable`` first, then its sources), without repeats."""
        names = [getattr(self, f.name) for f in fields(self) if f.metadata.get("role") == "variable"]
        return tuple(dict.fromkeys(n for n in names if n))


# ---------------------------------------------------------------- the kinds
CHECK_KINDS: dict[str, type[CheckSpec]] = {}


def register(cls: type[CheckSpec]) -> type[CheckSpec]:
    """Class decorator: add a kind to :data:`CHECK_KINDS` under ``cls.kind``."""
    if not cls.kind or cls.kind in CHECK_KINDS:
        raise ValueError(f"check kind {cls.kind!r} of {cls.__name__} is empty or registered twice; give it a new name")
    CHECK_KINDS[cls.kind] = cls
    return cls


def _var(help_text: str, default: Any = MISSING) -> Any:
    return field(default=default, metadata={"help": help_text, "role": "variable"})


def _arg(help_text: str, default: Any = MISSING, **extra: Any) -> Any:
    return field(default=default, metadata={"help": help_text, **extra})


@register
@dataclass(frozen=True)
class Filter(CheckSpec):
    kind: ClassVar[str] = "filter"
    summary: ClassVar[str] = "`variable` holds exactly the rows of `source` where `column` `op` `value`"
    source: str = _var("The frame the rows are taken from.")
    column: str = _arg("The column the rule reads.")
    op: Literal["==", "!=", ">", ">=", "<", "<="] = _arg("The comparison.")
    value: Scalar = _arg("The threshold or the value compared with.")


@register
@dataclass(frozen=True)
class Aggregate(CheckSpec):
    kind: ClassVar[str] = "aggregate"
    summary: ClassVar[str] = "`variable` (a number) is the `agg` of `column` over `source`, rounded to `decimals`"
    source: str = _var("The frame aggregated.")
    column: str = _arg("The column aggregated.")
    agg: Literal["sum", "mean", "median", "count", "min", "max"] = _arg("The aggregation.")
    decimals: int | None = _arg("Decimals the result is rounded to (null: exact).", default=None)


@register
@dataclass(frozen=True)
class GroupAggregate(CheckSpec):
    kind: ClassVar[str] = "group_aggregate"
    summary: ClassVar[str] = (
        "`variable` is the `agg` of `column` per `by` over `source` (joined first with `join_right` on `join_on` "
        "when given), rounded to `decimals`"
    )
    source: str = _var("The frame grouped (the left side when joined).")
    by: str = _arg("The grouping column.")
    column: str = _arg("The column aggregated.")
    agg: Literal["sum", "mean", "median", "count", "min", "max"] = _arg("The aggregation.")
    decimals: int | None = _arg("Decimals the values are rounded to (null: exact).", default=None)
    join_right: str | None = _var("A frame joined to `source` before grouping (null: none).", default=None)
    join_on: str | None = _arg("The join key when `join_right` is given.", default=None)
    join_how: Literal["left", "inner"] | None = _arg("The join type when `join_right` is given.", default=None)


@register
@dataclass(frozen=True)
class TopK(CheckSpec):
    kind: ClassVar[str] = "top_k"
    summary: ClassVar[str] = "`variable` lists the `k` largest (or smallest) values of `source` in that order"
    source: str = _var("The series (or frame, with `column`) the values come from.")
    k: int = _arg("How many.")
    order: Literal["largest", "smallest"] = _arg("`largest` for a top-k, `smallest` for a bottom-k.")
    column: str | None = _arg("The column ranked when `source` is a frame (null: a series).", default=None)


@register
@dataclass(frozen=True)
class SortOrder(CheckSpec):
    kind: ClassVar[str] = "sort_order"
    summary: ClassVar[str] = "`variable` is sorted by `column` (its values when null), ascending or descending"
    ascending: bool = _arg("True: smallest first.")
    column: str | None = _arg("The column sorted by (null: the values of a series).", default=None)


@register
@dataclass(frozen=True)
class JoinRows(CheckSpec):
    kind: ClassVar[str] = "join_rows"
    summary: ClassVar[str] = "`variable` (a `how` join of `left` and `right` on `on`) has the rows that join keeps"
    left: str = _var("The left frame.")
    right: str = _var("The right frame.")
    on: str = _arg("The join key.")
    how: Literal["left", "inner"] = _arg("The join type.")


@register
@dataclass(frozen=True)
class CompleteRows(CheckSpec):
    kind: ClassVar[str] = "complete_rows"
    summary: ClassVar[str] = "`variable` keeps exactly the rows of `source` with every one of `columns` present"
    source: str = _var("The frame before the rows were dropped.")
    columns: tuple[str, ...] = _arg("The columns that must be present.")


@register
@dataclass(frozen=True)
class NoMissing(CheckSpec):
    kind: ClassVar[str] = "no_missing"
    summary: ClassVar[str] = "`variable` has no missing value in any of `columns`"
    columns: tuple[str, ...] = _arg("The columns that must have no NaN.")


@register
@dataclass(frozen=True)
class Normalized(CheckSpec):
    kind: ClassVar[str] = "normalized"
    summary: ClassVar[str] = "the `column` values of `variable` are trimmed, in title case, none of `variants` left"
    column: str = _arg("The category column.")
    variants: tuple[str, ...] = _arg("Spellings that must have been merged (may be empty).", default=())


@register
@dataclass(frozen=True)
class IqrOutliers(CheckSpec):
    kind: ClassVar[str] = "iqr_outliers"
    summary: ClassVar[str] = "`variable` holds the rows of `source` with `column` above Q3 + `k` * IQR"
    source: str = _var("The frame the outliers are taken from.")
    column: str = _arg("The column the rule reads.")
    k: float = _arg("The IQR multiplier (1.5 as usual).")
    decimals: int | None = _arg("Decimals the limit is rounded to (null: exact).", default=None)


@register
@dataclass(frozen=True)
class NanCounts(CheckSpec):
    kind: ClassVar[str] = "nan_counts"
    summary: ClassVar[str] = "`variable` counts the NaN cells per column of `source` (columns without any left out)"
    source: str = _var("The frame counted.")


@register
@dataclass(frozen=True)
class Share(CheckSpec):
    kind: ClassVar[str] = "share"
    summary: ClassVar[str] = "every value of `variable` is a fraction between 0 and 1"


@register
@dataclass(frozen=True)
class Rounded(CheckSpec):
    kind: ClassVar[str] = "rounded"
    summary: ClassVar[str] = "every number in `variable` (the reported `result` by default) has at most `decimals`"
    decimals: int = _arg("The decimals asked for.")


@register
@dataclass(frozen=True)
class Param(CheckSpec):
    kind: ClassVar[str] = "param"
    summary: ClassVar[str] = "`variable` equals the revised `value`"
    value: Scalar = _arg("The value the revision sets.")


@register
@dataclass(frozen=True)
class CorrectedCell(CheckSpec):
    kind: ClassVar[str] = "corrected_cell"
    summary: ClassVar[str] = "`column` is `value` in the row(s) of `variable` whose `key_column` (row label) is `key`"
    column: str = _arg("The corrected column.")
    key: Scalar = _arg("The key of the corrected row.")
    value: Scalar = _arg("The corrected value.")
    key_column: str | None = _arg("The column holding the key (null: the row label).", default=None)


@register
@dataclass(frozen=True)
class ExcludedRows(CheckSpec):
    kind: ClassVar[str] = "excluded_rows"
    summary: ClassVar[str] = "`variable` has no row whose `column` is `value`"
    column: str = _arg("The column of the excluded rows.")
    value: Scalar = _arg("The excluded value.")


@register
@dataclass(frozen=True)
class Overlap(CheckSpec):
    kind: ClassVar[str] = "overlap"
    summary: ClassVar[str] = "`variable` holds exactly what `left` and `right` have in common (index or values)"
    left: str = _var("The first earlier result.")
    right: str = _var("The second earlier result.")


@register
@dataclass(frozen=True)
class UnitScale(CheckSpec):
    kind: ClassVar[str] = "unit_scale"
    summary: ClassVar[str] = "the values of `variable` times `factor` add up to the total of `column` over `source`"
    source: str = _var("The frame whose column total the scaled values must match.")
    column: str = _arg("The column totalled.")
    factor: float = _arg("The unit: 1000 for amounts in thousands.")


@register
@dataclass(frozen=True)
class Resample(CheckSpec):
    kind: ClassVar[str] = "resample"
    summary: ClassVar[str] = (
        "`variable` is the `agg` of `column` over `source` per calendar month of `date_column` ('YYYY-MM' labels), "
        "divided by `factor` and rounded to `decimals`"
    )
    source: str = _var("The frame with the dated rows.")
    date_column: str = _arg("The date column (parsed as dates; unparseable dates are left out).")
    column: str = _arg("The column aggregated.")
    agg: Literal["sum", "mean", "median", "count", "min", "max"] = _arg("The aggregation.", default="sum")
    rule: Literal["MS"] = _arg("The period: MS, calendar months.", default="MS")
    factor: float = _arg("The unit the values are divided by (1000: in thousands).", default=1)
    decimals: int | None = _arg("Decimals the values are rounded to (null: exact).", default=None)


# ---------------------------------------------------------------- parsing and schema
def _kind_names() -> str:
    return ", ".join(sorted(CHECK_KINDS))


def _check_value(kind: str, name: str, hint: Any, value: Any, role: str | None) -> Any:
    """``value`` converted to the field's type, or a :class:`CheckSpecError` naming the field."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        if value not in args or isinstance(value, bool) != any(isinstance(a, bool) for a in args):
            raise CheckSpecError(f"{kind}.{name}={value!r} is not one of {list(args)}; use one of them")
        return value
    if args and type(None) in args:  # Optional
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check_value(kind, name, inner[0] if len(inner) == 1 else inner, value, role)
    if isinstance(hint, list):  # a union of Literal and others after Optional was stripped
        for option in hint:
            try:
                return _check_value(kind, name, option, value, role)
            except CheckSpecError:
                continue
        raise CheckSpecError(f"{kind}.{name}={value!r} has the wrong type; see spec_schema({kind!r})")
    if hint is str:
        if not isinstance(value, str) or not value.strip():
            raise CheckSpecError(f"{kind}.{name}={value!r} must be a non-empty string")
        if role == "variable" and not _is_identifier(value):
            raise CheckSpecError(f"{kind}.{name}={value!r} is not a Python variable name; name a worker variable")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be an integer")
        top = MAX_DECIMALS if name == "decimals" else MAX_K
        low = 0 if name == "decimals" else 1
        if not low <= value <= top:
            raise CheckSpecError(f"{kind}.{name}={value!r} is out of range; use an integer in [{low}, {top}]")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be a finite number")
        if value <= 0:
            raise CheckSpecError(f"{kind}.{name}={value!r} must be above 0")
        return value
    if hint == tuple[str, ...]:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be a list of non-empty strings")
        if name == "columns" and not value:
            raise CheckSpecError(f"{kind}.{name} is empty; name at least one column")
        return tuple(value)
    if hint == Scalar:
        if isinstance(value, float) and not math.isfinite(value):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be a finite number, a string or a bool")
        if not isinstance(value, str | int | float | bool):
            raise CheckSpecError(f"{kind}.{name}={value!r} must be a number, a string or a bool")
        return value
    raise CheckSpecError(f"{kind}.{name}: no rule for type {hint!r}")  # pragma: no cover - a new kind's field


def parse_spec(data: Any) -> CheckSpec:
    """The :class:`CheckSpec` of a JSON object, or :class:`CheckSpecError` naming the field that is wrong."""
    if isinstance(data, CheckSpec):
        return data
    if not isinstance(data, Mapping):
        raise CheckSpecError(f"a check spec must be a JSON object with a 'kind', got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in CHECK_KINDS:
        raise CheckSpecError(f"check kind {kind!r} is unknown; use one of: {_kind_names()}")
    cls = CHECK_KINDS[kind]
    hints = get_type_hints(cls)
    names = {f.name: f for f in fields(cls)}
    extra = sorted(set(data) - set(names) - {"kind"})
    if extra:
        raise CheckSpecError(f"{kind}: unknown field {extra[0]!r}; its fields are {', '.join(names)}")
    values: dict[str, Any] = {}
    for name, f in names.items():
        if name not in data:
            if f.default is MISSING:
                raise CheckSpecError(f"{kind}.{name} is missing: {f.metadata['help']}")
            continue
        values[name] = _check_value(kind, name, hints[name], data[name], f.metadata.get("role"))
    spec = cls(**values)
    if isinstance(spec, GroupAggregate) and spec.join_right is not None and not (spec.join_on and spec.join_how):
        raise CheckSpecError("group_aggregate.join_right is given without join_on and join_how; give all three")
    return spec


def _schema_of(hint: Any, f_name: str) -> dict[str, Any]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        options = [_schema_of(a, f_name) for a in inner] + [{"type": "null"}]
        return {"anyOf": options}
    if hint is str:
        return {"type": "string", "minLength": 1}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        top, low = (MAX_DECIMALS, 0) if f_name == "decimals" else (MAX_K, 1)
        return {"type": "integer", "minimum": low, "maximum": top}
    if hint is float:
        return {"type": "number", "exclusiveMinimum": 0}
    if hint == tuple[str, ...]:
        return {"type": "array", "items": {"type": "string", "minLength": 1}}
    if hint == Scalar:
        return {"type": ["string", "number", "boolean"]}
    raise TypeError(f"no JSON schema for {hint!r}")  # pragma: no cover - a new kind's field


def spec_schema(kind: str | None = None) -> dict[str, Any]:
    """The JSON schema of one kind, or (``kind=None``) ``{"oneOf": [...]}`` over every kind."""
    if kind is None:
        return {"oneOf": [spec_schema(name) for name in CHECK_KINDS]}
    if kind not in CHECK_KINDS:
        raise CheckSpecError(f"check kind {kind!r} is unknown; use one of: {_kind_names()}")
    cls = CHECK_KINDS[kind]
    hints = get_type_hints(cls)
    props: dict[str, Any] = {"kind": {"const": kind}}
    required = ["kind"]
    for f in fields(cls):
        props[f.name] = {**_schema_of(hints[f.name], f.name), "description": f.metadata["help"]}
        if f.default is MISSING:
            required.append(f.name)
    return {
        "type": "object",
        "description": cls.summary,
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
