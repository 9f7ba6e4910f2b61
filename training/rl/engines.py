"""Generation engines for rollouts: transformers on CPU, vLLM (server or colocate) on GPUs, and the weight-sync check.

- :class:`TransformersEngine`: plain sampling with the trainer's own model (no ``generate`` call): temperature only,
  as TRL's loss scales logits by the same temperature, so the sampling log-probabilities are the policy's. Two KV
  caches make CPU rollouts cheap: the system turn with the tools (about 3.4k of every prompt's tokens, the same for
  every activation) is prefilled once per optimizer step and copied into each rollout, and within a rollout each call
  feeds only the ids added since the last one (the env's ``<tool_response>`` turn).
  :meth:`TransformersEngine.generate_many` answers a wave of requests (:mod:`training.rl.waves`): a lone request
  from its rollout's session, a group's shared first request (``n`` responses to one context) with
  :meth:`TransformersEngine.sample_many` (the context prefilled once, the rows decoded together), several requests
  as one left-padded batch.
- :class:`VLLMEngine`: the rollouts' contexts go to TRL's vLLM backend as token ids, a wave's requests together
  (:meth:`VLLMEngine.generate_many`), with no collective call (so processes may play different numbers of
  responses): ``vllm_mode: server`` uses TRL's ``VLLMClient`` (a ``vllm serve`` process,
  :func:`vllm_serve_command`), ``colocate`` the in-process ``vllm.LLM`` TRL built. Nothing imports vLLM unless this
  engine is used; :func:`vllm_settings` checks the configuration without it.
- :func:`check_weight_sync`: the log-probabilities of a fixed probe completion under the trainer's model and under
  the engine; a gap above the threshold means the engine samples from other weights (a failed sync) and is logged
  as a warning. Meaningful only for an engine with its own copy of the weights (vLLM, both modes); the transformers
  engine samples from the trainer's model itself.
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harness.import_utils import require

if TYPE_CHECKING:
    import torch

    from training.rl.rollout import SampleRequest

logger = logging.getLogger(__name__)

VLLM_MODES = ("server", "colocate")


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


# ---------------------------------------------------------------- vLLM (GPU only; nothing here imports vllm)
def vllm_settings(config: Any) -> dict[str, Any]:
    """The vLLM part of a ``GRPOConfig`` as plain values, checked without vLLM installed.

    ``use_vllm`` False gives ``{"use_vllm": False}``. Otherwise the mode (``server`` or ``colocate``) and its
    settings: the server's base URL (``vllm_server_base_url`` or ``http://host:port``) and timeout, or the colocated
    engine's GPU memory share and tensor-parallel size. A wrong mode or share is a ``ValueError`` naming the field.
    """
    if not config.use_vllm:
        return {"use_vllm": False}
    mode = config.vllm_mode
    if mode not in VLLM_MODES:
        raise ValueError(f"vllm_mode={mode!r} is not one of {', '.join(VLLM_MODES)}; pick server or colocate")
    settings: dict[str, Any] = {"use_vllm": True, "vllm_mode": mode}
    if mode == "server":
        base_url = config.vllm_server_base_url or f"http://{config.vllm_server_host}:{config.vllm_server_port}"
        settings.update(base_url=base_url, timeout_s=config.vllm_server_timeout)
    else:
        share = config.vllm_gpu_memory_utilization
        if not 0 < share <= 1:
            raise ValueError(f"vllm_gpu_memory_utilization={share} must lie in (0, 1]; e.g. 0.3 next to training")
        if config.vllm_tensor_parallel_size != 1:  # TRL's colocated TP group must generate in lockstep
            raise ValueError(
                f"vllm_tensor_parallel_size={config.vllm_tensor_parallel_size} with vllm_mode: colocate: the manager "
                "rollouts send one request per response from each process independently, so a colocated engine "
                "must live on one GPU; set vllm_tensor_parallel_size: 1, or use vllm_mode: server for a sharded model"
            )
        settings.update(gpu_memory_utilization=share, tensor_parallel_size=config.vllm_tensor_parallel_size)
    return settings


VLLM_SERVER_FLAGS = (
    "--weight-transfer-config", '{"backend": "nccl"}', "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1",
)  # fmt: skip
"""What TRL's ``VLLMClient`` needs of a ``vllm serve`` process besides the model: the NCCL weight-transfer engine it
pushes the trained weights through, log-probabilities after temperature (processed), no cap on their number."""


def vllm_serve_command(model: str, config: Any, *, gpus: str = "0") -> list[str]:
    """The ``vllm serve`` command for ``vllm_mode: server`` (run it on GPUs the trainer does not use): vLLM's own
    server in dev mode (``VLLM_SERVER_DEV_MODE=1`` exposes the weight-transfer endpoints) with
    :data:`VLLM_SERVER_FLAGS`, the command TRL 1.16's deprecated ``trl vllm-serve`` itself runs."""
    settings = vllm_settings(config)
    if settings.get("vllm_mode") != "server":
        raise ValueError("vllm_serve_command is for use_vllm: true with vllm_mode: server")
    return [
        f"CUDA_VISIBLE_DEVICES={gpus}", "VLLM_SERVER_DEV_MODE=1", "vllm", "serve", model,
        "--port", str(config.vllm_server_port), "--tensor-parallel-size", str(config.vllm_tensor_parallel_size),
        *VLLM_SERVER_FLAGS,
    ]  # fmt: skip


class VLLMEngine:
    """Samples through TRL's vLLM backend of ``trainer`` (see the module docstring); GPU only.

    What TRL's own generation does around a vLLM call and a ``rollout_func`` would otherwise skip, this engine does:

    - ``server``: TRL connects the main process only (it also holds the NCCL group that pushes weights); every other
      process gets an HTTP-only ``VLLMClient`` of its own, and :meth:`refresh` waits for all processes so that no
      process samples before the main one has pushed this step's weights.
    - ``colocate`` with ``vllm_enable_sleep_mode``: :meth:`refresh` wakes the KV cache (and re-pushes the weights if
      they were discarded since TRL's sync), :meth:`release` puts the engine back to sleep for the optimizer step.

    :meth:`score` reads vLLM's log-probabilities of a *given* completion (prompt log-probabilities: the server's
    ``/v1/completions`` through ``VLLMClient.get_sequence_logprobs``, or ``prompt_logprobs`` in colocate) for the
    weight-sync self-check.
    """

    def __init__(self, trainer: Any, eos_id: int, temperature: float = 1.0, client_factory: Callable | None = None):
        require("vllm")
        self.generation = trainer.vllm_generation
        self.accelerator = trainer.accelerator
        self.mode = trainer.args.vllm_mode
        self.sleeps = self.mode == "colocate" and bool(getattr(trainer.args, "vllm_enable_sleep_mode", False))
        self.eos_id, self.temperature = eos_id, temperature
        self.client = self._server_client(client_factory) if self.mode == "server" else None

    def _server_client(self, factory: Callable | None) -> Any:
        client = getattr(self.generation, "vllm_client", None)
        if client is not None:  # the main process: TRL's client
            return client
        if factory is None:
            from trl.generation.vllm_client import VLLMClient as factory
        g = self.generation
        base_url = g.server_base_url or f"http://{g.server_host}:{g.server_port}"
        return factory(base_url=base_url, connection_timeout=g.server_timeout)

    def refresh(self) -> None:
        """Make the engine ready to sample this step's weights (TRL pushed them just before ``rollout_func``)."""
        if self.mode == "server":
            self.accelerator.wait_for_everyone()
        elif self.sleeps:
            if getattr(self.generation, "_llm_weights_sleeping", False):
                self.generation.sync_weights()  # level-2 sleep discarded them: push the training weights again
            self.generation.llm.wake_up(tags=["kv_cache"])

    def release(self) -> None:
        """After the rollouts: give the GPU memory back to training (colocate sleep mode), as TRL's generation does."""
        if self.sleeps:
            self.generation.llm.sleep(level=2)
            self.generation._llm_weights_sleeping = True

    def session(self) -> _VLLMSession:
        return _VLLMSession(self)

    def request(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        """One sampled response to ``context_ids``: its ids and their log-probabilities."""
        if self.mode == "server":
            out = self.client.generate(
                prompts=[list(context_ids)], n=1, temperature=self.temperature, max_tokens=max_new_tokens, logprobs=0
            )
            return list(out["completion_ids"][0]), [lp[0] for lp in out["logprobs"][0]]
        from vllm import SamplingParams

        params = SamplingParams(n=1, temperature=self.temperature, max_tokens=max_new_tokens, logprobs=0)
        return _sampled(self._colocate_generate(context_ids, params).outputs[0])

    def generate_many(
        self, requests: Sequence[SampleRequest], sessions: Sequence[Any] | None = None
    ) -> list[list[tuple[list[int], list[float]]]]:
        """The ``n`` responses (ids, log-probabilities) to each of ``requests`` (``sessions`` are not needed: vLLM
        keeps its own prefix cache). ``colocate``: one ``llm.generate`` over every prompt, each with its own
        ``SamplingParams`` (its ``n`` and budget). ``server``: one ``client.generate`` per set of requests with the
        same budget and ``n`` (the client takes one of each per call), in the order they first appear."""
        if self.mode == "server":
            out: list[Any] = [None] * len(requests)
            sets: dict[tuple[int, int], list[int]] = defaultdict(list)
            for i, request in enumerate(requests):
                sets[(request.max_new_tokens, request.n)].append(i)
            for (budget, n), members in sets.items():
                reply = self.client.generate(
                    prompts=[list(requests[i].context_ids) for i in members], n=n, temperature=self.temperature,
                    max_tokens=budget, logprobs=0,
                )  # fmt: skip
                for j, i in enumerate(members):  # the server lists each prompt's n completions together
                    rows = range(j * n, (j + 1) * n)
                    out[i] = [(list(reply["completion_ids"][k]), [lp[0] for lp in reply["logprobs"][k]]) for k in rows]
            return out
        from vllm import SamplingParams, TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(r.context_ids)) for r in requests]
        params = [
            SamplingParams(n=r.n, temperature=self.temperature, max_tokens=r.max_new_tokens, logprobs=0)
            for r in requests
        ]
        outputs = self.generation.llm.generate(prompts, params, use_tqdm=False)
        return [[_sampled(sample) for sample in output.outputs] for output in outputs]

    def _colocate_generate(self, ids: list[int], params: Any) -> Any:
        from vllm import TokensPrompt

        return self.generation.llm.generate([TokensPrompt(prompt_token_ids=list(ids))], params, use_tqdm=False)[0]

    def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """Log-probabilities of ``completion_ids`` after ``prompt_ids`` under vLLM's weights, at temperature 1 (a check
        of the weights, not of the sampling settings; score the trainer side at temperature 1 too). A completion id
        vLLM did not report is ``-inf``, which fails the check loudly."""
        sequence, n_prompt = list(prompt_ids) + list(completion_ids), len(prompt_ids)
        if self.mode == "server":
            out = self.client.get_sequence_logprobs([sequence], [n_prompt], top_logprobs=0, temperature=1.0)
            return [float(step[0]) for step in out["actual_logprobs"][0]]
        from vllm import SamplingParams

        params = SamplingParams(n=1, temperature=1.0, max_tokens=1, prompt_logprobs=0)
        steps = self._colocate_generate(sequence, params).prompt_logprobs[n_prompt:]
        return [
            step[t].logprob if step and t in step else float("-inf")
            for step, t in zip(steps, completion_ids, strict=True)
        ]


def _sampled(sample: Any) -> tuple[list[int], list[float]]:
    """A vLLM completion's ids and each sampled id's own log-probability (not the top entry)."""
    ids = list(sample.token_ids)
    return ids, [step[token].logprob for step, token in zip(sample.logprobs, ids, strict=True)]


class _VLLMSession:
    def __init__(self, engine: VLLMEngine):
        self.engine = engine

    def sample(self, context_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        return self.engine.request(context_ids, max_new_tokens)


# ---------------------------------------------------------------- weight-sync self-check
def weight_sync_gap(trainer_logprobs: list[float], engine_logprobs: list[float]) -> float:
    """Mean absolute difference of two log-probability lists of the same probe completion."""
    if len(trainer_logprobs) != len(engine_logprobs) or not trainer_logprobs:
        raise ValueError(
            f"the probe has {len(trainer_logprobs)} trainer and {len(engine_logprobs)} engine log-probabilities; "
            "score the same non-empty completion on both sides"
        )
    return sum(abs(a - b) for a, b in zip(trainer_logprobs, engine_logprobs, strict=True)) / len(trainer_logprobs)


def check_weight_sync(
    trainer_score: Callable[[list[int], list[int]], list[float]],
    engine_score: Callable[[list[int], list[int]], list[float]],
    probe_prompt: list[int],
    probe_completion: list[int],
    threshold: float,
) -> float:
    """The gap (:func:`weight_sync_gap`) of the probe under the trainer and under the engine; above ``threshold`` a
    warning says the rollout engine is not sampling from the trained weights."""
    gap = weight_sync_gap(trainer_score(probe_prompt, probe_completion), engine_score(probe_prompt, probe_completion))
    if gap > threshold:
        logger.warning(
            "WEIGHT SYNC CHECK FAILED: the rollout engine's log-probabilities of the probe completion differ from the "
            "trainer's by %.4g per token on average (threshold %.4g); rollouts are sampled from other weights than "
            "the ones trained. Check the vLLM weight sync (use_vllm, vllm_mode, sleep mode).", gap, threshold,
        )  # fmt: skip
    return gap
