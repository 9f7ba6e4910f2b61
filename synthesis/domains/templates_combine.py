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
    if var in fresh:
        return []
    compute = (
        f"{merged} = {s.clean}.merge({s.dim}[[{s.dim_key!r}, {s.dim_attr!r}]], on={s.dim_key!r}, how='left')\n"
        f"{var} = {merged}.groupby({s.dim_attr!r})[{s.measure!r}].sum().round({p})"
    )
    return [
        Candidate(
            kind="join",
            question=f"Join the cleaned {s.fact_noun} with the {s.dim_noun} on {s.dim_key}, keeping every "
            f"{s.fact_noun[:-1] if s.fact_noun.endswith('s') else s.fact_noun}. What is the total {s.measure_noun} "
            f"per {s.dim_attr_noun}, and how many {s.fact_noun} have no match?",
            label=f"the total {s.measure_noun} per {s.dim_attr_noun}",
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
                    f"A left join keeps every cleaned {s.fact_noun[:-1]} row.",
                    f"assert len({merged}) == len({s.clean})",
                ),
            ),
            context=f"Left join; unmatched {s.fact_noun} keep NaN in {s.dim_attr}. Round to {p} decimals.",
        )
    ]


def subset_by_attr(s: Schema, fresh: Fresh) -> list[Candidate]:
    if not s.dim or s.dim not in fresh:
        return []
    out, p = [], s.precision
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
                question=f"For {v.info['label']}, what is the total {s.measure_noun} per {s.dim_attr_noun}?",
                label=f"the total {s.measure_noun} per {s.dim_attr_noun} of {v.info['label']}",
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
                constraints=(rounded_check(var, p),),
                context=f"Join on {s.dim_key} (left join). Round to {p} decimals.",
            )
        )
    return out


def subset_share_in_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
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
                    question=f"What share of the {s.measure_noun} of {fresh[sub].info['label']} comes from the "
                    f"{s.category_noun} values in {top.replace('_', ' ')}?",
                    label=f"the share of {fresh[sub].info['label']} in {top.replace('_', ' ')}",
                    compute=compute,
                    result=f"{{{var!r}: {var}}}",
                    requires=(top, sub),
                    writes=(Var(var, "scalar", info={"share": True}),),
                    slots={"share": {"var": var, "source": sub}, "round": 4},
                    precision=4,
                    constraints=(share_check(var),),
                    context="Shares are fractions between 0 and 1, rounded to 4 decimals.",
                )
            )
    return out


def subset_fraction(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
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
            out.append(
                Candidate(
                    kind="fraction",
                    question=f"For each {fresh[part].info['by']} value, what fraction of its {s.measure_noun} comes "
                    f"from {fresh[fresh[part].info['subset']].info['label']}?",
                    label=f"the fraction per {fresh[part].info['by']} from "
                    f"{fresh[fresh[part].info['subset']].info['label']}",
                    compute=f"{var} = ({part} / {total}).fillna(0).round(4)",
                    result=f"{{{var!r}: {series_dict(var)}}}",
                    requires=(part, total),
                    writes=(Var(var, "scalar"),),
                    slots={"share": {"var": var, "source": total}, "round": 4},
                    precision=4,
                    constraints=(
                        (
                            "Fractions are in [0, 1], rounded to 4 decimals.",
                            f"assert ((({var}) >= 0) & (({var}) <= 1)).all()",
                        ),
                    ),
                    context="Fractions between 0 and 1 (0 where none), rounded to 4 decimals.",
                )
            )
    return out


def peak_vs_share(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
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
                    question=f"Is the busiest month's share of the {month.replace('_', ' ')} total larger than "
                    f"{share.replace('_', ' ')}? Report both shares.",
                    label=f"the busiest month's share against {share.replace('_', ' ')}",
                    compute=f"{var} = round(float({month}.max() / {month}.sum()), 4)",
                    result=f"{{{var!r}: {var}, {share!r}: {share}, 'peak_month_larger': bool({var} > {share})}}",
                    requires=(month, share),
                    writes=(Var(var, "scalar", info={"share": True}),),
                    slots={"share": {"var": var, "source": month}, "round": 4},
                    precision=4,
                    constraints=(share_check(var),),
                    context="Shares are fractions between 0 and 1, rounded to 4 decimals.",
                )
            )
    return out


def subset_overlap(s: Schema, fresh: Fresh) -> list[Candidate]:
    out, p = [], s.precision
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
                    question=f"How many {s.fact_noun} are both {la} and {lb}, and what is their total "
                    f"{s.measure_noun}?",
                    label=f"the overlap of {la} and {lb}",
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
                    context=f"Rows are the same {s.fact_noun[:-1]} when they have the same row label. Round to {p} "
                    "decimals.",
                )
            )
    return out


def common_top(s: Schema, fresh: Fresh) -> list[Candidate]:
    out = []
    tops = sorted(n for n, v in fresh.items() if v.kind == "top")
    for i, a in enumerate(tops):
        for b in tops[i + 1 :]:
            var = f"common_{a}_{b}"
            if fresh[a].info["by"] != fresh[b].info["by"] or var in fresh:
                continue
            out.append(
                Candidate(
                    kind="common_top",
                    question=f"Which {fresh[a].info['by']} values appear in both {a.replace('_', ' ')} and "
                    f"{b.replace('_', ' ')}?",
                    label=f"the values common to {a.replace('_', ' ')} and {b.replace('_', ' ')}",
                    compute=f"{var} = sorted(set({a}.index) & set({b}.index))",
                    result=f"{{{var!r}: [str(k) for k in {var}]}}",
                    requires=(a, b),
                    writes=(Var(var, "scalar"),),
                    slots={"overlap": {"var": var, "left": a, "right": b}},
                    precision=None,
                    context="List them in alphabetical order.",
                )
            )
    return out


def mean_vs_median(s: Schema, fresh: Fresh) -> list[Candidate]:
    means = [n for n, v in fresh.items() if v.kind == "series" and v.info.get("agg") == "mean"]
    medians = [n for n, v in fresh.items() if v.kind == "series" and v.info.get("agg") == "median"]
    out = []
    for a in means:
        for b in medians:
            var = f"mean_above_median_{ident(str(fresh[a].info['by']))}"
            if fresh[a].info["by"] != fresh[b].info["by"] or var in fresh:
                continue
            out.append(
                Candidate(
                    kind="mean_vs_median",
                    question=f"For which {fresh[a].info['by']} values is the mean {s.measure_noun} above the median "
                    "(a right-skewed distribution), and by how much at most?",
                    label=f"the {fresh[a].info['by']} values whose mean exceeds the median",
                    compute=f"{var} = sorted(k for k in {a}.index if {a}[k] > {b}.get(k, float('inf')))\n"
                    f"{var}_gap = round(float(({a} - {b}).max()), {s.precision})",
                    result=f"{{{var!r}: [str(k) for k in {var}], '{var}_gap': {var}_gap}}",
                    requires=(a, b),
                    writes=(Var(var, "scalar"), Var(f"{var}_gap", "scalar")),
                    slots={"agg": "mean", "round": s.precision},
                    precision=s.precision,
                    context=f"Compare the rounded values of both turns. Round the gap to {s.precision} decimals.",
                )
            )
    return out
