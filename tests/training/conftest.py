"""Session fixtures: the Qwen3 tokenizer (from the on-disk cache after the first build) and one tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """Built once per machine (about 2-3 s) and cached under ~/.cache/stateguard (or $STATEGUARD_CACHE_DIR)."""
    from training.tokenizer import build_qwen3_tokenizer

    return build_qwen3_tokenizer()


@pytest.fixture(scope="session")
def qwen3_tiktoken():
    """The reference encoding: tiktoken over the same ranks file, pattern and added tokens."""
    from training.tokenizer import qwen3_tiktoken_encoding

    return qwen3_tiktoken_encoding()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, qwen3_tokenizer) -> Path:
    from training.models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny-qwen3", seed=0)
