"""Shared fixture of the RL tests: the tiny Qwen3 briefly SFT-trained (RL starts from SFT, as in the pipeline).

The random tiny model never ends a response (``<|im_end|>`` is one of 151,936 near-uniform ids), so every rollout of a
group scores the same and DAPO has nothing to learn. Eight SFT steps (configs/sft/tiny-cpu.yaml on the short smoke
splits, about 90 s) rank ``<|im_end|>`` among the first ids at the start of a turn; sampled at temperature 0.5,
rollouts then differ. Import the fixture into a test module to use it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str):
    """``scripts/<name>.py`` as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_script", REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def sft_tiny_dir(sft_short_dataset_dir, tiny_model_dir, tmp_path_factory) -> Path:
    from training.sft import run_sft

    out = tmp_path_factory.mktemp("rl-sft") / "sft"
    run_sft(*load_script("sft").make_parser().parse_args_and_config([
        "--config", str(REPO / "configs" / "sft" / "tiny-cpu.yaml"), "--model_name_or_path", str(tiny_model_dir),
        "--dataset_path", str(sft_short_dataset_dir), "--output_dir", str(out), "--max_length", "1024",
        "--max_train_samples", "64", "--disable_tqdm", "true",
    ]))  # fmt: skip
    return out
