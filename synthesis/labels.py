"""The fault labels of a synthesis output folder, as the reward sees them (:class:`~rewards.faults.FaultInfo`).

:func:`fault_infos` reads them from the shards (``OUT/shards/*.json.gz``: gzip JSON whose ``outcomes`` list holds,
per fault, ``fault_id``, ``benign`` and ``fault``: the shared faults-format dict with ``turn_id``, ``fault_type`` and
``variables``). The gold hint's ``error_variable`` comes from the outcome's ``injected`` dict (the full
:class:`~synthesis.faults.model.InjectedFault`) when the shard holds it; an older shard has only the shared fault
dict, which carries no ``error_variable``, so there it is ``variables[0]`` (the intervention term localizes against
the whole ``variables`` tuple anyway).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewards.faults import FaultInfo
from synthesis.export import read_shards
from synthesis.shards import SHARDS


def synthesized_shards(synthesis_out: str | Path) -> list[dict[str, Any]]:
    """The shards of a synthesis output folder (``OUT/shards/*.json.gz``), in task order."""
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
