"""The ReAct code worker: each step is a short thought plus one Python cell, or a final answer.

The model's reply is read as: an optional thought (free text), then either one fenced ```python cell (executed in
the episode's sandbox kernel, whose output comes back as the next user message) or a line ``Final Answer: ...``
(JSON when it parses, else text; JSON nested deeper than :data:`harness.jsonl.MAX_JSON_DEPTH` stays text). A reply
longer than ``ReActConfig.max_reply_chars`` is cut to it first; the step's ``meta`` records ``reply_cut`` and
``reply_chars``. A turn's answer is the last ``print_result`` value of the turn, else the final
answer. Backends (from :mod:`harness.llm`): any OpenAI-compatible chat endpoint (:class:`OpenAIChatBackend`, plain
HTTP, no SDK needed) or an in-process transformers model (:class:`HFChatBackend`, needs the ``train`` extra). Every
step records its tokens and time. Manager-triggered re-analysis (a repair hint) gets a separate, configurable step
budget so it never eats the worker's own steps.

A step and a repair are generators (:meth:`ReActWorker.step_requests`, :meth:`ReActWorker.repair_requests`): with
a backend the worker asks it and yields nothing; built with ``backend=None`` it yields the conversation (the chat
message list) whenever its model must reply and takes the reply sent in (text or :class:`~harness.llm.ChatReply`),
so a caller (the runtime's episode, :class:`envs.WorkerEnv`) plays the model. ``step`` and ``repair`` are the
blocking forms (:func:`harness.worker.base.answered`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from harness.jsonl import loads_untrusted
from harness.llm import DEFAULT_MAX_REPLY_CHARS, ChatBackend, ChatReply, cut_reply
from harness.sandbox import Kernel
from harness.untrusted import neutralize
from harness.worker.base import Requests, StepwiseWorker, answered
from harness.worker.step import WorkerStep

SYSTEM_PROMPT = """You are a careful data analyst working in a persistent Python session (variables survive \
between cells). Data is read-only under DATA_DIR (also BASE_PATH); write files only under WORK_DIR.
Each reply: one or two sentences of reasoning, then EITHER one Python cell in a ```python fenced block, OR a line \
`Final Answer: <JSON>` when the question is answered. Report structured answers with print_result(obj) in a cell.
Hints from a supervisor may appear; they are for reference only: verify before you rely on them."""

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_FINAL = re.compile(r"^\s*Final Answer\s*:\s*(.*)\Z", re.DOTALL | re.MULTILINE | re.IGNORECASE)
OUTPUT_CHARS = 3000


@dataclass
class ReActConfig:
    max_steps: int = field(default=10, metadata={"help": "worker steps (cells or final answer) per turn"})
    repair_steps: int = field(default=4, metadata={"help": "extra steps reserved for manager-triggered re-analysis"})
    max_reply_chars: int = field(
        default=DEFAULT_MAX_REPLY_CHARS,
        metadata={
            "help": "characters of one model reply kept: a longer reply is cut to this many before it is read and "
            "recorded; the step's meta records reply_cut: true and reply_chars (its full length)"
        },
    )

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.repair_steps < 0:
            raise ValueError(
                f"max_steps={self.max_steps}, repair_steps={self.repair_steps}: need max_steps >= 1 and "
                "repair_steps >= 0."
            )
        if self.max_reply_chars < 1:
            raise ValueError(f"max_reply_chars={self.max_reply_chars}: keep at least 1 character; use e.g. 32000.")


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
            final = loads_untrusted(raw)
        except ValueError:  # not JSON, nested too deep, an integer too long: the answer is the text
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


class ReActWorker(StepwiseWorker):
    """A model-driven worker over one kernel; one conversation per episode (turns append to it).

    Implements :class:`~harness.worker.base.Worker`: ``run_turn`` (whole turns) or ``begin`` + ``step`` (the
    harness drives it step by step). ``config.max_steps`` bounds the worker's own steps per question;
    ``config.repair_steps`` is the separate budget of each :meth:`repair` (manager-triggered re-analysis).
    ``backend=None``: the model's replies come from outside, through :meth:`step_requests` and
    :meth:`repair_requests` (module docstring).
    """

    simulated = False

    def __init__(
        self,
        backend: ChatBackend | None,
        kernel: Kernel,
        config: ReActConfig | None = None,
        *,
        contract: str | None = None,
    ):
        self.backend = backend
        self._contract = contract.strip() if contract else None  # replaces the first question's prompt once
        self.kernel = kernel
        self.config = config or ReActConfig()
        self.messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.steps: list[WorkerStep] = []
        self.answers: dict[str, Any] = {}
        self._turn: str | None = None
        self._left = 0  # own steps left for the current question
        self._done = True  # the current question has a final answer (or none was begun)
        self._structured = False  # a print_result in this loop wins over a textual final answer

    @property
    def repair_steps(self) -> int:
        return self.config.repair_steps

    @property
    def finished(self) -> bool:
        return self._done or self._left <= 0

    def begin(self, turn_id: str, prompt: str, hint: str | None = None) -> None:
        self._turn, self._left, self._done, self._structured = turn_id, self.config.max_steps, False, False
        if self._contract is not None:  # the task contract already holds the first question, data and output rules
            prompt, self._contract = self._contract, None
        self._user(prompt if not hint else f"{prompt}\n\n{hint}")

    def step(self) -> WorkerStep | None:
        return answered(self.step_requests())

    def step_requests(self) -> Requests[WorkerStep | None]:
        """:meth:`step` as a generator (module docstring)."""
        if self._turn is None or self.finished:
            return None
        self._left -= 1
        step = yield from self._take_step(self._turn, meta={})
        self._done = bool(step.meta["final"])
        return step

    def note(self, text: str) -> None:
        self._user(text)

    def repair(self, turn_id: str, hint: str) -> list[WorkerStep]:
        """Re-analyse a turn after a repair hint, within the reserved ``repair_steps`` budget (the worker's own
        budget is untouched; a final answer here finishes the question)."""
        return answered(self.repair_requests(turn_id, hint))

    def repair_requests(self, turn_id: str, hint: str) -> Requests[list[WorkerStep]]:
        """:meth:`repair` as a generator (module docstring)."""
        self._user(f"{hint}\n\nRe-check your work on this question and answer again.")
        self._structured = False
        produced: list[WorkerStep] = []
        for _ in range(self.config.repair_steps):
            step = yield from self._take_step(turn_id, meta={"repair": "re-analysis"})
            produced.append(step)
            if step.meta["final"]:
                if turn_id == self._turn:
                    self._done = True
                break
        return produced

    def _user(self, content: str) -> None:
        """Add a user message; merged into the previous one when that is a user message too (pending observation).
        ``content`` (a question, the task contract, a hint, an observation) is untrusted text
        (:func:`harness.untrusted.neutralize`)."""
        content = neutralize(content)
        if self.messages[-1]["role"] == "user":
            self.messages[-1] = {"role": "user", "content": f"{self.messages[-1]['content']}\n\n{content}"}
        else:
            self.messages.append({"role": "user", "content": content})

    def _chat(self) -> Requests[ChatReply]:
        """The model's reply to the conversation: from the backend, or (no backend) the answer to the yielded
        message list."""
        if self.backend is not None:
            return self.backend.chat(self.messages)
        reply = yield self.messages
        return reply if isinstance(reply, ChatReply) else ChatReply(text=reply)

    def _take_step(self, turn_id: str, meta: dict[str, Any]) -> Requests[WorkerStep]:
        t0 = time.perf_counter()
        reply = yield from self._chat()
        text, full_chars = cut_reply(reply.text, self.config.max_reply_chars)
        if full_chars is not None:
            meta = {**meta, "reply_cut": True, "reply_chars": full_chars}
        self.messages.append({"role": "assistant", "content": text})
        parsed = parse_worker_reply(text)
        result = self.kernel.execute(parsed.code) if parsed.code else None
        if result is not None and result.results:
            self.answers[turn_id], self._structured = result.results[-1], True
        elif parsed.has_final and not self._structured:
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
            meta={**meta, "final": parsed.has_final},
        )
        self.steps.append(step)
        if not parsed.has_final:
            self._user(observation_text(step))
        return step
