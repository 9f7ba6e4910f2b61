"""Settings of a model-backed manager policy, applied after it is built (by ``stateguard run`` and ``stateguard
evaluate``, and by code that builds policies itself): the reply token cap (:func:`limit_reply_tokens`) and decoding
under the action grammar (:func:`constrain_actions`). :func:`model_backend` finds the chat backend a policy asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ModelSettingError(ValueError):
    """A setting that does not apply to the policy it was given (the message names the policy and what applies)."""


def limit_reply_tokens(policy: Any, n: int) -> None:
    """Cap the reply length of a model-backed policy, the hier manager's tier 1 too (``max_new_tokens`` in process,
    ``max_tokens`` on an endpoint)."""
    if n < 1:
        raise ModelSettingError(f"--manager-max-tokens {n}: use a positive number of tokens.")
    backend = model_backend(policy)
    for attr in ("max_new_tokens", "max_tokens"):
        if backend is not None and hasattr(backend, attr):
            setattr(backend, attr, n)
            return
    raise ModelSettingError(
        f"--manager-max-tokens applies to model-backed managers (llm, freeform, windowed, hier with a model); not to "
        f"{policy.name}."
    )


def model_backend(policy: Any) -> Any:
    """The chat backend a model policy asks (flat policies: ``backend``; the hier manager: ``tier1``), else None."""
    return getattr(policy, "backend", None) or getattr(policy, "tier1", None)


def constrain_actions(
    policy: Any, legal_only: bool = False, actions: Callable[[Any], list[str]] | None = None
) -> None:
    """Decode every reply of a model manager that answers in actions under the action grammar
    (:func:`harness.manager.wire.call_grammar`): each reply is one well-formed action. In process (llm-hf,
    hier:llm-hf) the backend masks every token the grammar forbids (:mod:`harness.grammar`); on an endpoint (llm:URL,
    hier:llm:URL) each request carries the grammar as vLLM's guided decoding (``structured_outputs.grammar``; start
    the server with ``--structured-outputs-config.backend guidance``). A policy whose replies are not actions names
    its own grammar function in ``reply_grammar`` (the hier manager whose tier 1 writes checks:
    :func:`harness.manager.hier_checks.checks_grammar`), used in their place.

    ``legal_only`` (a flat llm manager): each reply's grammar allows only the actions the runtime lists as legal now
    (``actions``, by default :func:`harness.manager.llm_policy.actions_now`; the prompt lists them too), set through
    the policy's ``before_reply`` hook. In process each distinct grammar is compiled once."""
    import functools

    from harness.manager.llm_policy import LLMPolicy, actions_now
    from harness.manager.wire import call_grammar

    backend = model_backend(policy)
    if backend is None or not hasattr(backend, "set_grammar"):
        raise ModelSettingError(
            "constrained decoding applies to model managers that answer in actions (llm-hf:PATH, llm:URL, "
            f"hier:llm-hf:PATH, hier:llm:URL); not to {policy.name}."
        )
    backend.set_grammar(getattr(policy, "reply_grammar", None) or call_grammar)
    if not legal_only:
        return
    if not isinstance(policy, LLMPolicy):
        raise ModelSettingError(
            f"legal actions only follows a flat llm manager's inputs; {policy.name} is not one (the hier manager's "
            "tier 0 writes its checks and probes itself)"
        )

    allowed = actions or actions_now

    def before_reply(inp: Any) -> None:
        names = allowed(inp)
        backend.set_grammar(functools.partial(call_grammar, names=names or None))

    policy.before_reply = before_reply
