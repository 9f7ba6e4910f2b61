"""The optional-dependency gate answers without importing the package, with or without it installed."""

import importlib.util
import sys

import pytest

from harness import import_utils


@pytest.fixture
def without_vllm(monkeypatch):
    """vLLM absent, whatever this machine has: find_spec answers None for it."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    import_utils.is_available.cache_clear()
    yield
    import_utils.is_available.cache_clear()


def test_vllm_is_gated_without_importing_it():
    imported = "vllm" in sys.modules
    assert import_utils.is_vllm_available() is (importlib.util.find_spec("vllm") is not None)
    assert ("vllm" in sys.modules) is imported  # the check itself imports nothing


def test_require_names_the_extra_to_install(without_vllm):
    assert import_utils.is_vllm_available() is False
    with pytest.raises(ImportError, match=r"\.\[vllm\]"):
        import_utils.require("vllm")


def test_require_passes_for_an_installed_package():
    import_utils.require("pandas")  # must not raise
    assert import_utils.is_available("pandas") is True
