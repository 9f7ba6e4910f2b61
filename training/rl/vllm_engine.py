"""The vLLM generation engine for rollouts (GPUs; nothing here imports vllm) and the weight-sync check.

- :class:`VLLMEngine`: the rollouts' contexts go to TRL's vLLM backend as token ids, a wave's requests together
  (:meth:`VLLMEngine.generate_many`), with no collective call (so processes may play different numbers of
  responses): ``vllm_mode: server`` uses TRL's ``VLLMClient`` (a ``vllm serve`` process,
  :func:`vllm_serve_command`), ``colocate`` the in-process ``vllm.LLM`` TRL built. Nothing imports vLLM unless this
  engine is used; :func:`vllm_settings` checks the configuration without it.
- :func:`check_weight_sync`: the log-probabilities of a fixed probe completion under the trainer's model and under
  the engine; a gap above the threshold means the engine samples from other weights (a failed sync) and is logged
  as a warning. Meaningful only for an engine with its own copy of the weights (vLLM, both modes); the transformers
  engine (:mod:`training.rl.engines`) samples from the trainer's model itself.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harness.import_utils import require

if TYPE_CHECKING:
    from training.rl.rollout import SampleRequest

logger = logging.getLogger(__name__)

VLLM_MODES = ("server", "colocate")


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
