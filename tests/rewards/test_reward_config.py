"""RewardConfig validation and YAML loading; FaultInfo round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewards import FaultInfo, RewardConfig

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "rewards"


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_reward_config_loads(path: Path) -> None:
    config = RewardConfig.from_yaml(path)
    assert config.beta_fp > config.beta_fn


def test_default_yaml_equals_the_dataclass_defaults() -> None:
    assert RewardConfig.from_yaml(CONFIG_DIR / "default.yaml") == RewardConfig()
    assert RewardConfig().weights() == {
        "protocol": 0.2, "grounding": 0.2, "intervention": 0.4, "outcome": 0.4, "economy": 0.1
    }  # fmt: skip


def test_unknown_keys_and_missing_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("w_protocol: 0.3\nbeta_false_positive: 2\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['beta_false_positive'\]"):
        RewardConfig.from_yaml(path)
    with pytest.raises(ValueError, match="no such reward config"):
        RewardConfig.from_yaml(tmp_path / "missing.yaml")
    path.write_text("beta_fp: 3.0\n")
    assert RewardConfig.from_yaml(path, beta_fn=1.0).beta_fn == 1.0


def test_beta_fp_must_exceed_beta_fn() -> None:
    with pytest.raises(ValueError, match="beta_fp=0.5 must be greater than beta_fn=0.5"):
        RewardConfig(beta_fp=0.5, beta_fn=0.5)
    with pytest.raises(ValueError, match="w_outcome=-1"):
        RewardConfig(w_outcome=-1)


def test_fault_info_round_trip() -> None:
    info = FaultInfo("3", "wrong_threshold", ("a", "b"), "b", benign=False)
    assert FaultInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info
    shared = {"turn_id": 3, "fault_type": "x", "variables": ["a"], "code": "..."}  # a faults.jsonl row
    assert FaultInfo.from_dict(shared) == FaultInfo("3", "x", ("a",))
    with pytest.raises(ValueError, match=r"missing key\(s\) \['variables'\]"):
        FaultInfo.from_dict({"turn_id": "1", "fault_type": "x"})
