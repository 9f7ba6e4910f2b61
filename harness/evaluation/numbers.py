"""The one rule for reading a number out of an answer: the structured grader, the DABench scorer and the CSV metrics
all use it, and none of them raises on any value (huge, infinite, NaN or not a number at all).

:func:`parse_number` reads:

* **Python numbers.** A ``bool`` is never a number (a count of 1 is not a yes). An integer (``int``, ``numpy``
  integers) stays an exact ``int`` of any size, so ``10**400`` is a number that only ``10**400`` equals. Another
  real (``float``, ``numpy`` floats, ``Fraction``) becomes a ``float``; one beyond the float range is not a number.
* **Text**, stripped of surrounding whitespace, with Python's ``int()`` then ``float()`` syntax:

  - an integer text (``"240"``, ``"-0"``, ``"+7"``) is an exact ``int``; any other number text is a ``float``
    (``"3.5"``, ``"1e3"``, ``"-0.0"``, ``"inf"``, ``"-Infinity"``, ``"nan"``);
  - **digits of any script are digits** (any Unicode decimal digit, category Nd): ``"٢٤٠"`` (Arabic-Indic) and
    ``"２４０"`` (full-width) are 240. A model that writes the number in another script means the same number, and
    ``int()``/``float()`` already read it so;
  - **an underscore between two digits groups them** (``"1_000"`` is 1000, ``"51_996.97"`` is 51996.97), as in a
    Python literal or ``f"{x:_}"``; a leading, trailing or doubled underscore makes the text not a number. An
    underscore is never a decimal mark, unlike a comma: ``"1,000"`` (1000 or 1.0 by locale) and ``"35%"`` are not
    numbers;
  - a number text whose value is beyond the float range without spelling infinity (``"1e400"``) is not a number
    (it would otherwise equal ``inf``); an integer text of more than 4300 digits (Python's ``int()`` limit) is not
    a number either.

Anything else (``None``, other types, other text) is not a number (``None``). NaN is returned as a ``float`` NaN:
whether NaN counts as a missing value is the caller's rule.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

_INFINITY_WORDS = frozenset({"inf", "infinity"})


def parse_number(value: Any) -> int | float | None:
    """The number ``value`` stands for (rules in the module docstring), or None when it is not a number."""
    if isinstance(value, bool):  # numpy.bool_ is no numbers.Real: it falls through to None below
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except (OverflowError, ValueError, TypeError):
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    if math.isinf(number) and text.lstrip("+-").casefold() not in _INFINITY_WORDS:
        return None  # "1e400": out of the float range, not infinity
    return number


def as_float(value: Any) -> float | None:
    """:func:`parse_number` as a ``float``; None when it is not a number or an integer beyond the float range."""
    number = parse_number(value)
    if number is None:
        return None
    try:
        return float(number)
    except OverflowError:
        return None
