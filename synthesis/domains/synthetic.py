"""Seeded synthetic tables with realistic quirks, built from a :class:`DomainDef` (the six domains are in
:mod:`synthesis.domains.catalog`).

Every generated task has a fact table (``<fact>.csv``: an id, a date within one year, a dirty category column,
numeric columns, a foreign key) and a dimension table (``<dim>.csv``). Quirks: missing values in one input of the
measure and in the category; category spellings with mixed case, stray spaces and synonyms; legitimate outliers (a
few rows scaled up); one data-entry error (a value off by a factor, later corrected by an invalidate turn); foreign
keys without a match in the dimension table; dimension attributes with stray spaces and mixed case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from synthesis.domains.base import TaskSpec, check_n_turns
from synthesis.domains.compose import compose_task
from synthesis.domains.schema import FilterSpec, Revision, Schema
from synthesis.domains.wording import get_writer

Column = Callable[[np.random.Generator, int], np.ndarray]


@dataclass(frozen=True)
class DomainDef:
    """Everything domain-specific about one generator (tables, wording, the measure and its revisions)."""

    name: str
    title: str
    intro: str
    fact: str
    fact_noun: str
    id_col: str
    date_col: str
    category: str
    category_noun: str
    categories: Mapping[str, float]  # canonical value -> weight
    synonyms: Mapping[str, str]  # title-cased variant -> canonical value
    columns: Mapping[str, Column]  # numeric columns of the fact table
    measure: str
    measure_noun: str
    derive: str  # expression over `{f}` (the fact variable) and the parameter
    derive_text: str
    param: tuple[str, float, float, str]  # variable, value, revised value, sentence ending for the revision
    nan_column: str  # measure input that has missing values
    error_column: str  # column with one data-entry error
    error_factor: float
    outlier_column: str  # column with a few legitimate outliers
    filters: tuple[FilterSpec, ...]
    dim: str
    dim_noun: str
    dim_key: str
    key_prefix: str
    n_dim: int
    dim_attr: str
    dim_attr_noun: str
    attr_values: tuple[str, ...]
    exclude_reason: str  # "{key} ..." sentence: why that dimension key's rows are excluded
    money: bool = True
    rows: tuple[int, int] = (300, 900)
    extra: Mapping[str, Column] = field(default_factory=dict)  # other columns (not used by the measure)


def _dirty(rng: np.random.Generator, values: np.ndarray, synonyms: Mapping[str, str]) -> list[str | None]:
    """Category values with ~18% spelling variants (case, spaces, synonyms) and ~2% missing."""
    by_canonical: dict[str, list[str]] = {}
    for variant, canonical in sorted(synonyms.items()):
        by_canonical.setdefault(canonical, []).append(variant)
    out: list[str | None] = []
    for value in values:
        u = rng.random()
        if u < 0.02:
            out.append(None)
        elif u < 0.05:
            out.append(value.lower())
        elif u < 0.08:
            out.append(value.upper())
        elif u < 0.12:
            out.append(f" {value}  ")
        elif u < 0.20 and value in by_canonical:
            variant = by_canonical[value][int(rng.integers(len(by_canonical[value])))]
            out.append(variant.lower() if rng.random() < 0.5 else variant)
        else:
            out.append(str(value))
    return out


def build_tables(d: DomainDef, rng: np.random.Generator) -> tuple[dict[str, pd.DataFrame], dict[str, object]]:
    """The fact and dimension tables, plus the facts the revisions need (error row, excluded key)."""
    n = int(rng.integers(*d.rows))
    names = list(d.categories)
    weights = np.array([d.categories[c] for c in names], dtype=float)
    cats = rng.choice(names, size=n, p=weights / weights.sum())
    days = np.sort(rng.integers(0, 365, size=n))
    keys = [f"{d.key_prefix}{i:02d}" for i in range(1, d.n_dim + 1)]
    fact_keys = rng.choice(keys, size=n).astype(object)
    fact_keys[rng.random(n) < 0.015] = f"{d.key_prefix}99"  # no such row in the dimension table
    data: dict[str, object] = {
        d.id_col: np.arange(1001, 1001 + n),
        d.date_col: (pd.Timestamp("2025-01-01") + pd.to_timedelta(days, unit="D")).strftime("%Y-%m-%d"),
        d.dim_key: fact_keys,
        d.category: _dirty(rng, cats, d.synonyms),
    }
    for name, make in {**d.columns, **d.extra}.items():
        data[name] = make(rng, n)
    fact = pd.DataFrame(data)
    outliers = rng.choice(n, size=max(2, n // 150), replace=False)
    fact.loc[outliers, d.outlier_column] = fact.loc[outliers, d.outlier_column] * 4
    fact.loc[rng.random(n) < 0.03, d.nan_column] = np.nan
    candidates = np.flatnonzero(fact[d.error_column].notna().to_numpy() & ~np.isin(np.arange(n), outliers))
    error_row = int(candidates[int(rng.integers(len(candidates)))])
    if pd.api.types.is_integer_dtype(fact[d.error_column]):
        true_value: float | int = int(fact.at[error_row, d.error_column])
        error_value: float | int = int(round(true_value * d.error_factor))
    else:
        true_value = float(fact.at[error_row, d.error_column])
        error_value = round(true_value * d.error_factor, 2)
    fact.at[error_row, d.error_column] = error_value
    attrs = rng.choice(list(d.attr_values), size=d.n_dim)
    dirty = rng.random(d.n_dim) < 0.3
    dirty[int(rng.integers(d.n_dim))] = True  # at least one spelling to clean
    spelled = [
        (a.lower() + " " if rng.random() < 0.5 else " " + a.upper()) if bad else a
        for a, bad in zip(attrs, dirty, strict=True)
    ]
    dim = pd.DataFrame({d.dim_key: keys, d.dim_attr: spelled, "opened": 2000 + rng.integers(0, 25, size=d.n_dim)})
    facts = {
        "error_id": int(fact.at[error_row, d.id_col]),
        "error_value": error_value,
        "true_value": true_value,
        "excluded": rng.choice([k for k in keys if k != fact.at[error_row, d.dim_key]]).item(),
    }
    return {d.fact: fact, d.dim: dim}, facts


def derive_formula(d: DomainDef) -> str:
    """The measure's formula over column names: "quantity * unit_price * (1 - discount_rate)"."""
    return re.sub(r"\{f\}\['(\w+)'\]", r"\1", d.derive)


def schema_for(d: DomainDef, facts: Mapping[str, object], question_writer: str = "a") -> Schema:
    """The Schema of a generated task (wording by ``question_writer``, code snippets and revisions)."""
    f, w = d.fact, get_writer(question_writer)
    pvar, pvalue, pnew, pwhy = d.param
    derive = f"{f}[{d.measure!r}] = " + d.derive.format(f=f)
    load = f"{f} = pd.read_csv(f'{{BASE_PATH}}/data/{f}.csv')"
    dim_load = (
        f"{d.dim} = pd.read_csv(f'{{BASE_PATH}}/data/{d.dim}.csv')\n"
        f"{d.dim}[{d.dim_attr!r}] = {d.dim}[{d.dim_attr!r}].str.strip().str.title()"
    )
    eid, col, true = facts["error_id"], d.error_column, facts["true_value"]
    where = f"{f}.loc[{f}[{d.id_col!r}] == {eid}, {col!r}]"
    excluded = facts["excluded"]
    revisions = (
        Revision(
            kind="param",
            context=w.say("revision.param", param=pvar, new=pnew, old=pvalue, why=pwhy),
            code=f"{pvar} = {pnew!r}",
            slots={"param": {"var": pvar, "old": pvalue, "new": pnew}},
            check=(w.say("revision.param_check", param=pvar, new=pnew), f"assert {pvar} == {pnew!r}"),
        ),
        Revision(
            kind="correction",
            context=w.say(
                "revision.correction", column=col, old=facts["error_value"], id_col=d.id_col, key=eid, new=true
            ),
            code=f"{where} = {true!r}",
            slots={
                "correction": {
                    "var": f,
                    "column": col,
                    "key_column": d.id_col,
                    "key": eid,
                    "old": facts["error_value"],
                    "new": true,
                }
            },
            check=(
                w.say("revision.correction_check", column=col, id_col=d.id_col, key=eid, new=true),
                f"assert float({where}.iloc[0]) == {true!r}",
            ),
        ),
        Revision(
            kind="exclude",
            context=w.say(
                "revision.exclude", reason=d.exclude_reason.format(key=excluded), column=d.dim_key, value=excluded
            ),
            code=f"{f} = {f}[{f}[{d.dim_key!r}] != {excluded!r}].copy()",
            slots={"exclude": {"var": f, "column": d.dim_key, "value": excluded}},
            check=(
                w.say("revision.exclude_check", column=d.dim_key, value=excluded),
                f"assert ({f}[{d.dim_key!r}] != {excluded!r}).all()",
            ),
        ),
    )
    derive_text = w.say(
        "derive.rule", text=d.derive_text, measure=d.measure_noun, formula=derive_formula(d), param=pvar, value=pvalue
    )
    rule_check = f"assert ({f}[{d.measure!r}] - ({d.derive.format(f=f)})).abs().max() < 1e-9"
    return Schema(
        domain=d.name,
        title=d.title,
        intro=d.intro,
        fact=f,
        fact_noun=d.fact_noun,
        load_code=load,
        measure=d.measure,
        measure_noun=d.measure_noun,
        category=d.category,
        category_noun=d.category_noun,
        derive_code=derive,
        derive_rule=(derive_text, rule_check),
        params={pvar: pvalue},
        normalize="title",
        synonyms=dict(d.synonyms),
        canonical=tuple(sorted(d.categories)),
        date=d.date_col,
        filters=d.filters,
        precision=2,
        money=d.money,
        dim=d.dim,
        dim_noun=d.dim_noun,
        dim_load_code=dim_load,
        dim_key=d.dim_key,
        dim_attr=d.dim_attr,
        dim_attr_noun=d.dim_attr_noun,
        revisions=revisions,
        files={f: f"data/{f}.csv", d.dim: f"data/{d.dim}.csv"},
        question_writer=question_writer,
    )


def generate_domain_task(d: DomainDef, seed: int, n_turns: int, question_writer: str = "a") -> TaskSpec:
    """A seeded task of ``n_turns`` turns over freshly generated tables of domain ``d``, worded by
    ``question_writer`` (the writers differ in words only: same tables, turns, code and slots)."""
    check_n_turns(n_turns)
    rng = np.random.default_rng([seed, sum(d.name.encode())])
    tables, facts = build_tables(d, rng)
    schema = schema_for(d, facts, question_writer)
    return compose_task(schema, tables, task_id=f"syn-{d.name}-{seed}-{n_turns}", seed=seed, n_turns=n_turns)
