"""Turn templates: each lists the turns it could add given the variables earlier turns left fresh.

A template instance (:class:`Candidate`) knows its question, context, code (split into ``compute`` statements, which
assign ``writes``, and a ``result`` dict expression over them), the variables it reads (``requires``), slots,
precision and constraints. The composer (:mod:`synthesis.domains.compose`) derives ``depends_on`` and the relation
from which turns last wrote the required variables, and re-runs ``compute`` statements when an invalidating turn
revises the data.

Variable kinds (:class:`Var.kind`): ``frame`` (a DataFrame; ``info['subset']`` marks filtered row sets that carry the
category column), ``series`` (``info['agg']`` and ``info['by']``: a grouped measure), ``top`` (a top-k series),
``monthly`` (monthly totals), ``scalar`` and ``table`` (the dimension table). Templates reading two inputs are in
:mod:`synthesis.domains.templates_combine`; the registry of all is ``compose.TEMPLATES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synthesis.domains.schema import Schema, ident, number_tag

AGG_WORDS = {"sum": "total", "mean": "mean", "median": "median"}
OP_WORDS = {">": "above", ">=": "at least"}
OP_TAGS = {">": "over", ">=": "atleast"}


@dataclass
class Var:
    """A variable a turn wrote: its kind, the step whose code defines it and whether it derives from the fact table."""

    name: str
    kind: str
    fact_derived: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Candidate:
    """One possible turn (before the composer gives it an id, dependencies and a relation)."""

    kind: str
    question: str
    label: str
    compute: str
    result: str
    requires: tuple[str, ...]
    writes: tuple[Var, ...]
    slots: dict[str, Any] = field(default_factory=dict)
    precision: int | None = None
    constraints: tuple[tuple[str, str | None], ...] = ()
    context: str = ""


def rounded_check(var: str, p: int) -> tuple[str, str]:
    return (f"Round every value to {p} decimals.", f"assert all(abs(v - round(v, {p})) < 1e-9 for v in {var})")


def share_check(var: str) -> tuple[str, str]:
    return (
        "Shares are fractions in [0, 1] (not percentages), rounded to 4 decimals.",
        f"assert 0 <= {var} <= 1 and abs({var} - round({var}, 4)) < 1e-12",
    )


def series_dict(var: str) -> str:
    return f"{{str(k): float(v) for k, v in {var}.items()}}"


# ---------------------------------------------------------------------------------------------------------------------
# the two fixed opening turns


def load_turn(s: Schema) -> Candidate:
    """Turn 1 (init): load the fact table, set the parameters, derive the measure; report rows and total."""
    params = "\n".join(f"{name} = {value!r}" for name, value in s.params.items())
    compute = "\n".join(x for x in ("import pandas as pd", s.load_code, params, s.derive_code) if x)
    writes = [Var(s.fact, "frame")] + [Var(name, "scalar", fact_derived=False) for name in s.params]
    p = s.precision
    total = f"round(float({s.fact}[{s.measure!r}].sum()), {p})"
    result = f"{{'n_{s.fact}': int(len({s.fact})), 'total_{ident(s.measure)}': {total}}}"
    constraints = (s.derive_rule,) if s.derive_rule else ()
    return Candidate(
        kind="load",
        question=f"Load {s.files[s.fact]}. How many {s.fact_noun} are there, and what is the total {s.measure_noun}?",
        label=f"the number of {s.fact_noun} and the total {s.measure_noun}",
        compute=compute,
        result=result,
        requires=(),
        writes=tuple(writes),
        slots={"round": p},
        precision=p,
        constraints=constraints,
        context=(s.derive_rule[0] + " " if s.derive_rule else "") + f"Round {'money' if s.money else 'totals'} to {p} "
        "decimals.",
    )


def clean_turn(s: Schema) -> Candidate:
    """Turn 2 (progress): drop rows without a measure or category and normalise category spellings."""
    c = s.clean
    result = (
        f"{{'n_{c}': int(len({c})), 'n_dropped': int(len({s.fact}) - len({c})), "
        f"'{ident(s.category)}_values': sorted({c}[{s.category!r}].unique().tolist())}}"
    )
    constraints: tuple[tuple[str, str | None], ...] = ()
    if s.canonical:
        constraints = (
            (
                f"After cleaning, {s.category} takes only the values {', '.join(s.canonical)}.",
                f"assert set({c}[{s.category!r}]) <= set({sorted(s.canonical)!r})",
            ),
        )
    if s.normalize == "band":
        spelling = (
            f"Add the column {s.category}: quartile band Q1-Q4 of {s.band_of} (Q1 lowest; pd.qcut of "
            f"{s.band_of}.rank(method='first') into 4 bins)."
        )
    else:
        spelling = (
            f"{s.category_noun.capitalize()} names have inconsistent case, stray spaces and synonyms "
            f"({', '.join(f'{k} = {v}' for k, v in sorted(s.synonyms.items()))}); normalise them to title case."
            if s.normalize == "title"
            else f"Strip stray spaces from {s.category}."
        )
    return Candidate(
        kind="clean",
        question=f"Clean the data: how many {s.fact_noun} remain, how many were dropped, and which "
        f"{s.category_noun} values are there?",
        label=f"the cleaned {s.fact_noun}",
        compute=s.clean_code(),
        result=result,
        requires=(s.fact,),
        writes=(Var(c, "frame", info={"subset": True, "label": f"the cleaned {s.fact_noun}"}),),
        slots={
            "dropna": {"var": c, "source": s.fact, "subset": [s.measure, s.band_of or s.category]},
            "normalize": {"var": c, "column": s.category, "synonyms": dict(s.synonyms)},
        },
        precision=s.precision,
        constraints=constraints,
        context=f"Drop {s.fact_noun} with no {s.measure_noun} or no {s.band_of or s.category_noun}. {spelling}",
    )


# ---------------------------------------------------------------------------------------------------------------------
# templates over fresh variables (each returns every instance it can add now)

Fresh = dict[str, Var]


def group_agg(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out, p = [], s.precision
    for agg, word in AGG_WORDS.items():
        var = f"{ident(s.measure)}_{agg}_by_{ident(s.category)}"
        if var in fresh:
            continue
        out.append(
            Candidate(
                kind="group_agg",
                question=f"What is the {word} {s.measure_noun} per {s.category_noun}?",
                label=f"the {word} {s.measure_noun} per {s.category_noun}",
                compute=f"{var} = {s.clean}.groupby({s.category!r})[{s.measure!r}].{agg}().round({p})",
                result=f"{{{var!r}: {series_dict(var)}}}",
                requires=(s.clean,),
                writes=(Var(var, "series", info={"agg": agg, "by": s.category}),),
                slots={
                    "groupby": {"var": var, "source": s.clean, "by": s.category, "column": s.measure},
                    "agg": agg,
                    "round": p,
                },
                precision=p,
                constraints=(rounded_check(var, p),),
                context=f"Use the cleaned {s.fact_noun}. Round to {p} decimals.",
            )
        )
    return out


def filter_subset(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out, p = [], s.precision
    for f in s.filters:
        for value in f.thresholds:
            var = f"{s.fact}_{ident(f.column)}_{OP_TAGS[f.op]}_{number_tag(value)}"
            if var in fresh:
                continue
            words = f"{f.noun} {OP_WORDS[f.op]} {value:g}"
            compute = (
                f"{var} = {s.clean}[{s.clean}[{f.column!r}] {f.op} {value!r}]\n"
                f"{var}_total = round(float({var}[{s.measure!r}].sum()), {p})"
            )
            out.append(
                Candidate(
                    kind="filter",
                    question=f"How many {s.fact_noun} have {words}, and what is their total {s.measure_noun}?",
                    label=f"the count and total {s.measure_noun} of {s.fact_noun} with {words}",
                    compute=compute,
                    result=f"{{'{var}_count': int(len({var})), '{var}_total': {var}_total}}",
                    requires=(s.clean,),
                    writes=(
                        Var(var, "frame", info={"subset": True, "label": f"{s.fact_noun} with {words}"}),
                        Var(f"{var}_total", "scalar"),
                    ),
                    slots={
                        "filter": {"var": var, "source": s.clean, "column": f.column, "op": f.op, "value": value},
                        "total": {"var": f"{var}_total", "source": var, "column": s.measure},
                        "agg": "sum",
                        "round": p,
                    },
                    precision=p,
                    context=f"Use the cleaned {s.fact_noun}; '{OP_WORDS[f.op]}' means {f.op}. Round to {p} decimals.",
                )
            )
    return out


def subset_group(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, p = [], s.precision
    for name, v in fresh.items():
        var = f"{name}_by_{ident(s.category)}"
        if v.kind != "frame" or not v.info.get("subset") or name == s.clean or var in fresh:
            continue
        out.append(
            Candidate(
                kind="subset_group",
                question=f"For {v.info['label']}, what is the total {s.measure_noun} per {s.category_noun}?",
                label=f"the total {s.measure_noun} per {s.category_noun} of {v.info['label']}",
                compute=f"{var} = {name}.groupby({s.category!r})[{s.measure!r}].sum().round({p})",
                result=f"{{{var!r}: {series_dict(var)}}}",
                requires=(name,),
                writes=(Var(var, "series", info={"agg": "sum", "by": s.category, "subset": name}),),
                slots={"groupby": {"var": var, "source": name, "by": s.category, "column": s.measure}, "agg": "sum"},
                precision=p,
                constraints=(rounded_check(var, p),),
                context=f"Round to {p} decimals.",
            )
        )
    return out


def top_k(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
    for name, v in fresh.items():
        if v.kind != "series":
            continue
        for k in (3, 2):
            var = f"top{k}_{name}"
            if var in fresh:
                continue
            out.append(
                Candidate(
                    kind="top_k",
                    question=f"Which {k} {v.info['by']} values have the highest {name.replace('_', ' ')}, in "
                    "descending order?",
                    label=f"the top {k} of {name.replace('_', ' ')}",
                    compute=f"{var} = {name}.sort_values(ascending=False).head({k})",
                    result=f"{{{var!r}: [str(k) for k in {var}.index], '{var}_values': [float(v) for v in {var}]}}",
                    requires=(name,),
                    writes=(Var(var, "top", info={"by": v.info["by"], "k": k}),),
                    slots={"sort": {"var": var, "source": name, "ascending": False, "k": k}},
                    precision=s.precision,
                    context="List them from the largest down.",
                )
            )
            break  # one k per series keeps the pool varied
    return out


def share_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
    for name, v in fresh.items():
        var = f"share_top_{name}"
        if v.kind != "series" or v.info.get("agg") != "sum" or var in fresh:
            continue
        out.append(
            Candidate(
                kind="share",
                question=f"Which {v.info['by']} value has the largest {name.replace('_', ' ')}, and what share of "
                "the total does it hold?",
                label=f"the largest share of {name.replace('_', ' ')}",
                compute=f"{var} = round(float({name}.max() / {name}.sum()), 4)",
                result=f"{{'top_{name}': str({name}.idxmax()), {var!r}: {var}}}",
                requires=(name,),
                writes=(Var(var, "scalar", info={"share": True}),),
                slots={"share": {"var": var, "source": name}, "round": 4},
                precision=4,
                constraints=(share_check(var),),
                context="Shares are fractions between 0 and 1, rounded to 4 decimals.",
            )
        )
    return out


def monthly(s: Schema, fresh: Fresh) -> list[Candidate]:
    var = f"monthly_{ident(s.measure)}" + ("_k" if s.money else "")
    if not s.date or s.clean not in fresh or var in fresh:
        return []
    p, factor = s.precision, 1000 if s.money else 1
    scaled = f" / {factor}" if s.money else ""
    parsed = f"pd.to_datetime({s.clean}[{s.date!r}], errors='coerce', format='mixed')"
    dated = f"{s.clean}[{parsed}.notna()]"
    compute = (
        f"{var} = {s.clean}.set_index({parsed})[{s.measure!r}]\n"
        f"{var} = ({var}[{var}.index.notna()].resample('MS').sum(){scaled}).round({p})\n"
        f"{var}.index = {var}.index.strftime('%Y-%m')"
    )
    resampled = {"var": var, "source": s.clean, "column": s.date, "measure": s.measure, "rule": "MS"}
    slots: dict[str, Any] = {"resample": resampled, "round": p}
    constraints = [rounded_check(var, p)]
    context = f"Parse {s.date} as dates; months are calendar months ('YYYY-MM'). Round to {p} decimals."
    if s.money:
        slots["unit"] = {"var": var, "factor": factor}
        context = f"Amounts in thousands (divide by {factor}). " + context
        check = (
            f"assert abs(float({var}.sum()) * {factor} - float({dated}[{s.measure!r}].sum())) <= 5 * len({var}) + 1"
        )
        constraints.append(("Monthly amounts are in thousands.", check))
    return [
        Candidate(
            kind="monthly",
            question=f"What is the total {s.measure_noun} per month" + (" (in thousands)?" if s.money else "?"),
            label=f"the monthly {s.measure_noun}",
            compute=compute,
            result=f"{{{var!r}: {series_dict(var)}}}",
            requires=(s.clean,),
            writes=(Var(var, "monthly"),),
            slots=slots,
            precision=p,
            constraints=tuple(constraints),
            context=context,
        )
    ]


def monthly_peak(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
    for name, v in fresh.items():
        var = f"peak_month_{name}"
        if v.kind != "monthly" or var in fresh:
            continue
        out.append(
            Candidate(
                kind="peak",
                question=f"Which month had the highest {name.replace('_', ' ')}, and what was the change from the "
                "first to the last month?",
                label=f"the peak month of {name.replace('_', ' ')}",
                compute=f"{var} = str({name}.idxmax())\n"
                f"{name}_change = round(float({name}.iloc[-1] - {name}.iloc[0]), {s.precision})",
                result=f"{{{var!r}: {var}, '{name}_change': {name}_change}}",
                requires=(name,),
                writes=(Var(var, "scalar"), Var(f"{name}_change", "scalar")),
                slots={"sort": {"var": var, "source": name, "ascending": False, "k": 1}, "round": s.precision},
                precision=s.precision,
                context="Change = last month minus first month.",
            )
        )
    return out


def missing_report(s: Schema, fresh: Fresh) -> list[Candidate]:
    var = f"missing_{s.fact}"
    if s.fact not in fresh or var in fresh:
        return []
    return [
        Candidate(
            kind="missing",
            question=f"Before cleaning, which columns of the {s.fact_noun} have missing values, and how many each?",
            label=f"the missing values per column of the {s.fact_noun}",
            compute=f"{var} = {s.fact}.isna().sum()\n{var} = {var}[{var} > 0]",
            result=f"{{{var!r}: {{str(k): int(v) for k, v in {var}.items()}}}}",
            requires=(s.fact,),
            writes=(Var(var, "scalar"),),
            slots={"missing": {"var": var, "source": s.fact}},
            precision=0,
            context="Count NaN cells per column; list only columns that have some.",
        )
    ]


def outliers(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out = []
    for column, noun in [(f.column, f.noun) for f in s.filters] + [(s.measure, s.measure_noun)]:
        var = f"{s.fact}_{ident(column)}_outliers"
        if var in fresh or any(c.writes[0].name == var for c in out):
            continue
        q = f"{s.clean}[{column!r}].quantile"
        compute = (
            f"{var}_limit = round(float({q}(0.75) + 1.5 * ({q}(0.75) - {q}(0.25))), 4)\n"
            f"{var} = {s.clean}[{s.clean}[{column!r}] > {var}_limit]"
        )
        out.append(
            Candidate(
                kind="outliers",
                question=f"Using the IQR rule, how many {s.fact_noun} are high outliers in {noun}, and what is the "
                "limit?",
                label=f"the high outliers in {noun}",
                compute=compute,
                result=f"{{'{var}_count': int(len({var})), '{var}_limit': {var}_limit}}",
                requires=(s.clean,),
                writes=(
                    Var(var, "frame"),  # may be empty: no subset templates build on it
                    Var(f"{var}_limit", "scalar"),
                ),
                slots={"outlier": {"var": var, "source": s.clean, "column": column, "k": 1.5}, "round": 4},
                precision=4,
                context="High outlier: value > Q3 + 1.5 * (Q3 - Q1) (pandas default quantiles). Round the limit to "
                "4 decimals.",
            )
        )
    return out


def load_dim(s: Schema, fresh: Fresh) -> list[Candidate]:
    if not s.dim or s.dim in fresh:
        return []
    return [
        Candidate(
            kind="load_dim",
            question=f"Load {s.files[s.dim]}. How many {s.dim_noun} are there per {s.dim_attr_noun}?",
            label=f"the {s.dim_noun} per {s.dim_attr_noun}",
            compute=s.dim_load_code,
            result=f"{{'{s.dim}_per_{s.dim_attr}': {{str(k): int(v) for k, v in "
            f"{s.dim}[{s.dim_attr!r}].value_counts().sort_index().items()}}}}",
            requires=(),
            writes=(Var(s.dim, "table", fact_derived=False),),
            slots={"normalize": {"var": s.dim, "column": s.dim_attr, "synonyms": {}}},
            precision=0,
            context=f"{s.dim_attr_noun.capitalize()} values have stray spaces and mixed case; normalise them to "
            "title case.",
        )
    ]
