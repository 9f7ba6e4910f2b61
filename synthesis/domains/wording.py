"""The question writers: two wordings of every question, context and constraint text the turn templates write.

Writer ``a`` is the wording the training data uses. Writer ``b`` states exactly the same requirements in other words
("the three largest" for "the top 3", "to two decimal places" for "to 2 decimals", "no less than 50" for "at least
50", "in units of 1,000" for "in thousands", "Starting from what turn 3 produced" for "Using the result of turn 3",
"has been revised to 0.08" for "is 0.08, not 0.05"), so that a held-out evaluation on writer b measures reading, not
template matching. The templates never branch on the writer: they format a phrase by key,
``writer.say("top_k.question", k=3, by="region", name="revenue sum by region")``. Every key exists in both writers;
a b phrase names the same facts as its a phrase, possibly in another form: ``{k_w}`` is ``k`` written as a word when
it is a whole number from 2 to 10 (else as digits), ``{x_cap}`` is the text ``x`` capitalised, ``{x_and}`` the list
``x`` as "2, 3 and 5" (``{x}`` of a list is "2, 3, 5").
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

QUESTION_WRITERS: tuple[str, ...] = ("a", "b")
"""The writer names a synthesis run can pick (``SynthesisConfig.question_writer``)."""

NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
"""Small whole numbers writer b spells out."""

FORM_SUFFIXES = ("_w", "_cap", "_and")
"""Suffixes of a fact's other forms (see the module docstring)."""


def number_words(value: Any) -> str:
    """``value`` as a word when it is a whole number from 2 to 10 ('three'), else as digits ('2.5', '50', '0')."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if float(value).is_integer() and int(value) in NUMBER_WORDS:
        return NUMBER_WORDS[int(value)]
    return f"{value:g}" if isinstance(value, float) else str(value)


def english_list(items: list[Any] | tuple[Any, ...]) -> str:
    """'2', '2 and 3', '2, 3 and 5'."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _forms(facts: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in facts.items():
        if isinstance(value, list | tuple):
            out[name], out[f"{name}_and"] = ", ".join(map(str, value)), english_list(value)
            continue
        out[name] = value
        if isinstance(value, str):
            out[f"{name}_cap"] = value[:1].upper() + value[1:]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{name}_w"] = number_words(value)
    return out


def phrase_fields(phrase: str) -> set[str]:
    """The facts a phrase names, each in its base form (``k_w`` -> ``k``)."""
    names = set()
    for _, name, _, _ in string.Formatter().parse(phrase):
        if name:
            suffix = next((s for s in FORM_SUFFIXES if name.endswith(s)), "")
            names.add(name.removesuffix(suffix) if suffix else name)
    return names


@dataclass(frozen=True)
class QuestionWriter:
    """One wording of every template text: ``phrases`` maps a key to a ``str.format`` pattern over named facts."""

    name: str = field(metadata={"help": f"One of {', '.join(QUESTION_WRITERS)}."})
    phrases: Mapping[str, str] = field(repr=False, metadata={"help": "Phrase key -> str.format pattern."})

    def say(self, key: str, /, **facts: Any) -> str:
        """The phrase ``key`` with ``facts`` filled in (and their other forms: ``_w``, ``_cap``, ``_and``)."""
        try:
            pattern = self.phrases[key]
        except KeyError:
            raise KeyError(f"writer {self.name} has no phrase {key!r}; add it to both writers.") from None
        return pattern.format(**_forms(facts))


# Writer a: the wording of the training data. Changing one byte here changes every synthesized task.
PHRASES_A: dict[str, str] = {
    # opening turns
    "load.question": "Load {file}. How many {fact_noun} are there, and what is the total {measure_noun}?",
    "load.label": "the number of {fact_noun} and the total {measure_noun}",
    "load.round_money": "Round money to {p} decimals.",
    "load.round_totals": "Round totals to {p} decimals.",
    "derive.rule": "{text}",
    "clean.question": "Clean the data: how many {fact_noun} remain, how many were dropped, and which {category_noun} "
    "values are there?",
    "clean.label": "the cleaned {fact_noun}",
    "clean.canonical": "After cleaning, {category} takes only the values {values}.",
    "clean.band": "Add the column {category}: quartile band Q1-Q4 of {band_of} (Q1 lowest; pd.qcut of "
    "{band_of}.rank(method='first') into {bins} bins).",
    "clean.title": "{category_noun_cap} names have inconsistent case, stray spaces and synonyms ({synonyms}); "
    "normalise them to title case.",
    "clean.strip": "Strip stray spaces from {category}.",
    "clean.context": "Drop {fact_noun} with no {measure_noun} or no {missing}. {spelling}",
    # rounding and shares shared by several templates
    "rounded.check": "Round every value to {p} decimals.",
    "round.context": "Round to {p} decimals.",
    "share.check": "Shares are fractions in [0, 1] (not percentages), rounded to {p} decimals.",
    "share.context": "Shares are fractions between 0 and 1, rounded to {p} decimals.",
    # single-input templates
    "agg.sum": "total",
    "agg.mean": "mean",
    "agg.median": "median",
    "group_agg.question": "What is the {agg} {measure_noun} per {category_noun}?",
    "group_agg.label": "the {agg} {measure_noun} per {category_noun}",
    "group_agg.context": "Use the cleaned {fact_noun}. Round to {p} decimals.",
    "op.>": "above",
    "op.>=": "at least",
    "filter.condition": "{noun} {op} {value:g}",
    "filter.subset": "{fact_noun} with {condition}",
    "filter.question": "How many {fact_noun} have {condition}, and what is their total {measure_noun}?",
    "filter.label": "the count and total {measure_noun} of {fact_noun} with {condition}",
    "filter.context": "Use the cleaned {fact_noun}; '{op}' means {sign}. Round to {p} decimals.",
    "subset_sum.question": "For {subset}, what is the total {measure_noun} per {by}?",
    "subset_sum.label": "the total {measure_noun} per {by} of {subset}",
    "top_k.question": "Which {k} {by} values have the highest {name}, in descending order?",
    "top_k.label": "the top {k} of {name}",
    "top_k.context": "List them from the largest down.",
    "share.question": "Which {by} value has the largest {name}, and what share of the total does it hold?",
    "share.label": "the largest share of {name}",
    "monthly.question": "What is the total {measure_noun} per month?",
    "monthly.question_scaled": "What is the total {measure_noun} per month (in thousands)?",
    "monthly.label": "the monthly {measure_noun}",
    "monthly.context": "Parse {date} as dates; months are calendar months ('YYYY-MM'). Round to {p} decimals.",
    "monthly.scaled": "Amounts in thousands (divide by {factor}). ",
    "monthly.check": "Monthly amounts are in thousands.",
    "peak.question": "Which month had the highest {name}, and what was the change from the first to the last month?",
    "peak.label": "the peak month of {name}",
    "peak.context": "Change = last month minus first month.",
    "missing.question": "Before cleaning, which columns of the {fact_noun} have missing values, and how many each?",
    "missing.label": "the missing values per column of the {fact_noun}",
    "missing.context": "Count NaN cells per column; list only columns that have some.",
    "outliers.question": "Using the IQR rule, how many {fact_noun} are high outliers in {noun}, and what is the "
    "limit?",
    "outliers.label": "the high outliers in {noun}",
    "outliers.context": "High outlier: value > Q3 + {k} * (Q3 - Q1) (pandas default quantiles). Round the limit to "
    "{p} decimals.",
    "load_dim.question": "Load {file}. How many {dim_noun} are there per {attr_noun}?",
    "load_dim.label": "the {dim_noun} per {attr_noun}",
    "load_dim.context": "{attr_noun_cap} values have stray spaces and mixed case; normalise them to title case.",
    # two-input templates
    "join.question": "Join the cleaned {fact_noun} with the {dim_noun} on {key}, keeping every {fact_one}. What is "
    "the total {measure_noun} per {attr_noun}, and how many {fact_noun} have no match?",
    "join.label": "the total {measure_noun} per {attr_noun}",
    "join.check": "A left join keeps every cleaned {fact_row} row.",
    "join.context": "Left join; unmatched {fact_noun} keep NaN in {attr}. Round to {p} decimals.",
    "subset_join.context": "Join on {key} (left join). Round to {p} decimals.",
    "share_in_top.question": "What share of the {measure_noun} of {subset} comes from the {category_noun} values in "
    "{top}?",
    "share_in_top.label": "the share of {subset} in {top}",
    "fraction.question": "For each {by} value, what fraction of its {measure_noun} comes from {subset}?",
    "fraction.label": "the fraction per {by} from {subset}",
    "fraction.check": "Fractions are in [0, 1], rounded to {p} decimals.",
    "fraction.context": "Fractions between 0 and 1 (0 where none), rounded to {p} decimals.",
    "peak_vs_share.question": "Is the busiest month's share of the {month} total larger than {share}? Report both "
    "shares.",
    "peak_vs_share.label": "the busiest month's share against {share}",
    "overlap.question": "How many {fact_noun} are both {left} and {right}, and what is their total {measure_noun}?",
    "overlap.label": "the overlap of {left} and {right}",
    "overlap.context": "Rows are the same {fact_row} when they have the same row label. Round to {p} decimals.",
    "common_top.question": "Which {by} values appear in both {left} and {right}?",
    "common_top.label": "the values common to {left} and {right}",
    "common_top.context": "List them in alphabetical order.",
    "mean_vs_median.question": "For which {by} values is the mean {measure_noun} above the median (a right-skewed "
    "distribution), and by how much at most?",
    "mean_vs_median.label": "the {by} values whose mean exceeds the median",
    "mean_vs_median.context": "Compare the rounded values of both turns. Round the gap to {p} decimals.",
    # how a question names the turns it builds on (read back by harness.manager.relations.infer_relations)
    "lead.progress": "Using the result of turn {turn}: {question}",
    "lead.branch": "Go back to the result of turn {turn} (not the turns after it). {question}",
    "lead.combine": "Using the results of turns {turns}: {question}",
    "lead.revised_data": "{question} Use the current (revised) data.",
    "invalidate.item": "{label} (turn {turn})",
    "invalidate.question": "With this revision, what are {targets} now?",
    "invalidate.context": "{revision} Earlier results that used the old figures are stale; recompute them.",
    # revisions
    "revision.param": "Revised assumption: {param} is {new!r}, not {old!r} ({why}).",
    "revision.param_check": "{param} is {new!r}.",
    "revision.correction": "Correction: {column} = {old!r} for {id_col} {key} is a data-entry error; the true value "
    "is {new!r}.",
    "revision.correction_check": "{column} of {id_col} {key} is {new!r}.",
    "revision.exclude": "{reason} Exclude every row with {column} {value}.",
    "revision.exclude_check": "No row has {column} {value}.",
    "revision.row_correction": "Correction: {column} = {old!r} in data row {row} (0-based, as read by pd.read_csv) is "
    "a data-entry error, ten times too large; the true value is {new!r}.",
    "revision.row_correction_check": "{column} of row {row} is {new!r}.",
    "revision.value_exclude": "The rows with {column} = {value!r} are test records and must be excluded.",
    "revision.value_exclude_check": "No row has {column} = {value!r}.",
}

# Writer b: the same requirements in other words (held-out evaluation).
PHRASES_B: dict[str, str] = {
    "load.question": "Read {file}. Count the {fact_noun} and give the overall sum of {measure_noun}.",
    "load.label": "the {fact_noun} count and the overall {measure_noun}",
    "load.round_money": "Give money amounts to {p_w} decimal places.",
    "load.round_totals": "Give sums to {p_w} decimal places.",
    "derive.rule": "{measure_cap} = {formula}, where {param} is {value!r}.",
    "clean.question": "After cleaning, report how many {fact_noun} are left, how many were removed, and the distinct "
    "{category_noun} values.",
    "clean.label": "the cleaned-up {fact_noun}",
    "clean.canonical": "Once cleaned, the only {category} values are {values}.",
    "clean.band": "Create {category} as the quartile band of {band_of}, Q1 (lowest) to Q4: pd.qcut of "
    "{band_of}.rank(method='first') into {bins_w} bins.",
    "clean.title": "Some {category_noun} names differ only in case, carry extra spaces or use synonyms ({synonyms}); "
    "map them to the canonical names in title case.",
    "clean.strip": "Trim leading and trailing spaces from {category}.",
    "clean.context": "Remove {fact_noun} whose {measure_noun} or {missing} is missing. {spelling}",
    "rounded.check": "Every value is rounded to {p_w} decimal places.",
    "round.context": "Give values to {p_w} decimal places.",
    "share.check": "Each share is a proportion between 0 and 1, not a percentage, rounded to {p} d.p.",
    "share.context": "Give shares as proportions from 0 to 1, rounded to {p} d.p.",
    "agg.sum": "summed",
    "agg.mean": "average",
    "agg.median": "median",
    "group_agg.question": "For each {category_noun}, what is the {agg} {measure_noun}?",
    "group_agg.label": "the {agg} {measure_noun} for each {category_noun}",
    "group_agg.context": "Work from the cleaned {fact_noun} and give values to {p_w} decimal places.",
    "op.>": "greater than",
    "op.>=": "no less than",
    "filter.condition": "{noun} {op} {value_w}",
    "filter.subset": "{fact_noun} with {condition}",
    "filter.question": "Count the {fact_noun} with {condition} and give the sum of their {measure_noun}.",
    "filter.label": "the number of {fact_noun} with {condition} and the sum of their {measure_noun}",
    "filter.context": "Start from the cleaned {fact_noun}; '{op}' means {sign}. Give amounts to {p_w} decimal places.",
    "subset_sum.question": "Break the {measure_noun} of {subset} down by {by}: what is the sum for each?",
    "subset_sum.label": "the summed {measure_noun} of {subset} for each {by}",
    "top_k.question": "Name the {k_w} largest {by} values by {name}, biggest first.",
    "top_k.label": "the {k_w} largest values of {name}",
    "top_k.context": "Sort them from largest to smallest.",
    "share.question": "Which {by} value leads on {name}, and what proportion of the overall sum does it account for?",
    "share.label": "the leading proportion of {name}",
    "monthly.question": "What is the summed {measure_noun} for each calendar month?",
    "monthly.question_scaled": "What is the summed {measure_noun} for each calendar month, in units of 1,000?",
    "monthly.label": "the {measure_noun} for each calendar month",
    "monthly.context": "Read {date} as dates and label each calendar month 'YYYY-MM'. Give values to {p_w} decimal "
    "places.",
    "monthly.scaled": "Report amounts in units of 1,000 (value / {factor}). ",
    "monthly.check": "Each month's amount is expressed in units of 1,000.",
    "peak.question": "In which month did {name} reach its maximum, and by how much did it change between the first "
    "month and the last?",
    "peak.label": "the month with the maximum {name}",
    "peak.context": "The change is the last month's value minus the first month's.",
    "missing.question": "In the raw {fact_noun}, before any cleaning, how many values are missing in each column that "
    "has gaps?",
    "missing.label": "the count of missing values in each column of the {fact_noun}",
    "missing.context": "Count the NaN cells of each column and leave out columns without any.",
    "outliers.question": "By the interquartile-range rule, how many {fact_noun} have an unusually high {noun}, and "
    "where is the cut-off?",
    "outliers.label": "the unusually high values of {noun}",
    "outliers.context": "A value is a high outlier when it exceeds Q3 + {k} * IQR, with IQR = Q3 - Q1 (pandas' "
    "default quantiles). Give the cut-off to {p_w} decimal places.",
    "load_dim.question": "Read {file} and count the {dim_noun} for each {attr_noun}.",
    "load_dim.label": "the number of {dim_noun} for each {attr_noun}",
    "load_dim.context": "Tidy the {attr_noun} values: trim extra spaces and put them in title case.",
    "join.question": "Merge the {dim_noun} onto the cleaned {fact_noun} by {key} without losing any {fact_one}. Give "
    "the summed {measure_noun} for each {attr_noun} and the number of {fact_noun} that find no match.",
    "join.label": "the summed {measure_noun} for each {attr_noun}",
    "join.check": "Each cleaned {fact_row} row appears exactly once after the merge.",
    "join.context": "Use a left merge (unmatched {fact_noun} get NaN in {attr}). Give values to {p_w} decimal places.",
    "subset_join.context": "Merge on {key}, keeping unmatched rows (a left merge). Give values to {p_w} decimal "
    "places.",
    "share_in_top.question": "Of the {measure_noun} of {subset}, what proportion is due to the {category_noun} values "
    "listed in {top}?",
    "share_in_top.label": "the proportion of {subset} due to {top}",
    "fraction.question": "What proportion of each {by} value's {measure_noun} is due to {subset}?",
    "fraction.label": "the proportion due to {subset} for each {by}",
    "fraction.check": "Every proportion lies between 0 and 1 and is rounded to {p} d.p.",
    "fraction.context": "Proportions from 0 to 1 (use 0 where there is none), rounded to {p} d.p.",
    "peak_vs_share.question": "Does the busiest month account for a bigger part of the {month} total than {share}? "
    "Give both shares.",
    "peak_vs_share.label": "the busiest month's part compared with {share}",
    "overlap.question": "Count the {fact_noun} that are {left} and also {right}, and give the sum of their "
    "{measure_noun}.",
    "overlap.label": "the rows common to {left} and {right}",
    "overlap.context": "Two rows are the same {fact_row} if they share a row label. Give values to {p_w} decimal "
    "places.",
    "common_top.question": "Which {by} values are in {left} as well as in {right}?",
    "common_top.label": "the values found in both {left} and {right}",
    "common_top.context": "Sort them alphabetically.",
    "mean_vs_median.question": "Which {by} values have an average {measure_noun} greater than their median (right "
    "skew), and what is the largest gap?",
    "mean_vs_median.label": "the {by} values with an average above the median",
    "mean_vs_median.context": "Compare the rounded values from both turns and give the gap to {p_w} decimal places.",
    "lead.progress": "Starting from what turn {turn} produced: {question}",
    "lead.branch": "Return to what turn {turn} produced, setting aside the turns after it. {question}",
    "lead.combine": "Combining what turns {turns_and} produced: {question}",
    "lead.revised_data": "{question} Work from the latest, revised data.",
    "invalidate.item": "{label} (from turn {turn})",
    "invalidate.question": "After this update, report {targets} again.",
    "invalidate.context": "{revision} Anything computed from the old figures is out of date and has to be redone.",
    "revision.param": "Update: {param} has been revised to {new!r} (it was {old!r}; {why}).",
    "revision.param_check": "{param} now equals {new!r}.",
    "revision.correction": "Data-entry fix: the {column} of {id_col} {key} was keyed in as {old!r}; it should be "
    "{new!r}.",
    "revision.correction_check": "The {column} of {id_col} {key} equals {new!r}.",
    "revision.exclude": "{reason} Leave out all rows whose {column} is {value}.",
    "revision.exclude_check": "{column} {value} appears in no remaining row.",
    "revision.row_correction": "Data-entry fix: data row {row} (0-based, as pd.read_csv reads it) has {column} = "
    "{old!r}, ten times too large; it should be {new!r}.",
    "revision.row_correction_check": "Row {row}'s {column} equals {new!r}.",
    "revision.value_exclude": "Rows whose {column} is {value!r} are test records; leave them out.",
    "revision.value_exclude_check": "No remaining row has {column} equal to {value!r}.",
}

WRITERS: dict[str, QuestionWriter] = {"a": QuestionWriter("a", PHRASES_A), "b": QuestionWriter("b", PHRASES_B)}
"""Writer name -> its wording."""


def get_writer(name: str) -> QuestionWriter:
    """The writer called ``name``; ValueError listing the valid names otherwise."""
    try:
        return WRITERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"question_writer={name!r} is unknown; use one of {', '.join(QUESTION_WRITERS)} (a: the training "
            "wording, b: the same requirements in other words)."
        ) from None
