"""Grammar-constrained decoding for in-process transformers models (structured outputs, as vLLM's ``guidance``
backend does it, with the same library: llguidance).

A grammar is a Lark grammar in llguidance's dialect (``%json {...}`` embeds a JSON schema; a tokenizer's added
tokens are written ``<tool_call>``-style, without quotes). :class:`TokenGrammar` compiles it once for one tokenizer;
:meth:`TokenGrammar.logits_processor` gives a fresh ``transformers`` logits processor for one reply: before every
sampled token it masks the logits of every token the grammar does not allow next, so a greedy or sampled reply is
always a prefix of a sentence of the grammar, and a whole one when it ends with a stop token. Masking a token costs
well under a millisecond for a 50k-150k vocabulary.

The reply is still the model's choice among the allowed tokens; what the grammar rules out (unquoted keys, a tool
name outside the action set, a missing argument) can no longer occur. A reply cut by ``max_new_tokens`` is a prefix
and stays unparseable.

Needs ``llguidance`` (in the ``train`` extra); a missing package raises ``ImportError`` with the install command, an
invalid grammar ``ValueError`` with llguidance's message.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from harness.import_utils import require


def added_tokens(tokenizer: Any) -> frozenset[str]:
    """The tokenizer's added tokens (``<|im_end|>``, Qwen3's ``<tool_call>`` ...): a grammar must name them as tokens,
    not as quoted text (llguidance reads them as single tokens that match no plain bytes)."""
    return frozenset(tokenizer.get_added_vocab())


class TokenGrammar:
    """One grammar compiled for one tokenizer.

    Args:
        tokenizer: a fast Hugging Face tokenizer.
        grammar: the Lark grammar (llguidance dialect).
        n_vocab: the model's logits width (may exceed the tokenizer's vocabulary: padding rows).
        stop_ids: the ids that end a reply; the grammar allows them once it is complete, and only then.
    """

    def __init__(self, tokenizer: Any, grammar: str, *, n_vocab: int, stop_ids: Collection[int]):
        require("llguidance")
        import llguidance
        import llguidance.hf

        if not stop_ids:
            raise ValueError("TokenGrammar needs at least one stop id: the grammar allows it once the reply is whole")
        self.grammar, self.n_vocab = grammar, n_vocab
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=n_vocab, eos_token=sorted(stop_ids))
        self.compiled = llguidance.LLMatcher.grammar_from_lark(grammar)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(self.compiled, self.tokenizer)
        if is_error:
            raise ValueError(f"invalid grammar for constrained decoding: {'; '.join(messages)}")

    @classmethod
    def for_model(
        cls, tokenizer: Any, model: Any, grammar: str | Callable[[frozenset[str]], str], stop_ids: Collection[int]
    ) -> TokenGrammar:
        """``grammar`` compiled for ``model``'s logits: a Lark grammar, or a function of the tokenizer's
        :func:`added_tokens` that returns one (:func:`harness.manager.wire.call_grammar` is one)."""
        text = grammar(added_tokens(tokenizer)) if callable(grammar) else grammar
        n_vocab = int(model.get_output_embeddings().weight.shape[0])
        return cls(tokenizer, text, n_vocab=n_vocab, stop_ids=stop_ids)

    def matcher(self) -> Any:
        """A fresh ``llguidance.LLMatcher`` at the grammar's start."""
        import llguidance

        return llguidance.LLMatcher(self.tokenizer, self.compiled)

    def accepts(self, ids: list[int]) -> bool:
        """Whether ``ids`` (a reply's ids, without the stop token) are a whole sentence of the grammar."""
        matcher = self.matcher()
        return matcher.consume_tokens(list(ids)) and matcher.is_accepting()

    def mask(self, matcher: Any, scores: Any) -> Any:
        """``scores`` (a 1-D or 2-D tensor of one row's logits) with every token ``matcher`` forbids next at -inf."""
        import llguidance.torch
        import numpy
        import torch

        bitmask = llguidance.torch.allocate_token_bitmask(1, self.n_vocab)
        llguidance.torch.fill_next_token_bitmask(matcher, bitmask, 0)
        # one bit per token, little-endian within each int32 word (unpacked here: llguidance's own helper is a
        # torch.compile kernel whose first calls take seconds on CPU)
        bits = numpy.unpackbits(bitmask[0].numpy().view(numpy.uint8), bitorder="little")[: scores.shape[-1]]
        allowed = torch.from_numpy(bits.astype(bool)).to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))

    def advance(self, matcher: Any, ids: list[int]) -> None:
        """Feed the sampled ``ids`` to ``matcher``; a token it had forbidden raises ``RuntimeError``. A matcher that
        has stopped (the sentence is whole: only a stop id was allowed) takes nothing more."""
        if ids and not matcher.is_stopped() and not matcher.consume_tokens(list(ids)):
            raise RuntimeError(f"grammar matcher rejected a token it had allowed: {matcher.get_error()}")

    def logits_processor(self, prompt_len: int) -> Any:
        """A ``transformers`` logits processor for one reply of a batch-1 ``generate`` whose prompt has
        ``prompt_len`` ids (the ids after them are the reply so far)."""
        return _GrammarLogitsProcessor(self, prompt_len)


class _GrammarLogitsProcessor:
    """Feeds the reply's new ids to a matcher and masks the logits of the tokens it forbids (batch size 1)."""

    def __init__(self, grammar: TokenGrammar, prompt_len: int):
        self.grammar, self.prompt_len = grammar, prompt_len
        self.matcher = grammar.matcher()
        self.fed = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[0] != 1:
            raise ValueError(f"grammar-constrained decoding handles one sequence at a time, got {input_ids.shape[0]}")
        reply = input_ids[0, self.prompt_len :].tolist()
        self.grammar.advance(self.matcher, reply[self.fed :])
        self.fed = len(reply)
        return self.grammar.mask(self.matcher, scores)
