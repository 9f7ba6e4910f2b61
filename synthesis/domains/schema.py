"""What a turn template needs to know about a task's tables: the :class:`Schema` (one per generated task).

A domain generator builds the tables and a Schema naming the fact table, its measure (a derived column, possibly
from a rate or price parameter), the dirty category column and its canonical spellings, the date column, numeric
filter columns, an optional dimension table to join, and the revisions that can invalidate earlier results.
:mod:`synthesis.domains.chains` infers one from any CSV table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from synthesis.domains.wording import QuestionWriter, get_writer

REVISION_KINDS = ("param", "correction", "exclude")


@dataclass(frozen=True)
class FilterSpec:
    """A numeric column turns may filter on, with the thresholds questions use."""

    column: str = field(metadata={"help": "Column name in the fact table."})
    noun: str = field(metadata={"help": "How questions name the column, e.g. 'quantity'."})
    thresholds: tuple[float, ...] = field(metadata={"help": "Threshold values (distinct filters)."})
    op: str = field(default=">", metadata={"help": "'>' (strictly above) or '>=' (at least)."})

    def __post_init__(self) -> None:
        if self.op not in (">", ">="):
            raise ValueError(f"FilterSpec.op={self.op!r} is not supported; use '>' or '>='.")


@dataclass(frozen=True)
class Revision:
    """A revised assumption (invalidate turn): a new parameter value, a data-entry correction or an exclusion."""

    kind: str = field(metadata={"help": f"One of {', '.join(REVISION_KINDS)}."})
    context: str = field(metadata={"help": "The revision in words, as the worker reads it."})
    code: str = field(metadata={"help": "Statements that apply it to the fact table or the parameter variable."})
    slots: Mapping[str, Any] = field(metadata={"help": "Its slot: {'param'|'correction'|'exclude': {...}}."})
    check: tuple[str, str | None] | None = field(
        default=None, metadata={"help": "Optional public constraint (text, code) stating the revised fact."}
    )

    def __post_init__(self) -> None:
        if self.kind not in REVISION_KINDS:
            raise ValueError(f"Revision.kind={self.kind!r} is unknown; use one of {', '.join(REVISION_KINDS)}.")


@dataclass(frozen=True)
class Schema:
    """The facts about one task's tables that the turn templates are written against, and who words the turns."""

    domain: str
    title: str
    intro: str = field(metadata={"help": "First paragraph of description.md (what the data is)."})
    fact: str = field(metadata={"help": "Variable name of the fact table (also its file stem)."})
    fact_noun: str = field(metadata={"help": "Plural noun for its rows, e.g. 'orders'."})
    load_code: str = field(metadata={"help": "Statements that load the fact table into the variable `fact`."})
    measure: str = field(metadata={"help": "Numeric column the analysis aggregates."})
    measure_noun: str = field(metadata={"help": "How questions name the measure, e.g. 'revenue'."})
    category: str = field(metadata={"help": "Low-cardinality column to group by (may have dirty spellings)."})
    category_noun: str = field(metadata={"help": "How questions name a category value, e.g. 'region'."})
    derive_code: str = field(default="", metadata={"help": "Statements (re)computing the measure column."})
    derive_rule: tuple[str, str | None] | None = field(
        default=None, metadata={"help": "Public constraint (text, code) stating how the measure is derived."}
    )
    params: Mapping[str, float] = field(default_factory=dict, metadata={"help": "Parameter variables and values."})
    normalize: str = field(
        default="title",
        metadata={"help": "'title' (strip + title case + synonyms), 'strip', or 'band' (quartiles of band_of)."},
    )
    band_of: str | None = field(default=None, metadata={"help": "normalize 'band': the numeric column banded."})
    synonyms: Mapping[str, str] = field(default_factory=dict, metadata={"help": "Variant -> canonical spelling."})
    canonical: tuple[str, ...] = field(default=(), metadata={"help": "Canonical category values (empty: unchecked)."})
    date: str | None = field(default=None, metadata={"help": "Date column (parsed on load) or None."})
    filters: tuple[FilterSpec, ...] = field(default=(), metadata={"help": "Numeric filter columns."})
    precision: int = field(default=2, metadata={"help": "Decimals for the measure's numbers."})
    money: bool = field(default=False, metadata={"help": "Monthly totals are reported in thousands."})
    dim: str | None = field(default=None, metadata={"help": "Variable name (and file stem) of a dimension table."})
    dim_noun: str = field(default="", metadata={"help": "Plural noun for the dimension rows, e.g. 'stores'."})
    dim_load_code: str = field(default="", metadata={"help": "Statements that load and tidy the dimension table."})
    dim_key: str | None = field(default=None, metadata={"help": "Join key shared by fact and dimension."})
    dim_attr: str | None = field(default=None, metadata={"help": "Dimension column to group joined rows by."})
    dim_attr_noun: str = field(default="", metadata={"help": "How questions name dim_attr, e.g. 'store format'."})
    revisions: tuple[Revision, ...] = field(default=(), metadata={"help": "Revisions, used at most once each."})
    files: Mapping[str, str] = field(default_factory=dict, metadata={"help": "Table name -> 'data/<name>.csv'."})
    question_writer: str = field(
        default="a", metadata={"help": "Who words the turns (synthesis.domains.wording.QUESTION_WRITERS): a or b."}
    )

    def __post_init__(self) -> None:
        get_writer(self.question_writer)  # an unknown name fails here, listing the valid ones

    @property
    def writer(self) -> QuestionWriter:
        """The wording of this task's questions, contexts and constraint texts."""
        return get_writer(self.question_writer)

    @property
    def clean(self) -> str:
        """Variable name of the cleaned fact table."""
        return f"{self.fact}_clean"

    def clean_code(self) -> str:
        """Statements building the cleaned table: rows with a measure and a category, spellings normalised."""
        c, col = self.clean, self.category
        if self.normalize == "band":  # quartile bands of the column named in band_of (ties broken by row order)
            return (
                f"{c} = {self.fact}.dropna(subset=[{self.measure!r}, {self.band_of!r}]).copy()\n"
                f"{c}[{col!r}] = 'Q' + (pd.qcut({c}[{self.band_of!r}].rank(method='first'), 4, labels=False) + 1)"
                ".astype(str)"
            )
        lines = [f"{c} = {self.fact}.dropna(subset=[{self.measure!r}, {col!r}]).copy()"]
        if self.normalize == "title":
            lines.append(f"{c}[{col!r}] = {c}[{col!r}].str.strip().str.title().replace({dict(self.synonyms)!r})")
        else:
            lines.append(f"{c}[{col!r}] = {c}[{col!r}].astype(str).str.strip()")
        return "\n".join(lines)


def ident(name: str, fallback: str = "col") -> str:
    """A descriptive Python identifier from a column or file name (lower snake case, ASCII)."""
    text = re.sub(r"[^0-9a-zA-Z]+", "_", str(name)).strip("_").lower()
    if not text:
        return fallback
    if text[0].isdigit():
        text = f"{fallback}_{text}"
    return text[:32]


def number_tag(value: float) -> str:
    """A threshold as an identifier fragment: 10 -> '10', 2.5 -> '2p5', -3 -> 'm3'."""
    text = f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")
    return re.sub(r"[^0-9a-zA-Z]", "", text)
