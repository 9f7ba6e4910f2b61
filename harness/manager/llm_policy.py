"""The model-driven manager policies ``llm`` and ``freeform``: a chat model answers each activation.

:class:`LLMPolicy` builds one chat conversation per activation and asks its backend for the next response:

1. ``system``: :data:`~harness.manager.prompts.MANAGER_SYSTEM_POLICY` (``llm``) or
   :data:`~harness.manager.prompts.FREEFORM_SYSTEM` (``freeform``, the free-form memory ablation);
2. ``user``: :func:`~harness.manager.prompts.render_activation` (the observation as the activation started, the public
   turn, the legal actions);
3. then, for every earlier action of the activation (``PolicyInput.previous``): an ``assistant`` message holding the
   earlier raw response verbatim, and a ``user`` message holding its result wrapped in
   ``<tool_response>\\n...\\n</tool_response>``, whose last line inside the tags is the evidence digest of the
   activation's results so far (:func:`~harness.manager.prompts.render_tool_responses`): how many checks and probes
   failed, quoting the first failure, or that every one passed. A small model reads a failure buried among several
   long JSON results far better when it is restated next to the decision; the digest reads nothing but those
   results.

Why a ``user`` ``<tool_response>`` text and not a ``tool`` message: the Qwen3 chat template renders a ``tool`` message
as exactly this text inside a user turn (``<|im_start|>user\\n<tool_response>\\n...\\n</tool_response><|im_end|>``)
and recognizes such user messages as tool output when it looks for the last real query, so the tokens the model sees
are identical; unlike a ``tool`` message it needs no ``tool_call_id`` and no structured ``tool_calls`` on the earlier
assistant message, so every OpenAI-compatible endpoint (vLLM, hosted APIs) accepts it, and the earlier response is
replayed byte for byte. Refused actions (bad format, illegal) get their refusal as the result the same way. An
earlier call whose backend failed (empty raw response) is left out: the model said nothing.

The function-tool list (:func:`~harness.manager.actions.tool_schemas`) goes with every request. With
``prompt_view="bare"`` (:mod:`harness.manager.prompt_view`: a checkpoint trained without them) the conversation has
no system message and no tools block. A backend that returns a structured assistant message with ``tool_calls``
(vLLM with the hermes tool parser) is turned back into wire text (:func:`message_to_text`) that
:func:`~harness.manager.wire.parse_response` reads to the same action, or to an error of the same kind: invalid JSON
arguments are kept verbatim so the parser reports them. Exceptions from the backend
propagate; the runtime records them as refused actions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from harness.jsonl import dumps, json_depth_error, loads_untrusted
from harness.llm import ChatBackend, ChatReply, HFChatBackend, Message, OpenAIChatBackend
from harness.manager.actions import tool_schemas
from harness.manager.policy_registry import register_policy
from harness.manager.policy_types import PolicyInput
from harness.manager.prompt_view import check_prompt_view, view
from harness.manager.prompts import FREEFORM_SYSTEM, MANAGER_SYSTEM_POLICY, render_activation, render_tool_responses
from harness.manager.wire import THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from harness.specs import ManagerSpec

logger = logging.getLogger(__name__)

_DECODER = json.JSONDecoder()


def _render_call(call: object) -> str:
    """One structured tool call as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` text."""
    if (
        not isinstance(call, dict)
        or not isinstance(call.get("function"), dict)
        or call.get("type", "function") != "function"
    ):
        body = _dumps(call)  # not a function call: the parser rejects the keys
    else:
        function = call["function"]
        name = _dumps(function.get("name"))
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            if not arguments.strip():
                arguments_text = "{}"
            else:
                try:
                    arguments_text = dumps(loads_untrusted(arguments))
                except ValueError:  # bad JSON, nested too deep, an integer too long
                    return _render_bad_arguments(name, arguments)
        else:
            arguments_text = _dumps(arguments)
        body = f'{{"name": {name}, "arguments": {arguments_text}}}'
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def _dumps(value: object) -> str:
    """JSON text of a decoded value (lone surrogates as escape text); one nested too deep for the encoder becomes a
    marker that is bad JSON, so the parser refuses the call."""
    try:
        return dumps(value, default=str)
    except (RecursionError, ValueError):
        return "<not JSON: nested too deep or a number too long>"


def _render_bad_arguments(name: str, arguments: str) -> str:
    """A call whose arguments string is not JSON (or nests too deep), kept verbatim so the parser reports it.

    Pasted into the call object, such a string could still complete it into valid JSON (``{"a": 1}, "name": "X"``
    would override the name); then a fixed invalid marker goes before it, so the text is bad JSON either way."""
    body = f'{{"name": {name}, "arguments": {arguments}}}'
    if json_depth_error(body) is not None:  # the parser refuses it as nested too deep
        return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"
    try:
        _DECODER.raw_decode(body)
    except ValueError:  # bad JSON, or an integer too long
        return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"
    return f'{TOOL_CALL_OPEN}\n{{"name": {name}, "arguments": <not JSON> {arguments}}}\n{TOOL_CALL_CLOSE}'


def message_to_text(message: Message) -> str:
    """A structured OpenAI assistant message (with ``tool_calls``) as the equivalent wire text.

    The reasoning (``reasoning_content``) becomes a leading ``<think>`` block when the content has none; the content
    is kept (stray prose stays stray); each call becomes one ``<tool_call>`` block."""
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = _dumps(content)
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    prefix = ""
    tags = (THINK_OPEN, THINK_CLOSE, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
    if isinstance(reasoning, str) and reasoning.strip() and not any(t in content or t in reasoning for t in tags):
        prefix = f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n\n"
    calls = message.get("tool_calls")
    calls = calls if isinstance(calls, list) else [calls]
    return prefix + content + "".join(("\n" if i or content else "") + _render_call(c) for i, c in enumerate(calls))


def reply_to_text(reply: ChatReply) -> str:
    """The response text of a reply: its structured tool calls rendered as wire text, else its text."""
    message = reply.message
    if isinstance(message, dict) and message.get("tool_calls"):
        return message_to_text(message)
    return reply.text


class LLMPolicy:
    """A manager policy answered by a chat model (see the module docstring)."""

    active = True

    def __init__(
        self,
        backend: ChatBackend,
        *,
        name: str = "llm",
        system: str = MANAGER_SYSTEM_POLICY,
        prompt_view: str = "full",
    ):
        self.backend, self.name, self.system = backend, name, system
        self.prompt_view = check_prompt_view(prompt_view)
        self.tools: list[dict[str, Any]] | None = view([], tool_schemas(), prompt_view)[1]
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.before_reply: Callable[[PolicyInput], None] | None = None
        """Called with the input before each reply (:func:`harness.manager.model_settings.constrain_actions` sets the
        grammar there)."""

    def messages(self, inp: PolicyInput) -> list[Message]:
        """The chat conversation for the next response of the current activation (seen through ``prompt_view``)."""
        messages: list[Message] = view(
            [{"role": "system", "content": self.system}, {"role": "user", "content": render_activation(inp)}],
            None,
            self.prompt_view,
        )[0]
        replayed = [(raw, result) for raw, result in inp.previous if raw.strip()]  # a failed backend call said nothing
        responses = render_tool_responses([result for _, result in replayed])
        for (raw, _), response in zip(replayed, responses, strict=True):
            messages.append({"role": "assistant", "content": raw})
            messages.append({"role": "user", "content": response})
        return messages

    def respond(self, inp: PolicyInput) -> str:
        if self.before_reply is not None:
            self.before_reply(inp)
        reply = self.backend.chat(self.messages(inp), tools=self.tools)
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        logger.debug(
            "%s: reply %d of %d+%d tokens", self.name, self.calls, reply.prompt_tokens, reply.completion_tokens
        )
        return reply_to_text(reply)


def actions_now(inp: PolicyInput) -> list[str]:
    """The action names a response may take now: those the runtime lists as legal (``inp.legal_actions``, which the
    prompt shows too); read from nothing but the manager's own input."""
    return list(inp.legal_actions)


def openai_policy(url: str, *, freeform: bool = False) -> LLMPolicy:
    """``llm:URL`` / ``freeform:URL``: an OpenAI-compatible endpoint; the model is the first one the server lists."""
    return LLMPolicy(OpenAIChatBackend(url), name="freeform" if freeform else "llm", system=_system(freeform))


def hf_policy(path: str, *, freeform: bool = False) -> LLMPolicy:
    """``llm-hf:PATH`` / ``freeform-hf:PATH``: an in-process transformers model loaded from a local folder."""
    name = "freeform-hf" if freeform else "llm-hf"
    return LLMPolicy(HFChatBackend(path), name=name, system=_system(freeform))


def _system(freeform: bool) -> str:
    return FREEFORM_SYSTEM if freeform else MANAGER_SYSTEM_POLICY


@register_policy("freeform")
def _freeform(spec: ManagerSpec) -> LLMPolicy:
    return openai_policy(str(spec.model), freeform=True)


@register_policy("freeform-hf")
def _freeform_hf(spec: ManagerSpec) -> LLMPolicy:
    return hf_policy(str(spec.model), freeform=True)
