"""configs/rl: every file parses through scripts/rl.py's parser into its dataclasses with the method's settings; the
cross-field checks name the fields and the fix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RL_CONFIGS = sorted((REPO / "configs" / "rl").glob("*.yaml"))


def _parser():
    spec = importlib.util.spec_from_file_location("rl_script", REPO / "scripts" / "rl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_parser()


def _parse(*args: str):
    return _parser().parse_args_and_config(list(args))


def test_the_rl_config_folder_holds_the_issue_configs():
    assert {"qwen3-8b.yaml", "tiny-cpu.yaml"} <= {p.name for p in RL_CONFIGS}


@pytest.mark.parametrize("path", RL_CONFIGS, ids=lambda p: p.name)
def test_rl_config_parses_and_passes_the_checks(path):
    import torch
    from trl import GRPOConfig

    from training.rl.trainer import RLArguments, check_config
    from training.rl.vllm_engine import vllm_settings
    from training.sft import ModelArguments

    extra = [] if torch.cuda.is_available() else ["--use_cpu", "true"]  # bf16 needs a GPU unless use_cpu
    model_args, rl_args, config = _parse("--config", str(path), *extra)
    assert isinstance(model_args, ModelArguments) and isinstance(rl_args, RLArguments)
    assert isinstance(config, GRPOConfig)
    check_config(rl_args, config)
    # DAPO everywhere: token-level loss, clip-higher, no KL
    assert (config.loss_type, config.epsilon, config.epsilon_high, config.beta) == ("dapo", 0.2, 0.28, 0.0)
    assert 0 < rl_args.overlong_buffer <= config.max_completion_length
    # Tracking: off in the checked-in configs (CI); trackio runs land in the stateguard project when switched on.
    assert config.report_to in ([], ["none"], "none") and config.project == "stateguard"
    if path.name == "tiny-cpu.yaml":
        assert model_args.model_name_or_path == "tiny" and config.use_cpu and not config.use_vllm
        assert (config.max_steps, config.num_generations, config.per_device_train_batch_size) == (2, 4, 8)
        assert rl_args.max_new_tokens * rl_args.max_responses == config.max_completion_length == 32
    if path.name == "qwen3-8b.yaml":
        assert config.num_generations == 8 and config.learning_rate == 5e-7
        rollouts = config.per_device_train_batch_size * config.gradient_accumulation_steps * 8  # 8 GPUs
        assert rollouts // config.num_generations == 64  # start points per step
        assert config.max_completion_length + 4096 == 40_960
        assert config.steps_per_generation == config.gradient_accumulation_steps  # one sampling round per step
        assert config.vllm_max_model_length == 40_960 and config.vllm_enable_sleep_mode
        assert vllm_settings(config) == {"use_vllm": True, "vllm_mode": "colocate", "gpu_memory_utilization": 0.6,
                                         "tensor_parallel_size": 1}  # fmt: skip
        assert config.bf16 and config.gradient_checkpointing
        assert (REPO / "configs" / "accelerate" / "zero3.yaml").is_file()


def test_cross_field_errors_name_the_fix():
    from training.rl.trainer import RLArguments, check_config

    tiny = str(REPO / "configs" / "rl" / "tiny-cpu.yaml")
    _, rl_args, config = _parse("--config", tiny, "--beta", "0.04")
    with pytest.raises(ValueError, match="beta=0.04: DAPO has no KL term"):
        check_config(rl_args, config)
    _, rl_args, config = _parse("--config", tiny)
    config.per_device_train_batch_size = 6  # one process's share; TRL checks only the global batch
    with pytest.raises(ValueError, match="= 6 must be a multiple of num_generations=4"):
        check_config(rl_args, config)
    _, rl_args, config = _parse("--config", tiny, "--overlong_buffer", "64")
    with pytest.raises(ValueError, match="overlong_buffer=64 exceeds max_completion_length=32"):
        check_config(rl_args, config)
    _, rl_args, config = _parse("--config", tiny, "--constrained_decoding", "true")
    check_config(rl_args, config)  # the transformers engine takes the grammar
    config.use_vllm = True
    with pytest.raises(ValueError, match="constrained_decoding samples under the action grammar.*set use_vllm false"):
        check_config(rl_args, config)
    with pytest.raises(ValueError, match="max_rounds=0 must be >= 1"):
        RLArguments(max_rounds=0)
    with pytest.raises(ValueError, match="oversample=0.5 must be >= 1"):
        RLArguments(oversample=0.5)
    with pytest.raises(ValueError, match="prompt_view='short': use one of full, bare"):
        RLArguments(prompt_view="short")
