"""State-manager runtime: records, the action protocol and its wire format.

- :mod:`harness.manager.records` — ``AnalyticalState`` and its parts, ``ManagerObservation`` (what the model sees);
- :mod:`harness.manager.actions` — the 14 actions declared once; ``tool_schemas()``, ``ACTION_KIND``, validation;
- :mod:`harness.manager.wire` — ``parse_response`` (Qwen3/Hermes text or OpenAI ``tool_calls``) and
  ``render_action``;
- :mod:`harness.manager.lifecycle` — which control action is legal after which; action and repair budgets;
- :mod:`harness.manager.tools` — the read-only tools (``inspect_python`` via :mod:`harness.manager.ast_inspect`,
  ``compile_python``, ``check_execution``, ``run_probe``, ``check_constraint``, ``run_check`` (a typed check spec of
  :mod:`harness.checks`), ``load_state``);
- :mod:`harness.manager.hints` — fixed reference-only hint text; :mod:`harness.manager.episode` — the episode record.

- :mod:`harness.manager.runtime` — :class:`ManagerRuntime`: plays an episode (the harness owns state ids,
  variable versions, relation normalization, source intervals, checkpoints, the repair schedule) as a state machine
  the caller advances (:mod:`harness.manager.episode_loop`: ``runtime.start()``, ``next_request`` / ``answer``;
  ``run()`` answers with the policy); :mod:`harness.manager.flows` — the turn-aligned and segment-induced flows;
  :mod:`harness.manager.controls` — what the control actions do;
- :mod:`harness.manager.policy_types` — the ``Policy`` protocol, its ``PolicyInput`` and ``ManagerView``: what of a
  turn the manager sees (the task graph and constraint code only with the ``RuntimeConfig`` oracle switches);
  :mod:`harness.manager.policy_registry` — :func:`get_policy`: the policy of a manager spec, from the factories the
  policy modules register (importing this package registers the built-in ones);
  :mod:`harness.manager.policies` — ``none`` and ``rule``; :mod:`harness.manager.bookkeeping` — the deterministic
  OPEN_STATE / UPDATE_STATE drafts; :mod:`harness.manager.relations` — the relations a turn's words name
  (``infer_relations``), without the graph.

- :mod:`harness.manager.llm_policy` — the model-backed ``llm`` and ``freeform`` managers;
  :mod:`harness.manager.served` — the factories of ``llm``, ``llm-hf``, ``hier`` and ``hier-checks``, which serve a
  checkpoint as its ``manager.json`` says (:mod:`harness.manager.checkpoint_settings`;
  :mod:`harness.manager.prompt_view`);
  :mod:`harness.manager.windowed` — the stateless ``windowed`` (model-backed) and ``window-rule`` ablations;
  :mod:`harness.manager.read_policy` — ``read``: the question reader (:mod:`harness.manager.reader`) writes check
  specs from the turn's words and runs them, no model.
"""

from harness.manager import llm_policy, policies, read_policy, served, windowed  # noqa: F401  (each registers its policies)
from harness.manager.actions import (
    ACTION_KIND,
    ACTION_NAMES,
    ACTION_SPECS,
    Action,
    ActionSpec,
    make_action,
    tool_schemas,
)
from harness.manager.episode import EpisodeRecord, append_episode, read_episodes
from harness.manager.policy_registry import POLICIES, get_policy
from harness.manager.records import (
    EVENT_TYPES,
    RELATION_TYPES,
    AnalyticalState,
    Constraint,
    ManagerObservation,
    Relation,
    StateSummary,
    VariableRef,
)
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.manager.wire import ParseResult, parse_response, render_action

__all__ = [
    "EpisodeRecord",
    "append_episode",
    "read_episodes",
    "POLICIES",
    "ManagerRuntime",
    "RuntimeConfig",
    "get_policy",
    "ACTION_KIND",
    "ACTION_NAMES",
    "ACTION_SPECS",
    "EVENT_TYPES",
    "RELATION_TYPES",
    "Action",
    "ActionSpec",
    "AnalyticalState",
    "Constraint",
    "ManagerObservation",
    "ParseResult",
    "Relation",
    "StateSummary",
    "VariableRef",
    "make_action",
    "parse_response",
    "render_action",
    "tool_schemas",
]
