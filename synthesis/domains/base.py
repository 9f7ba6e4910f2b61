"""The task specs every generator produces, the synthesis error, and the slot vocabulary.

A :class:`TaskSpec` is a relation-graph task before it is written to disk: seeded tables plus a tuple of
:class:`TurnSpec` whose reference code is executed by :func:`synthesis.domains.writer.write_task_folder` to fill the
answers. Generators live in the domain modules (:data:`synthesis.domains.registry.DOMAINS` maps a name to one);
:func:`synthesis.domains.registry.generate_task` is the single entry point.

Relations (as in ``harness.tasks``): ``init`` (no dependency; loads a table), ``progress`` (builds on the previous
turn), ``branch`` (an alternative path from an earlier, non-adjacent turn), ``invalidate`` (a revised assumption — a
rate, price or cost changes, or a data-entry error is corrected — whose code recomputes every variable it affects;
earlier values of the variables it does not recompute are stale and no later turn uses them), ``combine`` (uses two or
more earlier results).

Slot keys (``TurnSpec.slots``: the semantic facts of a turn that a fault may perturb; every ``var`` names a variable
in ``TurnSpec.writes``)::

    "filter":     {"var": str, "source": str, "column": str, "op": ">" | ">=" | "<" | "<=", "value": float}
    "agg":        "sum" | "mean" | "median" | "count"            (the aggregation of the turn's grouped values)
    "groupby":    {"var": str, "source": str, "by": str, "column": str}   (grouped variable, its input, key, values)
    "round":      int                                             (decimals the turn's numbers are rounded to)
    "sort":       {"var": str, "source": str, "ascending": bool, "k": int}   (top-k over a series)
    "join":       {"var": str, "left": str, "right": str, "on": str, "how": "left" | "inner"}
    "unit":       {"var": str, "factor": int, "source"?: str, "column"?: str}
                  (values divided by factor: 1000 = in thousands; of source's column unless the var is resampled)
    "dropna":     {"var": str, "source": str, "subset": [str, ...]}   (rows with NaN in subset dropped)
    "normalize":  {"var": str, "column": str, "synonyms": {variant: canonical}}   (category spelling clean-up)
    "resample":   {"var": str, "source": str, "column": str, "measure": str, "rule": "MS"}
                  (monthly totals of measure by the date column)
    "total":      {"var": str, "source": str, "column": str}       (the agg of a column of a row subset, rounded)
    "share":      {"var": str, "source": str}                     (a fraction in [0, 1] of the source's total)
    "outlier":    {"var": str, "source": str, "column": str, "k": float}     (IQR rule: > Q3 + k * IQR)
    "overlap":    {"var": str, "left": str, "right": str}          (rows / values common to two earlier results)
    "missing":    {"var": str, "source": str}                      (NaN count per column of the source)
    "param":      {"var": str, "old": float, "new": float}         (invalidate: a revised rate/price/cost)
    "correction": {"var": str, "column": str, "key_column": str | None, "key": Any, "old": Any, "new": Any}
                  (invalidate: a data-entry correction; key_column None means the row label)
    "exclude":    {"var": str, "column": str, "value": str}        (invalidate: rows with that value removed)
    "recompute":  [str, ...]                                       (invalidate: variables its code recomputes)
    "stale":      [str, ...]                                       (invalidate: earlier variables now stale)
    "inputs":     [str, ...]                                       (variables of earlier turns the code reads)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

RELATIONS: tuple[str, ...] = ("init", "progress", "branch", "invalidate", "combine")
SLOT_KEYS: tuple[str, ...] = (
    "filter", "total", "agg", "groupby", "round", "sort", "join", "unit", "dropna", "normalize", "resample", "share",
    "outlier", "overlap", "missing", "param", "correction", "exclude", "recompute", "stale", "inputs",
)  # fmt: skip
"""Every key a TurnSpec.slots mapping may use (documented in the module docstring)."""
MIN_TURNS = 6
MAX_TURNS = 30


class SynthesisError(RuntimeError):
    """A generated or imported task cannot be synthesised (e.g. a turn's reference code fails); the message names the
    task, the turn and the error."""


@dataclass(frozen=True)
class TurnSpec:
    """One turn of a synthesised task: the public question and the private reference code and facts."""

    turn_id: str = field(metadata={"help": "Turn id: '1', '2', ... in order."})
    question: str = field(metadata={"help": "The question the worker answers."})
    context: str = field(metadata={"help": "Background, corrections and constraints such as 'round to 4 decimals'."})
    code: str = field(
        metadata={
            "help": "Reference code; runs in the worker kernel after the earlier turns' code and ends with "
            "print_result(result) where result is a JSON-able dict."
        }
    )
    depends_on: tuple[str, ...] = field(metadata={"help": "Ids of the earlier turns whose results this turn uses."})
    relation: str = field(metadata={"help": f"One of {', '.join(RELATIONS)}."})
    precision: int | None = field(default=None, metadata={"help": "Decimals the grader compares numbers at."})
    constraints: tuple[tuple[str, str | None], ...] = field(
        default=(),
        metadata={"help": "Public constraints: (text, executable check over the worker's variables or None)."},
    )
    writes: tuple[str, ...] = field(default=(), metadata={"help": "Variables the turn's code assigns."})
    slots: Mapping[str, Any] = field(
        default_factory=dict, metadata={"help": "Semantic facts a fault can perturb (keys: see the module docstring)."}
    )


@dataclass(frozen=True)
class TaskSpec:
    """A whole synthesised task: tables (written to ``public/data/<name>.csv``) and its turns."""

    task_id: str = field(metadata={"help": "Task id: letters, digits, '.', '_' or '-'."})
    domain: str = field(metadata={"help": "Domain name (a key of DOMAINS, or 'table' for imported tables)."})
    seed: int = field(metadata={"help": "Seed the task was generated from."})
    title: str = field(metadata={"help": "Human-readable title."})
    description: str = field(metadata={"help": "description.md: the objective as the worker sees it."})
    tables: Mapping[str, pd.DataFrame] = field(
        compare=False,  # DataFrames have no boolean ==; compare specs' tables with pandas.testing
        metadata={"help": "Table name -> data (public/data/<name>.csv)."},
    )
    turns: tuple[TurnSpec, ...] = field(metadata={"help": "The turns, in order."})


def check_n_turns(n_turns: int) -> None:
    """Raise ValueError unless ``n_turns`` is an int in MIN_TURNS..MAX_TURNS."""
    if isinstance(n_turns, bool) or not isinstance(n_turns, int) or not MIN_TURNS <= n_turns <= MAX_TURNS:
        raise ValueError(
            f"n_turns={n_turns!r} is outside the supported range {MIN_TURNS}..{MAX_TURNS}; "
            f"pass an integer between {MIN_TURNS} and {MAX_TURNS}."
        )


def graph_problems(spec: TaskSpec) -> list[str]:
    """Every violation of the relation-graph rules in ``spec`` (empty when valid).

    Rules: ids are '1'..'n' in order; ``depends_on`` names earlier turns only; ``init`` has no dependency;
    ``progress`` depends on exactly the previous turn; ``branch`` on one earlier, non-adjacent turn; ``invalidate``
    on at least one earlier turn; ``combine`` on two or more.
    """
    problems = []
    for index, turn in enumerate(spec.turns, start=1):
        where = f"task {spec.task_id} turn {turn.turn_id}"
        if turn.turn_id != str(index):
            problems.append(f"{where}: id should be {index}")
        deps = [int(d) for d in turn.depends_on]
        if any(d >= index or d < 1 for d in deps):
            problems.append(f"{where}: depends_on {turn.depends_on} names a turn that is not earlier")
        if len(set(deps)) != len(deps):
            problems.append(f"{where}: depends_on {turn.depends_on} repeats a turn")
        rules = {
            "init": not deps,
            "progress": deps == [index - 1],
            "branch": len(deps) == 1 and deps[0] < index - 1,
            "invalidate": len(deps) >= 1,
            "combine": len(deps) >= 2,
        }
        if turn.relation not in rules:
            problems.append(f"{where}: relation {turn.relation!r} is not one of {', '.join(RELATIONS)}")
        elif not rules[turn.relation]:
            problems.append(f"{where}: relation {turn.relation} does not fit depends_on {turn.depends_on}")
    return problems
