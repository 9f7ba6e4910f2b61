"""``DOMAINS`` (name -> generator(seed, n_turns)) and :func:`generate_task`, the one entry point for built-in tasks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from synthesis.domains.base import TaskSpec, check_n_turns
from synthesis.domains.catalog import DOMAIN_DEFS
from synthesis.domains.synthetic import generate_domain_task
from synthesis.domains.wording import get_writer

DOMAINS: dict[str, Callable[..., TaskSpec]] = {
    name: partial(generate_domain_task, definition) for name, definition in DOMAIN_DEFS.items()
}
"""Domain name -> generator(seed, n_turns, question_writer='a') -> TaskSpec."""


def generate_task(domain: str, seed: int, n_turns: int, *, question_writer: str = "a") -> TaskSpec:
    """A seeded relation-graph task of ``n_turns`` (6..30) turns in ``domain`` (a key of :data:`DOMAINS`), its
    questions, contexts and constraint texts worded by ``question_writer`` ('a', the training wording, or 'b': the
    same requirements in other words; :mod:`synthesis.domains.wording`).

    The same (domain, seed, n_turns) always gives the same tables, turns, code and slots, whichever the writer; the
    same writer also gives the same words. Raises ValueError for an unknown domain or writer (listing the valid
    names), a negative or non-integer seed, or n_turns outside 6..30.
    """
    factory = DOMAINS.get(domain)
    if factory is None:
        raise ValueError(f"unknown domain {domain!r}; valid domains: {', '.join(sorted(DOMAINS))}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer; pass e.g. seed=0.")
    check_n_turns(n_turns)
    get_writer(question_writer)
    return factory(seed, n_turns, question_writer=question_writer)
