"""What the reward knows about an episode's injected fault (:class:`FaultInfo`), and where it comes from.

A :class:`FaultInfo` is the privileged label the intervention and outcome terms grade against: the faulted turn,
the fault type, the variables the fault corrupts (a repair naming one of them *localizes* the fault), the gold hint's
``error_variable`` and whether the fault is ``benign`` (an equivalent rewrite that must NOT be repaired). A clean
episode has no fault (``None``). Nothing here is ever shown to the manager.

:func:`fault_infos` reads them from a synthesis output folder (``OUT/shards/*.json.gz``: gzip JSON whose
``outcomes`` list holds, per fault, ``fault_id``, ``benign`` and ``fault``: the shared faults-format dict with
``turn_id``, ``fault_type`` and ``variables``). The gold hint's ``error_variable`` comes from the outcome's
``injected`` dict (the full :class:`~synthesis.faults.model.InjectedFault`) when the shard holds it; an older shard
has only the shared fault dict, which carries no ``error_variable``, so there it is ``variables[0]`` (the
intervention term localizes against the whole ``variables`` tuple anyway).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
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


def synthesized_shards(synthesis_out: str | Path) -> list[dict[str, Any]]:
    """The shards of a synthesis output folder (``OUT/shards/*.json.gz``), in task order."""
    from synthesis.export import read_shards
    from synthesis.pipeline import SHARDS

    paths = sorted((Path(synthesis_out) / SHARDS).glob("*.json.gz"))
    if not paths:
        raise ValueError(f"{synthesis_out}: no shards/*.json.gz; pass the output folder of `stateguard synthesize`.")
    return read_shards(paths)


def fault_infos(synthesis_out: str | Path) -> dict[str, FaultInfo]:
    """``{fault_id: FaultInfo}`` of every fault in the shards of a synthesis output folder (kept or dropped)."""
    infos: dict[str, FaultInfo] = {}
    for shard in synthesized_shards(synthesis_out):
        for outcome in shard.get("outcomes") or []:
            fault = outcome["fault"]
            variables = tuple(fault["variables"])
            injected = outcome.get("injected") or {}
            infos[outcome["fault_id"]] = FaultInfo(
                turn_id=str(fault["turn_id"]),
                fault_type=fault["fault_type"],
                variables=variables,
                error_variable=injected.get("error_variable") or (variables[0] if variables else None),
                benign=bool(outcome.get("benign", fault.get("benign", False))),
            )
    return infos
