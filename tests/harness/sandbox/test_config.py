from __future__ import annotations

from pathlib import Path

import pytest

from harness.sandbox import SandboxConfig

CONFIG_DIR = Path(__file__).resolve().parents[3] / "configs" / "sandbox"


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sandbox_config_file_loads(path):
    cfg = SandboxConfig.from_yaml(path)
    assert cfg.isolation in ("bwrap", "none")


def test_config_dir_is_not_empty():
    assert len(list(CONFIG_DIR.glob("*.yaml"))) >= 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"isolation": "docker"}, "valid values: bwrap, none"),
        ({"cell_timeout_s": 0}, "cell_timeout_s=0"),
        ({"memory_mb": -1}, "memory_mb=-1"),
        ({"max_processes": 0}, "max_processes=0"),
        ({"max_output_bytes": 10}, "max_output_bytes=10"),
    ],
)
def test_invalid_values_raise_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**kwargs)


def test_unknown_yaml_key_names_the_valid_keys(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("isolation: none\nmemory: 3\n")
    with pytest.raises(ValueError, match=r"unknown sandbox keys \['memory'\].*memory_mb"):
        SandboxConfig.from_yaml(path)


def test_overrides_win_and_derived_limits():
    cfg = SandboxConfig.from_yaml(CONFIG_DIR / "default.yaml", memory_mb=100, tmp_mb=10)
    assert cfg.memory_mb == 100 and cfg.effective_episode_memory_mb == 210
    assert cfg.effective_cpu_time_s == cfg.cell_timeout_s


def test_every_field_has_help():
    from dataclasses import fields

    assert all(f.metadata.get("help") for f in fields(SandboxConfig))
