"""What the reward knows about an episode's injected fault: :class:`FaultInfo`.

A :class:`FaultInfo` is the privileged label the intervention and outcome terms grade against: the faulted turn,
the fault type, the variables the fault corrupts (a repair naming one of them *localizes* the fault), the gold hint's
``error_variable`` and whether the fault is ``benign`` (an equivalent rewrite that must NOT be repaired). A clean
episode has no fault (``None``). Nothing here is ever shown to the manager.

The labels come from the layers above, as data: :func:`synthesis.labels.fault_infos` reads them from a synthesis
output folder, the replay pool of ``envs`` from its index (:meth:`FaultInfo.from_dict`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class FaultInfo:
    """The injected fault of one episode, as the reward sees it."""

    turn_id: str
    fault_type: str
    variables: tuple[str, ...]
    error_variable: str | None = None
    benign: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "variables", tuple(self.variables))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["variables"] = list(self.variables)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultInfo:
        """From :meth:`to_dict` output (or a shared faults-format dict: extra keys such as ``code`` are ignored)."""
        missing = [k for k in ("turn_id", "fault_type", "variables") if k not in data]
        if missing:
            raise ValueError(f"FaultInfo.from_dict: missing key(s) {missing} in {sorted(data)}; a fault needs them.")
        return cls(
            turn_id=str(data["turn_id"]),
            fault_type=str(data["fault_type"]),
            variables=tuple(data["variables"]),
            error_variable=data.get("error_variable"),
            benign=bool(data.get("benign", False)),
        )
