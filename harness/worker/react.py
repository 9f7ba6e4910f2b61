"""The ReAct code worker: each step is a short thought plus one Python cell, or a final answer.

The model's reply is read as: an optional thought (free text), then either one fenced ```python cell (executed in
the episode's sandbox kernel, whose output comes back as the next user message) or a line ``Final Answer: ...``
(JSON when it parses, else text). A turn's answer is the last ``print_result`` value of the turn, else the final
answer. Backends: any OpenAI-compatible chat endpoint (:class:`OpenAIChatBackend`, plain HTTP, no SDK needed) or an
in-process transformers model (:class:`HFChatBackend`, needs the ``train`` extra). Every step records its tokens and
time. Manager-triggered re-analysis (a repair hint) gets a separate, configurable step budget so it never eats the
worker's own steps.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.import_utils import require
from harness.sandbox import Kernel
from harness.worker.step import WorkerStep

SYSTEM_PROMPT = """You are a careful data analyst working in a persistent Python session (variables survive \
between cells). Data is read-only under DATA_DIR (also BASE_PATH); write files only under WORK_DIR.
Each reply: one or two sentences of reasoning, then EITHER one Python cell in a ```python fenced block, OR a line \
`Final Answer: <JSON>` when the question is answered. Report structured answers with print_result(obj) in a cell.
Hints from a supervisor may appear; they are for reference only: verify before you rely on them."""

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_FINAL = re.compile(r"^\s*Final Answer\s*:\s*(.*)\Z", re.DOTALL | re.MULTILINE | re.IGNORECASE)
OUTPUT_CHARS = 3000


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatBackend(Protocol):
    def chat(self, messages: list[dict[str, str]]) -> ChatReply: ...


@dataclass
class ReActConfig:
    max_steps: int = field(default=10, metadata={"help": "worker steps (cells or final answer) per turn"})
    repair_steps: int = field(default=4, metadata={"help": "extra steps reserved for manager-triggered re-analysis"})

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.repair_steps < 0:
            raise ValueError(
                f"max_steps={self.max_steps}, repair_steps={self.repair_steps}: need max_steps >= 1 and "
                "repair_steps >= 0."
            )


@dataclass(frozen=True)
class ParsedReply:
    thought: str
    code: str | None
    final: Any = None
    has_final: bool = False


def parse_worker_reply(text: str) -> ParsedReply:
    """Split a reply into thought, the first code cell and a final answer (JSON when it parses)."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL)
    code_match = _CODE.search(text)
    code = code_match.group(1).strip() if code_match else None
    rest = _CODE.sub("", text)
    final_match = _FINAL.search(rest)
    final: Any = None
    if final_match:
        raw = final_match.group(1).strip()
        try:
            final = json.loads(raw)
        except json.JSONDecodeError:
            final = raw
        rest = rest[: final_match.start()]
    return ParsedReply(thought=rest.strip(), code=code, final=final, has_final=final_match is not None)


def observation_text(step: WorkerStep) -> str:
    r = step.result
    if r is None:
        return "No code was run. Reply with one ```python cell or `Final Answer: ...`."
    parts = [f"Execution {'succeeded' if r.ok else 'failed'} in {r.duration_s * 1000:.0f} ms."]
    if r.stdout:
        parts.append("stdout:\n" + r.stdout[-OUTPUT_CHARS:])
    if r.display:
        parts.append("value:\n" + r.display[-OUTPUT_CHARS:])
    if not r.ok:
        parts.append(f"error: {r.error_type}: {r.error_message}")
    return "\n".join(parts)


class ReActWorker:
    """A model-driven worker over one kernel; one conversation per episode (turns append to it)."""

    simulated = False

    def __init__(self, backend: ChatBackend, kernel: Kernel, config: ReActConfig | None = None):
        self.backend = backend
        self.kernel = kernel
        self.config = config or ReActConfig()
        self.messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.steps: list[WorkerStep] = []
        self.answers: dict[str, Any] = {}

    def run_turn(self, turn_id: str, prompt: str, hint: str | None = None) -> list[WorkerStep]:
        """Work on one turn until a final answer or ``max_steps``; a state ``hint`` is appended to the prompt."""
        content = prompt if not hint else f"{prompt}\n\n{hint}"
        return self._loop(turn_id, content, self.config.max_steps)

    def repair(self, turn_id: str, hint: str) -> list[WorkerStep]:
        """Re-analyse a turn after a repair hint, within the reserved ``repair_steps`` budget."""
        content = f"{hint}\n\nRe-check your work on this question and answer again."
        return self._loop(turn_id, content, self.config.repair_steps)

    def _loop(self, turn_id: str, content: str, budget: int) -> list[WorkerStep]:
        self.messages.append({"role": "user", "content": content})
        produced: list[WorkerStep] = []
        structured = False  # a print_result in this loop wins over a textual final answer
        for _ in range(budget):
            t0 = time.perf_counter()
            reply = self.backend.chat(self.messages)
            self.messages.append({"role": "assistant", "content": reply.text})
            parsed = parse_worker_reply(reply.text)
            result = self.kernel.execute(parsed.code) if parsed.code else None
            if result is not None and result.results:
                self.answers[turn_id], structured = result.results[-1], True
            elif parsed.has_final and not structured:
                self.answers[turn_id] = parsed.final
            step = WorkerStep(
                step_id=len(self.steps),
                turn_id=turn_id,
                thought=parsed.thought,
                code=parsed.code,
                result=result,
                answer=self.answers.get(turn_id),
                duration_s=time.perf_counter() - t0,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                simulated=False,
                meta={"final": parsed.has_final},
            )
            self.steps.append(step)
            produced.append(step)
            if parsed.has_final:
                break
            self.messages.append({"role": "user", "content": observation_text(step)})
        return produced


class OpenAIChatBackend:
    """POST ``{base_url}/chat/completions`` of any OpenAI-compatible server (vLLM, ``transformers serve``, hosted)."""

    def __init__(self, base_url: str, model: str, *, api_key: str = "EMPTY", temperature: float = 0.0,
                 max_tokens: int = 1024, timeout_s: float = 120.0):  # fmt: skip
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.temperature, self.max_tokens, self.timeout_s = temperature, max_tokens, timeout_s

    def chat(self, messages: list[dict[str, str]]) -> ChatReply:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": self.temperature,
                           "max_tokens": self.max_tokens}).encode()  # fmt: skip
        request = urllib.request.Request(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data = json.load(response)
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
            raise ConnectionError(f"chat endpoint {self.url} failed: {exc}. Check that the server is up.") from exc
        try:
            text = data["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ConnectionError(f"chat endpoint {self.url} returned no choices: {str(data)[:300]}") from None
        usage = data.get("usage") or {}
        return ChatReply(text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))


class HFChatBackend:
    """An in-process transformers chat model (greedy by default). Needs ``pip install -e '.[train]'``."""

    def __init__(self, path: str, *, max_new_tokens: int = 512, do_sample: bool = False):
        require("transformers")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path)
        self.max_new_tokens, self.do_sample = max_new_tokens, do_sample

    def chat(self, messages: list[dict[str, str]]) -> ChatReply:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        out = self.model.generate(ids, max_new_tokens=self.max_new_tokens, do_sample=self.do_sample)
        new = out[0, ids.shape[1] :]
        return ChatReply(self.tokenizer.decode(new, skip_special_tokens=True), int(ids.shape[1]), int(new.shape[0]))
