"""Session fixtures: one tiny model and the SFT data (the Qwen3 tokenizer fixtures are in tests/conftest.py).

The SFT data is one smoke synthesis run (2 tasks, workers=1, about 10 s), shared by tests/training/test_sft*.py. Its
samples are 3.5k-30k tokens, mostly the system prompt and the tools block; a CPU step on such a sample takes tens of
seconds (the 151,936-row logits dominate). Training tests use a "short" copy of the splits (each sample cut to its
first user message and the assistant reply, no system prompt, no tools: 400-1,100 tokens) on the same trainer path.
"""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, qwen3_tokenizer) -> Path:
    from training.models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny-qwen3", seed=0)


@pytest.fixture(scope="session")
def sft_smoke_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from synthesis.config import SynthesisConfig
    from synthesis.driver import synthesize

    out = tmp_path_factory.mktemp("sft-synth")
    iso = "bwrap" if shutil.which("bwrap") else "none"
    config = SynthesisConfig(
        domains=["commerce", "energy"],
        tasks_per_domain=1,
        n_turns=[6, 6],
        max_faults_per_task=4,
        workers=1,
        isolation=iso,
        count_tokens=True,
        validation_fraction=0.5,
    )
    synthesize(config, out, progress=False)
    return out


@pytest.fixture(scope="session")
def sft_short_dataset_dir(sft_smoke_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke splits cut to (first user message, assistant reply); ``n_tokens`` 0 so the SFT code counts them."""
    from datasets import DatasetDict, load_from_disk

    def shorten(row):
        turns = [m for m in row["messages"] if m["role"] != "system"][:2]
        assert [m["role"] for m in turns] == ["user", "assistant"]
        return {"messages": turns, "tools": [], "n_tokens": 0}

    splits = load_from_disk(str(sft_smoke_dir / "dataset"))
    out = tmp_path_factory.mktemp("sft-short") / "dataset"
    DatasetDict({name: split.map(shorten) for name, split in splits.items()}).save_to_disk(str(out))
    return out


@pytest.fixture(scope="session")
def pool(sft_smoke_dir):
    """The smoke synthesis as a replay pool (commerce and energy, up to four faults a task)."""
    from envs import ReplayPool

    return ReplayPool(sft_smoke_dir)


@pytest.fixture(scope="module")
def env(pool):
    """The real ManagerEnv over :func:`pool` (replay worker), one per test module."""
    from envs import ManagerEnv

    env = ManagerEnv(pool=pool, worker="replay", isolation="bwrap" if shutil.which("bwrap") else "none")
    yield env
    env.close()


@pytest.fixture
def fake_vllm(monkeypatch):
    """A stand-in ``vllm`` module (``SamplingParams`` keeps its keyword arguments, ``TokensPrompt`` its ids), and the
    vLLM engine's install check passed: what :mod:`training.rl.vllm_engine` imports, without vLLM."""
    from training.rl import vllm_engine

    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    module.SamplingParams = SamplingParams
    module.TokensPrompt = lambda prompt_token_ids: SimpleNamespace(prompt_token_ids=prompt_token_ids)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(vllm_engine, "require", lambda name: None)
    return module
