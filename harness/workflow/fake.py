"""A deterministic fake chat model with canned responses, for testing workflow control flow (never quality).

:class:`FakeChatBackend` answers each call with the reply of the first rule whose pattern (a regular expression)
occurs in the last user message, else with ``default``; a rule's reply may be a string or a function of the messages.
Token counts are the whitespace-separated words of the prompt and the reply, so accounting can be asserted. Every
reply made with it is SIMULATED: ``simulated = True`` marks the steps and records it produces.

``fake:FILE`` (the ``--model`` of ``stateguard bench run``) loads a JSON file ``{"rules": [[PATTERN, REPLY], ...],
"default": REPLY}``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.llm import ChatReply, Message

Reply = str | Callable[[Sequence[Message]], str]


class FakeChatBackend:
    simulated = True

    def __init__(self, rules: Sequence[tuple[str, Reply]] = (), default: Reply | None = None):
        self.rules = [(re.compile(pattern), reply) for pattern, reply in rules]
        self.default = default
        self.calls: list[list[Message]] = []
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path) -> FakeChatBackend:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rules = [(str(p), str(r)) for p, r in data.get("rules", [])]
        except (OSError, json.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f'fake model file {path}: {exc}. Write JSON {{"rules": [[PATTERN, REPLY], ...], "default": REPLY}}.'
            ) from exc
        return cls(rules, data.get("default"))

    def chat(self, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> ChatReply:
        with self._lock:
            self.calls.append([dict(m) for m in messages])
        prompt = next((str(m["content"]) for m in reversed(messages) if m["role"] == "user"), "")
        reply = next((r for pattern, r in self.rules if pattern.search(prompt)), self.default)
        if reply is None:
            raise LookupError(f"fake model: no rule matches the prompt {prompt[:200]!r} and there is no default.")
        text = reply(messages) if callable(reply) else reply
        words = sum(len(str(m["content"]).split()) for m in messages)
        return ChatReply(text, prompt_tokens=words, completion_tokens=len(text.split()))
