"""Session fixtures shared across the test folders: the Qwen3 tokenizer (``harness.tokenizer``) and its reference;
and trackio's folder for the session."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_TRACKIO_DIR: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Trackio writes a SQLite file per project under ``$TRACKIO_DIR``, read once when trackio is imported: the
    tests' runs go to a temporary folder (removed at the end), never to ~/.cache/huggingface/trackio."""
    if "TRACKIO_DIR" not in os.environ:
        _TRACKIO_DIR.append(tempfile.mkdtemp(prefix="stateguard-tests-trackio-"))
        os.environ["TRACKIO_DIR"] = _TRACKIO_DIR[0]


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _TRACKIO_DIR:
        shutil.rmtree(path, ignore_errors=True)


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
