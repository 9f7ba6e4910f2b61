"""Name -> factory tables: one lookup whose error lists the valid names (house style: no bare ``KeyError``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(table: Mapping[str, T], name: str, *, what: str, fix: str = "") -> T:
    """``table[name]``; an unknown name raises ``ValueError`` naming ``what`` was asked for and the valid names."""
    try:
        return table[name]
    except KeyError:
        hint = f" {fix}" if fix else ""
        raise ValueError(f"unknown {what} {name!r}; valid {what}s: {', '.join(sorted(table))}.{hint}") from None
