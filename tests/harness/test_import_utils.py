import pytest

from harness import import_utils


def test_vllm_is_gated_without_importing_it():
    # vLLM is never installed on CPU machines; the check must answer without importing it.
    assert import_utils.is_vllm_available() is False


def test_require_names_the_extra_to_install():
    with pytest.raises(ImportError, match=r"\.\[vllm\]"):
        import_utils.require("vllm")


def test_require_passes_for_an_installed_package():
    import_utils.require("pandas")  # must not raise
    assert import_utils.is_available("pandas") is True
