"""What a manager checkpoint needs at inference, saved with it: ``manager.json``.

A checkpoint folder may hold :data:`MANAGER_FILE`, written by the SFT launcher (and copied by ``stateguard merge``
and DAPO, or written for an untrained model by ``stateguard model settings``)::

    {"stateguard_manager": 1, "policy": "hier", "writes": "checks", "prompt_view": "bare",
     "constrained_decoding": true, "legal_actions_only": false, "max_new_tokens": 384, "temperature": 0.0}

``stateguard run`` / ``stateguard evaluate --manager llm-hf:CKPT | hier:llm-hf:CKPT | hier-checks:llm-hf:CKPT``
serve the checkpoint the way the file says (:mod:`harness.manager.served`). :func:`read_manager_settings` gives None
for a folder without the file; a malformed file raises :class:`ManagerSettingsError`, one line naming the file, the
field and the fix. Unknown keys are refused, so a typo never passes silently.

:func:`used_settings` is what an episode record and ``results.json`` keep: the settings a model policy is actually
served with (the file's, with the command's explicit flags on top) and the file they came from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from harness.manager.prompt_view import PROMPT_VIEWS

MANAGER_FILE = "manager.json"
VERSION_KEY = "stateguard_manager"
VERSION = 1
POLICIES = ("llm", "hier")
WRITES = ("decisions", "checks")


class ManagerSettingsError(ValueError):
    """A ``manager.json`` that cannot be used (the message names the file, the field and the fix)."""


@dataclass(frozen=True)
class ManagerSettings:
    """How a checkpoint is served: the manager it is tier 1 of (or the flat ``llm`` manager), the view it reads and
    how its replies are decoded. The defaults are the flat ``llm`` manager with the full prompt, decoded greedily
    under the action grammar with replies of at most 384 tokens."""

    policy: str = "llm"
    """``llm`` (the flat manager: the model writes every action) or ``hier`` (the model is tier 1 of the
    hierarchical manager)."""
    writes: str | None = None
    """``hier`` only: what tier 1 writes, ``decisions`` (the default for hier) or ``checks`` (check specs tier 0 runs
    and decides from); None for ``llm``."""
    prompt_view: str = "full"
    """``full`` (system prompt and tools block first) or ``bare`` (neither: the view small models are trained on)."""
    constrained_decoding: bool = True
    """Decode every reply under the grammar of what the model writes (actions; the checks object for
    writes=checks)."""
    legal_actions_only: bool = False
    """``llm`` with constrained_decoding: the grammar allows only the actions legal now."""
    max_new_tokens: int = 384
    """The cap on one reply, in tokens."""
    temperature: float = 0.0
    """Sampling temperature; 0 is greedy."""

    def __post_init__(self) -> None:
        writes = self.writes
        if self.policy == "hier" and writes is None:
            object.__setattr__(self, "writes", writes := "decisions")
        problem = settings_problem(self.policy, writes, self.prompt_view, self.max_new_tokens, self.temperature)
        if problem is None and self.legal_actions_only and (self.policy != "llm" or not self.constrained_decoding):
            problem = ("legal_actions_only", "narrows a flat llm manager's action grammar; set it false, or set "
                       "policy llm and constrained_decoding true")  # fmt: skip
        if problem is not None:
            field_name, fix = problem
            raise ManagerSettingsError(f"{field_name}={getattr(self, field_name)!r}: {fix}")

    def to_dict(self) -> dict[str, Any]:
        """The file's contents: the version key first, then the fields (``writes`` left out for ``llm``)."""
        data = {VERSION_KEY: VERSION, **asdict(self)}
        if self.writes is None:
            del data["writes"]
        return data

    @classmethod
    def from_dict(cls, data: Any, source: str = MANAGER_FILE) -> ManagerSettings:
        """The settings of a decoded file ``data``; :class:`ManagerSettingsError` (naming ``source``) when the version
        key is missing or not :data:`VERSION`, a key is unknown, a value has the wrong type or is out of range."""
        if not isinstance(data, dict):
            raise ManagerSettingsError(f"{source}: holds {type(data).__name__}, not a JSON object; write an object "
                                       f'such as {{"{VERSION_KEY}": {VERSION}, "policy": "llm"}}')  # fmt: skip
        if data.get(VERSION_KEY) != VERSION:
            raise ManagerSettingsError(
                f"{source}: {VERSION_KEY}={data.get(VERSION_KEY)!r}; this StateGuard reads version {VERSION}: set "
                f'"{VERSION_KEY}": {VERSION} (rewrite the file with `stateguard model settings DIR ...`)'
            )
        types = {f.name: f.type for f in fields(cls)}
        for key, value in data.items():
            if key == VERSION_KEY:
                continue
            if key not in types:
                raise ManagerSettingsError(f"{source}: unknown field {key!r}; use only {VERSION_KEY}, "
                                           f"{', '.join(types)}")  # fmt: skip
            wanted = _TYPES[key]
            if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
                names = " or ".join("null" if t is type(None) else t.__name__ for t in wanted)
                raise ManagerSettingsError(f"{source}: field {key}={value!r} is not {names}; write a {names}")
        try:
            return cls(**{k: v for k, v in data.items() if k != VERSION_KEY})
        except ManagerSettingsError as exc:
            raise ManagerSettingsError(f"{source}: field {exc}") from None


_TYPES: dict[str, tuple[type, ...]] = {
    "policy": (str,),
    "writes": (str, type(None)),
    "prompt_view": (str,),
    "constrained_decoding": (bool,),
    "legal_actions_only": (bool,),
    "max_new_tokens": (int,),
    "temperature": (int, float),
}


def settings_problem(
    policy: str, writes: str | None, prompt_view: str, max_new_tokens: int, temperature: float
) -> tuple[str, str] | None:
    """``(field, fix)`` for the first value that is out of range, else None."""
    if policy not in POLICIES:
        return "policy", f"use one of {', '.join(POLICIES)}"
    if policy == "llm" and writes is not None:
        return "writes", "only a hier manager's tier 1 writes checks or decisions; drop writes for policy llm"
    if policy == "hier" and writes not in WRITES:
        return "writes", f"use one of {', '.join(WRITES)}"
    if prompt_view not in PROMPT_VIEWS:
        return "prompt_view", f"use one of {', '.join(PROMPT_VIEWS)}"
    if max_new_tokens < 1:
        return "max_new_tokens", "use a positive number of tokens, e.g. 384"
    if not 0 <= temperature <= 2:
        return "temperature", "use 0 (greedy) up to 2"
    return None


def settings_path(folder: str | Path) -> Path:
    return Path(folder) / MANAGER_FILE


def read_manager_settings(folder: str | Path) -> ManagerSettings | None:
    """The settings saved in ``folder``'s :data:`MANAGER_FILE`; None when the folder has none. A file that is not
    JSON or not valid settings raises :class:`ManagerSettingsError` naming it."""
    path = settings_path(folder)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManagerSettingsError(f"{path}: not JSON ({exc}); rewrite it with `stateguard model settings`") from None
    return ManagerSettings.from_dict(data, str(path))


def write_manager_settings(folder: str | Path, settings: ManagerSettings) -> Path:
    """Write ``settings`` to ``folder``'s :data:`MANAGER_FILE` (the folder is created); its path."""
    path = settings_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def used_settings(policy: Any) -> dict[str, Any] | None:
    """The settings a model policy answers with now, for the record: ``file`` (the :data:`MANAGER_FILE` it was built
    from, None without one), ``prompt_view``, ``writes`` (hier), ``constrained_decoding`` (a grammar is set),
    ``legal_actions_only``, ``max_new_tokens`` and ``temperature`` (its backend's). None for a policy without a
    model."""
    backend = getattr(policy, "backend", None) or getattr(policy, "tier1", None)
    if backend is None:
        return None
    used: dict[str, Any] = {"file": getattr(policy, "settings_file", None)}
    if hasattr(policy, "writes"):
        used["writes"] = policy.writes
    used["prompt_view"] = getattr(policy, "prompt_view", "full")
    used["constrained_decoding"] = getattr(backend, "grammar", None) is not None
    used["legal_actions_only"] = getattr(policy, "before_reply", None) is not None
    used["max_new_tokens"] = getattr(backend, "max_new_tokens", getattr(backend, "max_tokens", None))
    used["temperature"] = getattr(backend, "temperature", None)
    return used
