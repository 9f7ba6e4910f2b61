"""Turn templates: each lists the turns it could add given the variables earlier turns left fresh.

A template instance (:class:`Candidate`) knows its question, context, code (split into ``compute`` statements, which
assign ``writes``, and a ``result`` dict expression over them), the variables it reads (``requires``), slots,
precision and constraints. The composer (:mod:`synthesis.domains.compose`) derives ``depends_on`` and the relation
from which turns last wrote the required variables, and re-runs ``compute`` statements when an invalidating turn
revises the data.

Variable kinds (:class:`Var.kind`): ``frame`` (a DataFrame; ``info['subset']`` marks filtered row sets that carry the
category column), ``series`` (``info['agg']`` and ``info['by']``: a grouped measure), ``top`` (a top-k series),
``monthly`` (monthly totals), ``scalar`` and ``table`` (the dimension table). Templates reading two inputs are in
:mod:`synthesis.domains.templates_combine`; the registry of all is ``compose.TEMPLATES``. Every text a template
writes (question, context, label, constraint text) comes from the schema's question writer (``s.writer.say(key,
...)``, :mod:`synthesis.domains.wording`), so the writers differ in words only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synthesis.domains.schema import Schema, ident, number_tag
from synthesis.domains.wording import QuestionWriter

AGGS = ("sum", "mean", "median")
"""The aggregations of the grouped templates (worded by the writer's ``agg.<name>`` phrases)."""
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


def rounded_check(w: QuestionWriter, var: str, p: int) -> tuple[str, str]:
    return (w.say("rounded.check", p=p), f"assert all(abs(v - round(v, {p})) < 1e-9 for v in {var})")


def share_check(w: QuestionWriter, var: str) -> tuple[str, str]:
    return (w.say("share.check", p=4), f"assert 0 <= {var} <= 1 and abs({var} - round({var}, 4)) < 1e-12")


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
    w = s.writer
    return Candidate(
        kind="load",
        question=w.say("load.question", file=s.files[s.fact], fact_noun=s.fact_noun, measure_noun=s.measure_noun),
        label=w.say("load.label", fact_noun=s.fact_noun, measure_noun=s.measure_noun),
        compute=compute,
        result=result,
        requires=(),
        writes=tuple(writes),
        slots={"round": p},
        precision=p,
        constraints=constraints,
        context=(s.derive_rule[0] + " " if s.derive_rule else "")
        + w.say("load.round_money" if s.money else "load.round_totals", p=p),
    )


def clean_turn(s: Schema) -> Candidate:
    """Turn 2 (progress): drop rows without a measure or category and normalise category spellings."""
    c = s.clean
    result = (
        f"{{'n_{c}': int(len({c})), 'n_dropped': int(len({s.fact}) - len({c})), "
        f"'{ident(s.category)}_values': sorted({c}[{s.category!r}].unique().tolist())}}"
    )
    constraints: tuple[tuple[str, str | None], ...] = ()
    w = s.writer
    if s.canonical:
        constraints = (
            (
                w.say("clean.canonical", category=s.category, values=s.canonical),
                f"assert set({c}[{s.category!r}]) <= set({sorted(s.canonical)!r})",
            ),
        )
    if s.normalize == "band":
        spelling = w.say("clean.band", category=s.category, band_of=s.band_of, bins=4)
    elif s.normalize == "title":
        synonyms = [f"{k} = {v}" for k, v in sorted(s.synonyms.items())]
        spelling = w.say("clean.title", category_noun=s.category_noun.lower(), synonyms=synonyms)
    else:
        spelling = w.say("clean.strip", category=s.category)
    label = w.say("clean.label", fact_noun=s.fact_noun)
    return Candidate(
        kind="clean",
        question=w.say("clean.question", fact_noun=s.fact_noun, category_noun=s.category_noun),
        label=label,
        compute=s.clean_code(),
        result=result,
        requires=(s.fact,),
        writes=(Var(c, "frame", info={"subset": True, "label": label}),),
        slots={
            "dropna": {"var": c, "source": s.fact, "subset": [s.measure, s.band_of or s.category]},
            "normalize": {"var": c, "column": s.category, "synonyms": dict(s.synonyms)},
        },
        precision=s.precision,
        constraints=constraints,
        context=w.say(
            "clean.context",
            fact_noun=s.fact_noun,
            measure_noun=s.measure_noun,
            missing=s.band_of or s.category_noun,
            spelling=spelling,
        ),
    )


# ---------------------------------------------------------------------------------------------------------------------
# templates over fresh variables (each returns every instance it can add now)

Fresh = dict[str, Var]


def group_agg(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out, p, w = [], s.precision, s.writer
    for agg in AGGS:
        var = f"{ident(s.measure)}_{agg}_by_{ident(s.category)}"
        if var in fresh:
            continue
        words = {"agg": w.say(f"agg.{agg}"), "measure_noun": s.measure_noun, "category_noun": s.category_noun}
        out.append(
            Candidate(
                kind="group_agg",
                question=w.say("group_agg.question", **words),
                label=w.say("group_agg.label", **words),
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
                constraints=(rounded_check(w, var, p),),
                context=w.say("group_agg.context", fact_noun=s.fact_noun, p=p),
            )
        )
    return out


def filter_subset(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out, p, w = [], s.precision, s.writer
    for f in s.filters:
        for value in f.thresholds:
            var = f"{s.fact}_{ident(f.column)}_{OP_TAGS[f.op]}_{number_tag(value)}"
            if var in fresh:
                continue
            op = w.say(f"op.{f.op}")
            words = w.say("filter.condition", noun=f.noun, op=op, value=value)
            compute = (
                f"{var} = {s.clean}[{s.clean}[{f.column!r}] {f.op} {value!r}]\n"
                f"{var}_total = round(float({var}[{s.measure!r}].sum()), {p})"
            )
            out.append(
                Candidate(
                    kind="filter",
                    question=w.say(
                        "filter.question", fact_noun=s.fact_noun, condition=words, measure_noun=s.measure_noun
                    ),
                    label=w.say("filter.label", fact_noun=s.fact_noun, condition=words, measure_noun=s.measure_noun),
                    compute=compute,
                    result=f"{{'{var}_count': int(len({var})), '{var}_total': {var}_total}}",
                    requires=(s.clean,),
                    writes=(
                        Var(
                            var,
                            "frame",
                            info={
                                "subset": True,
                                "label": w.say("filter.subset", fact_noun=s.fact_noun, condition=words),
                            },
                        ),
                        Var(f"{var}_total", "scalar"),
                    ),
                    slots={
                        "filter": {"var": var, "source": s.clean, "column": f.column, "op": f.op, "value": value},
                        "total": {"var": f"{var}_total", "source": var, "column": s.measure},
                        "agg": "sum",
                        "round": p,
                    },
                    precision=p,
                    context=w.say("filter.context", fact_noun=s.fact_noun, op=op, sign=f.op, p=p),
                )
            )
    return out


def subset_group(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, p, w = [], s.precision, s.writer
    for name, v in fresh.items():
        var = f"{name}_by_{ident(s.category)}"
        if v.kind != "frame" or not v.info.get("subset") or name == s.clean or var in fresh:
            continue
        out.append(
            Candidate(
                kind="subset_group",
                question=w.say(
                    "subset_sum.question", subset=v.info["label"], measure_noun=s.measure_noun, by=s.category_noun
                ),
                label=w.say(
                    "subset_sum.label", subset=v.info["label"], measure_noun=s.measure_noun, by=s.category_noun
                ),
                compute=f"{var} = {name}.groupby({s.category!r})[{s.measure!r}].sum().round({p})",
                result=f"{{{var!r}: {series_dict(var)}}}",
                requires=(name,),
                writes=(Var(var, "series", info={"agg": "sum", "by": s.category, "subset": name}),),
                slots={"groupby": {"var": var, "source": name, "by": s.category, "column": s.measure}, "agg": "sum"},
                precision=p,
                constraints=(rounded_check(w, var, p),),
                context=w.say("round.context", p=p),
            )
        )
    return out


def top_k(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
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
                    question=w.say("top_k.question", k=k, by=v.info["by"], name=name.replace("_", " ")),
                    label=w.say("top_k.label", k=k, name=name.replace("_", " ")),
                    compute=f"{var} = {name}.sort_values(ascending=False).head({k})",
                    result=f"{{{var!r}: [str(k) for k in {var}.index], '{var}_values': [float(v) for v in {var}]}}",
                    requires=(name,),
                    writes=(Var(var, "top", info={"by": v.info["by"], "k": k}),),
                    slots={"sort": {"var": var, "source": name, "ascending": False, "k": k}},
                    precision=s.precision,
                    context=w.say("top_k.context"),
                )
            )
            break  # one k per series keeps the pool varied
    return out


def share_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
    for name, v in fresh.items():
        var = f"share_top_{name}"
        if v.kind != "series" or v.info.get("agg") != "sum" or var in fresh:
            continue
        out.append(
            Candidate(
                kind="share",
                question=w.say("share.question", by=v.info["by"], name=name.replace("_", " ")),
                label=w.say("share.label", name=name.replace("_", " ")),
                compute=f"{var} = round(float({name}.max() / {name}.sum()), 4)",
                result=f"{{'top_{name}': str({name}.idxmax()), {var!r}: {var}}}",
                requires=(name,),
                writes=(Var(var, "scalar", info={"share": True}),),
                slots={"share": {"var": var, "source": name}, "round": 4},
                precision=4,
                constraints=(share_check(w, var),),
                context=w.say("share.context", p=4),
            )
        )
    return out


def monthly(s: Schema, fresh: Fresh) -> list[Candidate]:
    var = f"monthly_{ident(s.measure)}" + ("_k" if s.money else "")
    if not s.date or s.clean not in fresh or var in fresh:
        return []
    p, factor, w = s.precision, 1000 if s.money else 1, s.writer
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
    constraints = [rounded_check(w, var, p)]
    context = w.say("monthly.context", date=s.date, p=p)
    if s.money:
        slots["unit"] = {"var": var, "factor": factor}
        context = w.say("monthly.scaled", factor=factor) + context
        check = (
            f"assert abs(float({var}.sum()) * {factor} - float({dated}[{s.measure!r}].sum())) <= 5 * len({var}) + 1"
        )
        constraints.append((w.say("monthly.check"), check))
    return [
        Candidate(
            kind="monthly",
            question=w.say("monthly.question_scaled" if s.money else "monthly.question", measure_noun=s.measure_noun),
            label=w.say("monthly.label", measure_noun=s.measure_noun),
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
    out, w = [], s.writer
    for name, v in fresh.items():
        var = f"peak_month_{name}"
        if v.kind != "monthly" or var in fresh:
            continue
        out.append(
            Candidate(
                kind="peak",
                question=w.say("peak.question", name=name.replace("_", " ")),
                label=w.say("peak.label", name=name.replace("_", " ")),
                compute=f"{var} = str({name}.idxmax())\n"
                f"{name}_change = round(float({name}.iloc[-1] - {name}.iloc[0]), {s.precision})",
                result=f"{{{var!r}: {var}, '{name}_change': {name}_change}}",
                requires=(name,),
                writes=(Var(var, "scalar"), Var(f"{name}_change", "scalar")),
                slots={"sort": {"var": var, "source": name, "ascending": False, "k": 1}, "round": s.precision},
                precision=s.precision,
                context=w.say("peak.context"),
            )
        )
    return out


def missing_report(s: Schema, fresh: Fresh) -> list[Candidate]:
    var, w = f"missing_{s.fact}", s.writer
    if s.fact not in fresh or var in fresh:
        return []
    return [
        Candidate(
            kind="missing",
            question=w.say("missing.question", fact_noun=s.fact_noun),
            label=w.say("missing.label", fact_noun=s.fact_noun),
            compute=f"{var} = {s.fact}.isna().sum()\n{var} = {var}[{var} > 0]",
            result=f"{{{var!r}: {{str(k): int(v) for k, v in {var}.items()}}}}",
            requires=(s.fact,),
            writes=(Var(var, "scalar"),),
            slots={"missing": {"var": var, "source": s.fact}},
            precision=0,
            context=w.say("missing.context"),
        )
    ]


def outliers(s: Schema, fresh: Fresh) -> list[Candidate]:
    if s.clean not in fresh:
        return []
    out, w = [], s.writer
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
                question=w.say("outliers.question", fact_noun=s.fact_noun, noun=noun),
                label=w.say("outliers.label", noun=noun),
                compute=compute,
                result=f"{{'{var}_count': int(len({var})), '{var}_limit': {var}_limit}}",
                requires=(s.clean,),
                writes=(
                    Var(var, "frame"),  # may be empty: no subset templates build on it
                    Var(f"{var}_limit", "scalar"),
                ),
                slots={"outlier": {"var": var, "source": s.clean, "column": column, "k": 1.5}, "round": 4},
                precision=4,
                context=w.say("outliers.context", k=1.5, p=4),
            )
        )
    return out


def load_dim(s: Schema, fresh: Fresh) -> list[Candidate]:
    if not s.dim or s.dim in fresh:
        return []
    w = s.writer
    return [
        Candidate(
            kind="load_dim",
            question=w.say("load_dim.question", file=s.files[s.dim], dim_noun=s.dim_noun, attr_noun=s.dim_attr_noun),
            label=w.say("load_dim.label", dim_noun=s.dim_noun, attr_noun=s.dim_attr_noun),
            compute=s.dim_load_code,
            result=f"{{'{s.dim}_per_{s.dim_attr}': {{str(k): int(v) for k, v in "
            f"{s.dim}[{s.dim_attr!r}].value_counts().sort_index().items()}}}}",
            requires=(),
            writes=(Var(s.dim, "table", fact_derived=False),),
            slots={"normalize": {"var": s.dim, "column": s.dim_attr, "synonyms": {}}},
            precision=0,
            context=w.say("load_dim.context", attr_noun=s.dim_attr_noun.lower()),
        )
    ]
