"""One worker step, the unit every worker produces and the episode record stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.sandbox import ExecutionResult


@dataclass
class WorkerStep:
    """One worker step: a thought and one code cell (``code``), or a final answer without code."""

    step_id: int
    turn_id: str | None
    thought: str
    code: str | None
    result: ExecutionResult | None
    answer: Any = None
    duration_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    simulated: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "turn_id": self.turn_id,
            "thought": self.thought,
            "code": self.code,
            "result": self.result.to_dict() if self.result is not None else None,
            "answer": self.answer,
            "duration_s": self.duration_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "simulated": self.simulated,
            "meta": self.meta,
        }
