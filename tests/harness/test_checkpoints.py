"""An adapter-only folder (a LoRA run's adapter_config.json, no model weights) is refused by every entry point that
loads a model folder, in one line naming the folder and the merge command: ``stateguard serve``, ``llm-hf:PATH``
(the spec and the in-process backend)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.checkpoints import is_adapter_only, refuse_adapter_only
from harness.llm import HFChatBackend
from harness.serving import register
from harness.specs import parse_manager_spec


@pytest.fixture
def adapter(tmp_path: Path) -> Path:
    """What a LoRA run saves: the adapter, the tokenizer's chat template; no config.json, no model weights."""
    folder = tmp_path / "sft-lora"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "base_model_name_or_path": "base"}')
    (folder / "adapter_model.safetensors").write_bytes(b"")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    return folder


def test_an_adapter_only_folder_is_told_from_a_model(adapter: Path, tmp_path: Path):
    assert is_adapter_only(adapter) and not is_adapter_only(tmp_path / "missing")
    (adapter / "model.safetensors").write_bytes(b"")  # a merged model next to its adapter: a model
    assert not is_adapter_only(adapter)
    refuse_adapter_only(adapter)
    (adapter / "model.safetensors").unlink()
    (adapter / "model.safetensors.index.json").write_text("{}")  # sharded weights
    assert not is_adapter_only(adapter)


def test_serve_and_llm_hf_refuse_an_adapter_only_folder(adapter: Path, capsys):
    fix = f"merge it into its base model first: stateguard merge --adapter {adapter} --out {adapter}-merged"
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--checkpoint", str(adapter), "--dry-run"])
    assert args.func(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"stateguard serve: --checkpoint {adapter} holds a LoRA adapter only (adapter_config.json")
    assert err.strip().endswith(fix)
    with pytest.raises(ValueError, match=f"^model {adapter} holds a LoRA adapter only") as error:
        HFChatBackend(str(adapter))  # before transformers loads anything
    assert str(error.value).endswith(fix)
    for spec in (f"llm-hf:{adapter}", f"hier:llm-hf:{adapter}"):
        with pytest.raises(ValueError, match=f"model folder {adapter} holds a LoRA adapter only") as error:
            parse_manager_spec(spec)
        assert fix in str(error.value) and "\n" not in str(error.value)
    assert parse_manager_spec(f"llm-hf:{adapter}", check_paths=False).model == str(adapter)
