"""What a manager model sees of its conversation: the ``full`` or the ``bare`` prompt view.

``full`` is the served ``llm`` policy's conversation (system prompt and tools block first); ``bare`` drops both, so
the activation is the first turn (the view small models are trained and served with). One constant, one check and
one view, shared by the served policies (``prompt_view`` of :class:`~harness.manager.llm_policy.LLMPolicy` and
:class:`~harness.manager.hier.HierPolicy`, set from a checkpoint's ``manager.json``), the SFT data, the RL arguments
and the rollout's token pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PROMPT_VIEWS = ("full", "bare")


def check_prompt_view(prompt_view: str) -> str:
    """``prompt_view`` itself, or a ``ValueError`` naming the choices."""
    if prompt_view not in PROMPT_VIEWS:
        raise ValueError(f"prompt_view={prompt_view!r}: use one of {', '.join(PROMPT_VIEWS)}")
    return prompt_view


def view(messages: Sequence[dict[str, Any]], tools: Any, prompt_view: str) -> tuple[list[dict[str, Any]], Any]:
    """The messages and tools a model sees under ``prompt_view``."""
    if check_prompt_view(prompt_view) == "bare":
        return [m for m in messages if m["role"] != "system"], None
    return list(messages), tools
