"""The transformers generation engine for rollouts (CPU, or a GPU without vLLM) and the policy's log-probabilities.

- :class:`TransformersEngine`: plain sampling with the trainer's own model (no ``generate`` call): temperature only,
  as TRL's loss scales logits by the same temperature, so the sampling log-probabilities are the policy's. Two KV
  caches make CPU rollouts cheap: the system turn with the tools (about 3.4k of every prompt's tokens, the same for
  every activation) is prefilled once per optimizer step and copied into each rollout, and within a rollout each call
  feeds only the ids added since the last one (the env's ``<tool_response>`` turn).
  :meth:`TransformersEngine.generate_many` answers a wave of requests (:mod:`training.rl.waves`): a lone request
  from its rollout's session, a group's shared first request (``n`` responses to one context) with
  :meth:`TransformersEngine.sample_many` (the context prefilled once, the rows decoded together), several requests
  as one left-padded batch.
- :func:`completion_logprobs`, :func:`sequence_logprobs`: the policy's log-probabilities of a completion.

The vLLM engine (GPUs) and the weight-sync check are in :mod:`training.rl.vllm_engine`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from training.rl.rollout import SampleRequest

logger = logging.getLogger(__name__)


class TransformersEngine:
    """Samples from a causal LM in this process (see the module docstring).

    Args:
        model: the policy (``transformers`` causal LM); put in eval mode while sampling, restored afterwards.
        eos_id: the id that ends a response (``<|im_end|>``).
        prefix_ids: ids every prompt starts with (the system turn); their KV cache is built by :meth:`refresh`.
        temperature: logits are divided by it before sampling.
        grammar: a :class:`harness.grammar.TokenGrammar` (with ``eos_id`` among its stop ids): every response is
            sampled under it (a fresh matcher per response), and the log-probabilities returned are those of the
            masked distribution it was drawn from. None: free sampling.
    """

    def __init__(
        self,
        model: Any,
        eos_id: int,
        prefix_ids: list[int] | None = None,
        temperature: float = 1.0,
        grammar: Any = None,
    ):
        if temperature <= 0:
            raise ValueError(f"temperature={temperature} must be > 0 (sampling); TRL's loss divides logits by it too")
        self.model, self.eos_id, self.temperature, self.grammar = model, eos_id, temperature, grammar
        self.prefix_ids = list(prefix_ids or [])
        self._prefix_cache: Any = None

    def refresh(self) -> None:
        """Forget the system-turn cache (the weights changed); the next session rebuilds it."""
        self._prefix_cache = None

    def release(self) -> None:
        """Nothing to give back after the rollouts: the engine is the trainer's own model."""

    def session(self) -> _CachedSession:
        return _CachedSession(self)

    def sample_many(
        self, context_ids: list[int], n: int, max_new_tokens: int, temperature: float | None = None
    ) -> list[tuple[list[int], list[float]]]:
        """``n`` independent responses to ``context_ids``: the context is prefilled once (on top of the system-turn
        cache when it starts with ``prefix_ids``), then the ``n`` rows are decoded together, one batched forward per
        step. Each row is sampled as in a session (``log_softmax(logits / temperature)``, the exponential race) and
        stops at ``eos_id`` (kept as its last id) or after ``max_new_tokens`` ids; a row that ended leaves the batch.
        Returns each row's ids and their log-probabilities at ``temperature`` (None: the engine's)."""
        import torch

        if n < 1:
            raise ValueError(f"n={n}: sample_many needs at least one row")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens}: sample_many needs a budget of at least one id")
        if not context_ids:
            raise ValueError("sample_many needs a non-empty context")
        temperature = self.temperature if temperature is None else temperature
        if temperature <= 0:
            raise ValueError(f"temperature={temperature} must be > 0 (sampling)")
        ids: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        training = self.model.training
        self.model.eval()
        try:
            cache, fed = None, 0
            prefix = self.prefix_ids
            if prefix and context_ids[: len(prefix)] == prefix and len(context_ids) > len(prefix):
                cache, fed = copy.deepcopy(self.prefix_cache()), len(prefix)
            logits, cache = self.forward(list(context_ids[fed:]), cache)
            cache.batch_repeat_interleave(n)
            logits = logits[None].repeat(n, 1)
            alive = list(range(n))  # the rows still decoding, in the order of the batch
            matchers = [self.grammar.matcher() for _ in range(n)] if self.grammar is not None else None
            for step in range(max_new_tokens):
                if matchers is not None:
                    logits = torch.stack([self.grammar.mask(matchers[r], logits[i]) for i, r in enumerate(alive)])
                logp = torch.log_softmax(logits / temperature, dim=-1)
                # p / Exp(1) noise has its argmax distributed as p, row by row (as in _CachedSession)
                tokens = torch.argmax(logp.exp() / torch.empty_like(logp).exponential_(), dim=-1)
                chosen = logp.gather(-1, tokens[:, None])[:, 0].tolist()
                tokens = tokens.tolist()
                keep = []
                for i, (row, token) in enumerate(zip(alive, tokens, strict=True)):
                    ids[row].append(token)
                    logprobs[row].append(chosen[i])
                    if matchers is not None:
                        self.grammar.advance(matchers[row], [token])
                    if token != self.eos_id:
                        keep.append(i)
                if not keep or step == max_new_tokens - 1:
                    break
                if len(keep) < len(alive):
                    cache.batch_select_indices(torch.tensor(keep, device=self.model.device))
                    alive, tokens = [alive[i] for i in keep], [tokens[i] for i in keep]
                logits, cache = self.forward_rows(tokens, cache)
        finally:
            self.model.train(training)
        return list(zip(ids, logprobs, strict=True))

    def generate_many(
        self, requests: Sequence[SampleRequest], sessions: Sequence[Any] | None = None
    ) -> list[list[tuple[list[int], list[float]]]]:
        """The ``n`` responses (ids, log-probabilities) to each of ``requests``, sampled together.

        One request with ``n`` 1 and a session (``sessions``, one per request or None) is answered by that session
        (its KV cache: only the ids added since its last call are fed); one request with ``n`` > 1 by
        :meth:`sample_many`. Several requests are one padded batch (:meth:`_sample_rows`): each context prefilled once
        (its ``n`` rows share that prefill), the rows decoded together. Sampling, stopping and log-probabilities are a
        session's, row by row."""
        if len(requests) == 1:
            (request,), session = requests, sessions[0] if sessions else None
            if request.n == 1 and session is not None:
                return [[session.sample(request.context_ids, request.max_new_tokens)]]
            return [self.sample_many(request.context_ids, request.n, request.max_new_tokens)]
        rows = self._sample_rows(requests, sessions)
        out, at = [], 0
        for request in requests:
            out.append(rows[at : at + request.n])
            at += request.n
        return out

    def _sample_rows(
        self, requests: Sequence[SampleRequest], sessions: Sequence[Any] | None = None
    ) -> list[tuple[list[int], list[float]]]:
        """:meth:`generate_many`'s padded batch, prefilled one of two ways, then decoded together (a row leaving the
        batch at ``eos_id`` or at its request's budget); returns the rows in request order, ``n`` per request.

        - Every request with ``n`` 1 and a session of this engine: each session feeds only its new ids on its own
          KV cache (which then holds the context, as for its next call), and the rows decode on a copy of those
          caches stacked left-padded, ``(rows, heads, longest, head_dim)`` per layer, with an attention mask.
        - Otherwise the contexts after the system-turn cache (when every context starts with ``prefix_ids``) are
          left-padded to one width, ``(contexts, width)``, with an attention mask over the cached prefix and position
          ids that skip the padding, so each row sees what it would see alone; the KV cache rows are then repeated
          ``n`` times per request."""
        import torch

        if not requests or any(r.n < 1 or r.max_new_tokens < 1 or not r.context_ids for r in requests):
            raise ValueError("generate_many needs non-empty contexts, n >= 1 and max_new_tokens >= 1 per request")
        training = self.model.training
        self.model.eval()
        try:
            own = sessions is not None and all(
                r.n == 1 and isinstance(s, _CachedSession) and s.engine is self
                for r, s in zip(requests, sessions, strict=True)
            )
            if own:
                logits, cache, mask, position = self._prefill_sessions(requests, sessions)  # type: ignore[arg-type]
            else:
                logits, cache, mask, position = self._prefill_padded(requests)
            budgets = [r.max_new_tokens for r in requests for _ in range(r.n)]
            rows: list[tuple[list[int], list[float]]] = [([], []) for _ in budgets]
            alive = list(range(len(budgets)))
            matchers = [self.grammar.matcher() for _ in budgets] if self.grammar is not None else None
            while True:
                if matchers is not None:
                    logits = torch.stack([self.grammar.mask(matchers[r], logits[i]) for i, r in enumerate(alive)])
                logp = torch.log_softmax(logits / self.temperature, dim=-1)
                tokens = torch.argmax(logp.exp() / torch.empty_like(logp).exponential_(), dim=-1)  # as in a session
                chosen = logp.gather(-1, tokens[:, None])[:, 0].tolist()
                keep = []
                for i, (row, token) in enumerate(zip(alive, tokens.tolist(), strict=True)):
                    rows[row][0].append(token)
                    rows[row][1].append(chosen[i])
                    if matchers is not None:
                        self.grammar.advance(matchers[row], [token])
                    if token != self.eos_id and len(rows[row][0]) < budgets[row]:
                        keep.append(i)
                if not keep:
                    break
                if len(keep) < len(alive):
                    kept = torch.tensor(keep, device=self.model.device)
                    cache.batch_select_indices(kept)
                    alive, tokens, mask, position = [alive[i] for i in keep], tokens[kept], mask[kept], position[kept]
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                position = position + 1
                with torch.no_grad():
                    out = self.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=position[:, None],
                                     cache=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
                logits, cache = out.logits[:, -1].float(), out.cache
        finally:
            self.model.train(training)
        return rows

    def _prefill_padded(self, requests: Sequence[SampleRequest]) -> tuple[Any, Any, Any, Any]:
        """Logits ``(rows, vocab)``, KV cache, attention mask ``(rows, length)`` and last position ``(rows,)`` of the
        contexts prefilled as one left-padded batch on the system-turn cache (see :meth:`_sample_rows`)."""
        import torch

        device, prefix = self.model.device, self.prefix_ids
        cached = bool(prefix) and all(
            list(r.context_ids[: len(prefix)]) == prefix and len(r.context_ids) > len(prefix) for r in requests
        )
        fed = len(prefix) if cached else 0
        rests = [list(r.context_ids[fed:]) for r in requests]
        width = max(len(rest) for rest in rests)
        ids = torch.tensor([[0] * (width - len(r)) + r for r in rests], device=device)
        rest_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rests], device=device)
        mask = torch.cat([torch.ones(len(rests), fed, dtype=rest_mask.dtype, device=device), rest_mask], dim=1)
        positions = (fed + rest_mask.cumsum(1) - 1).clamp(min=0)
        cache = None
        if cached:
            cache = copy.deepcopy(self.prefix_cache())
            cache.batch_repeat_interleave(len(rests))
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                             logits_to_keep=1)  # fmt: skip
        index = torch.tensor([i for i, r in enumerate(requests) for _ in range(r.n)], device=device)
        out.cache.batch_select_indices(index)
        return out.logits[index, -1].float(), out.cache, mask[index], positions[index, -1]

    def _prefill_sessions(
        self, requests: Sequence[SampleRequest], sessions: Sequence[_CachedSession]
    ) -> tuple[Any, Any, Any, Any]:
        """As :meth:`_prefill_padded`, but each session feeds only its new ids on its own cache, and the batch decodes
        on a copy of the sessions' caches stacked left-padded (see :meth:`_sample_rows`)."""
        import torch
        from transformers import DynamicCache

        logits = [session.catch_up(r.context_ids) for r, session in zip(requests, sessions, strict=True)]
        lengths = [len(session.fed) for session in sessions]
        longest, device = max(lengths), self.model.device
        layers = []
        for layer in zip(*(session.cache.layers for session in sessions), strict=True):
            keys, values = [], []
            for length, part in zip(lengths, layer, strict=True):
                pad = (0, 0, longest - length, 0)  # (head_dim: none, seq: at the left)
                keys.append(torch.nn.functional.pad(part.keys, pad))
                values.append(torch.nn.functional.pad(part.values, pad))
            layers.append((torch.cat(keys), torch.cat(values)))
        mask = torch.tensor([[0] * (longest - n) + [1] * n for n in lengths], device=device)
        position = torch.tensor([n - 1 for n in lengths], device=device)
        return torch.stack(logits), DynamicCache(layers, config=self.model.config), mask, position

    def forward(self, ids: list[int], cache: Any) -> tuple[torch.Tensor, Any]:
        """Logits of the last position after feeding ``ids`` on top of ``cache`` (None: empty), and the cache."""
        import torch

        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor([ids], device=self.model.device), cache=cache, use_cache=True, logits_to_keep=1
            )
        return out.logits[0, -1].float(), out.cache

    def forward_rows(self, tokens: list[int], cache: Any) -> tuple[torch.Tensor, Any]:
        """Logits ``(len(tokens), vocab)`` after feeding one id per row of ``cache`` (a batch of that many rows)."""
        import torch

        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor(tokens, device=self.model.device)[:, None], cache=cache, use_cache=True,
                logits_to_keep=1,
            )  # fmt: skip
        return out.logits[:, -1].float(), out.cache

    def prefix_cache(self) -> Any:
        if self._prefix_cache is None and self.prefix_ids:
            _, self._prefix_cache = self.forward(self.prefix_ids, None)
        return self._prefix_cache

    def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """Log-probability of each completion id after the prompt (at the engine's temperature)."""
        return sequence_logprobs(self.model, prompt_ids, completion_ids, self.temperature)


class _CachedSession:
    """One rollout's KV cache over its growing context."""

    def __init__(self, engine: TransformersEngine):
        self.engine = engine
        self.cache: Any = None
        self.fed: list[int] = []  # ids whose keys and values are in the cache

    def catch_up(self, context_ids: list[int]) -> Any:
        """Feed the ids of ``context_ids`` not yet in the cache (nothing sampled); the logits after the last one."""
        self._start(context_ids)
        logits, self.cache = self.engine.forward(list(context_ids[len(self.fed) :]), self.cache)
        self.fed = list(context_ids)
        return logits

    def _start(self, context_ids: list[int]) -> None:
        engine = self.engine
        if self.cache is None:
            prefix = engine.prefix_ids
            if prefix and context_ids[: len(prefix)] == prefix and len(context_ids) > len(prefix):
                self.cache, self.fed = copy.deepcopy(engine.prefix_cache()), list(prefix)
        if context_ids[: len(self.fed)] != self.fed or len(context_ids) == len(self.fed):
            raise ValueError("each call's context must extend the ids already fed to this session by at least one id")

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        import torch

        engine = self.engine
        self._start(context_ids)
        training = engine.model.training
        engine.model.eval()
        try:
            logits, self.cache = engine.forward(context_ids[len(self.fed) :], self.cache)
            ids: list[int] = []
            logprobs: list[float] = []
            matcher = engine.grammar.matcher() if engine.grammar is not None else None
            for step in range(max_new_tokens):
                if matcher is not None:
                    logits = engine.grammar.mask(matcher, logits)
                logp = torch.log_softmax(logits / engine.temperature, dim=-1)
                # p / Exp(1) noise has its argmax distributed as p (cheaper than torch.multinomial over the vocabulary)
                token = int(torch.argmax(logp.exp() / torch.empty_like(logp).exponential_()))
                ids.append(token)
                logprobs.append(float(logp[token]))
                if matcher is not None:
                    engine.grammar.advance(matcher, [token])
                if token == engine.eos_id or step == max_new_tokens - 1:
                    break
                logits, self.cache = engine.forward([token], self.cache)
        finally:
            engine.model.train(training)
        self.fed = list(context_ids) + ids[:-1]  # the last sampled id is not fed yet
        return ids, logprobs


def completion_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, keep: int, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities and entropies of the last ``keep`` ids of each row, ``(batch, keep)`` each (0 at padding).

    Each row runs alone without its padding (the ones of ``attention_mask``, ``(batch, seq_len)``, must be one
    contiguous run: left-padded prompt, right-padded completion), so attention takes its unmasked causal path, and only
    the logits of the kept positions are computed (``logits_to_keep``): cheap for the short completions of CPU runs
    however long the prompt. Logits are divided by ``temperature`` as when sampling.
    """
    import torch

    rows = []
    for i in range(input_ids.size(0)):
        valid = torch.ones_like(input_ids[i]) if attention_mask is None else attention_mask[i]
        where = valid.nonzero()[:, 0]
        start, end = int(where[0]), int(where[-1]) + 1
        right_pad = input_ids.size(1) - end
        ids = input_ids[i : i + 1, start:end]
        logits = model(input_ids=ids, logits_to_keep=keep - right_pad + 1).logits[0, :-1]
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        chosen = logp.gather(-1, ids[0, end - start - (keep - right_pad) :, None])[:, 0]
        entropy = -(logp.exp() * logp).sum(-1)
        rows.append(torch.nn.functional.pad(torch.stack([chosen, entropy]), (0, right_pad)))
    out = torch.stack(rows)  # (batch, 2, keep)
    return out[:, 0], out[:, 1]


def sequence_logprobs(model: Any, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0):
    """Log-probabilities of ``completion_ids`` after ``prompt_ids`` under ``model`` (one full forward, no cache)."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=model.device)
    with torch.no_grad():
        logps, _ = completion_logprobs(model, ids, None, len(completion_ids), temperature)
    return logps[0].tolist()
