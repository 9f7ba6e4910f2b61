"""Relation-graph task generators: six synthetic domains, question chains over any table, and the folder writer.

Usage::

    from synthesis.domains import generate_task, write_task_folder, generate_chain_over_table

    spec = generate_task("energy", seed=3, n_turns=12)          # TaskSpec: tables + TurnSpecs (code, relations)
    path = write_task_folder(spec, Path("out/syn-energy-3-12"))  # runs the code in a sandbox, fills the answers
    chain = generate_chain_over_table("tables/Credit.csv", seed=0, n_turns=8)
    held_out = generate_task("energy", seed=3, n_turns=12, question_writer="b")  # same task, other words

See :mod:`synthesis.domains.base` for the specs and the slot keys, :mod:`.compose` for how turns are composed,
:mod:`.wording` for the two question writers.
"""

from synthesis.domains.base import (
    MAX_TURNS,
    MIN_TURNS,
    RELATIONS,
    SLOT_KEYS,
    SynthesisError,
    TaskSpec,
    TurnSpec,
    graph_problems,
)
from synthesis.domains.chains import generate_chain_over_table
from synthesis.domains.registry import DOMAINS, generate_task
from synthesis.domains.wording import QUESTION_WRITERS
from synthesis.domains.writer import write_task_folder

__all__ = [
    "DOMAINS",
    "MAX_TURNS",
    "MIN_TURNS",
    "QUESTION_WRITERS",
    "RELATIONS",
    "SLOT_KEYS",
    "SynthesisError",
    "TaskSpec",
    "TurnSpec",
    "generate_chain_over_table",
    "generate_task",
    "graph_problems",
    "write_task_folder",
]
