"""Result records returned by the sandbox (all JSON-serialisable through ``to_dict``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ChangeKind = Literal["created", "changed", "deleted"]


@dataclass(frozen=True)
class VariableInfo:
    """A tracked variable as it is now. ``version`` is per kernel and per name, strictly increasing, never
    reused (not even after ``restore``), so ``(name, version)`` identifies one value: a ``VariableRef``."""

    name: str
    version: int
    type: str
    shape: list[int] | None
    summary: str

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` without its generic deep copy (plain fields; ``shape`` is copied)."""
        shape = None if self.shape is None else list(self.shape)
        return {"name": self.name, "version": self.version, "type": self.type, "shape": shape, "summary": self.summary}


@dataclass(frozen=True)
class VariableChange:
    """What one cell did to one name. Deleted names get a new version too (their ``type`` is None)."""

    name: str
    kind: ChangeKind
    version: int
    type: str | None
    shape: list[int] | None
    summary: str

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` without its generic deep copy (plain fields; ``shape`` is copied)."""
        shape = None if self.shape is None else list(self.shape)
        return {
            "name": self.name,
            "kind": self.kind,
            "version": self.version,
            "type": self.type,
            "shape": shape,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class FileChange:
    """A workspace entry created, changed or deleted by a cell (``path`` relative to the workspace)."""

    path: str
    kind: ChangeKind

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind}


@dataclass
class ExecutionResult:
    """Outcome of one cell or probe. User errors are reported here, never raised in the caller."""

    ok: bool
    stdout: str = ""
    stderr: str = ""
    display: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    timed_out: bool = False
    memory_exceeded: bool = False
    cpu_exceeded: bool = False
    output_truncated: bool = False
    restarted: bool = False
    restart_reason: str | None = None
    duration_s: float = 0.0
    variables: list[VariableChange] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    probe: bool = False
    unavailable: dict[str, str] = field(default_factory=dict)
    """Probes only: variables the probe reads that did not cross to the verifier as data, with the reason."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
