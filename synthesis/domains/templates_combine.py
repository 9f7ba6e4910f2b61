"""Turn templates that read two inputs (usually -> combine turns): joins with the dimension table, shares of a
subset inside a top-k list, per-group fractions, overlaps of two filters, common top-k values, mean vs median, and
the peak month against a category share. Same contract as :mod:`synthesis.domains.templates`."""

from __future__ import annotations

from synthesis.domains.schema import Schema, ident
from synthesis.domains.templates import Candidate, Fresh, Var, rounded_check, series_dict, share_check


def join_group(s: Schema, fresh: Fresh) -> list[Candidate]:
    if not s.dim or s.dim not in fresh or s.clean not in fresh:
        return []
    merged, var, p = f"{s.fact}_with_{s.dim}", f"{ident(s.measure)}_by_{ident(str(s.dim_attr))}", s.precision
    w = s.writer
    if var in fresh:
        return []
    compute = (
        f"{merged} = {s.clean}.merge({s.dim}[[{s.dim_key!r}, {s.dim_attr!r}]], on={s.dim_key!r}, how='left')\n"
        f"{var} = {merged}.groupby({s.dim_attr!r})[{s.measure!r}].sum().round({p})"
    )
    return [
        Candidate(
            kind="join",
            question=w.say(
                "join.question",
                fact_noun=s.fact_noun,
                dim_noun=s.dim_noun,
                key=s.dim_key,
                fact_one=s.fact_noun[:-1] if s.fact_noun.endswith("s") else s.fact_noun,
                measure_noun=s.measure_noun,
                attr_noun=s.dim_attr_noun,
            ),
            label=w.say("join.label", measure_noun=s.measure_noun, attr_noun=s.dim_attr_noun),
            compute=compute,
            result=f"{{{var!r}: {series_dict(var)}, "
            f"'{merged}_unmatched': int({merged}[{s.dim_attr!r}].isna().sum())}}",
            requires=(s.clean, s.dim),
            writes=(Var(merged, "frame"), Var(var, "series", info={"agg": "sum", "by": s.dim_attr})),
            slots={
                "join": {"var": merged, "left": s.clean, "right": s.dim, "on": s.dim_key, "how": "left"},
                "groupby": {"var": var, "source": merged, "by": s.dim_attr, "column": s.measure},
                "agg": "sum",
                "round": p,
            },
            precision=p,
            constraints=(
                (
                    w.say("join.check", fact_row=s.fact_noun[:-1]),
                    f"assert len({merged}) == len({s.clean})",
                ),
            ),
            context=w.say("join.context", fact_noun=s.fact_noun, attr=s.dim_attr, p=p),
        )
    ]


def subset_by_attr(s: Schema, fresh: Fresh) -> list[Candidate]:
    if not s.dim or s.dim not in fresh:
        return []
    out, p, w = [], s.precision, s.writer
    for name, v in fresh.items():
        var = f"{name}_by_{ident(str(s.dim_attr))}"
        if v.kind != "frame" or not v.info.get("subset") or name == s.clean or var in fresh:
            continue
        compute = (
            f"{var} = {name}.merge({s.dim}[[{s.dim_key!r}, {s.dim_attr!r}]], on={s.dim_key!r}, how='left')"
            f".groupby({s.dim_attr!r})[{s.measure!r}].sum().round({p})"
        )
        out.append(
            Candidate(
                kind="subset_join",
                question=w.say(
                    "subset_sum.question", subset=v.info["label"], measure_noun=s.measure_noun, by=s.dim_attr_noun
                ),
                label=w.say(
                    "subset_sum.label", subset=v.info["label"], measure_noun=s.measure_noun, by=s.dim_attr_noun
                ),
                compute=compute,
                result=f"{{{var!r}: {series_dict(var)}}}",
                requires=(name, s.dim),
                writes=(Var(var, "series", info={"agg": "sum", "by": s.dim_attr, "subset": name}),),
                slots={
                    "join": {"var": var, "left": name, "right": s.dim, "on": s.dim_key, "how": "left"},
                    "groupby": {"var": var, "source": name, "by": s.dim_attr, "column": s.measure},
                    "agg": "sum",
                    "round": p,
                },
                precision=p,
                constraints=(rounded_check(w, var, p),),
                context=w.say("subset_join.context", key=s.dim_key, p=p),
            )
        )
    return out


def subset_share_in_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
    tops = [n for n, v in fresh.items() if v.kind == "top" and v.info["by"] == s.category]
    subsets = [n for n, v in fresh.items() if v.kind == "frame" and v.info.get("subset") and n != s.clean]
    for top in tops:
        for sub in subsets:
            var = f"share_of_{sub}_in_{top}"
            if var in fresh:
                continue
            compute = (
                f"{var} = round(float({sub}.loc[{sub}[{s.category!r}].isin({top}.index), {s.measure!r}].sum())"
                f" / max(float({sub}[{s.measure!r}].sum()), 1e-12), 4)"
            )
            out.append(
                Candidate(
                    kind="share_in_top",
                    question=w.say(
                        "share_in_top.question",
                        measure_noun=s.measure_noun,
                        subset=fresh[sub].info["label"],
                        category_noun=s.category_noun,
                        top=top.replace("_", " "),
                    ),
                    label=w.say("share_in_top.label", subset=fresh[sub].info["label"], top=top.replace("_", " ")),
                    compute=compute,
                    result=f"{{{var!r}: {var}}}",
                    requires=(top, sub),
                    writes=(Var(var, "scalar", info={"share": True}),),
                    slots={"share": {"var": var, "source": sub}, "round": 4},
                    precision=4,
                    constraints=(share_check(w, var),),
                    context=w.say("share.context", p=4),
                )
            )
    return out


def subset_fraction(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
    totals = [
        n for n, v in fresh.items() if v.kind == "series" and v.info.get("agg") == "sum" and "subset" not in v.info
    ]
    parts = [n for n, v in fresh.items() if v.kind == "series" and "subset" in v.info]
    for total in totals:
        for part in parts:
            if fresh[total].info["by"] != fresh[part].info["by"]:
                continue
            var = f"fraction_{part}"
            if var in fresh:
                continue
            by, subset = fresh[part].info["by"], fresh[fresh[part].info["subset"]].info["label"]
            out.append(
                Candidate(
                    kind="fraction",
                    question=w.say("fraction.question", by=by, measure_noun=s.measure_noun, subset=subset),
                    label=w.say("fraction.label", by=by, subset=subset),
                    compute=f"{var} = ({part} / {total}).fillna(0).round(4)",
                    result=f"{{{var!r}: {series_dict(var)}}}",
                    requires=(part, total),
                    writes=(Var(var, "scalar"),),
                    slots={"share": {"var": var, "source": total}, "round": 4},
                    precision=4,
                    constraints=(
                        (
                            w.say("fraction.check", p=4),
                            f"assert ((({var}) >= 0) & (({var}) <= 1)).all()",
                        ),
                    ),
                    context=w.say("fraction.context", p=4),
                )
            )
    return out


def peak_vs_share(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
    months = [n for n, v in fresh.items() if v.kind == "monthly"]
    shares = [n for n, v in fresh.items() if v.kind == "scalar" and v.info.get("share") and n.startswith("share_top_")]
    for month in months:
        for share in shares:
            var = f"peak_share_{month}"
            if var in fresh:
                continue
            out.append(
                Candidate(
                    kind="peak_vs_share",
                    question=w.say(
                        "peak_vs_share.question", month=month.replace("_", " "), share=share.replace("_", " ")
                    ),
                    label=w.say("peak_vs_share.label", share=share.replace("_", " ")),
                    compute=f"{var} = round(float({month}.max() / {month}.sum()), 4)",
                    result=f"{{{var!r}: {var}, {share!r}: {share}, 'peak_month_larger': bool({var} > {share})}}",
                    requires=(month, share),
                    writes=(Var(var, "scalar", info={"share": True}),),
                    slots={"share": {"var": var, "source": month}, "round": 4},
                    precision=4,
                    constraints=(share_check(w, var),),
                    context=w.say("share.context", p=4),
                )
            )
    return out


def subset_overlap(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, p, w = [], s.precision, s.writer
    subsets = sorted(n for n, v in fresh.items() if v.kind == "frame" and v.info.get("subset") and n != s.clean)
    for i, a in enumerate(subsets):
        for b in subsets[i + 1 :]:
            var = f"overlap_{a}_{b.removeprefix(s.fact + '_')}"
            if var in fresh:
                continue
            la, lb = fresh[a].info["label"], fresh[b].info["label"]
            out.append(
                Candidate(
                    kind="overlap",
                    question=w.say(
                        "overlap.question", fact_noun=s.fact_noun, left=la, right=lb, measure_noun=s.measure_noun
                    ),
                    label=w.say("overlap.label", left=la, right=lb),
                    compute=f"{var} = {a}.loc[{a}.index.intersection({b}.index)]\n"
                    f"{var}_total = round(float({var}[{s.measure!r}].sum()), {p})",
                    result=f"{{'{var}_count': int(len({var})), '{var}_total': {var}_total}}",
                    requires=(a, b),
                    writes=(Var(var, "frame"), Var(f"{var}_total", "scalar")),
                    slots={
                        "overlap": {"var": var, "left": a, "right": b},
                        "total": {"var": f"{var}_total", "source": var, "column": s.measure},
                        "agg": "sum",
                        "round": p,
                    },
                    precision=p,
                    context=w.say("overlap.context", fact_row=s.fact_noun[:-1], p=p),
                )
            )
    return out


def common_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, w = [], s.writer
    tops = sorted(n for n, v in fresh.items() if v.kind == "top")
    for i, a in enumerate(tops):
        for b in tops[i + 1 :]:
            var = f"common_{a}_{b}"
            if fresh[a].info["by"] != fresh[b].info["by"] or var in fresh:
                continue
            out.append(
                Candidate(
                    kind="common_top",
                    question=w.say(
                        "common_top.question",
                        by=fresh[a].info["by"],
                        left=a.replace("_", " "),
                        right=b.replace("_", " "),
                    ),
                    label=w.say("common_top.label", left=a.replace("_", " "), right=b.replace("_", " ")),
                    compute=f"{var} = sorted(set({a}.index) & set({b}.index))",
                    result=f"{{{var!r}: [str(k) for k in {var}]}}",
                    requires=(a, b),
                    writes=(Var(var, "scalar"),),
                    slots={"overlap": {"var": var, "left": a, "right": b}},
                    precision=None,
                    context=w.say("common_top.context"),
                )
            )
    return out


def mean_vs_median(s: Schema, fresh: Fresh) -> list[Candidate]:
    means = [n for n, v in fresh.items() if v.kind == "series" and v.info.get("agg") == "mean"]
    medians = [n for n, v in fresh.items() if v.kind == "series" and v.info.get("agg") == "median"]
    out, w = [], s.writer
    for a in means:
        for b in medians:
            var = f"mean_above_median_{ident(str(fresh[a].info['by']))}"
            if fresh[a].info["by"] != fresh[b].info["by"] or var in fresh:
                continue
            out.append(
                Candidate(
                    kind="mean_vs_median",
                    question=w.say("mean_vs_median.question", by=fresh[a].info["by"], measure_noun=s.measure_noun),
                    label=w.say("mean_vs_median.label", by=fresh[a].info["by"]),
                    compute=f"{var} = sorted(k for k in {a}.index if {a}[k] > {b}.get(k, float('inf')))\n"
                    f"{var}_gap = round(float(({a} - {b}).max()), {s.precision})",
                    result=f"{{{var!r}: [str(k) for k in {var}], '{var}_gap': {var}_gap}}",
                    requires=(a, b),
                    writes=(Var(var, "scalar"), Var(f"{var}_gap", "scalar")),
                    slots={"agg": "mean", "round": s.precision},
                    precision=s.precision,
                    context=w.say("mean_vs_median.context", p=s.precision),
                )
            )
    return out
