"""The manager policies by name: each policy module registers a factory under the spec name it answers to, and
:func:`get_policy` builds the policy of a manager spec.

The spec grammar is :data:`harness.specs.MANAGER_GRAMMAR` (parsed by :func:`harness.specs.parse_manager_spec`); a
factory receives the parsed :class:`~harness.specs.ManagerSpec` (its ``k``, ``model`` and ``tier1`` already checked)
and returns a new policy. The built-in policies register when :mod:`harness.manager` is imported (its ``__init__``
imports the modules that define them: :mod:`~harness.manager.policies`, :mod:`~harness.manager.windowed`,
:mod:`~harness.manager.llm_policy`, :mod:`~harness.manager.read_policy`, :mod:`~harness.manager.served`: the
model-backed ``llm``, ``llm-hf``, ``hier`` and ``hier-checks``, served as a checkpoint's ``manager.json`` says).
"""

from __future__ import annotations

from collections.abc import Callable

from harness.manager.policy_types import Policy
from harness.registry import lookup
from harness.specs import MANAGER_KINDS, ManagerSpec, parse_manager_spec

PolicyFactory = Callable[[ManagerSpec], Policy]

POLICIES: dict[str, PolicyFactory] = {}
"""Manager spec name -> factory of the policy from the parsed spec (filled by :func:`register_policy`, in the order
of :data:`harness.specs.MANAGER_KINDS`)."""


def register_policy(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Decorator: register a factory for the manager spec ``name`` (a name of :data:`harness.specs.MANAGER_KINDS`,
    which says what arguments the spec takes)."""

    def register(factory: PolicyFactory) -> PolicyFactory:
        if name not in MANAGER_KINDS:
            raise ValueError(
                f"manager policy {name!r} has no grammar: add it to harness.specs.MANAGER_KINDS (valid names: "
                f"{', '.join(MANAGER_KINDS)}) before registering it."
            )
        if name in POLICIES and POLICIES[name] is not factory:
            raise ValueError(f"manager policy {name!r} is registered twice; register each spec name once.")
        registered = {**POLICIES, name: factory}
        POLICIES.clear()  # kept in the grammar's order, whatever order the modules register in
        POLICIES.update({n: registered[n] for n in MANAGER_KINDS if n in registered})
        return factory

    return register


def get_policy(spec: str | ManagerSpec) -> Policy:
    """A new policy from a manager spec ``NAME[:ARGUMENT]`` (grammar :data:`harness.specs.MANAGER_GRAMMAR`).

    A malformed spec raises the ``ValueError`` of :func:`harness.specs.parse_manager_spec` (the spec, what is wrong,
    the grammar and an example); a ``-hf`` PATH must be an existing folder."""
    parsed = parse_manager_spec(spec)
    factory = lookup(POLICIES, parsed.name, what="manager policy", fix="Import the module that registers it.")
    return factory(parsed)
