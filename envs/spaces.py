"""Text spaces for the StateGuard environments.

Observations (rendered JSON, tool results, sandbox output) and actions (model responses holding code, JSON and any
Unicode) are strings. :class:`gymnasium.spaces.Text` checks membership against a fixed character set (alphanumeric
by default), which would reject a quote, a newline or a non-ASCII letter. :class:`UnicodeText` is a ``Text`` whose
``contains`` accepts **any** Python string of ``min_length..max_length`` characters; ``sample()`` stays Text's own
(random strings over :data:`SAMPLE_CHARSET`, printable ASCII), which is what ``check_env`` feeds to ``step`` and
what a model's garbage output looks like to the wire parser.

Lengths are counted in characters: :data:`MAX_TEXT_CHARS` (2**20) bounds both spaces. A model response of 32k
tokens is about 130k characters; a rendered activation with a long committed-state index stays far below the bound.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

MAX_TEXT_CHARS = 2**20
"""The maximum length, in characters, of an observation or an action."""
SAMPLE_CHARSET = string.printable
"""The characters ``sample()`` draws from (printable ASCII: letters, digits, punctuation, whitespace)."""


class UnicodeText(Text):
    """A :class:`~gymnasium.spaces.Text` space whose members are any strings of the allowed length (see the module
    docstring); ``sample()`` draws from :data:`SAMPLE_CHARSET`."""

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length}, sample charset=printable ASCII)"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )
