"""Question chains over any CSV table (DABench tables, imported tables): :func:`generate_chain_over_table`.

Column types drive the turns: a non-negative numeric column is the measure; a low-cardinality column (text with 2-30
values, or integers with 2-12) is the category to group by; other numeric columns (and the measure) give filters with
thresholds at their median and upper quartile; a text column that parses as dates over 2-60 months gives monthly
turns. Revisions (invalidate turns): the two largest measure values are declared data-entry errors (ten times too
large), and the rows of the rarest category are excluded. The same composer as the synthetic domains builds the graph.
"""

from __future__ import annotations

import keyword
import random
import re
import warnings
from pathlib import Path

import pandas as pd

from synthesis.domains.base import TaskSpec, check_n_turns
from synthesis.domains.compose import compose_task
from synthesis.domains.schema import FilterSpec, Revision, Schema, ident
from synthesis.domains.wording import get_writer

RESERVED = {"pd", "np", "result", "print_result", "BASE_PATH", "DATA_DIR", "WORK_DIR"}


def _table_name(path: Path) -> str:
    name = ident(path.stem, "table")
    return name if name.isidentifier() and not keyword.iskeyword(name) and name not in RESERVED else "table"


def _numeric_columns(df: pd.DataFrame) -> list[str]:
    out = []
    for col in df.columns:
        series = df[col]
        if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            continue
        if series.notna().sum() < 20 or series.nunique() < 10:
            continue
        if pd.api.types.is_integer_dtype(series) and series.is_unique and series.is_monotonic_increasing:
            continue  # a row id
        out.append(col)
    return out


def _category_columns(df: pd.DataFrame) -> list[str]:
    out = []
    for col in df.columns:
        series = df[col].dropna()
        if series.empty:
            continue
        if series.dtype == object:
            n = series.astype(str).str.strip().nunique()
            if 2 <= n <= 30:
                out.append(col)
        elif pd.api.types.is_integer_dtype(series) and 2 <= series.nunique() <= 12:
            out.append(col)
    return out


def _date_column(df: pd.DataFrame, exclude: set[str]) -> str | None:
    for col in df.columns:
        if col in exclude or df[col].dtype != object:
            continue
        sample = df[col].dropna().astype(str).head(200)
        if sample.empty or not sample.str.contains(r"\d{1,4}[-/.]\d{1,2}", regex=True).all():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = pd.to_datetime(df[col], errors="coerce", format="mixed")
        if parsed.notna().mean() < 0.9:
            continue
        months = (parsed.max().year - parsed.min().year) * 12 + parsed.max().month - parsed.min().month + 1
        if 2 <= months <= 60:
            return col
    return None


def _threshold(values: pd.Series, q: float) -> float:
    value = float(values.quantile(q))
    return float(round(value)) if pd.api.types.is_integer_dtype(values) else round(value, 2)


def infer_schema(df: pd.DataFrame, name: str, source: str, rng: random.Random, question_writer: str = "a") -> Schema:
    """The Schema of a chain over ``df`` (see the module docstring), worded by ``question_writer``. ValueError when
    the table cannot carry one."""
    w = get_writer(question_writer)
    numeric = _numeric_columns(df)
    measures = [c for c in numeric if df[c].min() >= 0 and df[c].sum() > 0]
    categories = _category_columns(df)
    band_of = None
    if measures and not categories:  # no natural category: quartile bands of another numeric column
        band_of = rng.choice([c for c in numeric if c not in measures[:1]] or numeric)
        categories = [f"{ident(band_of)}_band"]
    if not measures or not categories:
        raise ValueError(
            f"{source}: a question chain needs a non-negative numeric column with >= 10 distinct values "
            f"(found {measures or 'none'}) and a column with 2-30 categories (found {categories or 'none'}); "
            "pick another table."
        )
    measure = rng.choice(measures)
    category = rng.choice([c for c in categories if c != measure] or categories)
    clean = df.dropna(subset=[measure, band_of or category]).copy()
    if band_of:
        ranks = clean[band_of].rank(method="first")
        clean[category] = "Q" + (pd.qcut(ranks, 4, labels=False) + 1).astype(str)
    else:
        clean[category] = clean[category].astype(str).str.strip()
    filters = []
    for col in [c for c in numeric if c not in (measure, category, band_of)][:2] + [measure]:
        thresholds = tuple(
            dict.fromkeys(t for q in (0.5, 0.75) if (clean[col] > (t := _threshold(clean[col], q))).sum() >= 5)
        )
        if thresholds:
            filters.append(FilterSpec(col, col.replace("_", " "), thresholds))
    date = _date_column(df, {measure, category})
    load = f"{name} = pd.read_csv(f'{{BASE_PATH}}/data/{name}.csv')"
    counts = clean[category].value_counts()
    rare = sorted(counts[counts == counts.min()].index)[0]
    revisions = []
    kept = (
        clean[clean[category] != rare] if len(counts) > 2 and not band_of else clean
    )  # corrections survive the exclusion
    largest = kept[measure].sort_values(ascending=False, kind="stable").index[:2]
    integer = pd.api.types.is_integer_dtype(df[measure])
    for label in largest:
        old = df.at[label, measure].item()
        new = int(round(old / 10)) if integer else round(old / 10, 4)
        where = f"{name}.loc[{int(label)}, {measure!r}]"
        revisions.append(
            Revision(
                kind="correction",
                context=w.say("revision.row_correction", column=measure, old=old, row=int(label), new=new),
                code=f"{where} = {new!r}",
                slots={
                    "correction": {
                        "var": name,
                        "column": measure,
                        "key_column": None,
                        "key": int(label),
                        "old": old,
                        "new": new,
                    }
                },
                check=(
                    w.say("revision.row_correction_check", column=measure, row=int(label), new=new),
                    f"assert float({where}) == {new!r}",
                ),
            )
        )
    if len(counts) > 2 and not band_of:
        stripped = f"{name}[{category!r}].astype(str).str.strip()"
        revisions.append(
            Revision(
                kind="exclude",
                context=w.say("revision.value_exclude", column=category, value=rare),
                code=f"{name} = {name}[{stripped} != {rare!r}].copy()",
                slots={"exclude": {"var": name, "column": category, "value": rare}},
                check=(
                    w.say("revision.value_exclude_check", column=category, value=rare),
                    f"assert ({stripped} != {rare!r}).all()",
                ),
            )
        )
    small = float(clean[measure].abs().median()) < 1
    return Schema(
        domain="table",
        title=f"Analysis of {Path(source).name}",
        intro=f"The table `data/{name}.csv` ({len(df)} rows; columns: {', '.join(map(str, df.columns))}).",
        fact=name,
        fact_noun="rows",
        load_code=load,
        measure=measure,
        measure_noun=str(measure),
        category=category,
        category_noun=str(category),
        normalize="band" if band_of else "strip",
        band_of=band_of,
        date=date,
        filters=tuple(filters),
        precision=4 if small else 2,
        revisions=tuple(revisions),
        files={name: f"data/{name}.csv"},
        question_writer=question_writer,
    )


def generate_chain_over_table(
    csv_path: str | Path, seed: int, n_turns: int, task_id: str | None = None, *, question_writer: str = "a"
) -> TaskSpec:
    """A seeded question chain of ``n_turns`` (6..30) turns over the CSV table ``csv_path``, worded by
    ``question_writer`` (:data:`synthesis.domains.wording.QUESTION_WRITERS`; the writers differ in words only).

    The table is written unchanged in content (re-serialised by pandas) as ``public/data/<name>.csv``; ``task_id``
    defaults to ``chain-<name>-<seed>-<n_turns>``. Raises ValueError when the file is missing, n_turns is out of
    range, or the table has no usable measure or category column (the message names the file and what is missing).
    """
    check_n_turns(n_turns)
    path = Path(csv_path)
    if not path.is_file():
        raise ValueError(f"{path}: no such CSV file; pass the path of a table.")
    df = pd.read_csv(path)
    name = _table_name(path)
    task_id = task_id or re.sub(r"[^0-9A-Za-z._-]", "-", f"chain-{name}-{seed}-{n_turns}")
    rng = random.Random(f"{path.name}:{seed}")
    schema = infer_schema(df, name, str(path), rng, question_writer)
    return compose_task(schema, {name: df}, task_id=task_id, seed=seed, n_turns=n_turns)
