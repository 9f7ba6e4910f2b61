"""Every file under configs/ loads into its dataclass, through the parser its command uses (no training, no model).

:data:`LOADERS` maps each folder of configs/ to the function that loads one of its files: the command's own parser
where there is one (``stateguard evaluate``, ``synthesize``, ``pipeline``, scripts/sft.py and
scripts/rl.py with ``TrlParser``), else the class's ``from_yaml``. A file in a folder with no loader fails the test
("no loader for configs/X"), so a new kind of config comes with its check.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config_cli import parse_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


@functools.cache
def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"configs_test_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _command(register: Callable[[argparse._SubParsersAction], None], *argv: str) -> tuple[Any, ...]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parse_config(parser.parse_args(list(argv)))


def load_eval(path: Path) -> list[Any]:
    from harness.evaluation.cli import register
    from harness.specs import parse_manager_specs, parse_suite_spec

    (config,) = _command(register, "evaluate", "--config", str(path))
    parse_suite_spec(config.suite)
    parse_manager_specs(config.managers)
    return [config]


def load_synthesis(path: Path) -> list[Any]:
    from synthesis.cli import register

    return list(_command(register, "synthesize", "--config", str(path), "--out", "unused"))


def load_pipeline(path: Path) -> list[Any]:
    from training.pipeline import register

    (config,) = _command(register, "pipeline", "--config", str(path))
    for name in (config.synthesis, config.sft, config.rl, config.accelerate_config):
        assert config.path(name).is_file(), f"{path}: {name} does not exist"
    return [config]


def _trl(name: str, path: Path) -> list[Any]:
    import torch

    from harness.yaml_config import parse_checked

    # bf16 configs are for GPUs; TrainingArguments refuses bf16 on a machine without one unless use_cpu is set
    cpu = [] if torch.cuda.is_available() else ["--use_cpu", "true"]
    return list(parse_checked(_script(name).make_parser(), ["--config", str(path), *cpu], f"scripts/{name}.py"))


def load_rewards(path: Path) -> list[Any]:
    from rewards.config import RewardConfig

    return [RewardConfig.from_yaml(path)]


def load_accelerate(path: Path) -> list[Any]:
    """accelerate's own reader: unknown keys are refused; a DeepSpeed file it names must exist."""
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(path))
    file = (config.deepspeed_config or {}).get("deepspeed_config_file")
    if file is not None:
        assert (ROOT / file).is_file(), f"{path}: deepspeed_config_file {file} does not exist"
    return [config]


def load_deepspeed(path: Path) -> list[Any]:
    """JSON; its ``zero_optimization`` through DeepSpeed's own model (unknown keys refused) when DeepSpeed is here."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and "zero_optimization" in data, f"{path}: no zero_optimization section"
    if importlib.util.find_spec("deepspeed") is None:
        return [data]
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    return [data, DeepSpeedZeroConfig(**data["zero_optimization"])]


def load_faults(path: Path) -> list[Any]:
    """A faults file of ``stateguard run --faults``: every line a fault on a turn of the built-in task it names."""
    from harness.tasks import load_task
    from harness.worker.faults import read_faults

    faults = read_faults(path)
    task = load_task(ROOT / "harness" / "builtin_tasks" / path.stem)  # configs/faults/<built-in task>.jsonl
    assert faults and {f.task_id for f in faults} == {task.id}, f"{path}: faults of another task than {task.id}"
    assert {f.turn_id for f in faults} <= set(task.load_answers()), f"{path}: a turn the task does not have"
    return faults


LOADERS: dict[str, Callable[[Path], list[Any]]] = {
    "faults": load_faults,
    "eval": load_eval,
    "synthesis": load_synthesis,
    "pipeline": load_pipeline,
    "sft": functools.partial(_trl, "sft"),
    "rl": functools.partial(_trl, "rl"),
    "rewards": load_rewards,
    "accelerate": load_accelerate,
    "accelerate/deepspeed": load_deepspeed,
}
"""Folder of configs/ (a sub-folder may have its own) -> the loader of its files."""

EXPECTED = {
    "eval": ["EvaluationConfig"],
    "synthesis": ["SynthesisConfig"],
    "pipeline": ["PipelineConfig"],
    "sft": ["ModelArguments", "DataArguments", "SFTConfig"],
    "rl": ["ModelArguments", "RLArguments", "GRPOConfig"],
    "rewards": ["RewardConfig"],
    "accelerate": ["ClusterConfig"],
    "faults": ["Fault", "Fault"],
}
"""The classes each folder's files load into."""


def loader_for(relative: Path) -> tuple[str, Callable[[Path], list[Any]]]:
    """The loader of ``configs/<relative>``: that of its deepest folder that has one."""
    folder = relative.parent.as_posix()
    while folder not in ("", "."):
        if folder in LOADERS:
            return folder, LOADERS[folder]
        folder = folder.rpartition("/")[0]
    where = relative.parent.as_posix() if relative.parent.as_posix() != "." else relative.as_posix()
    raise LookupError(
        f"no loader for configs/{where}: map the folder to the function that loads its files in LOADERS "
        "(tests/test_configs.py)"
    )


FILES = sorted(p.relative_to(CONFIGS) for p in CONFIGS.rglob("*") if p.is_file())


@pytest.mark.parametrize("relative", FILES, ids=str)
def test_every_config_file_loads_into_its_dataclass(relative: Path) -> None:
    try:
        folder, load = loader_for(relative)
    except LookupError as exc:
        pytest.fail(str(exc))
    loaded = load(CONFIGS / relative)
    if folder in EXPECTED:
        assert [type(x).__name__ for x in loaded] == EXPECTED[folder]


def test_a_file_in_a_new_folder_has_no_loader_and_fails():
    with pytest.raises(LookupError, match=r"^no loader for configs/serve: "):
        loader_for(Path("serve/vllm.yaml"))
    with pytest.raises(LookupError, match=r"^no loader for configs/notes.md"):
        loader_for(Path("notes.md"))
    assert loader_for(Path("accelerate/deepspeed/zero9.json"))[0] == "accelerate/deepspeed"


def test_every_loader_has_files():
    """A loader whose folder is gone is stale: remove it with the folder."""
    folders = {p.parent.as_posix() for p in FILES}
    assert set(LOADERS) <= folders, sorted(set(LOADERS) - folders)


def test_a_yaml_config_is_a_mapping_of_field_names():
    """YAML keys equal field names: every YAML file is one mapping with text keys."""
    for relative in FILES:
        if relative.suffix in (".yaml", ".yml"):
            data = yaml.safe_load((CONFIGS / relative).read_text(encoding="utf-8"))
            assert isinstance(data, dict) and all(isinstance(k, str) for k in data), relative
