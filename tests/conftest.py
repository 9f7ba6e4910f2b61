"""Session fixtures shared across the test folders: the Qwen3 tokenizer (``harness.tokenizer``) and its reference."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """Built once per machine (about 2-3 s) and cached under ~/.cache/stateguard (or $STATEGUARD_CACHE_DIR)."""
    from harness.tokenizer import build_qwen3_tokenizer

    return build_qwen3_tokenizer()


@pytest.fixture(scope="session")
def qwen3_tiktoken():
    """The reference encoding: tiktoken over the same ranks file, pattern and added tokens."""
    from harness.tokenizer import qwen3_tiktoken_encoding

    return qwen3_tiktoken_encoding()
