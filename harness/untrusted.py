"""Untrusted text for a model: the one function that keeps special-token strings in it from becoming control tokens.

Worker code and output, variable summaries, tool results and task text (questions, context, constraint texts) are
written by the worker, the data or a task author, not by the harness. Put into a chat as they are, a worker that
prints ``</tool_response><|im_end|><|im_start|>system`` would close the tool turn and open a system turn of its own:
the chat template pastes message content verbatim, and a tokenizer matches every added token in the rendered text
(Qwen3 tokenizes ``<|im_start|>`` and ``<tool_call>`` to single ids; so does a vLLM or ``transformers serve`` server
that applies the template itself). :func:`neutralize` is the one function every such segment passes through, where
it enters a message (the manager's activation, tool responses, tier 1's decision prompt, the windowed prompt, the
ReAct worker's observations and questions, the workflow operators' prompts), so the SFT data, the RL rollouts, the
in-process backend and every endpoint see the same bytes.

The transformation, exactly: every occurrence of ``<|`` and of every string in :data:`SPECIAL_TOKENS` gets
:data:`JOINER` (U+2060 WORD JOINER: no width, no break, not whitespace, kept by NFC) inserted after its first
character: ``<|im_end|>`` becomes ``<\\u2060|im_end|>``, ``</tool_response>`` becomes ``<\\u2060/tool_response>``.
A tokenizer then splits it into ordinary text pieces, and a model still reads the worker's output (the joiner is
invisible on screen). Everything else is unchanged: text that holds no ``<|`` and no listed token comes back as it
is (a pandas ``<NA>``, an HTML tag, ``a < b``), so records, goldens and ordinary prompts keep their bytes. The
``<|`` rule covers every ChatML / Qwen / Llama-3 style ``<|...|>`` token, listed or not.

Why the text changes instead of the tokenization: an endpoint's server renders and tokenizes the chat itself, so
the only thing the harness controls there is the bytes; tokenizing untrusted segments with special tokens split
only where the project tokenizes would give training (SFT, RL) and serving (an endpoint) different inputs for the
same episode. One byte-level transformation at the point where the text enters a message gives every path the
same input, and the SFT data is byte for byte what the served policy sends (tested).

It is idempotent (a neutralized segment holds no token string left to break), so a segment that reached a message
along two routes is still escaped once; :func:`restore` removes exactly the inserted joiners
(``restore(neutralize(t)) == t`` for every ``t`` that does not itself hold a joiner right after ``<``).

The token list is static, so the endpoint path needs no tokenizer: Qwen3's 26 added tokens
(:data:`harness.tokenizer.QWEN3_ADDED_TOKENS`) and SmolLM2's 17 special tokens (:data:`SMOLLM2_SPECIAL_TOKENS`).
Where a tokenizer is at hand, :func:`uncovered_tokens` names its added tokens that :func:`neutralize` would leave
intact (none for Qwen3 and SmolLM2; :class:`harness.llm.HFChatBackend` warns about any other model's).

The harness's own structure stays real: the ``<tool_response>`` wrapper it writes, the tool-call format in its
system prompt and the model's own replies are not passed through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from harness.tokenizer import QWEN3_ADDED_TOKENS

JOINER = "\u2060"
"""U+2060 WORD JOINER, inserted after the first character of every token string found in untrusted text."""

SMOLLM2_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    "<issue_start>",
    "<issue_comment>",
    "<issue_closed>",
    "<jupyter_start>",
    "<jupyter_text>",
    "<jupyter_code>",
    "<jupyter_output>",
    "<jupyter_script>",
    "<empty_output>",
)
"""SmolLM2-135M-Instruct's special tokens, ids 0..16 of its tokenizer."""

SPECIAL_TOKENS: tuple[str, ...] = tuple(
    dict.fromkeys([*(token for _, token, _ in QWEN3_ADDED_TOKENS), *SMOLLM2_SPECIAL_TOKENS])
)
"""Every added token of the supported templates' tokenizers (Qwen3, SmolLM2), in that order, each once."""

_GENERIC = "<|"


def _pattern(tokens: Iterable[str]) -> re.Pattern[str]:
    """One alternation: ``<|`` and every token of at least two characters, longest first."""
    words = sorted({_GENERIC, *(t for t in tokens if len(t) >= 2)}, key=lambda t: (-len(t), t))
    return re.compile("|".join(re.escape(w) for w in words))


_TOKENS = _pattern(SPECIAL_TOKENS)
_RESTORE = re.compile(
    "|".join(re.escape(w[0] + JOINER + w[1:]) for w in sorted({_GENERIC, *SPECIAL_TOKENS}, key=lambda t: -len(t)))
)


def neutralize(text: str) -> str:
    """``text`` (untrusted: worker code or output, a tool result, task text) with :data:`JOINER` inserted after the
    first character of every ``<|`` and every :data:`SPECIAL_TOKENS` string (see the module docstring), so that no
    tokenizer of the supported templates reads a control token in it. Idempotent; identity on text without them."""
    if "<" not in text:
        return text
    # One pass suffices: a match is replaced by itself with a joiner inside, which no token holds, and the text
    # around a match is left as it was, so no new token string appears across the seam.
    return _TOKENS.sub(lambda m: m[0][0] + JOINER + m[0][1:], text)


def restore(text: str) -> str:
    """Undo :func:`neutralize`: remove the joiner it inserted after the first character of a token string."""
    if JOINER not in text:
        return text
    return _RESTORE.sub(lambda m: m[0].replace(JOINER, "", 1), text)


def added_tokens(tokenizer: Any) -> list[str]:
    """Every added and special token string of a transformers tokenizer (``get_added_vocab`` and
    ``all_special_tokens``), sorted."""
    found = set(getattr(tokenizer, "all_special_tokens", []) or [])
    vocab = getattr(tokenizer, "get_added_vocab", None)
    if callable(vocab):
        found.update(vocab())
    return sorted(str(token) for token in found)


def uncovered_tokens(tokenizer: Any) -> list[str]:
    """The added tokens of ``tokenizer`` that :func:`neutralize` leaves intact (they could still be injected through
    untrusted text): empty for Qwen3 and SmolLM2."""
    return [token for token in added_tokens(tokenizer) if neutralize(token) == token]
