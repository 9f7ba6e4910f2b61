"""Config files are checked against their dataclass's annotations: every wrong type of a file is reported at once,
naming the file, the field and the expected type; nothing is coerced; every shipped config still loads."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from harness import cli
from harness.yaml_config import load_yaml_config, type_problems
from rewards.config import RewardConfig
from synthesis.config import SynthesisConfig
from training.pipeline import PipelineConfig

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "synthesis" / "smoke.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('tasks_per_domain: "two"\n', "field 'tasks_per_domain' must be int, got str 'two'; fix the value."),
        ("seed: zero\n", "field 'seed' must be int, got str 'zero'"),
        ("n_turns: 6\n", "field 'n_turns' must be list[int], got int 6 (write a YAML list, e.g. [6])"),
        ("n_turns: [6, 7.5]\n", "field 'n_turns[1]' must be int, got float 7.5"),
        ("domains: commerce\n", "field 'domains' must be list[str], got str 'commerce' (write a YAML list"),
        ("seed: true\n", "field 'seed' must be int, got bool True"),  # a bool is not an int
        ("count_tokens: 1\n", "field 'count_tokens' must be bool (true or false), got int 1"),
        ("validation_fraction: 1e-1\n", "got str '1e-1' (YAML reads 1e-1 as text; write it with a dot, e.g. 1.0e-1)"),
        ("workers: '2'\n", "field 'workers' must be int or null, got str '2' (write the number without quotes)"),
        ("fault_types: [unit_slip, 3]\n", "field 'fault_types[1]' must be str, got int 3"),
    ],
)
def test_a_wrong_type_names_the_file_the_field_and_the_type(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        SynthesisConfig.from_yaml(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_all_type_errors_of_a_file_are_reported_at_once(tmp_path):
    path = write(tmp_path, 'domains: commerce\ntasks_per_domain: "two"\nseed: zero\nn_turns: 6\nbogus: 1\n')
    with pytest.raises(ValueError) as info:
        SynthesisConfig.from_yaml(path)
    message = str(info.value)
    assert "\n" not in message and message.endswith("; fix the values.")
    for name in ("bogus", "domains", "tasks_per_domain", "seed", "n_turns"):
        assert f"'{name}'" in message, name


def test_overrides_go_through_the_same_check(tmp_path):
    with pytest.raises(ValueError, match="override 'workers' must be int or null, got str 'four'"):
        SynthesisConfig.from_yaml(SMOKE, workers="four")
    assert SynthesisConfig.from_yaml(SMOKE, workers=3).workers == 3


def test_an_int_is_a_valid_float_and_good_configs_load(tmp_path):
    assert SynthesisConfig.from_yaml(write(tmp_path, "validation_fraction: 0\n")).validation_fraction == 0
    assert RewardConfig.from_yaml(write(tmp_path, "beta_fp: 2\n")).beta_fp == 2
    config = SynthesisConfig.from_yaml(SMOKE)
    assert config.domains == ["commerce", "energy"] and config.n_turns == [6, 6]


def test_synthesize_with_a_wrong_type_prints_one_line_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path, 'domains: commerce\ntasks_per_domain: "two"\n')
    out = tmp_path / "out"
    assert cli.main(["synthesize", "--config", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"stateguard synthesize: {path}: field 'domains' must be list[str]")
    assert not out.exists()


def test_pipeline_lists_and_study_sections_are_checked(tmp_path):
    path = write(tmp_path, "sft_args: [--max_steps, 2]\neval_limit: 2.0\n")
    with pytest.raises(ValueError, match=r"'sft_args\[1\]' must be str, got int 2 \(quote it: '2'\).*'eval_limit'"):
        PipelineConfig.from_yaml(path)
    from training.study.config import StudyConfig

    path = write(tmp_path, "train_synthesis: {seed: one}\ntestset: {domains: logistics}\n")
    with pytest.raises(ValueError) as info:
        StudyConfig.from_yaml(path)
    assert "field 'train_synthesis.seed' must be int" in str(info.value)
    assert "field 'testset.domains' must be list[str]" in str(info.value)


def test_unreadable_files_name_the_file(tmp_path):
    binary = tmp_path / "x.yaml"
    binary.write_bytes(bytes(range(128, 256)))
    with pytest.raises(ValueError, match="not a text file"):
        SynthesisConfig.from_yaml(binary)
    broken = write(tmp_path, "seed: [1\n")
    with pytest.raises(ValueError, match=r"not valid YAML \(.* at line 2, column 1\)"):
        SynthesisConfig.from_yaml(broken)


# ---------------------------------------------------------------------------------------------------------------------
# the annotation kinds the check knows, on a toy config


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Inner:
    size: int
    name: str = "x"


@dataclass
class Toy:
    mode: Literal["fast", "slow"] = "fast"
    color: Color = Color.RED
    weights: dict[str, float] = field(default_factory=dict)
    pairs: list[list[str]] = field(default_factory=list)
    inner: Inner | None = None
    anything: Any = None
    either: int | str = 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "medium"}, "field 'mode' must be one of 'fast', 'slow', got str 'medium'"),
        ({"color": "green"}, "field 'color' must be one of 'red', 'blue', got str 'green'"),
        ({"weights": {"a": "heavy"}}, "field 'weights.a' must be float (a number), got str 'heavy'"),
        ({"weights": {1: 0.5}}, "field 'weights' key 1 must be str, got int 1"),
        ({"pairs": [["a", "b"], "c"]}, "field 'pairs[1]' must be list[str], got str 'c'"),
        ({"inner": {"size": "big"}}, "field 'inner.size' must be int, got str 'big'"),
        ({"inner": {"name": "y"}}, "field 'inner' is missing required field(s) ['size']"),
        ({"inner": {"size": 1, "colour": 2}}, "field 'inner' has unknown key(s) ['colour']"),
        ({"either": 1.5}, "field 'either' must be int or str, got float 1.5"),
    ],
)
def test_each_annotation_kind_is_checked(data, message):
    (problem,) = type_problems(Toy, data)
    assert problem.startswith(message), problem


def test_valid_values_of_each_kind_pass_and_nested_mappings_become_dataclasses(tmp_path):
    data = {
        "mode": "slow", "color": "blue", "weights": {"a": 1, "b": 0.5}, "pairs": [["a", "b"]],
        "inner": {"size": 2}, "anything": [1, "x"], "either": "text",
    }  # fmt: skip
    assert type_problems(Toy, data) == []
    path = write(tmp_path, "inner: {size: 3}\nmode: slow\n")
    toy = load_yaml_config(Toy, path, "toy", "toy.yaml")
    assert toy.inner == Inner(size=3) and toy.mode == "slow"


# ---------------------------------------------------------------------------------------------------------------------
# every shipped config that goes through load_yaml_config still loads


def _config_classes() -> dict[str, type]:
    return {"synthesis": SynthesisConfig, "rewards": RewardConfig, "pipeline": PipelineConfig}


SHIPPED = sorted(p for d in ("synthesis", "rewards", "pipeline") for p in (ROOT / "configs" / d).glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_config_loads(path):
    config = _config_classes()[path.parent.name].from_yaml(path)
    assert type_problems(type(config), vars(config)) == []


def _script_parser(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_parser()


@pytest.mark.parametrize("name", ["sft", "rl"])
def test_trl_configs_are_checked_before_the_parser_reads_them(tmp_path, capsys, name):
    from harness.yaml_config import parse_checked

    bad = write(tmp_path, "model_name_or_path: m\nlearning_rate: fast\nmax_steps: 2.5\n")
    with pytest.raises(SystemExit) as info:
        parse_checked(_script_parser(name), ["--config", str(bad)], f"scripts/{name}.py")
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in err and err.startswith(f"scripts/{name}.py: error: {bad}: ")
    assert "field 'max_steps' must be int, got float 2.5" in err and "'learning_rate' must be float" in err
    config = ROOT / "configs" / name / "tiny-cpu.yaml"
    parsed = parse_checked(_script_parser(name), ["--config", str(config), "--max_steps", "3"], name)
    assert parsed[-1].max_steps == 3  # the shipped config still parses, with a command-line override


def test_sandbox_configs_are_checked(tmp_path):
    from harness.sandbox import SandboxConfig

    bad = write(tmp_path, "memory_mb: lots\ncell_timeout_s: [1]\n")
    with pytest.raises(ValueError, match=r"field 'memory_mb' must be int, got str 'lots'.*field 'cell_timeout_s'"):
        SandboxConfig.from_yaml(bad)
    assert SandboxConfig.from_yaml(write(tmp_path, "memory_mb: 512\n")).memory_mb == 512
