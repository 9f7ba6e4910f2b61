"""Recover upstream turns of a LongDS-style turn from the comments of its reference code.

LongDS reference code says where it builds on earlier work in comments, in heterogeneous forms. The parser is
deterministic and reads **comments only** (``#`` comments, found with :mod:`tokenize`; strings and code are ignored):

=============================  =======================
comment                        referenced numbers
=============================  =======================
``# reuse df from Task 3``      3
``# Tasks 1, 8, and 9``         1, 8, 9
``# see Task 14/17``            14, 17
``# Tasks 2-4`` / ``2--4``      2, 3, 4 (also ``2–4``, ``2 to 4``, ``2 through 4``)
``# from T3`` / ``# (T3)``      3 (also ``(T3, T5)``, ``see T3``, ``of T3``, ``in T3``, ``per T3``, ``using T3``)
=============================  =======================

``task``/``tasks`` match case-insensitively and as whole words ("subtask 2" is not a reference); the ``T<n>`` form
needs an upper-case ``T`` right after ``from``/``see``/``of``/``in``/``per``/``using``/``like`` or ``(``, so
"T2 statistic" or "a t3 instance" are not references. A reversed range ("Task 2024-01") or one longer than 1000
is ignored, not expanded. A spaced hyphen is a range too ("Tasks 2 - 4").

A number refers to the earlier turn whose id is that number. Only **earlier** turns count: the current turn
(self-reference) and later or unknown turns are dropped. The dependencies come out in turn order.

Relations from the recovered dependencies (:func:`infer_relation`): ``init`` when there are none, ``combine`` when
there are two or more, ``progress`` when the single dependency is the immediately preceding turn, and ``branch``
when it is an earlier, non-adjacent turn. (``invalidate`` cannot be read from code; task.json may set it
explicitly, and an explicit ``relation`` or ``depends_on`` in task.json always wins.)
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

_NUM = r"\d+"
_SEP = r"\s*(?:,\s*(?:and\s+|&\s*)?|/|&|\band\b|-{1,2}|–|—|\bto\b|\bthrough\b)\s*"
TASK_PATTERN = re.compile(rf"\btasks?\b\s*#?\s*(?P<items>{_NUM}(?:{_SEP}#?{_NUM})*)(?!\w)", re.IGNORECASE)
T_PATTERN = re.compile(
    rf"(?:(?i:\b(?:from|see|of|in|per|using|like))\s+|\(\s*)(?P<items>T{_NUM}(?:{_SEP}T?{_NUM})*)(?!\w)"
)
_TOKEN = re.compile(r"\d+|-{1,2}|–|—|\bto\b|\bthrough\b", re.IGNORECASE)
MAX_RANGE = 1000
"""Longer ranges (surely not turn references) are ignored instead of expanded."""
_RANGE_OPS = {"-", "--", "–", "—", "to", "through"}


def code_comments(code: str) -> list[str]:
    """The text of every ``#`` comment in ``code`` (a line-based fallback when the code does not tokenize)."""
    try:
        return [
            tok.string[1:]
            for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line.split("#", 1)[1] for line in code.splitlines() if "#" in line]


def _expand(items: str) -> list[int]:
    """Numbers of one matched list, with ranges expanded (``2-4`` -> 2, 3, 4; reversed ranges dropped)."""
    tokens = [t.lower() for t in _TOKEN.findall(items)]
    numbers: list[int] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.isdigit():
            if i + 2 < len(tokens) and tokens[i + 1] in _RANGE_OPS and tokens[i + 2].isdigit():
                low, high = int(token), int(tokens[i + 2])
                if low <= high and high - low <= MAX_RANGE:
                    numbers.extend(range(low, high + 1))
                i += 3
                continue
            numbers.append(int(token))
        i += 1
    return numbers


def referenced_numbers(text: str) -> list[int]:
    """Every turn number ``text`` refers to (both forms), in order of appearance, without repeats."""
    found: list[int] = []
    for pattern in (TASK_PATTERN, T_PATTERN):
        for match in pattern.finditer(text):
            found.extend(_expand(match.group("items")))
    return list(dict.fromkeys(found))


def infer_dependencies(code: str, turn_id: str, earlier: Sequence[str]) -> tuple[str, ...]:
    """Earlier turn ids referenced in the comments of ``code``, in turn order (self, later, unknown ids dropped)."""
    numbers = {n for comment in code_comments(code) for n in referenced_numbers(comment)}
    by_number = {int(t): t for t in earlier if t.strip().isdigit()}
    return tuple(t for t in earlier if t != turn_id and t in {by_number.get(n) for n in numbers})


def infer_relation(depends_on: Sequence[str], earlier: Sequence[str]) -> str:
    """``init`` (no deps), ``combine`` (two or more), ``progress`` (the previous turn) or ``branch`` (an older one)."""
    if not depends_on:
        return "init"
    if len(set(depends_on)) >= 2:
        return "combine"
    return "progress" if earlier and depends_on[0] == earlier[-1] else "branch"
