"""Settings of a model-backed manager policy, applied after it is built (by ``stateguard run`` and ``stateguard
evaluate``, and by code that builds policies itself): the reply token cap (:func:`limit_reply_tokens`) and decoding
under the action grammar (:func:`constrain_actions`). :func:`model_backend` finds the chat backend a policy asks."""

from __future__ import annotations

from typing import Any


class ModelSettingError(ValueError):
    """A setting that does not apply to the policy it was given (the message names the policy and what applies)."""


def limit_reply_tokens(policy: Any, n: int) -> None:
    """Cap the reply length of a model-backed policy (``max_new_tokens`` in process, ``max_tokens`` on an endpoint)."""
    if n < 1:
        raise ModelSettingError(f"--manager-max-tokens {n}: use a positive number of tokens.")
    backend = getattr(policy, "backend", None)
    for attr in ("max_new_tokens", "max_tokens"):
        if backend is not None and hasattr(backend, attr):
            setattr(backend, attr, n)
            return
    raise ModelSettingError(
        f"--manager-max-tokens applies to model-backed managers (llm, freeform, windowed); not to {policy.name}."
    )


def model_backend(policy: Any) -> Any:
    """The chat backend a model policy asks (flat policies: ``backend``; the hier manager: ``tier1``), else None."""
    return getattr(policy, "backend", None) or getattr(policy, "tier1", None)


def constrain_actions(policy: Any, legal_only: bool = False, decide_after_probe: bool = False) -> None:
    """Decode every reply of an in-process model manager (llm-hf, hier:llm-hf) under the action grammar
    (:func:`harness.manager.wire.call_grammar`, :mod:`harness.grammar`): each reply is one well-formed action.

    For a flat ``llm-hf`` manager the grammar can also follow each input
    (:func:`harness.manager.llm_policy.actions_now`): ``legal_only`` allows only the actions the runtime lists as
    legal now (the prompt lists them too), ``decide_after_probe`` neither decision before a probe of the activation
    ran. Each distinct grammar is compiled once."""
    import functools

    from harness.manager.llm_policy import LLMPolicy, actions_now
    from harness.manager.wire import call_grammar

    backend = model_backend(policy)
    if backend is None or not hasattr(backend, "set_grammar"):
        raise ModelSettingError(
            f"constrained decoding applies to in-process model managers (llm-hf:PATH, hier:llm-hf:PATH); not to "
            f"{policy.name}. On a vLLM endpoint pass the grammar with the request instead "
            "(OpenAIChatBackend(grammar=...), a server started with --structured-outputs-config.backend guidance)."
        )
    backend.set_grammar(call_grammar)
    if not (legal_only or decide_after_probe):
        return
    if not isinstance(policy, LLMPolicy):
        raise ModelSettingError(
            f"legal_only / decide_after_probe follow a flat llm manager's inputs; {policy.name} is not one (the hier "
            "manager's tier 0 writes its checks and probes itself)"
        )

    def before_reply(inp: Any) -> None:
        names = actions_now(inp, decide_after_probe)
        backend.set_grammar(functools.partial(call_grammar, names=names or None))

    policy.before_reply = before_reply
