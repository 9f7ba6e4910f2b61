"""The relations a manager can infer from a turn's words alone, without the task's dependency graph.

A real benchmark does not hand the manager its dependency graph (for LongDS-style tasks the graph comes from
comments in private reference code), so model-free policies open their states with :func:`infer_relations` unless
the runtime runs with ``oracle_relations=True``. The phrasing it reads is the one the task synthesizer writes, in
both of its wordings (question writers a and b):

- ``"Go back to the result of turn 4 (not the turns after it). ..."`` or ``"Return to what turn 4 produced, ..."``
  -> ``branch`` on turn 4;
- ``"Using the results of turns 2, 3: ..."`` or ``"Combining what turns 2 and 3 produced: ..."`` -> ``combine``
  with each named turn;
- ``"Using the result of turn 5: ..."`` or ``"Starting from what turn 5 produced: ..."`` -> ``progress`` on turn 5;
- a question or context with revision wording (``"With this revision"``, ``"After this update"``, revised,
  revision, corrected, correction) that names turns (``"... (turn 4) now?"``) -> ``invalidate`` on each named turn;
- otherwise one named turn -> ``progress`` on it, several -> ``combine`` with each, none -> ``init``.

The cues are checked in that order (an explicit lead-in wins over revision wording elsewhere in the text, such as
a re-asked question's "Use the current (revised) data."). Turns are named as ``turn N`` or ``turns N, M and K``;
only turns present in ``committed_by_turn`` produce relations: none left -> ``init``, a combine with one committed
turn left -> ``progress``. The result is in OPEN_STATE's format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["infer_relations", "named_turns"]

_NUMBERS = r"\d+(?:\s*(?:,|and|&)\s*\d+)*"
_MENTION = re.compile(rf"\bturns?\s+({_NUMBERS})", re.IGNORECASE)
_BRANCH = re.compile(r"\b(?:go back to the results? of|return to what) turns?\s+(\d+)", re.IGNORECASE)
_COMBINE = re.compile(rf"\b(?:using the results of|combining what) turns\s+({_NUMBERS})", re.IGNORECASE)
_PROGRESS = re.compile(r"\b(?:using the result of|starting from what) turn\s+(\d+)", re.IGNORECASE)
_REVISION = re.compile(
    r"\b(?:with this revision|after this update|revised|revision|corrected|correction)\b", re.IGNORECASE
)


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+", text)


def named_turns(text: str) -> list[str]:
    """The turn numbers ``text`` names (``turn 4``, ``turns 2, 3 and 5``), in order, each once."""
    return list(dict.fromkeys(n for match in _MENTION.finditer(text) for n in _numbers(match.group(1))))


def _committed(turns: list[str], committed_by_turn: Mapping[str, str]) -> list[str]:
    """The committed state ids of ``turns`` (a number matches the turn id ``"4"`` and ``"04"`` alike), each once."""
    by_number = {str(int(t)) if t.isdigit() else t: s for t, s in committed_by_turn.items()}
    return list(dict.fromkeys(by_number[str(int(n))] for n in turns if str(int(n)) in by_number))


def infer_relations(question: str, context: str, committed_by_turn: Mapping[str, str]) -> list[dict[str, Any]]:
    """The relations of a new state from the turn's ``question`` and ``context`` (see the module docstring).

    ``committed_by_turn``: turn id -> id of the committed state that covers it. Returns ``[{"type": "init"}]`` or
    ``[{"type": kind, "related_state_id": sid}, ...]``."""
    text = f"{context}\n{question}"
    if match := _BRANCH.search(text):
        kind, turns = "branch", [match.group(1)]
    elif match := _COMBINE.search(text):
        kind, turns = "combine", _numbers(match.group(1))
    elif match := _PROGRESS.search(text):
        kind, turns = "progress", [match.group(1)]
    else:
        turns = named_turns(text)
        kind = "invalidate" if _REVISION.search(text) else "progress" if len(turns) == 1 else "combine"
    states = _committed(turns, committed_by_turn)
    if not states:
        return [{"type": "init"}]
    if kind == "combine" and len(states) == 1:
        kind = "progress"
    return [{"type": kind, "related_state_id": s} for s in states]
