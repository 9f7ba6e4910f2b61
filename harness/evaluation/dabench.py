"""InfiAgent-DABench closed-form scorer with the official semantics.

A DABench response states its answers as ``@name[value]``. The official evaluator
(``examples/DA-Agent/eval_closed_form.py`` in the InfiAgent repository) works like this, and so does this module:

* **Extraction** uses the non-greedy pattern ``@(\\w+)\\[(.*?)\\]``: the value ends at the *first* ``]``, and an empty
  value (``@name[]``) is a valid, empty answer. A list answer such as ``@outliers[[1, 2]]`` therefore extracts as
  ``"[1, 2"`` — which is why the dev label of question 273 reads ``"["``: the gold list was cut the same way.
* **Repeated names: the last occurrence wins** on both sides, exactly as the official ``dict(zip(names, answers))``
  and ``{name: value for name, value in common_answers}``. So a response may restate an answer and the final
  statement counts; a label list with a repeated name (dev question 734) is reduced to its last value per name.
* **Matching** (:func:`values_match`): equal strings (after stripping surrounding whitespace on both sides — the
  official code compares the raw strings, which only differs for values padded with spaces), else both parse as
  floats and differ by less than ``1e-6``, else wrong. Empty gold values (dev questions 116, 352, 473) therefore
  match only an empty (or all-blank) predicted value, and a missing predicted answer never matches.
* **Scores**: a question is correct only when every gold sub-answer matches. :func:`aggregate` reports the
  question-level ``accuracy``, the micro ``sub_accuracy`` (matched sub-answers over all gold sub-answers) and the
  official "proportional" ``sub_accuracy_proportional`` (mean over questions of the per-question matched fraction).

One deliberate difference from the official script: it drops questions whose response is empty from every
denominator; here every question the caller scores counts, and an empty response simply scores 0 (a response with
no ``@name[...]`` at all is *valid but wrong*, never invalid).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.evaluation.numbers import as_float

ANSWER_PATTERN = re.compile(r"@(\w+)\[(.*?)\]")
"""The official answer pattern: a word name, then the shortest bracketed value (possibly empty)."""

ABS_TOLERANCE = 1e-6
"""Two numeric answers match when ``abs(pred - gold) < ABS_TOLERANCE`` (strict, as in the official scorer)."""


@dataclass(frozen=True)
class DABenchScore:
    """The verdict for one question.

    ``per_answer`` maps every distinct gold answer name to whether the response matched it.
    """

    correct: bool
    n_correct: int
    n_total: int
    per_answer: dict[str, bool] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """Matched share of the gold sub-answers (0.0 for a question without gold answers)."""
        return self.n_correct / self.n_total if self.n_total else 0.0


def extract_answers(text: str) -> list[tuple[str, str]]:
    """All ``@name[value]`` pairs of ``text`` in order of appearance (repeats kept; see :func:`answers_dict`)."""
    return [(name, value) for name, value in ANSWER_PATTERN.findall(text or "")]


def answers_dict(pairs: Iterable[Sequence[str]]) -> dict[str, str]:
    """``name -> value`` where the last occurrence of a repeated name wins (the official dict semantics)."""
    return {str(name): str(value) for name, value in pairs}


def values_match(pred: str | None, gold: str) -> bool:
    """Whether a predicted answer value matches the gold value.

    Equal after stripping surrounding whitespace, or both are numbers (:func:`harness.evaluation.numbers.as_float`:
    ``float()`` syntax, so ``"1e3"``, ``"-0.5"``, ``" 7 "``, ``"1_000"`` and ``"٢٤٠"`` are numbers; ``"1,000"``,
    ``"50%"`` and ``"1e400"`` are not) and differ by less than :data:`ABS_TOLERANCE`.
    ``None`` (answer missing) never matches. ``"nan"`` matches ``"nan"`` only as equal strings.
    """
    if pred is None:
        return False
    pred_s, gold_s = str(pred).strip(), str(gold).strip()
    if pred_s == gold_s:
        return True
    pred_f, gold_f = as_float(pred_s), as_float(gold_s)
    if pred_f is None or gold_f is None or math.isnan(pred_f) or math.isnan(gold_f):
        return False
    return abs(pred_f - gold_f) < ABS_TOLERANCE


def score_response(response: str, labels: Sequence[Sequence[str]]) -> DABenchScore:
    """Score one response against the gold ``[(name, value), ...]`` labels of its question.

    A question without gold answers is never correct (there is nothing the response could match).
    """
    predicted = answers_dict(extract_answers(response))
    gold = answers_dict(labels)
    per_answer = {name: values_match(predicted.get(name), value) for name, value in gold.items()}
    n_correct = sum(per_answer.values())
    n_total = len(per_answer)
    return DABenchScore(
        correct=n_total > 0 and n_correct == n_total, n_correct=n_correct, n_total=n_total, per_answer=per_answer
    )


def render_answers(pairs: Iterable[Sequence[str]]) -> str:
    """Render ``(name, value)`` pairs as ``@name[value]`` lines (the inverse of :func:`extract_answers`)."""
    return "\n".join(f"@{name}[{value}]" for name, value in pairs)


def aggregate(scores: Iterable[DABenchScore]) -> dict[str, float | int]:
    """Benchmark-level numbers over the scored questions.

    ``accuracy``: share of questions fully correct; ``sub_accuracy``: matched sub-answers over all gold sub-answers
    (micro); ``sub_accuracy_proportional``: the official "accuracy proportional by sub-question", the mean over
    questions of ``n_correct / n_total``. All are 0.0 over no questions; ``n_questions`` and ``n_sub_answers`` are the
    denominators.
    """
    scores = list(scores)
    n_questions = len(scores)
    n_sub = sum(s.n_total for s in scores)
    return {
        "accuracy": sum(s.correct for s in scores) / n_questions if n_questions else 0.0,
        "sub_accuracy": sum(s.n_correct for s in scores) / n_sub if n_sub else 0.0,
        "sub_accuracy_proportional": sum(s.fraction for s in scores) / n_questions if n_questions else 0.0,
        "n_questions": n_questions,
        "n_sub_answers": n_sub,
    }
