"""Compile a check spec (:mod:`.spec`) to the code of its verdict, run in the clean verifier like a ``run_probe`` code.

:func:`compile_check` returns Python source that :meth:`harness.sandbox.Kernel.probe` runs: the verifier exports the
worker variables the code names (found with ``ast``) and runs it in a fresh namespace. The code passes on a state that
meets the spec and raises ``AssertionError`` whose message says what was found against what is required ("`top3`
holds [9.0, 7.0, 5.0]; required: the 3 largest of `revenue_by_store` in order, [9.0, 8.0, 7.0]"). A variable of
the wrong kind (a number where a table is needed, a table without the column) fails the same way, saying so; an error
in the *sources* a spec names (a missing column of the source frame, an unknown variable) is left to surface as that
error: the check could not run, which the caller reports apart from a failed check. :func:`requirement` gives the
requirement in words, naming the variable.

Safety: every value of a spec is embedded with ``repr()`` (column labels too), variable names are identifiers
(:func:`.spec.parse_spec` guarantees it), and message text holds no spec value, only names of the check's own
constants: a quote, a brace or a newline in a value cannot break the code or its message. Internal names start with
``_ck``; a spec whose variables start with ``_ck`` gets its internal names renamed (``ast``) so nothing collides.

Speed: the code reads source frames only as ``NAME['label']``, ``NAME[['a', 'b']]`` and ``len(NAME)``, and imports
nothing (only ``resample`` imports pandas, for ``to_datetime``), so the verifier exports only the columns a check
reads (column projection, :mod:`harness.sandbox.probes`). ``scripts/bench_sandbox.py`` times a total and a filter
on a 1M-row frame (``spec_aggregate_cold_ms_p50``, ``spec_filter_cold_ms_p50``).

What a variable may be: a number for ``aggregate`` and ``param``; a table for the row kinds (``filter``,
``complete_rows``, ``iqr_outliers``, ``join_rows``: compared by row count, and ``filter`` also by its rule); a series,
a dict or a table with the grouped column for ``group_aggregate`` and ``resample`` (labels compared as text); a list,
series or table column for ``top_k`` (a list of the source's labels stands for their values). ``join_rows`` counts
the rows the join keeps, duplicated keys included. ``corrected_cell`` and ``excluded_rows`` are standing revisions
checked on every variable a revision re-derived: they pass on a variable that is not a table with those columns.

Tolerances: a number stated with ``decimals`` is compared within half a unit of the last decimal + 1e-9 (a value
rounded as asked is within it), else within 1e-6. ``unit_scale`` passes when the scaled values add up to the source
total within 10 % of that total plus half a unit of the target unit per value (rows the result legitimately leaves out,
such as unparseable dates, and rounding stay inside; a unit slip moves the sum by a factor of 10 or more).
``resample`` follows ``set_index(to_datetime(date, errors='coerce', format='mixed')).resample('MS').agg(agg) / factor``
with months labelled 'YYYY-MM'; a month with no dated rows may be left out of the variable.

Pandera was considered for the pure column properties (``no_missing``, ``share``): importing ``pandera.pandas``
(0.35.0) with pandas already imported takes about 225 ms here (median of five fresh processes, mostly
``pandera.typing``), against a 30 ms budget for a whole check; each property is a line of pandas, so no check uses it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

from harness.checks.requirements import article, requirement
from harness.checks.spec import (
    Aggregate,
    CheckSpec,
    CompleteRows,
    CorrectedCell,
    ExcludedRows,
    Filter,
    GroupAggregate,
    IqrOutliers,
    JoinRows,
    NanCounts,
    NoMissing,
    Normalized,
    Overlap,
    Param,
    Resample,
    Rounded,
    Share,
    SortOrder,
    TopK,
    UnitScale,
    parse_spec,
)
from harness.pyast import parse_python

PREFIX = "_ck"
"""Internal names of a compiled check start with this (renamed when a spec's variable does too)."""
UNIT_SLACK = 0.1
"""``unit_scale``: the share of the source total the scaled values may miss (left-out rows, rounding)."""


def tolerance(decimals: int | None) -> float:
    """Half a unit in the last stated decimal (a value rounded as asked is within it) + 1e-9, else 1e-6."""
    return 0.5 * 10.0 ** -int(decimals) + 1e-9 if decimals is not None else 1e-6


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def _words(text: str) -> str:
    """``_ckw = '<text>'``: text a message shows, as a literal (messages refer to it by name, never inline it)."""
    return f"_ckw = {text!r}"


def _table_guard(var: str, reads: str, what: str) -> tuple[str, ...]:
    """Lines that run ``reads`` (statements reading ``var``) and turn a failure into an ``AssertionError`` saying
    ``var`` is not ``what``."""
    return (
        "try:",
        *(f"    {line}" for line in reads.split("\n")),
        "except (TypeError, KeyError, AttributeError, ValueError, IndexError) as _cke:",
        f"    raise AssertionError(f'`{var}` is not {what}: {{_cke!r}}') from None",
    )


def _values_of(var: str, target: str) -> tuple[str, ...]:
    """Lines binding ``target`` to the list of ``var``'s values: a series', a table's cells, a dict's values, a
    list's items, or ``[var]`` for one value."""
    return (
        f"if hasattr({var}, 'to_numpy'):",
        f"    {target} = {var}.to_numpy().ravel().tolist()",
        f"elif isinstance({var}, dict):",
        f"    {target} = list({var}.values())",
        f"elif isinstance({var}, list | tuple | set):",
        f"    {target} = list({var})",
        "else:",
        f"    {target} = [{var}]",
    )


# ---------------------------------------------------------------- ported kinds
def _filter(s: Filter) -> str:
    v, src, col, op, val = s.variable, s.source, s.column, s.op, s.value
    return _lines(
        _words(f"{col} {op} {val!r}"),
        f"_ckwant = int(({src}[{col!r}] {op} {val!r}).sum())",
        *_table_guard(v, f"_ckn = len({v})\n_ckbad = int((~({v}[{col!r}] {op} {val!r})).sum())", "a table"),
        f"assert _ckn == _ckwant, f'`{v}` has {{_ckn}} rows; required: the {{_ckwant}} rows of `{src}` with {{_ckw}}'",
        f"assert _ckbad == 0, f'{{_ckbad}} rows of `{v}` do not have {{_ckw}}; required: all of them'",
    )


def _aggregate(s: Aggregate) -> str:
    v, src, col, agg = s.variable, s.source, s.column, s.agg
    return _lines(
        _words(col),
        f"_ckwant = float({src}[{col!r}].agg({agg!r}))",
        *_table_guard(v, f"_ckgot = float({v})", "a number"),
        f"assert abs(_ckgot - _ckwant) <= {tolerance(s.decimals)!r}, (",
        f"    f'`{v}` is {{_ckgot!r}}; required: the {agg} of {{_ckw}} over `{src}`, {{_ckwant!r}}')",
    )


def _group_aggregate(s: GroupAggregate) -> str:
    v, src, by, col, agg = s.variable, s.source, s.by, s.column, s.agg
    if s.join_right is not None:
        on, right = s.join_on, s.join_right
        left_cols = list(dict.fromkeys([on, col]))
        right_cols = list(dict.fromkeys([on, by]))
        frame = f"{src}[{left_cols!r}].merge({right}[{right_cols!r}], how={s.join_how!r}, on={on!r})"
        where = f"`{src}` joined ({s.join_how}) with `{right}` on {on}"
    else:
        frame, where = f"{src}[{list(dict.fromkeys([by, col]))!r}]", f"`{src}`"
    return _lines(
        _words(f"the {agg} of {col} per {by} over {where}"),
        f"_ckwant = {frame}.groupby({by!r})[{col!r}].agg({agg!r})",
        f"_ckgot = {v}",
        "if hasattr(_ckgot, 'columns'):",
        f"    if {by!r} in _ckgot.columns and {col!r} in _ckgot.columns:",
        f"        _ckgot = _ckgot.set_index({by!r})[{col!r}]",
        f"    elif {col!r} in _ckgot.columns:",
        f"        _ckgot = _ckgot[{col!r}]",
        "    elif len(_ckgot.columns) == 1:",
        "        _ckgot = _ckgot[_ckgot.columns[0]]",
        "if not hasattr(_ckgot, 'items') or hasattr(_ckgot, 'columns'):",
        f"    raise AssertionError(f'`{v}` is not a series with one value per group: {{type(_ckgot)}}')",
        *_table_guard(
            v, "_ckg = {str(_cka): float(_ckb) for _cka, _ckb in _ckgot.items()}", "a series of numbers per group"
        ),
        "_ckx = {str(_cka): float(_ckb) for _cka, _ckb in _ckwant.items()}",
        "_ckn, _ckm = sorted(_ckg), sorted(_ckx)",
        f"assert _ckn == _ckm, f'`{v}` has groups {{_ckn[:8]}}; required: {{_ckw}}, groups {{_ckm[:8]}}'",
        "_ckoff = [(_cka, _ckg[_cka], _ckx[_cka]) for _cka in _ckm if not (abs(_ckg[_cka] - _ckx[_cka]) <= "
        f"{tolerance(s.decimals)!r} or _ckg[_cka] != _ckg[_cka] and _ckx[_cka] != _ckx[_cka])]",
        "assert not _ckoff, (",
        f"    f'`{v}` holds {{_ckoff[0][1]!r}} for group {{_ckoff[0][0]!r}} ({{len(_ckoff)}} groups differ); "
        f"required: {{_ckw}}, {{_ckoff[0][2]!r}}')",
    )


def _top_k(s: TopK) -> str:
    v, src, k, order = s.variable, s.source, s.k, s.order
    pick = "nlargest" if order == "largest" else "nsmallest"
    series = src if s.column is None else f"{src}[{s.column!r}]"
    if s.column is None:
        values = _values_of(v, "_ckv")
    else:
        values = (
            f"if hasattr({v}, 'columns'):",
            f"    _ckv = {v}[{s.column!r}].tolist()",
            "else:",
            *(f"    {line}" for line in _values_of(v, "_ckv")),
        )
    read = "\n".join(
        (
            *values,
            "if _ckv and all(isinstance(_cka, str) for _cka in _ckv):  # labels of the source: their values",
            "    _ckv = [_cks[_cka] for _cka in _ckv]",
            "_ckgot = [float(_cka) for _cka in _ckv]",
        )
    )
    return _lines(
        _words("" if s.column is None else f" ({s.column})"),
        f"_cks = {series}",
        f"_ckwant = [float(_cka) for _cka in _cks.{pick}({k})]",
        *_table_guard(v, read, f"a list of the {order} values"),
        "_ckok = len(_ckgot) == len(_ckwant)",
        "assert _ckok and all(abs(_cka - _ckb) <= 1e-6 for _cka, _ckb in zip(_ckgot, _ckwant)), (",
        f"    f'`{v}` holds {{_ckgot[:{k + 2}]}}; required: the {k} {order} of `{src}`{{_ckw}} in order, "
        "{_ckwant}')",
    )


def _share(s: Share) -> str:
    v = s.variable
    return _lines(
        *_values_of(v, "_ckv"),
        *_table_guard(v, "_ckv = [float(_cka) for _cka in _ckv]", "a set of numbers"),
        "_ckout = [_cka for _cka in _ckv if _cka < 0 or _cka > 1]",
        f"assert not _ckout, f'`{v}` has {{len(_ckout)}} values outside [0, 1], such as {{_ckout[:5]}}; "
        "required: fractions between 0 and 1'",
    )


def _complete_rows(s: CompleteRows) -> str:
    v, src, cols = s.variable, s.source, list(s.columns)
    return _lines(
        _words(", ".join(cols)),
        f"_ckwant = int({src}[{cols!r}].notna().all(axis=1).sum())",
        *_table_guard(v, f"_ckn = len({v})", "a table"),
        f"assert _ckn == _ckwant, f'`{v}` has {{_ckn}} rows; required: the {{_ckwant}} rows of `{src}` "
        "with all of {_ckw} present'",
    )


def _normalized(s: Normalized) -> str:
    v, col = s.variable, s.column
    return _lines(
        _words(col),
        *_table_guard(v, f"_ckv = set({v}[{col!r}].dropna().astype(str).unique())", "a table"),
        f"_ckodd = sorted(_cka for _cka in _ckv if _cka != _cka.strip().title() or _cka in {sorted(s.variants)!r})",
        f"assert not _ckodd, f'`{v}` has {{_ckw}} values that are not normalised: {{_ckodd[:8]}}; "
        "required: trimmed, title case, variants merged'",
    )


def _iqr_outliers(s: IqrOutliers) -> str:
    v, src, col, k = s.variable, s.source, s.column, s.k
    limit = "_ckq3 + _ckk * (_ckq3 - _ckq1)"
    return _lines(
        _words(col),
        f"_ckk = {k!r}",
        f"_ckq1, _ckq3 = {src}[{col!r}].quantile([0.25, 0.75])",
        f"_cklimit = {limit if s.decimals is None else f'round({limit}, {s.decimals})'}",
        f"_ckwant = int(({src}[{col!r}] > _cklimit).sum())",
        *_table_guard(v, f"_ckn = len({v})", "a table"),
        f"assert _ckn == _ckwant, f'`{v}` has {{_ckn}} rows; required: the {{_ckwant}} rows of `{src}` with "
        "{_ckw} above Q3 + {_ckk} * IQR = {_cklimit}'",
    )


def _nan_counts(s: NanCounts) -> str:
    v, src = s.variable, s.source
    return _lines(
        f"_ckwant = {{str(_cka): int(_ckb) for _cka, _ckb in {src}.isna().sum().items() if _ckb}}",
        *_table_guard(
            v, f"_ckgot = {{str(_cka): int(_ckb) for _cka, _ckb in dict({v}).items() if _ckb}}", "counts per column"
        ),
        f"assert _ckgot == _ckwant, f'`{v}` counts {{_ckgot}}; required: the NaN cells per column of `{src}`, "
        "{_ckwant}'",
    )


def _join_rows(s: JoinRows) -> str:
    v, left, right, on, how = s.variable, s.left, s.right, s.on, s.how
    keep = "1" if how == "left" else "0"
    return _lines(
        _words(on),
        f"_ckwant = int({left}[{on!r}].map({right}[{on!r}].value_counts()).fillna({keep}).sum())",
        *_table_guard(v, f"_ckn = len({v})", "a table"),
        f"assert _ckn == _ckwant, f'`{v}` has {{_ckn}} rows; required: the {{_ckwant}} rows {article(how)} join of "
        f"`{left}` and `{right}` on {{_ckw}} keeps'",
    )


def _overlap(s: Overlap) -> str:
    v, left, right = s.variable, s.left, s.right
    keys = "set(_ckx.index) if hasattr(_ckx, 'iloc') else set(_ckx)"
    return _lines(
        f"_ckcommon = [{keys} for _ckx in ({left}, {right})]",
        "_ckcommon = _ckcommon[0] & _ckcommon[1]",
        *_table_guard(v, f"_ckn = len({v})", "a collection"),
        f"assert _ckn == len(_ckcommon), f'`{v}` has {{_ckn}} entries; required: the {{len(_ckcommon)}} that "
        f"`{left}` and `{right}` have in common'",
    )


def _rounded(s: Rounded) -> str:
    v, d = s.variable, s.decimals
    return _lines(
        "def _cknumbers(_ckvalue):",
        "    if hasattr(_ckvalue, 'to_numpy'):",
        "        _ckvalue = _ckvalue.to_numpy().ravel().tolist()",
        "    if isinstance(_ckvalue, dict):",
        "        _ckvalue = list(_ckvalue.values())",
        "    if isinstance(_ckvalue, list | tuple):",
        "        return [_cka for _ckb in _ckvalue for _cka in _cknumbers(_ckb)]",
        "    return [_ckvalue] if isinstance(_ckvalue, float) else []",
        f"_cklong = [_cka for _cka in _cknumbers({v}) if abs(_cka - round(_cka, {d})) > 1e-9]",
        f"assert not _cklong, f'`{v}` has numbers with more than {d} decimals: {{_cklong[:5]}}; "
        f"required: rounded to {d} decimals'",
    )


def _param(s: Param) -> str:
    v = s.variable
    return _lines(
        _words(repr(s.value)),
        f"_ckwant = {s.value!r}",
        *_table_guard(v, f"_ckok = bool({v} == _ckwant)", "a single value"),
        f"assert _ckok, f'`{v}` is {{{v}!r}}; required: the revised value {{_ckw}}'",
    )


def _corrected_cell(s: CorrectedCell) -> str:
    v, col, key, kc, val = s.variable, s.column, s.key, s.key_column, s.value
    rows = f"{v}.loc[{v}.index == {key!r}]" if kc is None else f"{v}[{v}[{kc!r}] == {key!r}]"
    has_key = "" if kc is None else f" and {kc!r} in {v}.columns"
    return _lines(
        _words(f"{col} = {val!r} where {'the row label' if kc is None else kc} is {key!r}"),
        f"if hasattr({v}, 'columns') and {col!r} in {v}.columns{has_key}:",
        f"    _ckrows = {rows}",
        f"    _ckbad = _ckrows[{col!r}][_ckrows[{col!r}] != {val!r}].tolist()",
        f"    assert not _ckbad, f'`{v}` holds {{_ckbad[:3]}} there; required: the correction {{_ckw}}'",
    )


def _excluded_rows(s: ExcludedRows) -> str:
    v, col, val = s.variable, s.column, s.value
    return _lines(
        _words(f"{col} {val!r}"),
        f"if hasattr({v}, 'columns') and {col!r} in {v}.columns:",
        f"    _ckleft = int(({v}[{col!r}] == {val!r}).sum())",
        f"    assert _ckleft == 0, f'`{v}` still has {{_ckleft}} rows with {{_ckw}}; required: none'",
    )


# ---------------------------------------------------------------- kinds of their own
def _sort_order(s: SortOrder) -> str:
    v, col, asc = s.variable, s.column, s.ascending
    cmp = ">=" if s.ascending else "<="
    read = "\n".join(
        (
            f"_ckv = {v}" if col is None else f"_ckv = {v}[{col!r}]",
            "if hasattr(_ckv, 'dropna'):",
            "    _ckv = _ckv.dropna()",
            f"    _ckok = bool(_ckv.is_monotonic_{'increasing' if asc else 'decreasing'})",
            "    _ckv = _ckv.tolist()",
            "else:",
            "    _ckv = [_cka for _cka in (_ckv.values() if isinstance(_ckv, dict) else _ckv) if _cka == _cka]",
            f"    _ckok = all(_ckb {cmp} _cka for _cka, _ckb in zip(_ckv, _ckv[1:]))",
        )
    )
    what = "a sequence of values" if col is None else "a table"
    return _lines(
        _words(f"{col if col is not None else 'its values'}, {'ascending' if asc else 'descending'}"),
        *_table_guard(v, read, what),
        "if not _ckok:",
        f"    _cki = next(_cka for _cka in range(1, len(_ckv)) if not _ckv[_cka] {cmp} _ckv[_cka - 1])",
        f"    raise AssertionError(f'`{v}` is not sorted by {{_ckw}}: position {{_cki}} holds {{_ckv[_cki]!r}} "
        "after {_ckv[_cki - 1]!r}')",
    )


def _no_missing(s: NoMissing) -> str:
    v, cols = s.variable, list(s.columns)
    read = (
        f"_ckn = {v}[{cols!r}].isna().sum()\n_ckbad = {{str(_cka): int(_ckb) for _cka, _ckb in _ckn.items() if _ckb}}"
    )
    return _lines(
        _words(", ".join(cols)),
        *_table_guard(v, read, "a table with those columns"),
        f"assert not _ckbad, f'`{v}` has missing values: {{_ckbad}}; required: none in {{_ckw}}'",
    )


def _unit_scale(s: UnitScale) -> str:
    v, src, col, f = s.variable, s.source, s.column, s.factor
    return _lines(
        _words(col),
        f"_ckwant = float({src}[{col!r}].sum())",
        *_values_of(v, "_ckv"),
        *_table_guard(v, f"_ckgot = sum(float(_cka) for _cka in _ckv if _cka == _cka) * {f!r}", "a set of numbers"),
        f"_cktol = {UNIT_SLACK!r} * abs(_ckwant) + 0.5 * {f!r} * len(_ckv)",
        "assert abs(_ckgot - _ckwant) <= _cktol, (",
        f"    f'`{v}` times {f:g} adds up to {{_ckgot!r}}; required: the total of {{_ckw}} over `{src}`, "
        "{_ckwant!r} (within {_cktol:g})')",
    )


def _resample(s: Resample) -> str:
    v, src, date, col, agg = s.variable, s.source, s.date_column, s.column, s.agg
    read = "\n".join(
        (
            f"_ckgot = {v}",
            "if hasattr(_ckgot, 'columns'):",
            f"    _ckgot = _ckgot[_ckgot.columns[0]] if len(_ckgot.columns) == 1 else _ckgot[{col!r}]",
            "_ckg = {(_cka.strftime('%Y-%m') if hasattr(_cka, 'strftime') else str(_cka)): float(_ckb)"
            " for _cka, _ckb in _ckgot.items()}",
        )
    )
    return _lines(
        "import pandas as _ckpd",
        _words(
            f"the {agg} of {col} per calendar month of {date} over `{src}`"
            + (f", divided by {s.factor:g}" if s.factor != 1 else "")
        ),
        f"_ckdates = _ckpd.to_datetime({src}[{date!r}], errors='coerce', format='mixed')",
        f"_cks = {src}[{col!r}].set_axis(_ckdates)",
        "_cks = _cks[_cks.index.notna()]",
        "_ckhas = set(_cks.index.strftime('%Y-%m'))",
        f"_ckx = _cks.resample('MS').agg({agg!r}) / {s.factor!r}",
        "_ckx = {_cka.strftime('%Y-%m'): float(_ckb) for _cka, _ckb in _ckx.items()}",
        *_table_guard(v, read, "a series of numbers per month"),
        "_ckmissing = sorted(_cka for _cka in _ckhas if _cka not in _ckg)",
        f"assert not _ckmissing, f'`{v}` has no value for months {{_ckmissing[:6]}}; required: {{_ckw}}, "
        "every month with dated rows'",
        "_ckextra = sorted(_cka for _cka in _ckg if _cka not in _ckx)",
        f"assert not _ckextra, f'`{v}` has labels {{_ckextra[:6]}} outside the months of `{src}`; required: "
        "{_ckw}, labelled YYYY-MM'",
        "_ckoff = [(_cka, _ckg[_cka], _ckx[_cka]) for _cka in sorted(_ckg) if not (abs(_ckg[_cka] - _ckx[_cka]) <= "
        f"{tolerance(s.decimals)!r} or _ckg[_cka] != _ckg[_cka] and _ckx[_cka] != _ckx[_cka])]",
        "assert not _ckoff, (",
        f"    f'`{v}` holds {{_ckoff[0][1]!r}} for {{_ckoff[0][0]!r}} ({{len(_ckoff)}} months differ); "
        "required: {_ckw}, {_ckoff[0][2]!r}')",
    )


COMPILERS: dict[str, Callable[..., str]] = {
    "filter": _filter,
    "aggregate": _aggregate,
    "group_aggregate": _group_aggregate,
    "top_k": _top_k,
    "share": _share,
    "complete_rows": _complete_rows,
    "normalized": _normalized,
    "iqr_outliers": _iqr_outliers,
    "nan_counts": _nan_counts,
    "join_rows": _join_rows,
    "overlap": _overlap,
    "rounded": _rounded,
    "param": _param,
    "corrected_cell": _corrected_cell,
    "excluded_rows": _excluded_rows,
    "sort_order": _sort_order,
    "no_missing": _no_missing,
    "unit_scale": _unit_scale,
    "resample": _resample,
}
"""Kind -> the function writing its verdict's code."""


def _rename(code: str, names: dict[str, str]) -> str:
    """``code`` with the names in ``names`` renamed (via ``ast``), also in the literal text of its f-strings (where
    no spec value ever is: messages show values through names)."""
    tree = parse_python(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            node.id = names.get(node.id, node.id)
        elif isinstance(node, ast.FunctionDef | ast.ExceptHandler) and node.name:
            node.name = names.get(node.name, node.name)
        elif isinstance(node, ast.arg):
            node.arg = names.get(node.arg, node.arg)
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    part.value = re.sub(r"`(\w+)`", lambda m: f"`{names.get(m[1], m[1])}`", part.value)
    return ast.unparse(tree) + "\n"


def compile_check(spec: CheckSpec | Mapping[str, Any]) -> str:
    """The Python code of ``spec``'s verdict (a spec, or its JSON: :func:`.spec.parse_spec` first), for
    :meth:`Kernel.probe`: it passes on a state that meets the spec and raises ``AssertionError`` saying what it found
    against what is required."""
    spec = parse_spec(spec)
    try:
        write = COMPILERS[spec.kind]
    except KeyError:
        raise ValueError(
            f"check kind {spec.kind!r} has no compiler; compile one of: {', '.join(sorted(COMPILERS))}"
        ) from None
    variables = spec.variables()
    if not any(name.startswith(PREFIX) for name in variables):
        return write(spec)
    # a variable looks like an internal name: compile with stand-in names, then rename both apart
    stand_ins = {name: f"_sgvar{i}" for i, name in enumerate(variables)}
    roles = [f.name for f in fields(spec) if f.metadata.get("role") == "variable" and getattr(spec, f.name)]
    code = write(replace(spec, **{role: stand_ins[getattr(spec, role)] for role in roles}))
    prefix = PREFIX + "_"
    while any(name.startswith(prefix) for name in variables):
        prefix += "_"
    internal = {name: prefix + name[len(PREFIX) :] for name in _names(code) if name.startswith(PREFIX)}
    return _rename(code, {**internal, **{stand: name for name, stand in stand_ins.items()}})


def _names(code: str) -> set[str]:
    """Every name ``code`` binds or reads."""
    out: set[str] = set()
    for node in ast.walk(parse_python(code)):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


__all__ = ["COMPILERS", "compile_check", "requirement", "tolerance"]
