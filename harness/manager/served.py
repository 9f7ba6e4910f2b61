"""The manager specs whose model answers in actions or checks, built the way their checkpoint is served: the registry's
factories of ``llm``, ``llm-hf``, ``hier`` and ``hier-checks``.

A checkpoint folder may hold ``manager.json`` (:mod:`harness.manager.checkpoint_settings`). For ``llm-hf:PATH``,
``hier:llm-hf:PATH`` and ``hier-checks:llm-hf:PATH`` the factory reads PATH's file before it loads the model, and the
policy follows it, so ``stateguard run``, ``stateguard evaluate`` and every caller of
:func:`harness.manager.policy_registry.get_policy` serve the checkpoint alike:

- ``policy`` / ``writes``: ``hier`` with ``writes: checks`` makes ``hier:llm-hf:PATH`` the check-writing hier manager
  (as ``hier-checks:llm-hf:PATH``, named ``hier-checks-llm-hf`` in the records). A file that contradicts the spec
  (``policy: llm`` under ``hier:``, ``policy: hier`` under ``llm-hf:``, ``writes: decisions`` under
  ``hier-checks:``) raises :class:`~harness.manager.checkpoint_settings.ManagerSettingsError`, one line naming the
  file, the field and the spec to use, before the model loads;
- ``prompt_view``: ``bare`` asks the flat model, or tier 1, without the system message and the tools block
  (:mod:`harness.manager.prompt_view`);
- ``constrained_decoding``: every reply under the grammar of what the model writes
  (:func:`harness.manager.model_settings.constrain_actions`: the action grammar, the checks grammar for
  ``writes: checks``), with ``legal_actions_only`` for the flat manager;
- ``max_new_tokens`` and ``temperature`` (0: greedy): the backend's.

Without the file the policy is built as it always was: the full view, no grammar, the backend's defaults.

Endpoints (``llm:URL``, ``hier:llm:URL``, ``hier-checks:llm:URL``, e.g. after ``stateguard serve``): the factory asks
``GET URL/models`` once (its first model becomes the backend's model id). vLLM lists the folder it serves as the
model's ``root``; when that folder is readable here and holds ``manager.json``, the policy follows it as above. A
server that names no such folder (the CPU stand-in ``transformers serve``, a checkpoint on another machine, a hosted
API) or that does not answer gives no settings, said in one logged line.

The explicit flags of ``stateguard run`` / ``evaluate`` (``--manager-max-tokens``, ``--constrained-decoding``,
``--legal-actions-only``) are applied after, on the built policy, and win. What a policy is actually served with is
:func:`~harness.manager.checkpoint_settings.used_settings` (the file's path among it), kept in every episode record
(``config["manager_settings"]``) and per variant in ``results.json``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.llm import ChatBackend, HFChatBackend, OpenAIChatBackend
from harness.manager.check_writers import GoldChecksPolicy
from harness.manager.checkpoint_settings import (
    ManagerSettings,
    ManagerSettingsError,
    read_manager_settings,
    settings_path,
)
from harness.manager.hier import HierPolicy
from harness.manager.llm_policy import LLMPolicy
from harness.manager.model_settings import constrain_actions
from harness.manager.policy_registry import register_policy
from harness.specs import ManagerSpec

logger = logging.getLogger(__name__)

Found = tuple[ManagerSettings | None, str | None]
"""A checkpoint's settings and the file they were read from (None, None: none)."""


def check_fits(spec: ManagerSpec, settings: ManagerSettings, source: str) -> None:
    """Raise :class:`ManagerSettingsError` when ``settings`` (read from ``source``) serve the model as another
    manager than ``spec`` names; the message names the spec to use."""
    kind = spec.tier1 if spec.name in ("hier", "hier-checks") else spec.name
    hier = f"hier:{kind}:{spec.model}"
    if spec.name in ("llm", "llm-hf") and settings.policy != "llm":
        problem = f"policy={settings.policy!r}: the model is tier 1 of the hier manager"
        fix = f"use --manager {hier}, or set policy llm"
    elif spec.name in ("hier", "hier-checks") and settings.policy != "hier":
        problem = f"policy={settings.policy!r}: the model is the flat llm manager"
        fix = f"use --manager {kind}:{spec.model}, or set policy hier"
    elif spec.name == "hier-checks" and settings.writes != "checks":
        problem = f"writes={settings.writes!r}: tier 1 writes decisions, not checks"
        fix = f"use --manager {hier} (it follows the file), or set writes checks"
    else:
        return
    raise ManagerSettingsError(f"{source}: field {problem}, not --manager {spec}; {fix}")


def folder_settings(spec: ManagerSpec) -> Found:
    """The settings saved with the in-process checkpoint of ``spec`` (checked against it), else ``(None, None)``."""
    settings = read_manager_settings(str(spec.model))
    if settings is None:
        return None, None
    source = str(settings_path(str(spec.model)))
    check_fits(spec, settings, source)
    return settings, source


def endpoint_settings(spec: ManagerSpec, backend: OpenAIChatBackend) -> Found:
    """The settings of the checkpoint the endpoint of ``spec`` serves, when its model list names a folder here that
    holds them (checked against ``spec``), else ``(None, None)`` with one logged line. The listing's first model
    becomes ``backend``'s model id when it has none (:meth:`~harness.llm.OpenAIChatBackend.model_cards`)."""
    try:
        cards = backend.model_cards()
    except Exception as exc:  # a server that does not list its models serves without settings, never fails here
        logger.warning("%s: no model list (%s: %s); served without checkpoint settings", backend.base_url,
                       type(exc).__name__, exc)  # fmt: skip
        return None, None
    if not cards:
        return None, None
    root = cards[0].get("root")
    settings = read_manager_settings(root) if isinstance(root, str) and Path(root).is_dir() else None
    if settings is None:
        logger.info("%s serves %s and names no folder here with a manager.json (a foreign or remote server); "
                    "served without checkpoint settings", backend.base_url, cards[0]["id"])  # fmt: skip
        return None, None
    source = str(settings_path(str(root)))
    check_fits(spec, settings, source)
    return settings, source


def model_backend(spec: ManagerSpec) -> tuple[ChatBackend, ManagerSettings | None, str | None]:
    """The chat backend of ``spec``'s model (in process or an endpoint) with its checkpoint's settings applied (reply
    cap, temperature), the settings and their file. An in-process model loads after its settings are checked."""
    if "llm-hf" in (spec.name, spec.tier1):
        settings, source = folder_settings(spec)
        if settings is None:
            return HFChatBackend(str(spec.model)), None, None
        backend = HFChatBackend(
            str(spec.model), max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
        )
        return backend, settings, source
    endpoint = OpenAIChatBackend(str(spec.model))
    settings, source = endpoint_settings(spec, endpoint)
    if settings is not None:
        endpoint.max_tokens, endpoint.temperature = settings.max_new_tokens, settings.temperature
    return endpoint, settings, source


def serve(policy: LLMPolicy | HierPolicy, settings: ManagerSettings | None, source: str | None):
    """``policy`` decoding as ``settings`` say (the grammar, legal actions only), its settings file recorded."""
    policy.settings_file = source
    if settings is not None and settings.constrained_decoding:
        constrain_actions(policy, legal_only=settings.legal_actions_only)
    return policy


def _view(settings: ManagerSettings | None) -> str:
    return "full" if settings is None else settings.prompt_view


@register_policy("llm")
@register_policy("llm-hf")
def _llm(spec: ManagerSpec) -> LLMPolicy:
    backend, settings, source = model_backend(spec)
    return serve(LLMPolicy(backend, name=spec.name, prompt_view=_view(settings)), settings, source)


def _hier_model(spec: ManagerSpec) -> HierPolicy:
    """``hier:llm[-hf]:MODEL`` and ``hier-checks:llm[-hf]:MODEL``: tier 1 writes checks under ``hier-checks`` or
    when the checkpoint says so, else decisions."""
    backend, settings, source = model_backend(spec)
    writes = "checks" if spec.name == "hier-checks" else (settings.writes if settings is not None else "decisions")
    name = f"hier-checks-{spec.tier1}" if writes == "checks" else f"hier-{spec.tier1}"
    return serve(HierPolicy(backend, name=name, writes=writes, prompt_view=_view(settings)), settings, source)


@register_policy("hier")
def _hier(spec: ManagerSpec) -> HierPolicy:
    return _hier_model(spec) if spec.tier1 in ("llm", "llm-hf") else HierPolicy(None, name="hier-none")


@register_policy("hier-checks")
def _hier_checks(spec: ManagerSpec) -> HierPolicy:
    if spec.tier1 == "gold":
        return GoldChecksPolicy()
    if spec.tier1 in ("llm", "llm-hf"):
        return _hier_model(spec)
    return HierPolicy(None, name="hier-checks-none", writes="checks")
