"""Evaluation layer: scorers, submission validation and grading.

* :mod:`~harness.evaluation.dabench` — InfiAgent-DABench closed-form scorer (official semantics);
* :mod:`~harness.evaluation.structured` — LongDS-style structured-answer comparison;
* :mod:`~harness.evaluation.submission` — CSV submission validation against a sample submission;
* :mod:`~harness.evaluation.metrics` — metrics for artifact tasks (name -> function);
* :mod:`~harness.evaluation.graders` — the built-in graders referenced by name from task configs.

*Invalid is not wrong*: graders raise :class:`InvalidSubmissionError` (score ``None``); a wrong answer scores 0.
"""

from harness.evaluation.dabench import (
    DABenchScore,
    aggregate,
    extract_answers,
    render_answers,
    score_response,
    values_match,
)
from harness.evaluation.errors import InvalidSubmissionError
from harness.evaluation.graders import (
    GRADERS,
    get_grader,
    grade,
    grade_csv_submission,
    grade_dabench,
    grade_structured,
)
from harness.evaluation.metrics import METRICS, Metric, get_metric
from harness.evaluation.result import GradeResult
from harness.evaluation.structured import StructuredScore, compare_structured
from harness.evaluation.submission import validate_csv_submission

__all__ = [
    "GRADERS",
    "METRICS",
    "DABenchScore",
    "GradeResult",
    "InvalidSubmissionError",
    "Metric",
    "StructuredScore",
    "aggregate",
    "compare_structured",
    "extract_answers",
    "get_grader",
    "get_metric",
    "grade",
    "grade_csv_submission",
    "grade_dabench",
    "grade_structured",
    "render_answers",
    "score_response",
    "validate_csv_submission",
    "values_match",
]
