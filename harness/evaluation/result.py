"""The result of grading one task."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one submission.

    ``valid`` is False (and ``score`` is None) for an invalid submission; a valid wrong answer has ``score == 0``.
    ``details`` holds grader-specific, JSON-serialisable detail (sub-answers, per-turn scores, the error message).
    """

    task_id: str
    valid: bool
    score: float | None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.valid and self.score is None:
            raise ValueError(f"GradeResult for {self.task_id!r}: a valid result needs a score, got None.")
        if not self.valid and self.score is not None:
            raise ValueError(f"GradeResult for {self.task_id!r}: an invalid result has score None, got {self.score}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        """One JSON line: ``{"task_id", "valid", "score", "details"}``."""
        return json.dumps(self.to_dict(), sort_keys=False, default=str)
