"""The manager spec and the suite spec every command and config takes, each parsed in one place.

- **manager** (``--manager``, ``managers:``): ``none | rule | window-rule[:K] | windowed:K:URL | windowed-hf:K:PATH |
  llm:URL | llm-hf:PATH | freeform:URL | freeform-hf:PATH | hier:none | hier:llm:URL | hier:llm-hf:PATH | read``
  (:data:`MANAGER_GRAMMAR`; what each one is: :mod:`harness.manager.policies`). :func:`parse_manager_spec` turns one
  into a :class:`ManagerSpec` (name, ``k``, ``model``, ``tier1``) and :func:`parse_manager_specs` a list, with every
  problem of the list in one message;
- **suite** (``--suite``, ``suite:``): a folder (a synthesis output, a folder of task folders, one task folder) or
  the name of a suite of :data:`harness.evaluation.suite_names.SUITES`. :func:`parse_suite_spec` turns one into a
  :class:`SuiteRef`; an existing folder wins over a name;
- **worker** (``--worker``): ``scripted | openai:URL | hf:PATH``, in :mod:`harness.worker.spec` (with the rule that
  replaying faults needs the scripted worker); re-exported here.

Every error is one ``ValueError`` in one format: ``FLAG SPEC: what is wrong; grammar: ...; e.g. ...``, where ``FLAG``
names the option (``--manager``) or, ending in ``=``, a config field (``managers=``). Nothing is built or loaded
here: a spec is checked before any work, and the policy, suite or worker is made later from the parsed spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.checkpoints import adapter_only_problem
from harness.evaluation.suite_names import SUITES
from harness.worker.spec import WORKER_GRAMMAR, WorkerSpec, parse_worker_spec

__all__ = [
    "MANAGER_GRAMMAR",
    "MANAGER_KINDS",
    "WORKER_GRAMMAR",
    "ManagerKind",
    "ManagerSpec",
    "SuiteRef",
    "WorkerSpec",
    "parse_manager_spec",
    "parse_manager_specs",
    "parse_suite_spec",
    "parse_worker_spec",
]


@dataclass(frozen=True)
class ManagerKind:
    """What a manager spec name takes after it: ``k`` (the window size K: ``no``, ``optional``, ``required``) and
    ``model`` (``none``, ``url``: an OpenAI-compatible API root, ``path``: a local transformers folder, ``tier1``: the
    decision model of the hierarchical manager, ``none | llm:URL | llm-hf:PATH``)."""

    k: str = "no"
    model: str = "none"


MANAGER_KINDS: dict[str, ManagerKind] = {
    "none": ManagerKind(),
    "rule": ManagerKind(),
    "window-rule": ManagerKind(k="optional"),
    "windowed": ManagerKind(k="required", model="url"),
    "windowed-hf": ManagerKind(k="required", model="path"),
    "llm": ManagerKind(model="url"),
    "llm-hf": ManagerKind(model="path"),
    "freeform": ManagerKind(model="url"),
    "freeform-hf": ManagerKind(model="path"),
    "hier": ManagerKind(model="tier1"),
    "read": ManagerKind(),
}
"""Manager spec name -> its arguments; the names of :data:`harness.manager.policy_registry.POLICIES` (a test keeps them
equal)."""

MANAGER_GRAMMAR = (
    "none | rule | window-rule[:K] | windowed:K:URL | windowed-hf:K:PATH | llm:URL | llm-hf:PATH | freeform:URL | "
    "freeform-hf:PATH | hier:none | hier:llm:URL | hier:llm-hf:PATH | read"
)
"""The manager specs, as help texts and errors show them."""


@dataclass(frozen=True)
class ManagerSpec:
    """A parsed manager spec: its ``name`` (a key of :data:`MANAGER_KINDS`), ``k`` (the window size, when the
    spec gives one), ``model`` (the URL or folder of a model-backed manager) and ``tier1`` (the hierarchical
    manager's decision model: ``none``, ``llm`` or ``llm-hf``). ``str()`` gives the spec back."""

    name: str
    k: int | None = None
    model: str | None = None
    tier1: str | None = None

    @property
    def model_backed(self) -> bool:
        """A chat model answers (llm, freeform, windowed, hier:llm and their -hf forms)."""
        return self.model is not None

    @property
    def in_process(self) -> bool:
        """The model is loaded into this process (the ``-hf`` forms): one instance should serve every episode."""
        return MANAGER_KINDS[self.name].model == "path" or self.tier1 == "llm-hf"

    @property
    def answers_in_actions(self) -> bool:
        """A chat model writes the manager's wire actions (llm, hier with a model; not freeform or windowed, which
        write prose)."""
        return self.name in ("llm", "llm-hf") or (self.name == "hier" and self.tier1 in ("llm", "llm-hf"))

    def __str__(self) -> str:
        k = [str(self.k)] if self.k is not None else []
        tier1 = [self.tier1] if self.tier1 is not None else []
        return ":".join([self.name, *k, *tier1, *([self.model] if self.model is not None else [])])


def _shown(flag: str, spec: object) -> str:
    return f"{flag}{spec!r}" if flag.endswith("=") else f"{flag} {spec}"


def _example(flag: str) -> str:
    if flag.endswith("="):
        return f"{flag}'rule' or {flag}'llm:http://localhost:8000/v1'"
    return f"{flag} rule, {flag} llm:http://localhost:8000/v1 or {flag} windowed:3:http://localhost:8000/v1"


def _manager_error(flag: str, spec: object, problems: Sequence[str]) -> ValueError:
    return ValueError(
        f"{_shown(flag, spec)}: {'; '.join(problems)}; grammar: {MANAGER_GRAMMAR}; e.g. {_example(flag)}."
    )


def _manager_problem(spec: str, check_paths: bool) -> tuple[ManagerSpec | None, str | None]:
    """The parsed spec, or the reason it is wrong (the name is known)."""
    name, colon, argument = spec.partition(":")
    kind = MANAGER_KINDS[name]
    rest = argument if colon else None
    k: int | None = None
    if kind.k != "no" and rest is not None:
        k_text, colon, after = rest.partition(":")
        if kind.model == "none" or colon:
            if not k_text.isdigit() or int(k_text) < 1:
                return None, f"K must be a whole number >= 1 (the number of recent steps shown), got {k_text!r}"
            k, rest = int(k_text), (after if colon else None)
    if kind.k == "required" and (k is None or rest is None):
        got = "no argument" if argument == "" and not colon else f"only {argument!r}"
        return None, (
            "the windowed ablation is model-backed: give K and a model, windowed:K:URL (an OpenAI-compatible "
            "endpoint) or windowed-hf:K:PATH (a local transformers folder); the model-free reminder of the last K "
            f"steps is window-rule:K; got {got}"
        )
    tier1: str | None = None
    if kind.model == "tier1":
        tier1, _, after = (rest or "").partition(":")
        if tier1 == "none" and rest == "none":
            return ManagerSpec(name, tier1="none"), None
        if tier1 not in ("llm", "llm-hf"):
            got = "no argument" if rest is None else repr(rest)
            return None, (
                "the hierarchical manager takes its decision model: hier:none (the harness alone), hier:llm:URL (an "
                f"OpenAI-compatible endpoint) or hier:llm-hf:PATH (a local transformers folder); got {got}"
            )
        kind, rest = ManagerKind(model="url" if tier1 == "llm" else "path"), after
    if kind.model == "none":
        if rest is not None:
            return None, f"{name} takes no {'further ' if k is not None else ''}argument, got {rest!r}"
        return ManagerSpec(name, k), None
    if kind.model == "url":
        if not rest:
            return None, "URL (the endpoint's API root, such as http://localhost:8000/v1) is missing"
        if not rest.startswith(("http://", "https://")):
            return None, f"URL must be an http(s) API root like http://localhost:8000/v1, got {rest!r}"
        return ManagerSpec(name, k, rest, tier1), None
    if not rest:
        return None, "PATH (a local transformers model folder) is missing"
    if check_paths and not Path(rest).is_dir():
        return None, f"model folder {rest} does not exist; give a local folder with config.json and tokenizer files"
    if check_paths and (problem := adapter_only_problem(rest)) is not None:
        return None, f"model folder {problem}"
    return ManagerSpec(name, k, rest, tier1), None


def parse_manager_spec(spec: str | ManagerSpec, *, flag: str = "--manager", check_paths: bool = True) -> ManagerSpec:
    """``spec`` parsed (grammar :data:`MANAGER_GRAMMAR`); ``flag`` names the option in messages (``--manager``, or
    ``manager=`` for a config field); ``check_paths``: a ``-hf`` PATH must be an existing folder (off where the model
    is loaded only if it is needed, e.g. the finished variants of a resumed evaluation). Raises ``ValueError``
    naming the flag, the spec, what is wrong, the grammar and an example."""
    if isinstance(spec, ManagerSpec):
        spec = str(spec)
    name = spec.partition(":")[0]
    if name not in MANAGER_KINDS:
        raise _manager_error(flag, spec, [_unknown([name])])
    parsed, problem = _manager_problem(spec, check_paths)
    if problem is not None:
        raise _manager_error(flag, spec, [problem])
    assert parsed is not None
    return parsed


def parse_manager_specs(
    specs: Sequence[str | ManagerSpec], *, flag: str = "--manager", check_paths: bool = True
) -> list[ManagerSpec]:
    """Every spec of a list parsed (:func:`parse_manager_spec`); all the problems of the list in one ``ValueError``
    (unknown names first, then each malformed spec). An empty list is refused too."""
    texts = [str(s) for s in specs]
    shown = ",".join(texts)
    if not texts:
        raise _manager_error(flag, "", ["give at least one variant"])
    unknown = [t.partition(":")[0] for t in texts if t.partition(":")[0] not in MANAGER_KINDS]
    problems = [_unknown(unknown)] if unknown else []
    parsed = []
    for text in texts:
        if text.partition(":")[0] in MANAGER_KINDS:
            spec, problem = _manager_problem(text, check_paths)
            if problem is not None:
                problems.append(f"{text}: {problem}" if len(texts) > 1 else problem)
            parsed.append(spec)
    if problems:
        raise _manager_error(flag, shown, problems)
    return [p for p in parsed if p is not None]


def _unknown(names: Sequence[str]) -> str:
    return f"unknown variant(s) {list(names)}; valid names: {', '.join(MANAGER_KINDS)}"


@dataclass(frozen=True)
class SuiteRef:
    """A parsed suite spec: ``spec`` as given, and ``folder`` (the suite's folder) or ``name`` (a named suite,
    read from the cache folder)."""

    spec: str
    folder: Path | None = None
    name: str | None = None

    @property
    def named(self) -> bool:
        return self.name is not None

    def __str__(self) -> str:
        return self.spec


def parse_suite_spec(spec: str | Path | SuiteRef, *, flag: str = "--suite") -> SuiteRef:
    """``spec`` parsed: an existing folder, else the name of a suite of :data:`harness.evaluation.suite_names.SUITES`.
    Raises ``ValueError`` naming the flag, the spec, the valid names and the fix. Whether the folder holds tasks is
    checked when the suite is resolved (:func:`harness.evaluation.suite.resolve_suite`)."""
    if isinstance(spec, SuiteRef):
        return spec
    text = str(spec)
    if text and Path(text).is_dir():
        return SuiteRef(text, folder=Path(text))
    if text in SUITES:
        return SuiteRef(text, name=text)
    raise ValueError(
        f"{_shown(flag, text)}: unknown suite {text!r} and no such folder; valid suites: {', '.join(sorted(SUITES))}; "
        "or pass a folder of task folders (a synthesis output, stateguard tasks import ...)."
    )
