"""State-manager runtime (issue 3): records, the action protocol and its wire format (DESIGN §3).

- :mod:`harness.manager.records` — ``AnalyticalState`` and its parts, ``ManagerObservation`` (what the model sees);
- :mod:`harness.manager.actions` — the 13 actions declared once; ``tool_schemas()``, ``ACTION_KIND``, validation;
- :mod:`harness.manager.wire` — ``parse_response`` (Qwen3/Hermes text or OpenAI ``tool_calls``) and
  ``render_action``;
- :mod:`harness.manager.lifecycle` — which control action is legal after which; action and repair budgets;
- :mod:`harness.manager.tools` — the read-only tools (``inspect_python`` via :mod:`harness.manager.ast_inspect`,
  ``compile_python``, ``check_execution``, ``run_probe``, ``check_constraint``, ``load_state``);
- :mod:`harness.manager.hints` — fixed reference-only hint text; :mod:`harness.manager.episode` — the episode record.

Not yet built (issue 3 continues): the runtime that drives activations, the flows, the manager policies and
``stateguard run``.
"""

from harness.manager.actions import (
    ACTION_KIND,
    ACTION_NAMES,
    ACTION_SPECS,
    Action,
    ActionSpec,
    make_action,
    tool_schemas,
)
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
from harness.manager.wire import ParseResult, parse_response, render_action

__all__ = [
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
