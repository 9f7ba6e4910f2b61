from __future__ import annotations

import pytest

from harness.sandbox import SandboxConfig


def test_a_yaml_file_loads_its_fields_and_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("isolation: none\nmemory_mb: 512\ncell_timeout_s: 5.0\n")
    cfg = SandboxConfig.from_yaml(path)
    assert (cfg.isolation, cfg.memory_mb, cfg.cell_timeout_s) == ("none", 512, 5.0)
    assert cfg.max_processes == SandboxConfig().max_processes


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


def test_overrides_win_and_derived_limits(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("memory_mb: 2048\ntmp_mb: 256\n")
    cfg = SandboxConfig.from_yaml(path, memory_mb=100, tmp_mb=10)
    assert cfg.memory_mb == 100 and cfg.effective_episode_memory_mb == 210
    assert cfg.effective_cpu_time_s == cfg.cell_timeout_s


def test_every_field_has_help():
    from dataclasses import fields

    assert all(f.metadata.get("help") for f in fields(SandboxConfig))
